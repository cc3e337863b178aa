/* SPDX-License-Identifier: Apache-2.0 */
/* libreshard over MPI: the contracts of issue 13 that only show between
 * processes.
 *
 *   mpirun -np N mpi_contract unread_replica      (N >= 3)
 *       a source replica the plan never reads: its rank binds nothing, and
 *       every rank binds only what the plan needs of it
 *   mpirun -np N mpi_contract refusals            (N >= 3)
 *       the last rank's own input is refused inside a collective call
 *       (rs_layout_allgather, the agreement before a plan's first run, a
 *       later run), or its plan disagrees: with the timeout left at its
 *       default (60 s) every rank must fail within 5 s, the others naming
 *       the last rank and its reason; afterwards the context is usable
 *       again where nothing moved, and done where an execution was given
 *       up (every later collective call: RS_ERR_TRANSPORT)
 *   mpirun -np N mpi_contract done_after_timeout  (N >= 3)
 *       after a timeout every later collective call on the context returns
 *       RS_ERR_TRANSPORT at once
 *
 * Plain C + MPI on the harness (mpi_harness.h). */
#include "mpi_harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include "th_value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank whose input fails refuses; every call must end well before the
 * default timeout (60 s). */
#define QUICK_S 5.0

/* ---- unread replica -------------------------------------------------- */

/* u8[64] held whole by ranks 0 and 1, wanted whole by the last rank. Each
 * rank binds only what the plan reads or writes of it, whichever replica
 * the planner picks. */
static void case_unread_replica(hcase *c) {
  int last = h_np - 1;
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  unsigned char in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = (unsigned char)(i * 7 + 3);
  memset(out, TH_POISON, sizeof out);
  const int64_t shape[1] = {64}, zero[1] = {0};
  if (h_ok(c, h_context(MPI_COMM_WORLD, 0, &ctx), NULL, "context") &&
      h_ok(c, rs_layout_create(ctx, &src), ctx, "source layout") &&
      h_ok(c, rs_layout_create(ctx, &dst), ctx, "destination layout") &&
      h_ok(c, rs_layout_add_tensor(src, "w", RS_DTYPE_U8, 1, shape), ctx,
           "tensor") &&
      h_ok(c, rs_layout_add_tensor(dst, "w", RS_DTYPE_U8, 1, shape), ctx,
           "tensor")) {
    if (h_rank <= 1)
      h_ok(c, rs_layout_add_shard(src, "w", h_rank, zero, shape, 0, 0, NULL),
           ctx, "source shard");
    if (h_rank == last)
      h_ok(c, rs_layout_add_shard(dst, "w", h_rank, zero, shape, 0, 0, NULL),
           ctx, "destination shard");
  }
  if (!h_all_ok(c)) goto done;
  h_ok(c, rs_layout_allgather(src), ctx, "allgather(source)");
  h_ok(c, rs_layout_allgather(dst), ctx, "allgather(destination)");
  if (!h_all_ok(c)) goto done;
  h_ok(c, rs_plan_create(src, dst, &plan), ctx, "rs_plan_create");
  if (!h_all_ok(c)) goto done;
  int64_t n = 0;
  int from = -1;
  rs_plan_num_moves(plan, &n);
  EXPECT(c, n == 1, "%lld moves, want 1", (long long)n);
  rs_plan_move_info(plan, 0, NULL, &from, NULL, NULL, NULL, NULL);
  EXPECT(c, from == 0 || from == 1, "the plan reads rank %d", from);
  if (h_rank == from)
    h_ok(c, rs_plan_bind(plan, RS_SIDE_SRC, h_rank, 0, in, sizeof in), ctx,
         "bind the replica the plan reads");
  if (h_rank == last)
    h_ok(c, rs_plan_bind(plan, RS_SIDE_DST, h_rank, 0, out, sizeof out), ctx,
         "bind the destination");
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  h_ok(c, rs_plan_execute(plan), ctx,
       "rs_plan_execute, the unread replica unbound");
  EXPECT(c, h_now() - t0 < QUICK_S, "rs_plan_execute took %.1f s",
         h_now() - t0);
  if (h_rank == last)
    EXPECT(c, memcmp(in, out, sizeof in) == 0,
           "the destination does not hold the source");
  /* Again, as a refit does. */
  h_ok(c, rs_plan_execute(plan), ctx, "rs_plan_execute, second time");
done:
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

/* ---- refusals ---------------------------------------------------------- */

/* The call took `dt` s and returned `st`: the last rank (the one whose
 * input is wrong) wants `own` with `own_text` in its message, every other
 * rank `others` with a message naming the last rank and holding
 * `others_text`. */
static void expect_refusal(hcase *c, const rs_context *ctx, const char *what,
                           rs_status st, double dt, rs_status own,
                           const char *own_text, rs_status others,
                           const char *others_text) {
  int last = h_np - 1;
  const char *msg = rs_context_last_error(ctx);
  EXPECT(c, dt < QUICK_S,
         "%s took %.1f s to fail (timeout left at its default)", what, dt);
  if (h_rank == last) {
    if (h_status(c, st, own, ctx, what))
      EXPECT(c, strstr(msg, own_text) != NULL,
             "%s: the message does not say '%s': %s", what, own_text, msg);
    return;
  }
  if (!h_status(c, st, others, ctx, what)) return;
  EXPECT(c, h_mentions_rank(msg, last),
         "%s: the message does not name rank %d: %s", what, last, msg);
  EXPECT(c, strstr(msg, others_text) != NULL,
         "%s: the message does not say '%s': %s", what, others_text, msg);
}

/* A layout of tensor "t" (np x 4) with this rank's row, on ctx. */
static rs_status row_layout(rs_context *ctx, rs_layout **out) {
  const int64_t shape[2] = {h_np, 4}, ext[2] = {1, 4};
  const int64_t off[2] = {h_rank, 0};
  rs_status st = rs_layout_create(ctx, out);
  if (st == RS_OK) st = rs_layout_add_tensor(*out, "t", RS_DTYPE_F32, 2, shape);
  if (st == RS_OK) st = rs_layout_add_shard(*out, "t", h_rank, off, ext, 0, 0,
                                            NULL);
  return st;
}

/* The last rank adds a shard of rank 0 besides its own. */
static void case_allgather_refused(hcase *c) {
  int last = h_np - 1;
  rs_context *ctx = NULL;
  rs_layout *l = NULL, *good = NULL;
  if (h_ok(c, h_context(MPI_COMM_WORLD, 0, &ctx), NULL, "context") &&
      h_ok(c, row_layout(ctx, &l), ctx, "layout") && h_rank == last)
    h_ok(c, rs_layout_add_shard(l, "t", 0, (int64_t[]){0, 0},
                                (int64_t[]){1, 4}, 0, 0, NULL),
         ctx, "a shard of rank 0");
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  rs_status st = rs_layout_allgather(l);
  expect_refusal(c, ctx, "rs_layout_allgather", st, h_now() - t0,
                 RS_ERR_INVALID_ARGUMENT, "each rank adds only its own",
                 RS_ERR_MISMATCH, "each rank adds only its own");
  int64_t ns = -1;
  rs_layout_num_shards(l, &ns);
  EXPECT(c, ns == (h_rank == last ? 2 : 1),
         "the failed allgather changed the layout (%lld shards)",
         (long long)ns);
  if (!h_all_ok(c)) goto done;
  /* Nothing was exchanged: the context goes on. */
  if (h_ok(c, row_layout(ctx, &good), ctx, "good layout") &&
      h_ok(c, rs_layout_allgather(good), ctx, "allgather after the refusal")) {
    rs_layout_num_shards(good, &ns);
    EXPECT(c, ns == h_np, "%lld shards after allgather, want %d",
           (long long)ns, h_np);
  }
done:
  rs_layout_destroy(l);
  rs_layout_destroy(good);
  rs_context_destroy(ctx);
}

/* Everything for an execution of the all-to-all reshard, on a context with
 * the default timeout; the global layouts are built whole on every rank
 * (shift: the last rank's destination split differs). */
typedef struct a2a_run {
  hmodel m;
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  hbufs sb, db;
} a2a_run;

static bool a2a_open(hcase *c, a2a_run *a, int shift) {
  memset(a, 0, sizeof *a);
  h_model_init(&a->m);
  h_a2a(&a->m, "w", RS_DTYPE_I32, 4, h_rank == h_np - 1 ? shift : 0);
  if (h_ok(c, h_context(MPI_COMM_WORLD, 0, &a->ctx), NULL, "context") &&
      h_ok(c, h_layout(a->ctx, &a->m, RS_SIDE_SRC, H_GLOBAL, &a->src), a->ctx,
           "source layout") &&
      h_ok(c, h_layout(a->ctx, &a->m, RS_SIDE_DST, H_GLOBAL, &a->dst), a->ctx,
           "destination layout") &&
      h_ok(c, rs_plan_create(a->src, a->dst, &a->plan), a->ctx,
           "rs_plan_create")) {
    h_bufs_alloc(&a->m, RS_SIDE_SRC, &a->sb);
    h_bufs_alloc(&a->m, RS_SIDE_DST, &a->db);
    h_fill(&a->m, &a->sb, 1);
    h_poison(&a->db);
  }
  return h_all_ok(c);
}

static void a2a_close(a2a_run *a) {
  rs_plan_destroy(a->plan);
  rs_layout_destroy(a->src);
  rs_layout_destroy(a->dst);
  rs_context_destroy(a->ctx);
  h_bufs_free(&a->sb);
  h_bufs_free(&a->db);
  h_model_free(&a->m);
}

static bool nothing_written(hcase *c, const a2a_run *a) {
  int64_t right = 0, poisoned = 0, wrong = 0;
  h_count(&a->m, &a->db, 1, &right, &poisoned, &wrong);
  return EXPECT(c, right == 0 && wrong == 0,
                "%lld destination elements were written though no rank "
                "executed",
                (long long)(right + wrong));
}

/* The last rank leaves its destination unbound at the plan's first run:
 * it refuses in the agreement, every rank fails at once, nothing moves,
 * and once it binds, the same plan runs on the same contexts. */
static void case_first_run_refused(hcase *c) {
  a2a_run a;
  if (!a2a_open(c, &a, 0)) goto done;
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_SRC, &a.sb), a.ctx, "bind source");
  if (h_rank != h_np - 1)
    h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_DST, &a.db), a.ctx,
         "bind destination");
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  rs_status st = rs_plan_execute(a.plan);
  expect_refusal(c, a.ctx, "first rs_plan_execute", st, h_now() - t0,
                 RS_ERR_UNKNOWN_BUFFER, "is not bound", RS_ERR_MISMATCH,
                 "is not bound");
  nothing_written(c, &a);
  if (!h_all_ok(c)) goto done;
  if (h_rank == h_np - 1)
    h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_DST, &a.db), a.ctx,
         "bind destination, late");
  if (!h_all_ok(c)) goto done;
  if (h_ok(c, rs_plan_execute(a.plan), a.ctx,
           "rs_plan_execute once every rank bound"))
    h_check(c, &a.m, &a.db, 1);
done:
  a2a_close(&a);
}

/* The last rank builds another destination layout: the agreement names it
 * on every rank at once (this always failed fast: every rank sees every
 * rank's record). */
static void case_first_run_disagrees(hcase *c) {
  a2a_run a;
  if (!a2a_open(c, &a, 1)) goto done;
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_SRC, &a.sb), a.ctx, "bind source");
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_DST, &a.db), a.ctx, "bind destination");
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  rs_status st = rs_plan_execute(a.plan);
  double dt = h_now() - t0;
  const char *msg = rs_context_last_error(a.ctx);
  EXPECT(c, dt < QUICK_S, "the disagreement took %.1f s", dt);
  if (h_status(c, st, RS_ERR_MISMATCH, a.ctx, "rs_plan_execute"))
    EXPECT(c, h_mentions_rank(msg, h_np - 1) &&
                  strstr(msg, "destination layout"),
           "the message names neither rank %d nor the destination layout: "
           "%s",
           h_np - 1, msg);
  nothing_written(c, &a);
done:
  a2a_close(&a);
}

/* Every later collective call on a context that is done: RS_ERR_TRANSPORT
 * at once, saying to destroy it (an execution of the same plan, of a new
 * plan, and rs_layout_allgather). */
static void expect_done(hcase *c, rs_context *ctx, rs_plan *plan,
                        const rs_layout *src, const rs_layout *dst) {
  struct {
    const char *what;
    int which;
  } calls[] = {{"rs_plan_execute again", 0},
               {"rs_plan_execute of a new plan", 1},
               {"rs_layout_allgather", 2}};
  for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
    rs_plan *fresh = NULL;
    rs_layout *l = NULL;
    rs_status st = RS_OK;
    double t0 = h_now();
    if (calls[i].which == 0) st = rs_plan_execute(plan);
    if (calls[i].which == 1) {
      st = rs_plan_create(src, dst, &fresh);
      if (st == RS_OK) st = rs_plan_execute(fresh);
    }
    if (calls[i].which == 2) {
      st = row_layout(ctx, &l);
      if (st == RS_OK) st = rs_layout_allgather(l);
    }
    double dt = h_now() - t0;
    const char *msg = rs_context_last_error(ctx);
    if (h_status(c, st, RS_ERR_TRANSPORT, ctx, calls[i].what))
      EXPECT(c, strstr(msg, "destroy") != NULL,
             "%s: the message does not say to destroy the context: %s",
             calls[i].what, msg);
    EXPECT(c, dt < 1.0, "%s on a context that is done took %.2f s",
           calls[i].what, dt);
    rs_plan_destroy(fresh);
    rs_layout_destroy(l);
  }
}

/* After a good run the last rank's destination gets unbound (a rebind
 * refused as too small): at the next run it gives up and tells its peers,
 * who fail at once naming it; every context is then done. */
static void case_later_run_refused(hcase *c) {
  a2a_run a;
  if (!a2a_open(c, &a, 0)) goto done;
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_SRC, &a.sb), a.ctx, "bind source");
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_DST, &a.db), a.ctx, "bind destination");
  if (h_ok(c, rs_plan_execute(a.plan), a.ctx, "first rs_plan_execute"))
    h_check(c, &a.m, &a.db, 1);
  if (!h_all_ok(c)) goto done;
  if (h_rank == h_np - 1)
    h_status(c, rs_plan_bind(a.plan, RS_SIDE_DST, h_rank, 0, a.db.p[0], 1),
             RS_ERR_BUFFER_TOO_SMALL, a.ctx, "rebind, 1 byte");
  if (!h_all_ok(c)) goto done;
  double t0 = h_now();
  rs_status st = rs_plan_execute(a.plan);
  expect_refusal(c, a.ctx, "second rs_plan_execute", st, h_now() - t0,
                 RS_ERR_UNKNOWN_BUFFER, "is not bound", RS_ERR_TRANSPORT,
                 "RS_ERR_UNKNOWN_BUFFER");
  expect_done(c, a.ctx, a.plan, a.src, a.dst);
done:
  a2a_close(&a);
}

/* ---- done after a timeout ---------------------------------------------- */

/* Rank 1 skips the second execution; the others time out (timeout 500
 * ms). Every later collective call on their contexts is RS_ERR_TRANSPORT
 * at once; rank 1, coming late, fails at once too, and is then done. */
static void case_done_after_timeout(hcase *c) {
  int silent = 1;
  a2a_run a;
  if (!a2a_open(c, &a, 0)) goto done;
  h_ok(c, rs_context_set_param(a.ctx, RS_PARAM_TIMEOUT_MS, 500), a.ctx,
       "timeout");
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_SRC, &a.sb), a.ctx, "bind source");
  h_ok(c, h_bind(a.plan, &a.m, RS_SIDE_DST, &a.db), a.ctx, "bind destination");
  if (h_ok(c, rs_plan_execute(a.plan), a.ctx, "first rs_plan_execute"))
    h_check(c, &a.m, &a.db, 1);
  if (!h_all_ok(c)) goto done;
  if (h_rank == silent) {
    h_sleep_ms(1500);
  } else {
    double t0 = h_now();
    rs_status st = rs_plan_execute(a.plan);
    EXPECT(c, st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT,
           "rs_plan_execute without rank %d: %s: %s", silent,
           rs_status_name(st), rs_context_last_error(a.ctx));
    EXPECT(c, h_now() - t0 < QUICK_S, "giving up took %.1f s", h_now() - t0);
  }
  /* Everyone has given up before rank 1 comes. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (h_rank == silent) {
    double t0 = h_now();
    rs_status st = rs_plan_execute(a.plan);
    EXPECT(c, st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT,
           "the late rs_plan_execute: %s: %s", rs_status_name(st),
           rs_context_last_error(a.ctx));
    EXPECT(c, h_now() - t0 < 1.0, "the late rs_plan_execute took %.1f s",
           h_now() - t0);
  }
  expect_done(c, a.ctx, a.plan, a.src, a.dst);
done:
  /* MPI may still touch the buffers of the abandoned transfers: keep them
   * until every rank is past this point. */
  MPI_Barrier(MPI_COMM_WORLD);
  a2a_close(&a);
}

/* A plan whose execution is in flight: a rebind is refused and changes
 * nothing; destroying the plan waits for the execution, which delivers;
 * the context then runs another plan (the second is made before, so the
 * destroy happens with no collective between). */
static void case_in_flight(hcase *c) {
  hmodel m;
  h_model_init(&m);
  h_a2a(&m, "w", RS_DTYPE_I32, 64, 0);
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL, *next = NULL;
  hbufs sb, db;
  h_bufs_alloc(&m, RS_SIDE_SRC, &sb);
  h_bufs_alloc(&m, RS_SIDE_DST, &db);
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") ||
      !h_ok(c, rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, 65536), ctx,
            "staging") ||
      !h_ok(c, h_layout(ctx, &m, RS_SIDE_SRC, H_GLOBAL, &src), ctx, "source") ||
      !h_ok(c, h_layout(ctx, &m, RS_SIDE_DST, H_GLOBAL, &dst), ctx,
            "destination") ||
      !h_ok(c, rs_plan_create(src, dst, &plan), ctx, "plan") ||
      !h_ok(c, rs_plan_create(src, dst, &next), ctx, "second plan") ||
      !h_ok(c, h_bind(plan, &m, RS_SIDE_SRC, &sb), ctx, "bind") ||
      !h_ok(c, h_bind(plan, &m, RS_SIDE_DST, &db), ctx, "bind") ||
      !h_all_ok(c))
    goto done;
  h_fill(&m, &sb, 1);
  h_poison(&db);
  unsigned char spare[16];
  if (h_ok(c, rs_plan_execute_async(plan, NULL), ctx, "execute_async")) {
    h_status(c, rs_plan_bind(plan, RS_SIDE_DST, h_rank, 0, spare, sizeof spare),
             RS_ERR_INVALID_ARGUMENT, ctx, "a rebind in flight");
    rs_plan_destroy(plan); /* waits for the execution */
    plan = NULL;
    h_check(c, &m, &db, 1);
  }
  if (!h_all_ok(c)) goto done;
  h_fill(&m, &sb, 2);
  h_poison(&db);
  if (h_ok(c, h_bind(next, &m, RS_SIDE_SRC, &sb), ctx, "bind") &&
      h_ok(c, h_bind(next, &m, RS_SIDE_DST, &db), ctx, "bind") &&
      h_ok(c, rs_plan_execute(next), ctx, "the next plan after a destroy"))
    h_check(c, &m, &db, 2);
done:
  rs_plan_destroy(plan);
  rs_plan_destroy(next);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  h_bufs_free(&sb);
  h_bufs_free(&db);
  h_model_free(&m);
}

/* A child of fork() holds a copy of an MPI context: every call on it is
 * refused with a status naming the fork, and destroying it there touches
 * no MPI (the parent's context keeps working). */
static void case_forked_child(hcase *c) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 5000, &ctx), NULL, "context") ||
      !h_ok(c, rs_layout_create(ctx, &l), ctx, "layout"))
    goto done;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    rs_status st = rs_layout_allgather(l);
    int ok = st == RS_ERR_TRANSPORT &&
             strstr(rs_context_last_error(ctx), "forked") != NULL;
    rs_layout_destroy(l);
    rs_context_destroy(ctx);
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  EXPECT(c, pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
         "the child's calls on the parent's context (status %d)", status);
  h_ok(c, rs_layout_allgather(l), ctx, "the parent's allgather after a fork");
done:
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  const char *mode = argc > 1 ? argv[1] : "";
  if (h_np < 3) {
    if (h_rank == 0) fprintf(stderr, "mpi_contract needs 3 ranks or more\n");
    MPI_Finalize();
    return 2;
  }
  static const hcase_def refusals[] = {
      {"refusal.allgather", case_allgather_refused},
      {"refusal.first_run", case_first_run_refused},
      {"refusal.first_run_disagrees", case_first_run_disagrees},
      {"refusal.later_run", case_later_run_refused},
  };
  if (!strcmp(mode, "unread_replica")) {
    h_run_case(&(hcase_def){"unread_replica", case_unread_replica});
  } else if (!strcmp(mode, "refusals")) {
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++)
      h_run_case(&refusals[i]);
  } else if (!strcmp(mode, "in_flight")) {
    h_run_case(&(hcase_def){"in_flight", case_in_flight});
    h_run_case(&(hcase_def){"forked_child", case_forked_child});
  } else if (!strcmp(mode, "done_after_timeout")) {
    h_run_case(&(hcase_def){"done_after_timeout", case_done_after_timeout});
  } else {
    if (h_rank == 0)
      fprintf(stderr,
              "usage: %s unread_replica|refusals|in_flight|"
              "done_after_timeout\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  return h_finish();
}
