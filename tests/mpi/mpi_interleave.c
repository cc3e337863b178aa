/* SPDX-License-Identifier: Apache-2.0 */
/* Plans executed in different orders, stray calls, skipped calls: a rank
 * may get an error, but never RS_OK with bytes from another plan or another
 * execution.
 *
 *   mpirun -np N mpi_interleave [--iters K] [--timeout-ms T] [--seed S]
 *
 * Every rank holds the all-to-all reshard (h_a2a) twice, as plans `a`
 * and `b` made from identical layouts (so with identical fingerprints) into
 * buffers of their own. Before each call a rank fills its source of plan p
 * with the values of generation (iteration, p, n), n = how many times it
 * has called rs_plan_execute on p; after RS_OK every destination element
 * must hold the value of exactly that generation, which only its peers'
 * n-th execution of the same plan can have sent.
 *
 * Cases:
 *   swapped_order  both run a and b once in the same order (agreement),
 *                  then rank 0 runs a, b while the others run b, a: no
 *                  RS_OK anywhere, RS_ERR_MISMATCH naming a rank (or
 *                  RS_ERR_TRANSPORT passing on a peer's mismatch)
 *   stray_call     after one execution together the last rank calls once
 *                  more alone (times out); then all fill new values and
 *                  execute: no RS_OK anywhere, every rank fails in bounded
 *                  time
 *   interleavings  K random sequences (a fresh context each) of joint
 *                  executions, swapped plans, stray and skipped calls, the
 *                  schedule drawn from a seed every rank shares; checked as
 *                  above; counts of each outcome printed. Steps are not
 *                  fenced, so a "stray" call may meet a peer's later call
 *                  of the same plan and count: then RS_OK is right, and
 *                  the bytes say so. */
#include "mpi_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters = 1000;
static int64_t timeout_ms = 20;
static uint64_t seed = 0;

enum { BLOCK = 4, NPLANS = 2 };

typedef struct world {
  rs_context *ctx;
  hmodel m; /* the layouts of both plans */
  rs_plan *plan[NPLANS];
  hbufs src[NPLANS], dst[NPLANS];
  int calls[NPLANS]; /* rs_plan_execute calls on each plan, this rank */
  int iter;
} world;

static int gen_of(const world *w, int p) {
  return ((w->iter * NPLANS + p) << 10) + w->calls[p];
}

static rs_status open_world(world *w, int iter) {
  memset(w, 0, sizeof *w);
  w->iter = iter;
  h_model_init(&w->m);
  h_a2a(&w->m, "w", RS_DTYPE_I32, BLOCK, 0);
  rs_status st = h_context(MPI_COMM_WORLD, timeout_ms, &w->ctx);
  for (int p = 0; p < NPLANS && st == RS_OK; p++) {
    rs_layout *src = NULL, *dst = NULL;
    st = h_layout(w->ctx, &w->m, RS_SIDE_SRC, H_GLOBAL, &src);
    if (st == RS_OK) st = h_layout(w->ctx, &w->m, RS_SIDE_DST, H_GLOBAL, &dst);
    if (st == RS_OK) st = rs_plan_create(src, dst, &w->plan[p]);
    rs_layout_destroy(src);
    rs_layout_destroy(dst);
    h_bufs_alloc(&w->m, RS_SIDE_SRC, &w->src[p]);
    h_bufs_alloc(&w->m, RS_SIDE_DST, &w->dst[p]);
    h_poison(&w->dst[p]);
    if (st == RS_OK) st = h_bind(w->plan[p], &w->m, RS_SIDE_SRC, &w->src[p]);
    if (st == RS_OK) st = h_bind(w->plan[p], &w->m, RS_SIDE_DST, &w->dst[p]);
  }
  return st;
}

static void close_world(world *w) {
  for (int p = 0; p < NPLANS; p++) {
    rs_plan_destroy(w->plan[p]);
    h_bufs_free(&w->src[p]);
    h_bufs_free(&w->dst[p]);
  }
  rs_context_destroy(w->ctx);
  h_model_free(&w->m);
}

typedef struct outcome {
  rs_status st;
  double ms;
  int64_t wrong; /* destination elements not of the expected generation */
  char msg[768];
} outcome;

/* One call of rs_plan_execute on plan p with fresh source values. */
static outcome run(world *w, int p) {
  outcome o = {RS_OK, 0, 0, ""};
  int gen = gen_of(w, p);
  h_fill(&w->m, &w->src[p], (uint64_t)gen);
  w->calls[p]++;
  double t0 = h_now();
  o.st = rs_plan_execute(w->plan[p]);
  o.ms = (h_now() - t0) * 1e3;
  if (o.st != RS_OK) {
    snprintf(o.msg, sizeof o.msg, "%s", rs_context_last_error(w->ctx));
    return o;
  }
  int64_t right, poisoned;
  h_count(&w->m, &w->dst[p], (uint64_t)gen, &right, &poisoned, &o.wrong);
  o.wrong += poisoned;
  return o;
}

static bool named_peer(const char *msg) {
  for (int r = 0; r < h_np; r++)
    if (r != h_rank && h_mentions_rank(msg, r)) return true;
  return false;
}

/* RS_OK with every element right, or a failure in bounded time naming a
 * peer. */
static void judge(hcase *c, const outcome *o, const char *what) {
  EXPECT(c, o->st != RS_OK || o->wrong == 0,
         "%s: RS_OK with %lld destination elements of another plan or "
         "execution",
         what, (long long)o->wrong);
  /* Bounded: a call that waited for a peer forever, or for the default
   * 60 s, is far beyond this; the slack is for a loaded 2-core machine
   * under sanitizers (1 s once proved too little at load 10). */
  EXPECT(c, o->ms <= (double)timeout_ms + 5000,
         "%s: returned after %.0f ms with a timeout of %lld ms", what, o->ms,
         (long long)timeout_ms);
  EXPECT(c, o->st == RS_OK || named_peer(o->msg),
         "%s: %s names no peer: %s", what, rs_status_name(o->st), o->msg);
}

/* The first execution of each plan, in the same order everywhere (the
 * agreement pairs the plans). `must`: it has to succeed; in the random
 * sequences, whose timeout is short enough for a loaded machine to miss,
 * only the bytes are judged. */
static void agree_both(hcase *c, world *w, bool must) {
  for (int p = 0; p < NPLANS; p++) {
    outcome o = run(w, p);
    judge(c, &o, "first execution");
    if (must) h_ok(c, o.st, w->ctx, "first execution");
  }
}

static void swapped_order(hcase *c) {
  world w;
  int64_t keep = timeout_ms;
  timeout_ms = 1000;
  rs_status opened = open_world(&w, 0);
  if (!h_ok(c, opened, w.ctx, "setup")) return;
  agree_both(c, &w, true);
  if (!h_all_ok(c)) return close_world(&w);
  int order[NPLANS] = {h_rank == 0 ? 0 : 1, h_rank == 0 ? 1 : 0};
  for (int k = 0; k < NPLANS; k++) {
    outcome o = run(&w, order[k]);
    judge(c, &o, k ? "second call" : "first call");
    EXPECT(c, o.st != RS_OK, "call %d returned RS_OK on plans in another "
           "order", k);
    /* a rank that saw the mismatch itself, or heard of it from a peer
     * that saw it first */
    if (k == 0)
      EXPECT(c, (o.st == RS_ERR_MISMATCH && strstr(o.msg, "same order")) ||
                    (o.st == RS_ERR_TRANSPORT &&
                     strstr(o.msg, "RS_ERR_MISMATCH")),
             "first call: %s (%s), want RS_ERR_MISMATCH", rs_status_name(o.st),
             o.msg);
  }
  timeout_ms = keep;
  close_world(&w);
}

static void stray_call(hcase *c) {
  world w;
  int64_t keep = timeout_ms;
  timeout_ms = 500;
  rs_status opened = open_world(&w, 0);
  if (!h_ok(c, opened, w.ctx, "setup")) return;
  agree_both(c, &w, true);
  if (!h_all_ok(c)) return close_world(&w);
  int stray = h_np - 1;
  if (h_rank == stray) {
    outcome o = run(&w, 0);
    judge(c, &o, "stray call");
    EXPECT(c, o.st == RS_ERR_TIMEOUT, "stray call: %s (%s), want "
           "RS_ERR_TIMEOUT", rs_status_name(o.st), o.msg);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  outcome o = run(&w, 0);
  judge(c, &o, "joint call after the stray one");
  EXPECT(c, o.st != RS_OK, "RS_OK after rank %d's stray call", stray);
  timeout_ms = keep;
  close_world(&w);
}

/* What each rank does in one step of an interleaving. */
enum { RUN_A, RUN_B, IDLE };

static void interleavings(hcase *c) {
  hrng rng = {seed ? seed : 0x5eed1234abcdull};
  int64_t ok = 0, failed = 0, deviations = 0, ok_after_deviation = 0;
  /* Every rank runs every sequence (they are collective), failures or
   * not; the first failure is what the case reports. */
  for (int it = 0; it < iters; it++) {
    world w;
    rs_status opened = open_world(&w, it);
    h_ok(c, opened, w.ctx, "setup");
    agree_both(c, &w, false);
    bool deviated = false;
    int steps = (int)h_range(&rng, 1, 5);
    for (int s = 0; s < steps; s++) {
      int p = (int)h_range(&rng, 0, 1);
      int kind = (int)h_range(&rng, 0, 9); /* 0..5 together, then faults */
      int odd = (int)h_range(&rng, 0, h_np - 1);
      int act = p == 0 ? RUN_A : RUN_B;
      if (kind == 6 && h_rank == odd) act = p == 0 ? RUN_B : RUN_A; /* swap */
      if (kind == 7 && h_rank != odd) act = IDLE; /* odd strays alone */
      if (kind == 8 && h_rank == odd) act = IDLE; /* odd skips */
      if (kind == 9 && h_rank == odd) act = p == 0 ? RUN_A : RUN_B;
      if (kind == 9 && h_rank != odd) act = IDLE; /* stray, then ... */
      deviated |= kind >= 6 && h_np > 1;
      deviations += kind >= 6;
      if (act != IDLE) {
        outcome o = run(&w, act == RUN_A ? 0 : 1);
        judge(c, &o, "interleaved call");
        if (o.st == RS_OK) {
          ok++;
          ok_after_deviation += deviated;
        } else {
          failed++;
        }
      }
      if (kind == 9) { /* ... the others run the same plan late */
        MPI_Barrier(MPI_COMM_WORLD);
        /* Steps are not fenced in time: a lone call may still pair with
         * a peer's later call of the same plan and count, which is a
         * joint execution like any other. So only the bytes are judged. */
        if (h_rank != odd) {
          outcome o = run(&w, p);
          judge(c, &o, "call after a stray one");
          if (o.st == RS_OK)
            ok++;
          else
            failed++;
        }
      }
    }
    close_world(&w);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (h_rank == 0)
    printf("interleavings: %d sequences, %lld calls RS_OK (%lld after a "
           "deviation, each checked), %lld failed, %lld deviations, seed "
           "%llu\n",
           iters, (long long)ok, (long long)ok_after_deviation,
           (long long)failed, (long long)deviations,
           (unsigned long long)(seed ? seed : 0x5eed1234abcdull));
  EXPECT(c, ok > 0, "no call returned RS_OK: the test proves nothing");
  EXPECT(c, failed > 0, "no call failed: no deviation took effect");
}

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--timeout-ms")) timeout_ms = atoll(argv[i + 1]);
    if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
  }
  static const hcase_def cases[] = {{"swapped_order", swapped_order},
                                    {"stray_call", stray_call},
                                    {"interleavings", interleavings}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    h_run_case(&cases[i]);
  return h_finish();
}
