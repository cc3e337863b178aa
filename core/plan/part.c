/* SPDX-License-Identifier: Apache-2.0 */
/* A plan's part (RS_PARAM_PLAN_PART): what one rank sends, receives,
 * forwards and copies. A scheduled plan keeps the messages with that rank
 * at either end, their moves in the same order, the relay slots those
 * moves name, the boxes of both, and of each side only that rank's shards
 * and buffers (an end of a move at another rank keeps its rank and kind,
 * its index becomes -1: only its own rank ever looks at it). Everything
 * else is freed, so what the part holds grows with the rank's share, not
 * with the world. The per-rank figures (stats, relay_bytes, nrounds), the
 * tensors and the fingerprint stay whole: they were counted before, and
 * the ranks still agree on a fingerprint of the same inputs.
 *
 * A message's moves are all kept or all dropped (a message is one round,
 * stage, sender and receiver), so the part's moves are a subsequence of
 * the whole plan's in the promised order (rs_plan_move_info), and a rank's
 * executor, which only looks at its own messages and its own ends of
 * them, runs a part exactly as it runs the whole plan. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* The box at pool offset `at` (ndim dims) appended to `to` (-2 when
 * memory ran out); a move without a box (RS_PARAM_PLAN_BOXES = 0) stays
 * without (-1). */
static int64_t copy_box(rsi_pool *to, const rsi_pool *from, int64_t at,
                        int ndim, rsi_err *err) {
  if (at < 0) return -1;
  int64_t got = rsi_pool_push(to, from->v + at, 2 * ndim, err);
  return got < 0 ? -2 : got;
}

/* Relay slot `old` of the whole plan as an index into the part's relays
 * (kept on first sight, with its box). */
static rs_status keep_relay(const rs_plan *plan, int64_t old, int ndim,
                            int64_t *relay_at, rsi_relay *relays,
                            int64_t *nrelays, rsi_pool *boxes, int32_t *index,
                            rsi_err *err) {
  if (relay_at[old] < 0) {
    rsi_relay r = plan->relays[old];
    r.box = copy_box(boxes, &plan->boxes, r.box, ndim, err);
    if (r.box == -2) return RS_ERR_NO_MEMORY;
    relays[*nrelays] = r;
    relay_at[old] = (*nrelays)++;
  }
  *index = (int32_t)relay_at[old];
  return RS_OK;
}

/* Side s cut to rank `rank`'s shards and buffers; map[i]: the new index
 * of shard i, -1 for another rank's. On failure the side is unchanged. */
static rs_status keep_side(const rs_plan *plan, rsi_side *s, int rank,
                           int64_t *map, rsi_err *err) {
  int64_t n = 0, geom = 0;
  for (int64_t i = 0; i < s->nshards; i++)
    if (s->shards[i].rank == rank) {
      n++;
      geom += 3 * plan->tensors[s->shards[i].tensor].ndim;
    }
  int64_t b0 = s->rank_first[rank], nb = s->rank_first[rank + 1] - b0;
  rsi_shard *shards = malloc((size_t)(n ? n : 1) * sizeof *shards);
  struct rsi_binding *buffers =
      malloc((size_t)(nb ? nb : 1) * sizeof *buffers);
  rsi_pool pool = {0};
  if (!shards || !buffers || rsi_pool_reserve(&pool, geom, err) != RS_OK) {
    free(shards);
    free(buffers);
    rsi_pool_free(&pool);
    return RSI_NOMEM(err);
  }
  int64_t k = 0;
  for (int64_t i = 0; i < s->nshards; i++) {
    map[i] = -1;
    if (s->shards[i].rank != rank) continue;
    shards[k] = s->shards[i];
    shards[k].geom = rsi_pool_push(
        &pool, s->pool.v + s->shards[i].geom,
        3 * plan->tensors[s->shards[i].tensor].ndim, err); /* reserved */
    map[i] = k++;
  }
  if (nb) memcpy(buffers, s->buffers + b0, (size_t)nb * sizeof *buffers);
  for (int r = 0; r <= plan->world_size; r++)
    s->rank_first[r] = r <= rank ? 0 : nb;
  free(s->shards);
  free(s->buffers);
  rsi_pool_free(&s->pool);
  s->shards = shards;
  s->nshards = n;
  s->buffers = buffers;
  s->pool = pool;
  return RS_OK;
}

/* A move's index at one end of kind `kind` in the part: a shard through
 * its side's map, a relay slot through keep_relay. */
static rs_status end_index(const rs_plan *plan, int64_t *const map[2],
                           int kind, int ndim, int64_t *relay_at,
                           rsi_relay *relays, int64_t *nrelays,
                           rsi_pool *boxes, int32_t *index, rsi_err *err) {
  if (kind == RSI_EP_RELAY)
    return keep_relay(plan, *index, ndim, relay_at, relays, nrelays, boxes,
                      index, err);
  *index = (int32_t)map[kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST][*index];
  return RS_OK;
}

rs_status rsi_plan_keep_part(rs_plan *plan, int rank, rsi_err *err) {
  int64_t nmsgs = 0, nmoves = 0, nboxes = 0;
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *g = &plan->msgs[i];
    if (g->src_rank != rank && g->dst_rank != rank) continue;
    nmsgs++;
    nmoves += g->nmoves;
    for (int64_t j = g->first_move; j < g->first_move + g->nmoves; j++)
      nboxes += 2 * plan->tensors[plan->moves[j].tensor].ndim;
  }
  rsi_message *msgs = malloc((size_t)(nmsgs ? nmsgs : 1) * sizeof *msgs);
  rsi_move *moves = malloc((size_t)(nmoves ? nmoves : 1) * sizeof *moves);
  /* a move names at most two relay slots */
  rsi_relay *relays =
      malloc((size_t)(nmoves ? 2 * nmoves : 1) * sizeof *relays);
  int64_t *relay_at =
      malloc((size_t)(plan->nrelays ? plan->nrelays : 1) * sizeof *relay_at);
  int64_t *map[2] = {
      malloc((size_t)(plan->side[0].nshards ? plan->side[0].nshards : 1) *
             sizeof *map[0]),
      malloc((size_t)(plan->side[1].nshards ? plan->side[1].nshards : 1) *
             sizeof *map[1])};
  rsi_pool boxes = {0};
  rs_status st = msgs && moves && relays && relay_at && map[0] && map[1]
                     ? RS_OK
                     : RSI_NOMEM(err);
  if (st == RS_OK) st = rsi_pool_reserve(&boxes, nboxes, err);
  /* the second side failing leaves the first cut: the plan is destroyed */
  for (int side = 0; side < 2 && st == RS_OK; side++)
    st = keep_side(plan, &plan->side[side], rank, map[side], err);
  for (int64_t i = 0; st == RS_OK && i < plan->nrelays; i++) relay_at[i] = -1;
  int64_t k = 0, nk = 0, nr = 0;
  for (int64_t i = 0; st == RS_OK && i < plan->nmsgs; i++) {
    const rsi_message *g = &plan->msgs[i];
    if (g->src_rank != rank && g->dst_rank != rank) continue;
    msgs[nk] = *g;
    msgs[nk++].first_move = k;
    for (int64_t j = g->first_move;
         st == RS_OK && j < g->first_move + g->nmoves; j++) {
      rsi_move m = plan->moves[j];
      int nd = plan->tensors[m.tensor].ndim;
      m.box = copy_box(&boxes, &plan->boxes, m.box, nd, err);
      if (m.box == -2) st = RS_ERR_NO_MEMORY;
      if (st == RS_OK)
        st = end_index(plan, map, m.src_kind, nd, relay_at, relays, &nr,
                       &boxes, &m.src_index, err);
      if (st == RS_OK)
        st = end_index(plan, map, m.dst_kind, nd, relay_at, relays, &nr,
                       &boxes, &m.dst_index, err);
      moves[k++] = m;
    }
  }
  free(relay_at);
  free(map[0]);
  free(map[1]);
  if (st != RS_OK) {
    free(msgs);
    free(moves);
    free(relays);
    rsi_pool_free(&boxes);
    return st;
  }
  free(plan->msgs);
  free(plan->moves);
  free(plan->relays);
  rsi_pool_free(&plan->boxes);
  plan->msgs = msgs;
  plan->nmsgs = nmsgs;
  plan->moves = moves;
  plan->nmoves = plan->cap_moves = nmoves;
  rsi_relay *fit = realloc(relays, (size_t)(nr ? nr : 1) * sizeof *relays);
  plan->relays = fit ? fit : relays;
  plan->nrelays = plan->cap_relays = nr;
  plan->boxes = boxes;
  plan->part = rank;
  return RS_OK;
}
