/* SPDX-License-Identifier: Apache-2.0 */
/* The plan as JSON, for people and tools: tensors, the figures of every
 * rank that takes part (idle ranks are only counted), and every move.
 * Tensor names are well-formed UTF-8 without control bytes
 * (rsi_layout_add_tensor refuses others), so they go in as they are, but
 * for the escapes JSON requires. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "plan/plan.h"
#include "base/utf8.h"
#include "base/version.h"

typedef struct sbuf {
  char *s;
  size_t n, cap;
  bool failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->failed = true;
      return;
    }
    if ((size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = b->cap * 2 + (size_t)k + 1;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->failed = true;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
}

/* s as a JSON string: '"' and '\\' escaped, control bytes as \u00XX, and
 * (never met in a name, see above) a byte outside well-formed UTF-8 as
 * U+FFFD, so the output is valid JSON whatever s holds. */
static void put_string(sbuf *b, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s);
  put(b, "\"");
  for (size_t at = 0; at < n;) {
    size_t k = rsi_utf8_char_len(u + at, n - at);
    if (u[at] == '"' || u[at] == '\\')
      put(b, "\\%c", u[at]);
    else if (rsi_is_control_byte(u[at]))
      put(b, "\\u%04x", u[at]);
    else if (!k)
      put(b, "\\ufffd");
    else
      put(b, "%.*s", (int)k, s + at);
    at += k ? k : 1;
  }
  put(b, "\"");
}

static void put_ints(sbuf *b, const int64_t *v, int n) {
  put(b, "[");
  for (int i = 0; i < n; i++) put(b, "%s%lld", i ? "," : "", (long long)v[i]);
  put(b, "]");
}

static const char *route_name(int r) {
  return r == RS_ROUTE_LOCAL   ? "local"
         : r == RS_ROUTE_INTRA ? "intra"
                               : "inter";
}

/* Where a move changes dtype: before it is sent, once it arrived, or in
 * a copy inside one rank. */
static const char *converts_where(const rsi_move *m) {
  if (m->src_rank == m->dst_rank) return "copy";
  return m->src_dtype != m->wire_dtype || m->computes_scales ? "sender"
                                                             : "receiver";
}

static const char *kind_name(int k) {
  return k == RSI_EP_SRC ? "src" : k == RSI_EP_DST ? "dst" : "relay";
}

/* A rank that sends, receives, copies and stages nothing. */
static bool rank_is_idle(const rs_plan *plan, int r) {
  const rsi_rank_stats *s = &plan->stats[r];
  return !s->sent[0] && !s->sent[1] && !s->recv[0] && !s->recv[1] &&
         !s->local && !s->relay_copied && !s->packed && !s->unpacked &&
         !s->msgs_sent && !s->msgs_recv && !s->staging && !s->moves;
}

rs_status rsi_plan_to_json(const rs_plan *plan, char **json, size_t *len,
                           rsi_err *err) {
  sbuf b = {malloc(4096), 0, 4096, false};
  if (!b.s) return RSI_NOMEM(err);
  put(&b, "{\"version\":\"%s\",\"fingerprint\":\"%016llx\",",
      rsi_version_string(), (unsigned long long)plan->fingerprint);
  put(&b, "\"world_size\":%d,\"rounds\":%d,\"staging_bytes\":%lld,",
      plan->world_size, plan->nrounds, (long long)plan->staging_bytes);
  /* -1: "moves" are the whole plan's; else only that rank's */
  put(&b, "\"part\":%d,", plan->part);
  /* false (RS_PARAM_PLAN_BOXES = 0): moves have no "offset" or "extent" */
  put(&b, "\"boxes\":%s,", plan->keeps_boxes ? "true" : "false");
  put(&b, "\"tensors\":[");
  for (int t = 0; t < plan->ntensors; t++) {
    const rsi_tensor *x = &plan->tensors[t];
    put(&b, "%s{\"name\":", t ? "," : "");
    put_string(&b, x->name);
    const rsi_conversion *c = &plan->conv[t];
    put(&b, ",\"dtype\":\"%s\",\"dst_dtype\":\"%s\",\"shape\":",
        rsi_dtype_name(c->src_dtype), rsi_dtype_name(c->dst_dtype));
    put_ints(&b, x->shape, x->ndim);
    if (c->scales >= 0 || c->values >= 0)
      put(&b, ",\"%s\":%d,\"block\":[%lld,%lld],\"scale_rule\":\"%s\"",
          c->scales >= 0 ? "scales" : "scales_of",
          c->scales >= 0 ? c->scales : c->values, (long long)c->b0,
          (long long)c->b1, c->ue8m0 ? "ue8m0" : "amax");
    put(&b, "}");
  }
  /* Only ranks with a part in the plan get an entry: a plan over a
   * million ranks with a few active stays small. */
  int idle = 0;
  for (int r = 0; r < plan->world_size; r++) idle += rank_is_idle(plan, r);
  put(&b, "],\"idle_ranks\":%d,\"ranks\":[", idle);
  bool first = true;
  for (int r = 0; r < plan->world_size; r++) {
    if (rank_is_idle(plan, r)) continue;
    const rsi_rank_stats *s = &plan->stats[r];
    put(&b,
        "%s{\"rank\":%d,\"domain\":%d,\"bytes_sent_intra\":%lld,"
        "\"bytes_sent_inter\":%lld,\"bytes_recv_intra\":%lld,"
        "\"bytes_recv_inter\":%lld,\"bytes_local\":%lld,"
        "\"messages_sent\":%lld,\"messages_recv\":%lld,"
        "\"staging_bytes\":%lld,\"moves\":%lld,"
        "\"converted_sending\":%lld,\"converted_receiving\":%lld,"
        "\"bytes_copied_from_relay\":%lld,\"bytes_packed\":%lld,"
        "\"bytes_unpacked\":%lld}",
        first ? "" : ",", r, plan->domain_of[r], (long long)s->sent[0],
        (long long)s->sent[1], (long long)s->recv[0], (long long)s->recv[1],
        (long long)s->local, (long long)s->msgs_sent, (long long)s->msgs_recv,
        (long long)s->staging, (long long)s->moves,
        (long long)s->converted[0], (long long)s->converted[1],
        (long long)s->relay_copied, (long long)s->packed,
        (long long)s->unpacked);
    first = false;
  }
  put(&b, "],\"moves\":[");
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int nd = plan->tensors[m->tensor].ndim;
    put(&b, "%s{\"tensor\":%d,", i ? "," : "", m->tensor);
    if (plan->keeps_boxes) {
      put(&b, "\"offset\":");
      put_ints(&b, rsi_move_offset(plan, m), nd);
      put(&b, ",\"extent\":");
      put_ints(&b, rsi_move_extent(plan, m), nd);
      put(&b, ",");
    }
    put(&b,
        "\"bytes\":%lld,\"src\":{\"rank\":%d,\"from\":\"%s\"},"
        "\"dst\":{\"rank\":%d,\"into\":\"%s\"},\"route\":\"%s\","
        "\"round\":%d,\"stage\":%d,\"forwarded\":%s",
        (long long)m->bytes, m->src_rank, kind_name(m->src_kind), m->dst_rank,
        kind_name(m->dst_kind), route_name(m->route),
        rsi_plan_public_round(plan, m->round), m->stage,
        m->forwarded ? "true" : "false");
    if (m->src_dtype != m->dst_dtype || m->computes_scales)
      put(&b, ",\"wire_dtype\":\"%s\",\"converts\":\"%s\"%s",
          rsi_dtype_name((rs_dtype)m->wire_dtype), converts_where(m),
          m->computes_scales ? ",\"computes_scales\":true" : "");
    put(&b, "}");
  }
  put(&b, "]}");
  if (b.failed) {
    free(b.s);
    return RSI_NOMEM(err);
  }
  *json = b.s;
  if (len) *len = b.n;
  return RS_OK;
}
