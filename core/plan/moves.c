/* SPDX-License-Identifier: Apache-2.0 */
/* Moves: pushing a move of a box between two ends (with its dtypes,
 * contiguity and the block scales computed on the way), and closing a
 * scheduling unit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/grow.h"
#include "base/hash.h"
#include "base/radix_sort.h"
#include "layout/box.h"
#include "layout/box_tree.h"
#include "plan/planner.h"
#include "plan/replica_sets.h"
#include "plan/staging.h"

/* ---- moves ------------------------------------------------------------ */

/* The element type at one end of a move of tensor t. */
static rs_dtype end_dtype(const planner *p, int t, int kind, int64_t index) {
  if (kind == RSI_EP_RELAY) return (rs_dtype)p->plan->relays[index].dtype;
  return kind == RSI_EP_SRC ? p->plan->conv[t].src_dtype
                            : p->plan->conv[t].dst_dtype;
}

static rs_status add_scale_moves(planner *p, const rsi_move *values);

/* A plan that keeps one rank's part needs the boxes of that rank's moves
 * only, and a plan without boxes (RS_PARAM_PLAN_BOXES = 0) none: once a
 * move is made (its contiguity found, its scales' moves made from it), its
 * box, the last in the pool, is given back. After that the scheduler and
 * the figures read a move's bytes, never its box; its elements are its
 * bytes over its wire dtype's size. At 8192 GPUs a side the boxes are a
 * fifth of the planner's peak memory (bench_plan_dsv3). */
static void forget_box(planner *p, rsi_move *m) {
  if (p->keeps_boxes &&
      (p->part < 0 || m->src_rank == p->part || m->dst_rank == p->part))
    return;
  rsi_pool *boxes = &p->plan->boxes;
  if (m->box + 2 * p->ndim != boxes->n) return; /* a later box was kept */
  boxes->n -= 2 * p->ndim;
  m->box = -1;
}

/* The buffers some move reads or writes: only those must be bound (a
 * replica the plan does not read from needs no memory). */
static void mark_used(rs_plan *plan, int kind, int32_t index) {
  if (kind == RSI_EP_RELAY) return;
  rsi_side *side = &plan->side[kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST];
  const rsi_shard *s = &side->shards[index];
  if (!rsi_context_drives(plan->ctx, s->rank)) return; /* no slot here */
  side->buffers[side->rank_first[s->rank] + s->buffer].used = true;
}

/* A move of tensor t; for block-scaled values landing in a destination
 * shard, the moves of their scales follow it. */
static rs_status push_move_of(planner *p, int t, const int64_t *off,
                              const int64_t *ext, int src_kind,
                              int64_t src_index, int src_rank, int dst_kind,
                              int64_t dst_index, int dst_rank, int stage,
                              int forwarded, bool computes_scales) {
  rs_plan *plan = p->plan;
  if (rsi_planner_moves_left(p) < 1) return rsi_planner_too_many_moves(p, "");
  p->spent += rsi_planner_move_cost(p->ndim);
  RSI_TRY(rsi_grow_at_most((void **)&plan->moves, &plan->cap_moves,
                           plan->nmoves + 1, sizeof *plan->moves, 1024,
                           plan->nmoves + 1 + rsi_planner_moves_left(p),
                           p->err));
  int64_t at = rsi_pool_push(&plan->boxes, NULL, 2 * p->ndim, p->err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  memcpy(plan->boxes.v + at, off, (size_t)p->ndim * sizeof *off);
  memcpy(plan->boxes.v + at + p->ndim, ext, (size_t)p->ndim * sizeof *ext);
  int64_t vol;
  rsi_box_volume(p->ndim, ext, &vol); /* within a checked shard */
  /* scales computed from values read them in the values' dtype */
  rs_dtype from = computes_scales ? plan->conv[plan->conv[t].values].src_dtype
                                  : end_dtype(p, t, src_kind, src_index);
  rs_dtype to = end_dtype(p, t, dst_kind, dst_index);
  if (computes_scales && src_kind == RSI_EP_RELAY)
    from = (rs_dtype)plan->relays[src_index].dtype;
  rs_dtype wire = computes_scales        ? to
                  : src_rank == dst_rank ? to
                                         : rsi_planner_wire_dtype(from, to);
  rsi_move *m = &plan->moves[plan->nmoves++];
  memset(m, 0, sizeof *m);
  m->box = at;
  m->bytes = vol * (int64_t)rsi_dtype_size(wire);
  m->tensor = t;
  m->src_kind = (uint8_t)src_kind;
  m->src_index = (int32_t)src_index;
  m->src_rank = src_rank;
  m->dst_kind = (uint8_t)dst_kind;
  m->dst_index = (int32_t)dst_index;
  m->dst_rank = dst_rank;
  m->stage = (uint8_t)stage;
  m->forwarded = (uint8_t)forwarded;
  m->src_dtype = (uint8_t)from;
  m->wire_dtype = (uint8_t)wire;
  m->dst_dtype = (uint8_t)to;
  m->computes_scales = computes_scales;
  if (!p->shadow) { /* a shadow's moves are dropped: nothing runs them */
    mark_used(plan, src_kind, (int32_t)src_index);
    mark_used(plan, dst_kind, (int32_t)dst_index);
  }
  if (from == to && !computes_scales && !p->shadow)
    m->contiguous = (uint8_t)(rsi_move_contiguous(plan, m, true) |
                              rsi_move_contiguous(plan, m, false) << 1);
  if (src_rank == dst_rank)
    m->route = RS_ROUTE_LOCAL;
  else if (plan->domain_of[src_rank] == plan->domain_of[dst_rank])
    m->route = RS_ROUTE_INTRA;
  else
    m->route = RS_ROUTE_INTER;
  if (m->route == RS_ROUTE_INTRA) p->send_intra_load[src_rank] += m->bytes;
  if (m->route == RS_ROUTE_INTER) p->recv_inter_load[dst_rank] += m->bytes;
  if (dst_kind == RSI_EP_DST && plan->conv[t].scales >= 0) {
    int64_t values = plan->nmoves - 1;
    RSI_TRY(add_scale_moves(p, m)); /* which reads m's box */
    m = &plan->moves[values]; /* its pushes may have moved the array */
  }
  forget_box(p, m);
  return RS_OK;
}

rs_status rsi_planner_push_move(planner *p, const int64_t *off,
                                const int64_t *ext, int src_kind,
                                int64_t src_index, int src_rank, int dst_kind,
                                int64_t dst_index, int dst_rank, int stage,
                                int forwarded) {
  return push_move_of(p, p->tensor, off, ext, src_kind, src_index, src_rank,
                      dst_kind, dst_index, dst_rank, stage, forwarded, false);
}

/* Scale-tensor shards of `rank`: p->scale_ids[*lo .. *hi). */
static void scale_shards_of(const planner *p, int rank, int64_t *lo,
                            int64_t *hi) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int64_t a = 0, b = p->nscale_ids;
  while (a < b) {
    int64_t mid = a + (b - a) / 2;
    if (dst->shards[p->scale_ids[mid]].rank < rank) a = mid + 1;
    else b = mid;
  }
  *lo = a;
  while (a < p->nscale_ids && dst->shards[p->scale_ids[a]].rank == rank) a++;
  *hi = a;
}

/* The scales of the blocks whose first element a values move carries, into
 * every scale shard of its receiver that holds them: computed from the
 * values where the move reads them in the source dtype (a source shard or
 * a relay slot, holding the whole blocks), else copied from the sender's
 * own scale shards (it holds the values of those blocks in fp8, so their
 * scales too). */
static rs_status add_scale_moves(planner *p, const rsi_move *values) {
  const rsi_move v = *values; /* pushes move the array */
  const rs_plan *plan = p->plan;
  const rsi_conversion *cv = &plan->conv[v.tensor];
  const rsi_side *dst = &plan->side[RS_SIDE_DST];
  int nd = p->ndim;
  const int64_t *off = plan->boxes.v + v.box, *ext = off + nd;
  int64_t bo[RSI_MAX_DIMS], be[RSI_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t bs = rsi_planner_block_size(cv, nd, d);
    int64_t first = (off[d] + bs - 1) / bs, last = (off[d] + ext[d] - 1) / bs;
    if (last < first) return RS_OK; /* no block starts in it */
    bo[d] = first;
    be[d] = last - first + 1;
  }
  bool computed = v.src_kind != RSI_EP_DST;
  int64_t lo, hi, slo = 0, shi = 0;
  scale_shards_of(p, v.dst_rank, &lo, &hi);
  if (!computed) scale_shards_of(p, v.src_rank, &slo, &shi);
  for (int64_t i = lo; i < hi; i++) {
    const rsi_shard *e = &dst->shards[p->scale_ids[i]];
    int64_t xo[RSI_MAX_DIMS], xe[RSI_MAX_DIMS];
    if (!rsi_box_intersect(nd, bo, be, rsi_shard_offset(&dst->pool, e),
                           rsi_shard_extent(&dst->pool, e, nd), xo, xe))
      continue;
    if (computed) {
      RSI_TRY(push_move_of(p, cv->scales, xo, xe, v.src_kind, v.src_index,
                           v.src_rank, RSI_EP_DST, p->scale_ids[i],
                           v.dst_rank, v.stage, v.forwarded, true));
      continue;
    }
    for (int64_t j = slo; j < shi; j++) {
      const rsi_shard *f = &dst->shards[p->scale_ids[j]];
      int64_t yo[RSI_MAX_DIMS], ye[RSI_MAX_DIMS];
      if (rsi_box_intersect(nd, xo, xe, rsi_shard_offset(&dst->pool, f),
                            rsi_shard_extent(&dst->pool, f, nd), yo, ye))
        RSI_TRY(push_move_of(p, cv->scales, yo, ye, RSI_EP_DST,
                             p->scale_ids[j], v.src_rank, RSI_EP_DST,
                             p->scale_ids[i], v.dst_rank, v.stage,
                             v.forwarded, false));
    }
  }
  return RS_OK;
}

rs_status rsi_planner_end_unit(planner *p) {
  rsi_units *u = &p->units;
  RSI_TRY(rsi_grow((void **)&u->end, &p->cap_units, u->n + 1, sizeof *u->end,
                   1024, p->err));
  RSI_TRY(rsi_grow((void **)&u->after, &p->cap_after, u->n + 1,
                   sizeof *u->after, 1024, p->err));
  RSI_TRY(rsi_grow((void **)&u->depth, &p->cap_depth, u->n + 1,
                   sizeof *u->depth, 1024, p->err));
  u->after[u->n] = p->after;
  u->depth[u->n] = p->depth;
  u->end[u->n++] = p->plan->nmoves;
  p->after = -1;
  p->depth = 0;
  return RS_OK;
}
