/* SPDX-License-Identifier: Apache-2.0 */
/* A rank's part planned by the rank itself (docs/PLANNING.md, "A rank's
 * part, planned by the rank"). With rounds by domain pair, every round of
 * a move follows from the moves into the domain it lands in, so a rank of
 * an MPI context plans its own domain's part (rsi_plan_create_domain's
 * planner) and learns the rest of its part from the other domains in one
 * exchange: each rank tells every rank outside its domain the moves that
 * rank sends it (crossings, and hops down a chain from an earlier domain),
 * with their rounds. Its part is then its domain's moves with it at an end
 * and the moves it was told of, the same moves in the same order as the
 * whole plan's part (RS_PARAM_PLAN_PART), which the MPI property tests
 * check. A last allgather gives every rank the figures of every other and
 * the whole plan's rounds, so that rs_plan_stat, RS_STAT_ROUNDS and the
 * rounds of rs_plan_move_info read as the whole plan's. */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "plan.h"
#include "sigpipe.h"
#include "status.h"
#include "transport/transport.h"

/* ---- a move told to its sender --------------------------------------- */

/* A move as words: its fields, then the receiving end's relay slot (when
 * it lands in one), its box and the slot's box. */
enum { HEAD_WORDS = 10, RELAY_WORDS = 6 };

static int64_t record_words(const rs_plan *plan, const rsi_move *m) {
  int nd = plan->tensors[m->tensor].ndim;
  int64_t n = HEAD_WORDS + (m->box >= 0 ? 2 * nd : 0);
  if (m->dst_kind == RSI_EP_RELAY) {
    const rsi_relay *r = &plan->relays[m->dst_index];
    n += RELAY_WORDS + (r->box >= 0 ? 2 * nd : 0);
  }
  return n;
}

static int64_t *put_record(const rs_plan *plan, const rsi_move *m,
                           int64_t *w) {
  int nd = plan->tensors[m->tensor].ndim;
  const rsi_relay *r =
      m->dst_kind == RSI_EP_RELAY ? &plan->relays[m->dst_index] : NULL;
  w[0] = m->tensor;
  w[1] = m->src_rank;
  w[2] = m->dst_rank;
  w[3] = m->src_index;
  w[4] = m->src_kind | m->dst_kind << 2 | m->stage << 4 | m->forwarded << 5 |
         m->computes_scales << 6 | m->route << 7 | m->contiguous << 9;
  w[5] = m->bytes;
  w[6] = m->round;
  w[7] = m->src_dtype | m->wire_dtype << 8 | m->dst_dtype << 16;
  w[8] = m->box >= 0;
  w[9] = r != NULL;
  w += HEAD_WORDS;
  if (r) {
    int64_t head[RELAY_WORDS] = {r->rank,  r->round, r->staging_offset,
                                 r->bytes, r->dtype, r->box >= 0};
    memcpy(w, head, sizeof head);
    w += RELAY_WORDS;
  }
  if (m->box >= 0) {
    memcpy(w, plan->boxes.v + m->box, (size_t)(2 * nd) * sizeof *w);
    w += 2 * nd;
  }
  if (r && r->box >= 0) {
    memcpy(w, plan->boxes.v + r->box, (size_t)(2 * nd) * sizeof *w);
    w += 2 * nd;
  }
  return w;
}

/* ---- the exchange ------------------------------------------------------ */

/* What this rank tells the others: the moves of its domain's part that
 * land on it from a rank of another domain, to their senders, in plan
 * order. *out (malloc'd) packed by sender; counts[q] bytes for rank q. */
static rs_status pack_told(const rs_plan *plan, int me, const int32_t *dix,
                           int64_t **out, size_t *counts, rsi_err *err) {
  int W = plan->world_size;
  int64_t *first = calloc((size_t)W + 1, sizeof *first);
  if (!first) return RSI_NOMEM(err);
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    if (m->dst_rank == me && dix[m->src_rank] != dix[me])
      first[m->src_rank + 1] += record_words(plan, m);
  }
  for (int q = 0; q < W; q++) {
    counts[q] = (size_t)first[q + 1] * sizeof(int64_t);
    first[q + 1] += first[q];
  }
  int64_t *w = malloc((size_t)(first[W] ? first[W] : 1) * sizeof *w);
  if (!w) {
    free(first);
    return RSI_NOMEM(err);
  }
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    if (m->dst_rank == me && dix[m->src_rank] != dix[me])
      first[m->src_rank] = put_record(plan, m, w + first[m->src_rank]) - w;
  }
  free(first);
  *out = w;
  return RS_OK;
}

/* new_index[i] of side s: shard i's place among rank me's shards (what
 * rsi_plan_keep_part numbers them), -1 for another rank's. */
static int64_t *own_shard_index(const rsi_side *side, int me, rsi_err *err) {
  int64_t *map = malloc((size_t)(side->nshards ? side->nshards : 1) *
                        sizeof *map);
  if (!map) {
    RSI_NOMEM(err);
    return NULL;
  }
  int64_t k = 0;
  for (int64_t i = 0; i < side->nshards; i++)
    map[i] = side->shards[i].rank == me ? k++ : -1;
  return map;
}

static rs_status told_wrong(rsi_err *err, int from, const char *what) {
  return RSI_FAIL(err, RS_ERR_INTERNAL,
                  "planning this rank's part: rank %d told it of a move "
                  "%s",
                  from, what);
}

/* The whole sides' shards renumbered for the part (own_shard_index):
 * map[side], of n[side] shards. */
typedef struct shard_maps {
  int64_t *map[2];
  int64_t n[2];
} shard_maps;

/* The words of the record at w, of at most `left`; 0 when it is none
 * (a peer of other inputs or another version may send anything: its
 * part is refused then, or at the first execution's agreement). */
static int64_t told_words(const rs_plan *plan, const int64_t *w,
                          int64_t left) {
  if (left < HEAD_WORDS || w[0] < 0 || w[0] >= plan->ntensors) return 0;
  int64_t nd = plan->tensors[w[0]].ndim, n = HEAD_WORDS;
  if (w[9] && left >= HEAD_WORDS + RELAY_WORDS)
    n += RELAY_WORDS + (w[HEAD_WORDS + 5] ? 2 * nd : 0);
  else if (w[9])
    return 0;
  n += w[8] ? 2 * nd : 0;
  return n <= left ? n : 0;
}

/* Append the moves told (recv, counts by rank) to the part: its own
 * shards renumbered, their boxes and slots copied. */
static rs_status append_told(rs_plan *plan, int me, const int64_t *recv,
                             const size_t *counts, const shard_maps *maps,
                             rsi_err *err) {
  int W = plan->world_size;
  int64_t n = 0, at = 0;
  for (int q = 0; q < W; q++) { /* count and check the records */
    if (counts[q] % sizeof *recv)
      return told_wrong(err, q, "in a message of a partial word");
    for (int64_t end = at + (int64_t)(counts[q] / sizeof *recv); at < end;
         n++) {
      int64_t k = told_words(plan, recv + at, end - at);
      if (!k) return told_wrong(err, q, "in a record it cannot read");
      at += k;
    }
  }
  rsi_move *moves =
      realloc(plan->moves, (size_t)(plan->nmoves + n + 1) * sizeof *moves);
  if (!moves) return RSI_NOMEM(err);
  plan->moves = moves;
  plan->cap_moves = plan->nmoves + n;
  rsi_relay *relays =
      realloc(plan->relays, (size_t)(plan->nrelays + n + 1) * sizeof *relays);
  if (!relays) return RSI_NOMEM(err);
  plan->relays = relays;
  plan->cap_relays = plan->nrelays + n;
  at = 0;
  for (int q = 0; q < W; q++) {
    int64_t end = at + (int64_t)(counts[q] / sizeof *recv);
    while (at < end) {
      const int64_t *w = recv + at;
      if (w[1] != me || w[2] != q)
        return told_wrong(err, q, "that is not between the two");
      int nd = plan->tensors[w[0]].ndim;
      rsi_move m = {0};
      m.tensor = (int32_t)w[0];
      m.src_rank = (int32_t)w[1];
      m.dst_rank = (int32_t)w[2];
      m.src_kind = w[4] & 3;
      m.dst_kind = w[4] >> 2 & 3;
      m.stage = w[4] >> 4 & 1;
      m.forwarded = w[4] >> 5 & 1;
      m.computes_scales = w[4] >> 6 & 1;
      m.route = w[4] >> 7 & 3;
      m.contiguous = w[4] >> 9 & 3;
      m.bytes = w[5];
      m.round = (int32_t)w[6];
      m.src_dtype = w[7] & 0xff;
      m.wire_dtype = w[7] >> 8 & 0xff;
      m.dst_dtype = w[7] >> 16 & 0xff;
      m.dst_index = -1;
      /* a slot of the sender lives for one step: nothing forwards from
       * it into another domain, which runs in a later round */
      if (m.src_kind == RSI_EP_RELAY)
        return told_wrong(err, q, "out of a relay slot of this rank");
      if (m.src_kind > RSI_EP_RELAY || m.dst_kind == RSI_EP_SRC ||
          m.dst_kind > RSI_EP_RELAY || (m.dst_kind == RSI_EP_RELAY) != !!w[9] ||
          m.bytes < 0 || m.round < 0)
        return told_wrong(err, q, "it cannot read");
      int side = m.src_kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST;
      if (w[3] < 0 || w[3] >= maps->n[side])
        return told_wrong(err, q, "from a shard that is none");
      m.src_index = (int32_t)maps->map[side][w[3]];
      if (m.src_index < 0)
        return told_wrong(err, q, "from another rank's shard");
      at += HEAD_WORDS;
      rsi_relay slot = {0};
      bool slot_box = false;
      if (w[9]) {
        const int64_t *r = recv + at;
        slot = (rsi_relay){(int32_t)r[0], (int32_t)r[1], -1, r[2], r[3],
                           (uint8_t)r[4]};
        slot_box = r[5] != 0;
        at += RELAY_WORDS;
      }
      m.box = -1;
      if (w[8]) {
        m.box = rsi_pool_push(&plan->boxes, recv + at, 2 * nd, err);
        if (m.box < 0) return RS_ERR_NO_MEMORY;
        at += 2 * nd;
      }
      if (w[9]) {
        slot.box = -1;
        if (slot_box) {
          slot.box = rsi_pool_push(&plan->boxes, recv + at, 2 * nd, err);
          if (slot.box < 0) return RS_ERR_NO_MEMORY;
          at += 2 * nd;
        }
        m.dst_index = (int32_t)plan->nrelays;
        plan->relays[plan->nrelays++] = slot;
      }
      plan->moves[plan->nmoves++] = m;
    }
  }
  return RS_OK;
}

/* ---- the figures ------------------------------------------------------- */

/* What every rank gives the last allgather: whether its part was made,
 * its own figures and relay staging, and (the first rank of each domain)
 * the rounds of its domain's part. */
enum { STAT_WORDS = sizeof(rsi_rank_stats) / sizeof(int64_t) };
_Static_assert(sizeof(rsi_rank_stats) % sizeof(int64_t) == 0,
               "the figures are words");
enum { FIGURE_WORDS = 3 + STAT_WORDS }; /* status, relay, nlabels, stats */

static rs_status share_refusal(rsi_transport *tp, int world, rs_status st,
                               int64_t timeout_ms, rsi_err *err);

static rs_status share_figures(rs_plan *plan, int me, bool first_of_domain,
                               rs_status mine, rsi_transport *tp,
                               int64_t timeout_ms, rsi_err *err) {
  int W = plan->world_size;
  if (mine != RS_OK) return share_refusal(tp, W, mine, timeout_ms, err);
  int64_t nl = first_of_domain ? plan->nrounds : 0;
  int64_t *out = malloc((size_t)(FIGURE_WORDS + nl) * sizeof *out);
  size_t *counts = malloc((size_t)W * sizeof *counts);
  if (!out || !counts) {
    free(out);
    free(counts);
    return RSI_NOMEM(err);
  }
  out[0] = RS_OK;
  out[1] = plan->relay_bytes[me];
  out[2] = nl;
  memcpy(out + 3, &plan->stats[me], sizeof plan->stats[me]);
  for (int64_t i = 0; i < nl; i++) out[FIGURE_WORDS + i] = plan->round_labels[i];
  void *all = NULL;
  rs_status st = tp->control->allgatherv(
      tp, out, (size_t)(FIGURE_WORDS + nl) * sizeof *out, &all, counts,
      timeout_ms, err);
  free(out);
  if (st != RS_OK) {
    free(counts);
    return st;
  }
  const int64_t *w = all;
  int64_t labels = 0, at = 0;
  for (int q = 0; q < W; q++) {
    if (counts[q] < FIGURE_WORDS * sizeof *w ||
        counts[q] != (size_t)(FIGURE_WORDS + w[at + 2]) * sizeof *w) {
      st = RSI_FAIL(err, RS_ERR_INTERNAL,
                    "planning this rank's part: rank %d's figures are "
                    "%zu bytes",
                    q, counts[q]);
      break;
    }
    if (w[at] != RS_OK) {
      st = RSI_FAIL(err, (rs_status)w[at],
                    "rank %d could not plan its part of the plan (%s); "
                    "the plan is made by every rank together",
                    q, rsi_status_name((rs_status)w[at]));
      break;
    }
    labels += w[at + 2];
    at += FIGURE_WORDS + w[at + 2];
  }
  int32_t *merged = NULL;
  if (st == RS_OK &&
      !(merged = malloc((size_t)(labels ? labels : 1) * sizeof *merged)))
    st = RSI_NOMEM(err);
  if (st == RS_OK) {
    int64_t k = 0;
    at = 0;
    for (int q = 0; q < W; q++) {
      plan->relay_bytes[q] = w[at + 1];
      memcpy(&plan->stats[q], w + at + 3, sizeof plan->stats[q]);
      for (int64_t i = 0; i < w[at + 2]; i++)
        merged[k++] = (int32_t)w[at + FIGURE_WORDS + i];
      at += FIGURE_WORDS + w[at + 2];
    }
    k = rsi_sort_unique_int32(merged, k);
    free(plan->round_labels);
    plan->round_labels = merged;
    plan->nrounds = (int)k;
    merged = NULL;
  }
  free(merged);
  free(all);
  free(counts);
  return st;
}

/* What a rank gives the allgather when it has no part to show. */
static rs_status share_refusal(rsi_transport *tp, int world, rs_status st,
                               int64_t timeout_ms, rsi_err *err) {
  int64_t out[FIGURE_WORDS] = {st};
  size_t *counts = malloc((size_t)world * sizeof *counts);
  void *all = NULL;
  rs_status got = counts ? tp->control->allgatherv(tp, out, sizeof out, &all,
                                                  counts, timeout_ms, err)
                         : RS_ERR_NO_MEMORY;
  free(all);
  free(counts);
  return got;
}

/* ---- the part ---------------------------------------------------------- */

rs_status rsi_plan_rank_part(rs_plan *plan, rs_status made, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  int me = ctx->rank, W = plan->world_size;
  int32_t *dix = NULL, nd = 0;
  int64_t *told = NULL;
  shard_maps maps = {{NULL, NULL}, {0, 0}};
  void *recv = NULL;
  size_t *sc = calloc((size_t)W, sizeof *sc);
  size_t *rc = calloc((size_t)W, sizeof *rc);
  rs_status st = made;
  if (st == RS_OK && (!sc || !rc)) st = RSI_NOMEM(err);
  if (st == RS_OK && !(dix = malloc((size_t)W * sizeof *dix)))
    st = RSI_NOMEM(err);
  if (st == RS_OK && !rsi_plan_number_domains(plan, dix, NULL, &nd))
    st = RSI_NOMEM(err);
  bool first_of_domain = true;
  for (int q = 0; st == RS_OK && q < me; q++)
    if (dix[q] == dix[me]) first_of_domain = false;
  if (st == RS_OK) st = pack_told(plan, me, dix, &told, sc, err);
  for (int k = 0; st == RS_OK && k < 2; k++) {
    maps.n[k] = plan->side[k].nshards;
    if (!(maps.map[k] = own_shard_index(&plan->side[k], me, err)))
      st = RS_ERR_NO_MEMORY;
  }
  if (st != RS_OK && sc) memset(sc, 0, (size_t)W * sizeof *sc);
  /* Every rank takes part in both collectives, also one whose own part
   * failed: it tells nothing, and says so with its figures; its own
   * error stays the one it reports. */
  rs_status shared = RS_ERR_NO_MEMORY;
  rsi_err scratch = {0};
  if (sc && rc) {
    rsi_sigpipe_hold h; /* the collectives write to peers */
    rsi_sigpipe_hold_begin(&h);
    shared = tp->control->alltoallv(tp, told ? (void *)told : (void *)sc, sc,
                                    &recv, rc, ctx->timeout_ms,
                                    st == RS_OK ? err : &scratch);
    if (st == RS_OK && shared == RS_OK)
      st = rsi_plan_keep_part(plan, me, err);
    if (st == RS_OK && shared == RS_OK)
      st = append_told(plan, me, recv, rc, &maps, err);
    if (st == RS_OK && shared == RS_OK) {
      memset(plan->stats, 0, (size_t)W * sizeof *plan->stats);
      st = rsi_plan_regroup(plan, err);
    }
    if (shared == RS_OK)
      shared = share_figures(plan, me, first_of_domain, st, tp,
                             ctx->timeout_ms, st == RS_OK ? err : &scratch);
    rsi_sigpipe_hold_end(&h);
  }
  if (shared == RS_ERR_TIMEOUT || shared == RS_ERR_TRANSPORT)
    rsi_context_fail(ctx);
  if (st == RS_OK) st = shared;
  if (st == RS_OK) {
    plan->part = me;
    plan->domain_part = false; /* it runs, with the others' parts */
  }
  free(sc);
  free(rc);
  free(dix);
  free(told);
  free(maps.map[0]);
  free(maps.map[1]);
  free(recv);
  return st;
}

rs_status rsi_plan_rank_refused(rs_context *ctx, rs_status refused) {
  rsi_transport *tp = ctx->transport;
  int W = ctx->world_size;
  size_t *sc = calloc((size_t)W, sizeof *sc), *rc = malloc((size_t)W * sizeof *rc);
  void *recv = NULL;
  rsi_err scratch = {0}; /* the refusal stays this rank's error */
  rs_status shared = RS_ERR_NO_MEMORY;
  if (sc && rc) {
    rsi_sigpipe_hold h;
    rsi_sigpipe_hold_begin(&h);
    shared = tp->control->alltoallv(tp, sc, sc, &recv, rc, ctx->timeout_ms,
                                    &scratch);
    if (shared == RS_OK)
      shared = share_refusal(tp, W, refused, ctx->timeout_ms, &scratch);
    rsi_sigpipe_hold_end(&h);
  }
  if (shared == RS_ERR_TIMEOUT || shared == RS_ERR_TRANSPORT)
    rsi_context_fail(ctx);
  free(sc);
  free(rc);
  free(recv);
  return refused;
}
