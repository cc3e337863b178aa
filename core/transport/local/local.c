/* The in-process transport: every rank lives in the calling process and one
 * thread drives them all as cooperative steps (core/exec_run.c). A receive
 * is matched to its send in posting order, and the bytes are copied into
 * the receive's buffer at the match (host memory only: this transport
 * serves host contexts); both are then complete. A large move that is
 * contiguous at both ends is thus copied once, straight from the source
 * shard into the destination shard.
 *
 * (Showing the receiver the sender's staging in place would save a copy
 * for small packed pieces, but then a send could complete only once its
 * receiver unpacked, and two ranks sending to each other would each wait
 * for the other's unpack.) */
#include <stdlib.h>
#include <string.h>

#include "../transport.h"

typedef struct op {
  int from, to, group;
  uint64_t tag;
  size_t bytes;
  bool is_recv;
  bool matched;     /* found its partner: complete */
  const void *data; /* a send's bytes */
  void *buf;        /* a receive's buffer */
} op;

typedef struct local_transport {
  rsi_transport base;
  op *ops;
  int64_t n, cap;
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

static rs_status match(op *s, op *r, rsi_err *err) {
  if (s->bytes != r->bytes)
    return RSI_FAIL(err, RS_ERR_INTERNAL,
                    "in-process message %d -> %d tag %llu: %zu bytes sent, "
                    "%zu expected",
                    s->from, s->to, (unsigned long long)s->tag, s->bytes,
                    r->bytes);
  if (r->bytes) memcpy(r->buf, s->data, r->bytes);
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
  return me->is_recv ? match(p, me, err) : match(me, p, err);
}

static rs_status local_send(rsi_transport *t, int group, int from, int to,
                            uint64_t tag, const void *data, size_t bytes,
                            rsi_err *err) {
  op o = {from, to, group, tag, bytes, false, false, data, NULL};
  return post((local_transport *)t, o, err);
}

static rs_status local_recv(rsi_transport *t, int group, int to, int from,
                            uint64_t tag, void *buf, size_t bytes,
                            const void **view, rsi_err *err) {
  if (view) *view = buf;
  op o = {from, to, group, tag, bytes, true, false, NULL, buf};
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
};

rs_status rsi_local_transport_create(rsi_transport **out) {
  local_transport *lt = calloc(1, sizeof *lt);
  if (!lt) return RSI_NOMEM(NULL);
  lt->base.ops = &local_ops;
  lt->base.control = NULL;
  *out = &lt->base;
  return RS_OK;
}
