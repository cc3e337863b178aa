/* SPDX-License-Identifier: Apache-2.0 */
/* Asynchronous execution, memory kinds and abort, in process:
 * rs_plan_execute_async / rs_plan_test / rs_plan_wait, rs_plan_bind_memory,
 * rs_context_abort. (Between processes: tests/mpi/mpi_cases.c.) */
#include <criterion/criterion.h>

#include <reshard/reshard.h>
#include <string.h>

#include "th_harness.h"

/* A small plan with several rounds (64 KiB of staging, 1 MiB moved) and a
 * fused destination, bound and ready. */
static void ready(rh *h, const char *where) {
  rh_init(h, 4, where);
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_STAGING_BYTES, 64 << 10),
               RS_OK);
  rh_tensor_add(h, "w", RS_DTYPE_F32, 2, I64(512, 512));
  rh_dtensor(h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(1), 0, 0);
  rh_plan(h);
  rh_alloc_bind(h, 0);
}

Test(async, test_until_done_delivers) {
  rh h;
  ready(&h, "test_until_done_delivers");
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  int done = 0, calls = 0;
  while (!done) {
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    calls++;
    cr_assert_lt(calls, 100000, "never done");
  }
  cr_assert_gt(calls, 1, "several rounds finished in one test: the test "
               "does not advance step by step");
  rh_check_destinations(&h);
  /* nothing in flight: done at once, with the last status */
  cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK);
  cr_assert_eq(done, 1);
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK);
  rh_fini(&h);
}

Test(async, wait_after_start_and_again) {
  rh h;
  ready(&h, "wait_after_start_and_again");
  for (int gen = 1; gen <= 3; gen++) {
    h.gen = gen;
    rh_fill_sources(&h);
    rh_poison_destinations(&h);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
    cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s",
                 rs_context_last_error(h.ctx));
    rh_check_destinations(&h);
  }
  rh_fini(&h);
}

/* With the progress thread too (RS_PARAM_PROGRESS_THREAD, test_progress.c),
 * where the thread runs the execution meanwhile. */
Test(async, one_execution_in_flight_per_context) {
  for (int thread = 0; thread <= 1; thread++) {
    rh h;
    ready(&h, "one_execution_in_flight_per_context");
    cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_PROGRESS_THREAD, thread),
                 RS_OK);
    rs_plan *other = NULL;
    cr_assert_eq(rs_plan_create(h.lay[0], h.lay[1], &other), RS_OK);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
    cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(rs_context_last_error(h.ctx), "this plan"), "%s",
              rs_context_last_error(h.ctx));
    cr_assert_eq(rs_plan_execute(other), RS_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(rs_context_last_error(h.ctx), "another plan"), "%s",
              rs_context_last_error(h.ctx));
    cr_assert_eq(rs_plan_wait(h.plan), RS_OK);
    rh_check_destinations(&h);
    rs_plan_destroy(other);
    rh_fini(&h);
  }
}

/* Rebinding a buffer of a plan whose execution is in flight is refused and
 * changes nothing: the bytes land in the buffer bound when it started. */
Test(async, rebind_in_flight_is_refused) {
  rh h;
  ready(&h, "rebind_in_flight_is_refused");
  size_t n = h.size[1][1][0];
  unsigned char *other = malloc(n);
  memset(other, 0x5A, n);
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_DST, 1, 0, other, n),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(rs_context_last_error(h.ctx), "in flight"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_SRC, 0, 0, other, 1),
               RS_ERR_INVALID_ARGUMENT, "a too-small rebind unbinds nothing");
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s", rs_context_last_error(h.ctx));
  rh_check_destinations(&h);
  for (size_t i = 0; i < n; i++) cr_assert_eq(other[i], 0x5A);
  /* once it ended, rebinding works again */
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_DST, 1, 0, other, n), RS_OK);
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_DST, 1, 0, h.buf[1][1][0], n),
               RS_OK);
  free(other);
  rh_fini(&h);
}

/* A plan destroyed while its execution is in flight: the execution ends
 * first, and the context takes the next execution of another plan. */
Test(async, destroy_in_flight_waits_for_the_execution) {
  rh h;
  ready(&h, "destroy_in_flight_waits_for_the_execution");
  rs_plan *other = NULL;
  cr_assert_eq(rs_plan_create(h.lay[0], h.lay[1], &other), RS_OK);
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  rs_plan_destroy(h.plan);
  h.plan = other;
  rh_check_destinations(&h); /* the first execution delivered */
  rh_alloc_bind(&h, 0);
  cr_assert_eq(rs_plan_execute(other), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(async, host_context_takes_no_queue) {
  rh h;
  ready(&h, "host_context_takes_no_queue");
  int fake_stream;
  cr_assert_eq(rs_plan_execute_async(h.plan, &fake_stream),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(rs_context_last_error(h.ctx), "no queue"), "%s",
            rs_context_last_error(h.ctx));
  for (int r = 0; r < 4; r++) /* nothing written */
    for (size_t i = 0; i < h.size[1][r][0]; i++)
      cr_assert_eq(((unsigned char *)h.buf[1][r][0])[i], TH_POISON);
  cr_assert_eq(rs_plan_execute(h.plan), RS_OK); /* and nothing in flight */
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(memory, device_memory_refused_by_a_host_context) {
  rh h;
  ready(&h, "device_memory_refused_by_a_host_context");
  char other[1 << 20];
  cr_assert_eq(rs_plan_bind_memory(h.plan, RS_SIDE_DST, 1, 0, other,
                                   sizeof other, RS_MEMORY_CUDA, 0),
               RS_ERR_WRONG_MEMORY);
  const char *msg = rs_context_last_error(h.ctx);
  cr_assert(strstr(msg, "CUDA device memory") && strstr(msg, "host"), "%s",
            msg);
  /* refused before anything was recorded: the earlier binding stands */
  cr_assert_eq(rs_plan_execute(h.plan), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(memory, host_memory_by_kind_and_bad_kinds) {
  rh h;
  ready(&h, "host_memory_by_kind_and_bad_kinds");
  void *p = h.buf[1][2][0];
  size_t n = h.size[1][2][0];
  cr_assert_eq(rs_plan_bind_memory(h.plan, RS_SIDE_DST, 2, 0, p, n,
                                   RS_MEMORY_HOST, -1),
               RS_OK);
  cr_assert_eq(rs_plan_bind_memory(h.plan, RS_SIDE_DST, 2, 0, p, n,
                                   (rs_memory)7, 0),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_plan_bind_memory(h.plan, RS_SIDE_DST, 2, 0, p, n,
                                   RS_MEMORY_CUDA, -1),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_plan_bind_memory(NULL, RS_SIDE_DST, 2, 0, p, n,
                                   RS_MEMORY_HOST, -1),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_plan_execute(h.plan), RS_OK);
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(abort, before_an_execution_fails_it_and_ends_the_context) {
  rh h;
  ready(&h, "abort_before");
  cr_assert_eq(rs_context_abort(h.ctx), RS_OK);
  cr_assert_eq(rs_plan_execute(h.plan), RS_ERR_TRANSPORT);
  cr_assert(strstr(rs_context_last_error(h.ctx), "rs_context_abort"), "%s",
            rs_context_last_error(h.ctx));
  for (int r = 0; r < 4; r++)
    for (size_t i = 0; i < h.size[1][r][0]; i++)
      cr_assert_eq(((unsigned char *)h.buf[1][r][0])[i], TH_POISON);
  cr_assert_eq(rs_plan_execute(h.plan), RS_ERR_TRANSPORT); /* for good */
  cr_assert_eq(rs_context_abort(NULL), RS_OK);
  rh_fini(&h);
}

Test(abort, during_an_execution) {
  rh h;
  ready(&h, "abort_during");
  cr_assert_eq(rs_plan_execute_async(h.plan, NULL), RS_OK);
  int done = 0;
  cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK);
  cr_assert_eq(done, 0);
  cr_assert_eq(rs_context_abort(h.ctx), RS_OK);
  rs_status st = rs_plan_wait(h.plan);
  cr_assert_eq(st, RS_ERR_TRANSPORT, "%s", rs_status_name(st));
  cr_assert_eq(rs_plan_test(h.plan, &done), RS_ERR_TRANSPORT);
  cr_assert_eq(done, 1);
  cr_assert_eq(rs_plan_execute(h.plan), RS_ERR_TRANSPORT);
  rh_fini(&h);
}

Test(async, null_arguments) {
  int done = 7;
  cr_assert_eq(rs_plan_test(NULL, &done), RS_ERR_NULL_POINTER);
  cr_assert_eq(done, 0);
  cr_assert_eq(rs_plan_wait(NULL), RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_plan_execute_async(NULL, NULL), RS_ERR_NULL_POINTER);
  rh h;
  ready(&h, "null_arguments");
  cr_assert_eq(rs_plan_test(h.plan, NULL), RS_ERR_NULL_POINTER);
  rh_fini(&h);
}
