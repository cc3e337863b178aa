/* SPDX-License-Identifier: Apache-2.0 */
/* The conformance cases of the data channel (tcase.h): the two step
 * groups completing apart, receives posted before and after their sends,
 * zero-byte messages, every rank to every other with one tag, matching by
 * tag, pending and a test that never blocks, a silent peer and abandon,
 * and checksums on.
 * Tags here are small (the executor's own range): a transport may fold
 * them (MPI keeps them below its control tags). */
#include "tcase.h"

#include <stdio.h>

#define MIB ((size_t)1 << 20)

static int left_of(const tc_set *s, int r) {
  return (r + s->world - 1) % s->world;
}

static int right_of(const tc_set *s, int r) { return (r + 1) % s->world; }

/* Wait for group `done` while group `open` holds only a receive from the
 * left of `bytes` (its send not posted yet): `open` must stay so. */
static void done_while_open(tc_set *s, int done, int open, size_t bytes,
                            const char *what) {
  tc_wait(s, done, what);
  for (int k = 0; k < s->d->nranks; k++) {
    int r = s->d->ranks[k];
    tc_expect_open(s, r, open, what);
    tc_expect_pending(s, r, open, left_of(s, r), true, bytes, what);
  }
  tc_sync(s);
}

/* Each group done on its own: group 1 is posted before group 0
 * completes and stays open while group 0 is found done; then group 0,
 * posted again, stays open while group 1 is found done. */
void tc_case_step_groups(tc_set *s) {
  tc_msgs g1 = {0}, g0 = {0}, g0_again = {0};
  tc_add_ring(s, &g1, RSI_GROUP_STEP1, 1, 11, 300);
  tc_add_ring(s, &g0, RSI_GROUP_STEP0, 1, 10, 1000);
  tc_add_ring(s, &g0, RSI_GROUP_STEP0, -1, 10, 777);
  tc_add_ring(s, &g0_again, RSI_GROUP_STEP0, 1, 12, 64);
  tc_post_recvs(s, &g1); /* its sends come only after group 0 is done */
  tc_post_recvs(s, &g0);
  tc_post_sends(s, &g0);
  done_while_open(s, RSI_GROUP_STEP0, RSI_GROUP_STEP1, 300,
                  "group 0 done, group 1 posted");
  tc_check_arrived(s, &g0); /* a view lasts until its group is reused */
  tc_post_sends(s, &g1);
  tc_post_recvs(s, &g0_again);
  done_while_open(s, RSI_GROUP_STEP1, RSI_GROUP_STEP0, 64,
                  "group 1 done, group 0 posted again");
  tc_check_arrived(s, &g1);
  tc_post_sends(s, &g0_again);
  tc_wait(s, RSI_GROUP_STEP0, "group 0 again");
  tc_check_arrived(s, &g0_again);
  tc_msgs_free(&g1);
  tc_msgs_free(&g0);
  tc_msgs_free(&g0_again);
}

/* Every rank to both neighbours in both groups, small and large (past
 * any eager limit: such a send waits for its receive), with every
 * receive posted before any send or every send before any receive. */
static void neighbours(tc_set *s, bool receives_first, const char *what) {
  tc_msgs l = {0};
  for (int g = 0; g < RSI_DATA_GROUPS; g++) {
    tc_add_ring(s, &l, g, 1, 20 + (uint64_t)g, 64);
    tc_add_ring(s, &l, g, -1, 20 + (uint64_t)g, MIB + 3);
    tc_add_ring(s, &l, g, 1, 20 + (uint64_t)g, 1);
  }
  if (receives_first) {
    tc_post_recvs(s, &l);
    for (int k = 0; k < s->d->nranks; k++)
      tc_expect_open(s, s->d->ranks[k], RSI_GROUP_STEP0, what);
  } else {
    tc_post_sends(s, &l);
  }
  tc_sync(s);
  if (receives_first)
    tc_post_sends(s, &l);
  else
    tc_post_recvs(s, &l);
  tc_wait(s, RSI_GROUP_STEP0, what);
  tc_wait(s, RSI_GROUP_STEP1, what);
  tc_check_arrived(s, &l);
  tc_msgs_free(&l);
}

void tc_case_receive_before_send(tc_set *s) {
  neighbours(s, true, "receives first");
}

void tc_case_send_before_receive(tc_set *s) {
  neighbours(s, false, "sends first");
}

/* Zero-byte messages among others of the same tag (matched in order: a
 * mix-up shows as a wrong size or payload), and a group that holds
 * nothing else, posted in both orders. */
void tc_case_zero_bytes(tc_set *s) {
  tc_msgs mixed = {0}, only = {0};
  const size_t sizes[] = {0, 0, 5, 0, 4096};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    tc_add_ring(s, &mixed, RSI_GROUP_STEP0, 1, 30, sizes[i]);
  tc_add_ring(s, &only, RSI_GROUP_STEP1, -1, 31, 0);
  tc_add_ring(s, &only, RSI_GROUP_STEP1, -1, 31, 0);
  tc_post_recvs(s, &mixed);
  tc_post_sends(s, &only);
  tc_sync(s);
  tc_post_sends(s, &mixed);
  tc_post_recvs(s, &only);
  tc_wait(s, RSI_GROUP_STEP0, "zero bytes among others");
  tc_wait(s, RSI_GROUP_STEP1, "zero bytes alone");
  tc_check_arrived(s, &mixed);
  tc_check_arrived(s, &only);
  tc_msgs_free(&mixed);
  tc_msgs_free(&only);
}

/* Every rank to every other, several messages per pair with one tag
 * (matched in posting order), in both groups; even ranks post their
 * receives first, odd ranks their sends. */
void tc_case_many_peers(tc_set *s) {
  enum { PER_PAIR = 4 };
  tc_msgs l = {0};
  for (int k = 0; k < PER_PAIR; k++)
    for (int from = 0; from < s->world; from++)
      for (int to = 0; to < s->world; to++)
        if (from != to) {
          tc_add(s, &l, RSI_GROUP_STEP0, from, to, 40, 512);
          tc_add(s, &l, RSI_GROUP_STEP1, from, to, 41, 24);
        }
  bool even = s->d->ranks[0] % 2 == 0; /* of the process, between processes */
  if (even) tc_post_recvs(s, &l);
  tc_post_sends(s, &l);
  if (!even) tc_post_recvs(s, &l);
  tc_wait(s, RSI_GROUP_STEP0, "every rank to every other");
  tc_wait(s, RSI_GROUP_STEP1, "every rank to every other");
  tc_check_arrived(s, &l);
  tc_msgs_free(&l);
}

/* Matching by tag: each rank sends its right one message under tag 70,
 * then one under tag 71 (of other sizes, small in group 0, past any eager
 * limit in group 1); the right posts its receives in the other order,
 * before any send. Each must get the message of its own tag. */
void tc_case_tag_matching(tc_set *s) {
  tc_msgs first = {0}, second = {0};
  tc_add_ring(s, &first, RSI_GROUP_STEP0, 1, 70, 90);
  tc_add_ring(s, &second, RSI_GROUP_STEP0, 1, 71, 40);
  tc_add_ring(s, &first, RSI_GROUP_STEP1, 1, 72, MIB + 5);
  tc_add_ring(s, &second, RSI_GROUP_STEP1, 1, 73, MIB / 2 + 1);
  tc_post_recvs(s, &second);
  tc_post_recvs(s, &first);
  tc_sync(s);
  tc_post_sends(s, &first);
  tc_post_sends(s, &second);
  tc_wait(s, RSI_GROUP_STEP0, "receives in the other order than sends");
  tc_wait(s, RSI_GROUP_STEP1, "receives in the other order than sends");
  tc_check_arrived(s, &first);
  tc_check_arrived(s, &second);
  tc_msgs_free(&first);
  tc_msgs_free(&second);
}

/* Two receives outstanding (from the left, then from the right, sizes
 * naming the sender): pending names the first, test says not done and
 * returns at once however long the silence; once the left sends, pending
 * names the right; once both have, nothing is pending. Group 0, empty,
 * is done throughout. */
void tc_case_pending_names_peer(tc_set *s) {
  const tc_driver *d = s->d;
  tc_msgs from_left = {0}, from_right = {0};
  for (int r = 0; r < s->world; r++) {
    tc_add(s, &from_left, RSI_GROUP_STEP1, r, right_of(s, r), 50,
           300 + (size_t)r);
    tc_add(s, &from_right, RSI_GROUP_STEP1, r, left_of(s, r), 51,
           200 + (size_t)r);
  }
  tc_post_recvs(s, &from_left);
  tc_post_recvs(s, &from_right);
  tc_watch_silence(s, RSI_GROUP_STEP1, TC_SILENT_MS, "nothing sent yet");
  for (int k = 0; k < d->nranks; k++) {
    int r = d->ranks[k];
    tc_expect_pending(s, r, RSI_GROUP_STEP1, left_of(s, r), true,
                      300 + (size_t)left_of(s, r), "nothing sent yet");
    tc_expect_pending(s, r, RSI_GROUP_STEP0, -1, false, 0, "empty group 0");
  }
  tc_sync(s);
  tc_post_sends(s, &from_left);
  for (int k = 0; k < d->nranks; k++) {
    int right = right_of(s, d->ranks[k]);
    tc_await_pending(s, d->ranks[k], RSI_GROUP_STEP1, right,
                     200 + (size_t)right, "the left sent");
  }
  tc_sync(s);
  tc_post_sends(s, &from_right);
  tc_wait(s, RSI_GROUP_STEP1, "both sent");
  for (int k = 0; k < d->nranks; k++)
    tc_expect_pending(s, d->ranks[k], RSI_GROUP_STEP1, -1, false, 0,
                      "both sent");
  tc_check_arrived(s, &from_left);
  tc_check_arrived(s, &from_right);
  tc_msgs_free(&from_left);
  tc_msgs_free(&from_right);
}

/* Nothing and nobody pending anywhere on rank r. */
static void expect_empty(tc_set *s, int r, const char *what) {
  for (int g = 0; g < RSI_DATA_GROUPS; g++) {
    bool done = false;
    if (tc_test(s, r, g, &done))
      tc_expect(s, done, "%s: rank %d's group %d is not done", what, r, g);
    tc_expect_pending(s, r, g, -1, false, 0, what);
  }
}

/* Receives from ranks that never send (a silent peer) in both groups and
 * on the control channel: test keeps saying not done without blocking,
 * pending names the silent rank; abandon returns within RSI_ABANDON_MS
 * (plus a margin) and leaves every group empty and the transport fit for
 * destroy. */
void tc_case_silent_peer(tc_set *s) {
  const tc_driver *d = s->d;
  tc_msgs never = {0};
  tc_add_ring(s, &never, RSI_GROUP_STEP0, -1, 60, 4096); /* from the right */
  tc_add_ring(s, &never, RSI_GROUP_STEP1, 1, 61, 8);     /* from the left */
  if (d->has_control) tc_add_ring(s, &never, TC_CONTROL, -1, RSI_TAG_DONE, 48);
  tc_post_recvs(s, &never);
  tc_watch_silence(s, RSI_GROUP_STEP0, TC_SILENT_MS, "a silent peer");
  for (int k = 0; k < d->nranks; k++) {
    int r = d->ranks[k];
    tc_expect_open(s, r, RSI_GROUP_STEP1, "a silent peer");
    tc_expect_pending(s, r, RSI_GROUP_STEP0, right_of(s, r), true, 4096,
                      "a silent peer");
    tc_expect_pending(s, r, RSI_GROUP_STEP1, left_of(s, r), true, 8,
                      "a silent peer");
  }
  if (d->has_control) {
    tc_expect_open(s, d->ranks[0], TC_CONTROL, "a silent peer");
    tc_expect_pending(s, d->ranks[0], TC_CONTROL, right_of(s, d->ranks[0]),
                      true, 48, "a silent peer");
  }
  tc_sync(s);
  int64_t t0 = tc_now_ms();
  s->t->ops->abandon(s->t);
  int64_t took = tc_now_ms() - t0;
  s->abandoned = true;
  tc_expect(s, took <= RSI_ABANDON_MS + TC_ABANDON_MARGIN_MS,
            "abandon took %lld ms, at most %d + %d allowed", (long long)took,
            RSI_ABANDON_MS, TC_ABANDON_MARGIN_MS);
  for (int k = 0; k < d->nranks; k++)
    expect_empty(s, d->ranks[k], "after abandon");
  if (d->has_control) {
    bool done = false;
    if (tc_test(s, d->ranks[0], TC_CONTROL, &done))
      tc_expect(s, done, "after abandon: the control channel is not done");
    tc_expect_pending(s, d->ranks[0], TC_CONTROL, -1, false, 0,
                      "after abandon");
  }
  tc_sync(s);
  tc_msgs_free(&never);
}

/* Checksums on at every end: messages of every kind still arrive intact
 * and every group completes without a complaint (a corrupted message is
 * tests/faults' business). */
void tc_case_integrity(tc_set *s) {
  s->t->ops->set_integrity(s->t, true);
  tc_sync(s); /* both ends of every message check */
  neighbours(s, true, "integrity on, receives first");
  neighbours(s, false, "integrity on, sends first");
  tc_case_zero_bytes(s);
  if (s->d->has_control) {
    tc_msgs l = {0};
    tc_add_ring(s, &l, TC_CONTROL, 1, RSI_TAG_HELLO, 48);
    tc_post_recvs(s, &l);
    tc_post_sends(s, &l);
    tc_wait(s, TC_CONTROL, "a control record, integrity on");
    tc_check_arrived(s, &l);
    tc_msgs_free(&l);
  }
}
