/* SPDX-License-Identifier: Apache-2.0 */
/* Notices: how a rank that gives up tells its peers the first cause, on
 * the transport's control channel, inside an execution (exec_guard.c) or
 * outside one (a sealed collective, collective.c); and the sealed,
 * little-endian words that notices and the guard's records travel as. */
#ifndef RS_CORE_SESSION_NOTICE_H
#define RS_CORE_SESSION_NOTICE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/context.h"

/* words[0..n-2] and their checksum (FNV-1a as they travel) in words[n-1];
 * whether they still match it. */
void rsi_words_seal(uint64_t *words, int n);
bool rsi_words_sealed(const uint64_t *words, int n);
/* Words travel little-endian whatever the host: n words to 8n bytes and
 * back. */
void rsi_words_to_wire(const uint64_t *words, int n, unsigned char *out);
void rsi_words_from_wire(const unsigned char *in, int n, uint64_t *words);

/* A notice as it arrived: who sent it, and the cause it carries (the rank
 * that gave up first, its status, the rank it waited for or -1), which a
 * rank passes on instead of its own; its epoch, and whether it names the
 * plan (fingerprint, serial) the receiver asked about. */
typedef struct rsi_notice {
  int from, cause, culprit;
  rs_status status;
  uint64_t epoch;
  bool same_plan;
} rsi_notice;

/* One notice of this context, if one arrived (true). A damaged one is a
 * failure of its own (false, RS_ERR_CORRUPT in *st, recorded in err). */
bool rsi_notice_next(rs_context *ctx, uint64_t fingerprint, uint64_t serial,
                     rsi_notice *n, rs_status *st, rsi_err *err);

/* Tell `ranks` (n of them; NULL: every other rank of the context) why
 * this rank gives up: the cause it holds, its own or one a notice brought,
 * with the plan it ran (fingerprint and serial 0: none). Best effort. */
void rsi_notice_send(rs_context *ctx, uint64_t fingerprint, uint64_t serial,
                     uint64_t epoch, const int *ranks, int n);

/* This rank gives up for its own reason (status), waiting for culprit
 * (-1: none): the cause its notices carry. */
void rsi_blame_self(rs_context *ctx, rs_status status, int culprit);

/* Outside any execution (a collective whose outcome this rank alone
 * knows): mark the context failed and tell every other rank of it by
 * notice, so that each fails its next execution or collective on the
 * context at once. Nothing is posted to abandon. */
void rsi_context_give_up(rs_context *ctx, rs_status status);

#endif
