/* SPDX-License-Identifier: Apache-2.0 */
/* The progress thread of a host context (RS_PARAM_PROGRESS_THREAD), in
 * process: rs_plan_execute_async hands the execution over and returns,
 * the execution ends without the caller's help, rs_plan_test only looks
 * and rs_plan_wait blocks; failures reach the caller as without the
 * thread; what the caller may not do meanwhile is refused; a plan or a
 * context destroyed in flight. (Between processes: tests/mpi/
 * mpi_progress.c; refused on queued transports: test_queued.c.) */
#include <criterion/criterion.h>

#include <reshard/reshard.h>
#include <string.h>
#include <time.h>

#include "th_harness.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* n x n f32 from 2 source ranks (rows) to 4 destination ranks (columns),
 * with 64 KiB of staging (many rounds), bound and ready; the progress
 * thread on when `thread`. */
static void ready(rh *h, int64_t n, bool thread, const char *where) {
  rh_init(h, 4, where);
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_STAGING_BYTES, 64 << 10),
               RS_OK);
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PROGRESS_THREAD, thread),
               RS_OK, "%s", rs_context_last_error(h->ctx));
  rh_tensor_add(h, "w", RS_DTYPE_F32, 2, I64(n, n));
  rh_dtensor(h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(1), 0, 0);
  rh_plan(h);
  rh_alloc_bind(h, 0);
}

Test(progress, setting_bounds_default_and_bad_values) {
  int64_t lo = -1, hi = -1;
  cr_assert_eq(rs_param_bounds(RS_PARAM_PROGRESS_THREAD, &lo, &hi), RS_OK);
  cr_assert_eq(lo, 0);
  cr_assert_eq(hi, 1);
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  int64_t v = -1;
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_PROGRESS_THREAD, &v), RS_OK);
  cr_assert_eq(v, 0, "off by default");
  int64_t bad[] = {2, -1, INT64_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cr_assert_eq(rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, bad[i]),
                 RS_ERR_BAD_PARAM);
    char value[32];
    snprintf(value, sizeof value, "value %lld", (long long)bad[i]);
    cr_assert(strstr(rs_context_last_error(ctx), value), "%s",
              rs_context_last_error(ctx));
    cr_assert(strstr(rs_context_last_error(ctx), "[0, 1]"), "%s",
              rs_context_last_error(ctx));
  }
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_PROGRESS_THREAD, &v), RS_OK);
  cr_assert_eq(v, 0, "a refused value was kept");
  cr_assert_eq(rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, 1), RS_OK);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_PROGRESS_THREAD, &v), RS_OK);
  cr_assert_eq(v, 1);
  rs_context_destroy(ctx); /* set, never started: nothing to join */
}

/* The execution ends while the caller sleeps: the first rs_plan_test
 * after the sleep finds it done. Without the thread the same first test
 * finds it not done (it advances one step per call). */
Test(progress, ends_without_the_callers_help) {
  for (int thread = 0; thread <= 1; thread++) {
    rh h;
    ready(&h, 512, thread, thread ? "with thread" : "without");
    rh_poison_destinations(&h);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    sleep_ms(1500); /* 1 MiB in 16 rounds: milliseconds of work */
    int done = -1;
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    cr_assert_eq(done, thread, "%s: first test after the sleep says %d",
                 h.where, done);
    cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    rh_check_destinations(&h);
    /* nothing in flight any more: done at once, with the last status */
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK);
    cr_assert_eq(done, 1);
    rh_fini(&h);
  }
}

/* 64 MiB: execute_async returns, the caller works, wait sees every
 * byte; three times on one plan, with new values each time. */
Test(progress, large_plan_exact_after_wait, .timeout = 120) {
  rh h;
  ready(&h, 4096, true, "large");
  for (int gen = 1; gen <= 3; gen++) {
    h.gen = gen;
    rh_fill_sources(&h);
    rh_poison_destinations(&h);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    volatile uint64_t work = 0; /* the caller's own work meanwhile */
    for (uint64_t i = 0; i < 20000000; i++) work += i ^ (work >> 3);
    cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    rh_check_destinations(&h);
    rh_check_sources_intact(&h);
  }
  rh_fini(&h);
}

Test(progress, test_polls_until_done) {
  rh h;
  ready(&h, 1024, true, "polls");
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  int done = 0;
  for (int i = 0; !done; i++) {
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    cr_assert_lt(i, 200000, "never done");
    if (!done) sleep_ms(1);
  }
  rh_check_destinations(&h);
  rh_fini(&h);
}

/* While the thread runs the execution (or until the caller saw it end),
 * the calls that would race with it are refused, with a message in the
 * context's record that the thread does not touch (a second execution:
 * test_async.c's one_execution_in_flight_per_context); another plan of
 * the context destroyed meanwhile (a garbage collector may do it) waits
 * for the thread first. */
Test(progress, calls_in_flight_are_refused) {
  rh h;
  ready(&h, 2048, true, "refused");
  rs_plan *other = NULL;
  cr_assert_eq(rs_plan_create(h.lay[0], h.lay[1], &other), RS_OK);
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  cr_assert_eq(
      rs_plan_bind(h.plan, RS_SIDE_DST, 0, 0, h.buf[1][0][0], h.size[1][0][0]),
      RS_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(rs_context_last_error(h.ctx), "in flight"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_COPY_THREADS, 2),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(rs_context_last_error(h.ctx), "progress thread"), "%s",
            rs_context_last_error(h.ctx));
  rs_plan_destroy(other);
  /* a succeeding execution leaves the caller's last message alone */
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK);
  cr_assert(strstr(rs_context_last_error(h.ctx), "progress thread"), "%s",
            rs_context_last_error(h.ctx));
  rh_check_destinations(&h);
  /* ended: the same calls go through again */
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_COPY_THREADS, 2), RS_OK);
  cr_assert_eq(rs_plan_execute(h.plan), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  rh_fini(&h);
}

/* A failure on the thread (an abort: 64 MiB in 32 KiB rounds cannot be
 * over before the abort a few instructions later) reaches the caller
 * with its status and message, as without the thread, whether seen by
 * rs_plan_wait or by polling rs_plan_test; the context is done. */
Test(progress, failure_reaches_the_caller, .timeout = 120) {
  for (int polled = 0; polled <= 1; polled++) {
    rh h;
    ready(&h, 4096, true, polled ? "failure, polled" : "failure, waited");
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
    cr_assert_eq(rs_context_abort(h.ctx), RS_OK);
    int done = 0;
    rs_status st = RS_OK;
    for (int i = 0; polled && !done; i++) {
      st = rs_plan_test(h.plan, &done);
      cr_assert_lt(i, 100000, "never done");
      if (!done) sleep_ms(1);
    }
    if (!polled) st = rs_plan_wait(h.plan);
    cr_assert_eq(st, RS_ERR_TRANSPORT, "%s", rs_status_name(st));
    cr_assert(strstr(rs_context_last_error(h.ctx), "rs_context_abort"), "%s",
              rs_context_last_error(h.ctx));
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_ERR_TRANSPORT);
    cr_assert_eq(done, 1);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_ERR_TRANSPORT);
    cr_assert(strstr(rs_context_last_error(h.ctx), "rs_context_abort"), "%s",
              rs_context_last_error(h.ctx));
    rh_fini(&h);
  }
}

/* Destroyed in flight: the plan waits for its execution (every byte
 * lands), then the context joins its thread. */
Test(progress, destroy_plan_in_flight_waits) {
  rh h;
  ready(&h, 2048, true, "destroy plan");
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  rs_plan_destroy(h.plan);
  h.plan = NULL;
  rh_check_destinations(&h);
  rh_fini(&h);
}

/* The context's last reference goes with the plan destroyed in flight. */
Test(progress, destroy_context_first_then_plan_in_flight) {
  rh h;
  ready(&h, 2048, true, "destroy context");
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  rs_context_destroy(h.ctx);
  rs_layout_destroy(h.lay[0]);
  rs_layout_destroy(h.lay[1]);
  h.ctx = NULL;
  h.lay[0] = h.lay[1] = NULL;
  rs_plan_destroy(h.plan); /* waits, then the last unref joins the thread */
  h.plan = NULL;
  rh_check_destinations(&h);
  rh_fini(&h);
}

/* Turned off again: the thread stays idle, and executions advance inside
 * test and wait as before. */
Test(progress, off_again_is_todays_behaviour) {
  rh h;
  ready(&h, 512, true, "off again");
  cr_assert_eq(rs_plan_execute(h.plan), RS_OK); /* on the caller's thread */
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK);
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_PROGRESS_THREAD, 0), RS_OK);
  rh_poison_destinations(&h);
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  int done = -1;
  cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK);
  cr_assert_eq(done, 0, "one test ended 16 rounds: the thread ran it");
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK);
  rh_check_destinations(&h);
  rh_fini(&h);
}
