/* SPDX-License-Identifier: Apache-2.0 */
/* Faults in the exchanges of planning: one bit flipped in what one rank
 * receives in one of the sealed collectives of a sync.
 *
 *   mpirun -np N mpi_exchange_fault [--trials T] [--seed S]
 *                                   [--timeout-ms MS] [--domain-size D]
 *
 * A sync here is: each rank adds its own shards and calls
 * rs_layout_allgather on both sides (an allgather and a verdict each),
 * plans its own part with rounds by domain pair (per-rank planning: an
 * all-to-all of told moves, an allgather of figures, a verdict) with
 * integrity on and a small staging setting, then executes three times,
 * every destination element and gap byte checked after each RS_OK. That
 * is COLLECTIVES sealed collectives. In trial i the victim, rank i % N,
 * sets RESHARD_FAULT_FLIP_COLLECTIVE=k:b (k = 1 + (i / N) % COLLECTIVES,
 * b random) before its context is made, so every collective of the
 * sequence and every rank is hit in turn.
 *
 * A trial fails when any rank gets RS_OK from an execution with a wrong
 * byte, when any call takes longer than the timeout + 0.5 s, or when the
 * flip goes unnoticed (every call on every rank RS_OK: a seal must catch
 * every flipped bit). The tally says how each flip was met: every rank
 * refused the call it landed in (a payload), or the victim alone refused
 * it (the verdict's own payload: then its peers must fail their next call
 * at once, told by notice). Rank 0 prints "PASS exchange_faults" or
 * "FAIL exchange_faults: ..." and the tally; the exit code is 0 on a
 * pass. */
#include "mpi_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COLLECTIVES = 7, EXECUTIONS = 3, CALLS = 3 + EXECUTIONS };

/* What one rank saw in one trial. */
typedef struct outcome {
  int64_t first_failed; /* the call (0..CALLS-1) that failed first, -1 */
  int64_t wrong;        /* wrong destination bytes after an RS_OK */
  int64_t slowest_ms;   /* the longest call */
  int64_t status;       /* the first failure's status */
} outcome;

static const char *call_name(int64_t k) {
  static const char *names[] = {"rs_layout_allgather (source)",
                                "rs_layout_allgather (destination)",
                                "rs_plan_create"};
  return k < 3 ? names[k] : "rs_plan_execute";
}

static void timed(outcome *o, int call, rs_status st, double t0) {
  int64_t ms = (int64_t)(h_now() * 1e3 - t0);
  if (ms > o->slowest_ms) o->slowest_ms = ms;
  if (st != RS_OK && o->first_failed < 0) {
    o->first_failed = call;
    o->status = st;
  }
}

/* Two tensors: the all-to-all (int32, every rank to every other) and a
 * bf16 matrix held by two ranks and wanted whole by every rank. */
static void build_model(hmodel *m) {
  h_model_init(m);
  h_a2a(m, "a2a", RS_DTYPE_I32, 96, 0);
  int64_t shape[2] = {24, 10};
  int t = h_tensor(m, "fanout", RS_DTYPE_BF16, 2, shape);
  int64_t top[2] = {0, 0}, half[2] = {12, 10}, bottom[2] = {12, 0};
  int holder = h_np > 2 ? 2 : 0;
  h_shard(m, RS_SIDE_SRC, t, 0, top, half, 1, H_APPEND, 0, NULL);
  h_shard(m, RS_SIDE_SRC, t, holder, bottom, half, 1, H_APPEND, 8, NULL);
  for (int r = 0; r < h_np; r++)
    h_shard(m, RS_SIDE_DST, t, r, top, shape, 1, H_APPEND, 16, NULL);
}

static void trial(const hmodel *m, int victim, int nth, int64_t bit,
                  int64_t timeout_ms, outcome *o) {
  *o = (outcome){-1, 0, 0, RS_OK};
  char fault[64];
  snprintf(fault, sizeof fault, "%d:%lld", nth, (long long)bit);
  if (h_rank == victim) setenv("RESHARD_FAULT_FLIP_COLLECTIVE", fault, 1);
  rs_context *ctx = NULL;
  rs_status st = h_context(MPI_COMM_WORLD, timeout_ms, &ctx);
  unsetenv("RESHARD_FAULT_FLIP_COLLECTIVE");
  if (st != RS_OK) {
    fprintf(stderr, "rank %d: no context: %s\n", h_rank, rs_status_string(st));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  rs_context_set_param(ctx, RS_PARAM_PLAN_PART, h_rank);
  rs_context_set_param(ctx, RS_PARAM_ROUNDS, RS_ROUNDS_BY_DOMAIN_PAIR);
  rs_context_set_param(ctx, RS_PARAM_INTEGRITY, 1);
  rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, 65536);
  rs_layout *side[2] = {NULL, NULL};
  rs_plan *plan = NULL;
  hbufs b[2];
  memset(b, 0, sizeof b);
  for (int s = 0; s < 2 && o->first_failed < 0; s++) {
    st = h_layout(ctx, m, s, H_OWN, &side[s]);
    double t0 = h_now() * 1e3;
    if (st == RS_OK) st = rs_layout_allgather(side[s]);
    timed(o, s, st, t0);
  }
  if (o->first_failed < 0) {
    double t0 = h_now() * 1e3;
    st = rs_plan_create(side[0], side[1], &plan);
    timed(o, 2, st, t0);
  }
  if (o->first_failed < 0) {
    h_bufs_alloc(m, RS_SIDE_SRC, &b[0]);
    h_bufs_alloc(m, RS_SIDE_DST, &b[1]);
    st = h_bind(plan, m, RS_SIDE_SRC, &b[0]);
    if (st == RS_OK) st = h_bind(plan, m, RS_SIDE_DST, &b[1]);
    if (st != RS_OK) {
      fprintf(stderr, "rank %d: bind: %s\n", h_rank, rs_status_string(st));
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  for (int e = 0; e < EXECUTIONS && o->first_failed < 0; e++) {
    h_fill(m, &b[0], (uint64_t)e + 1);
    h_poison(&b[1]);
    double t0 = h_now() * 1e3;
    st = rs_plan_execute(plan);
    timed(o, 3 + e, st, t0);
    if (st == RS_OK) {
      int64_t right, poisoned, wrong;
      h_count(m, &b[1], (uint64_t)e + 1, &right, &poisoned, &wrong);
      o->wrong += poisoned + wrong + h_stray_bytes(m, &b[1]);
    }
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(side[0]);
  rs_layout_destroy(side[1]);
  rs_context_destroy(ctx);
  h_bufs_free(&b[0]);
  h_bufs_free(&b[1]);
}

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int trials = 10 * COLLECTIVES;
  int64_t timeout_ms = 1000;
  unsigned long long seed = 0x5EA1ED;
  bool verbose = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--trials")) trials = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--timeout-ms"))
      timeout_ms = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--verbose")) verbose = atoi(argv[i + 1]) != 0;
  }
  hmodel m;
  build_model(&m);
  hrng rng = {seed};
  int64_t everyone = 0, victim_alone = 0, failures = 0, peers_ms = 0;
  int64_t slowest = 0;
  char why[512] = "";
  double start = h_now();
  for (int i = 0; i < trials; i++) {
    int victim = i % h_np, nth = 1 + (i / h_np) % COLLECTIVES;
    int64_t bit = (int64_t)(h_rand(&rng) % 65536);
    outcome o;
    trial(&m, victim, nth, bit, timeout_ms, &o);
    outcome *all = malloc((size_t)h_np * sizeof *all);
    MPI_Gather(&o, 4, MPI_INT64_T, all, 4, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (h_rank == 0) {
      bool noticed = false, alone = true, fail = false;
      int64_t at = all[victim].first_failed;
      for (int r = 0; r < h_np; r++) {
        const outcome *x = &all[r];
        if (x->slowest_ms > slowest) slowest = x->slowest_ms;
        if (x->first_failed >= 0) noticed = true;
        if (r != victim && x->first_failed == at) alone = false;
        if (r != victim && x->first_failed > at && x->slowest_ms > peers_ms)
          peers_ms = x->slowest_ms;
        if (x->wrong && !fail)
          fail = snprintf(why, sizeof why,
                          "trial %d (flip %d:%lld on rank %d): rank %d "
                          "got RS_OK with %lld wrong bytes",
                          i, nth, (long long)bit, victim, r,
                          (long long)x->wrong) > 0;
        if (x->slowest_ms > timeout_ms + 500 && !fail)
          fail = snprintf(why, sizeof why,
                          "trial %d (flip %d:%lld on rank %d): rank %d "
                          "took %lld ms in one call (timeout %lld ms)",
                          i, nth, (long long)bit, victim, r,
                          (long long)x->slowest_ms,
                          (long long)timeout_ms) > 0;
        if (x->first_failed < 0 && r != victim && all[victim].first_failed >= 0 &&
            !fail)
          fail = snprintf(why, sizeof why,
                          "trial %d (flip %d:%lld on rank %d): rank %d "
                          "returned RS_OK from every call while rank %d "
                          "failed %s",
                          i, nth, (long long)bit, victim, r, victim,
                          call_name(at)) > 0;
      }
      if (!noticed && !fail)
        fail = snprintf(why, sizeof why,
                        "trial %d (flip %d:%lld on rank %d): unnoticed, "
                        "every call RS_OK",
                        i, nth, (long long)bit, victim) > 0;
      for (int r = 0; verbose && r < h_np; r++)
        printf("trial %d flip %d:%lld on rank %d: rank %d first failed %s "
               "(%s), slowest %lld ms, %lld wrong\n",
               i, nth, (long long)bit, victim, r,
               all[r].first_failed < 0 ? "none"
                                       : call_name(all[r].first_failed),
               rs_status_name((rs_status)all[r].status),
               (long long)all[r].slowest_ms, (long long)all[r].wrong);
      if (fail) failures++;
      else if (alone) victim_alone++;
      else everyone++;
    }
    free(all);
  }
  if (h_rank == 0) {
    printf("exchange_faults: %d ranks, %d trials in %.1f s (timeout %lld "
           "ms): %lld refused by every rank in the call hit, %lld by the "
           "victim alone with its peers failing their next call (slowest "
           "such %lld ms), %lld failed; slowest call %lld ms\n",
           h_np, trials, h_now() - start, (long long)timeout_ms,
           (long long)everyone, (long long)victim_alone, (long long)peers_ms,
           (long long)failures, (long long)slowest);
    if (failures)
      printf("FAIL exchange_faults: %s\n", why);
    else
      printf("PASS exchange_faults\n");
  }
  MPI_Bcast(&failures, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  h_model_free(&m);
  MPI_Finalize();
  return failures ? 1 : 0;
}
