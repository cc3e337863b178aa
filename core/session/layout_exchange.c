/* SPDX-License-Identifier: Apache-2.0 */
/* rs_layout_allgather: every rank sends what it added; every rank decodes
 * all contributions, in rank order, into a fresh layout, which replaces its
 * own once every rank has said (the verdict, collective.h) that it decoded
 * its own fresh layout too. Decoding validates everything, so a rank cannot
 * slip a malformed shard into the others' layouts, and the contributions
 * travel sealed, so a damaged one fails every rank's call with no layout
 * changed.
 *
 * A rank whose own layout is refused (a shard of another rank, no memory to
 * encode it) still takes part: it contributes a refusal (its status and
 * message) instead of a layout, so that every rank fails at once naming it
 * rather than waiting out the timeout, whatever the transport. */
#include <stdlib.h>
#include <string.h>

#include "session/collective.h"
#include "base/status.h"
#include "transport/transport.h"
#include "layout/wire.h"

/* A refusal: "RSREFUSE", u32 status (little-endian), the message and its
 * NUL. The wire format starts "RSLAYOUT", so neither passes for the other. */
#define REFUSAL_MAGIC "RSREFUSE"
#define REFUSAL_HEAD 12
#define REFUSAL_TEXT 256

typedef struct refusal {
  unsigned char bytes[REFUSAL_HEAD + REFUSAL_TEXT];
  size_t len;
} refusal;

static void refusal_make(refusal *r, const rsi_err *why) {
  memcpy(r->bytes, REFUSAL_MAGIC, 8);
  for (int i = 0; i < 4; i++)
    r->bytes[8 + i] = (unsigned char)((uint32_t)why->status >> (8 * i));
  size_t n = strnlen(why->msg, REFUSAL_TEXT - 1);
  memcpy(r->bytes + REFUSAL_HEAD, why->msg, n);
  r->bytes[REFUSAL_HEAD + n] = '\0';
  r->len = REFUSAL_HEAD + n + 1;
}

static bool is_refusal(const unsigned char *b, size_t len) {
  return len >= 8 && memcmp(b, REFUSAL_MAGIC, 8) == 0;
}

/* The failure that rank `from`'s refusal (len bytes at b) brings here. */
static rs_status heard_refusal(const unsigned char *b, size_t len, int from,
                               rsi_err *err) {
  if (len < REFUSAL_HEAD + 1 || len > REFUSAL_HEAD + REFUSAL_TEXT ||
      b[len - 1] != '\0')
    return RSI_FAIL(err, RS_ERR_CORRUPT,
                    "rank %d: its refusal to take part in "
                    "rs_layout_allgather is malformed (%zu bytes)",
                    from, len);
  uint32_t status = 0;
  for (int i = 0; i < 4; i++) status |= (uint32_t)b[8 + i] << (8 * i);
  return RSI_FAIL(err, RS_ERR_MISMATCH,
                  "rank %d: %s; it refused (%s) to take part in "
                  "rs_layout_allgather, so no rank's layout changed",
                  from, (const char *)b + REFUSAL_HEAD,
                  rsi_status_name((rs_status)status));
}

/* This rank's own checks, and its encoding into *mine. */
static rs_status encode_own(const rs_layout *l, void **mine, size_t *len,
                            rsi_err *err) {
  const rs_context *ctx = l->ctx;
  for (int64_t i = 0; i < l->nshards; i++)
    if (l->shards[i].rank != ctx->rank)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "rank %d holds a shard of tensor '%s' for rank %d: "
                      "before rs_layout_allgather each rank adds only its own "
                      "shards",
                      ctx->rank, l->tensors[l->shards[i].tensor].name,
                      l->shards[i].rank);
  return rsi_wire_encode(l, ctx->rank, mine, len, err);
}

rs_status rsi_layout_allgather(rs_layout *l) {
  rs_context *ctx = l->ctx;
  rsi_err *err = ctx->err;
  rsi_transport *tp = ctx->transport;
  if (ctx->rank == RS_ALL_RANKS || !tp || !tp->control)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "rs_layout_allgather needs a context with one rank per "
                    "process (MPI, NCCL); this one drives every rank itself");
  /* A context that is done takes part in nothing more. */
  RSI_TRY(rsi_context_usable(ctx));
  void *mine = NULL, *all = NULL;
  size_t len = 0;
  rs_status own = encode_own(l, &mine, &len, err);
  rsi_err own_err = *err;
  refusal no;
  if (own != RS_OK) refusal_make(&no, &own_err);
  size_t *counts = malloc((size_t)ctx->world_size * sizeof *counts);
  rs_status st = counts ? RS_OK : RSI_NOMEM(err);
  if (st == RS_OK)
    st = own == RS_OK
             ? rsi_coll_allgatherv(ctx, mine, len, &all, counts, err)
             : rsi_coll_allgatherv(ctx, no.bytes, no.len, &all, counts, err);
  free(mine);
  if (st != RS_OK && own != RS_OK) /* what failed, and what came first */
    RSI_FAIL(err, st, "%s (this rank had refused its layout: %s)", err->msg,
             own_err.msg);
  if (st == RS_OK && own != RS_OK) { /* the others know; ours stands */
    *err = own_err;
    st = own;
  }
  const unsigned char *at = all;
  for (int r = 0; st == RS_OK && r < ctx->world_size; r++) {
    if (is_refusal(at, counts[r])) st = heard_refusal(at, counts[r], r, err);
    at += counts[r];
  }
  rs_layout *fresh = NULL;
  if (st == RS_OK)
    st = rsi_wire_decode_fresh(ctx, all, counts, ctx->world_size, &fresh, err);
  free(all);
  free(counts);
  if (!ctx->failed)
    st = rsi_coll_verdict(ctx, st, "rs_layout_allgather", err);
  if (st == RS_OK)
    rsi_wire_replace(l, fresh);
  else
    rsi_layout_destroy(fresh);
  return st;
}
