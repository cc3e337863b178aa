/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's kernel: one launch copies every piece of a batch
 * (pieces.h), item by item as team.cuh walks them, moving a unit as one
 * 16/8/4/2/1-byte load and store (loads through the read-only path: a
 * batch never writes what it reads). No shared memory and no barrier:
 * every thread reads the piece (one address across the team, so from L1)
 * and works out the item itself, so teams run free.
 *
 * On an H200 this gave 0.86-0.92x of cudaMemcpyAsync for pieces of 64 KiB
 * and more, strided shards included, and 0.62x for 4 KiB pieces
 * (bench/gpu/pack_check.cu). */
#include <cuda_runtime.h>

#include <stdint.h>

#include "pieces.h"
#include "team.cuh"

namespace {

/* Tuning knob, overridable at build time to compare variants. */
#ifndef RSI_PACK_MIN_BLOCKS
#define RSI_PACK_MIN_BLOCKS 1
#endif

/* A unit of sizeof(T) bytes, copied as it is. */
template <typename T> struct Copy {
  using Value = T;
  __device__ __forceinline__ void load(T &v, uint64_t src) {
    v = __ldg(reinterpret_cast<const T *>(src));
  }
  __device__ __forceinline__ void put(uint64_t dst, const T &v) {
    __stwb(reinterpret_cast<T *>(dst), v);
  }
};

template <typename T, int kTeam>
__device__ __forceinline__ void copy_item(const rsi_piece *p, int64_t item) {
  Copy<T> u;
  team_item<kTeam>(p, item, u);
}

template <int kTeam>
__device__ __forceinline__ void copy_at(const rsi_piece *p, int64_t i) {
  switch (p->unit) {
    case 16: copy_item<uint4, kTeam>(p, i); break;
    case 8: copy_item<uint2, kTeam>(p, i); break;
    case 4: copy_item<uint32_t, kTeam>(p, i); break;
    case 2: copy_item<uint16_t, kTeam>(p, i); break;
    default: copy_item<uint8_t, kTeam>(p, i); break;
  }
}

template <int kTeam>
__global__ void __launch_bounds__(kThreads, RSI_PACK_MIN_BLOCKS)
    rsi_copy_kernel(const rsi_piece *__restrict__ table, int64_t npieces,
                    int64_t items) {
  team_run<kTeam>(table, npieces, items, &rsi_piece::first_item,
                  &rsi_piece::items,
                  [](const rsi_piece *p, int64_t i) { copy_at<kTeam>(p, i); });
}

} // namespace

extern "C" int rsi_cuda_copy_launch(const rsi_piece *table_dev,
                                    int64_t npieces, int64_t items,
                                    void *stream) {
  if (items <= 0 || npieces <= 0) return (int)cudaSuccess;
  return (int)launch_teams(items, static_cast<cudaStream_t>(stream),
                           rsi_copy_kernel<32>, rsi_copy_kernel<kThreads>,
                           table_dev, npieces, items);
}
