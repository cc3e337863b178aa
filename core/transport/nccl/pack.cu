/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's kernel: one launch copies every piece of a batch
 * (pieces.h). Work goes out in items; a team of threads takes a run of
 * consecutive items, and for each its threads stride over the item's units
 * with the index math of pieces.h, moving a unit as one 16/8/4/2/1-byte
 * load and store (loads through the read-only path: a batch never writes
 * what it reads). No shared memory and no barrier: every thread reads the
 * piece (one address across the team, so from L1) and works out the item
 * itself, so teams run free.
 *
 * A team is a warp when the batch has items enough for every warp the GPU
 * holds (small items then keep as many bytes in flight as large ones), else
 * a whole block (a few large items still fill the GPU). On an H200 this
 * gave 0.86-0.92x of cudaMemcpyAsync for pieces of 64 KiB and more, strided
 * shards included, and 0.62x for 4 KiB pieces (bench/gpu/pack_check.cu). */
#include <cuda_runtime.h>

#include <stdint.h>

#include "pieces.h"

namespace {

/* Tuning knobs, overridable at build time to compare variants. */
#ifndef RSI_PACK_UNROLL
#define RSI_PACK_UNROLL 4
#endif
#ifndef RSI_PACK_MIN_BLOCKS
#define RSI_PACK_MIN_BLOCKS 1
#endif

constexpr int kThreads = 256;
/* Units each thread has in flight per step: loads before stores. */
constexpr int kUnroll = RSI_PACK_UNROLL;
/* Resident blocks per SM aimed at; more blocks only queue. */
constexpr int kBlocksPerSm = 8;
/* Warps an SM holds at this kernel's register count (two blocks). */
constexpr int kWarpsPerSm = 16;

/* A thread's rank in its team of kTeam threads. */
template <int kTeam> __device__ __forceinline__ uint32_t team_rank() {
  return threadIdx.x % kTeam;
}

/* An item whose rows all follow one another by one step (the common
 * case): each thread walks its units with no division, up to kUnroll
 * loads in flight before their stores. */
template <typename T, int kTeam>
__device__ __forceinline__ void copy_straight(const rsi_item *it) {
  uint32_t k = team_rank<kTeam>();
  if (k >= it->units) return;
  rsi_walk w;
  rsi_walk_init(it, kTeam, &w);
  uint32_t col;
  uint64_t dst, src;
  rsi_walk_start(it, k, &col, &dst, &src);
#pragma unroll 1
  while (k < it->units) {
    T v[kUnroll];
    uint64_t to[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; j++) {
      if (k + (uint32_t)(j * kTeam) < it->units) {
        v[j] = __ldg(reinterpret_cast<const T *>(src));
        to[j] = dst;
        rsi_walk_next(it, &w, &col, &dst, &src);
      }
    }
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < it->units)
        __stwb(reinterpret_cast<T *>(to[j]), v[j]);
    k += kTeam * kUnroll;
  }
}

/* Any item, unit by unit: for items whose rows cross the end of the
 * innermost outer dim too often for straight segments. */
template <typename T, int kTeam>
__device__ __forceinline__ void copy_any(const rsi_piece *p,
                                         const rsi_item *it) {
#pragma unroll 1
  for (uint32_t k = team_rank<kTeam>();; k += kTeam) {
    uint64_t dst, src;
    if (!rsi_item_unit(p, it, k, &dst, &src)) break;
    __stwb(reinterpret_cast<T *>(dst),
           __ldg(reinterpret_cast<const T *>(src)));
  }
}

/* Item `item` of piece p, in units of sizeof(T). */
template <typename T, int kTeam>
__device__ __forceinline__ void copy_item(const rsi_piece *p, int64_t item) {
  rsi_item it;
  rsi_piece_item(p, item, &it);
  if (it.straight_rows == it.rows) {
    copy_straight<T, kTeam>(&it);
  } else if (rsi_item_by_segments(p, &it, kTeam)) {
#pragma unroll 1
    for (uint32_t from = 0; from < it.rows;) {
      rsi_item seg;
      rsi_item_segment(p, &it, from, &seg);
      copy_straight<T, kTeam>(&seg);
      from += seg.rows;
    }
  } else {
    copy_any<T, kTeam>(p, &it);
  }
}

/* Each team copies one run of consecutive items, so that it searches for
 * a piece once and then steps from piece to piece. */
template <int kTeam>
__global__ void __launch_bounds__(kThreads, RSI_PACK_MIN_BLOCKS)
    rsi_copy_kernel(const rsi_piece *__restrict__ table, int64_t npieces,
                    int64_t items) {
  static_assert(kThreads % kTeam == 0 && kTeam % 32 == 0, "teams of warps");
  constexpr int kTeams = kThreads / kTeam;
  int64_t teams = (int64_t)gridDim.x * kTeams;
  int64_t team = (int64_t)blockIdx.x * kTeams + threadIdx.x / kTeam;
  int64_t per = items / teams, extra = items % teams;
  int64_t begin = team * per + (team < extra ? team : extra);
  int64_t end = begin + per + (team < extra ? 1 : 0);
  if (begin >= end) return;
  int64_t at = rsi_piece_find(table, npieces, begin);
  int64_t next_first = table[at].first_item + table[at].items;
#pragma unroll 1
  for (int64_t i = begin; i < end; i++) {
    if (i == next_first) { /* item i opens the next piece */
      at++;
      next_first += table[at].items;
    }
    const rsi_piece *p = table + at;
    switch (p->unit) {
      case 16: copy_item<uint4, kTeam>(p, i); break;
      case 8: copy_item<uint2, kTeam>(p, i); break;
      case 4: copy_item<uint32_t, kTeam>(p, i); break;
      case 2: copy_item<uint16_t, kTeam>(p, i); break;
      default: copy_item<uint8_t, kTeam>(p, i); break;
    }
  }
}

} // namespace

extern "C" int rsi_cuda_copy_launch(const rsi_piece *table_dev,
                                    int64_t npieces, int64_t items,
                                    void *stream) {
  if (items <= 0 || npieces <= 0) return (int)cudaSuccess;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
          cudaSuccess) {
    (void)cudaGetLastError(); /* ours: fall back to an H100's count */
    sms = 132;
  }
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  int64_t cap = (int64_t)sms * kBlocksPerSm;
  if (items >= (int64_t)sms * kWarpsPerSm) { /* a warp per item */
    int64_t want = (items + kThreads / 32 - 1) / (kThreads / 32);
    unsigned blocks = (unsigned)(want < cap ? want : cap);
    rsi_copy_kernel<32><<<blocks, kThreads, 0, st>>>(table_dev, npieces,
                                                     items);
  } else { /* a block per item */
    unsigned blocks = (unsigned)(items < cap ? items : cap);
    rsi_copy_kernel<kThreads><<<blocks, kThreads, 0, st>>>(table_dev,
                                                           npieces, items);
  }
  return (int)cudaGetLastError();
}
