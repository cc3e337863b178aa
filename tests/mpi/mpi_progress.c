/* SPDX-License-Identifier: Apache-2.0 */
/* The progress thread between processes (RS_PARAM_PROGRESS_THREAD on an
 * MPI context, issue 45 item 5). Two modes, each its own ctest entry:
 *
 *   multiple  MPI_Init_thread(MPI_THREAD_MULTIPLE): the setting is taken;
 *             an execution started by rs_plan_execute_async ends on every
 *             rank while the callers sleep (the first rs_plan_test after
 *             the sleep says done), with every element right; the end to
 *             end transfer of the harness (polled, reused) on a context
 *             with the thread; a rank that never executes: the waiting
 *             rank's thread times out, and the status and message naming
 *             the silent rank reach the caller (a later execution: the
             first one's agreement runs inside rs_plan_execute_async).
 *   funneled  MPI_Init_thread(MPI_THREAD_FUNNELED): the setting is refused
 *             (RS_ERR_UNSUPPORTED) with a message naming the level. */
#include "mpi_harness.h"

#include <stdio.h>
#include <string.h>

static rs_context *context_with_thread(hcase *c, int64_t timeout_ms) {
  rs_context *ctx = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, timeout_ms, &ctx), NULL,
            "rs_context_create_mpi"))
    return NULL;
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, 1), ctx,
       "RS_PARAM_PROGRESS_THREAD = 1");
  return ctx;
}

/* Layouts (own shards, allgathered), the plan, bound buffers. */
typedef struct setup {
  rs_layout *src, *dst;
  rs_plan *plan;
  hbufs sb, db;
} setup;

static bool make(hcase *c, rs_context *ctx, const hmodel *m, setup *s) {
  memset(s, 0, sizeof *s);
  if (!h_ok(c, h_layout(ctx, m, RS_SIDE_SRC, H_OWN, &s->src), ctx, "src") ||
      !h_ok(c, h_layout(ctx, m, RS_SIDE_DST, H_OWN, &s->dst), ctx, "dst") ||
      !h_ok(c, rs_layout_allgather(s->src), ctx, "allgather src") ||
      !h_ok(c, rs_layout_allgather(s->dst), ctx, "allgather dst") ||
      !h_ok(c, rs_plan_create(s->src, s->dst, &s->plan), ctx, "plan"))
    return false;
  h_bufs_alloc(m, RS_SIDE_SRC, &s->sb);
  h_bufs_alloc(m, RS_SIDE_DST, &s->db);
  return h_ok(c, h_bind(s->plan, m, RS_SIDE_SRC, &s->sb), ctx, "bind src") &&
         h_ok(c, h_bind(s->plan, m, RS_SIDE_DST, &s->db), ctx, "bind dst");
}

static void unmake(setup *s) {
  rs_plan_destroy(s->plan);
  rs_layout_destroy(s->src);
  rs_layout_destroy(s->dst);
  h_bufs_free(&s->sb);
  h_bufs_free(&s->db);
}

static void case_ends_while_callers_sleep(hcase *c) {
  rs_context *ctx = context_with_thread(c, 20000);
  hmodel m;
  h_model_init(&m);
  h_a2a(&m, "w", RS_DTYPE_F32, 512, 0); /* 1 MiB a rank, to every rank */
  setup s;
  if (ctx && make(c, ctx, &m, &s) && h_all_ok(c)) {
    for (uint64_t gen = 1; gen <= 3; gen++) {
      h_fill(&m, &s.sb, gen);
      h_poison(&s.db);
      h_ok(c, rs_plan_execute_async(s.plan, NULL), ctx, "execute_async");
      h_sleep_ms(2000); /* milliseconds of work: over by now */
      int done = -1;
      h_ok(c, rs_plan_test(s.plan, &done), ctx, "first rs_plan_test");
      EXPECT(c, done == 1,
             "generation %llu: the first rs_plan_test after 2 s says %d: "
             "the execution did not go on without the caller",
             (unsigned long long)gen, done);
      h_ok(c, rs_plan_wait(s.plan), ctx, "rs_plan_wait");
      h_check(c, &m, &s.db, gen);
      if (!h_all_ok(c)) break;
    }
  }
  if (ctx) unmake(&s);
  h_model_free(&m);
  rs_context_destroy(ctx);
}

static void case_transfer_with_thread(hcase *c) {
  rs_context *ctx = context_with_thread(c, 20000);
  hmodel m;
  h_model_init(&m);
  h_a2a(&m, "w", RS_DTYPE_BF16, 96, 5);
  if (h_all_ok(c))
    h_transfer(c, &m,
               &(hrun){.ctx = ctx, .polled = true, .reuse = true, .gen = 3});
  h_model_free(&m);
  rs_context_destroy(ctx);
}

/* After a first execution on both ranks, rank 1 skips the second: rank
 * 0's thread gives up after the timeout, and rank 0's rs_plan_wait
 * returns RS_ERR_TIMEOUT naming rank 1. */
static void case_failure_reaches_the_caller(hcase *c) {
  rs_context *ctx = context_with_thread(c, 1500);
  hmodel m;
  h_model_init(&m);
  h_a2a(&m, "w", RS_DTYPE_F32, 64, 0);
  setup s;
  if (ctx && make(c, ctx, &m, &s) && h_all_ok(c)) {
    /* once on both, so that the plan is agreed on (the agreement of a
     * first execution is made inside rs_plan_execute_async) */
    h_ok(c, rs_plan_execute(s.plan), ctx, "first execution");
    if (h_all_ok(c) && h_rank == 0) {
      h_ok(c, rs_plan_execute_async(s.plan, NULL), ctx, "execute_async");
      rs_status st = rs_plan_wait(s.plan);
      h_status(c, st, RS_ERR_TIMEOUT, ctx, "rank 0's wait");
      EXPECT(c, h_mentions_rank(rs_context_last_error(ctx), 1),
             "the message does not name rank 1: %s",
             rs_context_last_error(ctx));
      int done = 0;
      h_status(c, rs_plan_test(s.plan, &done), RS_ERR_TIMEOUT, ctx,
               "test after the end");
      EXPECT(c, done == 1, "test after the end says %d", done);
    }
  }
  h_all_ok(c); /* rank 1 waits here while rank 0 times out */
  if (ctx) unmake(&s);
  h_model_free(&m);
  rs_context_destroy(ctx);
}

static void case_refused_below_multiple(hcase *c) {
  rs_context *ctx = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context")) return;
  h_status(c, rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, 1),
           RS_ERR_UNSUPPORTED, ctx, "RS_PARAM_PROGRESS_THREAD = 1");
  const char *msg = rs_context_last_error(ctx);
  EXPECT(
      c,
      strstr(msg, "MPI_THREAD_FUNNELED") && strstr(msg, "MPI_THREAD_MULTIPLE"),
      "the message names neither level: %s", msg);
  int64_t v = -1;
  h_ok(c, rs_context_get_param(ctx, RS_PARAM_PROGRESS_THREAD, &v), ctx, "get");
  EXPECT(c, v == 0, "the refused setting was kept: %lld", (long long)v);
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, 0), ctx,
       "0 is always taken");
  rs_context_destroy(ctx);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  bool multiple = !strcmp(mode, "multiple");
  if (!multiple && strcmp(mode, "funneled")) {
    fprintf(stderr, "usage: mpi_progress multiple|funneled\n");
    return 2;
  }
  int provided = h_init_thread(
      &argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED);
  if (multiple && provided < MPI_THREAD_MULTIPLE) {
    if (h_rank == 0)
      printf(
          "SKIP: this MPI provides thread level %d, not "
          "MPI_THREAD_MULTIPLE\n",
          provided);
    MPI_Finalize();
    return 0;
  }
  if (multiple) {
    h_run_case(&(hcase_def){"ends_while_callers_sleep",
                            case_ends_while_callers_sleep});
    h_run_case(&(hcase_def){"transfer_with_thread", case_transfer_with_thread});
    h_run_case(&(hcase_def){"failure_reaches_the_caller",
                            case_failure_reaches_the_caller});
  } else if (provided == MPI_THREAD_FUNNELED) {
    h_run_case(
        &(hcase_def){"refused_below_multiple", case_refused_below_multiple});
  } else if (h_rank == 0) {
    printf("SKIP: asked for MPI_THREAD_FUNNELED, got level %d\n", provided);
  }
  return h_finish();
}
