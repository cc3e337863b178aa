/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, settings (rs_context_set_param, _get_param,
 * rs_param_bounds): every parameter out of bounds both ways, unknown
 * parameters, NULL out-pointers. Each case names its malformed input and
 * asserts RS_ERR_BAD_PARAM (or RS_ERR_NULL_POINTER), a message naming the
 * value or the parameter, out-pointers cleared, and that the setting kept
 * its value. */
#include "th_bad_input.h"

#include <limits.h>
#include <stdio.h>

static rs_context *ctx; /* world 2, every setting at its default */

static void fx_setup(void) {
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
}

static void fx_teardown(void) { rs_context_destroy(ctx); }

TestSuite(settings, .init = fx_setup, .fini = fx_teardown);

#define KIB ((int64_t)1 << 10)
#define MIB ((int64_t)1 << 20)
#define STAGING RS_PARAM_STAGING_BYTES, 256 * MIB /* and its default */
#define SLICE RS_PARAM_SLICE_BYTES, 4 * MIB
#define TIMEOUT RS_PARAM_TIMEOUT_MS, 60000
#define INTEGRITY RS_PARAM_INTEGRITY, 0
#define PART RS_PARAM_PLAN_PART, -1
#define BOXES RS_PARAM_PLAN_BOXES, 1
#define THREADS RS_PARAM_COPY_THREADS, 1
#define ROUNDS RS_PARAM_ROUNDS, RS_ROUNDS_PACKED
#define PROGRESS RS_PARAM_PROGRESS_THREAD, 0

/* ------------------------------------------------- values out of bounds */

typedef struct value_case {
  const char *name;
  rs_param param;
  int64_t dflt;
  int64_t value;
  bool named;         /* the message holds the value */
  const char *f2;
} value_case;

static const value_case value_cases[] = {
    {"value_out_of_bounds", STAGING, 1000, true, NULL},
    {"value_out_of_bounds", TIMEOUT, 0, false, NULL},
    {"staging_one_below_min", STAGING, 64 * KIB - 1, true, "outside"},
    {"staging_one_above_max", STAGING, ((int64_t)1 << 40) + 1, true,
     "outside"},
    {"staging_negative", STAGING, -256 * MIB, true, "outside"},
    {"slice_one_below_min", SLICE, 4 * KIB - 1, true, "outside"},
    {"slice_one_above_max", SLICE, ((int64_t)1 << 30) + 1, true, "outside"},
    {"slice_zero", SLICE, 0, true, "outside"},
    {"timeout_zero", TIMEOUT, 0, true, "outside"},
    {"timeout_negative", TIMEOUT, -1, true, "outside"},
    {"timeout_one_above_max", TIMEOUT, 86400001, true, "outside"},
    {"integrity_two", INTEGRITY, 2, true, "outside"},
    {"integrity_negative", INTEGRITY, -1, true, "outside"},
    {"plan_part_below_whole", PART, -2, true, "outside"},
    {"plan_part_above_int32", PART, (int64_t)INT32_MAX + 1, true, "outside"},
    {"plan_boxes_two", BOXES, 2, true, "outside"},
    {"plan_boxes_negative", BOXES, -1, true, "outside"},
    {"rounds_two", ROUNDS, 2, true, "outside"},
    {"rounds_negative", ROUNDS, -1, true, "outside"},
    {"copy_threads_negative", THREADS, -1, true, "outside"},
    {"copy_threads_one_above_max", THREADS, 257, true, "outside"},
    {"progress_thread_two", PROGRESS, 2, true, "outside"},
    {"progress_thread_negative", PROGRESS, -1, true, "outside"},
    {"value_int64_min", TIMEOUT, INT64_MIN, true, "outside"},
    {"value_int64_max", STAGING, INT64_MAX, true, "outside"},
};

/* set(param, value) fails with RS_ERR_BAD_PARAM naming the value, and the
 * setting stays at its default. */
TH_TABLE_TEST(settings, values_out_of_bounds, value_cases, i) {
  const value_case *c = &value_cases[*i];
  char want[32];
  snprintf(want, sizeof want, "%lld", (long long)c->value);
  rs_status st = rs_context_set_param(ctx, c->param, c->value);
  th_expect_case(c->name, st, RS_ERR_BAD_PARAM, RS_OK, TH_MSG_CTX, ctx,
                 c->named ? want : NULL, c->f2);
  int64_t v = -7;
  cr_assert_eq(rs_context_get_param(ctx, c->param, &v), RS_OK);
  cr_assert_eq(v, c->dflt, "%s: param %d changed to %lld by a refused set",
               c->name, (int)c->param, (long long)v);
}

Test(settings, bounds_themselves_are_accepted) {
  const rs_param all[8] = {RS_PARAM_STAGING_BYTES, RS_PARAM_SLICE_BYTES,
                           RS_PARAM_COPY_THREADS, RS_PARAM_TIMEOUT_MS,
                           RS_PARAM_INTEGRITY, RS_PARAM_PLAN_PART,
                           RS_PARAM_PLAN_BOXES, RS_PARAM_ROUNDS};
  for (int i = 0; i < 8; i++) {
    int64_t lo = 0, hi = 0, v = 0;
    cr_assert_eq(rs_param_bounds(all[i], &lo, &hi), RS_OK);
    cr_assert_eq(rs_context_set_param(ctx, all[i], lo), RS_OK);
    cr_assert_eq(rs_context_get_param(ctx, all[i], &v), RS_OK);
    cr_assert_eq(v, lo);
    cr_assert_eq(rs_context_set_param(ctx, all[i], hi), RS_OK);
    cr_assert_eq(rs_context_get_param(ctx, all[i], &v), RS_OK);
    cr_assert_eq(v, hi);
  }
}

/* --------------------------------------------------- unknown parameters */

typedef struct param_case {
  const char *name;
  int param;
  const char *f1; /* besides the number */
} param_case;

/* Neighbours of the real values, zero, negative, big. */
static const param_case param_cases[] = {
    {"param_unknown", 4242, NULL},
    {"param_zero", 0, "unknown parameter"},
    {"param_just_above_progress_thread", 104, "unknown parameter"},
    {"param_just_below_timeout", 199, "unknown parameter"},
    {"param_just_above_integrity", 202, "unknown parameter"},
    {"param_just_below_plan_part", 299, "unknown parameter"},
    {"param_just_above_rounds", 303, "unknown parameter"},
    {"param_negative", -100, "unknown parameter"},
    {"param_int_max", INT_MAX, "unknown parameter"},
};

/* set, get and bounds of the parameter all fail naming it; get and bounds
 * clear their outs. */
TH_TABLE_TEST(settings, unknown_params, param_cases, i) {
  const param_case *c = &param_cases[*i];
  char want[32];
  snprintf(want, sizeof want, "%d", c->param);
  int64_t v = 5, lo = 5, hi = 5;
  rs_status st = rs_context_set_param(ctx, (rs_param)c->param, 1);
  th_expect_case(c->name, st, RS_ERR_BAD_PARAM, RS_OK, TH_MSG_CTX, ctx, c->f1,
                 want);
  st = rs_context_get_param(ctx, (rs_param)c->param, &v);
  th_expect_case(c->name, st, RS_ERR_BAD_PARAM, RS_OK, TH_MSG_CTX, ctx, c->f1,
                 want);
  cr_assert_eq(v, 0, "%s: get left its out at %lld", c->name, (long long)v);
  st = rs_param_bounds((rs_param)c->param, &lo, &hi);
  th_expect_case(c->name, st, RS_ERR_BAD_PARAM, RS_OK, TH_MSG_THREAD, NULL,
                 c->f1, want);
  cr_assert_eq(lo, 0, "%s: bounds left lo at %lld", c->name, (long long)lo);
  cr_assert_eq(hi, 0, "%s: bounds left hi at %lld", c->name, (long long)hi);
}

/* ------------------------------------------------- NULL handles and outs */

typedef enum param_call {
  P_BOUNDS_NULL_LO,   /* rs_param_bounds(RS_PARAM_TIMEOUT_MS, NULL, &hi) */
  P_BOUNDS_NULL_HI,   /* rs_param_bounds(RS_PARAM_TIMEOUT_MS, &lo, NULL) */
  P_GET_NULL_CTX,     /* rs_context_get_param(NULL, RS_PARAM_TIMEOUT_MS) */
  P_GET_UNKNOWN_PARAM /* rs_context_get_param(ctx, (rs_param)7) */
} param_call;

typedef struct call_case {
  const char *name;
  param_call call;
  rs_status want;
  th_msg_at at;
} call_case;

static const call_case call_cases[] = {
    {"bounds_null_outs", P_BOUNDS_NULL_LO, RS_ERR_NULL_POINTER,
     TH_MSG_THREAD},
    {"bounds_null_outs", P_BOUNDS_NULL_HI, RS_ERR_NULL_POINTER,
     TH_MSG_THREAD},
    {"outs_cleared.context_get_param_null_ctx", P_GET_NULL_CTX,
     RS_ERR_NULL_POINTER, TH_MSG_NONE},
    {"outs_cleared.context_get_param_unknown_param", P_GET_UNKNOWN_PARAM,
     RS_ERR_BAD_PARAM, TH_MSG_NONE},
};

/* The call fails; rs_context_get_param clears the out it was given. */
TH_TABLE_TEST(settings, null_arguments, call_cases, i) {
  const call_case *c = &call_cases[*i];
  int64_t lo = 5, hi = 5, v = 5;
  rs_status st = RS_OK;
  switch (c->call) {
  case P_BOUNDS_NULL_LO:
    st = rs_param_bounds(RS_PARAM_TIMEOUT_MS, NULL, &hi);
    break;
  case P_BOUNDS_NULL_HI:
    st = rs_param_bounds(RS_PARAM_TIMEOUT_MS, &lo, NULL);
    break;
  case P_GET_NULL_CTX:
    st = rs_context_get_param(NULL, RS_PARAM_TIMEOUT_MS, &v);
    break;
  case P_GET_UNKNOWN_PARAM:
    st = rs_context_get_param(ctx, (rs_param)7, &v);
    break;
  }
  th_expect_case(c->name, st, c->want, RS_OK, c->at, ctx, NULL, NULL);
  if (c->call == P_GET_NULL_CTX || c->call == P_GET_UNKNOWN_PARAM)
    cr_assert_eq(v, 0, "%s: out left at %lld", c->name, (long long)v);
}
