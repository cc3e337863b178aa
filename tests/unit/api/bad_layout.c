/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, layouts: malformed tensor declarations
 * (rs_layout_add_tensor), shards (rs_layout_add_shard), DTensor placements
 * (rs_layout_add_dtensor, rs_dtensor_local_box) and NULL layout handles.
 * Each group is a table of cases named after the malformed input; each
 * case asserts the exact rs_status, a message naming the problem (the
 * tensor or the offending value), out-pointers cleared, and that the
 * layout gained no tensor and no shard. A few controls (want RS_OK) sit in
 * the tables beside the inputs they border. */
#include "th_bad_input.h"

#include <stdio.h>
#include <string.h>

#define TNAME "layers.0.attn.qkv"
#define F32 RS_DTYPE_F32
#define U8 RS_DTYPE_U8

/* ------------------------------------------------------------ the fixture */

static struct {
  rs_context *ctx;
  rs_layout *l; /* world 4, tensor TNAME f32 [8,6] declared */
} g;

static void fx_setup(void) {
  memset(&g, 0, sizeof g);
  cr_assert_eq(rs_context_create_local(4, &g.ctx), RS_OK);
  cr_assert_eq(rs_layout_create(g.ctx, &g.l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(g.l, TNAME, F32, 2, I64(8, 6)), RS_OK);
}

static void fx_teardown(void) {
  rs_layout_destroy(g.l);
  rs_context_destroy(g.ctx);
}

static int64_t shards_of(const rs_layout *l) {
  int64_t n = -1;
  cr_assert_eq(rs_layout_num_shards(l, &n), RS_OK);
  return n;
}

static int tensors_of(const rs_layout *l) {
  int n = -1;
  cr_assert_eq(rs_layout_num_tensors(l, &n), RS_OK);
  return n;
}

TestSuite(add_tensor, .init = fx_setup, .fini = fx_teardown);
TestSuite(add_shard, .init = fx_setup, .fini = fx_teardown);
TestSuite(add_dtensor, .init = fx_setup, .fini = fx_teardown);
TestSuite(layout, .init = fx_setup, .fini = fx_teardown);

/* Which arguments a case passes as NULL. */
enum {
  NUL_LAYOUT = 1, NUL_SHAPE = 2, NUL_OFF = 4, NUL_EXT = 8, NUL_MESH = 16,
  NUL_RANKS = 32, NUL_PLACEMENTS = 64, NUL_COORD = 128
};

/* --------------------------------------------------------- add_tensor */

typedef struct tensor_case {
  const char *name;   /* the malformed input */
  const char *tensor; /* NULL: a NULL name */
  rs_dtype dtype;
  int ndim;
  int64_t shape[RS_MAX_DIMS + 1];
  int64_t fill;       /* nonzero: every dim of the shape is this */
  unsigned nul;
  rs_status want;
  const char *f1, *f2;
  int64_t num;        /* nonzero: the message holds this number too */
} tensor_case;

static const tensor_case tensor_cases[] = {
    {"shape_has_zero", "zero", F32, 3, {4, 0, 2}, 0, 0, RS_ERR_BAD_SHAPE,
     "zero", NULL, 0},
    {"shape_negative", "neg", F32, 2, {4, -3}, 0, 0, RS_ERR_BAD_SHAPE, "neg",
     "-3", 0},
    {"ndim_zero", "scalar", F32, 0, {1}, 0, 0, RS_ERR_BAD_SHAPE, "scalar",
     NULL, 0},
    {"ndim_negative", "t", F32, -2, {1}, 0, 0, RS_ERR_BAD_SHAPE, "-2", NULL,
     0},
    {"ndim_above_max", "deep", F32, RS_MAX_DIMS + 1, {0}, 1, 0,
     RS_ERR_TOO_MANY_DIMS, "deep", NULL, RS_MAX_DIMS + 1},
    {"ndim_max_is_fine", "deep", U8, RS_MAX_DIMS, {0}, 2, 0, RS_OK, NULL,
     NULL, 0},
    {"dtype_unknown", "odd", (rs_dtype)99, 1, {4}, 0, 0,
     RS_ERR_INVALID_ARGUMENT, "99", NULL, 0},
    {"dtype_unknown", "odd", (rs_dtype)0, 1, {4}, 0, 0,
     RS_ERR_INVALID_ARGUMENT, "odd", NULL, 0},
    {"name_empty", "", F32, 1, {4}, 0, 0, RS_ERR_INVALID_ARGUMENT, NULL, NULL,
     0},
    {"name_null", NULL, F32, 1, {4}, 0, 0, RS_ERR_NULL_POINTER, NULL, NULL, 0},
    {"shape_null", "t", F32, 1, {4}, 0, NUL_SHAPE, RS_ERR_NULL_POINTER, NULL,
     NULL, 0},
    {"layout_null", "t", F32, 1, {4}, 0, NUL_LAYOUT, RS_ERR_NULL_POINTER,
     NULL, NULL, 0},
    {"name_duplicate", TNAME, F32, 2, {8, 6}, 0, 0, RS_ERR_DUPLICATE_NAME,
     TNAME, NULL, 0},
    /* a different dtype/shape does not make it another tensor */
    {"name_duplicate", TNAME, U8, 1, {3}, 0, 0, RS_ERR_DUPLICATE_NAME, TNAME,
     NULL, 0},
    {"element_count_overflows_int64", "huge", U8, 2,
     {(int64_t)1 << 32, (int64_t)1 << 32}, 0, 0, RS_ERR_OVERFLOW, "huge",
     NULL, 0},
    /* 2^62 elements fit, 2^65 bytes do not */
    {"byte_count_overflows_int64", "huge64", RS_DTYPE_F64, 2,
     {(int64_t)1 << 31, (int64_t)1 << 31}, 0, 0, RS_ERR_OVERFLOW, "huge64",
     NULL, 0},
    /* declaring a tensor allocates nothing: 2^62 bytes is a valid shape */
    {"huge_but_representable_is_fine", "big", U8, 3,
     {(int64_t)1 << 30, (int64_t)1 << 30, 4}, 0, 0, RS_OK, NULL, NULL, 0},
};

TH_TABLE_TEST(add_tensor, cases, tensor_cases, i) {
  const tensor_case *c = &tensor_cases[*i];
  int64_t shape[RS_MAX_DIMS + 1];
  memcpy(shape, c->shape, sizeof shape);
  for (int d = 0; c->fill && d < c->ndim && d <= RS_MAX_DIMS; d++)
    shape[d] = c->fill;
  char num[32];
  snprintf(num, sizeof num, "%lld", (long long)c->num);
  rs_status st = rs_layout_add_tensor(c->nul & NUL_LAYOUT ? NULL : g.l,
                                      c->tensor, c->dtype, c->ndim,
                                      c->nul & NUL_SHAPE ? NULL : shape);
  th_expect_case(c->name, st, c->want, RS_OK,
                 c->nul & NUL_LAYOUT ? TH_MSG_THREAD : TH_MSG_CTX, g.ctx,
                 c->f1, c->f2 ? c->f2 : c->num ? num : NULL);
  cr_assert_eq(tensors_of(g.l), c->want == RS_OK ? 2 : 1,
               "%s: the layout's tensors changed", c->name);
}

Test(add_tensor, name_is_copied) {
  char name[16];
  strcpy(name, "copied");
  cr_assert_eq(rs_layout_add_tensor(g.l, name, F32, 1, I64(4)), RS_OK);
  strcpy(name, "XXXXXX");
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "copied", F32, 1, I64(4)),
              RS_ERR_DUPLICATE_NAME, g.ctx, "copied", NULL);
}

/* ---------------------------------------------------------- add_shard */

typedef struct shard_case {
  const char *name;
  const char *tensor;  /* NULL: a NULL name */
  const char *decl;    /* a tensor declared first, or NULL */
  rs_dtype decl_dtype;
  int decl_ndim;
  int64_t decl_shape[3];
  int rank;
  int64_t off[3], ext[3];
  int buffer;
  int64_t byte_offset;
  const int64_t *strides; /* NULL: dense */
  unsigned nul;
  rs_status want, also;   /* also: another acceptable status */
  const char *f1, *f2;
} shard_case;

#define SQ "sq", F32, 2, {4, 4}
#define CUBE "cube", U8, 3, {2, 2, 2}
#define NODECL NULL, 0, 0, {0}
#define ROWS(o0, e0) {o0, 0}, {e0, 6} /* rows [o0, o0 + e0) of TNAME */

static const shard_case shard_cases[] = {
    {"tensor_unknown", "no.such.tensor", NODECL, 0, ROWS(0, 8), 0, 0, NULL, 0,
     RS_ERR_UNKNOWN_TENSOR, RS_OK, "no.such.tensor", NULL},
    {"rank_equal_to_world", TNAME, NODECL, 4, ROWS(0, 8), 0, 0, NULL, 0,
     RS_ERR_UNKNOWN_RANK, RS_OK, "4", NULL},
    {"rank_far_above_world", TNAME, NODECL, 1234, ROWS(0, 8), 0, 0, NULL, 0,
     RS_ERR_UNKNOWN_RANK, RS_OK, "1234", NULL},
    {"rank_negative", TNAME, NODECL, -1, ROWS(0, 8), 0, 0, NULL, 0,
     RS_ERR_UNKNOWN_RANK, RS_OK, "-1", NULL},
    {"buffer_negative", TNAME, NODECL, 0, ROWS(0, 8), -3, 0, NULL, 0,
     RS_ERR_UNKNOWN_BUFFER, RS_OK, "-3", NULL},
    {"extent_zero", TNAME, NODECL, 0, {0, 0}, {8, 0}, 0, 0, NULL, 0,
     RS_ERR_BAD_SHAPE, RS_OK, TNAME, NULL},
    {"extent_negative", TNAME, NODECL, 0, ROWS(2, -2), 0, 0, NULL, 0,
     RS_ERR_BAD_SHAPE, RS_OK, "-2", NULL},
    {"offset_negative", TNAME, NODECL, 0, ROWS(-1, 2), 0, 0, NULL, 0,
     RS_ERR_OUT_OF_BOUNDS, RS_OK, TNAME, NULL},
    {"offset_plus_extent_past_shape", TNAME, NODECL, 0, {4, 0}, {4, 7}, 0, 0,
     NULL, 0, RS_ERR_OUT_OF_BOUNDS, RS_OK, TNAME, NULL},
    {"offset_plus_extent_past_shape", TNAME, NODECL, 0, ROWS(5, 4), 0, 0,
     NULL, 0, RS_ERR_OUT_OF_BOUNDS, RS_OK, TNAME, NULL},
    {"offset_at_shape", TNAME, NODECL, 0, ROWS(8, 1), 0, 0, NULL, 0,
     RS_ERR_OUT_OF_BOUNDS, RS_OK, TNAME, NULL},
    /* the end of the box wraps around int64: outside the tensor either
     * way; an implementation may see the wrap first (OVERFLOW) */
    {"offset_plus_extent_wraps_int64", TNAME, NODECL, 0, ROWS(INT64_MAX - 1, 4),
     0, 0, NULL, 0, RS_ERR_OUT_OF_BOUNDS, RS_ERR_OVERFLOW, NULL, NULL},
    {"byte_offset_negative", TNAME, NODECL, 0, ROWS(0, 8), 0, -8, NULL, 0,
     RS_ERR_INVALID_ARGUMENT, RS_OK, "-8", NULL},
    {"stride_zero", TNAME, NODECL, 0, ROWS(0, 8), 0, 0, I64(6, 0), 0,
     RS_ERR_INVALID_ARGUMENT, RS_OK, TNAME, NULL},
    {"stride_negative", TNAME, NODECL, 0, ROWS(0, 8), 0, 64, I64(-6, 1), 0,
     RS_ERR_INVALID_ARGUMENT, RS_OK, "-6", NULL},
    {"strides_1_1_overlap_itself", "sq", SQ, 0, {0, 0}, {4, 4}, 0, 0,
     I64(1, 1), 0, RS_ERR_OVERLAP, RS_OK, "sq", NULL},
    /* row stride 5 < 6 columns: element (1,0) lands on (0,5) */
    {"strides_row_too_short_overlap_itself", TNAME, NODECL, 0, ROWS(0, 8), 0,
     0, I64(5, 1), 0, RS_ERR_OVERLAP, RS_OK, TNAME, NULL},
    /* i*3 + j*2 + k: (0,1,1) and (1,0,0) both at 3 */
    {"strides_3d_overlap_itself", "cube", CUBE, 0, {0, 0, 0}, {2, 2, 2}, 0, 0,
     I64(3, 2, 1), 0, RS_ERR_OVERLAP, RS_OK, "cube", NULL},
    /* i*5 + j*2 + k is fine */
    {"strides_3d_overlap_itself", "cube", CUBE, 0, {0, 0, 0}, {2, 2, 2}, 0, 0,
     I64(5, 2, 1), 0, RS_OK, RS_OK, NULL, NULL},
    /* element offset 3*(INT64_MAX/8) fits; in bytes (x4) it does not */
    {"strided_end_overflows_int64", TNAME, NODECL, 0, ROWS(0, 4), 0, 0,
     I64(INT64_MAX / 8, 1), 0, RS_ERR_OVERFLOW, RS_OK, TNAME, NULL},
    {"strided_end_overflows_int64", TNAME, NODECL, 0, ROWS(0, 4), 0, 0,
     I64(INT64_MAX / 2, 1), 0, RS_ERR_OVERFLOW, RS_OK, TNAME, NULL},
    {"byte_offset_plus_size_overflows_int64", TNAME, NODECL, 0, ROWS(0, 8), 0,
     INT64_MAX - 16, NULL, 0, RS_ERR_OVERFLOW, RS_OK, TNAME, NULL},
    {"null_arguments", TNAME, NODECL, 0, ROWS(0, 8), 0, 0, NULL, NUL_LAYOUT,
     RS_ERR_NULL_POINTER, RS_OK, NULL, NULL},
    {"null_arguments", NULL, NODECL, 0, ROWS(0, 8), 0, 0, NULL, 0,
     RS_ERR_NULL_POINTER, RS_OK, NULL, NULL},
    {"null_arguments", TNAME, NODECL, 0, ROWS(0, 8), 0, 0, NULL, NUL_OFF,
     RS_ERR_NULL_POINTER, RS_OK, NULL, NULL},
    {"null_arguments", TNAME, NODECL, 0, ROWS(0, 8), 0, 0, NULL, NUL_EXT,
     RS_ERR_NULL_POINTER, RS_OK, NULL, NULL},
};

TH_TABLE_TEST(add_shard, cases, shard_cases, i) {
  const shard_case *c = &shard_cases[*i];
  if (c->decl)
    cr_assert_eq(rs_layout_add_tensor(g.l, c->decl, c->decl_dtype,
                                      c->decl_ndim, c->decl_shape), RS_OK);
  rs_status st = rs_layout_add_shard(
      c->nul & NUL_LAYOUT ? NULL : g.l, c->tensor, c->rank,
      c->nul & NUL_OFF ? NULL : c->off, c->nul & NUL_EXT ? NULL : c->ext,
      c->buffer, c->byte_offset, c->strides);
  th_expect_case(c->name, st, c->want, c->also,
                 c->nul & NUL_LAYOUT ? TH_MSG_THREAD : TH_MSG_CTX, g.ctx,
                 c->f1, c->f2);
  cr_assert_eq(shards_of(g.l), c->want == RS_OK ? 1 : 0,
               "%s: the layout's shards changed", c->name);
}

Test(add_shard, valid_unusual_strides_are_accepted) {
  /* column-major */
  cr_assert_eq(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0, 0,
                                   I64(1, 8)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
  /* a size-1 dim's stride does not matter, even 1 over 1 */
  cr_assert_eq(rs_layout_add_shard(g.l, TNAME, 1, I64(0, 0), I64(1, 6), 0, 0,
                                   I64(1, 1)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
  cr_assert_eq(rs_layout_add_shard(g.l, TNAME, 1, I64(0, 0), I64(8, 1), 1, 0,
                                   I64(1, 1)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
  /* padded rows */
  cr_assert_eq(rs_layout_add_shard(g.l, TNAME, 2, I64(0, 0), I64(8, 6), 0, 0,
                                   I64(100, 1)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
  cr_assert_eq(shards_of(g.l), 4);
}

/* -------------------------------------------------------- add_dtensor */

typedef struct dtensor_case {
  const char *name;
  const char *tensor;
  int mesh_ndim;
  int64_t mesh[2];
  int ranks[3];
  int placements[2];
  int buffer;
  int64_t byte_offset;
  unsigned nul;
  rs_status want;
  const char *f1;
} dtensor_case;

static const dtensor_case dtensor_cases[] = {
    {"placement_not_a_dim", TNAME, 1, {2}, {0, 1}, {2}, 0, 0, 0,
     RS_ERR_INVALID_ARGUMENT, "2"},
    {"placement_not_a_dim", TNAME, 1, {2}, {0, 1}, {-2}, 0, 0, 0,
     RS_ERR_INVALID_ARGUMENT, "-2"},
    {"mesh_axis_zero", TNAME, 2, {2, 0}, {0, 1}, {0, 1}, 0, 0, 0,
     RS_ERR_INVALID_ARGUMENT, NULL},
    {"mesh_axis_negative", TNAME, 1, {-2}, {0, 1}, {0}, 0, 0, 0,
     RS_ERR_INVALID_ARGUMENT, "-2"},
    {"mesh_rank_duplicate", TNAME, 1, {3}, {0, 2, 0}, {0}, 0, 0, 0,
     RS_ERR_INVALID_ARGUMENT, NULL},
    /* the bad rank comes last: nothing may have been added before it */
    {"mesh_rank_outside_world", TNAME, 1, {3}, {0, 1, 9}, {0}, 0, 0, 0,
     RS_ERR_UNKNOWN_RANK, "9"},
    {"mesh_rank_outside_world", TNAME, 1, {2}, {0, -1}, {RS_REPLICATE}, 0, 0,
     0, RS_ERR_UNKNOWN_RANK, "-1"},
    {"tensor_unknown", "ghost", 1, {2}, {0, 1}, {0}, 0, 0, 0,
     RS_ERR_UNKNOWN_TENSOR, "ghost"},
    {"buffer_negative", TNAME, 1, {2}, {0, 1}, {0}, -1, 0, 0,
     RS_ERR_UNKNOWN_BUFFER, NULL},
    {"byte_offset_negative", TNAME, 1, {2}, {0, 1}, {0}, 0, -5, 0,
     RS_ERR_INVALID_ARGUMENT, "-5"},
    {"byte_offset_overflows", TNAME, 1, {2}, {0, 1}, {0}, 0, INT64_MAX - 4, 0,
     RS_ERR_OVERFLOW, NULL},
    {"null_arguments", TNAME, 1, {2}, {0, 1}, {0}, 0, 0, NUL_LAYOUT,
     RS_ERR_NULL_POINTER, NULL},
    {"null_arguments", NULL, 1, {2}, {0, 1}, {0}, 0, 0, 0,
     RS_ERR_NULL_POINTER, NULL},
    {"null_arguments", TNAME, 1, {2}, {0, 1}, {0}, 0, 0, NUL_MESH,
     RS_ERR_NULL_POINTER, NULL},
    {"null_arguments", TNAME, 1, {2}, {0, 1}, {0}, 0, 0, NUL_RANKS,
     RS_ERR_NULL_POINTER, NULL},
    {"null_arguments", TNAME, 1, {2}, {0, 1}, {0}, 0, 0, NUL_PLACEMENTS,
     RS_ERR_NULL_POINTER, NULL},
};

TH_TABLE_TEST(add_dtensor, cases, dtensor_cases, i) {
  const dtensor_case *c = &dtensor_cases[*i];
  rs_status st = rs_layout_add_dtensor(
      c->nul & NUL_LAYOUT ? NULL : g.l, c->tensor, c->mesh_ndim,
      c->nul & NUL_MESH ? NULL : c->mesh, c->nul & NUL_RANKS ? NULL : c->ranks,
      c->nul & NUL_PLACEMENTS ? NULL : c->placements, c->buffer,
      c->byte_offset);
  th_expect_case(c->name, st, c->want, RS_OK,
                 c->nul & NUL_LAYOUT ? TH_MSG_THREAD : TH_MSG_CTX, g.ctx,
                 c->f1, NULL);
  cr_assert_eq(shards_of(g.l), 0, "%s: a failed add_dtensor added shards",
               c->name);
}

/* ------------------------------------------------- rs_dtensor_local_box */

typedef struct box_case {
  const char *name;
  int ndim;
  int64_t shape[RS_MAX_DIMS + 1];
  int64_t fill; /* nonzero: every dim of the shape is this */
  int64_t mesh;
  int placement;
  int64_t coord;
  unsigned nul;
  rs_status want;
  const char *f1;
} box_case;

static const box_case box_cases[] = {
    {"coord_outside_mesh", 2, {8, 6}, 0, 4, 0, 4, 0, RS_ERR_INVALID_ARGUMENT,
     "4"},
    {"coord_outside_mesh", 2, {8, 6}, 0, 4, 0, -1, 0, RS_ERR_INVALID_ARGUMENT,
     "-1"},
    {"bad_placement", 2, {8, 6}, 0, 4, 2, 0, 0, RS_ERR_INVALID_ARGUMENT, NULL},
    {"bad_placement", 2, {8, 6}, 0, 4, -5, 0, 0, RS_ERR_INVALID_ARGUMENT,
     "-5"},
    {"mesh_axis_zero", 2, {8, 6}, 0, 0, 0, 0, 0, RS_ERR_INVALID_ARGUMENT,
     NULL},
    {"bad_shape", 2, {8, 0}, 0, 2, 0, 0, 0, RS_ERR_BAD_SHAPE, NULL},
    {"bad_shape", 0, {8}, 0, 2, RS_REPLICATE, 0, 0, RS_ERR_BAD_SHAPE, NULL},
    {"too_many_dims", RS_MAX_DIMS + 1, {0}, 2, 2, 0, 0, 0,
     RS_ERR_TOO_MANY_DIMS, NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_SHAPE, RS_ERR_NULL_POINTER,
     NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_MESH, RS_ERR_NULL_POINTER,
     NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_PLACEMENTS,
     RS_ERR_NULL_POINTER, NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_COORD, RS_ERR_NULL_POINTER,
     NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_OFF, RS_ERR_NULL_POINTER,
     NULL},
    {"null_arguments", 2, {8, 6}, 0, 2, 0, 0, NUL_EXT, RS_ERR_NULL_POINTER,
     NULL},
};

TH_TABLE_TEST(local_box, cases, box_cases, i) {
  const box_case *c = &box_cases[*i];
  int64_t shape[RS_MAX_DIMS + 1], off[RS_MAX_DIMS + 1], ext[RS_MAX_DIMS + 1];
  memcpy(shape, c->shape, sizeof shape);
  for (int d = 0; c->fill && d < c->ndim && d <= RS_MAX_DIMS; d++)
    shape[d] = c->fill;
  rs_status st = rs_dtensor_local_box(
      c->ndim, c->nul & NUL_SHAPE ? NULL : shape, 1,
      c->nul & NUL_MESH ? NULL : &c->mesh,
      c->nul & NUL_PLACEMENTS ? NULL : &c->placement,
      c->nul & NUL_COORD ? NULL : &c->coord, c->nul & NUL_OFF ? NULL : off,
      c->nul & NUL_EXT ? NULL : ext);
  th_expect_case(c->name, st, c->want, RS_OK, TH_MSG_THREAD, NULL, c->f1,
                 NULL);
}

/* ------------------------------------------------ NULL layout handles */

typedef enum layout_call { L_CREATE, L_NUM_TENSORS, L_NUM_SHARDS } layout_call;

typedef struct handle_case {
  const char *name;
  layout_call call;
  bool null_handle, null_out;
} handle_case;

/* Each fails with RS_ERR_NULL_POINTER, a message (on the context when
 * there is one, else on the thread), and the out-pointer it was given
 * cleared. */
static const handle_case handle_cases[] = {
    {"create_null", L_CREATE, true, false},
    {"create_null", L_CREATE, false, true},
    {"counts_null", L_NUM_TENSORS, true, false},
    {"counts_null", L_NUM_TENSORS, false, true},
    {"counts_null", L_NUM_SHARDS, true, false},
    {"counts_null", L_NUM_SHARDS, false, true},
    {"outs_cleared.layout_create_null_ctx", L_CREATE, true, false},
    {"outs_cleared.layout_num_tensors_null_layout", L_NUM_TENSORS, true,
     false},
    {"outs_cleared.layout_num_shards_null_layout", L_NUM_SHARDS, true, false},
};

TH_TABLE_TEST(layout, null_handles, handle_cases, i) {
  const handle_case *c = &handle_cases[*i];
  rs_layout *made = SENTINEL;
  int n = 5;
  int64_t ns = 5;
  rs_status st = RS_OK;
  switch (c->call) {
  case L_CREATE:
    st = rs_layout_create(c->null_handle ? NULL : g.ctx,
                          c->null_out ? NULL : &made);
    if (!c->null_out) cr_assert_null(made, "%s: out not cleared", c->name);
    break;
  case L_NUM_TENSORS:
    st = rs_layout_num_tensors(c->null_handle ? NULL : g.l,
                               c->null_out ? NULL : &n);
    if (!c->null_out) cr_assert_eq(n, 0, "%s: out left at %d", c->name, n);
    break;
  case L_NUM_SHARDS:
    st = rs_layout_num_shards(c->null_handle ? NULL : g.l,
                              c->null_out ? NULL : &ns);
    if (!c->null_out)
      cr_assert_eq(ns, 0, "%s: out left at %lld", c->name, (long long)ns);
    break;
  }
  th_expect_case(c->name, st, RS_ERR_NULL_POINTER, RS_OK,
                 c->null_handle ? TH_MSG_THREAD : TH_MSG_CTX, g.ctx, NULL,
                 NULL);
}
