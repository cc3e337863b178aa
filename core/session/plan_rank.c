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
#include "session/plan_rank.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/context.h"
#include "base/dtype.h"
#include "base/status.h"
#include "plan/staging.h"
#include "session/collective.h"
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

/* A told move that fails a check: the exchange is damaged, or the peer
 * planned from other inputs; nothing of it is used. */
static rs_status told_wrong(rsi_err *err, int from, const char *what) {
  return RSI_FAIL(err, RS_ERR_CORRUPT,
                  "planning this rank's part: rank %d told it of a move %s",
                  from, what);
}

/* The whole sides' shards renumbered for the part (own_shard_index):
 * map[side], of n[side] shards. */
typedef struct shard_maps {
  int64_t *map[2];
  int64_t n[2];
} shard_maps;

/* The words of the record at w, of at most `left`; 0 when it is none. */
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

static bool known_dtype(int64_t d) {
  return d > 0 && d < 256 && rsi_dtype_size((rs_dtype)d) > 0;
}

/* A box of tensor t (offset then extent, nd each) inside its shape, and
 * its bytes in dtype d: -1 when it is not. */
static int64_t box_bytes(const rs_plan *plan, int t, const int64_t *box,
                         int64_t d) {
  const rsi_tensor *tn = &plan->tensors[t];
  int64_t n = (int64_t)rsi_dtype_size((rs_dtype)d);
  for (int k = 0; k < tn->ndim; k++) {
    int64_t off = box[k], ext = box[tn->ndim + k];
    if (off < 0 || ext < 1 || ext > tn->shape[k] - off ||
        __builtin_mul_overflow(n, ext, &n))
      return -1;
  }
  return n;
}

/* Whether the box lies inside shard s's box. */
static bool inside_shard(const rsi_side *side, const rsi_shard *s, int nd,
                         const int64_t *box) {
  const int64_t *off = rsi_shard_offset(&side->pool, s);
  const int64_t *ext = rsi_shard_extent(&side->pool, s, nd);
  for (int k = 0; k < nd; k++)
    if (box[k] < off[k] || box[nd + k] > off[k] + ext[k] - box[k]) return false;
  return true;
}

/* The element type this rank's end of a move of tensor t reads from. */
static int64_t own_end_dtype(const rs_plan *plan, const rsi_move *m) {
  if (m->computes_scales)
    return plan->conv[plan->conv[m->tensor].values].src_dtype;
  return m->src_kind == RSI_EP_SRC ? plan->conv[m->tensor].src_dtype
                                   : plan->conv[m->tensor].dst_dtype;
}

/* Check a decoded move from rank q (its head words at w) against this
 * rank's own layouts before any of it is used: the ends are this rank
 * and q, in other domains; the source end is a shard of this rank of the
 * right tensor; the box lies inside the tensor and the shard; bytes,
 * dtypes, route and contiguity are what they must be. */
static rs_status check_told(const rs_plan *plan, int q, const rsi_move *m,
                            const int64_t *w, const int64_t *box,
                            const rsi_relay *slot, const int64_t *slot_box,
                            rsi_err *err) {
  int t = m->tensor, nd = plan->tensors[t].ndim;
  const rsi_conversion *cv = &plan->conv[t];
  if (m->src_kind != RSI_EP_SRC && m->src_kind != RSI_EP_DST)
    return told_wrong(err, q, "from no shard of this rank");
  const rsi_side *side = &plan->side[m->src_kind == RSI_EP_SRC ? RS_SIDE_SRC
                                                               : RS_SIDE_DST];
  const rsi_shard *s = &side->shards[m->src_index];
  if (m->computes_scales && cv->values < 0)
    return told_wrong(err, q, "that computes scales it cannot");
  if (s->tensor != (m->computes_scales ? cv->values : t))
    return told_wrong(err, q, "out of a shard of another tensor");
  if (w[5] < 1 || w[6] < 0 || w[6] > INT32_MAX)
    return told_wrong(err, q, "of no bytes or no round");
  if (!known_dtype(m->src_dtype) || !known_dtype(m->wire_dtype) ||
      !known_dtype(m->dst_dtype) || m->src_dtype != own_end_dtype(plan, m) ||
      (m->wire_dtype != m->src_dtype && m->wire_dtype != m->dst_dtype) ||
      (m->dst_kind == RSI_EP_DST && m->dst_dtype != cv->dst_dtype))
    return told_wrong(err, q, "in element types it does not hold");
  if (m->route != RS_ROUTE_INTER ||
      plan->domain_of[q] == plan->domain_of[m->src_rank])
    return told_wrong(err, q, "within its own domain");
  if (plan->keeps_boxes != (box != NULL))
    return told_wrong(err, q, "without the box the plan keeps");
  if (box) {
    if (box_bytes(plan, t, box, m->wire_dtype) != m->bytes)
      return told_wrong(err, q,
                        "whose box is outside the tensor or not its bytes");
    if (!m->computes_scales && !inside_shard(side, s, nd, box))
      return told_wrong(err, q, "outside the shard it reads");
  }
  bool plain = m->src_dtype == m->dst_dtype && !m->computes_scales;
  if ((m->contiguous & 1) &&
      !(plain && box && rsi_shard_box_contiguous(plan,
                                                 m->src_kind == RSI_EP_SRC
                                                     ? RS_SIDE_SRC
                                                     : RS_SIDE_DST,
                                                 m->src_index, nd, box + nd)))
    return told_wrong(err, q, "read as one run where it is not");
  if (slot) {
    if (slot->rank != q || slot->round < 0 || !known_dtype(slot->dtype) ||
        slot->dtype != m->dst_dtype || slot->bytes < m->bytes / 
        (int64_t)rsi_dtype_size((rs_dtype)m->wire_dtype) *
        (int64_t)rsi_dtype_size((rs_dtype)m->dst_dtype))
      return told_wrong(err, q, "into a relay slot it cannot have");
    if (slot_box && box_bytes(plan, t, slot_box, slot->dtype) != slot->bytes)
      return told_wrong(err, q, "into a slot outside the tensor");
  }
  return RS_OK;
}

/* Append the moves told (recv, counts by rank) to the part: its own
 * shards renumbered, their boxes and slots copied. Every record is read
 * whole and checked (check_told) before it is used. */
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
      if (w[4] < 0 || w[4] >= 1 << 11 || w[7] < 0 || w[7] >= 1 << 24)
        return told_wrong(err, q, "it cannot read");
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
      m.round = (int32_t)(w[6] & INT32_MAX);
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
          (w[8] != 0 && w[8] != 1) || (w[9] != 0 && w[9] != 1))
        return told_wrong(err, q, "it cannot read");
      int side = m.src_kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST;
      if (w[3] < 0 || w[3] >= maps->n[side])
        return told_wrong(err, q, "from a shard that is none");
      m.src_index = (int32_t)maps->map[side][w[3]];
      if (m.src_index < 0)
        return told_wrong(err, q, "from another rank's shard");
      const int64_t *r = w[9] ? w + HEAD_WORDS : NULL;
      const int64_t *box = w + HEAD_WORDS + (r ? RELAY_WORDS : 0);
      const int64_t *slot_box = r && r[5] ? box + (w[8] ? 2 * nd : 0) : NULL;
      rsi_relay slot = {0};
      if (r) {
        if (r[0] < 0 || r[0] >= W || r[1] < 0 || r[1] > INT32_MAX ||
            r[2] < -1 || r[3] < 1 || r[4] < 0 || r[4] > 0xff ||
            (r[5] != 0 && r[5] != 1))
          return told_wrong(err, q, "into a relay slot it cannot read");
        slot = (rsi_relay){(int32_t)r[0], (int32_t)r[1], -1, r[2], r[3],
                           (uint8_t)r[4]};
      }
      RSI_TRY(check_told(plan, q, &m, w, w[8] ? box : NULL, r ? &slot : NULL,
                         slot_box, err));
      at += told_words(plan, w, end - at);
      m.box = -1;
      if (w[8]) {
        m.box = rsi_pool_push(&plan->boxes, box, 2 * nd, err);
        if (m.box < 0) return RS_ERR_NO_MEMORY;
      }
      if (r) {
        if (slot_box) {
          slot.box = rsi_pool_push(&plan->boxes, slot_box, 2 * nd, err);
          if (slot.box < 0) return RS_ERR_NO_MEMORY;
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

/* What every rank gives the allgather: its status so far, its own figures
 * and relay staging, and (the first rank of each domain) the rounds of its
 * domain's part; a rank that failed gives its status alone. */
enum { STAT_WORDS = sizeof(rsi_rank_stats) / sizeof(int64_t) };
_Static_assert(sizeof(rsi_rank_stats) % sizeof(int64_t) == 0,
               "the figures are words");
enum { FIGURE_WORDS = 3 + STAT_WORDS }; /* status, relay, nlabels, stats */

/* Rank q's record of the figures (n words at w) read whole: its status,
 * or RS_ERR_CORRUPT when it is not a record. */
static rs_status figures_of(const int64_t *w, size_t n, int q, rsi_err *err) {
  if (n < FIGURE_WORDS || w[2] < 0 || w[2] > INT32_MAX ||
      n != (size_t)(FIGURE_WORDS + w[2]) || w[1] < 0)
    return RSI_FAIL(err, RS_ERR_CORRUPT,
                    "planning this rank's part: rank %d's figures are %zu "
                    "words, not a record",
                    q, n);
  for (int64_t i = 0; i < w[2]; i++)
    if (w[FIGURE_WORDS + i] < 0 || w[FIGURE_WORDS + i] > INT32_MAX)
      return RSI_FAIL(err, RS_ERR_CORRUPT,
                      "planning this rank's part: rank %d's figures name "
                      "round %lld",
                      q, (long long)w[FIGURE_WORDS + i]);
  if (w[0] != RS_OK)
    return RSI_FAIL(err, (rs_status)w[0],
                    "rank %d could not plan its part of the plan (%s); "
                    "the plan is made by every rank together",
                    q, rsi_status_name((rs_status)w[0]));
  return RS_OK;
}

/* Share the figures (plan NULL or mine failed: share the status alone);
 * on success every rank's figures and the whole plan's rounds are in
 * plan. */
static rs_status share_figures(rs_context *ctx, rs_plan *plan,
                               bool first_of_domain, rs_status mine,
                               rsi_err *err) {
  int W = ctx->world_size, me = ctx->rank;
  int64_t nl = mine == RS_OK && first_of_domain ? plan->nrounds : 0;
  int64_t *out = calloc((size_t)(FIGURE_WORDS + nl), sizeof *out);
  size_t *counts = malloc((size_t)W * sizeof *counts);
  if (!out || !counts) {
    free(out);
    free(counts);
    return RSI_NOMEM(err);
  }
  out[0] = mine;
  if (mine == RS_OK) {
    out[1] = plan->relay_bytes[me];
    out[2] = nl;
    memcpy(out + 3, &plan->stats[me], sizeof plan->stats[me]);
    for (int64_t i = 0; i < nl; i++)
      out[FIGURE_WORDS + i] = plan->round_labels[i];
  }
  void *all = NULL;
  rs_status st = rsi_coll_allgatherv(
      ctx, out, (size_t)(FIGURE_WORDS + nl) * sizeof *out, &all, counts, err);
  free(out);
  const int64_t *w = all;
  int64_t labels = 0, at = 0;
  for (int q = 0; st == RS_OK && q < W; q++) {
    size_t n = counts[q] / sizeof *w;
    if (counts[q] % sizeof *w || (st = figures_of(w + at, n, q, err)) != RS_OK)
      break;
    labels += w[at + 2];
    at += (int64_t)n;
  }
  if (mine != RS_OK) st = RS_OK; /* this rank's own failure stands */
  int32_t *merged = NULL;
  if (mine == RS_OK && st == RS_OK &&
      !(merged = malloc((size_t)(labels ? labels : 1) * sizeof *merged)))
    st = RSI_NOMEM(err);
  if (mine == RS_OK && st == RS_OK) {
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

/* Every told move's round is one of the whole plan's (known once the
 * figures are shared): a move of another round would never run. */
static rs_status check_rounds(const rs_plan *plan, rsi_err *err) {
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int32_t at = rsi_plan_public_round(plan, m->round);
    if (at >= plan->nrounds || plan->round_labels[at] != m->round)
      return told_wrong(err, m->dst_rank == plan->part ? m->src_rank
                                                       : m->dst_rank,
                        "in a round the plan does not have");
  }
  return RS_OK;
}

/* ---- the part ---------------------------------------------------------- */

/* This rank's share of the exchange: the all-to-all of told moves, the
 * figures, the verdict. Every rank takes part in all three whatever
 * failed before (st, recorded in err), unless the control channel itself
 * failed (the context is then done), so that every rank of the plan ends
 * with the same outcome; a rank's own failure stays the one it reports.
 * plan is NULL when the rank refused before planning. */
static rs_status take_part(rs_context *ctx, rs_plan *plan, rs_status st,
                           rsi_err *err) {
  int me = ctx->rank, W = ctx->world_size;
  int32_t *dix = NULL, nd = 0;
  int64_t *told = NULL;
  shard_maps maps = {{NULL, NULL}, {0, 0}};
  void *recv = NULL;
  size_t *sc = calloc((size_t)W, sizeof *sc);
  size_t *rc = calloc((size_t)W, sizeof *rc);
  bool first_of_domain = true;
  if (!sc || !rc) {
    st = st == RS_OK ? RSI_NOMEM(err) : st;
    goto out; /* no exchange without memory: the peers time out */
  }
  if (st == RS_OK && !(dix = malloc((size_t)W * sizeof *dix)))
    st = RSI_NOMEM(err);
  if (st == RS_OK && !rsi_plan_number_domains(plan, dix, NULL, &nd))
    st = RSI_NOMEM(err);
  for (int q = 0; st == RS_OK && q < me; q++)
    if (dix[q] == dix[me]) first_of_domain = false;
  if (st == RS_OK) st = pack_told(plan, me, dix, &told, sc, err);
  for (int k = 0; st == RS_OK && k < 2; k++) {
    maps.n[k] = plan->side[k].nshards;
    if (!(maps.map[k] = own_shard_index(&plan->side[k], me, err)))
      st = RS_ERR_NO_MEMORY;
  }
  if (st != RS_OK) memset(sc, 0, (size_t)W * sizeof *sc);
  rsi_err scratch = {0}; /* what fails after this rank's own failure */
  rs_status got = rsi_coll_alltoallv(ctx, told ? (void *)told : (void *)sc,
                                     sc, &recv, rc,
                                     st == RS_OK ? err : &scratch);
  if (st == RS_OK) st = got;
  if (ctx->failed) goto out;
  if (st == RS_OK) st = rsi_plan_keep_part(plan, me, err);
  if (st == RS_OK) st = append_told(plan, me, recv, rc, &maps, err);
  if (st == RS_OK) {
    memset(plan->stats, 0, (size_t)W * sizeof *plan->stats);
    st = rsi_plan_regroup(plan, err);
  }
  got = share_figures(ctx, plan, first_of_domain, st,
                      st == RS_OK ? err : &scratch);
  if (st == RS_OK) st = got;
  if (ctx->failed) goto out;
  if (st == RS_OK) {
    plan->part = me;
    st = check_rounds(plan, err);
  }
  st = rsi_coll_verdict(ctx, st, "rs_plan_create (per-rank planning)", err);
out:
  free(sc);
  free(rc);
  free(dix);
  free(told);
  free(maps.map[0]);
  free(maps.map[1]);
  free(recv);
  return st;
}

bool rsi_plan_per_rank(const rs_context *ctx) {
  const rsi_transport *tp = ctx->transport;
  return ctx->rank != RS_ALL_RANKS && ctx->plan_part == ctx->rank &&
         ctx->rounds == RS_ROUNDS_BY_DOMAIN_PAIR && tp && tp->control;
}

/* The plan of the whole world, or this rank's part of it and the
 * exchange of parts (rsi_session_plan_create). */
static rs_status plan_create(const rs_layout *src, const rs_layout *dst,
                             rs_plan **out) {
  rs_context *ctx = src->ctx;
  if (dst->ctx != ctx || !rsi_plan_per_rank(ctx))
    return rsi_plan_create(src, dst, out);
  /* Its domain's part, then the exchange, which a rank refused before it
   * had a plan takes part in all the same (telling nothing), so that its
   * peers fail at once instead of waiting. */
  rs_plan *plan = NULL;
  rs_status st = rsi_plan_create_domain(src, dst, ctx->domain_of[ctx->rank],
                                        &plan);
  st = take_part(ctx, st == RS_OK ? plan : NULL, st, ctx->err);
  if (st != RS_OK) {
    rsi_plan_destroy(plan);
    return st;
  }
  plan->part = ctx->rank;
  plan->domain_part = false; /* it runs, with the others' parts */
  *out = plan;
  return RS_OK;
}

rs_status rsi_session_plan_create(const rs_layout *src, const rs_layout *dst,
                                  rs_plan **out) {
  int64_t t0 = rsi_log_on(RS_LOG_INFO, RS_LOG_PLAN) ? rsi_now_ns() : 0;
  rs_status st = plan_create(src, dst, out);
  if (st == RS_OK)
    RSI_LOG(RS_LOG_INFO, RS_LOG_PLAN, src->ctx->rank,
            "plan %p: %lld moves in %d rounds over %d ranks, made in %.3f ms%s",
            (void *)*out, (long long)(*out)->nmoves, (*out)->nrounds,
            (*out)->world_size, (double)(rsi_now_ns() - t0) / 1e6,
            rsi_plan_per_rank(src->ctx) && dst->ctx == src->ctx
                ? " (this rank's part)"
                : "");
  return st;
}
