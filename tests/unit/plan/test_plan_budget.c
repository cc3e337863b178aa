/* SPDX-License-Identifier: Apache-2.0 */
/* The plan-size budget (rsi_plan_bytes, core/plan/plan_size.c): a plan too large
 * for it is refused with RS_ERR_UNSUPPORTED, a message naming the budget,
 * and at most 1.2 times the budget of peak memory growth, whether it is
 * the whole plan, a rank's part of it (RS_PARAM_PLAN_PART, which plans
 * the whole plan in process) or a domain's part (rsi_plan_create_domain,
 * what per-rank planning computes). First the all-to-all that reached the
 * limit only after 13 GiB and a minute: a tensor's rows split over 8192
 * ranks, its columns over the same ranks on the other side, 67 M moves,
 * refused from what its shards meet before any move is made. Then, with
 * the budget lowered, plans that no such count bounds, refused once they
 * reach it: what is charged while a plan is built must be what it holds.
 * Peak growth is VmHWM after planning over VmRSS before, the peak
 * restarted by /proc/self/clear_refs (Criterion runs each test in its own
 * process); the time is printed, not asserted, and so is the peak under
 * AddressSanitizer, whose quarantine keeps freed memory resident. */
#include <criterion/criterion.h>
#include <stdbool.h>

#include <reshard/reshard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/plan.h"
#include "th_util.h"

enum { RANKS = 8192 };

typedef struct all_to_all {
  rs_context *ctx;
  rs_layout *src, *dst;
} all_to_all;

/* Tensor "w" of u8 [ranks * bands, ranks]: on the source side each rank
 * holds `bands` rows, one shard each; on the destination one column;
 * domains of domain_size ranks (0: each rank its own). */
static void make_all_to_all(all_to_all *a, int ranks, int bands,
                            int domain_size) {
  const int64_t shape[2] = {(int64_t)ranks * bands, ranks};
  cr_assert_eq(rs_context_create_local(ranks, &a->ctx), RS_OK);
  if (domain_size > 0)
    cr_assert_eq(rs_context_set_domain_size(a->ctx, domain_size), RS_OK);
  cr_assert_eq(rs_layout_create(a->ctx, &a->src), RS_OK);
  cr_assert_eq(rs_layout_create(a->ctx, &a->dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(a->src, "w", RS_DTYPE_U8, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(a->dst, "w", RS_DTYPE_U8, 2, shape), RS_OK);
  for (int r = 0; r < ranks; r++) {
    for (int k = 0; k < bands; k++)
      cr_assert_eq(rs_layout_add_shard(a->src, "w", r,
                                       I64((int64_t)r * bands + k, 0),
                                       I64(1, ranks), 0, (int64_t)k * ranks,
                                       NULL),
                   RS_OK);
    cr_assert_eq(rs_layout_add_shard(a->dst, "w", r, I64(0, r),
                                     I64(shape[0], 1), 0, 0, NULL),
                 RS_OK);
  }
}

/* Rank 0 also holds element [1, 0] of rank 1's row (every rank, with
 * `all`, the first element of the next rank's first row): source groups
 * that overlap without being the same box. Only groups no other overlaps
 * bound the moves (check_tensor_size): with one such element every other
 * row still does; with every rank's, none does, and the plan is refused
 * only once it reaches the budget. */
static void add_overlap(all_to_all *a, int ranks, int bands, bool all) {
  for (int r = 0; r < (all ? ranks : 1); r++)
    cr_assert_eq(rs_layout_add_shard(
                     a->src, "w", r,
                     I64(((int64_t)r * bands + bands) % ((int64_t)ranks * bands)
                         + (all ? 0 : 1 - bands), 0),
                     I64(1, 1), 0, (int64_t)bands * ranks, NULL),
                 RS_OK);
}

static void free_all_to_all(all_to_all *a) {
  rs_layout_destroy(a->src);
  rs_layout_destroy(a->dst);
  rs_context_destroy(a->ctx);
}

/* A "Vm...:" line of /proc/self/status, KiB; -1 when unknown. */
static long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  size_t len = strlen(key);
  long v = -1;
  while (v < 0 && fgets(line, sizeof line, f))
    if (strncmp(line, key, len) == 0 && line[len] == ':')
      v = strtol(line + len + 1, NULL, 10);
  fclose(f);
  return v;
}

/* Start VmHWM again from the resident set now (Linux 4.0 on). */
static bool restart_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The budget the refusal names: "... at most N bytes in all ...". */
static long long named_budget(const char *msg) {
  const char *at = strstr(msg, "at most ");
  return at ? strtoll(at + strlen("at most "), NULL, 10) : -1;
}

typedef rs_status (*make_plan)(const all_to_all *a, rs_plan **out);

static rs_status whole_plan(const all_to_all *a, rs_plan **out) {
  return rs_plan_create(a->src, a->dst, out);
}

/* What lands in domain 0. */
static rs_status domain_part(const all_to_all *a, rs_plan **out) {
  return rsi_plan_create_domain(a->src, a->dst, 0, out);
}

/* Plan, expect the refusal for size, and hold its peak memory growth to
 * 1.2 times the budget it names. */
static void expect_refused_within_budget(const char *what, const all_to_all *a,
                                         make_plan make) {
  restart_peak(); /* where it cannot, the peak so far is no smaller */
  long rss0 = status_kib("VmRSS");
  double t0 = seconds_now();
  rs_plan *plan = NULL;
  rs_status st = make(a, &plan);
  double took = seconds_now() - t0;
  long peak = status_kib("VmHWM") - rss0;
  const char *msg = rs_context_last_error(a->ctx);
  long long budget = named_budget(msg);
  printf("%s: %s in %.2f s, peak growth %.0f MiB of a budget of %.0f MiB\n",
         what, rs_status_name(st), took, peak / 1024.0,
         budget / 1048576.0);
  fflush(stdout);
  cr_assert_eq(st, RS_ERR_UNSUPPORTED, "%s: %s: %s", what, rs_status_name(st),
               msg);
  cr_assert_null(plan);
  cr_assert(th_contains(msg, "'w'") && th_contains(msg, "moves") &&
                budget == rsi_plan_bytes,
            "%s: message: %s", what, msg);
  cr_assert(rss0 > 0 && peak >= 0, "%s: no VmRSS/VmHWM", what);
  cr_assert(TH_SANITIZED || (double)peak * 1024.0 <= 1.2 * (double)budget,
                "%s: peak growth %ld KiB, budget %lld bytes", what, peak,
                budget);
}

/* The all-to-all of RANKS (bands and domains as make_all_to_all keeps
 * them), RS_PARAM_PLAN_PART set to `part`, refused within the budget. */
static void expect_all_to_all_refused(const char *what, int bands,
                                      int domain_size, int part,
                                      make_plan make) {
  all_to_all a;
  make_all_to_all(&a, RANKS, bands, domain_size);
  cr_assert_eq(rs_context_set_param(a.ctx, RS_PARAM_PLAN_PART, part), RS_OK);
  expect_refused_within_budget(what, &a, make);
  free_all_to_all(&a);
}

/* 67 M moves, one an element: more than the budget's 43 M. */
Test(plan_budget, all_to_all_of_8192_ranks_is_refused_within_budget,
     .timeout = 300) {
  expect_all_to_all_refused("whole plan", 1, 0, -1, whole_plan);
}

/* One element of rank 1's row held by rank 0 too: every other row still
 * bounds the moves, so the plan is refused before it is built. */
Test(plan_budget, all_to_all_with_one_overlap_is_refused_before_it_is_built,
     .timeout = 300) {
  all_to_all a;
  make_all_to_all(&a, RANKS, 1, 0);
  add_overlap(&a, RANKS, 1, false);
  expect_refused_within_budget("whole plan, one overlap", &a, whole_plan);
  cr_assert(th_contains(rs_context_last_error(a.ctx), "need at least"),
            "built before it was refused: %s", rs_context_last_error(a.ctx));
  free_all_to_all(&a);
}

/* In process a rank's part is cut from the whole plan once made, so the
 * whole plan's budget refuses it the same way. */
Test(plan_budget, a_ranks_part_of_it_is_refused_within_budget,
     .timeout = 300) {
  expect_all_to_all_refused("rank 5's part", 1, 0, 5, whole_plan);
}

/* A domain's part keeps the moves into its domain only: with two domains
 * of 4096 ranks and two source bands a rank, 4096 columns meet 16384
 * bands, 67 M moves in the part (and as many in the other domain's,
 * which the part only walks). */
Test(plan_budget, a_domains_part_too_large_is_refused_within_budget,
     .timeout = 300) {
  expect_all_to_all_refused("domain 0's part", 2, RANKS / 2, -1, domain_part);
}

/* The budget lowered to 256 MiB, reached after about a million moves of
 * an all-to-all of 2048 ranks (4 M moves; 2 M into a domain of half of
 * them) whose moves no count bounds (add_overlap): what is charged while
 * the plan is built must be what it holds. */
enum { SMALL_RANKS = 2048 };
#define SMALL_BUDGET ((int64_t)256 << 20)

static void expect_built_to_the_budget(const char *what, int domain_size,
                                       make_plan make) {
  all_to_all a;
  make_all_to_all(&a, SMALL_RANKS, 1, domain_size);
  add_overlap(&a, SMALL_RANKS, 1, true);
  rsi_plan_bytes = SMALL_BUDGET;
  expect_refused_within_budget(what, &a, make);
  const char *msg = rs_context_last_error(a.ctx);
  cr_assert(!th_contains(msg, "need at least"),
            "%s: refused before it was built: %s", what, msg);
  free_all_to_all(&a);
}

Test(plan_budget, a_plan_refused_while_built_stays_within_budget,
     .timeout = 120) {
  expect_built_to_the_budget("whole plan, built", 0, whole_plan);
}

Test(plan_budget, a_domains_part_refused_while_built_stays_within_budget,
     .timeout = 120) {
  expect_built_to_the_budget("domain 0's part, built", SMALL_RANKS / 2,
                             domain_part);
}
