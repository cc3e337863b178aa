/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, lifetimes: layouts and plans used after the
 * context they were made from was destroyed. The API keeps a context alive
 * while a layout or plan made from it exists, so this is not an error to
 * detect: everything made from it must go on working (plans execute, query,
 * refuse bad binds with their status; layouts build, plan and round-trip;
 * all 24 destroy orders are clean under ASan and valgrind). These are
 * scenarios, not a table of malformed inputs. (Messages of later failures
 * are recorded on that context, which the caller no longer may name, so
 * these Tests assert the status alone.) */
#include "th_bad_input.h"

#include <string.h>

#define BT TH_BAD_T

static void execute_and_check(rs_plan *plan, unsigned seed) {
  unsigned char s0[8 * ROWB], d1[4 * ROWB], d2[4 * ROWB];
  th_fill_source(s0, sizeof s0, seed);
  memset(d1, TH_POISON, sizeof d1);
  memset(d2, TH_POISON, sizeof d2);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, s0, sizeof s0), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, d1, sizeof d1), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 3, d2, sizeof d2), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK);
  th_expect_delivered(s0, d1, d2);
}

Test(after_context_destroy, plan_executes) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  th_bad_build(ctx, &s, &d, &plan);
  rs_context_destroy(ctx);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  execute_and_check(plan, 11);
  execute_and_check(plan, 12); /* and again, after the source changed */
  rs_plan_destroy(plan);
}

/* A plan reads its layouts' shards while it is made, and keeps its own
 * copy: layouts that grow afterwards (their arrays move) change nothing
 * in it, for the whole plan and for a rank's part. */
static void grow_layouts(rs_layout *s, rs_layout *d) {
  cr_assert_eq(rs_layout_add_tensor(s, "later", RS_DTYPE_F32, 2, I64(512, 4)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "later", RS_DTYPE_F32, 2, I64(512, 4)),
               RS_OK);
  for (int64_t row = 0; row < 512; row++) {
    cr_assert_eq(rs_layout_add_shard(s, "later", 0, I64(row, 0), I64(1, 4), 1,
                                     row * 16, NULL), RS_OK);
    cr_assert_eq(rs_layout_add_shard(d, "later", 3, I64(row, 0), I64(1, 4), 1,
                                     row * 16, NULL), RS_OK);
  }
}

Test(after_context_destroy, plan_unchanged_by_layouts_that_grow) {
  for (int part = -1; part <= 0; part++) {
    rs_context *ctx = NULL;
    rs_layout *s = NULL, *d = NULL;
    rs_plan *plan = NULL, *again = NULL;
    cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
    cr_assert_eq(rs_context_set_param(ctx, RS_PARAM_PLAN_PART, part), RS_OK);
    th_bad_build(ctx, &s, &d, &plan);
    uint64_t before = 0, after = 0;
    cr_assert_eq(rs_plan_fingerprint(plan, &before), RS_OK);
    grow_layouts(s, d);
    cr_assert_eq(rs_plan_fingerprint(plan, &after), RS_OK);
    cr_expect_eq(after, before);
    if (part < 0) execute_and_check(plan, 13);
    /* the grown layouts plan anew, and their plan is another */
    cr_assert_eq(rs_plan_create(s, d, &again), RS_OK, "%s",
                 rs_context_last_error(ctx));
    cr_assert_eq(rs_plan_fingerprint(again, &after), RS_OK);
    cr_expect_neq(after, before);
    rs_plan_destroy(again);
    rs_layout_destroy(s);
    rs_layout_destroy(d);
    if (part < 0) execute_and_check(plan, 14);
    rs_plan_destroy(plan);
    rs_context_destroy(ctx);
  }
}

Test(after_context_destroy, plan_queries_answer) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  th_bad_build(ctx, &s, &d, &plan);
  uint64_t fp_before = 0, fp_after = 0;
  cr_assert_eq(rs_plan_fingerprint(plan, &fp_before), RS_OK);
  rs_context_destroy(ctx);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  int64_t v = -1;
  cr_assert_eq(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_MOVES, &v), RS_OK);
  cr_assert_gt(v, 0);
  cr_assert_eq(rs_plan_fingerprint(plan, &fp_after), RS_OK);
  cr_assert_eq(fp_after, fp_before);
  char *json = NULL;
  cr_assert_eq(rs_plan_to_json(plan, &json, NULL), RS_OK);
  cr_assert(th_contains(json, BT));
  rs_free(json);
  const char *name = NULL;
  cr_assert_eq(rs_plan_tensor_info(plan, 0, &name, NULL), RS_OK);
  cr_assert_str_eq(name, BT);
  rs_plan_destroy(plan);
}

Test(after_context_destroy, plan_refuses_a_bad_bind_with_its_status) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  th_bad_build(ctx, &s, &d, &plan);
  rs_context_destroy(ctx);
  unsigned char d1[4 * ROWB];
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 9, d1, sizeof d1),
               RS_ERR_UNKNOWN_BUFFER);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, d1, 10),
               RS_ERR_BUFFER_TOO_SMALL);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 7, 3, d1, sizeof d1),
               RS_ERR_UNKNOWN_RANK);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
}

Test(after_context_destroy, plan_refuses_to_run_unbound) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  th_bad_build(ctx, &s, &d, &plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
  unsigned char d1[4 * ROWB];
  memset(d1, TH_POISON, sizeof d1);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, d1, sizeof d1), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_ERR_UNKNOWN_BUFFER);
  th_expect_poisoned(d1, sizeof d1, "rank 1");
  rs_plan_destroy(plan);
}

Test(after_context_destroy, layouts_still_build_and_plan) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  rs_context_destroy(ctx);
  cr_assert_eq(rs_layout_add_tensor(s, BT, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, BT, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, BT, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_ERR_DUPLICATE_NAME);
  cr_assert_eq(rs_layout_add_shard(s, BT, 0, I64(0, 0), I64(8, 6), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 1, I64(0, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 2, I64(4, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 4, I64(4, 0), I64(4, 6), 3, 0, NULL),
               RS_ERR_UNKNOWN_RANK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  execute_and_check(plan, 21);
  rs_plan_destroy(plan);
}

Test(after_context_destroy, layout_bytes_round_trip) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL, *copy = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  th_bad_build(ctx, &s, &d, &plan);
  cr_assert_eq(rs_layout_create(ctx, &copy), RS_OK);
  rs_context_destroy(ctx);
  void *bytes = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(s, &bytes, &len), RS_OK);
  cr_assert_eq(rs_layout_deserialize(copy, bytes, len / 2), RS_ERR_CORRUPT);
  cr_assert_eq(rs_layout_deserialize(copy, bytes, len), RS_OK);
  int64_t n = 0;
  cr_assert_eq(rs_layout_num_shards(copy, &n), RS_OK);
  cr_assert_eq(n, 1);
  rs_free(bytes);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_layout_destroy(copy);
}

Test(after_context_destroy, every_destroy_order) {
  /* all 24 orders of destroying context, two layouts and a plan; ASan and
   * valgrind runs of this Test catch a use after free or a leak */
  static const int perm[24][4] = {
      {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2},
      {0, 3, 2, 1}, {1, 0, 2, 3}, {1, 0, 3, 2}, {1, 2, 0, 3}, {1, 2, 3, 0},
      {1, 3, 0, 2}, {1, 3, 2, 0}, {2, 0, 1, 3}, {2, 0, 3, 1}, {2, 1, 0, 3},
      {2, 1, 3, 0}, {2, 3, 0, 1}, {2, 3, 1, 0}, {3, 0, 1, 2}, {3, 0, 2, 1},
      {3, 1, 0, 2}, {3, 1, 2, 0}, {3, 2, 0, 1}, {3, 2, 1, 0}};
  for (int i = 0; i < 24; i++) {
    rs_context *ctx = NULL;
    rs_layout *s = NULL, *d = NULL;
    rs_plan *plan = NULL;
    cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
    th_bad_build(ctx, &s, &d, &plan);
    for (int k = 0; k < 4; k++) {
      switch (perm[i][k]) {
        case 0: rs_context_destroy(ctx); break;
        case 1: rs_layout_destroy(s); break;
        case 2: rs_layout_destroy(d); break;
        case 3:
          if (k < 3) execute_and_check(plan, (unsigned)i);
          rs_plan_destroy(plan);
          break;
      }
    }
  }
}

Test(after_context_destroy, layouts_of_a_destroyed_and_a_live_context) {
  rs_context *gone = NULL, *live = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = (rs_plan *)SENTINEL;
  cr_assert_eq(rs_context_create_local(4, &gone), RS_OK);
  cr_assert_eq(rs_context_create_local(4, &live), RS_OK);
  cr_assert_eq(rs_layout_create(gone, &s), RS_OK);
  cr_assert_eq(rs_layout_create(live, &d), RS_OK);
  rs_context_destroy(gone);
  cr_assert_eq(rs_layout_add_tensor(s, BT, RS_DTYPE_F32, 1, I64(4)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, BT, RS_DTYPE_F32, 1, I64(4)), RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, BT, 0, I64(0), I64(4), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 1, I64(0), I64(4), 0, 0, NULL),
               RS_OK);
  /* the message goes to the source layout's (destroyed) context; the
   * status is what the caller can see */
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_ERR_WRONG_CONTEXT);
  cr_assert_null(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(live);
}
