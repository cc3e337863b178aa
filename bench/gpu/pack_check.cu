/* The CUDA copy engine's kernel on a real GPU (core/transport/nccl/pack.cu
 * and pieces.h): (a) correctness, random strided boxes (ranks 1..8, element
 * sizes 1..16, sub-ranges, padded and permuted strides, misaligned bases,
 * dense sides, alone and in batches) copied by the kernel into a poisoned
 * device buffer and compared byte for byte, slack included, with
 * core/copy.c's rsi_copy_range on the host; (b) bandwidth of pack and
 * unpack for batches of contiguous pieces and for strided shards, timed
 * with CUDA events (median of 20 after 3 warm-ups) beside
 * cudaMemcpyAsync device-to-device of the same bytes in the same run.
 * Exit status 1 on any mismatch or CUDA error.
 *
 * Build (from the repository root; no CMake, no Criterion): the C files
 * with cc, then the CUDA ones and the link with nvcc:
 *   mkdir -p build/gpu
 *   for f in pieces copy grow error utf8; do
 *     src=core/$f.c; [ $f = pieces ] && src=core/transport/nccl/pieces.c
 *     cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I core -I capi/include
 *       -c $src -o build/gpu/$f.o
 *   done
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I core -I capi/include -I tests/common
 *     bench/gpu/pack_check.cu core/transport/nccl/pack.cu
 *     build/gpu/pieces.o build/gpu/copy.o build/gpu/grow.o
 *     build/gpu/error.o build/gpu/utf8.o -o build/gpu/pack_check
 * (the cc and nvcc commands are one line each). Device code is plain
 * sm_90 (H100, H200); use -arch=sm_100 for Blackwell.
 * Run: build/gpu/pack_check [--quick] [--correctness-only]
 *   [--bandwidth-only]   (--quick: 40 correctness rounds, not 232) */
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
#include "copy.h"
}
#include "rt_util.h"
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
  uint64_t next() { return rt_rand(&s); }
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
  int64_t vol = rt_volume(c.ndim, c.extent);
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
  if (r.range(0, 2) == 0) rt_dense_strides(c.ndim, c.extent, c.dst_strides);
  if (r.range(0, 2) == 0) rt_dense_strides(c.ndim, c.extent, c.src_strides);
  size_t es = (size_t)c.esize;
  int64_t dense = (c.hi - c.lo) * c.esize;
  int64_t db = c.dense_dst ? dense
                           : rt_span_bytes(c.ndim, c.extent, c.dst_strides, es);
  int64_t sb = c.dense_src ? dense
                           : rt_span_bytes(c.ndim, c.extent, c.src_strides, es);
  t.copied = dense;
  t.src.make((size_t)sb, r.range(0, 1) ? 0 : (int)r.range(0, 15));
  t.ref.make((size_t)db, r.range(0, 1) ? 0 : (int)r.range(0, 15));
  for (auto &b : t.src.host) {
    unsigned char v = (unsigned char)r.next();
    b = v == RT_POISON ? RT_NOT_POISON : v;
  }
  CUDA_OK(cudaMemcpy(t.src.dev, t.src.host.data(), t.src.host.size(),
                     cudaMemcpyHostToDevice));
  std::fill(t.ref.host.begin(), t.ref.host.end(), (unsigned char)RT_POISON);
  CUDA_OK(cudaMemset(t.ref.dev, RT_POISON, t.ref.host.size()));
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
    Rng r{rt_mix(seed ^ (uint64_t)round * RT_GOLDEN)};
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
  int64_t vol = rt_volume(box.ndim, box.ext);
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
    int64_t vol = rt_volume(bc.box.ndim, bc.box.ext);
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
  printf("GB/s: bytes copied (each read once and written once) / time; "
         "ratio: against memcpy; plain: a grid-stride uint4 copy kernel of "
         "the same bytes; build: rsi_pieces_build + table upload, host\n");
  CUDA_OK(cudaFree(strided));
  CUDA_OK(cudaFree(dense));
  CUDA_OK(cudaFree(other));
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
  }
  bool below = false;
  if (!check_only) bandwidth(&below);
  CUDA_OK(cudaDeviceSynchronize());
  printf("%s%s\n", fail ? "FAIL" : "PASS",
         below ? " (bandwidth below the 0.7x target somewhere)" : "");
  return fail ? 1 : 0;
}
