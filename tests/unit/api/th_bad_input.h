/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the bad-input catalog (bad_*.c, one binary per API area; see
 * docs/RELIABILITY.md, section 4): the table-driven test form, the check
 * that a call failed with the right status and a message naming the
 * problem, out-pointers preset to see them cleared, and the standard plan
 * most buffer and plan cases start from (world 4; the source rank 0 holds
 * the whole f32 [8,6] tensor TH_BAD_T in buffer 0; destination ranks 1 and
 * 2 hold rows [0,4) and [4,8) in buffer 3).
 *
 * A group of malformed inputs is a static table of cases, each naming its
 * input; TH_TABLE_TEST runs the body once per case, each case in its own
 * Criterion worker. Criterion hands parameters to a worker as bytes, so the
 * parameters are indices into the table (which the worker has too), not
 * the cases themselves (whose pointers would mean nothing there). */
#ifndef RESHARD_TESTS_TH_BAD_INPUT_H
#define RESHARD_TESTS_TH_BAD_INPUT_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <reshard/reshard.h>

#include "th_util.h"

/* ParameterizedTest over every case of `table`; *i is the case's index. */
#define TH_TABLE_TEST(suite, name, table, i)                                 \
  ParameterizedTestParameters(suite, name) {                                 \
    static size_t th_idx_[sizeof(table) / sizeof(table)[0]];                 \
    for (size_t k_ = 0; k_ < sizeof th_idx_ / sizeof *th_idx_; k_++)         \
      th_idx_[k_] = k_;                                                      \
    return cr_make_param_array(size_t, th_idx_,                              \
                               sizeof th_idx_ / sizeof *th_idx_);            \
  }                                                                          \
  ParameterizedTest(const size_t *i, suite, name)

/* Where a failure's message is to be found. */
typedef enum th_msg_at {
  TH_MSG_CTX,    /* on the context of the handle */
  TH_MSG_THREAD, /* the per-thread text (no context to put it on) */
  TH_MSG_NONE    /* not checked */
} th_msg_at;

/* A non-NULL value to preset out-pointers with, to see them cleared. */
static inline void *th_sentinel(void) {
  static int obj;
  return &obj;
}
#define SENTINEL (th_sentinel())

/* `got` is `want` (or `also`, when not RS_OK), and msg is a non-empty
 * message holding every fragment given (NULL: none). */
static inline void th_expect_fail(const char *what, rs_status got,
                                  rs_status want, rs_status also,
                                  const char *msg, const char *frag1,
                                  const char *frag2) {
  cr_assert(got == want || (also != RS_OK && got == also),
            "%s: got %s, want %s (message: '%s')", what, rs_status_name(got),
            rs_status_name(want), msg ? msg : "(null)");
  cr_assert_not_null(msg, "%s: message is NULL", what);
  cr_assert_gt(strlen(msg), 0, "%s: no message recorded", what);
  if (frag1)
    cr_assert(th_contains(msg, frag1), "%s: message '%s' lacks '%s'", what,
              msg, frag1);
  if (frag2)
    cr_assert(th_contains(msg, frag2), "%s: message '%s' lacks '%s'", what,
              msg, frag2);
}

/* The message of a failure: on ctx, or the per-thread one (ctx NULL). */
static inline const char *th_msg_of(const rs_context *ctx) {
  return ctx ? rs_context_last_error(ctx) : rs_last_error();
}

/* Expect `call` to fail with `want` and a message on ctx (NULL: on the
 * thread) holding the fragments. */
#define EXPECT_FAIL(call, want, ctx, f1, f2)                                \
  do {                                                                      \
    rs_status got_ = (call);                                                \
    th_expect_fail(#call, got_, (want), RS_OK, th_msg_of(ctx), (f1), (f2)); \
  } while (0)

/* A case's status and message: RS_OK for a control (the input is valid),
 * else the status, and the message where `at` says. */
static inline void th_expect_case(const char *name, rs_status got,
                                  rs_status want, rs_status also,
                                  th_msg_at at, const rs_context *ctx,
                                  const char *frag1, const char *frag2) {
  if (want == RS_OK) {
    cr_assert_eq(got, RS_OK, "%s: got %s, want RS_OK (%s)", name,
                 rs_status_name(got), th_msg_of(ctx));
    return;
  }
  if (at == TH_MSG_NONE) {
    cr_assert(got == want || (also != RS_OK && got == also),
              "%s: got %s, want %s", name, rs_status_name(got),
              rs_status_name(want));
    return;
  }
  th_expect_fail(name, got, want, also,
                 th_msg_of(at == TH_MSG_THREAD ? NULL : ctx), frag1, frag2);
}

/* ------------------------------------------------ out-parameters cleared */

/* Every kind of out-parameter the API has, preset to non-zero values so
 * that a call that failed can be seen to clear those it was given. */
typedef struct th_outs {
  int i[5];
  int64_t v;
  uint64_t fp;
  size_t len;
  const char *name;
  char *json;
  rs_route route;
  rs_transport_kind kind;
} th_outs;

static inline void th_outs_preset(th_outs *o) {
  for (int k = 0; k < 5; k++) o->i[k] = 5;
  o->v = 5;
  o->fp = 5;
  o->len = 5;
  o->name = SENTINEL;
  o->json = SENTINEL;
  o->route = RS_ROUTE_INTER;
  o->kind = RS_TRANSPORT_MPI;
}

/* Which outs a case checks (bits). */
enum {
  TH_OUT_I0 = 1, TH_OUT_I1 = 2, TH_OUT_I2 = 4, TH_OUT_I3 = 8, TH_OUT_I4 = 16,
  TH_OUT_V = 32, TH_OUT_FP = 64, TH_OUT_LEN = 128, TH_OUT_NAME = 256,
  TH_OUT_JSON = 512, TH_OUT_ROUTE = 1024, TH_OUT_KIND = 2048
};

static inline void th_expect_outs_cleared(const char *name, const th_outs *o,
                                          unsigned mask) {
  for (int k = 0; k < 5; k++)
    if (mask & (TH_OUT_I0 << k))
      cr_assert_eq(o->i[k], 0, "%s: int out %d left at %d", name, k, o->i[k]);
  if (mask & TH_OUT_V)
    cr_assert_eq(o->v, 0, "%s: out left at %lld", name, (long long)o->v);
  if (mask & TH_OUT_FP)
    cr_assert_eq(o->fp, 0, "%s: out left at %llu", name,
                 (unsigned long long)o->fp);
  if (mask & TH_OUT_LEN)
    cr_assert_eq(o->len, 0, "%s: length left at %zu", name, o->len);
  if (mask & TH_OUT_NAME)
    cr_assert_null(o->name, "%s: name left at %p", name,
                   (const void *)o->name);
  if (mask & TH_OUT_JSON)
    cr_assert_null(o->json, "%s: json left at %p", name, (void *)o->json);
  if (mask & TH_OUT_ROUTE)
    cr_assert_eq(o->route, 0, "%s: route left at %d", name, (int)o->route);
  if (mask & TH_OUT_KIND)
    cr_assert_eq(o->kind, 0, "%s: out left at %d", name, (int)o->kind);
}

/* ------------------------------------------------------ the standard plan */

#define TH_BAD_T "model.layers.7.mlp.down_proj.weight"
#define ROWB (6 * 4) /* bytes of one row of TH_BAD_T */

/* Layouts and plan of the standard case, on ctx. */
static inline void th_bad_build(rs_context *ctx, rs_layout **src,
                                rs_layout **dst, rs_plan **plan) {
  cr_assert_eq(rs_layout_create(ctx, src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*src, TH_BAD_T, RS_DTYPE_F32, 2,
                                    I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*dst, TH_BAD_T, RS_DTYPE_F32, 2,
                                    I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*src, TH_BAD_T, 0, I64(0, 0), I64(8, 6),
                                   0, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*dst, TH_BAD_T, 1, I64(0, 0), I64(4, 6),
                                   3, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*dst, TH_BAD_T, 2, I64(4, 0), I64(4, 6),
                                   3, 0, NULL), RS_OK);
  cr_assert_eq(rs_plan_create(*src, *dst, plan), RS_OK, "%s",
               rs_context_last_error(ctx));
}

static inline void th_fill_source(unsigned char *s, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) s[i] = (unsigned char)(i * 31u + seed);
}

static inline void th_expect_poisoned(const unsigned char *b, size_t n,
                                      const char *what) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != TH_POISON)
      cr_assert_fail("%s: destination byte %zu changed to 0x%02x", what, i,
                     b[i]);
}

/* Ranks 1 and 2 hold their rows of the source s0. */
static inline void th_expect_delivered(const unsigned char *s0,
                                       const unsigned char *d1,
                                       const unsigned char *d2) {
  cr_assert(memcmp(d1, s0, 4 * ROWB) == 0, "rank 1 holds wrong bytes");
  cr_assert(memcmp(d2, s0 + 4 * ROWB, 4 * ROWB) == 0,
            "rank 2 holds wrong bytes");
}

/* The fixture: a context of 4 ranks, the standard layouts and plan (or two
 * empty layouts), a filled source and two poisoned destinations. */
typedef struct th_bad_fx {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  unsigned char *s0, *d1, *d2;
} th_bad_fx;

static inline th_bad_fx *th_fx(void) {
  static th_bad_fx fx;
  return &fx;
}
#define FX (th_fx())

static inline void th_fx_buffers(void) {
  FX->s0 = malloc(8 * ROWB);
  FX->d1 = malloc(4 * ROWB);
  FX->d2 = malloc(4 * ROWB);
  cr_assert(FX->s0 && FX->d1 && FX->d2);
  th_fill_source(FX->s0, 8 * ROWB, 1);
  memset(FX->d1, TH_POISON, 4 * ROWB);
  memset(FX->d2, TH_POISON, 4 * ROWB);
}

/* Two empty layouts (for cases that build their own). */
static inline void th_fx_layouts(void) {
  memset(FX, 0, sizeof *FX);
  cr_assert_eq(rs_context_create_local(4, &FX->ctx), RS_OK);
  cr_assert_eq(rs_layout_create(FX->ctx, &FX->src), RS_OK);
  cr_assert_eq(rs_layout_create(FX->ctx, &FX->dst), RS_OK);
  th_fx_buffers();
}

/* The standard plan. */
static inline void th_fx_plan(void) {
  memset(FX, 0, sizeof *FX);
  cr_assert_eq(rs_context_create_local(4, &FX->ctx), RS_OK);
  th_bad_build(FX->ctx, &FX->src, &FX->dst, &FX->plan);
  th_fx_buffers();
}

static inline void th_fx_teardown(void) {
  rs_plan_destroy(FX->plan);
  rs_layout_destroy(FX->src);
  rs_layout_destroy(FX->dst);
  rs_context_destroy(FX->ctx);
  free(FX->s0);
  free(FX->d1);
  free(FX->d2);
}

#endif
