/* SPDX-License-Identifier: Apache-2.0 */
/* The one driver (exec_run.h): steps of every driven rank, packed and
 * unpacked through the copy engine, moved by the transport. */
#include "exec/exec_run.h"

#include <stdlib.h>
#include <string.h>

#include "layout/box.h"
#include "base/dtype.h"
#include "exec/exec_guard.h"
#include "base/grow.h"
#include "base/log.h"
#include "transport/transport.h"

/* ---- building ------------------------------------------------------------ */

static int cmp_int(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  return (a > b) - (a < b);
}

/* The driven ranks that appear in any message, ascending, once each. */
static rs_status active_ranks(const rs_plan *plan, int **out, int *n,
                              rsi_err *err) {
  int me = plan->ctx->rank;
  int64_t cap = me == RS_ALL_RANKS ? 2 * plan->nmsgs : 1;
  int *r = malloc((size_t)(cap ? cap : 1) * sizeof *r);
  if (!r) return RSI_NOMEM(err);
  int64_t k = 0;
  if (me != RS_ALL_RANKS) {
    for (int64_t i = 0; i < plan->nmsgs && k == 0; i++)
      if (plan->msgs[i].src_rank == me || plan->msgs[i].dst_rank == me)
        r[k++] = me;
  } else {
    for (int64_t i = 0; i < plan->nmsgs; i++) {
      r[k++] = plan->msgs[i].src_rank;
      r[k++] = plan->msgs[i].dst_rank;
    }
    qsort(r, (size_t)k, sizeof *r, cmp_int);
    int64_t u = 0;
    for (int64_t i = 0; i < k; i++)
      if (u == 0 || r[u - 1] != r[i]) r[u++] = r[i];
    k = u;
  }
  *out = r;
  *n = (int)k;
  return RS_OK;
}

rs_status rsi_driver_create(const rs_plan *plan, rsi_driver **out,
                            rsi_err *err) {
  rsi_engine *eng = plan->ctx->engine;
  rsi_driver *d = calloc(1, sizeof *d);
  if (!d) return RSI_NOMEM(err);
  int *ranks = NULL, n = 0;
  rs_status st = active_ranks(plan, &ranks, &n, err);
  if (st == RS_OK) {
    d->parts = calloc((size_t)(n ? n : 1), sizeof *d->parts);
    rsi_rank_steps *steps = calloc((size_t)(n ? n : 1), sizeof *steps);
    if (!d->parts || !steps)
      st = RSI_NOMEM(err);
    else
      st = rsi_build_steps(plan, ranks, n, steps, err);
    for (int k = 0; k < n && st == RS_OK; k++) {
      d->parts[k].s = steps[k];
      d->nparts = k + 1;
      void *p = NULL;
      size_t bytes = (size_t)(2 * steps[k].half);
      st = eng->ops->alloc(eng, steps[k].rank, bytes, &p, err);
      d->parts[k].staging = p;
      d->staging_bytes += (int64_t)bytes;
    }
    if (st != RS_OK && !d->nparts && steps)
      for (int k = 0; k < n; k++) rsi_rank_steps_free(&steps[k]);
    free(steps);
  }
  free(ranks);
  if (st != RS_OK) {
    rsi_driver_destroy(d, plan->ctx);
    return st;
  }
  *out = d;
  return RS_OK;
}

void rsi_driver_destroy(rsi_driver *d, rs_context *ctx) {
  if (!d) return;
  rsi_engine *eng = ctx->engine;
  rsi_transport *tp = ctx->transport;
  for (int k = 0; k < d->nparts; k++) {
    rsi_part *p = &d->parts[k];
    if (ctx->failed && tp->ops->adopt && eng->ops->memory == RSI_MEMORY_HOST)
      tp->ops->adopt(tp, p->staging); /* abandoned sends may read it */
    else if (p->staging && !rsi_context_inherited(ctx))
      eng->ops->release(eng, p->staging); /* (a forked child's copy of the
                                              parent's device memory is
                                              not its to release) */
    rsi_rank_steps_free(&p->s);
    free(p->arrivals[0]);
    free(p->arrivals[1]);
    free(p->direct[0]);
    free(p->direct[1]);
  }
  free(d->parts);
  free(d->batch);
  free(d);
}

int64_t rsi_driver_staging(const rsi_driver *d, int rank) {
  for (int k = 0; d && k < d->nparts; k++)
    if (d->parts[k].s.rank == rank) return 2 * d->parts[k].s.half;
  return -1;
}

void rsi_driver_begin(rsi_driver *d) {
  /* A batch left unflushed (a child of fork() inherits the parent's
   * execution wherever its thread was, mid-batch included) is never
   * carried into this execution. */
  d->nbatch = 0;
  for (int k = 0; k < d->nparts; k++) {
    rsi_part *p = &d->parts[k];
    p->next = p->oldest = 0;
    p->narrivals[0] = p->narrivals[1] = 0;
    p->ndirect[0] = p->ndirect[1] = 0;
    p->since = rsi_now_ms();
  }
}

/* ---- addresses ------------------------------------------------------------ */

/* Where a step's moves live: the plan, and the relay slots it uses. */
typedef struct where {
  const rs_plan *plan;
  char *relay;
} where;

/* The element type held at an end of kind `kind` (shard or relay slot
 * `index`) of tensor t. */
static rs_dtype end_dtype(const rs_plan *plan, int32_t t, int kind,
                          int32_t index) {
  if (kind == RSI_EP_RELAY) return (rs_dtype)plan->relays[index].dtype;
  return kind == RSI_EP_SRC ? plan->conv[t].src_dtype
                            : plan->conv[t].dst_dtype;
}

/* The move's element types at its source end, on the wire and at its
 * destination end. */
typedef struct move_types {
  rs_dtype src, wire, dst;
} move_types;

static move_types types_of(const rsi_move *m) {
  return (move_types){(rs_dtype)m->src_dtype, (rs_dtype)m->wire_dtype,
                      (rs_dtype)m->dst_dtype};
}

/* The tensor whose memory is at one end of a move: the values, at the
 * source end of a move that computes their scales. */
static int32_t end_tensor(const rs_plan *plan, const rsi_move *m, bool src) {
  return src && m->computes_scales ? plan->conv[m->tensor].values : m->tensor;
}

/* Address of the move's first element at one end, and that end's strides
 * (pointer arithmetic only: nothing is read). At the values' end of a
 * move that computes scales, the first element of the block of the box's
 * first element, with the values' strides. */
static char *endpoint(const where *w, const rsi_move *m, bool src,
                      int64_t *strides) {
  const rs_plan *plan = w->plan;
  int kind = src ? m->src_kind : m->dst_kind;
  int index = src ? m->src_index : m->dst_index;
  int32_t t = end_tensor(plan, m, src);
  int nd = plan->tensors[t].ndim;
  int64_t first[RS_MAX_DIMS];
  memcpy(first, rsi_move_offset(plan, m), (size_t)nd * sizeof *first);
  if (t != m->tensor) { /* block coordinates to element coordinates */
    if (nd >= 2) first[nd - 2] *= plan->conv[t].b0;
    if (nd >= 1) first[nd - 1] *= plan->conv[t].b1;
  }
  char *base;
  const int64_t *origin;
  if (kind == RSI_EP_RELAY) {
    const rsi_relay *r = &plan->relays[index];
    origin = plan->boxes.v + r->box;
    rsi_box_dense_strides(nd, origin + nd, strides);
    base = w->relay + r->staging_offset;
  } else {
    const rsi_side *side = &plan->side[kind == RSI_EP_SRC ? RS_SIDE_SRC
                                                          : RS_SIDE_DST];
    const rsi_shard *s = &side->shards[index];
    origin = rsi_shard_offset(&side->pool, s);
    memcpy(strides, rsi_shard_strides(&side->pool, s, nd),
           (size_t)nd * sizeof *strides);
    base = (char *)side->buffers[side->rank_first[s->rank] + s->buffer].ptr +
           s->byte_offset;
  }
  int64_t off = 0;
  for (int d = 0; d < nd; d++) off += (first[d] - origin[d]) * strides[d];
  return base + off * (int64_t)rsi_dtype_size(end_dtype(plan, t, kind, index));
}

/* ---- batches of copies ------------------------------------------------------ */

/* The blocks of the block-scaled values tensor v, with the first element
 * of box offset `off` at (row0, col0): a box of v's elements, or of its
 * scale tensor's (block coordinates). */
static rsi_copy_blocks blocks_of(const rs_plan *plan, int32_t v,
                                 const int64_t *off) {
  const rsi_tensor *t = &plan->tensors[v];
  const rsi_conversion *cv = &plan->conv[v];
  int nd = t->ndim;
  return (rsi_copy_blocks){
      .rows = nd >= 2 ? t->shape[nd - 2] : 1,
      .cols = nd >= 1 ? t->shape[nd - 1] : 1,
      .b0 = cv->b0,
      .b1 = cv->b1,
      .row0 = nd >= 2 ? off[nd - 2] : 0,
      .col0 = nd >= 1 ? off[nd - 1] : 0,
      .ue8m0 = cv->ue8m0};
}

/* *c: a copy of the whole box of move m, from dtype `from` to `to`;
 * `scales`: it computes the block scales of m's box. Its memory (src, dst
 * and their strides) is left for the caller. */
static void fill_copy(rsi_copy *c, const rs_plan *plan, const rsi_move *m,
                      rs_dtype from, rs_dtype to, bool scales) {
  int nd = plan->tensors[m->tensor].ndim;
  const int64_t *off = rsi_move_offset(plan, m);
  *c = (rsi_copy){.ndim = nd,
                  .esize = (int)rsi_dtype_size(from),
                  .src_dtype = from,
                  .dst_dtype = to};
  if (scales) {
    c->op = RSI_COPY_SCALES;
    c->blocks = blocks_of(plan, plan->conv[m->tensor].values, off);
  } else if (from == to) {
    c->op = RSI_COPY_PLAIN;
  } else if (to == RS_DTYPE_F8_E4M3) {
    c->op = RSI_COPY_QUANTIZE;
    c->blocks = blocks_of(plan, m->tensor, off);
  } else {
    c->op = RSI_COPY_CAST;
  }
  memcpy(c->extent, rsi_move_extent(plan, m), (size_t)nd * sizeof *c->extent);
  c->lo = 0;
  rsi_box_volume(nd, c->extent, &c->hi);
}

/* A new copy in the batch (fill_copy's). */
static rs_status add_copy(rsi_driver *d, const where *w, const rsi_move *m,
                          rs_dtype from, rs_dtype to, bool scales,
                          rsi_copy **out, rsi_err *err) {
  RSI_TRY(rsi_grow((void **)&d->batch, &d->cap_batch, d->nbatch + 1,
                   sizeof *d->batch, 64, err));
  rsi_copy *c = &d->batch[d->nbatch++];
  fill_copy(c, w->plan, m, from, to, scales);
  *out = c;
  return RS_OK;
}

/* Move m between its memory at one end and a dense stream at `dense`
 * (pack: memory to stream, converting src -> wire dtype, computing scales
 * where the move does; else stream to memory, wire -> dst dtype). */
static rs_status stream_copy(rsi_driver *d, const where *w, const rsi_move *m,
                             char *dense, bool pack, rsi_err *err) {
  move_types ty = types_of(m);
  rsi_copy *c;
  RSI_TRY(add_copy(d, w, m, pack ? ty.src : ty.wire, pack ? ty.wire : ty.dst,
                   pack && m->computes_scales, &c, err));
  char *mem = endpoint(w, m, pack, pack ? c->src_strides : c->dst_strides);
  c->dense_dst = pack;
  c->dense_src = !pack;
  c->dst = pack ? dense : mem;
  c->src = pack ? mem : dense;
  if (!pack && c->op == RSI_COPY_QUANTIZE) {
    /* the engine reads blocks through strides: the stream as the dense
     * box it is (lo is 0, so it starts at element 0); the plan sends
     * whole blocks to a receiver that quantizes */
    c->dense_src = false;
    rsi_box_dense_strides(c->ndim, c->extent, c->src_strides);
  }
  return RS_OK;
}

/* A segment's moves between their memory and a stream in which each move
 * is 16-aligned (each m->bytes long: its elements in the wire dtype). */
static rs_status stream_segment(rsi_driver *d, const where *w,
                                const rsi_segment *g, char *stream, bool pack,
                                rsi_err *err) {
  int64_t at = 0;
  for (int64_t i = g->first; i < g->first + g->n; i++) {
    const rsi_move *m = &w->plan->moves[i];
    at = RSI_ALIGN16(at);
    RSI_TRY(stream_copy(d, w, m, stream + at, pack, err));
    at += m->bytes;
  }
  return RS_OK;
}

/* A move inside one rank: memory to memory, src -> dst dtype. */
static rs_status local_copy(rsi_driver *d, const where *w, const rsi_move *m,
                            rsi_err *err) {
  move_types ty = types_of(m);
  rsi_copy *c;
  RSI_TRY(add_copy(d, w, m, ty.src, ty.dst, m->computes_scales, &c, err));
  c->dense_dst = c->dense_src = false;
  c->src = endpoint(w, m, true, c->src_strides);
  c->dst = endpoint(w, m, false, c->dst_strides);
  return RS_OK;
}

/* Whether segments between two ranks go direct: the context's transport
 * takes direct messages (its ranks share this address space: send_direct,
 * transport.h), so each is one strided copy a move from the sender's
 * memory into the receiver's, with no staging at either end. Both ends ask
 * the same transport, so they agree. */
static bool goes_direct(const rs_plan *plan) {
  const rsi_transport *tp = plan->ctx->transport;
  return tp->ops->send_direct && tp->ops->recv_direct;
}

/* The copies of direct segment g as one end posts them (src: the
 * sender's), at c[0..g->n): each move's whole box from src to dst dtype,
 * as local_copy's, with that end's memory set; the transport joins the
 * two ends' at the match. One copy does what packing and unpacking would
 * because the planner converts a move at one end at most (plan.h); a move
 * converting at both fails the step, as goes_straight does. */
static rs_status direct_copies(const where *w, const rsi_segment *g,
                               bool src, rsi_copy *c, rsi_err *err) {
  for (int64_t j = 0; j < g->n; j++) {
    const rsi_move *m = &w->plan->moves[g->first + j];
    move_types ty = types_of(m);
    if ((ty.src != ty.wire || m->computes_scales) && ty.wire != ty.dst)
      return RSI_FAIL(err, RS_ERR_INTERNAL,
                      "move %lld of tensor %d converts at both ends (%s -> "
                      "%s -> %s)",
                      (long long)(g->first + j), (int)m->tensor,
                      rsi_dtype_name(ty.src), rsi_dtype_name(ty.wire),
                      rsi_dtype_name(ty.dst));
    fill_copy(&c[j], w->plan, m, ty.src, ty.dst, m->computes_scales);
    if (src)
      c[j].src = endpoint(w, m, true, c[j].src_strides);
    else
      c[j].dst = endpoint(w, m, false, c[j].dst_strides);
  }
  return RS_OK;
}

/* Whether segment g travels straight from the sender's memory (src) or
 * into the receiver's, without staging. The planner never lets a move
 * that converts at that hop go straight; were it to, staging was not
 * counted for it either, so the step fails instead. */
static rs_status goes_straight(const rs_plan *plan, const rsi_segment *g,
                               bool src, bool *straight, rsi_err *err) {
  *straight = rsi_segment_staging(plan, g, src) == 0;
  if (!*straight) return RS_OK;
  const rsi_move *m = &plan->moves[g->first];
  move_types ty = types_of(m);
  bool converts = src ? ty.src != ty.wire || m->computes_scales
                      : ty.wire != ty.dst;
  if (converts)
    return RSI_FAIL(err, RS_ERR_INTERNAL,
                    "move %lld of tensor %d converts (%s -> %s -> %s) at "
                    "the %s but was planned to go straight, without staging",
                    (long long)g->first, (int)m->tensor,
                    rsi_dtype_name(ty.src), rsi_dtype_name(ty.wire),
                    rsi_dtype_name(ty.dst), src ? "sender" : "receiver");
  return RS_OK;
}

/* The queue on which rank me's work is ordered: the transport's own for a
 * queued transport, else the caller's. */
static void *queue_of(rs_context *ctx, int me, void *queue) {
  rsi_transport *tp = ctx->transport;
  return tp->ops->queue_of ? tp->ops->queue_of(tp, me) : queue;
}

static rs_status flush(rsi_driver *d, rs_context *ctx, int me, void *queue,
                       rsi_err *err) {
  rsi_engine *eng = ctx->engine;
  rs_status st = RS_OK;
  if (d->nbatch)
    st = eng->ops->copy(eng, d->batch, d->nbatch, queue_of(ctx, me, queue),
                        err);
  d->nbatch = 0;
  return st;
}

/* ---- steps ---------------------------------------------------------------- */

static uint64_t step_tag(const rsi_step *s) {
  return (uint64_t)s->round * 2 + (uint64_t)s->stage;
}

static char *half_of(const rsi_part *p, int64_t i) {
  return p->staging + (i % 2) * p->s.half;
}

/* The relay slots step i uses: its own half's (stage 0), or those of the
 * step before it (stage 1 forwards what arrived there). */
static where where_of(const rs_plan *plan, const rsi_part *p, int64_t i) {
  const rsi_step *s = &p->s.steps[i];
  return (where){plan, s->stage == 0 || i == 0 ? half_of(p, i)
                                               : half_of(p, i - 1)};
}

/* Make room for the arrivals and the direct copies of step i before
 * anything is posted: the transport may write the arrivals' views later
 * and reads the copies at the match, so neither may move. Half i % 2's
 * were step i - 2's, which has ended: the transport holds none of them. */
static rs_status reserve(const rs_plan *plan, rsi_part *p, int64_t i,
                         rsi_err *err) {
  const rsi_step *s = &p->s.steps[i];
  int h = (int)(i % 2), me = p->s.rank;
  int64_t n = 0, copies = 0;
  bool direct = goes_direct(plan);
  for (int64_t k = s->first; k < s->first + s->n; k++) {
    const rsi_message *msg = &plan->msgs[p->s.msgs[k]];
    if (msg->src_rank == msg->dst_rank) continue;
    for (int64_t j = msg->first_move; j < msg->first_move + msg->nmoves;) {
      rsi_segment g = rsi_segment_at(plan, msg, j);
      n += msg->dst_rank == me;
      if (direct) copies += g.n;
      j += g.n;
    }
  }
  p->narrivals[h] = p->ndirect[h] = 0;
  RSI_TRY(rsi_grow((void **)&p->arrivals[h], &p->cap_arrivals[h], n,
                   sizeof *p->arrivals[h], 16, err));
  return rsi_grow((void **)&p->direct[h], &p->cap_direct[h], copies,
                  sizeof *p->direct[h], 16, err);
}

/* Post direct segment g of a message between me and `peer` (src: me
 * sends), its copies taken from half h's. */
static rs_status post_direct(rs_plan *plan, rsi_part *p, int h,
                             const where *w, const rsi_segment *g, bool src,
                             int peer, uint64_t tag, rsi_err *err) {
  rsi_transport *tp = plan->ctx->transport;
  rsi_copy *c = &p->direct[h][p->ndirect[h]];
  p->ndirect[h] += g->n;
  RSI_TRY(direct_copies(w, g, src, c, err));
  if (src)
    return tp->ops->send_direct(tp, h, p->s.rank, peer, tag, c, g->n, err);
  return tp->ops->recv_direct(tp, h, p->s.rank, peer, tag, c, g->n, err);
}

/* Step i begins. Receives first, then the batch that packs the sends and
 * copies the moves inside the rank, then the sends. A direct segment
 * (goes_direct) is posted as its copies and may be copied as soon as both
 * ends posted it: at its receive, into the receiver's destination shard or
 * relay slot, or at its send, from the sender's source shard, relay slot
 * or destination shard. Neither end's step ends before (the transport
 * completes both at the match), and that is safe, as between processes:
 * a relay slot it fills in this step's half is read by the next step
 * (stage 1), which begins only once this one ended; a relay slot it reads
 * in the previous step's half is not reused before this step ended
 * (may_begin: the step after a step that reads relay slots waits); the
 * destination memory a step reads (reads_dst) arrived in earlier rounds,
 * all ended before it began, and no later round writes it again. */
static rs_status begin_step(rs_plan *plan, rsi_driver *d, rsi_part *p,
                            int64_t i, void *queue, rsi_err *err) {
  const rsi_step *s = &p->s.steps[i];
  rsi_transport *tp = plan->ctx->transport;
  int me = p->s.rank, h = (int)(i % 2);
  uint64_t tag = step_tag(s);
  where w = where_of(plan, p, i);
  char *seg = half_of(p, i) + s->relay_bytes;
  int64_t at = 0;
  bool direct = goes_direct(plan);
  RSI_TRY(reserve(plan, p, i, err));
  for (int64_t k = s->first; k < s->first + s->n; k++) { /* receives first */
    const rsi_message *msg = &plan->msgs[p->s.msgs[k]];
    if (msg->dst_rank != me || msg->src_rank == me) continue;
    for (int64_t j = msg->first_move; j < msg->first_move + msg->nmoves;) {
      rsi_segment g = rsi_segment_at(plan, msg, j);
      rsi_arrival *a = &p->arrivals[h][p->narrivals[h]++];
      *a = (rsi_arrival){g, NULL, false};
      bool straight = false;
      if (direct) {
        a->in_place = true;
        RSI_TRY(post_direct(plan, p, h, &w, &g, false, msg->src_rank, tag,
                            err));
        j += g.n;
        continue;
      }
      RSI_TRY(goes_straight(plan, &g, false, &straight, err));
      if (straight) {
        int64_t strides[RS_MAX_DIMS];
        char *into = endpoint(&w, &plan->moves[j], false, strides);
        a->in_place = true;
        RSI_TRY(tp->ops->recv(tp, h, me, msg->src_rank, tag, into,
                              (size_t)g.bytes, NULL, err));
      } else {
        RSI_TRY(tp->ops->recv(tp, h, me, msg->src_rank, tag, seg + at,
                              (size_t)g.bytes, &a->view, err));
        at += RSI_ALIGN64(g.bytes);
      }
      j += g.n;
    }
  }
  /* Pack every send of the step and copy its moves inside the rank, in one
   * batch; then post the sends. */
  int64_t pack_at = at;
  for (int64_t k = s->first; k < s->first + s->n; k++) {
    const rsi_message *msg = &plan->msgs[p->s.msgs[k]];
    if (msg->src_rank != me) continue;
    for (int64_t j = msg->first_move; j < msg->first_move + msg->nmoves;) {
      if (msg->dst_rank == me) {
        RSI_TRY(local_copy(d, &w, &plan->moves[j], err));
        j++;
        continue;
      }
      rsi_segment g = rsi_segment_at(plan, msg, j);
      bool straight = true; /* a direct segment: nothing to pack */
      if (!direct)
        RSI_TRY(goes_straight(plan, &g, true, &straight, err));
      if (!straight) {
        RSI_TRY(stream_segment(d, &w, &g, seg + pack_at, true, err));
        pack_at += RSI_ALIGN64(g.bytes);
      }
      j += g.n;
    }
  }
  RSI_TRY(flush(d, plan->ctx, me, queue, err));
  for (int64_t k = s->first; k < s->first + s->n; k++) {
    const rsi_message *msg = &plan->msgs[p->s.msgs[k]];
    if (msg->src_rank != me || msg->dst_rank == me) continue;
    for (int64_t j = msg->first_move; j < msg->first_move + msg->nmoves;) {
      rsi_segment g = rsi_segment_at(plan, msg, j);
      const char *from;
      if (direct) {
        RSI_TRY(post_direct(plan, p, h, &w, &g, true, msg->dst_rank, tag,
                            err));
        j += g.n;
        continue;
      }
      if (rsi_segment_staging(plan, &g, true) == 0) { /* checked at pack */
        int64_t strides[RS_MAX_DIMS];
        from = endpoint(&w, &plan->moves[j], true, strides);
      } else {
        from = seg + at;
        at += RSI_ALIGN64(g.bytes);
      }
      RSI_TRY(tp->ops->send(tp, h, me, msg->dst_rank, tag, from,
                            (size_t)g.bytes, err));
      j += g.n;
    }
  }
  return RS_OK;
}

static rs_status finish_step(rs_plan *plan, rsi_driver *d, rsi_part *p,
                             int64_t i, void *queue, rsi_err *err) {
  int h = (int)(i % 2);
  where w = where_of(plan, p, i);
  for (int64_t a = 0; a < p->narrivals[h]; a++) {
    const rsi_arrival *in = &p->arrivals[h][a];
    if (!in->in_place)
      RSI_TRY(stream_segment(d, &w, &in->seg, (char *)in->view, false, err));
  }
  p->narrivals[h] = 0;
  return flush(d, plan->ctx, p->s.rank, queue, err);
}

/* Whether step `next` may begin while the steps [oldest, next) are in
 * flight: at most one is, and the next reads only source shards while the
 * one in flight forwards nothing from relay slots in the half it would
 * take. */
static bool may_begin(const rsi_part *p) {
  int64_t in_flight = p->next - p->oldest;
  if (in_flight == 0) return true;
  if (in_flight > 1) return false;
  const rsi_step *n = &p->s.steps[p->next], *o = &p->s.steps[p->oldest];
  return n->stage == 0 && !n->reads_dst && !o->reads_relay;
}

static rs_status advance(rs_plan *plan, rsi_driver *d, rsi_part *p,
                         void *queue, bool *progress, rsi_err *err) {
  while (p->next < p->s.nsteps && may_begin(p)) {
    if (p->next == p->oldest) p->since = rsi_now_ms();
    RSI_LOG(RS_LOG_TRACE, RS_LOG_EXEC, p->s.rank,
            "plan %p: step %lld of %lld begins (round %d, stage %d, %lld "
            "messages)",
            (void *)plan, (long long)p->next, (long long)p->s.nsteps,
            (int)p->s.steps[p->next].round, (int)p->s.steps[p->next].stage,
            (long long)p->s.steps[p->next].n);
    RSI_TRY(begin_step(plan, d, p, p->next, queue, err));
    p->next++;
    *progress = true;
  }
  if (p->oldest == p->next) return RS_OK;
  bool done = false;
  RSI_TRY(rsi_guard_check(plan, p->s.rank, (int)(p->oldest % 2), p->since,
                          &done, err));
  if (!done) return RS_OK;
  RSI_TRY(finish_step(plan, d, p, p->oldest, queue, err));
  RSI_LOG(RS_LOG_TRACE, RS_LOG_EXEC, p->s.rank,
          "plan %p: step %lld ended after %lld ms", (void *)plan,
          (long long)p->oldest, (long long)(rsi_now_ms() - p->since));
  p->oldest++;
  p->since = rsi_now_ms();
  *progress = true;
  return RS_OK;
}

rs_status rsi_driver_pass(rs_plan *plan, rsi_driver *d, void *queue,
                          bool *finished, bool *progress, rsi_err *err) {
  *finished = true;
  *progress = false;
  for (int k = 0; k < d->nparts; k++) {
    rsi_part *p = &d->parts[k];
    RSI_TRY(advance(plan, d, p, queue, progress, err));
    *finished &= p->oldest == p->s.nsteps;
  }
  return RS_OK;
}
