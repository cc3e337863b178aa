/* SPDX-License-Identifier: Apache-2.0 */
/* The in-process transport: every rank lives in the calling process and one
 * thread drives them all as cooperative steps (core/exec/exec_run.c). A receive
 * is matched to its send in posting order, and both are complete at the
 * match (host memory only: this transport serves host contexts).
 *
 * Two kinds of message (a send that meets a receive of the other kind is
 * an internal error: both ends decide the kind alike, from the plan):
 * - direct (send_direct / recv_direct): what the executor sends between
 *   two ranks here. The send carries the copies of its moves with their
 *   source side (the sender's memory: a source shard, a relay slot, a
 *   destination shard it forwards), the receive the same copies with their
 *   destination side (the receiver's memory); at the match each copy runs
 *   once through the host engine, strided at both ends: one copy from the
 *   source memory into the destination memory, converting on the way where
 *   the move does, and no staging. The copies run on the context's
 *   engine, which cuts a large batch over RS_PARAM_COPY_THREADS threads.
 * - bytes (send / recv): copied into the receive's buffer at the match with
 *   memcpy. The executor sends bytes here only for a segment that cannot
 *   go direct (a move converting at both ends, which the planner never
 *   makes); the transport conformance suite sends them too.
 *
 * Matching completes both ends at once, so nothing here ever waits for a
 * rank's later step (two ranks sending to each other in one step would,
 * were a send complete only once its receiver consumed it). */
#include <stdlib.h>
#include <string.h>

#include "copy/engine.h"
#include "transport/transport.h"

typedef struct op {
  int from, to, group;
  uint64_t tag;
  size_t bytes; /* bytes; direct: the number of copies */
  bool is_recv;
  bool direct;            /* carries copies (direct), not bytes */
  bool matched;           /* found its partner: complete */
  const void *data;       /* a send's bytes */
  void *buf;              /* a receive's buffer */
  const rsi_copy *copies; /* direct: one side of each copy */
} op;

typedef struct local_transport {
  rsi_transport base;
  op *ops;
  int64_t n, cap;
  rsi_copy *batch; /* a direct match's copies, both sides joined */
  int64_t cap_batch;
  rsi_engine *engine; /* runs them: its context's (NULL: rsi_host_engine) */
} local_transport;

/* The earliest unmatched op of the other kind with the same ends and tag. */
static op *find_partner(local_transport *lt, const op *o) {
  for (int64_t i = 0; i < lt->n; i++) {
    op *p = &lt->ops[i];
    if (!p->matched && p->is_recv != o->is_recv && p->from == o->from &&
        p->to == o->to && p->tag == o->tag)
      return p;
  }
  return NULL;
}

/* The copies of a direct match: the send's, each with the receive's
 * destination side. Both ends computed them from the same plan; anything
 * but the memory differing means they took different moves. */
static rs_status join_copies(local_transport *lt, const op *s, const op *r,
                             rsi_err *err) {
  int64_t n = (int64_t)s->bytes;
  if (n > lt->cap_batch) {
    int64_t cap = n > 2 * lt->cap_batch ? n : 2 * lt->cap_batch;
    rsi_copy *b = realloc(lt->batch, (size_t)cap * sizeof *b);
    if (!b) return RSI_NOMEM(err);
    lt->batch = b;
    lt->cap_batch = cap;
  }
  for (int64_t i = 0; i < n; i++) {
    const rsi_copy *a = &s->copies[i], *b = &r->copies[i];
    bool same = a->op == b->op && a->ndim == b->ndim &&
                a->esize == b->esize && a->src_dtype == b->src_dtype &&
                a->dst_dtype == b->dst_dtype && a->lo == b->lo &&
                a->hi == b->hi && !a->dense_src && !b->dense_dst &&
                memcmp(a->extent, b->extent,
                       (size_t)a->ndim * sizeof *a->extent) == 0;
    if (!same)
      return RSI_FAIL(err, RS_ERR_INTERNAL,
                      "in-process direct message %d -> %d tag %llu: copy "
                      "%lld differs at its two ends (op %d/%d, %lld/%lld "
                      "elements)",
                      s->from, s->to, (unsigned long long)s->tag,
                      (long long)i, a->op, b->op, (long long)(a->hi - a->lo),
                      (long long)(b->hi - b->lo));
    rsi_copy *c = &lt->batch[i];
    *c = *a;
    c->dst = b->dst;
    c->dense_dst = false;
    memcpy(c->dst_strides, b->dst_strides,
           (size_t)a->ndim * sizeof *c->dst_strides);
  }
  return RS_OK;
}

static rs_status match(local_transport *lt, op *s, op *r, rsi_err *err) {
  if (s->direct != r->direct || s->bytes != r->bytes)
    return RSI_FAIL(err, RS_ERR_INTERNAL,
                    "in-process message %d -> %d tag %llu: %zu %s sent, "
                    "%zu %s expected",
                    s->from, s->to, (unsigned long long)s->tag, s->bytes,
                    s->direct ? "copies" : "bytes", r->bytes,
                    r->direct ? "copies" : "bytes");
  if (s->direct && s->bytes) {
    RSI_TRY(join_copies(lt, s, r, err));
    rsi_engine *eng = lt->engine ? lt->engine : rsi_host_engine();
    RSI_TRY(eng->ops->copy(eng, lt->batch, (int64_t)s->bytes, NULL, err));
  } else if (!s->direct && r->bytes) {
    memcpy(r->buf, s->data, r->bytes);
  }
  s->matched = r->matched = true;
  return RS_OK;
}

static rs_status post(local_transport *lt, op o, rsi_err *err) {
  if (lt->n == lt->cap) {
    int64_t cap = lt->cap ? lt->cap * 2 : 64;
    op *ops = realloc(lt->ops, (size_t)cap * sizeof *ops);
    if (!ops) return RSI_NOMEM(err);
    lt->ops = ops;
    lt->cap = cap;
  }
  op *p = find_partner(lt, &o);
  lt->ops[lt->n] = o;
  op *me = &lt->ops[lt->n++];
  if (!p) return RS_OK;
  return me->is_recv ? match(lt, p, me, err) : match(lt, me, p, err);
}

static rs_status local_send(rsi_transport *t, int group, int from, int to,
                            uint64_t tag, const void *data, size_t bytes,
                            rsi_err *err) {
  op o = {.from = from, .to = to, .group = group, .tag = tag,
          .bytes = bytes, .data = data};
  return post((local_transport *)t, o, err);
}

static rs_status local_recv(rsi_transport *t, int group, int to, int from,
                            uint64_t tag, void *buf, size_t bytes,
                            const void **view, rsi_err *err) {
  if (view) *view = buf;
  op o = {.from = from, .to = to, .group = group, .tag = tag,
          .bytes = bytes, .is_recv = true, .buf = buf};
  return post((local_transport *)t, o, err);
}

static rs_status local_send_direct(rsi_transport *t, int group, int from,
                                   int to, uint64_t tag,
                                   const rsi_copy *copies, int64_t n,
                                   rsi_err *err) {
  op o = {.from = from, .to = to, .group = group, .tag = tag,
          .bytes = (size_t)n, .direct = true, .copies = copies};
  return post((local_transport *)t, o, err);
}

static rs_status local_recv_direct(rsi_transport *t, int group, int to,
                                   int from, uint64_t tag,
                                   const rsi_copy *copies, int64_t n,
                                   rsi_err *err) {
  op o = {.from = from, .to = to, .group = group, .tag = tag,
          .bytes = (size_t)n, .is_recv = true, .direct = true,
          .copies = copies};
  return post((local_transport *)t, o, err);
}

static bool owned(const op *o, int me, int group) {
  return o->group == group && (o->is_recv ? o->to : o->from) == me;
}

static rs_status local_test(rsi_transport *t, int me, int group, bool *done,
                            rsi_err *err) {
  (void)err;
  local_transport *lt = (local_transport *)t;
  *done = true;
  for (int64_t i = 0; i < lt->n && *done; i++)
    if (owned(&lt->ops[i], me, group)) *done = lt->ops[i].matched;
  if (!*done) return RS_OK;
  int64_t k = 0; /* done: drop what `me` owned in the group */
  for (int64_t i = 0; i < lt->n; i++)
    if (!owned(&lt->ops[i], me, group)) lt->ops[k++] = lt->ops[i];
  lt->n = k;
  return RS_OK;
}

static bool local_pending(rsi_transport *t, int me, int group, int *peer,
                          bool *is_recv, size_t *bytes) {
  local_transport *lt = (local_transport *)t;
  for (int64_t i = 0; i < lt->n; i++) {
    const op *o = &lt->ops[i];
    if (!owned(o, me, group) || o->matched) continue;
    *peer = o->is_recv ? o->from : o->to;
    *is_recv = o->is_recv;
    *bytes = o->bytes;
    return true;
  }
  return false;
}

static void local_abandon(rsi_transport *t) { ((local_transport *)t)->n = 0; }

static void local_destroy(rsi_transport *t) {
  local_transport *lt = (local_transport *)t;
  free(lt->ops);
  free(lt->batch);
  free(lt);
}

static const rsi_transport_ops local_ops = {
    .name = "local",
    .send = local_send,
    .recv = local_recv,
    .test = local_test,
    .pending = local_pending,
    .set_integrity = NULL, /* nothing travels: nothing to check */
    .abandon = local_abandon,
    .adopt = NULL,
    .destroy = local_destroy,
    .send_direct = local_send_direct,
    .recv_direct = local_recv_direct,
};

rs_status rsi_local_transport_create(rsi_transport **out) {
  local_transport *lt = calloc(1, sizeof *lt);
  if (!lt) return RSI_NOMEM(NULL);
  lt->base.ops = &local_ops;
  lt->base.control = NULL;
  *out = &lt->base;
  return RS_OK;
}

void rsi_local_transport_use_engine(rsi_transport *t, rsi_engine *engine) {
  ((local_transport *)t)->engine = engine;
}
