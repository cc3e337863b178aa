/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's kernels on a real GPU (core/transport/nccl/
 * pack.cu and pieces.h; convert_pack.cu and convert_pieces.h): (a)
 * correctness, random strided boxes (ranks 1..8, element sizes 1..16,
 * sub-ranges, padded and permuted strides, misaligned bases, dense sides,
 * alone and in batches) copied by the kernel into a poisoned device buffer
 * and compared byte for byte, slack included, with core/copy/copy.c's
 * rsi_copy_range on the host; (b) conversions the same way: casts (bf16
 * -> f32 and f32 -> bf16 most, every pair of f32, bf16, f16) against
 * core/copy/convert.h's casts, and block-scaled e4m3 (bf16 most; values and
 * scales of random boxes of random tensors, 128 x 128 blocks and small
 * ones, blocks split into chunks; in a third of the tensors the scale box
 * is the twin of the value box, which the engine folds into its piece)
 * against rsi_quantize_blocks of the whole
 * tensor; an e4m3 NaN of either sign counts as equal (the GPU's NaN from
 * x / NaN has no sign to keep); (c) bandwidth of pack and unpack for
 * batches of contiguous pieces and for strided shards, and of casts and
 * quantization of a large tensor, timed with CUDA events (median of 20
 * after 3 warm-ups) beside cudaMemcpyAsync device-to-device of the same
 * bytes in the same run. Exit status 1 on any mismatch or CUDA error.
 *
 * Build (from the repository root; no CMake, no Criterion): the C files
 * with cc, then the CUDA ones and the link with nvcc:
 *   mkdir -p build/gpu
 *   for f in transport/nccl/pieces transport/nccl/convert_pieces copy/copy
 *            copy/convert base/dtype base/grow base/error base/utf8; do
 *     cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I core -I capi/include
 *       -c core/$f.c -o build/gpu/$(basename $f).o
 *   done
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I core -I capi/include -I tests/common
 *     bench/gpu/pack_check.cu core/transport/nccl/pack.cu
 *     core/transport/nccl/convert_pack.cu build/gpu/pieces.o
 *     build/gpu/convert_pieces.o build/gpu/copy.o build/gpu/convert.o
 *     build/gpu/dtype.o build/gpu/grow.o build/gpu/error.o build/gpu/utf8.o
 *     -o build/gpu/pack_check
 * (the cc and nvcc commands are one line each). Device code is plain
 * sm_90 (H100, H200); use -arch=sm_100 for Blackwell.
 * Run: build/gpu/pack_check [--quick] [--correctness-only]
 *   [--bandwidth-only]   (--quick: 40 correctness rounds, not 232; 16
 *   conversion rounds, not 64) */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "copy/convert.h"
#include "copy/copy.h"
}
#include "th_util.h"
#include "transport/nccl/convert_pieces.h"
#include "transport/nccl/pieces.h"

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    cudaError_t e_ = (expr);                                               \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,        \
              cudaGetErrorString(e_));                                     \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() { return th_rand(&s); }
  int64_t range(int64_t lo, int64_t hi) { /* uniform in [lo, hi] */
    return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
  }
};

/* Tables go to the device as the engine will send them. */
struct DeviceTable {
  rsi_pieces host = {};
  rsi_piece *dev = nullptr;
  int64_t dev_cap = 0;

  void build(const std::vector<rsi_copy> &copies) {
    rsi_err err = {};
    if (rsi_pieces_build(copies.data(), (int64_t)copies.size(), &host,
                         &err) != RS_OK) {
      fprintf(stderr, "rsi_pieces_build: %s\n", err.msg);
      exit(1);
    }
    if (host.n > dev_cap) {
      CUDA_OK(cudaFree(dev));
      CUDA_OK(cudaMalloc(&dev, (size_t)host.n * sizeof(rsi_piece)));
      dev_cap = host.n;
    }
    if (host.n)
      CUDA_OK(cudaMemcpy(dev, host.v, (size_t)host.n * sizeof(rsi_piece),
                         cudaMemcpyHostToDevice));
  }
  void launch(cudaStream_t stream) const {
    int rc = rsi_cuda_copy_launch(dev, host.n, host.items, stream);
    if (rc != 0) {
      fprintf(stderr, "rsi_cuda_copy_launch: %s\n",
              cudaGetErrorString((cudaError_t)rc));
      exit(1);
    }
  }
  ~DeviceTable() {
    rsi_pieces_free(&host);
    cudaFree(dev);
  }
};

/* ------------------------------------------------------------ correctness */

constexpr size_t kSlack = 256; /* poisoned bytes either side of a buffer */

/* A host buffer and its device twin, same size, the box at the same
 * offset in both. */
struct Twin {
  std::vector<unsigned char> host;
  unsigned char *dev = nullptr;
  size_t at = 0, bytes = 0;

  Twin() = default;
  Twin(const Twin &) = delete;
  Twin &operator=(const Twin &) = delete;
  void make(size_t n, int misalign) {
    bytes = n;
    at = kSlack + (size_t)misalign;
    host.assign(n + 2 * kSlack + 16, 0);
    CUDA_OK(cudaMalloc(&dev, host.size()));
  }
  ~Twin() { cudaFree(dev); }
};

struct Case {
  rsi_copy c = {};
  Twin src, ref; /* ref.dev: what the kernel writes */
  int64_t copied = 0;
};

void random_extent(Rng &r, int ndim, int64_t max_vol, int64_t *ext) {
  int64_t vol = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t room = max_vol / vol;
    int64_t top = room < 64 ? room : 64;
    if (r.range(0, 4) == 0) top = room;
    ext[d] = r.range(1, top > 1 ? top : 1);
    if (r.range(0, 6) == 0) ext[d] = 1;
    vol *= ext[d];
  }
  for (int i = ndim - 1; i > 0; i--) std::swap(ext[i], ext[r.range(0, i)]);
}

void random_strides(Rng &r, int ndim, const int64_t *ext, int64_t *st) {
  int perm[RS_MAX_DIMS];
  for (int d = 0; d < ndim; d++) perm[d] = d;
  if (r.range(0, 2) == 0)
    for (int i = ndim - 1; i > 0; i--) std::swap(perm[i], perm[r.range(0, i)]);
  int64_t s = r.range(0, 3) == 0 ? r.range(2, 4) : 1, dense = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    int d = perm[i];
    st[d] = s;
    int64_t pad = r.range(0, 2) == 0 ? r.range(1, 5) : 0;
    dense *= ext[d];
    if (s * (ext[d] + pad) > 4 * dense) pad = 0;
    s *= ext[d] + pad;
  }
}

const int kEsizes[] = {1, 2, 4, 8, 2, 4, 16, 3, 12};

void make_case(Rng &r, Case &t, int64_t max_vol) {
  rsi_copy &c = t.c;
  c.ndim = (int)(r.range(0, 9) == 0 ? r.range(7, 8) : r.range(1, 6));
  c.esize = kEsizes[r.range(0, sizeof kEsizes / sizeof *kEsizes - 1)];
  random_extent(r, c.ndim, max_vol, c.extent);
  int64_t vol = th_volume(c.ndim, c.extent);
  if (r.range(0, 3) == 0) {
    c.lo = 0;
    c.hi = vol;
  } else {
    c.lo = r.range(0, vol);
    c.hi = r.range(c.lo, vol);
  }
  c.dense_dst = r.range(0, 2) == 0;
  c.dense_src = !c.dense_dst && r.range(0, 2) == 0;
  random_strides(r, c.ndim, c.extent, c.dst_strides);
  random_strides(r, c.ndim, c.extent, c.src_strides);
  if (r.range(0, 2) == 0) th_dense_strides(c.ndim, c.extent, c.dst_strides);
  if (r.range(0, 2) == 0) th_dense_strides(c.ndim, c.extent, c.src_strides);
  size_t es = (size_t)c.esize;
  int64_t dense = (c.hi - c.lo) * c.esize;
  int64_t db = c.dense_dst ? dense
                           : th_span_bytes(c.ndim, c.extent, c.dst_strides, es);
  int64_t sb = c.dense_src ? dense
                           : th_span_bytes(c.ndim, c.extent, c.src_strides, es);
  t.copied = dense;
  t.src.make((size_t)sb, r.range(0, 1) ? 0 : (int)r.range(0, 15));
  t.ref.make((size_t)db, r.range(0, 1) ? 0 : (int)r.range(0, 15));
  for (auto &b : t.src.host) {
    unsigned char v = (unsigned char)r.next();
    b = v == TH_POISON ? TH_NOT_POISON : v;
  }
  CUDA_OK(cudaMemcpy(t.src.dev, t.src.host.data(), t.src.host.size(),
                     cudaMemcpyHostToDevice));
  std::fill(t.ref.host.begin(), t.ref.host.end(), (unsigned char)TH_POISON);
  CUDA_OK(cudaMemset(t.ref.dev, TH_POISON, t.ref.host.size()));
  rsi_copy_range(c.ndim, c.extent, es, (char *)t.ref.host.data() + t.ref.at,
                 c.dense_dst ? nullptr : c.dst_strides,
                 (const char *)t.src.host.data() + t.src.at,
                 c.dense_src ? nullptr : c.src_strides, c.lo, c.hi);
  /* the kernel's copy: device addresses */
  c.dst = (char *)t.ref.dev + t.ref.at;
  c.src = (const char *)t.src.dev + t.src.at;
}

/* The kernel's bytes equal the reference's, slack included. */
bool check_case(const Case &t, const char *where) {
  std::vector<unsigned char> got(t.ref.host.size());
  CUDA_OK(cudaMemcpy(got.data(), t.ref.dev, got.size(),
                     cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < got.size(); i++)
    if (got[i] != t.ref.host[i]) {
      const rsi_copy &c = t.c;
      fprintf(stderr,
              "FAIL %s: byte %td from base: want %#x got %#x; ndim=%d "
              "esize=%d lo=%" PRId64 " hi=%" PRId64 " dense_dst=%d "
              "dense_src=%d\n",
              where, (ptrdiff_t)i - (ptrdiff_t)t.ref.at, t.ref.host[i],
              got[i], c.ndim, c.esize, c.lo, c.hi, (int)c.dense_dst,
              (int)c.dense_src);
      return false;
    }
  return true;
}

int correctness(uint64_t seed, int rounds) {
  int pass = 0, fail = 0;
  int64_t bytes = 0, pieces = 0;
  DeviceTable table;
  for (int round = 0; round < rounds; round++) {
    Rng r{th_mix(seed ^ (uint64_t)round * TH_GOLDEN)};
    /* every 8th round a batch of copies in one launch */
    int n = round % 8 == 7 ? (int)r.range(20, 60) : 1;
    std::vector<Case> cases((size_t)n);
    std::vector<rsi_copy> copies;
    for (auto &t : cases) {
      int64_t kind = r.range(0, 9);
      int64_t max_vol = kind < 6 ? 4096 : kind < 9 ? (1 << 18) : (1 << 22);
      if (n > 1 && max_vol > (1 << 18)) max_vol = 1 << 18;
      make_case(r, t, max_vol);
      copies.push_back(t.c);
    }
    table.build(copies);
    pieces += table.host.n;
    table.launch(0);
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) {
      char where[96];
      snprintf(where, sizeof where, "seed=%#" PRIx64 " round=%d copy=%d",
               seed, round, i);
      if (check_case(cases[(size_t)i], where))
        pass++;
      else
        fail++;
      bytes += cases[(size_t)i].copied;
    }
  }
  printf("correctness: %d PASS, %d FAIL (%" PRId64 " pieces, %.1f MB "
         "copied, seed %#" PRIx64 ")\n",
         pass, fail, pieces, (double)bytes / 1e6, seed);
  return fail;
}

/* ------------------------------------------------------------ conversions */

/* A batch's tables in one device buffer as the engine lays them out
 * (engine_cuda.c): plain, cast and block pieces, then the zeroed keys. */
struct DeviceBatch {
  rsi_pieces host = {};
  char *dev = nullptr;
  size_t cap = 0, cast_at = 0, blk_at = 0, keys_at = 0, bytes = 0;

  static size_t align(size_t x) { return (x + 255) / 256 * 256; }
  void build(const std::vector<rsi_copy> &copies,
             int64_t job_units = RSI_BLOCK_JOB_UNITS) {
    rsi_err err = {};
    if (rsi_pieces_build(copies.data(), (int64_t)copies.size(), &host,
                         &err) != RS_OK ||
        rsi_convert_build_cut(copies.data(), (int64_t)copies.size(), &host,
                              job_units, &err) != RS_OK) {
      fprintf(stderr, "building the tables: %s\n", err.msg);
      exit(1);
    }
    const rsi_conv_tables *c = host.conv;
    cast_at = align((size_t)host.n * sizeof(rsi_piece));
    blk_at = cast_at + (c ? align((size_t)c->cast.n * sizeof(rsi_piece)) : 0);
    keys_at = blk_at + (c ? align((size_t)c->nblk * sizeof(rsi_bpiece)) : 0);
    bytes = keys_at + (c ? (size_t)c->keys * sizeof(uint32_t) : 0);
    std::vector<char> image(bytes ? bytes : 1, 0);
    if (host.n)
      memcpy(image.data(), host.v, (size_t)host.n * sizeof(rsi_piece));
    if (c && c->cast.n)
      memcpy(image.data() + cast_at, c->cast.v,
             (size_t)c->cast.n * sizeof(rsi_piece));
    if (c && c->nblk)
      memcpy(image.data() + blk_at, c->blk,
             (size_t)c->nblk * sizeof(rsi_bpiece));
    if (bytes > cap) {
      CUDA_OK(cudaFree(dev));
      CUDA_OK(cudaMalloc(&dev, bytes));
      cap = bytes;
    }
    if (bytes)
      CUDA_OK(cudaMemcpy(dev, image.data(), bytes, cudaMemcpyHostToDevice));
  }
  void launch(cudaStream_t stream) const {
    const rsi_conv_tables *c = host.conv;
    int rc = rsi_cuda_copy_launch((const rsi_piece *)dev, host.n, host.items,
                                  stream);
    if (rc == 0 && c)
      rc = rsi_cuda_cast_launch((const rsi_piece *)(dev + cast_at),
                                c->cast.n, c->cast.items, stream);
    if (rc == 0 && c)
      rc = rsi_cuda_blocks_launch(
          (const rsi_bpiece *)(dev + blk_at), c->nblk, c->jobs, c->nsplit,
          c->split_jobs, c->keys ? (uint32_t *)(dev + keys_at) : nullptr,
          stream);
    if (rc != 0) {
      fprintf(stderr, "conversion launch: %s\n",
              cudaGetErrorString((cudaError_t)rc));
      exit(1);
    }
  }
  ~DeviceBatch() {
    rsi_pieces_free(&host);
    cudaFree(dev);
  }
};

const int kFloats[] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};

int conv_size(int dtype) { return rsi_conv_size(dtype); }

/* Random bits of one element: mostly normal values of a moderate range,
 * some zeros, subnormals and any normals, and with `specials` infinities
 * and NaNs of either sign now and then. */
uint32_t rand_f32(Rng &r, bool specials) {
  uint32_t sign = (uint32_t)(r.next() & 1) << 31;
  uint32_t man = (uint32_t)r.next() & 0x7fffffu;
  int64_t k = r.range(0, 99);
  if (specials && k < 2) return sign | 0x7f800000u | (k ? man | 0x10000u : 0);
  if (k < 5) return sign;
  if (k < 10) return sign | man;
  if (k < 15) return sign | (uint32_t)r.range(1, 254) << 23 | man;
  return sign | (uint32_t)r.range(100, 150) << 23 | man;
}

void fill_floats(Rng &r, int dtype, unsigned char *p, size_t n,
                 bool specials) {
  for (size_t i = 0; i < n; i++) {
    uint32_t v = rand_f32(r, specials);
    if (dtype == RS_DTYPE_F32) {
      memcpy(p + 4 * i, &v, 4);
    } else {
      uint16_t h = (uint16_t)(v >> 16);
      if (dtype == RS_DTYPE_F16) { /* f32 -> f16 keeps specials */
        float f;
        memcpy(&f, &v, 4);
        rsi_convert_cast_fn(RS_DTYPE_F16, RS_DTYPE_F32)(&h, &f, 1);
      }
      memcpy(p + 2 * i, &h, 2);
    }
  }
}

/* The element of a side that box index idx (range position lin) is at. */
int64_t side_at(const rsi_copy &c, bool dense, const int64_t *st,
                const int64_t *idx, int64_t lin) {
  if (dense) return lin - c.lo;
  int64_t at = 0;
  for (int d = 0; d < c.ndim; d++) at += idx[d] * st[d];
  return at;
}

/* A conversion case: source and destination twins; ref.host holds what
 * the host functions make, ref.dev what the kernels write. */
struct ConvCase {
  rsi_copy c = {};
  Twin src, ref;
  int dst_size = 1;
  int64_t off[4] = {}; /* block cases: the box's offset */
};

/* The destination of c's box: dense, contiguous or padded, on 16 bytes
 * or a few elements off; poisoned on both sides. */
void make_dst(Rng &r, ConvCase &t, int size, bool friendly) {
  rsi_copy &c = t.c;
  t.dst_size = size;
  c.dense_dst = r.range(0, 2) == 0;
  random_strides(r, c.ndim, c.extent, c.dst_strides);
  if (friendly || r.range(0, 2) == 0)
    th_dense_strides(c.ndim, c.extent, c.dst_strides);
  int64_t bytes = c.dense_dst ? (c.hi - c.lo) * size
                              : th_span_bytes(c.ndim, c.extent,
                                              c.dst_strides, (size_t)size);
  t.ref.make((size_t)bytes, friendly ? 0 : (int)r.range(0, 16 / size - 1) *
                                               size);
  std::fill(t.ref.host.begin(), t.ref.host.end(), (unsigned char)TH_POISON);
  CUDA_OK(cudaMemset(t.ref.dev, TH_POISON, t.ref.host.size()));
  c.dst = (char *)t.ref.dev + t.ref.at;
}

void make_cast(Rng &r, ConvCase &t, int src, int dst, int64_t max_vol) {
  rsi_copy &c = t.c;
  c.op = RSI_COPY_CAST;
  c.src_dtype = src;
  c.dst_dtype = dst;
  c.ndim = (int)r.range(1, 5);
  random_extent(r, c.ndim, max_vol, c.extent);
  bool friendly = r.range(0, 1);
  if (friendly) c.extent[c.ndim - 1] = (c.extent[c.ndim - 1] + 7) / 8 * 8;
  int64_t vol = th_volume(c.ndim, c.extent);
  c.lo = r.range(0, 2) == 0 ? 0 : r.range(0, vol);
  c.hi = r.range(0, 2) == 0 ? vol : r.range(c.lo, vol);
  if (friendly) {
    c.lo = c.lo / 8 * 8;
    c.hi = c.hi / 8 * 8 > c.lo ? c.hi / 8 * 8 : c.hi;
  }
  int ss = conv_size(src), ds = conv_size(dst);
  make_dst(r, t, ds, friendly);
  c.dense_src = !c.dense_dst && r.range(0, 3) == 0;
  random_strides(r, c.ndim, c.extent, c.src_strides);
  if (friendly || r.range(0, 2) == 0)
    th_dense_strides(c.ndim, c.extent, c.src_strides);
  int64_t sb = c.dense_src ? (c.hi - c.lo) * ss
                           : th_span_bytes(c.ndim, c.extent, c.src_strides,
                                           (size_t)ss);
  t.src.make((size_t)sb, friendly ? 0 : (int)r.range(0, 16 / ss - 1) * ss);
  fill_floats(r, src, t.src.host.data(), t.src.host.size() / ss, true);
  CUDA_OK(cudaMemcpy(t.src.dev, t.src.host.data(), t.src.host.size(),
                     cudaMemcpyHostToDevice));
  c.src = (const char *)t.src.dev + t.src.at;
  rsi_cast_fn cast = rsi_convert_cast_fn((rs_dtype)dst, (rs_dtype)src);
  int64_t idx[RS_MAX_DIMS] = {0}, lin = 0;
  unsigned char *out = t.ref.host.data() + t.ref.at;
  const unsigned char *in = t.src.host.data() + t.src.at;
  if (vol > 0) do {
      if (lin >= c.lo && lin < c.hi)
        cast(out + side_at(c, c.dense_dst, c.dst_strides, idx, lin) * ds,
             in + side_at(c, c.dense_src, c.src_strides, idx, lin) * ss, 1);
      lin++;
    } while (th_next(c.ndim, c.extent, idx));
}

/* A block-scaled tensor in device memory (strided storage) with its
 * quantization by rsi_quantize_blocks on the host. */
struct QTensor {
  int dtype = RS_DTYPE_BF16, ndim = 2;
  int64_t shape[4] = {}, strides[4] = {}, sshape[4] = {}, b0 = 128, b1 = 128;
  bool ue8m0 = false, friendly = true;
  Twin store;
  std::vector<uint8_t> q;
  std::vector<float> scales;

  void make(Rng &r, bool big) {
    dtype = r.range(0, 3) == 0 ? kFloats[r.range(0, 2)] : RS_DTYPE_BF16;
    ndim = (int)r.range(1, 3);
    int n = ndim;
    static const int64_t kBlock[] = {1, 2, 4, 8, 16, 32, 128, 128, 5};
    for (int d = 0; d + 2 < n; d++) shape[d] = r.range(1, 3);
    if (n >= 2) shape[n - 2] = big ? r.range(200, 600) : r.range(1, 60);
    shape[n - 1] = big ? r.range(200, 800) : r.range(1, n == 1 ? 500 : 150);
    b0 = big ? 128 : kBlock[r.range(0, 8)];
    b1 = big ? 128 : kBlock[r.range(0, 8)];
    friendly = r.range(0, 2) != 0;
    if (friendly) {
      shape[n - 1] = (shape[n - 1] + 7) / 8 * 8;
      b1 = b1 % 8 ? 8 * b1 : b1;
    }
    ue8m0 = r.range(0, 1);
    random_strides(r, n, shape, strides);
    if (friendly || r.range(0, 1)) th_dense_strides(n, shape, strides);
    int size = conv_size(dtype);
    int64_t span = th_span_bytes(n, shape, strides, (size_t)size);
    store.make((size_t)span,
               friendly ? 0 : (int)r.range(0, 16 / size - 1) * size);
    fill_floats(r, dtype, store.host.data(), store.host.size() / size,
                r.range(0, 3) == 0);
    CUDA_OK(cudaMemcpy(store.dev, store.host.data(), store.host.size(),
                       cudaMemcpyHostToDevice));
    int64_t count = th_volume(n, shape);
    std::vector<unsigned char> dense((size_t)(count * size));
    int64_t idx[4] = {0}, lin = 0;
    do {
      int64_t at = 0;
      for (int d = 0; d < n; d++) at += idx[d] * strides[d];
      memcpy(dense.data() + lin++ * size,
             store.host.data() + store.at + at * size, (size_t)size);
    } while (th_next(n, shape, idx));
    for (int d = 0; d < n; d++) sshape[d] = shape[d];
    if (n >= 2) sshape[n - 2] = (shape[n - 2] + b0 - 1) / b0;
    sshape[n - 1] = (shape[n - 1] + b1 - 1) / b1;
    q.resize((size_t)count);
    scales.resize((size_t)th_volume(n, sshape));
    rsi_err err = {};
    if (rsi_quantize_blocks((rs_dtype)dtype, n, shape, dense.data(), q.data(),
                            scales.data(), b0, b1, ue8m0, &err) != RS_OK) {
      fprintf(stderr, "rsi_quantize_blocks: %s\n", err.msg);
      exit(1);
    }
  }
};

/* QUANTIZE (or SCALES) of a random box of the values (or scales) of q;
 * `whole`: the box's whole range; `twin`: the SCALES copy of exactly the
 * blocks that QUANTIZE case twin touches, whole range (the pair the engine
 * folds into one piece). */
void make_block_case(Rng &r, ConvCase &t, const QTensor &q, bool scales,
                     bool whole = false, const ConvCase *twin = nullptr) {
  rsi_copy &c = t.c;
  int n = q.ndim, size = conv_size(q.dtype);
  const int64_t *shape = scales ? q.sshape : q.shape;
  int64_t off[4] = {0};
  c.ndim = n;
  for (int d = 0; d < n; d++) {
    off[d] = r.range(0, shape[d] - 1);
    c.extent[d] = r.range(1, shape[d] - off[d]);
    if (r.range(0, 2) == 0) {
      off[d] = 0;
      c.extent[d] = shape[d];
    }
  }
  if (twin) {
    for (int d = 0; d < n; d++) {
      off[d] = twin->off[d];
      c.extent[d] = twin->c.extent[d];
    }
    for (int d = n >= 2 ? n - 2 : 0; d < n; d++) {
      int64_t blk = d == n - 1 ? q.b1 : q.b0;
      off[d] = twin->off[d] / blk;
      c.extent[d] = (twin->off[d] + twin->c.extent[d] - 1) / blk - off[d] + 1;
    }
  }
  bool friendly = q.friendly && !scales && r.range(0, 3) != 0;
  if (friendly) {
    off[n - 1] = off[n - 1] / 8 * 8;
    c.extent[n - 1] = (c.extent[n - 1] + 7) / 8 * 8;
    if (off[n - 1] + c.extent[n - 1] > shape[n - 1])
      c.extent[n - 1] = shape[n - 1] - off[n - 1];
  }
  for (int d = 0; d < n; d++) t.off[d] = off[d];
  int64_t vol = th_volume(n, c.extent);
  c.lo = r.range(0, 1) ? 0 : r.range(0, vol - 1);
  c.hi = r.range(0, 1) ? vol : r.range(c.lo + 1, vol);
  if (friendly) {
    c.lo = c.lo / 8 * 8;
    c.hi = c.hi / 8 * 8 > c.lo ? c.hi / 8 * 8 : c.hi;
  }
  if (whole || twin) {
    c.lo = 0;
    c.hi = vol;
  }
  c.op = scales ? RSI_COPY_SCALES : RSI_COPY_QUANTIZE;
  c.src_dtype = q.dtype;
  c.dst_dtype = scales ? RS_DTYPE_F32 : RS_DTYPE_F8_E4M3;
  c.blocks.rows = n >= 2 ? q.shape[n - 2] : 1;
  c.blocks.cols = q.shape[n - 1];
  c.blocks.b0 = q.b0;
  c.blocks.b1 = q.b1;
  c.blocks.row0 = n >= 2 ? off[n - 2] : 0;
  c.blocks.col0 = off[n - 1];
  c.blocks.ue8m0 = q.ue8m0;
  int64_t at = 0;
  for (int d = 0; d < n; d++) {
    int64_t unit = !scales || d + 2 < n ? 1 : d == n - 1 ? q.b1 : q.b0;
    at += off[d] * unit * q.strides[d];
    c.src_strides[d] = q.strides[d];
  }
  c.src = (const char *)q.store.dev + q.store.at + at * size;
  int ds = scales ? 4 : 1;
  make_dst(r, t, ds, friendly || (q.friendly && r.range(0, 1)));
  int64_t dense[4], idx[RS_MAX_DIMS] = {0}, lin = 0;
  th_dense_strides(n, shape, dense);
  unsigned char *out = t.ref.host.data() + t.ref.at;
  do {
    if (lin >= c.lo && lin < c.hi) {
      int64_t g = 0;
      for (int d = 0; d < n; d++) g += (off[d] + idx[d]) * dense[d];
      const void *want = scales ? (const void *)&q.scales[(size_t)g]
                                : (const void *)&q.q[(size_t)g];
      memcpy(out + side_at(c, c.dense_dst, c.dst_strides, idx, lin) * ds,
             want, (size_t)ds);
    }
    lin++;
  } while (th_next(n, c.extent, idx));
}

/* The kernels' bytes equal the reference's, slack included; e4m3 NaNs
 * (0x7f, 0xff) of either sign count as equal (*nan_signs counts them). */
bool check_conv(const ConvCase &t, const char *where, int64_t *nan_signs) {
  std::vector<unsigned char> got(t.ref.host.size());
  CUDA_OK(cudaMemcpy(got.data(), t.ref.dev, got.size(),
                     cudaMemcpyDeviceToHost));
  bool e4m3 = t.c.dst_dtype == RS_DTYPE_F8_E4M3;
  for (size_t i = 0; i < got.size(); i++) {
    unsigned char want = t.ref.host[i];
    if (got[i] == want) continue;
    bool inside = i >= t.ref.at && i < t.ref.at + t.ref.bytes;
    if (e4m3 && inside && (got[i] & 0x7f) == 0x7f && (want & 0x7f) == 0x7f) {
      (*nan_signs)++;
      continue;
    }
    const rsi_copy &c = t.c;
    fprintf(stderr,
            "FAIL %s: byte %td from base: want %#x got %#x; op=%d %d->%d "
            "ndim=%d lo=%" PRId64 " hi=%" PRId64 " dense_dst=%d "
            "dense_src=%d blocks %" PRId64 "x%" PRId64 " of %" PRId64
            "x%" PRId64 " from (%" PRId64 ",%" PRId64 ")\n",
            where, (ptrdiff_t)i - (ptrdiff_t)t.ref.at, want, got[i], c.op,
            c.src_dtype, c.dst_dtype, c.ndim, c.lo, c.hi, (int)c.dense_dst,
            (int)c.dense_src, c.blocks.b0, c.blocks.b1, c.blocks.rows,
            c.blocks.cols, c.blocks.row0, c.blocks.col0);
    return false;
  }
  return true;
}

int conversions(uint64_t seed, int rounds) {
  int pass = 0, fail = 0;
  int64_t nan_signs = 0, casts = 0, quants = 0, scale_boxes = 0, split = 0;
  int64_t folded = 0;
  DeviceBatch batch;
  for (int round = 0; round < rounds; round++) {
    Rng r{th_mix(seed ^ 0xC0417ull ^ (uint64_t)round * TH_GOLDEN)};
    std::vector<ConvCase> cases(40);
    std::vector<QTensor> tensors(4);
    std::vector<rsi_copy> copies;
    size_t k = 0;
    for (int i = 0; i < 32; i++, k++) { /* bf16 <-> f32 most */
      int src = RS_DTYPE_BF16, dst = RS_DTYPE_F32;
      int64_t pick = r.range(0, 5);
      if (pick == 1) std::swap(src, dst);
      if (pick >= 4) {
        src = kFloats[r.range(0, 2)];
        dst = kFloats[(r.range(1, 2) + (src == RS_DTYPE_F32   ? 0
                                        : src == RS_DTYPE_BF16 ? 1
                                                               : 2)) %
                      3];
      }
      make_cast(r, cases[k], src, dst,
                r.range(0, 7) == 0 ? (1 << 20) : 4096);
      copies.push_back(cases[k].c);
      casts++;
    }
    for (size_t i = 0; i < tensors.size(); i++) {
      tensors[i].make(r, i == 0 && round % 2 == 0);
      bool twins = r.range(0, 2) == 0;
      for (int s = 0; s < 2; s++, k++) {
        make_block_case(r, cases[k], tensors[i], s == 1, twins,
                        twins && s == 1 ? &cases[k - 1] : nullptr);
        copies.push_back(cases[k].c);
        (s ? scale_boxes : quants)++;
      }
    }
    /* every 4th round splits blocks down to a few units a job */
    batch.build(copies, round % 4 == 3 ? r.range(1, 64) : RSI_BLOCK_JOB_UNITS);
    if (batch.host.conv) {
      split += batch.host.conv->nsplit;
      folded += batch.host.conv->folded;
    }
    batch.launch(0);
    CUDA_OK(cudaDeviceSynchronize());
    for (size_t i = 0; i < k; i++) {
      char where[96];
      snprintf(where, sizeof where, "seed=%#" PRIx64 " round=%d copy=%zu",
               seed, round, i);
      if (check_conv(cases[i], where, &nan_signs))
        pass++;
      else
        fail++;
    }
  }
  printf("conversion correctness: %d PASS, %d FAIL (%" PRId64 " casts, %"
         PRId64 " quantized boxes, %" PRId64 " scale boxes, %" PRId64
         " split block pieces, %" PRId64 " scale boxes folded into their "
         "values' pieces; %" PRId64 " e4m3 NaNs of the other sign; seed "
         "%#" PRIx64 ")\n",
         pass, fail, casts, quants, scale_boxes, split, folded, nan_signs,
         seed);
  return fail;
}

/* -------------------------------------------------------------- bandwidth */

constexpr int kWarmup = 3, kReps = 20;

template <typename F> double median_ms(F &&enqueue) {
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < kWarmup; i++) enqueue();
  std::vector<float> ms;
  for (int i = 0; i < kReps; i++) {
    CUDA_OK(cudaEventRecord(a));
    enqueue();
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaEventDestroy(a));
  CUDA_OK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/* The plainest SM copy of `bytes` (a multiple of 16): the ceiling a
 * kernel-driven copy can hope for, measured beside ours. */
__global__ void plain_copy(const uint4 *__restrict__ src,
                           uint4 *__restrict__ dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = src[i];
}

/* One side of a copy as a box in a buffer: extent, strides (elements). */
struct Box {
  int ndim;
  int64_t ext[4], strides[4];
};

/* `count` copies of box (esize bytes), copy i at strided_base + i *
 * strided_step bytes on the strided side and packed one after another on
 * the dense side. pack: strided -> dense; else dense -> strided. */
std::vector<rsi_copy> batch(const Box &box, int esize, int count,
                            char *strided_base, int64_t strided_step,
                            char *dense_base, bool pack) {
  std::vector<rsi_copy> v;
  int64_t vol = th_volume(box.ndim, box.ext);
  for (int i = 0; i < count; i++) {
    rsi_copy c = {};
    c.ndim = box.ndim;
    c.esize = esize;
    c.lo = 0;
    c.hi = vol;
    for (int d = 0; d < box.ndim; d++) {
      c.extent[d] = box.ext[d];
      c.dst_strides[d] = c.src_strides[d] = box.strides[d];
    }
    char *strided = strided_base + (int64_t)i * strided_step;
    char *dense = dense_base + (int64_t)i * vol * esize;
    if (pack) {
      c.src = strided;
      c.dst = dense;
      c.dense_dst = true;
    } else {
      c.src = dense;
      c.dst = strided;
      c.dense_src = true;
    }
    v.push_back(c);
  }
  return v;
}

struct BwCase {
  const char *name;
  Box box;
  int esize, count;
  int64_t strided_step; /* bytes between copies on the strided side */
  bool target;          /* pieces >= 64 KiB: kernel >= 0.7x memcpy */
};

/* Conversions of one 8192 x 7168 tensor (dense to dense) as rows of the
 * bandwidth table: casts bf16 <-> f32, and bf16 -> e4m3 with 128 x 128
 * blocks (values and scales in one batch). */
void convert_rows(int sms) {
  const int64_t rows = 8192, cols = 7168, count = rows * cols;
  char *src = nullptr, *dst = nullptr, *other = nullptr;
  CUDA_OK(cudaMalloc(&src, (size_t)count * 4));
  CUDA_OK(cudaMalloc(&dst, (size_t)count * 4 + (size_t)count / 16));
  CUDA_OK(cudaMalloc(&other, (size_t)count * 4));
  {
    /* finite bf16 of a moderate range; read as f32, pairs of them are too */
    Rng r{0x5EEDull};
    std::vector<unsigned char> host((size_t)count * 4);
    fill_floats(r, RS_DTYPE_BF16, host.data(), (size_t)count * 2, false);
    CUDA_OK(cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  /* weight-like bf16: magnitudes 2^-12..2^-1, one in 4096 an outlier up
   * to 2^3; the values above span every exponent, so most quotients of
   * a block are tiny (the case that once took the division's slow path) */
  char *weights = nullptr;
  CUDA_OK(cudaMalloc(&weights, (size_t)count * 2));
  {
    Rng r{0x3E1617ull};
    std::vector<uint16_t> host((size_t)count);
    for (uint16_t &h : host) {
      uint32_t sign = (uint32_t)(r.next() & 1) << 15;
      uint32_t exp = (uint32_t)r.range(127 - 12, 127 - 1);
      if (r.range(0, 4095) == 0) exp = (uint32_t)r.range(127, 127 + 3);
      h = (uint16_t)(sign | exp << 7 | (uint32_t)(r.next() & 0x7f));
    }
    CUDA_OK(cudaMemcpy(weights, host.data(), host.size() * 2,
                       cudaMemcpyHostToDevice));
  }
  struct Row {
    const char *name;
    int op, src_dtype, dst_dtype;
    bool weights;
  };
  const Row rows_[] = {
      {"cast bf16->f32", RSI_COPY_CAST, RS_DTYPE_BF16, RS_DTYPE_F32, false},
      {"cast f32->bf16", RSI_COPY_CAST, RS_DTYPE_F32, RS_DTYPE_BF16, false},
      {"quant bf16->e4m3 128^2", RSI_COPY_QUANTIZE, RS_DTYPE_BF16,
       RS_DTYPE_F8_E4M3, true},
      {"quant, any exponent", RSI_COPY_QUANTIZE, RS_DTYPE_BF16,
       RS_DTYPE_F8_E4M3, false},
  };
  DeviceBatch batch;
  for (const Row &row : rows_) {
    rsi_copy c = {};
    c.ndim = 2;
    c.op = row.op;
    c.src_dtype = row.src_dtype;
    c.dst_dtype = row.dst_dtype;
    c.extent[0] = rows;
    c.extent[1] = cols;
    th_dense_strides(2, c.extent, c.src_strides);
    th_dense_strides(2, c.extent, c.dst_strides);
    c.src = row.weights ? weights : src;
    c.dst = dst;
    c.hi = count;
    c.blocks = rsi_copy_blocks{rows, cols, 128, 128, 0, 0, false};
    std::vector<rsi_copy> v{c};
    if (row.op == RSI_COPY_QUANTIZE) { /* the scales, after the values */
      rsi_copy s = c;
      s.op = RSI_COPY_SCALES;
      s.dst_dtype = RS_DTYPE_F32;
      s.extent[0] = rows / 128;
      s.extent[1] = cols / 128;
      th_dense_strides(2, s.extent, s.dst_strides);
      s.dst = dst + count;
      s.hi = s.extent[0] * s.extent[1];
      v.push_back(s);
    }
    auto t0 = std::chrono::steady_clock::now();
    batch.build(v);
    auto t1 = std::chrono::steady_clock::now();
    double t_build = std::chrono::duration<double, std::micro>(t1 - t0).count();
    int64_t bytes = count * rsi_conv_size(row.src_dtype);
    double t_conv = median_ms([&] { batch.launch(0); });
    double t_copy = median_ms([&] {
      CUDA_OK(cudaMemcpyAsync(other, src, (size_t)bytes,
                              cudaMemcpyDeviceToDevice, 0));
    });
    double t_plain = median_ms([&] {
      plain_copy<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(src),
                                   reinterpret_cast<uint4 *>(other),
                                   (size_t)bytes / 16);
    });
    const rsi_conv_tables *ct = batch.host.conv;
    int64_t pieces = ct ? ct->cast.n + ct->nblk : 0;
    int64_t items = ct ? ct->cast.items + ct->jobs : 0;
    auto gbs = [&](double ms) { return (double)bytes / (ms * 1e6); };
    printf("%-22s %10" PRId64 " %7" PRId64 " %8" PRId64
           " %8.0f %8s %8.0f %8.0f %6.2f %6s %8.0f\n",
           row.name, bytes, pieces, items, gbs(t_conv), "-", gbs(t_copy),
           gbs(t_plain), t_copy / t_conv, "-", t_build);
  }
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(weights));
  CUDA_OK(cudaFree(dst));
  CUDA_OK(cudaFree(other));
}

int bandwidth(bool *below_target) {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t MiB = 1 << 20;
  /* 64 KiB / 1 MiB / 16 MiB / 256 MiB contiguous pieces (bf16), 256 MiB
   * in all; a column shard (8 KiB of each 16 KiB row); a 3-D shard whose
   * outer dims do not merge; small pieces and an element-strided transpose
   * for reference. */
  const BwCase cases[] = {
      {"contig 64KiB x4096", {1, {32768}, {1}}, 2, 4096, 64 * 1024, true},
      {"contig 1MiB x256", {1, {512 * 1024}, {1}}, 2, 256, MiB, true},
      {"contig 16MiB x16", {1, {8 * MiB}, {1}}, 2, 16, 16 * MiB, true},
      {"contig 256MiB x1", {1, {128 * MiB}, {1}}, 2, 1, 256 * MiB, true},
      {"cols 8K/16K rows", {2, {32768, 4096}, {8192, 1}}, 2, 1, 0, true},
      {"3d [256,96/128,1K/2K]", {3, {256, 96, 1024}, {128 * 2048, 2048, 1}},
       2, 1, 0, true},
      {"3d [256,100/128,1K/2K]", {3, {256, 100, 1024}, {128 * 2048, 2048, 1}},
       2, 1, 0, true},
      {"contig 4KiB x16384", {1, {2048}, {1}}, 2, 16384, 4096, false},
      {"cols 256B/512B rows", {2, {262144, 128}, {256, 1}}, 2, 1, 0, false},
      {"transpose 4Kx4K bf16", {2, {4096, 4096}, {1, 4096}}, 2, 1, 0, false},
  };
  size_t strided_bytes = 512 * (size_t)MiB, dense_bytes = 256 * (size_t)MiB;
  char *strided = nullptr, *dense = nullptr, *other = nullptr;
  CUDA_OK(cudaMalloc(&strided, strided_bytes));
  CUDA_OK(cudaMalloc(&dense, dense_bytes));
  CUDA_OK(cudaMalloc(&other, dense_bytes));
  CUDA_OK(cudaMemset(strided, 1, strided_bytes));
  CUDA_OK(cudaMemset(dense, 2, dense_bytes));

  printf("\n%-22s %10s %7s %8s %8s %8s %8s %8s %6s %6s %8s\n", "case",
         "bytes", "pieces", "items", "pack", "unpack", "memcpy", "plain",
         "pack", "unpack", "build");
  printf("%-22s %10s %7s %8s %8s %8s %8s %8s %6s %6s %8s\n", "", "", "", "",
         "GB/s", "GB/s", "GB/s", "GB/s", "ratio", "ratio", "us");
  DeviceTable table;
  for (const BwCase &bc : cases) {
    int64_t vol = th_volume(bc.box.ndim, bc.box.ext);
    int64_t bytes = vol * bc.esize * bc.count;
    double t_pack = 0, t_unpack = 0, t_build = 0;
    int64_t npieces = 0, items = 0;
    for (int pack = 1; pack >= 0; pack--) {
      std::vector<rsi_copy> v = batch(bc.box, bc.esize, bc.count, strided,
                                      bc.strided_step, dense, pack != 0);
      auto t0 = std::chrono::steady_clock::now();
      table.build(v); /* timed: build and send, as the engine does */
      auto t1 = std::chrono::steady_clock::now();
      t_build = std::chrono::duration<double, std::micro>(t1 - t0).count();
      npieces = table.host.n;
      items = table.host.items;
      double ms = median_ms([&] { table.launch(0); });
      (pack ? t_pack : t_unpack) = ms;
    }
    double t_copy = median_ms([&] {
      CUDA_OK(cudaMemcpyAsync(other, dense, (size_t)bytes,
                              cudaMemcpyDeviceToDevice, 0));
    });
    double t_plain = median_ms([&] {
      plain_copy<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(dense),
                                   reinterpret_cast<uint4 *>(other),
                                   (size_t)bytes / 16);
    });
    auto gbs = [&](double ms) { return (double)bytes / (ms * 1e6); };
    double rp = t_copy / t_pack, ru = t_copy / t_unpack;
    printf("%-22s %10" PRId64 " %7" PRId64 " %8" PRId64
           " %8.0f %8.0f %8.0f %8.0f %6.2f %6.2f %8.0f%s\n",
           bc.name, bytes, npieces, items, gbs(t_pack), gbs(t_unpack),
           gbs(t_copy), gbs(t_plain), rp, ru, t_build,
           bc.target && (rp < 0.7 || ru < 0.7) ? "  < 0.7 target" : "");
    if (bc.target && (rp < 0.7 || ru < 0.7)) *below_target = true;
  }
  CUDA_OK(cudaFree(strided));
  CUDA_OK(cudaFree(dense));
  CUDA_OK(cudaFree(other));
  convert_rows(sms);
  printf("GB/s: bytes copied (each read once and written once) / time; "
         "ratio: against memcpy; plain: a grid-stride uint4 copy kernel of "
         "the same bytes; build: rsi_pieces_build + table upload, host\n");
  printf("conversion rows: bytes are source bytes; `pack`: the conversion "
         "(for quant, values and scales in one batch: both launches); "
         "memcpy, plain: copies of the source bytes\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  bool quick = false, bw_only = false, check_only = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    if (!strcmp(argv[i], "--bandwidth-only")) bw_only = true;
    if (!strcmp(argv[i], "--correctness-only")) check_only = true;
  }
  int dev = 0;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  int runtime = 0, driver = 0;
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  CUDA_OK(cudaDriverGetVersion(&driver));
  printf("pack_check: %s, %d SMs, sm_%d%d, runtime %d, driver %d, nvcc "
         "%d.%d, piece %zu bytes, item %d units\n",
         prop.name, prop.multiProcessorCount, prop.major, prop.minor, runtime,
         driver, __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__,
         sizeof(rsi_piece), RSI_PIECE_ITEM_UNITS);
  int fail = 0;
  if (!bw_only) {
    /* launching nothing must be harmless */
    if (rsi_cuda_copy_launch(nullptr, 0, 0, nullptr) != 0) fail++;
    fail += correctness(0xC0FFEEull, quick ? 40 : 232);
    fail += conversions(0xC0FFEEull, quick ? 16 : 64);
  }
  bool below = false;
  if (!check_only) bandwidth(&below);
  CUDA_OK(cudaDeviceSynchronize());
  printf("%s%s\n", fail ? "FAIL" : "PASS",
         below ? " (bandwidth below the 0.7x target somewhere)" : "");
  return fail ? 1 : 0;
}
