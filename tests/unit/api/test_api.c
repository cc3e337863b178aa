/* SPDX-License-Identifier: Apache-2.0 */
/* The public API's housekeeping: versions, status text, dtypes, params,
 * domains, destroy(NULL), handle lifetimes, last-error text. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "th_util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- version */

Test(version, macros_match_runtime) {
  cr_assert_eq(rs_version_major(), RS_VERSION_MAJOR);
  cr_assert_eq(rs_version_minor(), RS_VERSION_MINOR);
  cr_assert_eq(rs_version_patch(), RS_VERSION_PATCH);
  cr_assert_eq(rs_version_number(), (unsigned)RS_VERSION_NUMBER);
}

Test(version, number_encoding) {
  cr_assert_eq(RS_VERSION_NUMBER, RS_VERSION_MAJOR * 10000 +
                                      RS_VERSION_MINOR * 100 +
                                      RS_VERSION_PATCH);
  cr_assert_eq(RS_VERSION_NUMBER, 600, "0.6.0 encodes as 600");
  cr_assert_eq(rs_version_number(), rs_version_major() * 10000 +
                                        rs_version_minor() * 100 +
                                        rs_version_patch());
}

Test(version, string) {
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", RS_VERSION_MAJOR, RS_VERSION_MINOR,
           RS_VERSION_PATCH);
  cr_assert_not_null(rs_version_string());
  cr_assert_str_eq(rs_version_string(), want);
  cr_assert_eq(rs_version_string(), rs_version_string(), "static storage");
}

/* ----------------------------------------------------------------- status */

static const struct {
  rs_status st;
  const char *name;
} all_status[] = {
    {RS_OK, "RS_OK"},
    {RS_ERR_INVALID_ARGUMENT, "RS_ERR_INVALID_ARGUMENT"},
    {RS_ERR_NULL_POINTER, "RS_ERR_NULL_POINTER"},
    {RS_ERR_BAD_SHAPE, "RS_ERR_BAD_SHAPE"},
    {RS_ERR_TOO_MANY_DIMS, "RS_ERR_TOO_MANY_DIMS"},
    {RS_ERR_OUT_OF_BOUNDS, "RS_ERR_OUT_OF_BOUNDS"},
    {RS_ERR_OVERFLOW, "RS_ERR_OVERFLOW"},
    {RS_ERR_OVERLAP, "RS_ERR_OVERLAP"},
    {RS_ERR_DUPLICATE_NAME, "RS_ERR_DUPLICATE_NAME"},
    {RS_ERR_UNKNOWN_TENSOR, "RS_ERR_UNKNOWN_TENSOR"},
    {RS_ERR_UNKNOWN_RANK, "RS_ERR_UNKNOWN_RANK"},
    {RS_ERR_UNKNOWN_BUFFER, "RS_ERR_UNKNOWN_BUFFER"},
    {RS_ERR_BUFFER_TOO_SMALL, "RS_ERR_BUFFER_TOO_SMALL"},
    {RS_ERR_BAD_PARAM, "RS_ERR_BAD_PARAM"},
    {RS_ERR_WRONG_CONTEXT, "RS_ERR_WRONG_CONTEXT"},
    {RS_ERR_WRONG_MEMORY, "RS_ERR_WRONG_MEMORY"},
    {RS_ERR_INCOMPATIBLE, "RS_ERR_INCOMPATIBLE"},
    {RS_ERR_NOT_COVERED, "RS_ERR_NOT_COVERED"},
    {RS_ERR_UNSUPPORTED, "RS_ERR_UNSUPPORTED"},
    {RS_ERR_NO_MEMORY, "RS_ERR_NO_MEMORY"},
    {RS_ERR_TRANSPORT, "RS_ERR_TRANSPORT"},
    {RS_ERR_TIMEOUT, "RS_ERR_TIMEOUT"},
    {RS_ERR_MISMATCH, "RS_ERR_MISMATCH"},
    {RS_ERR_CORRUPT, "RS_ERR_CORRUPT"},
    {RS_ERR_INTERNAL, "RS_ERR_INTERNAL"},
};
#define N_STATUS (sizeof all_status / sizeof all_status[0])

Test(status, pinned_values) {
  cr_assert_eq(RS_OK, 0);
  cr_assert_eq(RS_ERR_INVALID_ARGUMENT, 100);
  cr_assert_eq(RS_ERR_WRONG_CONTEXT, 113);
  cr_assert_eq(RS_ERR_WRONG_MEMORY, 114);
  cr_assert_eq(RS_ERR_INCOMPATIBLE, 200);
  cr_assert_eq(RS_ERR_NOT_COVERED, 201);
  cr_assert_eq(RS_ERR_UNSUPPORTED, 300);
  cr_assert_eq(RS_ERR_NO_MEMORY, 400);
  cr_assert_eq(RS_ERR_TRANSPORT, 500);
  cr_assert_eq(RS_ERR_CORRUPT, 503);
  cr_assert_eq(RS_ERR_INTERNAL, 900);
}

Test(status, every_value_has_name_and_text) {
  for (size_t i = 0; i < N_STATUS; i++) {
    const char *s = rs_status_string(all_status[i].st);
    const char *n = rs_status_name(all_status[i].st);
    cr_assert_not_null(s, "status %d", (int)all_status[i].st);
    cr_assert_not_null(n, "status %d", (int)all_status[i].st);
    cr_assert_str_eq(n, all_status[i].name);
    cr_assert_gt(strlen(s), 0, "status %s has empty text", n);
    cr_assert_str_neq(s, "unknown status", "%s has no text of its own", n);
  }
}

Test(status, garbage_values) {
  const int garbage[] = {-1, 1, 99, 115, 150, 199, 202, 299, 301, 401, 504,
                         899, 901, 1000, 65536, -2147483647 - 1, 2147483647};
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
    rs_status st = (rs_status)garbage[i];
    const char *s = rs_status_string(st), *n = rs_status_name(st);
    cr_assert_not_null(s, "%d", garbage[i]);
    cr_assert_not_null(n, "%d", garbage[i]);
    cr_assert_str_eq(s, "unknown status", "%d gives '%s'", garbage[i], s);
    cr_assert_gt(strlen(n), 0, "%d", garbage[i]);
  }
}

/* ------------------------------------------------------------------ dtype */

Test(dtype, sizes_and_names) {
  static const struct {
    rs_dtype dt;
    size_t size;
    const char *name;
  } t[] = {
      {RS_DTYPE_U8, 1, NULL},   {RS_DTYPE_I8, 1, NULL},
      {RS_DTYPE_U16, 2, NULL},  {RS_DTYPE_I16, 2, NULL},
      {RS_DTYPE_U32, 4, NULL},  {RS_DTYPE_I32, 4, NULL},
      {RS_DTYPE_U64, 8, NULL},  {RS_DTYPE_I64, 8, NULL},
      {RS_DTYPE_F16, 2, NULL},  {RS_DTYPE_BF16, 2, "bf16"},
      {RS_DTYPE_F32, 4, NULL},  {RS_DTYPE_F64, 8, NULL},
      {RS_DTYPE_F8_E4M3, 1, NULL}, {RS_DTYPE_F8_E5M2, 1, NULL},
      {RS_DTYPE_BOOL, 1, NULL},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    cr_assert_eq(rs_dtype_size(t[i].dt), t[i].size, "dtype %d",
                 (int)t[i].dt);
    const char *n = rs_dtype_name(t[i].dt);
    cr_assert_not_null(n);
    cr_assert_str_neq(n, "unknown", "dtype %d", (int)t[i].dt);
    if (t[i].name) cr_assert_str_eq(n, t[i].name);
    for (const char *p = n; *p; p++)
      cr_assert(!(*p >= 'A' && *p <= 'Z'), "name '%s' not lower-case", n);
  }
  /* names tell dtypes apart */
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    for (size_t j = i + 1; j < sizeof t / sizeof t[0]; j++)
      cr_assert_str_neq(rs_dtype_name(t[i].dt), rs_dtype_name(t[j].dt),
                        "dtypes %d and %d share a name", (int)t[i].dt,
                        (int)t[j].dt);
}

Test(dtype, unknown) {
  const int bad[] = {0, -1, 16, 100, 12345};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(rs_dtype_size((rs_dtype)bad[i]), 0, "dtype %d", bad[i]);
    cr_assert_not_null(rs_dtype_name((rs_dtype)bad[i]));
    cr_assert_str_eq(rs_dtype_name((rs_dtype)bad[i]), "unknown");
  }
}

/* ---------------------------------------------------------------- context */

Test(context, basic_queries) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(5, &ctx), RS_OK);
  cr_assert_not_null(ctx);
  int w = 0, r = 0;
  rs_transport_kind k = 0;
  cr_assert_eq(rs_context_world_size(ctx, &w), RS_OK);
  cr_assert_eq(w, 5);
  cr_assert_eq(rs_context_rank(ctx, &r), RS_OK);
  cr_assert_eq(r, RS_ALL_RANKS);
  cr_assert_eq(rs_context_transport(ctx, &k), RS_OK);
  cr_assert_eq(k, RS_TRANSPORT_LOCAL);
  cr_assert_str_eq(rs_context_last_error(ctx), "", "no failure yet");
  rs_context_destroy(ctx);
}

Test(context, world_of_one) {
  rs_context *ctx = NULL;
  int w = 0;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_context_world_size(ctx, &w), RS_OK);
  cr_assert_eq(w, 1);
  rs_context_destroy(ctx);
}

/* ----------------------------------------------------------------- params */

Test(params, defaults) {
  rs_context *ctx = NULL;
  int64_t v = 0;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_STAGING_BYTES, &v), RS_OK);
  cr_assert_eq(v, 256LL << 20);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_SLICE_BYTES, &v), RS_OK);
  cr_assert_eq(v, 4LL << 20);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_TIMEOUT_MS, &v), RS_OK);
  cr_assert_eq(v, 60000);
  rs_context_destroy(ctx);
}

Test(params, bounds) {
  int64_t lo = 0, hi = 0;
  cr_assert_eq(rs_param_bounds(RS_PARAM_STAGING_BYTES, &lo, &hi), RS_OK);
  cr_assert_eq(lo, 64LL << 10);
  cr_assert_eq(hi, 1LL << 40);
  cr_assert_eq(rs_param_bounds(RS_PARAM_SLICE_BYTES, &lo, &hi), RS_OK);
  cr_assert_eq(lo, 4LL << 10);
  cr_assert_eq(hi, 1LL << 30);
  cr_assert_eq(rs_param_bounds(RS_PARAM_TIMEOUT_MS, &lo, &hi), RS_OK);
  cr_assert_eq(lo, 1);
  cr_assert_eq(hi, 86400000);
}

Test(params, set_within_bounds_and_at_edges) {
  const rs_param ps[] = {RS_PARAM_STAGING_BYTES, RS_PARAM_SLICE_BYTES,
                         RS_PARAM_TIMEOUT_MS};
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  for (int i = 0; i < 3; i++) {
    int64_t lo, hi, v = 0;
    cr_assert_eq(rs_param_bounds(ps[i], &lo, &hi), RS_OK);
    const int64_t vals[3] = {lo, hi, lo + (hi - lo) / 3};
    for (int j = 0; j < 3; j++) {
      cr_assert_eq(rs_context_set_param(ctx, ps[i], vals[j]), RS_OK,
                   "param %d value %lld: %s", (int)ps[i], (long long)vals[j],
                   rs_context_last_error(ctx));
      cr_assert_eq(rs_context_get_param(ctx, ps[i], &v), RS_OK);
      cr_assert_eq(v, vals[j]);
    }
  }
  rs_context_destroy(ctx);
}

Test(params, out_of_bounds_is_rejected_and_unchanged) {
  const rs_param ps[] = {RS_PARAM_STAGING_BYTES, RS_PARAM_SLICE_BYTES,
                         RS_PARAM_TIMEOUT_MS};
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  for (int i = 0; i < 3; i++) {
    int64_t lo, hi, before = 0, after = 0;
    cr_assert_eq(rs_param_bounds(ps[i], &lo, &hi), RS_OK);
    cr_assert_eq(rs_context_get_param(ctx, ps[i], &before), RS_OK);
    const int64_t bad[4] = {lo - 1, hi + 1, -1, INT64_MIN};
    for (int j = 0; j < 4; j++) {
      cr_assert_eq(rs_context_set_param(ctx, ps[i], bad[j]),
                   RS_ERR_BAD_PARAM, "param %d value %lld", (int)ps[i],
                   (long long)bad[j]);
      cr_assert_gt(strlen(rs_context_last_error(ctx)), 0);
      cr_assert_eq(rs_context_get_param(ctx, ps[i], &after), RS_OK);
      cr_assert_eq(after, before, "param %d changed by a rejected set",
                   (int)ps[i]);
    }
  }
  rs_context_destroy(ctx);
}

Test(params, unknown_param) {
  rs_context *ctx = NULL;
  int64_t v = 77, lo = 77, hi = 77;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_param(ctx, (rs_param)0, 1), RS_ERR_BAD_PARAM);
  cr_assert_eq(rs_context_set_param(ctx, (rs_param)103, 4096),
               RS_ERR_BAD_PARAM);
  cr_assert_eq(rs_context_get_param(ctx, (rs_param)999, &v),
               RS_ERR_BAD_PARAM);
  cr_assert_eq(v, 0, "out-parameter zeroed on failure");
  cr_assert_eq(rs_param_bounds((rs_param)999, &lo, &hi), RS_ERR_BAD_PARAM);
  cr_assert_eq(lo, 0);
  cr_assert_eq(hi, 0);
  rs_context_destroy(ctx);
}

Test(params, contexts_are_independent) {
  rs_context *a = NULL, *b = NULL;
  int64_t v = 0;
  cr_assert_eq(rs_context_create_local(1, &a), RS_OK);
  cr_assert_eq(rs_context_create_local(1, &b), RS_OK);
  cr_assert_eq(rs_context_set_param(a, RS_PARAM_TIMEOUT_MS, 5), RS_OK);
  cr_assert_eq(rs_context_get_param(b, RS_PARAM_TIMEOUT_MS, &v), RS_OK);
  cr_assert_eq(v, 60000);
  rs_context_destroy(a);
  rs_context_destroy(b);
}

/* ---------------------------------------------------------------- domains */

Test(domains, default_rank_is_own_domain) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(7, &ctx), RS_OK);
  for (int r = 0; r < 7; r++) {
    int d = -1;
    cr_assert_eq(rs_context_get_domain(ctx, r, &d), RS_OK);
    cr_assert_eq(d, r);
  }
  rs_context_destroy(ctx);
}

Test(domains, set_domain) {
  rs_context *ctx = NULL;
  int d = -1;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain(ctx, 2, 0), RS_OK);
  cr_assert_eq(rs_context_set_domain(ctx, 3, 1000000), RS_OK);
  cr_assert_eq(rs_context_get_domain(ctx, 2, &d), RS_OK);
  cr_assert_eq(d, 0);
  cr_assert_eq(rs_context_get_domain(ctx, 3, &d), RS_OK);
  cr_assert_eq(d, 1000000);
  cr_assert_eq(rs_context_get_domain(ctx, 1, &d), RS_OK);
  cr_assert_eq(d, 1, "other ranks keep theirs");
  rs_context_destroy(ctx);
}

Test(domains, set_domain_size) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(10, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain_size(ctx, 4), RS_OK);
  for (int r = 0; r < 10; r++) {
    int d = -1;
    cr_assert_eq(rs_context_get_domain(ctx, r, &d), RS_OK);
    cr_assert_eq(d, r / 4, "rank %d", r);
  }
  cr_assert_eq(rs_context_set_domain_size(ctx, 1), RS_OK);
  for (int r = 0; r < 10; r++) {
    int d = -1;
    cr_assert_eq(rs_context_get_domain(ctx, r, &d), RS_OK);
    cr_assert_eq(d, r);
  }
  cr_assert_eq(rs_context_set_domain_size(ctx, 100), RS_OK);
  for (int r = 0; r < 10; r++) {
    int d = -1;
    cr_assert_eq(rs_context_get_domain(ctx, r, &d), RS_OK);
    cr_assert_eq(d, 0);
  }
  rs_context_destroy(ctx);
}

Test(domains, bad_input) {
  rs_context *ctx = NULL;
  int d = 55;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain(ctx, 3, 0), RS_ERR_UNKNOWN_RANK);
  cr_assert_eq(rs_context_set_domain(ctx, -1, 0), RS_ERR_UNKNOWN_RANK);
  cr_assert_eq(rs_context_set_domain(ctx, 0, -1), RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_context_get_domain(ctx, 0, &d), RS_OK);
  cr_assert_eq(d, 0, "failed set_domain changed the domain");
  d = 55;
  cr_assert_eq(rs_context_get_domain(ctx, 7, &d), RS_ERR_UNKNOWN_RANK);
  cr_assert_eq(d, 0, "out-parameter zeroed on failure");
  cr_assert_eq(rs_context_set_domain_size(ctx, 0), RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_context_set_domain_size(ctx, -3), RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_context_get_domain(ctx, 2, &d), RS_OK);
  cr_assert_eq(d, 2, "failed set_domain_size changed domains");
  rs_context_destroy(ctx);
}

/* ---------------------------------------------------------------- destroy */

Test(destroy, null_is_a_no_op) {
  rs_context_destroy(NULL);
  rs_layout_destroy(NULL);
  rs_plan_destroy(NULL);
  rs_free(NULL);
}

/* A simple 1-D plan: src rank 0 holds [0,n), dst rank 1 holds [0,n). */
static void build_pair(rs_context *ctx, rs_layout **src, rs_layout **dst,
                       int64_t n) {
  int64_t off = 0;
  cr_assert_eq(rs_layout_create(ctx, src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*src, "t", RS_DTYPE_I32, 1, &n), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*dst, "t", RS_DTYPE_I32, 1, &n), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*src, "t", 0, &off, &n, 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(*dst, "t", 1, &off, &n, 0, 0, NULL),
               RS_OK);
}

static void run_and_check(rs_plan *plan, int64_t n) {
  int32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    a[i] = (int32_t)(i * 7 + 1);
    b[i] = -1;
  }
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, a, (size_t)n * 4),
               RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, b, (size_t)n * 4),
               RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(b[i], (int32_t)(i * 7 + 1));
  free(a);
  free(b);
}

Test(lifetime, context_destroyed_before_plan_create) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  build_pair(ctx, &src, &dst, 100);
  rs_context_destroy(ctx); /* layouts keep it alive */
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  cr_assert_not_null(plan);
  run_and_check(plan, 100);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
}

Test(lifetime, layouts_destroyed_before_execute) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  build_pair(ctx, &src, &dst, 33);
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  run_and_check(plan, 33); /* the plan alone is enough */
  rs_plan_destroy(plan);
}

Test(lifetime, plan_destroyed_first) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  build_pair(ctx, &src, &dst, 8);
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  rs_plan_destroy(plan);
  /* still usable: another plan from the same layouts */
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  run_and_check(plan, 8);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
}

Test(lifetime, layout_counts) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  int nt = -1;
  int64_t ns = -1;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  build_pair(ctx, &src, &dst, 8);
  cr_assert_eq(rs_layout_num_tensors(src, &nt), RS_OK);
  cr_assert_eq(nt, 1);
  cr_assert_eq(rs_layout_num_shards(src, &ns), RS_OK);
  cr_assert_eq(ns, 1);
  rs_layout *empty = NULL;
  cr_assert_eq(rs_layout_create(ctx, &empty), RS_OK);
  cr_assert_eq(rs_layout_num_tensors(empty, &nt), RS_OK);
  cr_assert_eq(nt, 0);
  cr_assert_eq(rs_layout_num_shards(empty, &ns), RS_OK);
  cr_assert_eq(ns, 0);
  rs_layout_destroy(empty);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

/* -------------------------------------------------------------- last error */

Test(last_error, never_null) {
  cr_assert_not_null(rs_last_error());
  cr_assert_not_null(rs_context_last_error(NULL));
}

Test(last_error, thread_fallback_after_failed_create) {
  rs_context *ctx = (rs_context *)0x1;
  cr_assert_eq(rs_context_create_local(-7, &ctx), RS_ERR_INVALID_ARGUMENT);
  cr_assert_null(ctx, "out-pointer set to NULL on failure");
  const char *m = rs_last_error();
  cr_assert_not_null(m);
  cr_assert_gt(strlen(m), 0);
  cr_assert(th_contains(m, "-7"), "message '%s' lacks the value -7", m);
  /* a NULL context reads the per-thread text */
  cr_assert_str_eq(rs_context_last_error(NULL), m);
}

Test(last_error, thread_fallback_after_null_handle) {
  int w = 3;
  cr_assert_eq(rs_context_world_size(NULL, &w), RS_ERR_NULL_POINTER);
  cr_assert_gt(strlen(rs_last_error()), 0);
}

Test(last_error, context_message_names_the_problem) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  const int64_t shape[2] = {4, 4};
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_str_eq(rs_context_last_error(ctx), "");
  cr_assert_eq(rs_layout_add_tensor(l, "layers.3.mlp.w", RS_DTYPE_F32, 2,
                                    shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "layers.3.mlp.w", RS_DTYPE_F32, 2,
                                    shape), RS_ERR_DUPLICATE_NAME);
  const char *m = rs_context_last_error(ctx);
  cr_assert_not_null(m);
  cr_assert(th_contains(m, "layers.3.mlp.w"), "message '%s'", m);
  /* a later failure replaces it */
  cr_assert_eq(rs_layout_add_tensor(l, "other", RS_DTYPE_F32, 2,
                                    (const int64_t[]){4, -9}),
               RS_ERR_BAD_SHAPE);
  m = rs_context_last_error(ctx);
  cr_assert(th_contains(m, "-9"), "message '%s' lacks the size -9", m);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

Test(last_error, contexts_keep_their_own) {
  rs_context *a = NULL, *b = NULL;
  cr_assert_eq(rs_context_create_local(2, &a), RS_OK);
  cr_assert_eq(rs_context_create_local(2, &b), RS_OK);
  cr_assert_eq(rs_context_set_domain(a, 9, 0), RS_ERR_UNKNOWN_RANK);
  cr_assert(th_contains(rs_context_last_error(a), "9"), "'%s'",
            rs_context_last_error(a));
  cr_assert_str_eq(rs_context_last_error(b), "", "b saw a's failure: '%s'",
                   rs_context_last_error(b));
  rs_context_destroy(a);
  rs_context_destroy(b);
}

Test(last_error, survives_later_successes) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain(ctx, 0, -77), RS_ERR_INVALID_ARGUMENT);
  char copy[512];
  snprintf(copy, sizeof copy, "%s", rs_context_last_error(ctx));
  cr_assert(th_contains(copy, "-77"), "'%s'", copy);
  int w = 0;
  cr_assert_eq(rs_context_world_size(ctx, &w), RS_OK);
  cr_assert_eq(rs_context_set_domain(ctx, 0, 1), RS_OK);
  cr_assert_str_eq(rs_context_last_error(ctx), copy,
                   "a successful call changed the last error");
  rs_context_destroy(ctx);
}

Test(last_error, very_long_name_is_safe) {
  /* a 20000-byte name in a failure message: truncated or not, no crash
   * and still NUL-terminated */
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  char *name = malloc(20001);
  memset(name, 'x', 20000);
  name[20000] = 0;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, name, RS_DTYPE_F32, 1,
                                    (const int64_t[]){3}), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, name, RS_DTYPE_F32, 1,
                                    (const int64_t[]){3}),
               RS_ERR_DUPLICATE_NAME);
  const char *m = rs_context_last_error(ctx);
  cr_assert_gt(strlen(m), 0);
  cr_assert(th_contains(m, "xxxxxxxxxxxxxxxx"), "'%.200s'", m);
  cr_assert_eq(rs_layout_add_shard(l, name, 0, (const int64_t[]){0},
                                   (const int64_t[]){3}, 0, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(l, name, 1, (const int64_t[]){0},
                                   (const int64_t[]){3}, 0, 0, NULL),
               RS_ERR_UNKNOWN_RANK);
  free(name);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

/* ---------------------------------------------------------------- threads */

typedef struct {
  int id;
  int errors;
  char what[160];
} thread_job;

static void *thread_body(void *arg) {
  thread_job *j = arg;
  for (int it = 0; it < 200 && !j->errors; it++) {
    /* per-thread fallback text: each thread sees its own value */
    int bad = -(1000 * (j->id + 1) + it);
    char want[32];
    snprintf(want, sizeof want, "%d", bad);
    rs_context *ctx = NULL;
    if (rs_context_create_local(bad, &ctx) != RS_ERR_INVALID_ARGUMENT ||
        !th_contains(rs_last_error(), want)) {
      snprintf(j->what, sizeof j->what, "thread %d: '%s' lacks %s", j->id,
               rs_last_error(), want);
      j->errors++;
      break;
    }
    /* a whole plan in a context of its own */
    rs_layout *s = NULL, *d = NULL;
    rs_plan *p = NULL;
    const int64_t n = 64, zero = 0, half = 32;
    int32_t a[64], b[2][32];
    for (int i = 0; i < 64; i++) a[i] = j->id * 100000 + it * 100 + i;
    if (rs_context_create_local(3, &ctx) != RS_OK ||
        rs_layout_create(ctx, &s) != RS_OK ||
        rs_layout_create(ctx, &d) != RS_OK ||
        rs_layout_add_tensor(s, "t", RS_DTYPE_I32, 1, &n) != RS_OK ||
        rs_layout_add_tensor(d, "t", RS_DTYPE_I32, 1, &n) != RS_OK ||
        rs_layout_add_shard(s, "t", 0, &zero, &n, 0, 0, NULL) != RS_OK ||
        rs_layout_add_shard(d, "t", 1, &zero, &half, 0, 0, NULL) != RS_OK ||
        rs_layout_add_shard(d, "t", 2, &half, &half, 0, 0, NULL) != RS_OK ||
        rs_plan_create(s, d, &p) != RS_OK ||
        rs_plan_bind(p, RS_SIDE_SRC, 0, 0, a, sizeof a) != RS_OK ||
        rs_plan_bind(p, RS_SIDE_DST, 1, 0, b[0], sizeof b[0]) != RS_OK ||
        rs_plan_bind(p, RS_SIDE_DST, 2, 0, b[1], sizeof b[1]) != RS_OK ||
        rs_plan_execute(p) != RS_OK || memcmp(a, b, sizeof a) != 0) {
      snprintf(j->what, sizeof j->what, "thread %d iteration %d: plan "
               "failed: %s", j->id, it, rs_context_last_error(ctx));
      j->errors++;
    }
    rs_plan_destroy(p);
    rs_layout_destroy(s);
    rs_layout_destroy(d);
    rs_context_destroy(ctx);
  }
  return NULL;
}

Test(threads, distinct_contexts_and_per_thread_errors, .timeout = 30) {
  enum { NT = 4 };
  pthread_t th[NT];
  thread_job jobs[NT];
  for (int i = 0; i < NT; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].id = i;
    cr_assert_eq(pthread_create(&th[i], NULL, thread_body, &jobs[i]), 0);
  }
  for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < NT; i++)
    cr_assert_eq(jobs[i].errors, 0, "%s", jobs[i].what);
}
