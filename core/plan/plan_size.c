/* SPDX-License-Identifier: Apache-2.0 */
/* The plan's size: what moves and relays cost, the budget a plan may
 * take while it is made, and the refusals made from the shards before
 * that memory is spent. */
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

/* The memory a plan may take while it is made and scheduled: what the
 * first limit, 2^26 moves of about 100 bytes, meant to allow. Moves and
 * relays are charged what they really cost (move_cost, relay_cost), and
 * so are the planner's arrays that grow with the pieces (grow_held); a
 * plan that would not fit is refused before its memory is spent, from
 * its shards where it can be (check_plan_size, check_tensor_size), else
 * at the budget. */
int64_t rsi_plan_bytes = (int64_t)100 << 26;

/* ---- the plan's size -------------------------------------------------- */





rs_status rsi_planner_too_many_moves(const planner *p, const char *why) {
  return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                  "tensor '%s': the plan would hold more than %lld moves "
                  "(%lld bytes each while it is made, at most %lld bytes in "
                  "all)%s; raise RS_PARAM_STAGING_BYTES or split the work",
                  p->plan->tensors[p->tensor].name,
                  (long long)(p->plan->nmoves + rsi_planner_moves_left(p)),
                  (long long)rsi_planner_move_cost(p->ndim),
                  (long long)p->budget, why);
}

/* Make room for `need` items of `size` bytes in one of the planner's
 * arrays that grow with the pieces: rsi_grow's doubling, as far as the
 * budget allows, charged to p->held. */
rs_status rsi_planner_grow_held(planner *p, void **items, int64_t *cap,
                           int64_t need, size_t size, int64_t first) {
  if (need <= *cap) return RS_OK;
  int64_t most = *cap + rsi_planner_bytes_left(p) / (int64_t)size, was = *cap;
  if (most < need)
    return rsi_planner_too_many_moves(p, " and the pieces they carry");
  RSI_TRY(rsi_grow_at_most(items, cap, need, size, first, most, p->err));
  p->held += (*cap - was) * (int64_t)size;
  return RS_OK;
}

/* Room for `more` values in a pool that grows with the pieces. */
rs_status rsi_planner_reserve_held(planner *p, rsi_pool *pool, int64_t more) {
  return rsi_planner_grow_held(p, (void **)&pool->v, &pool->cap, pool->n + more,
                   sizeof *pool->v, 256);
}

/* The most bytes a piece carries: a quarter of the staging (half a round,
 * or by domain pair a round), since deliver_bounded never cuts a larger
 * one. */
static int64_t largest_piece(const rs_plan *plan) {
  return plan->round_capacity / (plan->rounds_by_pair ? 1 : 2);
}

/* Refuse, before planning, a plan that cannot fit the budget: every
 * destination shard receives at least one move per largest piece of its
 * bytes. A domain's part holds the moves into its domain only. */
rs_status rsi_planner_check_plan_size(planner *p, const int64_t *dfirst,
                                 const int64_t *dids) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int64_t half = largest_piece(p->plan);
  int64_t need = 0;
  for (int t = 0; t < p->plan->ntensors; t++) {
    p->tensor = t;
    p->ndim = p->plan->tensors[t].ndim;
    int64_t moves = 0, vol;
    for (int64_t i = dfirst[t]; i < dfirst[t + 1]; i++) {
      const rsi_shard *s = &dst->shards[dids[i]];
      if (p->plan->domain_part &&
          p->plan->domain_of[s->rank] != p->plan->part_domain)
        continue;
      rsi_box_volume(p->ndim, rsi_shard_extent(&dst->pool, s, p->ndim), &vol);
      int64_t bytes = vol * p->plan->tensors[t].esize; /* within the tensor */
      int64_t parts = bytes / half + (bytes % half != 0), cost;
      if (__builtin_add_overflow(moves, parts, &moves) ||
          __builtin_mul_overflow(moves, rsi_planner_move_cost(p->ndim),
                                 &cost) ||
          cost > p->budget - need)
        return rsi_planner_too_many_moves(
            p,
            ": its destination shards need at least "
            "one move per quarter of the staging");
    }
    need += moves * rsi_planner_move_cost(p->ndim);
  }
  return RS_OK;
}

/* The moves each shard of destination group g receives at least, counted
 * until they pass `enough`, where the tensor has no block scales: every
 * move then carries a box inside one source group and one piece (no block
 * is assembled from several), so each source group g meets whose elements
 * no other group holds (exclusive[i], or every group where exclusive is
 * NULL) sends it at least a move per largest piece of what they share. */
static int64_t moves_into_at_least(planner *p, const group *g,
                                   const bool *exclusive, int64_t enough) {
  int nd = p->ndim;
  int64_t largest = largest_piece(p->plan), moves = 0;
  int64_t n = rsi_box_tree_query(&p->stree, g->off, g->ext, -1, p->cands,
                                 p->nsg);
  for (int64_t c = 0; c < n && moves <= enough; c++) {
    if (exclusive && !exclusive[p->cands[c]]) continue;
    const group *s = &p->sgroups[p->cands[c]];
    int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS], vol;
    rsi_box_intersect(nd, s->off, s->ext, g->off, g->ext, o, e);
    rsi_box_volume(nd, e, &vol);
    int64_t bytes = vol * p->esize; /* within the tensor */
    moves += bytes / largest + (bytes % largest != 0);
  }
  return moves;
}

/* Where source groups overlap: which of them meet no other (*out, nsg
 * entries, malloc'd). Only such a group's elements must come from it. */
static rs_status exclusive_sources(planner *p, bool **out) {
  bool *ex = malloc((size_t)(p->nsg ? p->nsg : 1) * sizeof *ex);
  if (!ex) return RSI_NOMEM(p->err);
  for (int64_t i = 0; i < p->nsg; i++)
    ex[i] = rsi_box_tree_query(&p->stree, p->sgroups[i].off,
                               p->sgroups[i].ext, -1, p->cands, p->nsg) == 1;
  *out = ex;
  return RS_OK;
}

/* Refuse, before any of its moves is made, a tensor whose destination
 * shards (in a domain's part, those of its domain) need more moves than
 * the budget has left: at least one per piece of each source group they
 * meet whose elements no other group holds (moves_into_at_least; where
 * every group is disjoint from the others, that is all of them). A tensor
 * with block scales is bounded by check_plan_size alone. */
rs_status rsi_planner_check_tensor_size(planner *p) {
  if (p->plan->conv[p->tensor].scales >= 0) return RS_OK;
  bool *exclusive = NULL;
  if (!p->src_disjoint) RSI_TRY(exclusive_sources(p, &exclusive));
  int64_t left = rsi_planner_moves_left(p), need = 0, each = 0, counted = -1,
          more;
  for (int64_t e = 0; e < p->nentries && need <= left; e++) {
    const domain_entry *en = &p->entries[e];
    if (p->only_domain >= 0 && en->domain != p->only_domain) continue;
    if (en->group != counted) { /* a group's entries come together */
      each = moves_into_at_least(p, &p->dgroups[en->group], exclusive, left);
      counted = en->group;
    }
    if (__builtin_mul_overflow(each, en->n, &more) ||
        __builtin_add_overflow(need, more, &need))
      need = INT64_MAX;
  }
  free(exclusive);
  if (need <= left) return RS_OK;
  char why[160];
  snprintf(why, sizeof why,
           ": its destination shards need at least %lld, one per piece of "
           "each source shard they meet",
           (long long)need);
  return rsi_planner_too_many_moves(p, why);
}
