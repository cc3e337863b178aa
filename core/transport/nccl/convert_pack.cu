/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's conversion kernels (convert_pieces.h): casts, one
 * launch for every cast piece of a batch; block-scaled e4m3 (QUANTIZE and
 * SCALES), one launch over every block job, after a first launch that
 * folds the amax of split blocks into their keys. Plain copies are
 * pack.cu's and pay nothing for these.
 *
 * Teams walk items and jobs as team.cuh says. A unit is loaded as one
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
#include "team.cuh"

namespace {

constexpr int kF32 = RS_DTYPE_F32, kBf16 = RS_DTYPE_BF16,
              kF16 = RS_DTYPE_F16;

__host__ __device__ constexpr int size_of(int dtype) {
  return dtype == kF32 ? 4 : 2;
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

/* A unit in registers, as convert_pieces.h's words. */
struct Words {
  uint32_t w[4];
};

/* ---- casts ------------------------------------------------------------ */

template <int kSrc, int kDst, int kV> struct Cast {
  using Value = Words;
  __device__ __forceinline__ void load(Words &v, uint64_t src) {
    Units<kSrc, kV>::load(v.w, src);
  }
  __device__ __forceinline__ void put(uint64_t dst, const Words &v) {
    uint32_t out[4];
    rsi_cast_unit(kSrc, kDst, kV, v.w, out);
    Vec<size_of(kDst) * kV>::store(dst * size_of(kDst), out);
  }
};

/* The unit sizes a pair is built for: its largest, and 1. */
template <int kSrc, int kDst, int kTeam>
__device__ __forceinline__ void cast_pair(const rsi_piece *p, int64_t item) {
  constexpr int kMax = 16 / (size_of(kSrc) > size_of(kDst) ? size_of(kSrc)
                                                           : size_of(kDst));
  if (p->unit == kMax) {
    Cast<kSrc, kDst, kMax> u;
    team_item<kTeam>(p, item, u);
  } else {
    Cast<kSrc, kDst, 1> u;
    team_item<kTeam>(p, item, u);
  }
}

template <int kTeam>
__device__ __forceinline__ void cast_at(const rsi_piece *p, int64_t i) {
  switch (p->cast) {
    case RSI_CAST_CODE(kF32, kBf16): cast_pair<kF32, kBf16, kTeam>(p, i); break;
    case RSI_CAST_CODE(kF32, kF16): cast_pair<kF32, kF16, kTeam>(p, i); break;
    case RSI_CAST_CODE(kBf16, kF32): cast_pair<kBf16, kF32, kTeam>(p, i); break;
    case RSI_CAST_CODE(kF16, kF32): cast_pair<kF16, kF32, kTeam>(p, i); break;
    case RSI_CAST_CODE(kBf16, kF16): cast_pair<kBf16, kF16, kTeam>(p, i); break;
    default: /* the builder makes no other pair */
      cast_pair<kF16, kBf16, kTeam>(p, i);
      break;
  }
}

template <int kTeam>
__global__ void __launch_bounds__(kThreads)
    rsi_cast_kernel(const rsi_piece *__restrict__ table, int64_t npieces,
                    int64_t items) {
  team_run<kTeam>(table, npieces, items, &rsi_piece::first_item,
                  &rsi_piece::items,
                  [](const rsi_piece *p, int64_t i) { cast_at<kTeam>(p, i); });
}

/* ---- block-scaled e4m3 -------------------------------------------------- */

/* Folds the units' magnitudes into key. */
template <int kSrc, int kV> struct Amax {
  using Value = Words;
  uint32_t key = 0;
  __device__ __forceinline__ void load(Words &v, uint64_t src) {
    Units<kSrc, kV>::load(v.w, src);
  }
  __device__ __forceinline__ void put(uint64_t, const Words &v) {
    key = rsi_amax_unit(kSrc, kV, v.w, key);
  }
};

/* A thread's share of the amax of the values in r. */
template <int kSrc, int kV, int kTeam>
__device__ __forceinline__ uint32_t thread_amax(const rsi_rect *r) {
  Amax<kSrc, kV> a;
  team_rect<kTeam>(r, a);
  return a.key;
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

/* Values divided by the block's scale, as e4m3 bytes. */
template <int kSrc, int kV> struct Quantize {
  using Value = Words;
  const rsi_qscale *q;
  __device__ __forceinline__ void load(Words &v, uint64_t src) {
    Units<kSrc, kV>::load(v.w, src);
  }
  __device__ __forceinline__ void put(uint64_t dst, const Words &v) {
    uint32_t out[4];
    rsi_quant_unit(kSrc, kV, v.w, q, out);
    Vec<kV>::store(dst, out);
  }
};

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
    Quantize<kSrc, kV> u{&q};
#pragma unroll 1
    for (int part = 0; part < 3; part++) {
      rsi_rect r;
      if (rsi_bjob_part(p, &j, part, &r)) team_rect<kTeam>(&r, u);
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
__device__ __forceinline__ void block_at(const rsi_bpiece *p, int64_t i,
                                         const uint32_t *keys) {
  switch (p->src_dtype) {
    case kF32: block_src<kF32, kTeam>(p, i, keys); break;
    case kBf16: block_src<kBf16, kTeam>(p, i, keys); break;
    default: block_src<kF16, kTeam>(p, i, keys); break;
  }
}

template <int kTeam>
__global__ void __launch_bounds__(kThreads)
    rsi_blocks_kernel(const rsi_bpiece *__restrict__ table, int64_t npieces,
                      int64_t jobs, const uint32_t *keys) {
  team_run<kTeam>(table, npieces, jobs, &rsi_bpiece::first_job,
                  &rsi_bpiece::jobs, [=](const rsi_bpiece *p, int64_t i) {
                    block_at<kTeam>(p, i, keys);
                  });
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

__device__ __forceinline__ void split_at(const rsi_bpiece *p, int64_t i,
                                         uint32_t *keys) {
  switch (p->src_dtype) {
    case kF32: split_src<kF32>(p, i, keys); break;
    case kBf16: split_src<kBf16>(p, i, keys); break;
    default: split_src<kF16>(p, i, keys); break;
  }
}

__global__ void __launch_bounds__(kThreads)
    rsi_split_kernel(const rsi_bpiece *__restrict__ table, int64_t npieces,
                     int64_t jobs, uint32_t *keys) {
  team_run<kThreads>(table, npieces, jobs, &rsi_bpiece::first_job,
                     &rsi_bpiece::jobs, [=](const rsi_bpiece *p, int64_t i) {
                       split_at(p, i, keys);
                     });
}

} // namespace

extern "C" int rsi_cuda_cast_launch(const rsi_piece *table_dev,
                                    int64_t npieces, int64_t items,
                                    void *stream) {
  if (items <= 0 || npieces <= 0) return (int)cudaSuccess;
  return (int)launch_teams(items, static_cast<cudaStream_t>(stream),
                           rsi_cast_kernel<32>, rsi_cast_kernel<kThreads>,
                           table_dev, npieces, items);
}

extern "C" int rsi_cuda_blocks_launch(const rsi_bpiece *table_dev,
                                      int64_t npieces, int64_t jobs,
                                      int64_t nsplit, int64_t split_jobs,
                                      uint32_t *keys_dev, void *stream) {
  if (jobs <= 0 || npieces <= 0) return (int)cudaSuccess;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (split_jobs > 0 && nsplit > 0) {
    int64_t cap = (int64_t)sm_count() * kBlocksPerSm;
    unsigned blocks = (unsigned)(split_jobs < cap ? split_jobs : cap);
    rsi_split_kernel<<<blocks, kThreads, 0, st>>>(table_dev, nsplit,
                                                  split_jobs, keys_dev);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return (int)e;
  }
  return (int)launch_teams(jobs, st, rsi_blocks_kernel<32>,
                           rsi_blocks_kernel<kThreads>, table_dev, npieces,
                           jobs, keys_dev);
}
