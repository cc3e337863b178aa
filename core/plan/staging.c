/* SPDX-License-Identifier: Apache-2.0 */
/* Steps, segments and staging sizes (staging.h says the rules). */
#include "plan/staging.h"

#include <stdlib.h>
#include <string.h>

#include "layout/box.h"
#include "base/grow.h"

rsi_segment rsi_segment_at(const rs_plan *plan, const rsi_message *msg,
                           int64_t at) {
  if (plan->moves[at].bytes >= RSI_DIRECT_BYTES)
    return (rsi_segment){at, 1, plan->moves[at].bytes, true};
  rsi_segment g = {at, 0, 0, false};
  int64_t end = msg->first_move + msg->nmoves;
  while (at < end && plan->moves[at].bytes < RSI_DIRECT_BYTES) {
    g.bytes = RSI_ALIGN16(g.bytes) + plan->moves[at].bytes;
    g.n++;
    at++;
  }
  return g;
}

/* A box in memory is one contiguous run when its strides are row-major. */
static bool row_major(int ndim, const int64_t *ext, const int64_t *strides) {
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ext[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= ext[d];
  }
  return true;
}

bool rsi_move_contiguous(const rs_plan *plan, const rsi_move *m, bool src) {
  int kind = src ? m->src_kind : m->dst_kind;
  int nd = plan->tensors[m->tensor].ndim;
  if (kind == RSI_EP_RELAY) { /* a slot is dense; a move may take part of it */
    const rsi_relay *r = &plan->relays[src ? m->src_index : m->dst_index];
    int64_t strides[RS_MAX_DIMS];
    rsi_box_dense_strides(nd, plan->boxes.v + r->box + nd, strides);
    return row_major(nd, rsi_move_extent(plan, m), strides);
  }
  return rsi_shard_box_contiguous(plan, kind == RSI_EP_SRC ? RS_SIDE_SRC
                                                         : RS_SIDE_DST,
                                  src ? m->src_index : m->dst_index, nd,
                                  rsi_move_extent(plan, m));
}

bool rsi_shard_box_contiguous(const rs_plan *plan, int side, int64_t shard,
                              int ndim, const int64_t *ext) {
  const rsi_side *sd = &plan->side[side];
  return row_major(ndim, ext,
                   rsi_shard_strides(&sd->pool, &sd->shards[shard], ndim));
}

int64_t rsi_segment_staging(const rs_plan *plan, const rsi_segment *g,
                            bool src) {
  if (g->single && (plan->moves[g->first].contiguous >> (src ? 0 : 1)) & 1)
    return 0;
  return RSI_ALIGN64(g->bytes);
}

/* ---- one pass over the messages ----------------------------------------- */

/* The step being gathered for one rank. */
typedef struct gather {
  bool open;
  rsi_step cur;
  int64_t half;
  rsi_rank_steps *out; /* NULL: sizes only */
} gather;

static rs_status close_step(gather *g, rsi_err *err) {
  if (!g->open) return RS_OK;
  g->open = false;
  int64_t need = g->cur.relay_bytes + g->cur.seg_bytes;
  if (need > g->half) g->half = need;
  if (!g->out) return RS_OK;
  rsi_rank_steps *o = g->out;
  RSI_TRY(rsi_grow((void **)&o->steps, &o->cap_steps, o->nsteps + 1,
                   sizeof *o->steps, 16, err));
  o->steps[o->nsteps++] = g->cur;
  return RS_OK;
}

static rs_status push_msg(rsi_rank_steps *o, int64_t i, rsi_err *err) {
  RSI_TRY(rsi_grow((void **)&o->msgs, &o->cap_msgs, o->nmsgs + 1,
                   sizeof *o->msgs, 64, err));
  o->msgs[o->nmsgs++] = i;
  return RS_OK;
}

/* Message i as seen from one end (src: the sender's), or both when it is a
 * copy inside the rank. */
static rs_status take(const rs_plan *plan, gather *g, int64_t i, bool src,
                      rsi_err *err) {
  const rsi_message *msg = &plan->msgs[i];
  if (g->open && (g->cur.round != msg->round || g->cur.stage != msg->stage))
    RSI_TRY(close_step(g, err));
  if (!g->open) {
    g->open = true;
    g->cur = (rsi_step){msg->round, msg->stage,
                        g->out ? g->out->nmsgs : 0, 0, 0, 0, false, false};
  }
  if (g->out) RSI_TRY(push_msg(g->out, i, err));
  g->cur.n++;
  bool copy = msg->src_rank == msg->dst_rank;
  int64_t end = msg->first_move + msg->nmoves;
  if (src)
    for (int64_t j = msg->first_move; j < end; j++) {
      int kind = plan->moves[j].src_kind;
      g->cur.reads_dst |= kind != RSI_EP_SRC;
      g->cur.reads_relay |= kind == RSI_EP_RELAY;
    }
  if (!src || copy)
    for (int64_t j = msg->first_move; j < end; j++) {
      const rsi_move *m = &plan->moves[j];
      if (m->dst_kind != RSI_EP_RELAY) continue;
      int64_t top = plan->relays[m->dst_index].staging_offset +
                    RSI_ALIGN64(plan->relays[m->dst_index].bytes);
      if (top > g->cur.relay_bytes) g->cur.relay_bytes = top;
    }
  if (copy) return RS_OK; /* a copy needs no staging */
  for (int64_t j = msg->first_move; j < end;) {
    rsi_segment s = rsi_segment_at(plan, msg, j);
    g->cur.seg_bytes += rsi_segment_staging(plan, &s, src);
    j += s.n;
  }
  return RS_OK;
}

/* Walk every message; `slot(rank)` gives the gather of a tracked rank or
 * NULL. */
typedef gather *(*slot_fn)(void *arg, int rank);

static rs_status walk(const rs_plan *plan, slot_fn slot, void *arg,
                      rsi_err *err) {
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *msg = &plan->msgs[i];
    gather *s = slot(arg, msg->src_rank);
    if (s) RSI_TRY(take(plan, s, i, true, err));
    if (msg->dst_rank == msg->src_rank) continue;
    gather *d = slot(arg, msg->dst_rank);
    if (d) RSI_TRY(take(plan, d, i, false, err));
  }
  return RS_OK;
}

typedef struct tracked {
  const int *ranks;
  int n;
  gather *g;
} tracked;

static gather *tracked_slot(void *arg, int rank) {
  tracked *t = arg;
  int lo = 0, hi = t->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (t->ranks[mid] < rank)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < t->n && t->ranks[lo] == rank ? &t->g[lo] : NULL;
}

rs_status rsi_build_steps(const rs_plan *plan, const int *ranks, int n,
                          rsi_rank_steps *out, rsi_err *err) {
  gather *g = calloc((size_t)(n ? n : 1), sizeof *g);
  if (!g) return RSI_NOMEM(err);
  for (int k = 0; k < n; k++) {
    memset(&out[k], 0, sizeof out[k]);
    out[k].rank = ranks[k];
    g[k].out = &out[k];
  }
  tracked t = {ranks, n, g};
  rs_status st = walk(plan, tracked_slot, &t, err);
  for (int k = 0; k < n && st == RS_OK; k++) {
    st = close_step(&g[k], err);
    out[k].half = g[k].half;
  }
  free(g);
  if (st != RS_OK)
    for (int k = 0; k < n; k++) rsi_rank_steps_free(&out[k]);
  return st;
}

void rsi_rank_steps_free(rsi_rank_steps *s) {
  free(s->msgs);
  free(s->steps);
  s->msgs = NULL;
  s->steps = NULL;
  s->nmsgs = s->nsteps = s->cap_msgs = s->cap_steps = 0;
}

static gather *world_slot(void *arg, int rank) {
  return &((gather *)arg)[rank];
}

rs_status rsi_staging_halves(const rs_plan *plan, int64_t *half,
                             rsi_err *err) {
  gather *g = calloc((size_t)plan->world_size, sizeof *g);
  if (!g) return RSI_NOMEM(err);
  rs_status st = walk(plan, world_slot, g, err);
  for (int r = 0; r < plan->world_size && st == RS_OK; r++) {
    st = close_step(&g[r], err);
    half[r] = g[r].half;
  }
  free(g);
  return st;
}
