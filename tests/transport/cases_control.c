/* SPDX-License-Identifier: Apache-2.0 */
/* The conformance cases of the control channel (tcase.h): records under
 * the control tags, notices, the allgatherv of the layout exchange, the
 * alltoallv of per-rank planning, and the nonce every rank of one
 * transport shares. The control channel has
 * no `me`: a transport that has one drives one rank per process, which
 * these cases check first. */
#include "tcase.h"

#include <stdlib.h>
#include <string.h>

/* This process's one rank (a control channel serves exactly one). */
static int only_rank(tc_set *s) {
  tc_expect(s, s->d->nranks == 1,
            "a transport with a control channel drives one rank per "
            "process, this one %d",
            s->d->nranks);
  return s->d->ranks[0];
}

/* The same on every rank, and 0 exactly in process. */
void tc_case_nonce(tc_set *s) {
  uint64_t nonce = s->t->nonce;
  if (!s->d->has_control) {
    tc_expect(s, nonce == 0, "in process the nonce is 0, not %016llx",
              (unsigned long long)nonce);
    return;
  }
  only_rank(s);
  tc_expect(s, nonce != 0, "the nonce between processes is 0");
  void *all = NULL;
  size_t *counts = calloc((size_t)s->world, sizeof *counts);
  rsi_err err = {0};
  rs_status st = s->t->control->allgatherv(s->t, &nonce, sizeof nonce, &all,
                                           counts, s->d->wait_ms, &err);
  if (tc_ok(s, st, &err, "allgatherv of the nonce"))
    for (int r = 0; r < s->world; r++) {
      uint64_t theirs;
      memcpy(&theirs, (char *)all + (size_t)r * sizeof theirs, sizeof theirs);
      tc_expect(s, theirs == nonce, "rank %d has nonce %016llx, this %016llx",
                r, (unsigned long long)theirs, (unsigned long long)nonce);
    }
  free(all);
  free(counts);
}

/* Records under each control tag, to every other rank: receives posted
 * first (pending names the first peer, where a test does not send the
 * records posted so far: !batched_control; the data groups stay empty), then
 * sends first with one tag twice per pair (matched in order). */
void tc_case_control_records(tc_set *s) {
  int me = only_rank(s);
  tc_msgs agree = {0}, later = {0};
  for (int from = 0; from < s->world; from++)
    for (int to = 0; to < s->world; to++)
      if (from != to) {
        tc_add(s, &agree, TC_CONTROL, from, to, RSI_TAG_AGREE, 64);
        tc_add(s, &later, TC_CONTROL, from, to, RSI_TAG_HELLO, 48);
        tc_add(s, &later, TC_CONTROL, from, to, RSI_TAG_HELLO, 48);
        tc_add(s, &later, TC_CONTROL, from, to, RSI_TAG_DONE, 40);
      }
  tc_post_recvs(s, &agree);
  if (!s->d->batched_control) { /* a test now would send the batch */
    tc_expect_open(s, me, TC_CONTROL, "control receives first");
    tc_expect_pending(s, me, TC_CONTROL, me == 0 ? 1 : 0, true, 64,
                      "control receives first");
  }
  for (int g = 0; g < RSI_DATA_GROUPS; g++)
    tc_expect_pending(s, me, g, -1, false, 0, "control receives first");
  tc_sync(s);
  tc_post_sends(s, &agree);
  tc_wait(s, TC_CONTROL, "control receives first");
  tc_post_sends(s, &later);
  tc_sync(s);
  tc_post_recvs(s, &later);
  tc_wait(s, TC_CONTROL, "control sends first");
  tc_check_arrived(s, &agree);
  tc_check_arrived(s, &later);
  tc_msgs_free(&agree);
  tc_msgs_free(&later);
}

/* One poll for a notice: true with its sender and bytes. */
static bool poll(tc_set *s, int *from, unsigned char *buf) {
  memset(buf, 0, RSI_NOTICE_BYTES);
  return s->t->control->poll_notice(s->t, from, buf, RSI_NOTICE_BYTES);
}

/* Nothing before any notice; each rank's notice (the longest allowed) to
 * its right arrives whole from its left; then nothing again. A notice
 * over RSI_NOTICE_BYTES is refused. */
void tc_case_notices(tc_set *s) {
  int me = only_rank(s), from = -1;
  int right = (me + 1) % s->world, left = (me + s->world - 1) % s->world;
  unsigned char got[RSI_NOTICE_BYTES], out[RSI_NOTICE_BYTES + 1];
  bool early = poll(s, &from, got);
  tc_expect(s, !early, "a notice from rank %d before any was sent", from);
  tc_sync(s);
  uint64_t seed = 0x4e07 + (uint64_t)me, left_seed = 0x4e07 + (uint64_t)left;
  tc_fill(out, sizeof out, seed);
  rsi_err err = {0};
  tc_expect(s, s->t->control->notify(s->t, right, out, sizeof out, &err) !=
                   RS_OK,
            "a notice of %d bytes (over RSI_NOTICE_BYTES) was taken",
            RSI_NOTICE_BYTES + 1);
  tc_ok(s, s->t->control->notify(s->t, right, out, RSI_NOTICE_BYTES, &err),
        &err, "notify");
  bool arrived = false;
  int64_t until = tc_now_ms() + s->d->wait_ms;
  while (!(arrived = poll(s, &from, got)) && tc_now_ms() < until) tc_pause();
  if (tc_expect(s, arrived, "no notice within %lld ms",
                (long long)s->d->wait_ms)) {
    tc_expect(s, from == left, "a notice from rank %d, want rank %d", from,
              left);
    tc_check_payload(s, got, RSI_NOTICE_BYTES, left_seed, "the notice");
  }
  tc_sync(s);
  bool again = poll(s, &from, got);
  tc_expect(s, !again, "a second notice, from rank %d", from);
}

/* Rank r contributes len(r) bytes (0 on rank 0 and every third), a round
 * where every rank gives nothing, and a round of one byte each. */
static size_t contribution(int round, int r) {
  return round == 0 ? (r % 3 == 0 ? 0 : 100 * (size_t)r + 7)
         : round == 1 ? 0
                      : 1;
}

static void gather_round(tc_set *s, int me, int round) {
  size_t mine = contribution(round, me);
  unsigned char *in = tc_alloc(s, mine);
  tc_fill(in, mine, 0xa11 + (uint64_t)me * 8 + (uint64_t)round);
  size_t *counts = calloc((size_t)s->world, sizeof *counts);
  void *all = NULL;
  rsi_err err = {0};
  rs_status st = s->t->control->allgatherv(s->t, in, mine, &all, counts,
                                           s->d->wait_ms, &err);
  if (tc_ok(s, st, &err, "allgatherv") &&
      tc_expect(s, all != NULL, "allgatherv gave no buffer")) {
    size_t at = 0;
    for (int r = 0; r < s->world; r++) {
      size_t want = contribution(round, r);
      if (!tc_expect(s, counts[r] == want,
                     "round %d: rank %d contributed %zu bytes, counts say %zu",
                     round, r, want, counts[r]))
        break;
      tc_check_payload(s, (char *)all + at, want,
                       0xa11 + (uint64_t)r * 8 + (uint64_t)round,
                       "allgatherv");
      at += want;
    }
  }
  free(all);
  free(counts);
}

void tc_case_allgatherv(tc_set *s) {
  int me = only_rank(s);
  for (int round = 0; round < 3; round++) gather_round(s, me, round);
}

/* What rank q gives rank r in a round of the alltoallv: round 0 a mix of
 * sizes and nothing (to itself too), round 1 nothing at all, round 2 one
 * large message (rank 1 to rank 0, 3 MiB) and a byte to itself, round 3
 * only to itself. */
static size_t given(int round, int world, int q, int r) {
  switch (round) {
  case 0: return (q + 2 * r) % 3 == 0 ? 0 : (size_t)(37 * q + 11 * r + 1);
  case 1: return 0;
  case 2:
    return q == r ? 1 : q == 1 % world && r == 0 ? (size_t)3 << 20 : 0;
  default: return q == r ? 4096 : 0;
  }
}

static uint64_t given_seed(int round, int world, int q, int r) {
  return 0xa2a + (((uint64_t)round * (uint64_t)world + (uint64_t)q) *
                      (uint64_t)world +
                  (uint64_t)r);
}

static void exchange_round(tc_set *s, int me, int round) {
  int W = s->world;
  size_t *send_counts = calloc((size_t)W, sizeof *send_counts);
  size_t *recv_counts = calloc((size_t)W, sizeof *recv_counts);
  size_t total = 0;
  for (int r = 0; r < W; r++) total += send_counts[r] = given(round, W, me, r);
  unsigned char *send = tc_alloc(s, total);
  size_t at = 0;
  for (int r = 0; r < W; at += send_counts[r], r++)
    tc_fill(send + at, send_counts[r], given_seed(round, W, me, r));
  void *recv = NULL;
  rsi_err err = {0};
  rs_status st = s->t->control->alltoallv(s->t, send, send_counts, &recv,
                                          recv_counts, s->d->wait_ms, &err);
  if (tc_ok(s, st, &err, "alltoallv") &&
      tc_expect(s, recv != NULL, "alltoallv gave no buffer")) {
    at = 0;
    for (int q = 0; q < W; q++) {
      size_t want = given(round, W, q, me);
      if (!tc_expect(s, recv_counts[q] == want,
                     "round %d: rank %d gave rank %d %zu bytes, counts say "
                     "%zu",
                     round, q, me, want, recv_counts[q]))
        break;
      tc_check_payload(s, (char *)recv + at, want,
                       given_seed(round, W, q, me), "alltoallv");
      at += want;
    }
  }
  free(recv);
  free(send_counts);
  free(recv_counts);
}

void tc_case_alltoallv(tc_set *s) {
  int me = only_rank(s);
  for (int round = 0; round < 4; round++) exchange_round(s, me, round);
}
