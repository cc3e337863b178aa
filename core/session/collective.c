/* SPDX-License-Identifier: Apache-2.0 */
/* Sealed collectives and their verdict (collective.h). */
#include "session/collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/notice.h"
#include "base/hash.h"
#include "base/sigpipe.h"
#include "base/status.h"
#include "transport/transport.h"

/* A seal: the payload's length, then its digest, 8 bytes each,
 * little-endian, after the payload. */
enum { SEAL_BYTES = 16, ALL = -1 };

static void store_u64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t load_u64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* The digest of n payload bytes from rank `from` to `to` (ALL: everyone)
 * in collective `seq` of the context. */
static uint64_t digest(const rs_context *ctx, uint64_t seq, int from, int to,
                       const void *payload, size_t n) {
  uint64_t key[4] = {ctx->transport->nonce, seq, (uint64_t)(int64_t)from,
                     (uint64_t)(int64_t)to};
  uint64_t h = rsi_words_hash_update(RSI_FNV1A64_BASIS, key, sizeof key);
  unsigned char len[8];
  store_u64(len, n);
  h = rsi_words_hash_update(h, len, sizeof len);
  return rsi_words_hash_update(h, payload, n);
}

/* n payload bytes followed by their seal, at out (n + SEAL_BYTES). */
static void seal(const rs_context *ctx, uint64_t seq, int to,
                 const void *payload, size_t n, unsigned char *out) {
  if (n) memcpy(out, payload, n);
  store_u64(out + n, n);
  store_u64(out + n + 8, digest(ctx, seq, ctx->rank, to, payload, n));
}

/* Check the sealed bytes (len of them, at b) from rank `from`; the payload
 * is the first *n. */
static rs_status open_seal(const rs_context *ctx, uint64_t seq, int from,
                           int to, const unsigned char *b, size_t len,
                           size_t *n, const char *what, rsi_err *err) {
  *n = 0;
  if (len < SEAL_BYTES || load_u64(b + len - SEAL_BYTES) != len - SEAL_BYTES)
    return RSI_FAIL(err, RS_ERR_CORRUPT,
                    "rank %d: what rank %d sent in %s is damaged (%zu bytes, "
                    "not the length it was sealed with)",
                    ctx->rank, from, what, len);
  size_t got = len - SEAL_BYTES;
  if (load_u64(b + len - 8) != digest(ctx, seq, from, to, b, got))
    return RSI_FAIL(err, RS_ERR_CORRUPT,
                    "rank %d: what rank %d sent in %s failed its checksum "
                    "(%zu bytes)",
                    ctx->rank, from, what, got);
  *n = got;
  return RS_OK;
}

/* The fault injector (collective.h): flip a bit of what was received in
 * this process's n-th sealed collective on ctx. */
static void maybe_flip(const rs_context *ctx, uint64_t seq, unsigned char *b,
                       size_t len) {
  if (ctx->fault_flip_nth <= 0 || seq != (uint64_t)ctx->fault_flip_nth ||
      len == 0)
    return;
  uint64_t bit = (uint64_t)ctx->fault_flip_bit % ((uint64_t)len * 8);
  b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
}

void rsi_coll_fault_from_env(int64_t *nth, int64_t *bit) {
  *nth = *bit = 0;
  const char *v = getenv("RESHARD_FAULT_FLIP_COLLECTIVE");
  if (!v || !v[0]) return;
  char *end;
  long long n = strtoll(v, &end, 10), b = 0;
  if (*end == ':') b = strtoll(end + 1, &end, 10);
  if (*end || n < 1 || b < 0) return;
  *nth = n;
  *bit = b;
}

/* What a collective delivered at got, counts[r] sealed bytes from each
 * rank r to `to`: the fault injected where asked, every seal opened and
 * the gaps the seals leave closed, so counts become the payloads'. On
 * failure got is freed. */
static rs_status open_all(const rs_context *ctx, uint64_t seq, int to,
                          unsigned char *got, size_t *counts,
                          const char *what, rsi_err *err) {
  size_t total = 0;
  for (int r = 0; r < ctx->world_size; r++) total += counts[r];
  maybe_flip(ctx, seq, got, total);
  unsigned char *in = got, *out = got;
  rs_status st = RS_OK;
  for (int r = 0; st == RS_OK && r < ctx->world_size; r++) {
    size_t n;
    st = open_seal(ctx, seq, r, to, in, counts[r], &n, what, err);
    memmove(out, in, n);
    in += counts[r];
    out += n;
    counts[r] = n;
  }
  if (st != RS_OK) free(got);
  return st;
}

/* A transport failure or timeout leaves the control channel unusable.
 * After an abort (rs_context_abort, which ends the transport's wait) the
 * peers are told too: those waiting in this collective, or coming to it,
 * fail at once instead of at their timeout. */
static rs_status exchanged(rs_context *ctx, rs_status st) {
  if (st != RS_ERR_TIMEOUT && st != RS_ERR_TRANSPORT) return st;
  if (atomic_load_explicit(&ctx->aborted, memory_order_acquire))
    rsi_context_give_up(ctx, st);
  else
    rsi_context_fail(ctx);
  return st;
}

static rs_status usable_channel(rs_context *ctx, rsi_err *err) {
  rsi_transport *tp = ctx->transport;
  if (ctx->rank == RS_ALL_RANKS || !tp || !tp->control)
    return RSI_FAIL(err, RS_ERR_INTERNAL,
                    "a collective on a context without a control channel");
  rs_status st = rsi_context_usable(ctx); /* says why in ctx->err */
  if (st != RS_OK && err != ctx->err) *err = *ctx->err;
  return st;
}

rs_status rsi_coll_allgatherv(rs_context *ctx, const void *mine, size_t bytes,
                              void **all, size_t *counts, rsi_err *err) {
  *all = NULL;
  RSI_TRY(usable_channel(ctx, err));
  rsi_transport *tp = ctx->transport;
  uint64_t seq = ++ctx->collectives;
  unsigned char *sealed = malloc(bytes + SEAL_BYTES);
  if (!sealed) return RSI_NOMEM(err);
  seal(ctx, seq, ALL, mine, bytes, sealed);
  void *got = NULL;
  rsi_sigpipe_hold h; /* the collective writes to peers */
  rsi_sigpipe_hold_begin(&h);
  rs_status st = tp->control->allgatherv(tp, sealed, bytes + SEAL_BYTES, &got,
                                         counts, ctx->timeout_ms, err);
  rsi_sigpipe_hold_end(&h);
  free(sealed);
  if (st != RS_OK) return exchanged(ctx, st);
  st = open_all(ctx, seq, ALL, got, counts, "an allgather", err);
  if (st == RS_OK) *all = got;
  return st;
}

rs_status rsi_coll_alltoallv(rs_context *ctx, const void *send,
                             const size_t *send_counts, void **recv,
                             size_t *recv_counts, rsi_err *err) {
  *recv = NULL;
  RSI_TRY(usable_channel(ctx, err));
  rsi_transport *tp = ctx->transport;
  int W = ctx->world_size;
  uint64_t seq = ++ctx->collectives;
  size_t total = 0;
  for (int q = 0; q < W; q++) total += send_counts[q] + SEAL_BYTES;
  unsigned char *sealed = malloc(total);
  size_t *counts = malloc((size_t)W * sizeof *counts);
  if (!sealed || !counts) {
    free(sealed);
    free(counts);
    return RSI_NOMEM(err);
  }
  const unsigned char *from = send;
  unsigned char *at = sealed;
  for (int q = 0; q < W; q++) {
    seal(ctx, seq, q, from, send_counts[q], at);
    from += send_counts[q];
    at += send_counts[q] + SEAL_BYTES;
    counts[q] = send_counts[q] + SEAL_BYTES;
  }
  void *got = NULL;
  rsi_sigpipe_hold h;
  rsi_sigpipe_hold_begin(&h);
  rs_status st = tp->control->alltoallv(tp, sealed, counts, &got, recv_counts,
                                        ctx->timeout_ms, err);
  rsi_sigpipe_hold_end(&h);
  free(sealed);
  free(counts);
  if (st != RS_OK) return exchanged(ctx, st);
  st = open_all(ctx, seq, ctx->rank, got, recv_counts, "an all-to-all",
                err);
  if (st == RS_OK) *recv = got;
  return st;
}

/* ---- the verdict -------------------------------------------------------- */

/* A verdict record: the status (8 bytes, little-endian), then the message
 * and its NUL. */
enum { VERDICT_TEXT = 320 };

rs_status rsi_coll_verdict(rs_context *ctx, rs_status mine, const char *what,
                           rsi_err *err) {
  unsigned char rec[8 + VERDICT_TEXT];
  size_t n = 0;
  store_u64(rec, (uint64_t)mine);
  if (mine != RS_OK) {
    n = strnlen(err->msg, VERDICT_TEXT - 1);
    memcpy(rec + 8, err->msg, n);
  }
  rec[8 + n] = '\0';
  rsi_err own = *err, heard = {0};
  void *all = NULL;
  size_t *counts = malloc((size_t)ctx->world_size * sizeof *counts);
  rs_status st = counts ? rsi_coll_allgatherv(ctx, rec, 9 + n, &all, counts,
                                              &heard)
                        : RSI_NOMEM(&heard);
  if (st != RS_OK) {
    /* The verdict did not reach this rank whole: peers may have heard
     * every rank say RS_OK. Tell them, and stop this context. */
    if (mine != RS_OK)
      RSI_FAIL(err, mine, "%s (and the verdict of %s failed: %s)", own.msg,
               what, heard.msg);
    else
      RSI_FAIL(err, st, "%s: %s; the context is done, destroy it", what,
               heard.msg);
    rsi_context_give_up(ctx, mine != RS_OK ? mine : st);
    free(counts);
    return mine != RS_OK ? mine : st;
  }
  const unsigned char *at = all;
  rs_status verdict = RS_OK;
  for (int r = 0; r < ctx->world_size && verdict == RS_OK; r++) {
    rs_status s = counts[r] >= 9 && at[counts[r] - 1] == '\0'
                      ? (rs_status)load_u64(at)
                      : RS_ERR_CORRUPT;
    if (s != RS_OK && r != ctx->rank && mine == RS_OK) {
      RSI_FAIL(err, s, "rank %d failed %s (%s): %s", r, what,
               rsi_status_name(s),
               counts[r] >= 9 ? (const char *)at + 8 : "its record is cut");
      verdict = s;
    }
    at += counts[r];
  }
  free(all);
  free(counts);
  if (mine != RS_OK) {
    *err = own;
    return mine;
  }
  return verdict;
}
