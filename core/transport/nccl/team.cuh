/* SPDX-License-Identifier: Apache-2.0 */
/* How the CUDA copy engine's kernels (pack.cu, convert_pack.cu) walk their
 * work: a team of threads (a warp, or a whole block) takes a run of
 * consecutive items of a table (rsi_piece items, rsi_bpiece jobs), and its
 * threads stride over a rect's units (pieces.h) with no division a unit,
 * up to kUnroll loads in flight before what is done with them. A kernel
 * brings what it does to a unit: an action U with a register type
 * U::Value, u.load(v, src) and u.put(dst, v), addresses as the rect counts
 * them.
 *
 * A team is a warp when there are items enough for every warp the GPU
 * holds (small items then keep as many bytes in flight as large ones),
 * else a whole block (a few large items still fill the GPU). */
#ifndef RS_CORE_TRANSPORT_NCCL_TEAM_CUH
#define RS_CORE_TRANSPORT_NCCL_TEAM_CUH

#include <cuda_runtime.h>

#include <stdint.h>

#include "pieces.h"

namespace {

/* Tuning knob of every kernel, overridable at build time to compare
 * variants. */
#ifndef RSI_PACK_UNROLL
#define RSI_PACK_UNROLL 4
#endif

constexpr int kThreads = 256;
/* Units each thread has in flight per step. */
constexpr int kUnroll = RSI_PACK_UNROLL;
/* Resident blocks per SM aimed at; more blocks only queue. */
constexpr int kBlocksPerSm = 8;
/* Warps an SM holds at the kernels' register counts (two blocks). */
constexpr int kWarpsPerSm = 16;

/* A thread's rank in its team of kTeam threads. */
template <int kTeam> __device__ __forceinline__ uint32_t team_rank() {
  return threadIdx.x % kTeam;
}

/* This team's run of [0, total) items of table[0..n), f(entry, item) for
 * each: the entry that holds the first is searched for once, then the run
 * steps from entry to entry. first and count: the members that say which
 * items an entry holds. */
template <int kTeam, class P, class F>
__device__ __forceinline__ void team_run(const P *table, int64_t n,
                                         int64_t total, int64_t P::*first,
                                         int64_t P::*count, F f) {
  static_assert(kThreads % kTeam == 0 && kTeam % 32 == 0, "teams of warps");
  constexpr int kTeams = kThreads / kTeam;
  int64_t teams = (int64_t)gridDim.x * kTeams;
  int64_t team = (int64_t)blockIdx.x * kTeams + threadIdx.x / kTeam;
  int64_t per = total / teams, extra = total % teams;
  int64_t begin = team * per + (team < extra ? team : extra);
  int64_t end = begin + per + (team < extra ? 1 : 0);
  if (begin >= end) return;
  int64_t at = rsi_table_find(&(table->*first), sizeof *table, n, begin);
  int64_t next_first = table[at].*first + table[at].*count;
#pragma unroll 1
  for (int64_t i = begin; i < end; i++) {
    if (i == next_first) { /* item i opens the next entry */
      at++;
      next_first += table[at].*count;
    }
    f(table + at, i);
  }
}

/* The team's threads over the units of r: thread t takes units t,
 * t + kTeam, ... */
template <int kTeam, class U>
__device__ __forceinline__ void team_rect(const rsi_rect *r, U &u) {
  uint32_t k = team_rank<kTeam>();
  if (k >= r->units) return;
  rsi_walk w;
  rsi_walk_start(r, k, kTeam, &w);
#pragma unroll 1
  while (k < r->units) {
    typename U::Value v[kUnroll];
    uint64_t to[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; j++) {
      if (k + (uint32_t)(j * kTeam) < r->units) {
        u.load(v[j], w.src);
        to[j] = w.dst;
        rsi_walk_next(r, &w);
      }
    }
#pragma unroll
    for (int j = 0; j < kUnroll; j++)
      if (k + (uint32_t)(j * kTeam) < r->units) u.put(to[j], v[j]);
    k += kTeam * kUnroll;
  }
}

/* Item `item` of piece p: a straight item (the common case) as one rect;
 * another by straight segments, or unit by unit where its rows cross the
 * end of the innermost outer dim too often for segments. */
template <int kTeam, class U>
__device__ __forceinline__ void team_item(const rsi_piece *p, int64_t item,
                                          U &u) {
  rsi_item it;
  rsi_piece_item(p, item, &it);
  rsi_rect r;
  if (it.straight_rows == it.rows) {
    rsi_item_rect(&it, &r);
    team_rect<kTeam>(&r, u);
  } else if (rsi_item_by_segments(p, &it, kTeam)) {
#pragma unroll 1
    for (uint32_t from = 0; from < it.rows;) {
      rsi_item seg;
      rsi_item_segment(p, &it, from, &seg);
      rsi_item_rect(&seg, &r);
      team_rect<kTeam>(&r, u);
      from += seg.rows;
    }
  } else {
#pragma unroll 1
    for (uint32_t k = team_rank<kTeam>();; k += kTeam) {
      uint64_t dst, src;
      if (!rsi_item_unit(p, &it, k, &dst, &src)) break;
      typename U::Value v;
      u.load(v, src);
      u.put(dst, v);
    }
  }
}

inline int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
          cudaSuccess) {
    (void)cudaGetLastError(); /* ours: fall back to an H100's count */
    sms = 132;
  }
  return sms;
}

/* Enqueues on st the kernel for `work` items: `warps` (teams of a warp)
 * when there are enough to fill every warp the GPU holds, else `blocks`
 * (teams of a block). Returns the launch's error. */
template <class... P, class... A>
cudaError_t launch_teams(int64_t work, cudaStream_t st, void (*warps)(P...),
                         void (*blocks)(P...), A... args) {
  int sms = sm_count();
  int64_t cap = (int64_t)sms * kBlocksPerSm;
  if (work >= (int64_t)sms * kWarpsPerSm) {
    int64_t want = (work + kThreads / 32 - 1) / (kThreads / 32);
    warps<<<(unsigned)(want < cap ? want : cap), kThreads, 0, st>>>(args...);
  } else {
    blocks<<<(unsigned)(work < cap ? work : cap), kThreads, 0, st>>>(args...);
  }
  return cudaGetLastError();
}

} // namespace

#endif
