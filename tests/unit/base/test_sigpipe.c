/* SPDX-License-Identifier: Apache-2.0 */
/* Holding SIGPIPE while a call talks to peers (core/base/sigpipe.h): a write to
 * a socket whose far end is closed, inside a hold, fails with EPIPE and
 * the process lives on with its signal mask as it was; a caller's own
 * block and a SIGPIPE it left pending are left alone; holds nest; and the
 * public entry points give the thread back its mask. Each Test runs in its
 * own process (Criterion), with SIGPIPE at its default action: a SIGPIPE
 * that escaped would end the test as a crash. */
#include <criterion/criterion.h>

#include "base/sigpipe.h"

#include <errno.h>
#include <pthread.h>
#include <reshard/reshard.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static bool blocked(void) {
  sigset_t now;
  cr_assert_eq(pthread_sigmask(SIG_BLOCK, NULL, &now), 0);
  return sigismember(&now, SIGPIPE);
}

static bool pending(void) {
  sigset_t p;
  cr_assert_eq(sigpending(&p), 0);
  return sigismember(&p, SIGPIPE);
}

static void default_action(void) {
  cr_assert(signal(SIGPIPE, SIG_DFL) != SIG_ERR);
}

/* Two writes to a stream socket whose peer is gone: both fail with EPIPE,
 * each raising SIGPIPE in this thread. */
static void write_to_closed_peer(void) {
  int fd[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
  close(fd[1]);
  for (int i = 0; i < 2; i++) {
    errno = 0;
    cr_assert_eq(write(fd[0], "x", 1), -1);
    cr_assert_eq(errno, EPIPE, "write %d: %s", i, strerror(errno));
  }
  close(fd[0]);
}

static void take_pending(void) {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  const struct timespec now = {0, 0};
  cr_assert_eq(sigtimedwait(&pipe, NULL, &now), SIGPIPE);
}

Test(sigpipe, a_write_to_a_closed_peer_inside_a_hold_does_not_kill) {
  default_action();
  cr_assert(!blocked());
  rsi_sigpipe_hold h;
  rsi_sigpipe_hold_begin(&h);
  cr_assert(blocked(), "SIGPIPE not blocked inside the hold");
  write_to_closed_peer();
  cr_assert(pending(), "the writes raised no SIGPIPE: the test proves nothing");
  rsi_sigpipe_hold_end(&h);
  cr_assert(!blocked(), "the thread's mask was not restored");
  cr_assert(!pending(), "the SIGPIPE raised inside the hold was not taken");
}

Test(sigpipe, a_callers_own_block_and_pending_signal_are_left_alone) {
  default_action();
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  cr_assert_eq(pthread_sigmask(SIG_BLOCK, &pipe, NULL), 0);
  rsi_sigpipe_hold h;
  rsi_sigpipe_hold_begin(&h);
  write_to_closed_peer();
  rsi_sigpipe_hold_end(&h);
  cr_assert(blocked(), "the caller's block of SIGPIPE was undone");
  cr_assert(pending(), "a SIGPIPE the caller holds itself was taken");
  take_pending();
}

Test(sigpipe, holds_nest) {
  default_action();
  rsi_sigpipe_hold outer, inner;
  rsi_sigpipe_hold_begin(&outer);
  rsi_sigpipe_hold_begin(&inner);
  write_to_closed_peer();
  rsi_sigpipe_hold_end(&inner);
  cr_assert(blocked(), "the inner hold unblocked SIGPIPE inside the outer");
  cr_assert(pending());
  rsi_sigpipe_hold_end(&outer);
  cr_assert(!blocked());
  cr_assert(!pending());
}

/* Every entry point that holds SIGPIPE gives the thread back its mask,
 * whatever else it blocks, on success and on failure. */
Test(sigpipe, entry_points_restore_the_threads_mask) {
  default_action();
  sigset_t mine, now;
  sigemptyset(&mine);
  sigaddset(&mine, SIGUSR1);
  cr_assert_eq(pthread_sigmask(SIG_SETMASK, &mine, NULL), 0);

  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  const int64_t shape[1] = {8}, lo[2][1] = {{0}, {4}}, ext[1] = {4};
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 1, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 1, shape), RS_OK);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(rs_layout_add_shard(src, "w", r, lo[r], ext, 0, 0, NULL),
                 RS_OK);
    cr_assert_eq(rs_layout_add_shard(dst, "w", 1 - r, lo[r], ext, 0, 0, NULL),
                 RS_OK);
  }
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  float in[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}}, out[2][4];
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, r, 0, in[r], sizeof in[r]),
                 RS_OK);
    cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, r, 0, out[r], sizeof out[r]),
                 RS_OK);
  }

  cr_assert_eq(rs_plan_execute(plan), RS_OK);
  cr_assert_eq(out[1][0], 1.0f);
  cr_assert_eq(rs_plan_execute_async(plan, NULL), RS_OK);
  int done = 0;
  cr_assert_eq(rs_plan_test(plan, &done), RS_OK);
  cr_assert_eq(rs_plan_wait(plan), RS_OK);
  cr_assert_eq(rs_layout_allgather(src), RS_ERR_UNSUPPORTED); /* in process */
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);

  cr_assert_eq(pthread_sigmask(SIG_BLOCK, NULL, &now), 0);
  cr_assert(sigismember(&now, SIGUSR1), "the caller's own block was undone");
  cr_assert(!sigismember(&now, SIGPIPE), "SIGPIPE left blocked");
}
