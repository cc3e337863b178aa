/* The in-process transport: every rank lives in the calling process, so a
 * receive is matched to its send and shown the sender's staging in place. */
#include <stdlib.h>

#include "../transport.h"

typedef struct posted {
  int from, to;
  uint64_t tag;
  size_t bytes;
  const void *data;    /* a send's bytes */
  const void **target; /* a receive's *data */
  int matched;
} posted;

typedef struct local_transport {
  rsi_transport base;
  posted *sends, *recvs;
  int nsends, nrecvs, cap_sends, cap_recvs;
} local_transport;

static rs_status push(posted **list, int *n, int *cap, posted p,
                      rsi_err *err) {
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 16;
    posted *l = realloc(*list, (size_t)c * sizeof *l);
    if (!l) return RSI_NOMEM(err);
    *list = l;
    *cap = c;
  }
  (*list)[(*n)++] = p;
  return RS_OK;
}

static rs_status match(posted *s, posted *r, rsi_err *err) {
  if (s->bytes != r->bytes)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "in-process message %d -> %d tag %llu: %zu bytes sent, "
                    "%zu expected",
                    s->from, s->to, (unsigned long long)s->tag, s->bytes,
                    r->bytes);
  *r->target = s->data;
  s->matched = r->matched = 1;
  return RS_OK;
}

static posted *find(posted *list, int n, int from, int to, uint64_t tag) {
  for (int i = 0; i < n; i++)
    if (!list[i].matched && list[i].from == from && list[i].to == to &&
        list[i].tag == tag)
      return &list[i];
  return NULL;
}

static rs_status local_send(rsi_transport *t, int group, int from, int to,
                            uint64_t tag, const void *data, size_t bytes,
                            rsi_err *err) {
  (void)group; /* one process: everything completes at once */
  local_transport *lt = (local_transport *)t;
  posted s = {from, to, tag, bytes, data, NULL, 0};
  posted *r = find(lt->recvs, lt->nrecvs, from, to, tag);
  if (r) RSI_TRY(match(&s, r, err));
  return push(&lt->sends, &lt->nsends, &lt->cap_sends, s, err);
}

static rs_status local_recv(rsi_transport *t, int group, int to, int from,
                            uint64_t tag, void *buf, size_t bytes,
                            const void **data, rsi_err *err) {
  (void)group;
  (void)buf; /* shown in place: nothing to receive into */
  local_transport *lt = (local_transport *)t;
  posted r = {from, to, tag, bytes, NULL, data, 0};
  posted *s = find(lt->sends, lt->nsends, from, to, tag);
  if (s) RSI_TRY(match(s, &r, err));
  return push(&lt->recvs, &lt->nrecvs, &lt->cap_recvs, r, err);
}

/* Nothing here can be late: every rank is this thread, so a group is done
 * as soon as it is tested, and an unmatched operation is a bug. */
static rs_status local_test(rsi_transport *t, int group, bool *done,
                            rsi_err *err) {
  (void)group;
  *done = true;
  local_transport *lt = (local_transport *)t;
  rs_status st = RS_OK;
  for (int i = 0; i < lt->nrecvs && st == RS_OK; i++)
    if (!lt->recvs[i].matched)
      st = RSI_FAIL(err, RS_ERR_INTERNAL,
                    "in-process receive %d <- %d tag %llu has no send",
                    lt->recvs[i].to, lt->recvs[i].from,
                    (unsigned long long)lt->recvs[i].tag);
  for (int i = 0; i < lt->nsends && st == RS_OK; i++)
    if (!lt->sends[i].matched)
      st = RSI_FAIL(err, RS_ERR_INTERNAL,
                    "in-process send %d -> %d tag %llu has no receive",
                    lt->sends[i].from, lt->sends[i].to,
                    (unsigned long long)lt->sends[i].tag);
  lt->nsends = lt->nrecvs = 0;
  return st;
}

static void local_abandon(rsi_transport *t) {
  local_transport *lt = (local_transport *)t;
  lt->nsends = lt->nrecvs = 0;
}

static void local_destroy(rsi_transport *t) {
  local_transport *lt = (local_transport *)t;
  free(lt->sends);
  free(lt->recvs);
  free(lt);
}

static const rsi_transport_ops local_ops = {
    .name = "local",
    .send = local_send,
    .recv = local_recv,
    .test = local_test,
    .pending = NULL, /* nothing is ever pending after a test */
    .abandon = local_abandon,
    .allgatherv = NULL, /* no collectives: every rank is this process */
    .destroy = local_destroy,
};

rs_status rsi_local_transport_create(rsi_transport **out) {
  local_transport *lt = calloc(1, sizeof *lt);
  if (!lt) return RSI_NOMEM(NULL);
  lt->base.ops = &local_ops;
  *out = &lt->base;
  return RS_OK;
}
