/* SPDX-License-Identifier: Apache-2.0 */
/* The planner's replica sets (core/plan/replica_sets.h): a set of ranks is
 * found again as the same id however many sets came between (the table
 * grows and rehashes), sets differing in one rank or in length are
 * distinct, and the replica that has sent least is the first on a tie. */
#include <criterion/criterion.h>

#include "plan/replica_sets.h"

Test(replica_sets, the_same_ranks_are_the_same_set_across_growth) {
  rsi_replica_sets s;
  rsi_replica_sets_init(&s);
  rsi_err err = {0};
  int64_t ids[1000];
  for (int i = 0; i < 1000; i++) { /* sets {i, i+1, i+2}: 1000 of them */
    int32_t r[3] = {i, i + 1, i + 2};
    cr_assert_eq(rsi_replica_sets_find(&s, r, 3, &ids[i], &err), RS_OK);
    cr_assert_eq(ids[i], i, "a new set gets the next id");
  }
  for (int i = 999; i >= 0; i--) {
    int32_t r[3] = {i, i + 1, i + 2};
    int64_t id;
    cr_assert_eq(rsi_replica_sets_find(&s, r, 3, &id, &err), RS_OK);
    cr_assert_eq(id, ids[i]);
  }
  cr_assert_eq(s.count, 1000, "finding a set again adds nothing");
  int32_t shorter[2] = {5, 6}, other[3] = {5, 6, 8};
  int64_t a, b;
  cr_assert_eq(rsi_replica_sets_find(&s, shorter, 2, &a, &err), RS_OK);
  cr_assert_eq(rsi_replica_sets_find(&s, other, 3, &b, &err), RS_OK);
  cr_expect_eq(a, 1000);
  cr_expect_eq(b, 1001);
  rsi_replica_sets_free(&s);
}

Test(replica_sets, least_sent_is_counted_per_set_and_ties_go_first) {
  rsi_replica_sets s;
  rsi_replica_sets_init(&s);
  rsi_err err = {0};
  int32_t r[4] = {7, 3, 9, 1}, q[2] = {3, 9};
  int64_t id, other;
  cr_assert_eq(rsi_replica_sets_find(&s, r, 4, &id, &err), RS_OK);
  cr_assert_eq(rsi_replica_sets_find(&s, q, 2, &other, &err), RS_OK);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, id), 0, "all tie: the first");
  rsi_replica_sets_add(&s, id, 0, 100);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, id), 1);
  rsi_replica_sets_add(&s, id, 1, 50);
  rsi_replica_sets_add(&s, id, 2, 50);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, id), 3);
  rsi_replica_sets_add(&s, id, 3, 50);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, id), 1, "tie at 50: the first");
  /* ranks 3 and 9 sent for the first set, not for this one */
  cr_expect_eq(rsi_replica_sets_least_sent(&s, other), 0);
  rsi_replica_sets_add(&s, other, 0, 1);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, other), 1);
  cr_expect_eq(rsi_replica_sets_least_sent(&s, id), 1, "the first set unmoved");
  rsi_replica_sets_free(&s);
}

/* The least-sent place against reading the whole set, over random adds to
 * sets of sizes around the powers of two (its tournament's leaves). */
Test(replica_sets, least_sent_matches_a_scan_of_the_set) {
  rsi_replica_sets s;
  rsi_replica_sets_init(&s);
  rsi_err err = {0};
  const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 100};
  enum { NSETS = sizeof sizes / sizeof *sizes };
  int64_t ids[NSETS];
  int32_t r[100];
  for (int k = 0; k < NSETS; k++) {
    for (int i = 0; i < sizes[k]; i++) r[i] = 1000 * k + i;
    cr_assert_eq(rsi_replica_sets_find(&s, r, sizes[k], &ids[k], &err), RS_OK);
  }
  int64_t sent[NSETS][100] = {{0}};
  uint64_t seed = 42;
  for (int step = 0; step < 20000; step++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((seed >> 33) % NSETS);
    int64_t at = rsi_replica_sets_least_sent(&s, ids[k]), want = 0;
    for (int i = 1; i < sizes[k]; i++)
      if (sent[k][i] < sent[k][want]) want = i;
    cr_assert_eq(at, want, "set of %d, step %d: place %lld, want %lld",
                 sizes[k], step, (long long)at, (long long)want);
    /* charge the least or, one time in four, another place; small
     * amounts, so that ties are common */
    if ((seed >> 20) % 4 == 0) at = (int64_t)((seed >> 40) % (uint64_t)sizes[k]);
    int64_t bytes = (int64_t)((seed >> 50) % 3);
    sent[k][at] += bytes;
    rsi_replica_sets_add(&s, ids[k], at, bytes);
  }
  rsi_replica_sets_free(&s);
}
