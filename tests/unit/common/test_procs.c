/* SPDX-License-Identifier: Apache-2.0 */
/* The process harness of tests/common/th_procs.h: barriers at 2, 4 and 8
 * ranks keep the ranks in step round after round; broadcasts of 128 bytes
 * and of the largest payload from every root, and allreduce sum, min and
 * max, give every rank the right bytes; oversized and mismatched calls fail
 * alike on every rank and leave the group in step; each rank gets the NCCL
 * environment with a host id of its own (or the inherited one when asked);
 * and the failures: a rank that exits early is reported and its peers'
 * barrier says so at once, a rank killed on a cue mid-barrier or
 * mid-transfer is reported signalled while its peers learn of it within
 * 2 s of a 10 s deadline, a rank that hangs is killed at the wall limit
 * while the others finish, and a barrier nobody joins times out at its
 * deadline and aborts the group.
 *
 * Each Test runs th_procs_run before its first assertion (see th_procs.h on
 * fork under ASan). The ranks do not assert: each check that fails prints
 * why on stderr and ends its rank with status 1, which the report shows.
 * Time bounds are loose (a loaded 2-core machine runs 2 Tests at once). */
#include <criterion/criterion.h>

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "th_procs.h"

/* A deadline no healthy collective here comes near. */
#define GENEROUS_S 20.0
/* The wall limit of a run that should end by itself. */
#define WALL_S 25.0
/* The deadline of a collective whose peer dies, and how soon it must
 * learn of the death. */
#define DEATH_DEADLINE_S 10.0
#define DEATH_NOTICED_S 2.0

/* In a rank: unless cond, print why and end the rank with status 1. */
#define RANK_EXPECT(me, cond, ...)                                 \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "rank %d, line %d: ", (me)->rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                \
      fputc('\n', stderr);                                         \
      return 1;                                                    \
    }                                                              \
  } while (0)

#define RANK_EXPECT_RC(me, rc, want, what)                                  \
  RANK_EXPECT(me, (rc) == (want), "%s: %s, want %s", what, th_strerror(rc), \
              th_strerror(want))

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0) {
  }
}

/* Memory the ranks and the test share (zeroed). Aborts rather than
 * asserts when there is none: it comes before the first fork. */
static void *shared_zeroed(size_t bytes) {
  void *p = th_shared_alloc(bytes);
  if (!p) {
    perror("th_shared_alloc");
    abort();
  }
  return p;
}

static const char *describe(const th_procs_report *rep) {
  static char text[8192];
  return th_procs_describe(rep, text, sizeof text);
}

static void assert_run_ok(int rc, const th_procs_report *rep) {
  cr_assert_eq(rc, TH_OK, "run: %s\n%s", th_strerror(rc), describe(rep));
}

static void assert_exited(const th_procs_report *rep, int rank, int code) {
  const th_rank_outcome *o = &rep->rank[rank];
  cr_assert(o->end == TH_RANK_EXITED && o->exit_code == code,
            "rank %d: want exit %d\n%s", rank, code, describe(rep));
}

/* --- barrier -------------------------------------------------------------*/

typedef struct barrier_rounds {
  int rounds;
  _Atomic long arrivals; /* every rank adds 1 before each barrier */
} barrier_rounds;

/* After barrier i every rank has added its i+1 arrivals and none can have
 * added its i+2nd (that needs this rank at barrier i+1). */
static int run_barrier_rounds(th_rank *me, void *arg) {
  barrier_rounds *b = arg;
  long n = me->nranks;
  for (int i = 0; i < b->rounds; i++) {
    atomic_fetch_add(&b->arrivals, 1);
    int rc = th_barrier(me, GENEROUS_S);
    RANK_EXPECT_RC(me, rc, TH_OK, "barrier");
    long seen = atomic_load(&b->arrivals);
    RANK_EXPECT(me, seen >= (i + 1) * n && seen < (i + 2) * n,
                "after barrier %d: %ld arrivals of %d ranks", i, seen,
                me->nranks);
  }
  return 0;
}

Test(procs, barriers_keep_2_4_and_8_ranks_in_step) {
  const int world[] = {2, 4, 8};
  const int rounds[] = {2000, 1000, 500};
  th_procs_report rep[3];
  int rc[3];
  long arrivals[3];
  barrier_rounds *b = shared_zeroed(sizeof *b);
  for (int i = 0; i < 3; i++) {
    b->rounds = rounds[i];
    atomic_store(&b->arrivals, 0);
    rc[i] = th_procs_run(world[i], WALL_S, run_barrier_rounds, b, &rep[i]);
    arrivals[i] = atomic_load(&b->arrivals);
  }
  th_shared_free(b, sizeof *b);
  for (int i = 0; i < 3; i++) {
    assert_run_ok(rc[i], &rep[i]);
    cr_assert_eq(arrivals[i], (long)world[i] * rounds[i]);
  }
}

/* --- bcast ---------------------------------------------------------------*/

static unsigned char pattern_byte(int root, size_t j, size_t bytes) {
  return (unsigned char)(root * 131 + j * 7 + bytes);
}

/* One broadcast of bytes from root; every rank checks every byte. */
static int bcast_from(th_rank *me, unsigned char *buf, size_t bytes, int root) {
  for (size_t j = 0; j < bytes; j++)
    buf[j] = me->rank == root ? pattern_byte(root, j, bytes) : 0xEE;
  int rc = th_bcast(me, buf, bytes, root, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "bcast");
  for (size_t j = 0; j < bytes; j++) {
    RANK_EXPECT(me, buf[j] == pattern_byte(root, j, bytes),
                "bcast of %zu from %d: byte %zu is %d", bytes, root, j, buf[j]);
  }
  return 0;
}

static int bcast_every_root(th_rank *me, unsigned char *buf) {
  const size_t sizes[] = {128, TH_BCAST_MAX_BYTES, 0, 1};
  for (int s = 0; s < 4; s++) {
    for (int root = 0; root < me->nranks; root++) {
      if (bcast_from(me, buf, sizes[s], root) != 0) return 1;
    }
  }
  return 0;
}

/* Refused calls fail alike everywhere and take no part: a barrier after
 * them still pairs up. */
static int bcast_refusals(th_rank *me, unsigned char *buf) {
  int rc = th_bcast(me, buf, TH_BCAST_MAX_BYTES + 1, 0, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_TOO_BIG, "bcast over the capacity");
  rc = th_bcast(me, buf, 8, me->nranks, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_INVALID, "bcast from a root out of range");
  rc = th_bcast(me, NULL, 8, 0, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_INVALID, "bcast into NULL");
  rc = th_bcast(me, buf, 8, 0, 0.0);
  RANK_EXPECT_RC(me, rc, TH_ERR_INVALID, "bcast with no time");
  rc = th_barrier(me, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "barrier after the refusals");
  return 0;
}

static int run_bcasts(th_rank *me, void *arg) {
  unsigned char *buf = malloc(TH_BCAST_MAX_BYTES + 1);
  RANK_EXPECT(me, buf != NULL, "malloc");
  int failed = bcast_every_root(me, buf) || bcast_refusals(me, buf);
  free(buf);
  return failed;
}

Test(procs, bcast_of_128_bytes_and_the_most_from_every_root) {
  th_procs_report rep3, rep4;
  int rc3 = th_procs_run(3, WALL_S, run_bcasts, NULL, &rep3);
  int rc4 = th_procs_run(4, WALL_S, run_bcasts, NULL, &rep4);
  assert_run_ok(rc3, &rep3);
  assert_run_ok(rc4, &rep4);
}

/* --- allreduce -----------------------------------------------------------*/

#define SMALL_N 5

static int64_t small_value(int rank, int i) {
  return (int64_t)(rank + 1) * (i - 2) * 1000 + rank;
}

static int64_t small_expected(int nranks, int i, th_reduce_op op) {
  int64_t acc = small_value(0, i);
  for (int r = 1; r < nranks; r++) {
    int64_t v = small_value(r, i);
    if (op == TH_SUM) acc += v;
    if (op == TH_MIN && v < acc) acc = v;
    if (op == TH_MAX && v > acc) acc = v;
  }
  return acc;
}

static int reduce_small(th_rank *me, th_reduce_op op) {
  int64_t v[SMALL_N];
  for (int i = 0; i < SMALL_N; i++) v[i] = small_value(me->rank, i);
  int rc = th_allreduce_i64(me, v, SMALL_N, op, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "allreduce");
  for (int i = 0; i < SMALL_N; i++) {
    int64_t want = small_expected(me->nranks, i, op);
    RANK_EXPECT(me, v[i] == want, "op %d value %d: %lld, want %lld", op, i,
                (long long)v[i], (long long)want);
  }
  return 0;
}

/* The largest count; and one value per rank gathered by summing. */
static int reduce_most_and_gather(th_rank *me) {
  static int64_t v[TH_REDUCE_MAX_VALUES];
  for (int i = 0; i < TH_REDUCE_MAX_VALUES; i++) v[i] = i * 3 + me->rank;
  int rc = th_allreduce_i64(me, v, TH_REDUCE_MAX_VALUES, TH_MAX, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "allreduce of the most values");
  for (int i = 0; i < TH_REDUCE_MAX_VALUES; i++) {
    RANK_EXPECT(me, v[i] == i * 3 + me->nranks - 1, "max value %d: %lld", i,
                (long long)v[i]);
  }
  int64_t gathered[TH_PROCS_MAX_RANKS] = {0};
  gathered[me->rank] = 100 + me->rank;
  rc = th_allreduce_i64(me, gathered, me->nranks, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "gather");
  for (int r = 0; r < me->nranks; r++)
    RANK_EXPECT(me, gathered[r] == 100 + r, "gathered[%d]", r);
  return 0;
}

static int reduce_wraps_and_refusals(th_rank *me) {
  int64_t v = me->rank == 0 ? INT64_MAX : me->rank == 1 ? 1 : 0;
  int rc = th_allreduce_i64(me, &v, 1, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "allreduce that wraps");
  RANK_EXPECT(me, v == INT64_MIN, "INT64_MAX + 1 is %lld", (long long)v);
  rc = th_allreduce_i64(me, &v, TH_REDUCE_MAX_VALUES + 1, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_TOO_BIG, "allreduce over the capacity");
  rc = th_allreduce_i64(me, &v, 1, (th_reduce_op)7, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_INVALID, "allreduce with a bad op");
  rc = th_allreduce_i64(me, &v, -1, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_INVALID, "allreduce of -1 values");
  rc = th_allreduce_i64(me, NULL, 0, TH_MIN, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "allreduce of no values");
  return 0;
}

static int run_allreduces(th_rank *me, void *arg) {
  const th_reduce_op ops[] = {TH_SUM, TH_MIN, TH_MAX};
  for (int k = 0; k < 3; k++) {
    if (reduce_small(me, ops[k]) != 0) return 1;
  }
  if (reduce_most_and_gather(me) != 0) return 1;
  return reduce_wraps_and_refusals(me);
}

Test(procs, allreduce_sum_min_max) {
  th_procs_report rep;
  int rc = th_procs_run(4, WALL_S, run_allreduces, NULL, &rep);
  assert_run_ok(rc, &rep);
}

/* --- mismatched calls ----------------------------------------------------*/

static int run_mismatches(th_rank *me, void *arg) {
  unsigned char buf[16] = {0};
  int rc = th_bcast(me, buf, sizeof buf, me->rank, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_MISMATCH, "bcast from different roots");
  int64_t v = 1;
  rc = me->rank == 0 ? th_barrier(me, GENEROUS_S)
                     : th_allreduce_i64(me, &v, 1, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_MISMATCH, "barrier against allreduce");
  rc = th_allreduce_i64(me, &v, 1, me->rank == 0 ? TH_MIN : TH_MAX, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_ERR_MISMATCH, "allreduce with different ops");
  rc = th_barrier(me, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "barrier after the mismatches");
  return 0;
}

Test(procs, mismatched_calls_fail_on_every_rank_and_stay_in_step) {
  th_procs_report rep;
  int rc = th_procs_run(2, WALL_S, run_mismatches, NULL, &rep);
  assert_run_ok(rc, &rep);
}

/* --- environment ---------------------------------------------------------*/

static const char *const nccl_values[][2] = {
    {"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "Socket"},
    {"NCCL_IB_DISABLE", "1"},     {"NCCL_P2P_DISABLE", "1"},
    {"NCCL_SHM_DISABLE", "1"},    {"NCCL_NVLS_ENABLE", "0"},
    {"NCCL_MNNVL_ENABLE", "0"},
};

static int64_t fnv1a(const char *s) {
  uint64_t h = 14695981039346656037ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (int64_t)(h >> 1);
}

static int expect_env(th_rank *me, const char *name, const char *want) {
  const char *got = getenv(name);
  RANK_EXPECT(me, got && strcmp(got, want) == 0, "%s is %s, want %s", name,
              got ? got : "(unset)", want);
  return 0;
}

/* Every variable set, the host id th-<parent>-<rank>, and no two ranks
 * with the same host id (their hashes gathered by an allreduce). */
static int run_nccl_env(th_rank *me, void *arg) {
  for (size_t i = 0; i < sizeof nccl_values / sizeof nccl_values[0]; i++) {
    if (expect_env(me, nccl_values[i][0], nccl_values[i][1]) != 0) return 1;
  }
  char host_id[64];
  snprintf(host_id, sizeof host_id, "th-%ld-%d", (long)getppid(), me->rank);
  if (expect_env(me, "NCCL_HOSTID", host_id) != 0) return 1;
  int64_t hashes[TH_PROCS_MAX_RANKS] = {0};
  hashes[me->rank] = fnv1a(getenv("NCCL_HOSTID"));
  int rc = th_allreduce_i64(me, hashes, me->nranks, TH_SUM, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "gather the host id hashes");
  for (int a = 0; a < me->nranks; a++) {
    for (int b = a + 1; b < me->nranks; b++)
      RANK_EXPECT(me, hashes[a] != hashes[b], "ranks %d, %d: one host id", a,
                  b);
  }
  return 0;
}

static int run_inherited_env(th_rank *me, void *arg) {
  if (expect_env(me, "NCCL_HOSTID", "outer") != 0) return 1;
  if (expect_env(me, "NCCL_SOCKET_IFNAME", "eth9") != 0) return 1;
  RANK_EXPECT(me, getenv("NCCL_NET") == NULL, "NCCL_NET is set");
  return 0;
}

Test(procs, each_rank_gets_the_nccl_environment_with_its_own_host_id) {
  setenv("NCCL_HOSTID", "outer", 1);
  setenv("NCCL_SOCKET_IFNAME", "eth9", 1);
  unsetenv("NCCL_NET");
  th_procs_report rep_set, rep_kept;
  int rc_set = th_procs_run(4, WALL_S, run_nccl_env, NULL, &rep_set);
  th_procs_options opts = {.nranks = 3, .wall_limit_s = WALL_S};
  opts.skip_nccl_env = true;
  int rc_kept = th_procs_run_opts(&opts, run_inherited_env, NULL, &rep_kept);
  unsetenv("NCCL_HOSTID");
  unsetenv("NCCL_SOCKET_IFNAME");
  assert_run_ok(rc_set, &rep_set);
  assert_run_ok(rc_kept, &rep_kept);
}

/* --- a rank that exits early ---------------------------------------------*/

/* Rank 1 leaves with status 3; the others' barrier fails at once, naming
 * it. */
static int run_one_leaves_early(th_rank *me, void *arg) {
  if (me->rank == 1) return 3;
  double start = now_s();
  int rc = th_barrier(me, DEATH_DEADLINE_S);
  double waited = now_s() - start;
  RANK_EXPECT_RC(me, rc, TH_ERR_PEER_DIED, "barrier without rank 1");
  RANK_EXPECT(me, me->failed_peer == 1, "failed_peer %d", me->failed_peer);
  RANK_EXPECT(me, waited < DEATH_NOTICED_S, "noticed after %.3f s", waited);
  return 0;
}

Test(procs, a_rank_that_exits_early_is_reported_and_fails_its_peers) {
  th_procs_report rep;
  int rc = th_procs_run(3, WALL_S, run_one_leaves_early, NULL, &rep);
  cr_assert_eq(rc, TH_ERR_RANK_FAILED, "%s\n%s", th_strerror(rc),
               describe(&rep));
  cr_assert_eq(rep.nranks, 3);
  assert_exited(&rep, 0, 0);
  assert_exited(&rep, 1, 3);
  assert_exited(&rep, 2, 0);
  cr_assert(strstr(describe(&rep), "rank 1: exit 3 after") != NULL, "%s",
            describe(&rep));
}

/* --- kill on cue ---------------------------------------------------------*/

/* Every rank calls th_cue("mid-barrier") before each of two barriers.
 * Rank 2 passes its first cue and barrier, then waits until the others are
 * inside the second barrier and is killed at its second cue. The others'
 * barrier fails naming it, long before its deadline. */
static int run_killed_mid_barrier(th_rank *me, void *arg) {
  int rc = th_cue(me, "mid-barrier");
  RANK_EXPECT_RC(me, rc, TH_OK, "first cue");
  rc = th_barrier(me, GENEROUS_S);
  RANK_EXPECT_RC(me, rc, TH_OK, "first barrier");
  if (me->rank == 2) sleep_s(0.2);
  rc = th_cue(me, "mid-barrier");
  RANK_EXPECT(me, me->rank != 2, "rank 2 lived past its second cue");
  RANK_EXPECT_RC(me, rc, TH_OK, "second cue on a rank that is not the target");
  double start = now_s();
  rc = th_barrier(me, DEATH_DEADLINE_S);
  double waited = now_s() - start;
  RANK_EXPECT_RC(me, rc, TH_ERR_PEER_DIED, "barrier without rank 2");
  RANK_EXPECT(me, me->failed_peer == 2, "failed_peer %d", me->failed_peer);
  RANK_EXPECT(me, waited < DEATH_NOTICED_S, "noticed after %.3f s", waited);
  return 0;
}

static void assert_killed_on_cue(const th_procs_report *rep, int rank) {
  const th_rank_outcome *o = &rep->rank[rank];
  cr_assert(
      o->end == TH_RANK_SIGNALED && o->signal == SIGKILL && o->killed_on_cue,
      "rank %d: want killed on cue\n%s", rank, describe(rep));
}

Test(procs, a_rank_killed_on_cue_mid_barrier_fails_its_peers_at_once) {
  th_procs_options opts = {.nranks = 4, .wall_limit_s = WALL_S};
  opts.kill_cue = "mid-barrier";
  opts.kill_rank = 2;
  opts.kill_hit = 2;
  th_procs_report rep;
  int rc = th_procs_run_opts(&opts, run_killed_mid_barrier, NULL, &rep);
  cr_assert_eq(rc, TH_ERR_RANK_FAILED, "%s\n%s", th_strerror(rc),
               describe(&rep));
  assert_killed_on_cue(&rep, 2);
  for (int r = 0; r < 4; r++) {
    if (r != 2) assert_exited(&rep, r, 0);
  }
}

#define TRANSFER_STEPS 500
#define TRANSFER_STEP_S 0.02
#define KILL_HIT 3
#define KILL_DELAY_S 1.0

typedef struct transfer_log {
  _Atomic int failed_step[TH_PROCS_MAX_RANKS];
} transfer_log;

/* Steps of a "transfer" (a sleep) and a barrier, each after the cue
 * "transfer". Rank 1 is killed KILL_DELAY_S after its third cue, so it lives
 * on past the cue and dies mid-transfer some steps later. */
static int run_killed_mid_transfer(th_rank *me, void *arg) {
  transfer_log *log = arg;
  for (int step = 0; step < TRANSFER_STEPS; step++) {
    int rc = th_cue(me, "transfer");
    RANK_EXPECT_RC(me, rc, TH_OK, "cue");
    sleep_s(TRANSFER_STEP_S);
    double start = now_s();
    rc = th_barrier(me, DEATH_DEADLINE_S);
    double waited = now_s() - start;
    if (rc == TH_OK) continue;
    atomic_store(&log->failed_step[me->rank], step);
    RANK_EXPECT_RC(me, rc, TH_ERR_PEER_DIED, "barrier without rank 1");
    RANK_EXPECT(me, me->failed_peer == 1, "failed_peer %d", me->failed_peer);
    RANK_EXPECT(me, waited < DEATH_NOTICED_S, "noticed after %.3f s", waited);
    return 0;
  }
  fprintf(stderr, "rank %d: all %d steps done: no kill\n", me->rank,
          TRANSFER_STEPS);
  return 1;
}

Test(procs, a_rank_killed_after_a_delay_dies_mid_transfer) {
  transfer_log *log = shared_zeroed(sizeof *log);
  th_procs_options opts = {.nranks = 3, .wall_limit_s = WALL_S};
  opts.kill_cue = "transfer";
  opts.kill_rank = 1;
  opts.kill_hit = KILL_HIT;
  opts.kill_delay_s = KILL_DELAY_S;
  th_procs_report rep;
  int rc = th_procs_run_opts(&opts, run_killed_mid_transfer, log, &rep);
  int failed_step[3];
  for (int r = 0; r < 3; r++)
    failed_step[r] = atomic_load(&log->failed_step[r]);
  th_shared_free(log, sizeof *log);
  cr_assert_eq(rc, TH_ERR_RANK_FAILED, "%s\n%s", th_strerror(rc),
               describe(&rep));
  assert_killed_on_cue(&rep, 1);
  assert_exited(&rep, 0, 0);
  assert_exited(&rep, 2, 0);
  cr_assert_geq(rep.rank[1].wall_s, KILL_DELAY_S, "%s", describe(&rep));
  /* The cue came at step KILL_HIT-1; rank 1 passed that step's barrier. */
  cr_assert_geq(failed_step[0], KILL_HIT, "failed at step %d", failed_step[0]);
  cr_assert_geq(failed_step[2], KILL_HIT, "failed at step %d", failed_step[2]);
}

/* --- the wall limit ------------------------------------------------------*/

#define HANG_WALL_S 1.5

static int run_one_hangs(th_rank *me, void *arg) {
  if (me->rank != 2) return 0;
  for (;;) sleep_s(1.0);
}

Test(procs, a_rank_that_hangs_is_killed_at_the_wall_limit) {
  th_procs_report rep;
  int rc = th_procs_run(3, HANG_WALL_S, run_one_hangs, NULL, &rep);
  cr_assert_eq(rc, TH_ERR_RANK_FAILED, "%s\n%s", th_strerror(rc),
               describe(&rep));
  assert_exited(&rep, 0, 0);
  assert_exited(&rep, 1, 0);
  cr_assert_lt(rep.rank[0].wall_s, HANG_WALL_S, "%s", describe(&rep));
  cr_assert_lt(rep.rank[1].wall_s, HANG_WALL_S, "%s", describe(&rep));
  const th_rank_outcome *hung = &rep.rank[2];
  cr_assert(hung->end == TH_RANK_TIMED_OUT && hung->signal == SIGKILL &&
                !hung->killed_on_cue,
            "%s", describe(&rep));
  /* The limit counts from the run's start, a rank's time from its fork. */
  cr_assert(hung->wall_s > HANG_WALL_S - 0.5 && hung->wall_s <= rep.wall_s,
            "%s", describe(&rep));
  cr_assert(rep.wall_s >= HANG_WALL_S && rep.wall_s < HANG_WALL_S + 5.0,
            "run took %.3f s", rep.wall_s);
}

/* --- a collective timeout ------------------------------------------------*/

#define SHORT_TIMEOUT_S 0.5
#define LATE_BY_S 3.0

/* Rank 0 waits SHORT_TIMEOUT_S for rank 1, which comes LATE_BY_S late and
 * finds the group aborted by rank 0. */
static int run_late_peer(th_rank *me, void *arg) {
  if (me->rank == 1) sleep_s(LATE_BY_S);
  double start = now_s();
  int rc = th_barrier(me, me->rank == 0 ? SHORT_TIMEOUT_S : GENEROUS_S);
  double waited = now_s() - start;
  if (me->rank == 0) {
    RANK_EXPECT_RC(me, rc, TH_ERR_TIMEOUT, "barrier with a late peer");
    RANK_EXPECT(me, waited >= SHORT_TIMEOUT_S && waited < SHORT_TIMEOUT_S + 1.5,
                "timed out after %.3f s", waited);
    RANK_EXPECT(me, me->failed_peer == -1, "failed_peer %d", me->failed_peer);
  } else {
    RANK_EXPECT_RC(me, rc, TH_ERR_ABORTED, "barrier after a timeout");
    RANK_EXPECT(me, me->failed_peer == 0, "failed_peer %d", me->failed_peer);
    RANK_EXPECT(me, waited < DEATH_NOTICED_S, "aborted after %.3f s", waited);
  }
  return 0;
}

Test(procs, a_barrier_nobody_joins_times_out_at_its_deadline) {
  th_procs_report rep;
  int rc = th_procs_run(2, WALL_S, run_late_peer, NULL, &rep);
  assert_run_ok(rc, &rep);
}

/* --- arguments -----------------------------------------------------------*/

static int run_nothing(th_rank *me, void *arg) { return 0; }

Test(procs, bad_arguments_are_refused_before_any_fork) {
  th_procs_report rep;
  memset(&rep, 0xA5, sizeof rep);
  int rc[8];
  rc[0] = th_procs_run(0, WALL_S, run_nothing, NULL, &rep);
  rc[1] = th_procs_run(TH_PROCS_MAX_RANKS + 1, WALL_S, run_nothing, NULL, &rep);
  rc[2] = th_procs_run(2, WALL_S, NULL, NULL, &rep);
  rc[3] = th_procs_run(2, 0.0, run_nothing, NULL, &rep);
  rc[4] = th_procs_run(2, NAN, run_nothing, NULL, &rep);
  th_procs_options opts = {.nranks = 2, .wall_limit_s = WALL_S};
  opts.kill_cue = "x";
  opts.kill_rank = 2;
  rc[5] = th_procs_run_opts(&opts, run_nothing, NULL, &rep);
  char long_cue[TH_CUE_MAX_CHARS + 2];
  memset(long_cue, 'c', sizeof long_cue - 1);
  long_cue[sizeof long_cue - 1] = '\0';
  opts.kill_cue = long_cue;
  opts.kill_rank = 0;
  rc[6] = th_procs_run_opts(&opts, run_nothing, NULL, &rep);
  rc[7] = th_procs_run_opts(NULL, run_nothing, NULL, &rep);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(rc[i], TH_ERR_INVALID, "case %d: %s", i, th_strerror(rc[i]));
  cr_assert_eq(rep.nranks, 0);
  cr_assert_eq(th_barrier(NULL, 1.0), TH_ERR_INVALID);
  cr_assert_eq(th_bcast(NULL, NULL, 0, 0, 1.0), TH_ERR_INVALID);
  cr_assert_eq(th_allreduce_i64(NULL, NULL, 0, TH_SUM, 1.0), TH_ERR_INVALID);
  cr_assert_eq(th_cue(NULL, "x"), TH_ERR_INVALID);
}

Test(procs, one_rank_runs_and_names_are_stable) {
  th_procs_report rep;
  int rc = th_procs_run(1, WALL_S, run_barrier_rounds,
                        &(barrier_rounds){.rounds = 3}, &rep);
  assert_run_ok(rc, &rep);
  cr_assert_str_eq(th_strerror(TH_ERR_PEER_DIED), "TH_ERR_PEER_DIED");
  cr_assert_str_eq(th_strerror(12345), "unknown");
  char small[12];
  th_procs_describe(&rep, small, sizeof small);
  cr_assert_str_eq(small, "rank 0: exi");
}
