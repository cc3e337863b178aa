/* SPDX-License-Identifier: Apache-2.0 */
/* The executor's path for queued transports (a GPU transport whose work is
 * ordered on device queues), on CPU: a stand-in transport that forwards to
 * the in-process one and declares queues, beside a host engine that claims
 * device memory and whose queue reports "still running" for a while. So
 * CI checks what the NCCL transport relies on without a GPU: the whole
 * execution enqueued by rs_plan_execute_async, each rank's copies on its
 * own queue, the caller's queue joined at both ends, rs_plan_test /
 * rs_plan_wait waiting for the queue, timeouts and aborts while the queue
 * runs, the memory kind and the settings a queued transport refuses. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/context.h"
#include "copy/engine.h"
#include "th_harness.h"
#include "transport/transport.h"

#define USER_QUEUE ((void *)(uintptr_t)0x5eed)
#define LANE_QUEUE(r) ((void *)(uintptr_t)(0x1000 + (r)))

typedef struct queued {
  rsi_transport base;
  rsi_transport *inner; /* the in-process transport */
  rsi_engine engine;
  int begins, ends, abandons;
  void *joined_with;
  int64_t busy_left; /* queries still answered "running"; <0: forever */
  int64_t busy_each; /* set again at every end of an execution */
  int copies_on_wrong_queue, allocs_for_unknown_rank;
  bool stall; /* the engine never takes what was posted */
} queued;

static queued Q;

static rsi_transport *inner(rsi_transport *t) { return ((queued *)t)->inner; }

static rs_status q_send(rsi_transport *t, int g, int from, int to, uint64_t tag,
                        const void *d, size_t n, rsi_err *e) {
  return inner(t)->ops->send(inner(t), g, from, to, tag, d, n, e);
}
static rs_status q_recv(rsi_transport *t, int g, int to, int from, uint64_t tag,
                        void *b, size_t n, const void **v, rsi_err *e) {
  return inner(t)->ops->recv(inner(t), g, to, from, tag, b, n, v, e);
}
static rs_status q_test(rsi_transport *t, int me, int g, bool *done,
                        rsi_err *e) {
  if (Q.stall) {
    *done = false;
    return RS_OK;
  }
  return inner(t)->ops->test(inner(t), me, g, done, e);
}
static bool q_pending(rsi_transport *t, int me, int g, int *peer, bool *r,
                      size_t *n) {
  return inner(t)->ops->pending(inner(t), me, g, peer, r, n);
}
static void q_abandon(rsi_transport *t) {
  Q.abandons++;
  inner(t)->ops->abandon(inner(t));
}
static void q_destroy(rsi_transport *t) { inner(t)->ops->destroy(inner(t)); }
static void *q_queue_of(rsi_transport *t, int me) { return LANE_QUEUE(me); }
static rs_status q_join(rsi_transport *t, void *queue, bool end, rsi_err *e) {
  Q.joined_with = queue;
  if (end) {
    Q.ends++;
    Q.busy_left = Q.busy_each;
  } else {
    Q.begins++;
  }
  return RS_OK;
}

static const rsi_transport_ops queued_ops = {
    .name = "queued-test",
    .send = q_send,
    .recv = q_recv,
    .test = q_test,
    .pending = q_pending,
    .abandon = q_abandon,
    .destroy = q_destroy,
    .queue_of = q_queue_of,
    .join = q_join,
};

/* The engine: host copies at once, a queue that runs on for a while. */
static rs_status e_alloc(rsi_engine *e, int me, size_t n, void **out,
                         rsi_err *err) {
  if (me < 0 || me >= 4) Q.allocs_for_unknown_rank++;
  return rsi_host_engine()->ops->alloc(rsi_host_engine(), me, n, out, err);
}
static void e_release(rsi_engine *e, void *p) {
  rsi_host_engine()->ops->release(rsi_host_engine(), p);
}
static rs_status e_copy(rsi_engine *e, const rsi_copy *c, int64_t n,
                        void *queue, rsi_err *err) {
  uintptr_t q = (uintptr_t)queue;
  if (q < 0x1000 || q >= 0x1004) Q.copies_on_wrong_queue++;
  return rsi_host_engine()->ops->copy(rsi_host_engine(), c, n, NULL, err);
}
static rs_status e_query(rsi_engine *e, void *queue, bool *done,
                         rsi_err *err) {
  cr_assert_eq(queue, USER_QUEUE, "the executor waits on another queue");
  if (Q.busy_left < 0) {
    *done = false;
    return RS_OK;
  }
  *done = Q.busy_left == 0;
  if (Q.busy_left > 0) Q.busy_left--;
  return RS_OK;
}
static void e_destroy(rsi_engine *e) {}

static const rsi_engine_ops queued_engine_ops = {
    .name = "queued-test",
    .memory = RSI_MEMORY_CUDA,
    .alloc = e_alloc,
    .release = e_release,
    .copy = e_copy,
    .query = e_query,
    .destroy = e_destroy,
};

/* A plan of several rounds on 4 ranks of a context whose transport is
 * queued, bound as device memory (host memory in truth). */
static void ready(rh *h, const char *where, int64_t busy) {
  memset(&Q, 0, sizeof Q);
  Q.busy_each = busy;
  rh_init(h, 4, where);
  Q.inner = h->ctx->transport;
  Q.base = (rsi_transport){.ops = &queued_ops, .engine = &Q.engine};
  Q.engine.ops = &queued_engine_ops;
  h->ctx->transport = &Q.base;
  h->ctx->engine = &Q.engine;
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_STAGING_BYTES, 64 << 10),
               RS_OK);
  rh_tensor_add(h, "w", RS_DTYPE_F32, 2, I64(512, 512));
  rh_dtensor(h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(1), 0, 0);
  rh_plan(h);
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < h->world; r++)
      for (int b = 0; b < RH_MAX_BUF; b++) {
        if (h->need[s][r][b] < 0) continue;
        h->size[s][r][b] = (size_t)h->need[s][r][b];
        h->buf[s][r][b] = malloc(h->size[s][r][b]);
        cr_assert_not_null(h->buf[s][r][b]);
      }
  rh_fill_sources(h);
  rh_poison_destinations(h);
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < h->world; r++)
      for (int b = 0; b < RH_MAX_BUF; b++)
        if (h->buf[s][r][b])
          cr_assert_eq(rs_plan_bind_memory(h->plan, (rs_side)s, r, b,
                                           h->buf[s][r][b], h->size[s][r][b],
                                           RS_MEMORY_CUDA, 0),
                       RS_OK, "%s", rs_context_last_error(h->ctx));
}

Test(queued, execute_async_enqueues_everything_on_the_lanes) {
  rh h;
  ready(&h, "enqueues_everything", 3);
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  /* Everything was handed to the queues before the call returned. */
  rh_check_destinations(&h);
  cr_assert_eq(Q.begins, 1);
  cr_assert_eq(Q.ends, 1);
  cr_assert_eq(Q.joined_with, USER_QUEUE);
  cr_assert_eq(Q.copies_on_wrong_queue, 0, "copies went to the caller's "
               "queue instead of the rank's lane");
  cr_assert_eq(Q.allocs_for_unknown_rank, 0);
  /* Done only once the queue got there. */
  int done = 1, looks = 0;
  for (; looks < 100; looks++) {
    cr_assert_eq(rs_plan_test(h.plan, &done), RS_OK);
    if (done) break;
  }
  cr_assert(done);
  cr_assert_eq(looks, 3, "done after %d looks, the queue ran for 3", looks);
  rh_fini(&h);
}

Test(queued, executions_follow_each_other_without_waiting) {
  rh h;
  ready(&h, "back_to_back", 5);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_OK, "%d: %s",
                 i, rs_context_last_error(h.ctx));
  cr_assert_eq(Q.begins, 3);
  cr_assert_eq(Q.ends, 3);
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  cr_assert_eq(Q.busy_left, 0, "wait returned before the queue got there");
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(queued, a_queue_that_never_gets_there_times_out) {
  rh h;
  ready(&h, "never_gets_there", -1);
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_TIMEOUT_MS, 50), RS_OK);
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_OK);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  rs_status st = rs_plan_wait(h.plan);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
  cr_assert_eq(st, RS_ERR_TIMEOUT, "%s", rs_status_name(st));
  cr_assert(strstr(rs_context_last_error(h.ctx), "50 ms"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_geq(ms, 45.0);
  cr_assert_lt(ms, 2000.0);
  cr_assert_eq(Q.abandons, 1, "the transport was not told to stop");
  /* fail-stop: the context is done */
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_ERR_TRANSPORT);
  rh_fini(&h);
}

static void *abort_soon(void *ctx) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  rs_context_abort(ctx);
  return NULL;
}

Test(queued, abort_while_the_queue_runs) {
  rh h;
  ready(&h, "abort_while_running", -1);
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_OK);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, abort_soon, h.ctx), 0);
  rs_status st = rs_plan_wait(h.plan);
  pthread_join(th, NULL);
  cr_assert_eq(st, RS_ERR_TRANSPORT, "%s", rs_status_name(st));
  cr_assert(strstr(rs_context_last_error(h.ctx), "rs_context_abort"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(Q.abandons, 1);
  rh_fini(&h);
}

Test(queued, host_memory_and_checksums_are_refused) {
  rh h;
  ready(&h, "refusals", 0);
  char byte;
  cr_assert_eq(rs_plan_bind_memory(h.plan, RS_SIDE_SRC, 0, 0, &byte, 1 << 20,
                                   RS_MEMORY_HOST, -1),
               RS_ERR_WRONG_MEMORY);
  cr_assert(strstr(rs_context_last_error(h.ctx), "queued-test"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_INTEGRITY, 1),
               RS_ERR_UNSUPPORTED);
  int64_t v = -1;
  cr_assert_eq(rs_context_get_param(h.ctx, RS_PARAM_INTEGRITY, &v), RS_OK);
  cr_assert_eq(v, 0, "the refused setting was kept");
  /* its work is asynchronous on the queue already: no progress thread */
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_PROGRESS_THREAD, 1),
               RS_ERR_UNSUPPORTED);
  cr_assert(strstr(rs_context_last_error(h.ctx), "asynchronous"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(rs_context_get_param(h.ctx, RS_PARAM_PROGRESS_THREAD, &v),
               RS_OK);
  cr_assert_eq(v, 0, "the refused setting was kept");
  /* the plan still runs (the refused bind left the old binding) */
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  cr_assert_eq(rs_plan_wait(h.plan), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  rh_fini(&h);
}

Test(queued, transfers_never_taken_time_out_in_the_call) {
  rh h;
  ready(&h, "never_taken", 0);
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_TIMEOUT_MS, 40), RS_OK);
  Q.stall = true;
  rs_status st = rs_plan_execute_async(h.plan, USER_QUEUE);
  cr_assert_eq(st, RS_ERR_TIMEOUT, "%s", rs_status_name(st));
  cr_assert(strstr(rs_context_last_error(h.ctx), "did not take"), "%s",
            rs_context_last_error(h.ctx));
  cr_assert_eq(Q.abandons, 1, "the transport was not told to stop");
  cr_assert_eq(Q.ends, 0, "the caller's queue was joined to work never "
               "enqueued");
  Q.stall = false;
  cr_assert_eq(rs_plan_execute_async(h.plan, USER_QUEUE), RS_ERR_TRANSPORT);
  rh_fini(&h);
}
