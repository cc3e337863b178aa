/* SPDX-License-Identifier: Apache-2.0 */
/* libreshard over MPI: what happens when ranks do not play along.
 *
 *   mpirun -np N mpi_fault mismatch        ranks build different layouts
 *   mpirun -np N mpi_fault timeout         one rank never executes
 *   mpirun -np N mpi_fault timeout_agreed  one rank skips a second execute
 *   mpirun -np N mpi_fault execute_late    one rank executes late, with
 *                                          messages large enough to go by
 *                                          rendezvous
 *   mpirun -np N mpi_fault allgather_late  one rank calls allgather late
 *   mpirun -np N mpi_fault allgather_aborted  rank 0 aborts its context
 *                                          while its allgather waits
 *
 * Each mode is its own ctest entry, so that a hang or a crash in one does
 * not take the others with it. Every rank must get a clear error in
 * bounded time, nothing may hang, and every rank must then destroy its
 * handles and reach MPI_Finalize. */
#include "mpi_harness.h"

#include "th_value.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layouts of every mode: the all-to-all reshard (h_a2a) of an int32
 * tensor, every rank sending a b x b block to every other (b = 4: 64 bytes,
 * small enough to go eagerly; b = 256: 256 KiB, sent by rendezvous).
 * `shift` moves the destination split: rank 0 gets `shift` more columns,
 * rank 1 fewer. */
static int g_block = 4; /* rows and columns of the block two ranks swap */

static void build_model(hmodel *m, const char *name, int shift) {
  h_model_init(m);
  h_a2a(m, name, RS_DTYPE_I32, g_block, shift);
}

/* ---- mismatch ------------------------------------------------------------ */

static rs_context *g_ctx; /* shared by the mismatch cases */

/* Every rank builds the whole global layout itself (no allgather), plans,
 * binds and executes: every rank must get RS_ERR_MISMATCH with a message
 * that says "disagree", names `rank` and contains `what`; no destination
 * byte may change. */
static void expect_mismatch(hcase *c, const hmodel *m, int rank,
                            const char *what) {
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  hbufs sb = {0}, db = {0};
  if (!g_ctx) {
    EXPECT(c, false, "no context");
    return;
  }
  if (h_ok(c, h_layout(g_ctx, m, RS_SIDE_SRC, H_GLOBAL, &src), g_ctx,
           "source layout") &&
      h_ok(c, h_layout(g_ctx, m, RS_SIDE_DST, H_GLOBAL, &dst), g_ctx,
           "destination layout") &&
      h_ok(c, rs_plan_create(src, dst, &plan), g_ctx, "rs_plan_create")) {
    h_bufs_alloc(m, RS_SIDE_SRC, &sb);
    h_bufs_alloc(m, RS_SIDE_DST, &db);
    h_fill(m, &sb, 1);
    h_poison(&db);
    h_ok(c, h_bind(plan, m, RS_SIDE_SRC, &sb), g_ctx, "bind source");
    h_ok(c, h_bind(plan, m, RS_SIDE_DST, &db), g_ctx, "bind destination");
  }
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  rs_status st = rs_plan_execute(plan);
  double dt = h_now() - t0;
  if (h_status(c, st, RS_ERR_MISMATCH, g_ctx, "rs_plan_execute")) {
    const char *msg = rs_context_last_error(g_ctx);
    EXPECT(c, strstr(msg, "disagree") != NULL,
           "the message does not say 'disagree': %s", msg);
    EXPECT(c, h_mentions_rank(msg, rank), "the message does not name rank %d: %s",
           rank, msg);
    EXPECT(c, strstr(msg, what) != NULL, "the message does not say '%s': %s",
           what, msg);
  }
  EXPECT(c, dt < 10.0, "rs_plan_execute took %.1f s to report the mismatch",
         dt);
  for (int k = 0; k < H_MAXB; k++)
    for (size_t i = 0; db.p[k] && i < db.n[k]; i++)
      if (!EXPECT(c, db.p[k][i] == TH_POISON,
                  "destination buffer %d byte %zu was written (%#x) though "
                  "the ranks disagree",
                  k, i, db.p[k][i]))
        break;
  /* Failing again is as quick and as clear. */
  st = rs_plan_execute(plan);
  h_status(c, st, RS_ERR_MISMATCH, g_ctx, "rs_plan_execute, second time");
done:
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  h_bufs_free(&sb);
  h_bufs_free(&db);
}

static void case_mismatch_context(hcase *c) {
  h_ok(c, h_context(MPI_COMM_WORLD, 3000, &g_ctx), NULL,
       "rs_context_create_mpi");
}

static void case_mismatch_destination(hcase *c) {
  /* The last rank splits the destination differently; it still plans. */
  hmodel m;
  build_model(&m, "w", h_rank == h_np - 1 ? 1 : 0);
  expect_mismatch(c, &m, h_np - 1, "destination layout");
  h_model_free(&m);
}

static void case_mismatch_source(hcase *c) {
  /* Rank 1 believes rank 0 holds the whole source as well. */
  hmodel m;
  build_model(&m, "w", 0);
  if (h_rank == 1 % h_np)
    h_shard(&m, RS_SIDE_SRC, 0, 0, (int64_t[]){0, 0},
            (int64_t[]){4 * h_np, 4 * h_np}, 1, 0, 0, NULL);
  expect_mismatch(c, &m, 1 % h_np, "source layout");
  h_model_free(&m);
}

static void case_mismatch_tensor(hcase *c) {
  hmodel m;
  build_model(&m, h_rank == h_np - 1 ? "w_renamed" : "w", 0);
  expect_mismatch(c, &m, h_np - 1, "tensor declarations");
  h_model_free(&m);
}

static void case_mismatch_staging(hcase *c) {
  hmodel m;
  build_model(&m, "w", 0);
  int64_t old = 0;
  rs_context_get_param(g_ctx, RS_PARAM_STAGING_BYTES, &old);
  if (h_rank == 1 % h_np)
    rs_context_set_param(g_ctx, RS_PARAM_STAGING_BYTES, 1 << 20);
  expect_mismatch(c, &m, 1 % h_np, "staging");
  rs_context_set_param(g_ctx, RS_PARAM_STAGING_BYTES, old);
  h_model_free(&m);
}

static void case_mismatch_integrity(hcase *c) {
  hmodel m;
  build_model(&m, "w", 0);
  if (h_rank == h_np - 1) rs_context_set_param(g_ctx, RS_PARAM_INTEGRITY, 1);
  expect_mismatch(c, &m, h_np - 1, "integrity");
  rs_context_set_param(g_ctx, RS_PARAM_INTEGRITY, 0);
  h_model_free(&m);
}

static void case_mismatch_domains(hcase *c) {
  hmodel m;
  build_model(&m, "w", 0);
  int old = -1;
  rs_context_get_domain(g_ctx, 0, &old);
  if (h_rank == h_np - 1) rs_context_set_domain(g_ctx, 0, old + 7);
  expect_mismatch(c, &m, h_np - 1, "domains");
  rs_context_set_domain(g_ctx, 0, old);
  h_model_free(&m);
}

static void case_mismatch_then_agree(hcase *c) {
  /* A mismatch moved nothing: the same context, given agreeing layouts,
   * works. */
  hmodel m;
  build_model(&m, "w", 0);
  hrun o = {.ctx = g_ctx, .gen = 9, .reuse = true};
  if (EXPECT(c, g_ctx != NULL, "no context")) h_transfer(c, &m, &o);
  h_model_free(&m);
  rs_context_destroy(g_ctx);
  g_ctx = NULL;
}

/* ---- timeout ------------------------------------------------------------- */

enum { TIMEOUT_MS = 1500, SILENT_SLEEP_MS = 4000 };
static bool g_agree_first; /* timeout_agreed: a good execute comes first */
static bool g_late;        /* execute_late: the silent rank executes late */
static hbufs late_sb, late_db; /* kept until after MPI_Finalize */

static void case_timeout(hcase *c) {
  int silent = 1 % h_np;
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  hbufs sb = {0}, db = {0};
  hmodel m;
  build_model(&m, "w", 0);
  if (h_ok(c, h_context(MPI_COMM_WORLD, TIMEOUT_MS, &ctx), NULL,
           "rs_context_create_mpi") &&
      h_ok(c, h_layout(ctx, &m, RS_SIDE_SRC, H_OWN, &src), ctx, "source") &&
      h_ok(c, h_layout(ctx, &m, RS_SIDE_DST, H_OWN, &dst), ctx, "destination")) {
  }
  if (!h_all_ok(c)) goto done;
  h_ok(c, rs_layout_allgather(src), ctx, "allgather(source)");
  h_ok(c, rs_layout_allgather(dst), ctx, "allgather(destination)");
  if (h_ok(c, rs_plan_create(src, dst, &plan), ctx, "rs_plan_create")) {
    h_bufs_alloc(&m, RS_SIDE_SRC, &sb);
    h_bufs_alloc(&m, RS_SIDE_DST, &db);
    h_fill(&m, &sb, 1);
    h_poison(&db);
    h_ok(c, h_bind(plan, &m, RS_SIDE_SRC, &sb), ctx, "bind source");
    h_ok(c, h_bind(plan, &m, RS_SIDE_DST, &db), ctx, "bind destination");
  }
  if (!h_all_ok(c)) goto done;
  if (g_agree_first) {
    if (h_ok(c, rs_plan_execute(plan), ctx, "first rs_plan_execute"))
      h_check(c, &m, &db, 1);
    if (!h_all_ok(c)) goto done;
    h_fill(&m, &sb, 2);
  }

  if (h_rank == silent) {
    /* Never calls rs_plan_execute: just waits, then goes on. */
    h_sleep_ms(SILENT_SLEEP_MS);
    if (g_late) {
      /* ... or calls it long after the others gave up. It cannot finish;
       * if it says it did, the bytes must be right. */
      double t0 = h_now();
      rs_status st = rs_plan_execute(plan);
      double dt = h_now() - t0;
      if (st == RS_OK)
        h_check(c, &m, &db, 2);
      else
        EXPECT(c, st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT,
               "the late rs_plan_execute: %s, want RS_ERR_TIMEOUT or "
               "RS_ERR_TRANSPORT: %s",
               rs_status_name(st), rs_context_last_error(ctx));
      EXPECT(c, dt < 10.0, "the late rs_plan_execute took %.1f s", dt);
    }
  } else {
    double t0 = h_now();
    rs_status st = rs_plan_execute(plan);
    double dt = h_now() - t0;
    const char *msg = rs_context_last_error(ctx);
    EXPECT(c, st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT,
           "rs_plan_execute with rank %d silent: %s, want RS_ERR_TIMEOUT or "
           "RS_ERR_TRANSPORT: %s",
           silent, rs_status_name(st), msg);
    EXPECT(c, dt < 10.0, "rs_plan_execute took %.1f s to give up (timeout "
           "%d ms)", dt, TIMEOUT_MS);
    EXPECT(c, dt >= 0.5 * TIMEOUT_MS / 1000.0,
           "rs_plan_execute gave up after %.2f s, before the %d ms timeout",
           dt, TIMEOUT_MS);
    EXPECT(c, h_mentions_rank(msg, silent),
           "the message does not name the silent rank %d: %s", silent, msg);
    /* The context is spent: failing again is immediate. */
    t0 = h_now();
    rs_status again = rs_plan_execute(plan);
    dt = h_now() - t0;
    EXPECT(c, again != RS_OK, "rs_plan_execute on the failed context "
           "succeeded");
    EXPECT(c, dt < 1.0, "rs_plan_execute on the failed context took %.1f s",
           dt);
  }
done:
  /* Every rank lets go of everything before MPI_Finalize. */
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  h_model_free(&m);
  if (g_late) { /* let stray traffic land (or crash) before the verdict */
    /* Fail-stop (docs/RELIABILITY.md): after a failed execution MPI may
     * still read the source and write the destination buffers of the
     * abandoned transfers, so they stay allocated until MPI_Finalize. */
    late_sb = sb;
    late_db = db;
    MPI_Barrier(MPI_COMM_WORLD);
    h_sleep_ms(200);
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  h_bufs_free(&sb);
  h_bufs_free(&db);
}

/* ---- a rank late for rs_layout_allgather -------------------------------- */

/* A result of rs_layout_allgather that is acceptable when a rank came late:
 * the whole layout, or a timeout / transport error that left the layout as
 * it was. Returns whether it was acceptable. */
static bool acceptable_allgather(hcase *c, rs_status st, const rs_layout *l,
                                 const rs_context *ctx, double dt,
                                 const char *what) {
  int64_t ns = -1;
  rs_layout_num_shards(l, &ns);
  bool ok = EXPECT(c, dt < 10.0, "%s took %.1f s", what, dt);
  if (st == RS_OK)
    return EXPECT(c, ns == h_np, "%s: RS_OK with %lld shards, want %d", what,
                  (long long)ns, h_np) && ok;
  ok &= EXPECT(c, st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT,
               "%s: %s, want RS_OK, RS_ERR_TIMEOUT or RS_ERR_TRANSPORT: %s",
               what, rs_status_name(st), rs_context_last_error(ctx));
  ok &= EXPECT(c, ns == 1, "%s failed (%s) but the layout now holds %lld "
               "shards", what, rs_status_name(st), (long long)ns);
  return ok;
}

/* A context with timeout_ms and a layout of one f32 tensor [np, 4] where
 * each rank describes its own row only (to be allgathered). Whether every
 * rank got there. */
static bool own_row_layout(hcase *c, int timeout_ms, rs_context **ctx,
                           rs_layout **l) {
  int64_t shape[2] = {h_np, 4};
  if (h_ok(c, h_context(MPI_COMM_WORLD, timeout_ms, ctx), NULL,
           "rs_context_create_mpi") &&
      h_ok(c, rs_layout_create(*ctx, l), *ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(*l, "t", RS_DTYPE_F32, 2, shape), *ctx,
           "tensor") &&
      h_ok(c, rs_layout_add_shard(*l, "t", h_rank, (int64_t[]){h_rank, 0},
                                  (int64_t[]){1, 4}, 0, 0, NULL),
           *ctx, "shard")) {
  }
  return h_all_ok(c);
}

/* Rank 1 calls rs_layout_allgather 2.5 s late (timeout 1 s); the others
 * time out and try once more. Every call must end in bounded time with the
 * whole layout or a timeout/transport error, and every process must reach
 * MPI_Finalize alive (an abandoned exchange must not write into memory
 * that was freed, nor pair with a later one). */
static void case_allgather_late(hcase *c) {
  int late = 1 % h_np;
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  if (!own_row_layout(c, 1000, &ctx, &l)) goto done;
  if (h_rank == late) {
    h_sleep_ms(2500);
    double t0 = h_now();
    rs_status st = rs_layout_allgather(l);
    acceptable_allgather(c, st, l, ctx, h_now() - t0, "the late allgather");
  } else {
    double t0 = h_now();
    rs_status st = rs_layout_allgather(l);
    double dt = h_now() - t0;
    int64_t ns = -1;
    rs_layout_num_shards(l, &ns);
    EXPECT(c, st == RS_ERR_TIMEOUT,
           "allgather without rank %d: %s, want RS_ERR_TIMEOUT: %s", late,
           rs_status_name(st), rs_context_last_error(ctx));
    EXPECT(c, dt < 10.0 && dt >= 0.5, "allgather without rank %d gave up "
           "after %.2f s (timeout 1 s)", late, dt);
    EXPECT(c, ns == 1, "the failed allgather changed the layout (%lld shards)",
           (long long)ns);
    /* Try again: the late rank arrives while this call waits. */
    t0 = h_now();
    st = rs_layout_allgather(l);
    acceptable_allgather(c, st, l, ctx, h_now() - t0, "the second allgather");
  }
done:
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  /* Let any stray traffic land before the verdict. */
  MPI_Barrier(MPI_COMM_WORLD);
  h_sleep_ms(200);
  MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- an abort while rs_layout_allgather waits --------------------------- */

typedef struct abort_later {
  rs_context *ctx;
  int after_ms;
} abort_later;

static void *abort_after(void *arg) {
  const abort_later *a = arg;
  h_sleep_ms(a->after_ms);
  rs_context_abort(a->ctx);
  return NULL;
}

/* Rank 0 calls rs_layout_allgather while the others come 4 s late, and
 * aborts its context from another thread 0.3 s in (timeout 20 s). The
 * abort must end rank 0's wait at once (within 2 s: neither when the
 * others come nor at the timeout) with RS_ERR_TRANSPORT saying so; the
 * others, told by rank 0, must fail at once when they come; no layout may
 * change; rank 0's context is done. */
static void case_allgather_aborted(hcase *c) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  if (!own_row_layout(c, 20000, &ctx, &l)) goto done;
  rs_status st;
  double dt;
  if (h_rank == 0) {
    abort_later a = {ctx, 300};
    pthread_t th;
    bool started = pthread_create(&th, NULL, abort_after, &a) == 0;
    EXPECT(c, started, "pthread_create failed");
    double t0 = h_now();
    st = rs_layout_allgather(l);
    dt = h_now() - t0;
    if (started) pthread_join(th, NULL);
    const char *msg = rs_context_last_error(ctx);
    EXPECT(c, st == RS_ERR_TRANSPORT,
           "the aborted allgather: %s, want RS_ERR_TRANSPORT: %s",
           rs_status_name(st), msg);
    EXPECT(c, strstr(msg, "rs_context_abort") != NULL,
           "the aborted allgather's message does not say it was aborted: %s",
           msg);
    EXPECT(c, dt < 2.0,
           "the aborted allgather returned %.2f s after it began (abort at "
           "0.3 s, timeout 20 s)",
           dt);
    st = rs_layout_allgather(l);
    EXPECT(c, st == RS_ERR_TRANSPORT,
           "an allgather after the abort: %s, want RS_ERR_TRANSPORT",
           rs_status_name(st));
  } else {
    h_sleep_ms(4000);
    double t0 = h_now();
    st = rs_layout_allgather(l);
    dt = h_now() - t0;
    EXPECT(c, st == RS_ERR_TRANSPORT,
           "an allgather with rank 0 aborted: %s, want RS_ERR_TRANSPORT: %s",
           rs_status_name(st), rs_context_last_error(ctx));
    EXPECT(c, dt < 2.0,
           "an allgather with rank 0 aborted took %.2f s (timeout 20 s)", dt);
  }
  int64_t ns = -1;
  rs_layout_num_shards(l, &ns);
  EXPECT(c, ns == 1, "a failed allgather changed the layout (%lld shards)",
         (long long)ns);
done:
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  MPI_Barrier(MPI_COMM_WORLD);
  h_sleep_ms(200);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  const char *mode = argc > 1 ? argv[1] : "";
  static const hcase_def mismatch[] = {
      {"mismatch.context", case_mismatch_context},
      {"mismatch.destination_layout", case_mismatch_destination},
      {"mismatch.source_layout", case_mismatch_source},
      {"mismatch.tensor_declarations", case_mismatch_tensor},
      {"mismatch.staging_setting", case_mismatch_staging},
      {"mismatch.domains", case_mismatch_domains},
      {"mismatch.integrity_setting", case_mismatch_integrity},
      {"mismatch.then_agree", case_mismatch_then_agree},
  };
  if (!strcmp(mode, "mismatch")) {
    for (size_t i = 0; i < sizeof mismatch / sizeof *mismatch; i++)
      h_run_case(&mismatch[i]);
  } else if (!strcmp(mode, "timeout")) {
    h_run_case(&(hcase_def){"timeout.never_executes", case_timeout});
  } else if (!strcmp(mode, "timeout_agreed")) {
    g_agree_first = true;
    h_run_case(&(hcase_def){"timeout.skips_second_execute", case_timeout});
  } else if (!strcmp(mode, "execute_late")) {
    g_agree_first = g_late = true;
    g_block = 256;
    h_run_case(&(hcase_def){"timeout.late_large_execute", case_timeout});
  } else if (!strcmp(mode, "allgather_late")) {
    h_run_case(&(hcase_def){"allgather.late_rank", case_allgather_late});
  } else if (!strcmp(mode, "allgather_aborted")) {
    h_run_case(&(hcase_def){"allgather.aborted", case_allgather_aborted});
  } else {
    if (h_rank == 0)
      fprintf(stderr,
              "usage: %s mismatch|timeout|timeout_agreed|execute_late|"
              "allgather_late|allgather_aborted\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  int rc = h_finish(); /* MPI_Finalize: nothing can touch them after it */
  h_bufs_free(&late_sb);
  h_bufs_free(&late_db);
  return rc;
}
