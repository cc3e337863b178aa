/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, plans: layouts that cannot make a plan
 * (rs_plan_create: tensors missing or declared differently, destinations
 * not covered, destination shards sharing bytes), malformed plan queries
 * (indices out of range, unknown statistics and ranks, NULL handles and
 * outs), and a valid but absurd plan that must plan or refuse quickly.
 * Each case names its malformed input and asserts the exact rs_status, a
 * message naming the tensor or the value, and out-pointers cleared; the
 * controls beside them (want RS_OK) are valid inputs at the border. */
#include "th_bad_input.h"

#include <stdio.h>
#include <string.h>

#define PT TH_BAD_T
#define F32 RS_DTYPE_F32

/* ------------------------------------------------------ rs_plan_create */

TestSuite(plan_create, .init = th_fx_layouts, .fini = th_fx_teardown);

typedef struct decl_spec {
  const char *name;
  rs_dtype dtype;
  int ndim;
  int64_t shape[2];
} decl_spec;

typedef struct shard_spec {
  const char *tensor;
  int rank;
  int64_t off[2], ext[2];
  int buffer;
  int64_t byte_offset;
  const int64_t *strides; /* NULL: dense */
} shard_spec;

/* Tensors declared on each side, shards of each side (a NULL tensor ends
 * a list), and what rs_plan_create says of them. */
typedef struct create_case {
  const char *name;
  decl_spec src[2], dst[2];
  shard_spec ssh[4], dsh[4];
  rs_status want;
  const char *f1;
} create_case;

#define PT86 {PT, F32, 2, {8, 6}}
#define T4(n) {n, F32, 1, {4}}
#define ALL86(rank) {PT, rank, {0, 0}, {8, 6}, 0, 0, NULL}
#define ALL4(n, rank, buffer) {n, rank, {0}, {4}, buffer, 0, NULL}
#define NO_SHARD {NULL, 0, {0}, {0}, 0, 0, NULL}

static const create_case create_cases[] = {
    {"tensor_missing_in_destination",
     {T4("shared"), T4("only.in.source")}, {T4("shared")},
     {ALL4("shared", 0, 0), ALL4("only.in.source", 0, 1)},
     {ALL4("shared", 1, 0)}, RS_ERR_INCOMPATIBLE, "only.in.source"},
    {"tensor_missing_in_source", {T4("shared")},
     {T4("shared"), T4("only.in.dest")}, {ALL4("shared", 0, 0)},
     {ALL4("shared", 1, 0), ALL4("only.in.dest", 1, 1)}, RS_ERR_INCOMPATIBLE,
     "only.in.dest"},
    {"shape_differs", {PT86}, {{PT, F32, 2, {8, 7}}}, {ALL86(0)},
     {{PT, 1, {0, 0}, {8, 7}, 0, 0, NULL}}, RS_ERR_INCOMPATIBLE, PT},
    {"ndim_differs", {PT86}, {{PT, F32, 1, {48}}}, {ALL86(0)},
     {{PT, 1, {0}, {48}, 0, 0, NULL}}, RS_ERR_INCOMPATIBLE, PT},
    /* fp8 needs its block scales declared */
    {"dtype_differs_fp8_without_scales", {PT86},
     {{PT, RS_DTYPE_F8_E4M3, 2, {8, 6}}}, {ALL86(0)}, {ALL86(1)},
     RS_ERR_UNSUPPORTED, PT},
    {"dtype_differs_same_size", {PT86}, {{PT, RS_DTYPE_I32, 2, {8, 6}}},
     {ALL86(0)}, {ALL86(1)}, RS_ERR_UNSUPPORTED, PT},
    /* the source holds rows 0..6 and misses row 7 */
    {"destination_row_not_covered", {PT86}, {PT86},
     {{PT, 0, {0, 0}, {7, 6}, 0, 0, NULL}}, {ALL86(1)}, RS_ERR_NOT_COVERED,
     PT},
    /* the source tiles [0,8)x[0,6) but leaves out element (3,2); the
     * destination that needs it is a small box around it */
    {"destination_element_not_covered_in_the_middle", {PT86}, {PT86},
     {{PT, 0, {0, 0}, {3, 6}, 0, 0, NULL},
      {PT, 1, {4, 0}, {4, 6}, 0, 0, NULL},
      {PT, 2, {3, 0}, {1, 2}, 0, 0, NULL},
      {PT, 3, {3, 3}, {1, 3}, 0, 0, NULL}},
     {{PT, 1, {2, 1}, {3, 3}, 0, 0, NULL}}, RS_ERR_NOT_COVERED, PT},
    {"no_source_shards_at_all", {PT86}, {PT86}, {NO_SHARD}, {ALL86(1)},
     RS_ERR_NOT_COVERED, PT},
    /* rank 1, buffer 0: rows [0,4) at byte 0 span 96 bytes; rows [4,8) at
     * byte 48 overlap them */
    {"two_destination_shards_share_bytes", {PT86}, {PT86}, {ALL86(0)},
     {{PT, 1, {0, 0}, {4, 6}, 0, 0, NULL},
      {PT, 1, {4, 0}, {4, 6}, 0, 48, NULL}},
     RS_ERR_OVERLAP, PT},
    /* a fused buffer on rank 2: q at [0,64), k wrongly at [60,92) */
    {"destination_shards_of_two_tensors_share_bytes",
     {{"q", F32, 1, {16}}, {"k", F32, 1, {8}}},
     {{"q", F32, 1, {16}}, {"k", F32, 1, {8}}},
     {{"q", 0, {0}, {16}, 0, 0, NULL}, {"k", 0, {0}, {8}, 1, 0, NULL}},
     {{"q", 2, {0}, {16}, 0, 0, NULL}, {"k", 2, {0}, {8}, 0, 60, NULL}},
     RS_ERR_OVERLAP, NULL},
    {"same_box_same_bytes_twice", {PT86}, {PT86}, {ALL86(0)},
     {{PT, 3, {0, 0}, {8, 6}, 0, 16, NULL},
      {PT, 3, {0, 0}, {8, 6}, 0, 16, NULL}},
     RS_ERR_OVERLAP, PT},
    /* Strided destination shards: overlap is decided byte by byte. */
    /* a: f32 every other slot, bytes 0-3, 8-11, 16-19, 24-27; b: one f32
     * at byte 8 */
    {"strided_shard_and_dense_element_in_its_slot",
     {T4("a"), {"b", F32, 1, {1}}}, {T4("a"), {"b", F32, 1, {1}}},
     {ALL4("a", 0, 0), {"b", 0, {0}, {1}, 1, 0, NULL}},
     {{"a", 1, {0}, {4}, 0, 0, I64(2)}, {"b", 1, {0}, {1}, 0, 8, NULL}},
     RS_ERR_OVERLAP, NULL},
    /* both f32 every other slot, b 2 bytes later: b's bytes 2-5 meet a's
     * 0-3 */
    {"strided_shards_half_an_element_apart", {T4("a"), T4("b")},
     {T4("a"), T4("b")}, {ALL4("a", 0, 0), ALL4("b", 0, 1)},
     {{"a", 1, {0}, {4}, 0, 0, I64(2)}, {"b", 1, {0}, {4}, 0, 2, I64(2)}},
     RS_ERR_OVERLAP, NULL},
    /* a: f32 [2,2] rows 10 apart: bytes 0-7 and 40-47; b: f32 [1,2] at
     * byte 44 meets a's second row */
    {"strided_shards_one_byte_into_the_next_row",
     {{"a", F32, 2, {2, 2}}, {"b", F32, 2, {1, 2}}},
     {{"a", F32, 2, {2, 2}}, {"b", F32, 2, {1, 2}}},
     {{"a", 0, {0, 0}, {2, 2}, 0, 0, NULL},
      {"b", 0, {0, 0}, {1, 2}, 1, 0, NULL}},
     {{"a", 1, {0, 0}, {2, 2}, 0, 0, I64(10, 1)},
      {"b", 1, {0, 0}, {1, 2}, 0, 44, NULL}},
     RS_ERR_OVERLAP, NULL},
    /* a: f32 [2,2] rows 10 apart (bytes 0-7, 40-47); b: f32 [2,2] dense at
     * byte 8 (bytes 8-23) sits in the gap */
    {"shard_inside_the_gap_of_a_strided_shard_is_fine",
     {{"a", F32, 2, {2, 2}}, {"b", F32, 2, {2, 2}}},
     {{"a", F32, 2, {2, 2}}, {"b", F32, 2, {2, 2}}},
     {{"a", 0, {0, 0}, {2, 2}, 0, 0, NULL},
      {"b", 0, {0, 0}, {2, 2}, 1, 0, NULL}},
     {{"a", 1, {0, 0}, {2, 2}, 0, 0, I64(10, 1)},
      {"b", 1, {0, 0}, {2, 2}, 0, 8, NULL}},
     RS_OK, NULL},
    /* a: u8 at even bytes 0..14; b: one u16 at byte 5 covers bytes 5-6,
     * and byte 6 is a's */
    {"wider_element_over_two_interleaved_bytes",
     {{"a", RS_DTYPE_U8, 1, {8}}, {"b", RS_DTYPE_U16, 1, {1}}},
     {{"a", RS_DTYPE_U8, 1, {8}}, {"b", RS_DTYPE_U16, 1, {1}}},
     {{"a", 0, {0}, {8}, 0, 0, NULL}, {"b", 0, {0}, {1}, 1, 0, NULL}},
     {{"a", 1, {0}, {8}, 0, 0, I64(2)}, {"b", 1, {0}, {1}, 0, 5, NULL}},
     RS_ERR_OVERLAP, NULL},
    {"byte_interleaved_u8_shards_are_fine",
     {{"a", RS_DTYPE_U8, 1, {8}}, {"b", RS_DTYPE_U8, 1, {8}}},
     {{"a", RS_DTYPE_U8, 1, {8}}, {"b", RS_DTYPE_U8, 1, {8}}},
     {{"a", 0, {0}, {8}, 0, 0, NULL}, {"b", 0, {0}, {8}, 1, 0, NULL}},
     {{"a", 1, {0}, {8}, 0, 0, I64(2)}, {"b", 1, {0}, {8}, 0, 1, I64(2)}},
     RS_OK, NULL},
    /* a: f64 [3] dense at 0 (bytes 0-23); b at byte 23: one byte shared */
    {"last_byte_touches_next_shard",
     {{"a", RS_DTYPE_F64, 1, {3}}, {"b", RS_DTYPE_F64, 1, {3}}},
     {{"a", RS_DTYPE_F64, 1, {3}}, {"b", RS_DTYPE_F64, 1, {3}}},
     {{"a", 0, {0}, {3}, 0, 0, NULL}, {"b", 0, {0}, {3}, 1, 0, NULL}},
     {{"a", 1, {0}, {3}, 0, 0, NULL}, {"b", 1, {0}, {3}, 0, 23, NULL}},
     RS_ERR_OVERLAP, NULL},
    {"same_bytes_on_different_ranks_is_fine", {PT86}, {PT86}, {ALL86(0)},
     {ALL86(1), ALL86(2), {PT, 3, {0, 0}, {4, 6}, 0, 0, NULL},
      {PT, 3, {4, 0}, {4, 6}, 1, 0, NULL}},
     RS_OK, NULL},
};

static void declare(rs_layout *l, const decl_spec *d) {
  for (int k = 0; k < 2 && d[k].name; k++)
    cr_assert_eq(rs_layout_add_tensor(l, d[k].name, d[k].dtype, d[k].ndim,
                                      d[k].shape),
                 RS_OK, "%s", rs_context_last_error(FX->ctx));
}

static void add_shards(rs_layout *l, const shard_spec *s) {
  for (int k = 0; k < 4 && s[k].tensor; k++)
    cr_assert_eq(rs_layout_add_shard(l, s[k].tensor, s[k].rank, s[k].off,
                                     s[k].ext, s[k].buffer, s[k].byte_offset,
                                     s[k].strides),
                 RS_OK, "%s", rs_context_last_error(FX->ctx));
}

/* The plan is made, or refused with the status and a message on the
 * context, its out-pointer cleared. */
TH_TABLE_TEST(plan_create, cases, create_cases, i) {
  const create_case *c = &create_cases[*i];
  declare(FX->src, c->src);
  declare(FX->dst, c->dst);
  add_shards(FX->src, c->ssh);
  add_shards(FX->dst, c->dsh);
  rs_plan *plan = SENTINEL;
  rs_status st = rs_plan_create(FX->src, FX->dst, &plan);
  th_expect_case(c->name, st, c->want, RS_OK, TH_MSG_CTX, FX->ctx, c->f1,
                 NULL);
  if (c->want != RS_OK)
    cr_assert_null(plan, "%s: out-pointer not set to NULL on failure",
                   c->name);
  else
    rs_plan_destroy(plan);
}

Test(plan_create, layouts_from_two_contexts) {
  rs_context *other = NULL;
  rs_layout *odst = NULL;
  rs_plan *plan = SENTINEL;
  cr_assert_eq(rs_context_create_local(4, &other), RS_OK);
  cr_assert_eq(rs_layout_create(other, &odst), RS_OK);
  declare(FX->src, (decl_spec[2]){T4("t")});
  declare(odst, (decl_spec[2]){T4("t")});
  add_shards(FX->src, (shard_spec[4]){ALL4("t", 0, 0)});
  add_shards(odst, (shard_spec[4]){ALL4("t", 1, 0)});
  rs_status st = rs_plan_create(FX->src, odst, &plan);
  cr_assert_eq(st, RS_ERR_WRONG_CONTEXT, "got %s", rs_status_name(st));
  cr_assert_null(plan);
  cr_assert(strlen(rs_context_last_error(FX->ctx)) > 0 ||
                strlen(rs_context_last_error(other)) > 0,
            "no message on either context");
  rs_layout_destroy(odst);
  rs_context_destroy(other);
}

/* RS_PARAM_PLAN_PART takes any rank; a rank outside the world is refused
 * when the plan is made. */
Test(plan_create, part_of_a_rank_outside_the_world) {
  declare(FX->src, (decl_spec[2]){T4("t")});
  declare(FX->dst, (decl_spec[2]){T4("t")});
  add_shards(FX->src, (shard_spec[4]){ALL4("t", 0, 0)});
  add_shards(FX->dst, (shard_spec[4]){ALL4("t", 1, 0)});
  cr_assert_eq(rs_context_set_param(FX->ctx, RS_PARAM_PLAN_PART, 4), RS_OK);
  rs_plan *plan = SENTINEL;
  rs_status st = rs_plan_create(FX->src, FX->dst, &plan);
  th_expect_case("plan_part_world_size", st, RS_ERR_UNKNOWN_RANK, RS_OK,
                 TH_MSG_CTX, FX->ctx, "RS_PARAM_PLAN_PART", "rank 4");
  cr_assert_null(plan);
  cr_assert_eq(rs_context_set_param(FX->ctx, RS_PARAM_PLAN_PART, 3), RS_OK);
  cr_assert_eq(rs_plan_create(FX->src, FX->dst, &plan), RS_OK, "%s",
               rs_context_last_error(FX->ctx));
  rs_plan_destroy(plan);
}

Test(plan_create, null_arguments) {
  rs_plan *plan = SENTINEL;
  declare(FX->src, (decl_spec[2]){T4("t")});
  declare(FX->dst, (decl_spec[2]){T4("t")});
  /* the message may go to the other layout's context or the thread */
  cr_assert_eq(rs_plan_create(NULL, FX->dst, &plan), RS_ERR_NULL_POINTER);
  cr_assert_null(plan);
  cr_assert(strlen(rs_last_error()) > 0 ||
            strlen(rs_context_last_error(FX->ctx)) > 0);
  plan = SENTINEL;
  cr_assert_eq(rs_plan_create(FX->src, NULL, &plan), RS_ERR_NULL_POINTER);
  cr_assert_null(plan);
  cr_assert(strlen(rs_last_error()) > 0 ||
            strlen(rs_context_last_error(FX->ctx)) > 0);
  rs_status st = rs_plan_create(FX->src, FX->dst, NULL);
  cr_assert_eq(st, RS_ERR_NULL_POINTER);
  cr_assert_gt(strlen(rs_context_last_error(FX->ctx)), 0);
}

/* --------------------------------------------------------- plan queries */

TestSuite(plan_query, .init = th_fx_plan, .fini = th_fx_teardown);

typedef enum query_call {
  Q_STAT,        /* rs_plan_stat(plan, a, stat, &v) */
  Q_NUM_MOVES,
  Q_MOVE_INFO,   /* index a; every out, or the tensor's alone (NUL_OUT2) */
  Q_MOVE_BOX,    /* index a, off (NUL_OUT1), ext (NUL_OUT2) */
  Q_NUM_TENSORS,
  Q_TENSOR_INFO, /* index a, name (NUL_OUT1), ndim (NUL_OUT2) */
  Q_FINGERPRINT,
  Q_TO_JSON,     /* json (NUL_OUT1), length (NUL_OUT2) */
  Q_CREATE       /* rs_plan_create(source, NULL, &plan) */
} query_call;

enum { NUL_PLAN = 1, NUL_OUT1 = 2, NUL_OUT2 = 4 };

/* a: the index this many past the last move */
#define PAST_LAST_MOVE INT64_MIN

typedef struct query_case {
  const char *name;
  query_call call;
  int64_t a;
  int stat;
  unsigned nul;
  rs_status want;
  const char *f1; /* "#": the number of moves */
  th_msg_at at;
} query_case;

#define ARGS 0, RS_STAT_MOVES, 0
#define NULL_PLAN 0, RS_STAT_MOVES, NUL_PLAN
#define NP RS_ERR_NULL_POINTER
#define INVAL RS_ERR_INVALID_ARGUMENT

static const query_case query_cases[] = {
    {"stat_unknown", Q_STAT, 0, 0, 0, INVAL, NULL, TH_MSG_CTX},
    {"stat_unknown", Q_STAT, 0, 77, 0, INVAL, "77", TH_MSG_CTX},
    {"stat_rank_unknown", Q_STAT, 4, RS_STAT_MOVES, 0, RS_ERR_UNKNOWN_RANK,
     "4", TH_MSG_CTX},
    {"stat_rank_unknown", Q_STAT, -2, RS_STAT_MOVES, 0, RS_ERR_UNKNOWN_RANK,
     "-2", TH_MSG_CTX},
    {"move_index_out_of_range", Q_MOVE_INFO, PAST_LAST_MOVE, 0, 0, INVAL, "#",
     TH_MSG_CTX},
    {"move_index_out_of_range", Q_MOVE_INFO, -1, 0, NUL_OUT2, INVAL, "-1",
     TH_MSG_CTX},
    {"move_index_out_of_range", Q_MOVE_BOX, PAST_LAST_MOVE, 0, 0, INVAL, "#",
     TH_MSG_CTX},
    {"move_index_out_of_range", Q_MOVE_BOX, -1, 0, 0, INVAL, NULL,
     TH_MSG_CTX},
    {"tensor_index_out_of_range", Q_TENSOR_INFO, 1, 0, 0, INVAL, "1",
     TH_MSG_CTX},
    {"tensor_index_out_of_range", Q_TENSOR_INFO, -1, 0, 0, INVAL, "-1",
     TH_MSG_CTX},
    {"null_arguments", Q_STAT, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_STAT, 0, RS_STAT_MOVES, NUL_OUT1, NP, NULL,
     TH_MSG_CTX},
    {"null_arguments", Q_NUM_MOVES, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_NUM_MOVES, 0, 0, NUL_OUT1, NP, NULL, TH_MSG_CTX},
    {"null_arguments", Q_MOVE_INFO, 0, 0, NUL_PLAN | NUL_OUT2, NP, NULL,
     TH_MSG_THREAD},
    {"null_arguments", Q_MOVE_BOX, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_MOVE_BOX, 0, 0, NUL_OUT1, NP, NULL, TH_MSG_CTX},
    {"null_arguments", Q_MOVE_BOX, 0, 0, NUL_OUT2, NP, NULL, TH_MSG_CTX},
    {"null_arguments", Q_NUM_TENSORS, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_NUM_TENSORS, 0, 0, NUL_OUT1, NP, NULL, TH_MSG_CTX},
    {"null_arguments", Q_TENSOR_INFO, 0, 0, NUL_PLAN | NUL_OUT1, NP, NULL,
     TH_MSG_THREAD},
    {"null_arguments", Q_FINGERPRINT, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_FINGERPRINT, 0, 0, NUL_OUT1, NP, NULL, TH_MSG_CTX},
    {"null_arguments", Q_TO_JSON, NULL_PLAN, NP, NULL, TH_MSG_THREAD},
    {"null_arguments", Q_TO_JSON, 0, 0, NUL_OUT1, NP, NULL, TH_MSG_CTX},
    /* "results come through trailing out-parameters, which are set to
     * 0/NULL on failure" */
    {"outs_cleared.plan_stat_null_plan", Q_STAT, NULL_PLAN, NP, NULL,
     TH_MSG_NONE},
    {"outs_cleared.plan_stat_unknown_stat", Q_STAT, 0, 99, 0, INVAL, NULL,
     TH_MSG_NONE},
    {"outs_cleared.plan_num_moves_null_plan", Q_NUM_MOVES, NULL_PLAN, NP,
     NULL, TH_MSG_NONE},
    {"outs_cleared.plan_move_info_index_past_end", Q_MOVE_INFO, 1 << 20, 0, 0,
     INVAL, NULL, TH_MSG_NONE},
    {"outs_cleared.plan_move_info_null_plan", Q_MOVE_INFO, 0, 0,
     NUL_PLAN | NUL_OUT2, NP, NULL, TH_MSG_NONE},
    {"outs_cleared.plan_num_tensors_null_plan", Q_NUM_TENSORS, NULL_PLAN, NP,
     NULL, TH_MSG_NONE},
    {"outs_cleared.plan_tensor_info_index_past_end", Q_TENSOR_INFO, 1, 0, 0,
     INVAL, NULL, TH_MSG_NONE},
    {"outs_cleared.plan_tensor_info_null_plan", Q_TENSOR_INFO, NULL_PLAN, NP,
     NULL, TH_MSG_NONE},
    {"outs_cleared.plan_fingerprint_null_plan", Q_FINGERPRINT, NULL_PLAN, NP,
     NULL, TH_MSG_NONE},
    {"outs_cleared.plan_to_json_null_plan", Q_TO_JSON, NULL_PLAN, NP, NULL,
     TH_MSG_NONE},
    {"outs_cleared.plan_create_null_layout", Q_CREATE, ARGS, NP, NULL,
     TH_MSG_NONE},
};

/* The call fails with the status and message, and every out-pointer it was
 * given that holds a result is cleared. */
TH_TABLE_TEST(plan_query, cases, query_cases, i) {
  const query_case *c = &query_cases[*i];
  rs_plan *plan = c->nul & NUL_PLAN ? NULL : FX->plan;
  bool o1 = !(c->nul & NUL_OUT1), o2 = !(c->nul & NUL_OUT2);
  int64_t n = -1;
  cr_assert_eq(rs_plan_num_moves(FX->plan, &n), RS_OK);
  cr_assert_gt(n, 0);
  char moves[32];
  snprintf(moves, sizeof moves, "%lld", (long long)n);
  int64_t a = c->a == PAST_LAST_MOVE ? n : c->a;
  int64_t off[2], ext[2];
  th_outs o;
  th_outs_preset(&o);
  unsigned cleared = 0;
  rs_plan *made = SENTINEL;
  rs_status st = RS_OK;
  switch (c->call) {
  case Q_STAT:
    st = rs_plan_stat(plan, (int)a, (rs_stat)c->stat, o1 ? &o.v : NULL);
    cleared = o1 ? TH_OUT_V : 0;
    break;
  case Q_NUM_MOVES:
    st = rs_plan_num_moves(plan, o1 ? &o.v : NULL);
    cleared = o1 ? TH_OUT_V : 0;
    break;
  case Q_MOVE_INFO:
    st = rs_plan_move_info(plan, a, &o.i[0], o2 ? &o.i[1] : NULL,
                           o2 ? &o.i[2] : NULL, o2 ? &o.route : NULL,
                           o2 ? &o.i[3] : NULL, o2 ? &o.i[4] : NULL);
    cleared = TH_OUT_I0 | (o2 ? TH_OUT_I1 | TH_OUT_I2 | TH_OUT_I3 |
                                    TH_OUT_I4 | TH_OUT_ROUTE
                              : 0);
    break;
  case Q_MOVE_BOX:
    off[0] = ext[0] = -7;
    st = rs_plan_move_box(plan, a, o1 ? off : NULL, o2 ? ext : NULL);
    if (st != RS_OK && st != RS_ERR_NULL_POINTER && o1 && o2) /* zeroed */
      cr_assert(off[0] == 0 && ext[0] == 0, "%s: box not zeroed", c->name);
    break;
  case Q_NUM_TENSORS:
    st = rs_plan_num_tensors(plan, o1 ? &o.i[0] : NULL);
    cleared = o1 ? TH_OUT_I0 : 0;
    break;
  case Q_TENSOR_INFO:
    st = rs_plan_tensor_info(plan, (int)a, o1 ? &o.name : NULL,
                             o2 ? &o.i[0] : NULL);
    cleared = (o1 ? TH_OUT_NAME : 0) | (o2 ? TH_OUT_I0 : 0);
    break;
  case Q_FINGERPRINT:
    st = rs_plan_fingerprint(plan, o1 ? &o.fp : NULL);
    cleared = o1 ? TH_OUT_FP : 0;
    break;
  case Q_TO_JSON:
    st = rs_plan_to_json(plan, o1 ? &o.json : NULL, o2 ? &o.len : NULL);
    cleared = (o1 ? TH_OUT_JSON : 0) | (o2 && o1 ? TH_OUT_LEN : 0);
    break;
  case Q_CREATE:
    st = rs_plan_create(FX->src, NULL, &made);
    cr_assert_null(made, "%s: plan not cleared", c->name);
    break;
  }
  const char *f1 = c->f1 && !strcmp(c->f1, "#") ? moves : c->f1;
  th_expect_case(c->name, st, c->want, RS_OK, c->at, FX->ctx, f1, NULL);
  th_expect_outs_cleared(c->name, &o, cleared);
}

Test(plan_query, valid_queries_answer) {
  /* all outs NULL is allowed */
  cr_assert_eq(rs_plan_move_info(FX->plan, 0, NULL, NULL, NULL, NULL, NULL,
                                 NULL), RS_OK);
  const char *name = SENTINEL;
  int nd = 5;
  cr_assert_eq(rs_plan_tensor_info(FX->plan, 0, NULL, NULL), RS_OK);
  cr_assert_eq(rs_plan_tensor_info(FX->plan, 0, &name, &nd), RS_OK);
  cr_assert_str_eq(name, PT);
  cr_assert_eq(nd, 2);
  /* the length may be NULL */
  char *json = NULL;
  cr_assert_eq(rs_plan_to_json(FX->plan, &json, NULL), RS_OK);
  cr_assert_not_null(json);
  rs_free(json);
}

/* ------------------------------------------------------ plan limits */

/* A layout pair the API accepts but no machine could hold: one u8 tensor of
 * 2^62 bytes (4 EiB) moved whole from rank 0 to rank 1. rs_plan_create
 * must answer within a few seconds, with a plan or with a clear refusal;
 * it must not spend hours and all memory cutting it into staging-sized
 * pieces (never hang a job on a malformed description). */
Test(plan_limits, tensor_of_4_eib_plans_or_refuses_quickly, .timeout = 3) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  const int64_t shape[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
  const int64_t off[2] = {0, 0};
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, "huge", RS_DTYPE_U8, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "huge", RS_DTYPE_U8, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "huge", 0, off, shape, 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "huge", 1, off, shape, 0, 0, NULL),
               RS_OK);
  rs_status st = rs_plan_create(s, d, &plan);
  if (st != RS_OK) {
    cr_assert(st == RS_ERR_UNSUPPORTED || st == RS_ERR_NO_MEMORY ||
                  st == RS_ERR_OVERFLOW,
              "status %s (%s)", rs_status_name(st),
              rs_context_last_error(ctx));
    cr_assert(th_contains(rs_context_last_error(ctx), "huge"),
              "message does not name the tensor: %s",
              rs_context_last_error(ctx));
    cr_assert_null(plan);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}
