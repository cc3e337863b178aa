/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's conversion kernels (convert_pieces.h): casts, one
 * launch for every cast piece of a batch; block-scaled e4m3 (QUANTIZE and
 * SCALES), one launch over every block job, after a first launch that
 * folds the amax of split blocks into their keys. Plain copies are
 * pack.cu's and pay nothing for these.
 *
 * Teams take runs of items or jobs as in pack.cu (a warp each when there
 * are enough to fill the GPU, else a block). A unit is loaded as one
 * vector of up to 16 bytes, converted in registers by convert_pieces.h's
 * functions (dtypes and unit sizes are template constants, so their
 * branches fold), and stored as one vector. A block job reduces its
 * block's amax across the team (shuffles; shared memory across a block's
 * warps), then quantizes the part of the block it owns: those values are
 * read a second time right after the first, mostly from L1 and L2. A
 * piece with a SCALES copy folded in (convert_pieces.h) writes each
 * block's scale from the same job. */
#include <cuda_runtime.h>

#include <stdint.h>

#include "convert_pieces.h"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kBlocksPerSm = 8;
constexpr int kWarpsPerSm = 16;

constexpr int kF32 = RS_DTYPE_F32, kBf16 = RS_DTYPE_BF16,
              kF16 = RS_DTYPE_F16;

__host__ __device__ constexpr int size_of(int dtype) {
  return dtype == kF32 ? 4 : 2;
}

template <int kTeam> __device__ __forceinline__ uint32_t team_rank() {
  return threadIdx.x % kTeam;
}

/* kBytes at a kBytes-aligned address, as convert_pieces.h's words. */
template <int kBytes> struct Vec;
template <> struct Vec<16> {
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t a) {
    uint4 v = __ldg(reinterpret_cast<const uint4 *>(a));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
  static __device__ __forceinline__ void store(uint64_t a, const uint32_t *w) {
    __stwb(reinterpret_cast<uint4 *>(a), make_uint4(w[0], w[1], w[2], w[3]));
  }
};
template <> struct Vec<8> {
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t a) {
    uint2 v = __ldg(reinterpret_cast<const uint2 *>(a));
    w[0] = v.x, w[1] = v.y;
  }
  static __device__ __forceinline__ void store(uint64_t a, const uint32_t *w) {
    __stwb(reinterpret_cast<uint2 *>(a), make_uint2(w[0], w[1]));
  }
};
template <> struct Vec<4> {
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t a) {
    w[0] = __ldg(reinterpret_cast<const uint32_t *>(a));
  }
  static __device__ __forceinline__ void store(uint64_t a, const uint32_t *w) {
    __stwb(reinterpret_cast<uint32_t *>(a), w[0]);
  }
};
template <> struct Vec<2> {
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t a) {
    w[0] = __ldg(reinterpret_cast<const uint16_t *>(a));
  }
  static __device__ __forceinline__ void store(uint64_t a, const uint32_t *w) {
    __stwb(reinterpret_cast<uint16_t *>(a), (uint16_t)w[0]);
  }
};
template <> struct Vec<1> {
  static __device__ __forceinline__ void store(uint64_t a, const uint32_t *w) {
    __stwb(reinterpret_cast<uint8_t *>(a), (uint8_t)w[0]);
  }
};

/* Units of kV elements of kDtype at element index i. */
template <int kDtype, int kV> struct Units {
  static constexpr int kSize = size_of(kDtype);
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t i) {
    Vec<kSize * kV>::load(w, i * kSize);
  }
};

/* Items [begin, end) of `total` for this team: consecutive runs. */
template <int kTeam>
__device__ __forceinline__ void team_share(int64_t total, int64_t *begin,
                                           int64_t *end) {
  constexpr int kTeams = kThreads / kTeam;
  int64_t teams = (int64_t)gridDim.x * kTeams;
  int64_t team = (int64_t)blockIdx.x * kTeams + threadIdx.x / kTeam;
  int64_t per = total / teams, extra = total % teams;
  *begin = team * per + (team < extra ? team : extra);
  *end = *begin + per + (team < extra ? 1 : 0);
}

/* ---- casts ------------------------------------------------------------ */

template <int kSrc, int kDst, int kV> struct Cast {
  static __device__ __forceinline__ void load(uint32_t *w, uint64_t src) {
    Units<kSrc, kV>::load(w, src);
  }
  static __device__ __forceinline__ void store(uint64_t dst,
                                               const uint32_t *w) {
    uint32_t out[4];
    rsi_cast_unit(kSrc, kDst, kV, w, out);
    Vec<size_of(kDst) * kV>::store(dst * size_of(kDst), out);
  }
};

/* A straight item: walks with no division, kUnroll loads in flight. */
template <class C, int kTeam>
__device__ __forceinline__ void cast_straight(const rsi_item *it) {
  uint32_t k = team_rank<kTeam>();
  if (k >= it->units) return;
  rsi_walk w;
  rsi_walk_init(it, kTeam, &w);
  uint32_t col;
  uint64_t dst, src;
  rsi_walk_start(it, k, &col, &dst, &src);
#pragma unroll 1
  while (k < it->units) {
    uint32_t v[kUnroll][4];
    uint64_t to[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; j++) {
      if (k + (uint32_t)(j * kTeam) < it->units) {
        C::load(v[j], src);
        to[j] = dst;
        rsi_walk_next(it, &w, &col, &dst, &src);
      }
    }
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < it->units) C::store(to[j], v[j]);
    k += kTeam * kUnroll;
  }
}

template <class C, int kTeam>
__device__ __forceinline__ void cast_item(const rsi_piece *p, int64_t item) {
  rsi_item it;
  rsi_piece_item(p, item, &it);
  if (it.straight_rows == it.rows) {
    cast_straight<C, kTeam>(&it);
  } else if (rsi_item_by_segments(p, &it, kTeam)) {
#pragma unroll 1
    for (uint32_t from = 0; from < it.rows;) {
      rsi_item seg;
      rsi_item_segment(p, &it, from, &seg);
      cast_straight<C, kTeam>(&seg);
      from += seg.rows;
    }
  } else {
#pragma unroll 1
    for (uint32_t k = team_rank<kTeam>();; k += kTeam) {
      uint64_t dst, src;
      if (!rsi_item_unit(p, &it, k, &dst, &src)) break;
      uint32_t v[4];
      C::load(v, src);
      C::store(dst, v);
    }
  }
}

/* The unit sizes a pair is built for: its largest, and 1. */
template <int kSrc, int kDst, int kTeam>
__device__ __forceinline__ void cast_pair(const rsi_piece *p, int64_t item) {
  constexpr int kMax = 16 / (size_of(kSrc) > size_of(kDst) ? size_of(kSrc)
                                                           : size_of(kDst));
  if (p->unit == kMax)
    cast_item<Cast<kSrc, kDst, kMax>, kTeam>(p, item);
  else
    cast_item<Cast<kSrc, kDst, 1>, kTeam>(p, item);
}

template <int kTeam>
__global__ void __launch_bounds__(kThreads)
    rsi_cast_kernel(const rsi_piece *__restrict__ table, int64_t npieces,
                    int64_t items) {
  int64_t begin, end;
  team_share<kTeam>(items, &begin, &end);
  if (begin >= end) return;
  int64_t at = rsi_piece_find(table, npieces, begin);
  int64_t next_first = table[at].first_item + table[at].items;
#pragma unroll 1
  for (int64_t i = begin; i < end; i++) {
    if (i == next_first) {
      at++;
      next_first += table[at].items;
    }
    const rsi_piece *p = table + at;
    switch (p->cast) {
      case RSI_CAST_CODE(kF32, kBf16):
        cast_pair<kF32, kBf16, kTeam>(p, i);
        break;
      case RSI_CAST_CODE(kF32, kF16):
        cast_pair<kF32, kF16, kTeam>(p, i);
        break;
      case RSI_CAST_CODE(kBf16, kF32):
        cast_pair<kBf16, kF32, kTeam>(p, i);
        break;
      case RSI_CAST_CODE(kF16, kF32):
        cast_pair<kF16, kF32, kTeam>(p, i);
        break;
      case RSI_CAST_CODE(kBf16, kF16):
        cast_pair<kBf16, kF16, kTeam>(p, i);
        break;
      default: /* the builder makes no other pair */
        cast_pair<kF16, kBf16, kTeam>(p, i);
        break;
    }
  }
}

/* ---- block-scaled e4m3 -------------------------------------------------- */

/* A thread's share of the amax of the values in r. */
template <int kSrc, int kV, int kTeam>
__device__ __forceinline__ uint32_t thread_amax(const rsi_rect *r) {
  uint32_t key = 0, k = team_rank<kTeam>();
  if (k >= r->units) return 0;
  rsi_rect_walk w;
  rsi_rect_start(r, k, kTeam, &w);
#pragma unroll 1
  while (k < r->units) {
    uint32_t v[kUnroll][4];
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < r->units) {
        Units<kSrc, kV>::load(v[j], w.src);
        rsi_rect_next(r, &w);
      }
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < r->units)
        key = rsi_amax_unit(kSrc, kV, v[j], key);
    k += kTeam * kUnroll;
  }
  return key;
}

__device__ __forceinline__ uint32_t warp_max(uint32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    uint32_t u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

/* The max over the team; every thread of the team calls it. */
template <int kTeam> __device__ __forceinline__ uint32_t team_max(uint32_t v) {
  v = warp_max(v);
  if constexpr (kTeam == 32) {
    return v;
  } else {
    __shared__ uint32_t part[kThreads / 32];
    __syncthreads(); /* the last job's reads of part are over */
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0;
#pragma unroll
    for (int i = 0; i < kThreads / 32; i++) v = part[i] > v ? part[i] : v;
    return v;
  }
}

template <int kSrc, int kV, int kTeam>
__device__ __forceinline__ void quantize_rect(const rsi_rect *r,
                                              const rsi_qscale *q) {
  uint32_t k = team_rank<kTeam>();
  if (k >= r->units) return;
  rsi_rect_walk w;
  rsi_rect_start(r, k, kTeam, &w);
#pragma unroll 1
  while (k < r->units) {
    uint32_t v[kUnroll][4];
    uint64_t to[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < r->units) {
        Units<kSrc, kV>::load(v[j], w.src);
        to[j] = w.dst;
        rsi_rect_next(r, &w);
      }
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < r->units) {
        uint32_t out[4];
        rsi_quant_unit(kSrc, kV, v[j], q, out);
        Vec<kV>::store(to[j], out);
      }
    k += kTeam * kUnroll;
  }
}

/* One job of the main pass: everything in it is the same across the team,
 * so every thread takes the same branches. */
template <int kSrc, int kV, int kTeam>
__device__ __forceinline__ void block_job(const rsi_bpiece *p, int64_t job,
                                          const uint32_t *keys) {
  rsi_bjob j;
  rsi_bjob_at(p, job, &j);
  if (!rsi_bjob_writes(p, &j)) return;
  if (p->op == RSI_COPY_SCALES && p->split && j.chunk != 0) return;
  uint32_t key;
  if (p->split) {
    key = keys[j.key];
  } else {
    rsi_rect r;
    rsi_bjob_values(p, &j, &r);
    key = team_max<kTeam>(thread_amax<kSrc, kV, kTeam>(&r));
  }
  float scale = rsi_key_scale(kSrc, key, p->ue8m0 != 0);
  if (p->op == RSI_COPY_QUANTIZE) {
    if (p->scales && team_rank<kTeam>() == 0)
      *reinterpret_cast<float *>(j.scale_dst * 4) = scale;
    rsi_qscale q = rsi_qscale_of(scale);
#pragma unroll 1
    for (int part = 0; part < 3; part++) {
      rsi_rect r;
      if (rsi_bjob_part(p, &j, part, &r))
        quantize_rect<kSrc, kV, kTeam>(&r, &q);
    }
  } else if (team_rank<kTeam>() == 0) {
    *reinterpret_cast<float *>(j.dst_l * 4) = scale;
  }
}

template <int kSrc, int kTeam>
__device__ __forceinline__ void block_src(const rsi_bpiece *p, int64_t job,
                                          const uint32_t *keys) {
  constexpr int kMax = 16 / size_of(kSrc);
  if (p->unit == kMax)
    block_job<kSrc, kMax, kTeam>(p, job, keys);
  else
    block_job<kSrc, 1, kTeam>(p, job, keys);
}

template <int kTeam>
__global__ void __launch_bounds__(kThreads)
    rsi_blocks_kernel(const rsi_bpiece *__restrict__ table, int64_t npieces,
                      int64_t jobs, const uint32_t *keys) {
  int64_t begin, end;
  team_share<kTeam>(jobs, &begin, &end);
  if (begin >= end) return;
  int64_t at = rsi_bpiece_find(table, npieces, begin);
  int64_t next_first = table[at].first_job + table[at].jobs;
#pragma unroll 1
  for (int64_t i = begin; i < end; i++) {
    if (i == next_first) {
      at++;
      next_first += table[at].jobs;
    }
    const rsi_bpiece *p = table + at;
    switch (p->src_dtype) {
      case kF32: block_src<kF32, kTeam>(p, i, keys); break;
      case kBf16: block_src<kBf16, kTeam>(p, i, keys); break;
      default: block_src<kF16, kTeam>(p, i, keys); break;
    }
  }
}

/* The first pass: each chunk of a split block folds its amax into the
 * block's key, one atomic max a warp. */
template <int kSrc, int kV>
__device__ __forceinline__ void split_job(const rsi_bpiece *p, int64_t job,
                                          uint32_t *keys) {
  rsi_bjob j;
  rsi_bjob_at(p, job, &j);
  rsi_rect r;
  rsi_bjob_values(p, &j, &r);
  if (!r.units) return;
  uint32_t key = warp_max(thread_amax<kSrc, kV, kThreads>(&r));
  if (threadIdx.x % 32 == 0 && key) atomicMax(keys + j.key, key);
}

template <int kSrc>
__device__ __forceinline__ void split_src(const rsi_bpiece *p, int64_t job,
                                          uint32_t *keys) {
  constexpr int kMax = 16 / size_of(kSrc);
  if (p->unit == kMax)
    split_job<kSrc, kMax>(p, job, keys);
  else
    split_job<kSrc, 1>(p, job, keys);
}

__global__ void __launch_bounds__(kThreads)
    rsi_split_kernel(const rsi_bpiece *__restrict__ table, int64_t npieces,
                     int64_t jobs, uint32_t *keys) {
  int64_t begin, end;
  team_share<kThreads>(jobs, &begin, &end);
  if (begin >= end) return;
  int64_t at = rsi_bpiece_find(table, npieces, begin);
  int64_t next_first = table[at].first_job + table[at].jobs;
#pragma unroll 1
  for (int64_t i = begin; i < end; i++) {
    if (i == next_first) {
      at++;
      next_first += table[at].jobs;
    }
    const rsi_bpiece *p = table + at;
    switch (p->src_dtype) {
      case kF32: split_src<kF32>(p, i, keys); break;
      case kBf16: split_src<kBf16>(p, i, keys); break;
      default: split_src<kF16>(p, i, keys); break;
    }
  }
}

int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
          cudaSuccess) {
    (void)cudaGetLastError(); /* ours: fall back to an H100's count */
    sms = 132;
  }
  return sms;
}

} // namespace

extern "C" int rsi_cuda_cast_launch(const rsi_piece *table_dev,
                                    int64_t npieces, int64_t items,
                                    void *stream) {
  if (items <= 0 || npieces <= 0) return (int)cudaSuccess;
  int sms = sm_count();
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  int64_t cap = (int64_t)sms * kBlocksPerSm;
  if (items >= (int64_t)sms * kWarpsPerSm) {
    int64_t want = (items + kThreads / 32 - 1) / (kThreads / 32);
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    rsi_cast_kernel<32><<<blocks, kThreads, 0, st>>>(table_dev, npieces,
                                                     items);
  } else {
    unsigned blocks = (unsigned)(items < cap ? items : cap);
    rsi_cast_kernel<kThreads><<<blocks, kThreads, 0, st>>>(table_dev,
                                                           npieces, items);
  }
  return (int)cudaGetLastError();
}

extern "C" int rsi_cuda_blocks_launch(const rsi_bpiece *table_dev,
                                      int64_t npieces, int64_t jobs,
                                      int64_t nsplit, int64_t split_jobs,
                                      uint32_t *keys_dev, void *stream) {
  if (jobs <= 0 || npieces <= 0) return (int)cudaSuccess;
  int sms = sm_count();
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  int64_t cap = (int64_t)sms * kBlocksPerSm;
  if (split_jobs > 0 && nsplit > 0) {
    unsigned blocks = (unsigned)(split_jobs < cap ? split_jobs : cap);
    rsi_split_kernel<<<blocks, kThreads, 0, st>>>(table_dev, nsplit,
                                                  split_jobs, keys_dev);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return (int)e;
  }
  if (jobs >= (int64_t)sms * kWarpsPerSm) {
    int64_t want = (jobs + kThreads / 32 - 1) / (kThreads / 32);
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    rsi_blocks_kernel<32><<<blocks, kThreads, 0, st>>>(table_dev, npieces,
                                                       jobs, keys_dev);
  } else {
    unsigned blocks = (unsigned)(jobs < cap ? jobs : cap);
    rsi_blocks_kernel<kThreads><<<blocks, kThreads, 0, st>>>(
        table_dev, npieces, jobs, keys_dev);
  }
  return (int)cudaGetLastError();
}
