/* SPDX-License-Identifier: Apache-2.0 */
#include "session/notice.h"

#include "base/hash.h"
#include "transport/transport.h"

#define NOTICE_MAGIC 0x31454349544f4e52ull /* "RNOTICE1" */
/* magic, nonce, fingerprint, serial, epoch, the rank that gave up first,
 * its status, the rank it was waiting for + 1, checksum */
enum { NOTICE_WORDS = 9 };

/* FNV-1a of the words as they travel (little-endian). */
static uint64_t words_sum(const uint64_t *words, int n) {
  uint64_t h = RSI_FNV1A64_BASIS;
  for (int i = 0; i < n; i++) {
    unsigned char b[8];
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)(words[i] >> (8 * k));
    h = rsi_fnv1a64_update(h, b, sizeof b);
  }
  return h;
}

void rsi_words_seal(uint64_t *words, int n) {
  words[n - 1] = words_sum(words, n - 1);
}

bool rsi_words_sealed(const uint64_t *words, int n) {
  return words[n - 1] == words_sum(words, n - 1);
}

static uint64_t load_u64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

static void store_u64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

void rsi_words_to_wire(const uint64_t *words, int n, unsigned char *out) {
  for (int i = 0; i < n; i++) store_u64(out + 8 * i, words[i]);
}

void rsi_words_from_wire(const unsigned char *in, int n, uint64_t *words) {
  for (int i = 0; i < n; i++) words[i] = load_u64(in + 8 * i);
}

bool rsi_notice_next(rs_context *ctx, uint64_t fingerprint, uint64_t serial,
                     rsi_notice *n, rs_status *st, rsi_err *err) {
  rsi_transport *tp = ctx->transport;
  *st = RS_OK;
  if (!tp->control) return false;
  unsigned char buf[RSI_NOTICE_BYTES];
  uint64_t w[NOTICE_WORDS];
  int from;
  for (;;) {
    if (!tp->control->poll_notice(tp, &from, buf, sizeof buf)) return false;
    rsi_words_from_wire(buf, NOTICE_WORDS, w);
    if (w[0] != NOTICE_MAGIC || !rsi_words_sealed(w, NOTICE_WORDS)) {
      *st = RSI_FAIL(err, RS_ERR_CORRUPT,
                     "rank %d: a notice from rank %d failed its checksum",
                     ctx->rank, from);
      return false;
    }
    if (w[1] == tp->nonce) break; /* else meant for a destroyed context */
  }
  *n = (rsi_notice){from, (int)w[5], (int)w[7] - 1, (rs_status)w[6], w[4],
                w[2] == fingerprint && w[3] == serial};
  return true;
}

void rsi_notice_send(rs_context *ctx, uint64_t fingerprint, uint64_t serial,
                     uint64_t epoch, const int *ranks, int n) {
  rsi_transport *tp = ctx->transport;
  if (!tp || !tp->control) return;
  uint64_t w[NOTICE_WORDS] = {NOTICE_MAGIC,
                              tp->nonce,
                              fingerprint,
                              serial,
                              epoch,
                              (uint64_t)ctx->cause_rank,
                              (uint64_t)ctx->cause_status,
                              (uint64_t)(ctx->culprit + 1),
                              0};
  rsi_words_seal(w, NOTICE_WORDS);
  unsigned char buf[NOTICE_WORDS * 8];
  rsi_words_to_wire(w, NOTICE_WORDS, buf);
  rsi_err ignored; /* best effort: the peer may be gone */
  int count = ranks ? n : ctx->world_size;
  for (int i = 0; i < count; i++) {
    int to = ranks ? ranks[i] : i;
    if (to != ctx->rank)
      tp->control->notify(tp, to, buf, sizeof buf, &ignored);
  }
}

void rsi_blame_self(rs_context *ctx, rs_status status, int culprit) {
  ctx->cause_rank = ctx->rank;
  ctx->cause_status = status;
  ctx->culprit = culprit;
}

void rsi_context_give_up(rs_context *ctx, rs_status status) {
  if (ctx->failed || ctx->rank == RS_ALL_RANKS) return;
  if (ctx->cause_rank < 0) rsi_blame_self(ctx, status, ctx->culprit);
  rsi_context_fail(ctx);
  rsi_notice_send(ctx, 0, 0, 0, NULL, 0);
}
