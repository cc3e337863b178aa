/* A catalog of malformed inputs through the public API. Each Test is named
 * after the malformed input; each asserts the exact rs_status, that a
 * message naming the problem was recorded (the tensor name or the offending
 * value appears), that out-pointers are NULL/0 on failure, and where bytes
 * could move, that no destination byte changed. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "rt_util.h"

#include <stdio.h>
#include <string.h>

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define INTS(...) ((const int[]){__VA_ARGS__})

#define TNAME "layers.0.attn.qkv"

/* ------------------------------------------------------------ the fixture */

static struct {
  rs_context *ctx;
  rs_layout *l;   /* world 4, tensor TNAME f32 [8,6] declared */
} g;

static void fx_setup(void) {
  memset(&g, 0, sizeof g);
  cr_assert_eq(rs_context_create_local(4, &g.ctx), RS_OK);
  cr_assert_eq(rs_layout_create(g.ctx, &g.l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(g.l, TNAME, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
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

/* The message of a failure: on ctx, or the per-thread one without ctx. */
static const char *msg_of(const rs_context *ctx) {
  return ctx ? rs_context_last_error(ctx) : rs_last_error();
}

/* Assert status `want` from `got`, a non-empty message on ctx (NULL: the
 * per-thread text) containing every fragment given (NULL ends the list). */
static void expect_fail_(const char *what, rs_status got, rs_status want,
                         const rs_context *ctx, const char *frag1,
                         const char *frag2) {
  const char *m = msg_of(ctx);
  cr_assert_eq(got, want, "%s: got %s, want %s (message: '%s')", what,
               rs_status_name(got), rs_status_name(want), m ? m : "(null)");
  cr_assert_not_null(m, "%s: message is NULL", what);
  cr_assert_gt(strlen(m), 0, "%s: no message recorded", what);
  if (frag1)
    cr_assert(rt_contains(m, frag1), "%s: message '%s' lacks '%s'", what, m,
              frag1);
  if (frag2)
    cr_assert(rt_contains(m, frag2), "%s: message '%s' lacks '%s'", what, m,
              frag2);
}
#define EXPECT_FAIL(call, want, ctx, f1, f2) \
  expect_fail_(#call, (call), (want), (ctx), (f1), (f2))

/* A non-NULL value to preset out-pointers with, to see them cleared. */
static int sentinel_obj;
#define SENTINEL ((void *)&sentinel_obj)

TestSuite(add_tensor, .init = fx_setup, .fini = fx_teardown);
TestSuite(add_shard, .init = fx_setup, .fini = fx_teardown);
TestSuite(add_dtensor, .init = fx_setup, .fini = fx_teardown);

/* --------------------------------------------------------- add_tensor */

Test(add_tensor, shape_has_zero) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "zero", RS_DTYPE_F32, 3,
                                   I64(4, 0, 2)),
              RS_ERR_BAD_SHAPE, g.ctx, "zero", NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, shape_negative) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "neg", RS_DTYPE_F32, 2, I64(4, -3)),
              RS_ERR_BAD_SHAPE, g.ctx, "neg", "-3");
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, ndim_zero) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "scalar", RS_DTYPE_F32, 0, I64(1)),
              RS_ERR_BAD_SHAPE, g.ctx, "scalar", NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, ndim_negative) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "t", RS_DTYPE_F32, -2, I64(1)),
              RS_ERR_BAD_SHAPE, g.ctx, "-2", NULL);
}

Test(add_tensor, ndim_above_max) {
  int64_t shape[RS_MAX_DIMS + 1];
  for (int i = 0; i <= RS_MAX_DIMS; i++) shape[i] = 1;
  char want[16];
  snprintf(want, sizeof want, "%d", RS_MAX_DIMS + 1);
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "deep", RS_DTYPE_F32,
                                   RS_MAX_DIMS + 1, shape),
              RS_ERR_TOO_MANY_DIMS, g.ctx, "deep", want);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, ndim_max_is_fine) {
  int64_t shape[RS_MAX_DIMS];
  for (int i = 0; i < RS_MAX_DIMS; i++) shape[i] = 2;
  cr_assert_eq(rs_layout_add_tensor(g.l, "deep", RS_DTYPE_U8, RS_MAX_DIMS,
                                    shape),
               RS_OK, "%s", rs_context_last_error(g.ctx));
}

Test(add_tensor, dtype_unknown) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "odd", (rs_dtype)99, 1, I64(4)),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "99", NULL);
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "odd", (rs_dtype)0, 1, I64(4)),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "odd", NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, name_empty) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "", RS_DTYPE_F32, 1, I64(4)),
              RS_ERR_INVALID_ARGUMENT, g.ctx, NULL, NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, name_null) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, NULL, RS_DTYPE_F32, 1, I64(4)),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
}

Test(add_tensor, shape_null) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "t", RS_DTYPE_F32, 1, NULL),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
}

Test(add_tensor, layout_null) {
  EXPECT_FAIL(rs_layout_add_tensor(NULL, "t", RS_DTYPE_F32, 1, I64(4)),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
}

Test(add_tensor, name_duplicate) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, TNAME, RS_DTYPE_F32, 2, I64(8, 6)),
              RS_ERR_DUPLICATE_NAME, g.ctx, TNAME, NULL);
  /* a different dtype/shape does not make it another tensor */
  EXPECT_FAIL(rs_layout_add_tensor(g.l, TNAME, RS_DTYPE_U8, 1, I64(3)),
              RS_ERR_DUPLICATE_NAME, g.ctx, TNAME, NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, name_is_copied) {
  char name[16];
  strcpy(name, "copied");
  cr_assert_eq(rs_layout_add_tensor(g.l, name, RS_DTYPE_F32, 1, I64(4)),
               RS_OK);
  strcpy(name, "XXXXXX");
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "copied", RS_DTYPE_F32, 1, I64(4)),
              RS_ERR_DUPLICATE_NAME, g.ctx, "copied", NULL);
}

Test(add_tensor, element_count_overflows_int64) {
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "huge", RS_DTYPE_U8, 2,
                                   I64((int64_t)1 << 32, (int64_t)1 << 32)),
              RS_ERR_OVERFLOW, g.ctx, "huge", NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, byte_count_overflows_int64) {
  /* 2^62 elements fit, 2^65 bytes do not */
  EXPECT_FAIL(rs_layout_add_tensor(g.l, "huge64", RS_DTYPE_F64, 2,
                                   I64((int64_t)1 << 31, (int64_t)1 << 31)),
              RS_ERR_OVERFLOW, g.ctx, "huge64", NULL);
  cr_assert_eq(tensors_of(g.l), 1);
}

Test(add_tensor, huge_but_representable_is_fine) {
  /* declaring a tensor allocates nothing: 2^62 bytes is a valid shape */
  cr_assert_eq(rs_layout_add_tensor(g.l, "big", RS_DTYPE_U8, 3,
                                    I64((int64_t)1 << 30, (int64_t)1 << 30,
                                        4)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
}

/* ---------------------------------------------------------- add_shard */

Test(add_shard, tensor_unknown) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, "no.such.tensor", 0, I64(0, 0),
                                  I64(8, 6), 0, 0, NULL),
              RS_ERR_UNKNOWN_TENSOR, g.ctx, "no.such.tensor", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, rank_equal_to_world) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 4, I64(0, 0), I64(8, 6), 0, 0,
                                  NULL),
              RS_ERR_UNKNOWN_RANK, g.ctx, "4", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, rank_far_above_world) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 1234, I64(0, 0), I64(8, 6), 0,
                                  0, NULL),
              RS_ERR_UNKNOWN_RANK, g.ctx, "1234", NULL);
}

Test(add_shard, rank_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, -1, I64(0, 0), I64(8, 6), 0, 0,
                                  NULL),
              RS_ERR_UNKNOWN_RANK, g.ctx, "-1", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, buffer_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), -3, 0,
                                  NULL),
              RS_ERR_UNKNOWN_BUFFER, g.ctx, "-3", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, extent_zero) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 0), 0, 0,
                                  NULL),
              RS_ERR_BAD_SHAPE, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, extent_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(2, 0), I64(-2, 6), 0, 0,
                                  NULL),
              RS_ERR_BAD_SHAPE, g.ctx, "-2", NULL);
}

Test(add_shard, offset_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(-1, 0), I64(2, 6), 0, 0,
                                  NULL),
              RS_ERR_OUT_OF_BOUNDS, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, offset_plus_extent_past_shape) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(4, 0), I64(4, 7), 0, 0,
                                  NULL),
              RS_ERR_OUT_OF_BOUNDS, g.ctx, TNAME, NULL);
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(5, 0), I64(4, 6), 0, 0,
                                  NULL),
              RS_ERR_OUT_OF_BOUNDS, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, offset_at_shape) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(8, 0), I64(1, 6), 0, 0,
                                  NULL),
              RS_ERR_OUT_OF_BOUNDS, g.ctx, TNAME, NULL);
}

Test(add_shard, offset_plus_extent_wraps_int64) {
  /* the end of the box wraps around int64: outside the tensor either way;
   * an implementation may see the wrap first (OVERFLOW) */
  rs_status st = rs_layout_add_shard(g.l, TNAME, 0, I64(INT64_MAX - 1, 0),
                                     I64(4, 6), 0, 0, NULL);
  cr_assert(st == RS_ERR_OUT_OF_BOUNDS || st == RS_ERR_OVERFLOW, "got %s",
            rs_status_name(st));
  cr_assert_gt(strlen(rs_context_last_error(g.ctx)), 0);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, byte_offset_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0, -8,
                                  NULL),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "-8", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, stride_zero) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0, 0,
                                  I64(6, 0)),
              RS_ERR_INVALID_ARGUMENT, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, stride_negative) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0, 64,
                                  I64(-6, 1)),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "-6", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, strides_1_1_overlap_itself) {
  rs_layout *l = NULL;
  cr_assert_eq(rs_layout_create(g.ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "sq", RS_DTYPE_F32, 2, I64(4, 4)),
               RS_OK);
  EXPECT_FAIL(rs_layout_add_shard(l, "sq", 0, I64(0, 0), I64(4, 4), 0, 0,
                                  I64(1, 1)),
              RS_ERR_OVERLAP, g.ctx, "sq", NULL);
  cr_assert_eq(shards_of(l), 0);
  rs_layout_destroy(l);
}

Test(add_shard, strides_row_too_short_overlap_itself) {
  /* row stride 5 < 6 columns: element (1,0) lands on (0,5) */
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0, 0,
                                  I64(5, 1)),
              RS_ERR_OVERLAP, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, strides_3d_overlap_itself) {
  rs_layout *l = NULL;
  cr_assert_eq(rs_layout_create(g.ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "cube", RS_DTYPE_U8, 3, I64(2, 2, 2)),
               RS_OK);
  /* i*3 + j*2 + k: (0,1,1) and (1,0,0) both at 3 */
  EXPECT_FAIL(rs_layout_add_shard(l, "cube", 0, I64(0, 0, 0), I64(2, 2, 2), 0,
                                  0, I64(3, 2, 1)),
              RS_ERR_OVERLAP, g.ctx, "cube", NULL);
  /* i*5 + j*2 + k is fine */
  cr_assert_eq(rs_layout_add_shard(l, "cube", 0, I64(0, 0, 0), I64(2, 2, 2),
                                   0, 0, I64(5, 2, 1)),
               RS_OK, "%s", rs_context_last_error(g.ctx));
  rs_layout_destroy(l);
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

Test(add_shard, strided_end_overflows_int64) {
  /* element offset 3*(INT64_MAX/8) fits; in bytes (x4) it does not */
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(4, 6), 0, 0,
                                  I64(INT64_MAX / 8, 1)),
              RS_ERR_OVERFLOW, g.ctx, TNAME, NULL);
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(4, 6), 0, 0,
                                  I64(INT64_MAX / 2, 1)),
              RS_ERR_OVERFLOW, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, byte_offset_plus_size_overflows_int64) {
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), I64(8, 6), 0,
                                  INT64_MAX - 16, NULL),
              RS_ERR_OVERFLOW, g.ctx, TNAME, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_shard, null_arguments) {
  EXPECT_FAIL(rs_layout_add_shard(NULL, TNAME, 0, I64(0, 0), I64(8, 6), 0, 0,
                                  NULL),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_shard(g.l, NULL, 0, I64(0, 0), I64(8, 6), 0, 0,
                                  NULL),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, NULL, I64(8, 6), 0, 0, NULL),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_shard(g.l, TNAME, 0, I64(0, 0), NULL, 0, 0, NULL),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

/* -------------------------------------------------------- add_dtensor */

Test(add_dtensor, placement_not_a_dim) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(2), 0, 0),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "2", NULL);
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(-2), 0, 0),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "-2", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_dtensor, mesh_axis_zero) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 2, I64(2, 0), INTS(0, 1),
                                    INTS(0, 1), 0, 0),
              RS_ERR_INVALID_ARGUMENT, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_dtensor, mesh_axis_negative) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(-2), INTS(0, 1),
                                    INTS(0), 0, 0),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "-2", NULL);
}

Test(add_dtensor, mesh_rank_duplicate) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(3), INTS(0, 2, 0),
                                    INTS(0), 0, 0),
              RS_ERR_INVALID_ARGUMENT, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0, "a failed add_dtensor added shards");
}

Test(add_dtensor, mesh_rank_outside_world) {
  /* the bad rank comes last: nothing may have been added before it */
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(3), INTS(0, 1, 9),
                                    INTS(0), 0, 0),
              RS_ERR_UNKNOWN_RANK, g.ctx, "9", NULL);
  cr_assert_eq(shards_of(g.l), 0, "a failed add_dtensor added shards");
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, -1),
                                    INTS(RS_REPLICATE), 0, 0),
              RS_ERR_UNKNOWN_RANK, g.ctx, "-1", NULL);
  cr_assert_eq(shards_of(g.l), 0, "a failed add_dtensor added shards");
}

Test(add_dtensor, tensor_unknown) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, "ghost", 1, I64(2), INTS(0, 1),
                                    INTS(0), 0, 0),
              RS_ERR_UNKNOWN_TENSOR, g.ctx, "ghost", NULL);
}

Test(add_dtensor, buffer_negative) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(0), -1, 0),
              RS_ERR_UNKNOWN_BUFFER, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_dtensor, byte_offset_negative) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(0), 0, -5),
              RS_ERR_INVALID_ARGUMENT, g.ctx, "-5", NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_dtensor, byte_offset_overflows) {
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(0), 0, INT64_MAX - 4),
              RS_ERR_OVERFLOW, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

Test(add_dtensor, null_arguments) {
  EXPECT_FAIL(rs_layout_add_dtensor(NULL, TNAME, 1, I64(2), INTS(0, 1),
                                    INTS(0), 0, 0),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, NULL, 1, I64(2), INTS(0, 1),
                                    INTS(0), 0, 0),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, NULL, INTS(0, 1), INTS(0),
                                    0, 0),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), NULL, INTS(0), 0,
                                    0),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  EXPECT_FAIL(rs_layout_add_dtensor(g.l, TNAME, 1, I64(2), INTS(0, 1), NULL,
                                    0, 0),
              RS_ERR_NULL_POINTER, g.ctx, NULL, NULL);
  cr_assert_eq(shards_of(g.l), 0);
}

/* ------------------------------------------------- rs_dtensor_local_box */

Test(local_box, coord_outside_mesh) {
  int64_t off[2] = {7, 7}, ext[2] = {7, 7};
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(4), INTS(0), I64(4),
                                   off, ext),
              RS_ERR_INVALID_ARGUMENT, NULL, "4", NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(4), INTS(0), I64(-1),
                                   off, ext),
              RS_ERR_INVALID_ARGUMENT, NULL, "-1", NULL);
}

Test(local_box, bad_placement) {
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(4), INTS(2), I64(0),
                                   off, ext),
              RS_ERR_INVALID_ARGUMENT, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(4), INTS(-5), I64(0),
                                   off, ext),
              RS_ERR_INVALID_ARGUMENT, NULL, "-5", NULL);
}

Test(local_box, mesh_axis_zero) {
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(0), INTS(0), I64(0),
                                   off, ext),
              RS_ERR_INVALID_ARGUMENT, NULL, NULL, NULL);
}

Test(local_box, bad_shape) {
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 0), 1, I64(2), INTS(0), I64(0),
                                   off, ext),
              RS_ERR_BAD_SHAPE, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(0, I64(8), 1, I64(2), INTS(RS_REPLICATE),
                                   I64(0), off, ext),
              RS_ERR_BAD_SHAPE, NULL, NULL, NULL);
}

Test(local_box, too_many_dims) {
  int64_t shape[RS_MAX_DIMS + 1], off[RS_MAX_DIMS + 1], ext[RS_MAX_DIMS + 1];
  for (int i = 0; i <= RS_MAX_DIMS; i++) shape[i] = 2;
  EXPECT_FAIL(rs_dtensor_local_box(RS_MAX_DIMS + 1, shape, 1, I64(2), INTS(0),
                                   I64(0), off, ext),
              RS_ERR_TOO_MANY_DIMS, NULL, NULL, NULL);
}

Test(local_box, null_arguments) {
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_dtensor_local_box(2, NULL, 1, I64(2), INTS(0), I64(0), off,
                                   ext),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, NULL, INTS(0), I64(0),
                                   off, ext),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(2), NULL, I64(0), off,
                                   ext),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(2), INTS(0), NULL,
                                   off, ext),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(2), INTS(0), I64(0),
                                   NULL, ext),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_dtensor_local_box(2, I64(8, 6), 1, I64(2), INTS(0), I64(0),
                                   off, NULL),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
}

/* ------------------------------------------------------------ context */

Test(context, world_size_zero) {
  rs_context *ctx = SENTINEL;
  EXPECT_FAIL(rs_context_create_local(0, &ctx), RS_ERR_INVALID_ARGUMENT,
              NULL, "0", NULL);
  cr_assert_null(ctx);
}

Test(context, world_size_negative) {
  rs_context *ctx = SENTINEL;
  EXPECT_FAIL(rs_context_create_local(-3, &ctx), RS_ERR_INVALID_ARGUMENT,
              NULL, "-3", NULL);
  cr_assert_null(ctx);
}

Test(context, world_size_above_limit) {
  rs_context *ctx = SENTINEL;
  EXPECT_FAIL(rs_context_create_local((1 << 24) + 1, &ctx),
              RS_ERR_INVALID_ARGUMENT, NULL, "16777217", NULL);
  cr_assert_null(ctx);
}

Test(context, out_null) {
  EXPECT_FAIL(rs_context_create_local(2, NULL), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
}

Test(context, null_handles_and_outs) {
  rs_context *ctx = NULL;
  int i = 5;
  rs_transport_kind k = RS_TRANSPORT_MPI;
  int64_t v = 5;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_world_size(NULL, &i), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_context_world_size(ctx, NULL), RS_ERR_NULL_POINTER, ctx,
              NULL, NULL);
  i = 5;
  EXPECT_FAIL(rs_context_rank(NULL, &i), RS_ERR_NULL_POINTER, NULL, NULL,
              NULL);
  EXPECT_FAIL(rs_context_rank(ctx, NULL), RS_ERR_NULL_POINTER, ctx, NULL,
              NULL);
  EXPECT_FAIL(rs_context_transport(NULL, &k), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_context_transport(ctx, NULL), RS_ERR_NULL_POINTER, ctx,
              NULL, NULL);
  EXPECT_FAIL(rs_context_set_domain(NULL, 0, 0), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  i = 5;
  EXPECT_FAIL(rs_context_get_domain(NULL, 0, &i), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_context_get_domain(ctx, 0, NULL), RS_ERR_NULL_POINTER, ctx,
              NULL, NULL);
  EXPECT_FAIL(rs_context_set_domain_size(NULL, 2), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_context_set_param(NULL, RS_PARAM_TIMEOUT_MS, 5),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_context_get_param(NULL, RS_PARAM_TIMEOUT_MS, &v),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_context_get_param(ctx, RS_PARAM_TIMEOUT_MS, NULL),
              RS_ERR_NULL_POINTER, ctx, NULL, NULL);
  rs_context_destroy(ctx);
}

Test(context, set_domain_rank_unknown) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_set_domain(ctx, 3, 0), RS_ERR_UNKNOWN_RANK, ctx,
              "3", NULL);
  EXPECT_FAIL(rs_context_set_domain(ctx, -4, 0), RS_ERR_UNKNOWN_RANK, ctx,
              "-4", NULL);
  rs_context_destroy(ctx);
}

Test(context, set_domain_negative_domain) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_set_domain(ctx, 1, -6), RS_ERR_INVALID_ARGUMENT, ctx,
              "-6", NULL);
  rs_context_destroy(ctx);
}

Test(context, set_domain_size_zero) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_set_domain_size(ctx, 0), RS_ERR_INVALID_ARGUMENT,
              ctx, "0", NULL);
  rs_context_destroy(ctx);
}

Test(params, value_out_of_bounds) {
  rs_context *ctx = NULL;
  int64_t v = 0;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, 1000),
              RS_ERR_BAD_PARAM, ctx, "1000", NULL);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_STAGING_BYTES, &v), RS_OK);
  cr_assert_eq(v, 256LL << 20, "setting changed by a rejected set");
  EXPECT_FAIL(rs_context_set_param(ctx, RS_PARAM_TIMEOUT_MS, 0),
              RS_ERR_BAD_PARAM, ctx, NULL, NULL);
  cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_TIMEOUT_MS, &v), RS_OK);
  cr_assert_eq(v, 60000);
  rs_context_destroy(ctx);
}

Test(params, param_unknown) {
  rs_context *ctx = NULL;
  int64_t v = 9, lo = 9, hi = 9;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  EXPECT_FAIL(rs_context_set_param(ctx, (rs_param)4242, 1), RS_ERR_BAD_PARAM,
              ctx, "4242", NULL);
  EXPECT_FAIL(rs_context_get_param(ctx, (rs_param)4242, &v), RS_ERR_BAD_PARAM,
              ctx, "4242", NULL);
  cr_assert_eq(v, 0);
  EXPECT_FAIL(rs_param_bounds((rs_param)4242, &lo, &hi), RS_ERR_BAD_PARAM,
              NULL, "4242", NULL);
  cr_assert_eq(lo, 0);
  cr_assert_eq(hi, 0);
  rs_context_destroy(ctx);
}

Test(params, bounds_null_outs) {
  int64_t lo = 0, hi = 0;
  EXPECT_FAIL(rs_param_bounds(RS_PARAM_TIMEOUT_MS, NULL, &hi),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_param_bounds(RS_PARAM_TIMEOUT_MS, &lo, NULL),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
}

/* ----------------------------------------------------------- layouts */

Test(layout, create_null) {
  rs_context *ctx = NULL;
  rs_layout *l = SENTINEL;
  EXPECT_FAIL(rs_layout_create(NULL, &l), RS_ERR_NULL_POINTER, NULL, NULL,
              NULL);
  cr_assert_null(l);
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  EXPECT_FAIL(rs_layout_create(ctx, NULL), RS_ERR_NULL_POINTER, ctx, NULL,
              NULL);
  rs_context_destroy(ctx);
}

Test(layout, counts_null) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  int n = 5;
  int64_t ns = 5;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  EXPECT_FAIL(rs_layout_num_tensors(NULL, &n), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_layout_num_tensors(l, NULL), RS_ERR_NULL_POINTER, ctx, NULL,
              NULL);
  EXPECT_FAIL(rs_layout_num_shards(NULL, &ns), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_layout_num_shards(l, NULL), RS_ERR_NULL_POINTER, ctx, NULL,
              NULL);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

/* -------------------------------------------------------------- plans */

/* Plan fixture: world 4; src rank 0 holds the whole f32 [8,6] tensor in its
 * buffer 0; dst ranks 1 and 2 hold rows [0,4) and [4,8) in buffer 3. */
static struct {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  float *sbuf;
  unsigned char *d1, *d2;
} p;

#define PT "model.layers.7.mlp.down_proj.weight"
#define ROWB (6 * 4)

static void px_layouts(void) {
  memset(&p, 0, sizeof p);
  cr_assert_eq(rs_context_create_local(4, &p.ctx), RS_OK);
  cr_assert_eq(rs_layout_create(p.ctx, &p.src), RS_OK);
  cr_assert_eq(rs_layout_create(p.ctx, &p.dst), RS_OK);
}

static void px_standard(void) {
  px_layouts();
  cr_assert_eq(rs_layout_add_tensor(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 0, I64(0, 0), I64(8, 6), 0, 0,
                                   NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 1, I64(0, 0), I64(4, 6), 3, 0,
                                   NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 2, I64(4, 0), I64(4, 6), 3, 0,
                                   NULL),
               RS_OK);
  cr_assert_eq(rs_plan_create(p.src, p.dst, &p.plan), RS_OK, "%s",
               rs_context_last_error(p.ctx));
  p.sbuf = malloc(8 * ROWB);
  p.d1 = malloc(4 * ROWB);
  p.d2 = malloc(4 * ROWB);
  for (int i = 0; i < 48; i++) p.sbuf[i] = (float)i + 0.5f;
  memset(p.d1, RT_POISON, 4 * ROWB);
  memset(p.d2, RT_POISON, 4 * ROWB);
}

static void px_teardown(void) {
  rs_plan_destroy(p.plan);
  rs_layout_destroy(p.src);
  rs_layout_destroy(p.dst);
  rs_context_destroy(p.ctx);
  free(p.sbuf);
  free(p.d1);
  free(p.d2);
}

static void expect_poisoned(const unsigned char *b, size_t n,
                            const char *what) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != RT_POISON)
      cr_assert_fail("%s: destination byte %zu changed to 0x%02x", what, i,
                     b[i]);
}

TestSuite(plan_create, .init = px_layouts, .fini = px_teardown);
TestSuite(plan_query, .init = px_standard, .fini = px_teardown);
TestSuite(bind, .init = px_standard, .fini = px_teardown);
TestSuite(execute, .init = px_standard, .fini = px_teardown);

static void decl(rs_layout *l, const char *name, rs_dtype dt, int ndim,
                 const int64_t *shape) {
  cr_assert_eq(rs_layout_add_tensor(l, name, dt, ndim, shape), RS_OK, "%s",
               rs_context_last_error(p.ctx));
}

static void full(rs_layout *l, const char *name, int rank, int ndim,
                 const int64_t *shape, int buffer, int64_t byte_offset) {
  int64_t off[RS_MAX_DIMS] = {0};
  cr_assert_eq(rs_layout_add_shard(l, name, rank, off, shape, buffer,
                                   byte_offset, NULL),
               RS_OK, "%s", rs_context_last_error(p.ctx));
}

static void expect_plan_fail(rs_status want, const char *frag1,
                             const char *frag2) {
  rs_plan *plan = SENTINEL;
  rs_status st = rs_plan_create(p.src, p.dst, &plan);
  expect_fail_("rs_plan_create", st, want, p.ctx, frag1, frag2);
  cr_assert_null(plan, "out-pointer set to NULL on failure");
}

Test(plan_create, layouts_from_two_contexts) {
  rs_context *other = NULL;
  rs_layout *odst = NULL;
  rs_plan *plan = SENTINEL;
  cr_assert_eq(rs_context_create_local(4, &other), RS_OK);
  cr_assert_eq(rs_layout_create(other, &odst), RS_OK);
  decl(p.src, "t", RS_DTYPE_F32, 1, I64(4));
  decl(odst, "t", RS_DTYPE_F32, 1, I64(4));
  full(p.src, "t", 0, 1, I64(4), 0, 0);
  full(odst, "t", 1, 1, I64(4), 0, 0);
  rs_status st = rs_plan_create(p.src, odst, &plan);
  cr_assert_eq(st, RS_ERR_WRONG_CONTEXT, "got %s", rs_status_name(st));
  cr_assert_null(plan);
  cr_assert(strlen(rs_context_last_error(p.ctx)) > 0 ||
                strlen(rs_context_last_error(other)) > 0,
            "no message on either context");
  rs_layout_destroy(odst);
  rs_context_destroy(other);
}

Test(plan_create, tensor_missing_in_destination) {
  decl(p.src, "shared", RS_DTYPE_F32, 1, I64(4));
  decl(p.dst, "shared", RS_DTYPE_F32, 1, I64(4));
  decl(p.src, "only.in.source", RS_DTYPE_F32, 1, I64(4));
  full(p.src, "shared", 0, 1, I64(4), 0, 0);
  full(p.src, "only.in.source", 0, 1, I64(4), 1, 0);
  full(p.dst, "shared", 1, 1, I64(4), 0, 0);
  expect_plan_fail(RS_ERR_INCOMPATIBLE, "only.in.source", NULL);
}

Test(plan_create, tensor_missing_in_source) {
  decl(p.src, "shared", RS_DTYPE_F32, 1, I64(4));
  decl(p.dst, "shared", RS_DTYPE_F32, 1, I64(4));
  decl(p.dst, "only.in.dest", RS_DTYPE_F32, 1, I64(4));
  full(p.src, "shared", 0, 1, I64(4), 0, 0);
  full(p.dst, "shared", 1, 1, I64(4), 0, 0);
  full(p.dst, "only.in.dest", 1, 1, I64(4), 1, 0);
  expect_plan_fail(RS_ERR_INCOMPATIBLE, "only.in.dest", NULL);
}

Test(plan_create, shape_differs) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 7));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 1, 2, I64(8, 7), 0, 0);
  expect_plan_fail(RS_ERR_INCOMPATIBLE, PT, NULL);
}

Test(plan_create, ndim_differs) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 1, I64(48));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 1, 1, I64(48), 0, 0);
  expect_plan_fail(RS_ERR_INCOMPATIBLE, PT, NULL);
}

Test(plan_create, dtype_differs) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_BF16, 2, I64(8, 6));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 1, 2, I64(8, 6), 0, 0);
  expect_plan_fail(RS_ERR_UNSUPPORTED, PT, NULL);
}

Test(plan_create, dtype_differs_same_size) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_I32, 2, I64(8, 6));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 1, 2, I64(8, 6), 0, 0);
  expect_plan_fail(RS_ERR_UNSUPPORTED, PT, NULL);
}

Test(plan_create, destination_row_not_covered) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  /* source holds rows 0..6 and misses row 7 */
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 0, I64(0, 0), I64(7, 6), 0, 0,
                                   NULL),
               RS_OK);
  full(p.dst, PT, 1, 2, I64(8, 6), 0, 0);
  expect_plan_fail(RS_ERR_NOT_COVERED, PT, NULL);
}

Test(plan_create, destination_element_not_covered_in_the_middle) {
  /* source tiles [0,8)x[0,6) but leaves out element (3,2) */
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 0, I64(0, 0), I64(3, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 1, I64(4, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 2, I64(3, 0), I64(1, 2), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.src, PT, 3, I64(3, 3), I64(1, 3), 0, 0,
                                   NULL), RS_OK);
  /* the destination that needs (3,2) is a small box around it */
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 1, I64(2, 1), I64(3, 3), 0, 0,
                                   NULL), RS_OK);
  expect_plan_fail(RS_ERR_NOT_COVERED, PT, NULL);
}

Test(plan_create, no_source_shards_at_all) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  full(p.dst, PT, 1, 2, I64(8, 6), 0, 0);
  expect_plan_fail(RS_ERR_NOT_COVERED, PT, NULL);
}

Test(plan_create, two_destination_shards_share_bytes) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  /* rank 1, buffer 0: rows [0,4) at byte 0 span 96 bytes; rows [4,8) at
   * byte 48 overlap them */
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 1, I64(0, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 1, I64(4, 0), I64(4, 6), 0, 48,
                                   NULL), RS_OK);
  expect_plan_fail(RS_ERR_OVERLAP, PT, NULL);
}

Test(plan_create, destination_shards_of_two_tensors_share_bytes) {
  decl(p.src, "q", RS_DTYPE_F32, 1, I64(16));
  decl(p.dst, "q", RS_DTYPE_F32, 1, I64(16));
  decl(p.src, "k", RS_DTYPE_F32, 1, I64(8));
  decl(p.dst, "k", RS_DTYPE_F32, 1, I64(8));
  full(p.src, "q", 0, 1, I64(16), 0, 0);
  full(p.src, "k", 0, 1, I64(8), 1, 0);
  /* fused buffer on rank 2: q at [0,64), k wrongly at [60,92) */
  full(p.dst, "q", 2, 1, I64(16), 0, 0);
  full(p.dst, "k", 2, 1, I64(8), 0, 60);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, same_box_same_bytes_twice) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 3, 2, I64(8, 6), 0, 16);
  full(p.dst, PT, 3, 2, I64(8, 6), 0, 16);
  expect_plan_fail(RS_ERR_OVERLAP, PT, NULL);
}

/* Strided destination shards: overlap is decided byte by byte. */
static void strided_pair(rs_dtype dta, const int64_t *exta,
                         const int64_t *stra, int64_t bytea, rs_dtype dtb,
                         const int64_t *extb, const int64_t *strb,
                         int64_t byteb, int ndim) {
  int64_t shape[2] = {exta[0], ndim > 1 ? exta[1] : 1};
  int64_t shapeb[2] = {extb[0], ndim > 1 ? extb[1] : 1};
  int64_t zero[2] = {0, 0};
  decl(p.src, "a", dta, ndim, shape);
  decl(p.dst, "a", dta, ndim, shape);
  decl(p.src, "b", dtb, ndim, shapeb);
  decl(p.dst, "b", dtb, ndim, shapeb);
  full(p.src, "a", 0, ndim, shape, 0, 0);
  full(p.src, "b", 0, ndim, shapeb, 1, 0);
  cr_assert_eq(rs_layout_add_shard(p.dst, "a", 1, zero, exta, 0, bytea, stra),
               RS_OK, "%s", rs_context_last_error(p.ctx));
  cr_assert_eq(rs_layout_add_shard(p.dst, "b", 1, zero, extb, 0, byteb, strb),
               RS_OK, "%s", rs_context_last_error(p.ctx));
}

Test(plan_create, strided_shard_and_dense_element_in_its_slot) {
  /* a: f32 every other slot, bytes 0-3, 8-11, 16-19, 24-27; b: one f32 at
   * byte 8 */
  strided_pair(RS_DTYPE_F32, I64(4), I64(2), 0, RS_DTYPE_F32, I64(1), NULL, 8,
               1);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, strided_shards_half_an_element_apart) {
  /* both f32 every other slot, b 2 bytes later: b's bytes 2-5 meet a's
   * 0-3 */
  strided_pair(RS_DTYPE_F32, I64(4), I64(2), 0, RS_DTYPE_F32, I64(4), I64(2),
               2, 1);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, strided_shards_one_byte_into_the_next_row) {
  /* a: f32 [2,2] rows 10 apart: bytes 0-7 and 40-47; b: f32 [1,2] at byte
   * 44 meets a's second row */
  strided_pair(RS_DTYPE_F32, I64(2, 2), I64(10, 1), 0, RS_DTYPE_F32,
               I64(1, 2), NULL, 44, 2);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, shard_inside_the_gap_of_a_strided_shard_is_fine) {
  /* a: f32 [2,2] rows 10 apart (bytes 0-7, 40-47); b: f32 [2,2] dense at
   * byte 8 (bytes 8-23) sits in the gap */
  strided_pair(RS_DTYPE_F32, I64(2, 2), I64(10, 1), 0, RS_DTYPE_F32,
               I64(2, 2), NULL, 8, 2);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(p.src, p.dst, &plan), RS_OK, "%s",
               rs_context_last_error(p.ctx));
  rs_plan_destroy(plan);
}

Test(plan_create, wider_element_over_two_interleaved_bytes) {
  /* a: u8 at even bytes 0..14; b: one u16 at byte 5 covers bytes 5-6,
   * and byte 6 is a's */
  strided_pair(RS_DTYPE_U8, I64(8), I64(2), 0, RS_DTYPE_U16, I64(1), NULL, 5,
               1);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, byte_interleaved_u8_shards_are_fine) {
  strided_pair(RS_DTYPE_U8, I64(8), I64(2), 0, RS_DTYPE_U8, I64(8), I64(2), 1,
               1);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(p.src, p.dst, &plan), RS_OK, "%s",
               rs_context_last_error(p.ctx));
  rs_plan_destroy(plan);
}

Test(plan_create, last_byte_touches_next_shard) {
  /* a: f64 [3] dense at 0 (bytes 0-23); b at byte 23: one byte shared */
  strided_pair(RS_DTYPE_F64, I64(3), NULL, 0, RS_DTYPE_F64, I64(3), NULL, 23,
               1);
  expect_plan_fail(RS_ERR_OVERLAP, NULL, NULL);
}

Test(plan_create, same_bytes_on_different_ranks_is_fine) {
  decl(p.src, PT, RS_DTYPE_F32, 2, I64(8, 6));
  decl(p.dst, PT, RS_DTYPE_F32, 2, I64(8, 6));
  full(p.src, PT, 0, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 1, 2, I64(8, 6), 0, 0);
  full(p.dst, PT, 2, 2, I64(8, 6), 0, 0);
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 3, I64(0, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(p.dst, PT, 3, I64(4, 0), I64(4, 6), 1, 0,
                                   NULL), RS_OK);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(p.src, p.dst, &plan), RS_OK, "%s",
               rs_context_last_error(p.ctx));
  rs_plan_destroy(plan);
}

Test(plan_create, null_arguments) {
  rs_plan *plan = SENTINEL;
  decl(p.src, "t", RS_DTYPE_F32, 1, I64(4));
  decl(p.dst, "t", RS_DTYPE_F32, 1, I64(4));
  /* the message may go to the other layout's context or the thread */
  cr_assert_eq(rs_plan_create(NULL, p.dst, &plan), RS_ERR_NULL_POINTER);
  cr_assert_null(plan);
  cr_assert(strlen(rs_last_error()) > 0 ||
            strlen(rs_context_last_error(p.ctx)) > 0);
  plan = SENTINEL;
  cr_assert_eq(rs_plan_create(p.src, NULL, &plan), RS_ERR_NULL_POINTER);
  cr_assert_null(plan);
  cr_assert(strlen(rs_last_error()) > 0 ||
            strlen(rs_context_last_error(p.ctx)) > 0);
  rs_status st = rs_plan_create(p.src, p.dst, NULL);
  cr_assert_eq(st, RS_ERR_NULL_POINTER);
  cr_assert_gt(strlen(rs_context_last_error(p.ctx)), 0);
}

/* --------------------------------------------------------- plan queries */

Test(plan_query, stat_unknown) {
  int64_t v = 5;
  EXPECT_FAIL(rs_plan_stat(p.plan, 0, (rs_stat)0, &v),
              RS_ERR_INVALID_ARGUMENT, p.ctx, NULL, NULL);
  cr_assert_eq(v, 0);
  v = 5;
  EXPECT_FAIL(rs_plan_stat(p.plan, 0, (rs_stat)77, &v),
              RS_ERR_INVALID_ARGUMENT, p.ctx, "77", NULL);
  cr_assert_eq(v, 0);
}

Test(plan_query, stat_rank_unknown) {
  int64_t v = 5;
  EXPECT_FAIL(rs_plan_stat(p.plan, 4, RS_STAT_MOVES, &v), RS_ERR_UNKNOWN_RANK,
              p.ctx, "4", NULL);
  cr_assert_eq(v, 0);
  EXPECT_FAIL(rs_plan_stat(p.plan, -2, RS_STAT_MOVES, &v),
              RS_ERR_UNKNOWN_RANK, p.ctx, "-2", NULL);
}

Test(plan_query, move_index_out_of_range) {
  int64_t n = -1;
  int t = 5, s = 5, d = 5, round = 5, fw = 5;
  rs_route route = RS_ROUTE_INTER;
  cr_assert_eq(rs_plan_num_moves(p.plan, &n), RS_OK);
  cr_assert_gt(n, 0);
  char want[32];
  snprintf(want, sizeof want, "%lld", (long long)n);
  EXPECT_FAIL(rs_plan_move_info(p.plan, n, &t, &s, &d, &route, &round, &fw),
              RS_ERR_INVALID_ARGUMENT, p.ctx, want, NULL);
  EXPECT_FAIL(rs_plan_move_info(p.plan, -1, &t, NULL, NULL, NULL, NULL, NULL),
              RS_ERR_INVALID_ARGUMENT, p.ctx, "-1", NULL);
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_plan_move_box(p.plan, n, off, ext), RS_ERR_INVALID_ARGUMENT,
              p.ctx, want, NULL);
  EXPECT_FAIL(rs_plan_move_box(p.plan, -1, off, ext), RS_ERR_INVALID_ARGUMENT,
              p.ctx, NULL, NULL);
  /* all outs NULL is allowed */
  cr_assert_eq(rs_plan_move_info(p.plan, 0, NULL, NULL, NULL, NULL, NULL,
                                 NULL), RS_OK);
}

Test(plan_query, tensor_index_out_of_range) {
  const char *name = SENTINEL;
  int nd = 5;
  EXPECT_FAIL(rs_plan_tensor_info(p.plan, 1, &name, &nd),
              RS_ERR_INVALID_ARGUMENT, p.ctx, "1", NULL);
  EXPECT_FAIL(rs_plan_tensor_info(p.plan, -1, &name, &nd),
              RS_ERR_INVALID_ARGUMENT, p.ctx, "-1", NULL);
  cr_assert_eq(rs_plan_tensor_info(p.plan, 0, NULL, NULL), RS_OK);
  cr_assert_eq(rs_plan_tensor_info(p.plan, 0, &name, &nd), RS_OK);
  cr_assert_str_eq(name, PT);
  cr_assert_eq(nd, 2);
}

Test(plan_query, null_arguments) {
  int64_t v = 5;
  int i = 5;
  uint64_t fp = 5;
  char *json = SENTINEL;
  size_t len = 5;
  int64_t off[2], ext[2];
  EXPECT_FAIL(rs_plan_stat(NULL, 0, RS_STAT_MOVES, &v), RS_ERR_NULL_POINTER,
              NULL, NULL, NULL);
  EXPECT_FAIL(rs_plan_stat(p.plan, 0, RS_STAT_MOVES, NULL),
              RS_ERR_NULL_POINTER, p.ctx, NULL, NULL);
  v = 5;
  EXPECT_FAIL(rs_plan_num_moves(NULL, &v), RS_ERR_NULL_POINTER, NULL, NULL,
              NULL);
  EXPECT_FAIL(rs_plan_num_moves(p.plan, NULL), RS_ERR_NULL_POINTER, p.ctx,
              NULL, NULL);
  EXPECT_FAIL(rs_plan_move_info(NULL, 0, &i, NULL, NULL, NULL, NULL, NULL),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_plan_move_box(NULL, 0, off, ext), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_plan_move_box(p.plan, 0, NULL, ext), RS_ERR_NULL_POINTER,
              p.ctx, NULL, NULL);
  EXPECT_FAIL(rs_plan_move_box(p.plan, 0, off, NULL), RS_ERR_NULL_POINTER,
              p.ctx, NULL, NULL);
  i = 5;
  EXPECT_FAIL(rs_plan_num_tensors(NULL, &i), RS_ERR_NULL_POINTER, NULL, NULL,
              NULL);
  EXPECT_FAIL(rs_plan_num_tensors(p.plan, NULL), RS_ERR_NULL_POINTER, p.ctx,
              NULL, NULL);
  EXPECT_FAIL(rs_plan_tensor_info(NULL, 0, NULL, &i), RS_ERR_NULL_POINTER,
              NULL, NULL, NULL);
  EXPECT_FAIL(rs_plan_fingerprint(NULL, &fp), RS_ERR_NULL_POINTER, NULL, NULL,
              NULL);
  EXPECT_FAIL(rs_plan_fingerprint(p.plan, NULL), RS_ERR_NULL_POINTER, p.ctx,
              NULL, NULL);
  EXPECT_FAIL(rs_plan_to_json(NULL, &json, &len), RS_ERR_NULL_POINTER, NULL,
              NULL, NULL);
  EXPECT_FAIL(rs_plan_to_json(p.plan, NULL, &len), RS_ERR_NULL_POINTER, p.ctx,
              NULL, NULL);
  /* length may be NULL */
  json = NULL;
  cr_assert_eq(rs_plan_to_json(p.plan, &json, NULL), RS_OK);
  cr_assert_not_null(json);
  rs_free(json);
}

/* ---------------------------------------------------------------- bind */

Test(bind, rank_unknown) {
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, 4, 3, p.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_RANK, p.ctx, "4", NULL);
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, -1, 3, p.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_RANK, p.ctx, "-1", NULL);
}

Test(bind, buffer_not_used_by_any_shard) {
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 7, p.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_BUFFER, p.ctx, "7", NULL);
}

Test(bind, buffer_used_by_the_other_side_only) {
  /* buffer 3 is a destination buffer; the source side has none */
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_SRC, 1, 3, p.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_BUFFER, p.ctx, "3", NULL);
}

Test(bind, buffer_used_by_another_rank_only) {
  /* rank 3 holds no destination shard */
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, 3, 3, p.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_BUFFER, p.ctx, NULL, NULL);
}

Test(bind, buffer_too_small) {
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 3, p.d1, 4 * ROWB - 1),
              RS_ERR_BUFFER_TOO_SMALL, p.ctx, "95", NULL);
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_SRC, 0, 0, p.sbuf, 0),
              RS_ERR_BUFFER_TOO_SMALL, p.ctx, NULL, NULL);
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 3, p.d1, 4 * ROWB),
               RS_OK);
}

Test(bind, side_unknown) {
  EXPECT_FAIL(rs_plan_bind(p.plan, (rs_side)2, 1, 3, p.d1, 4 * ROWB),
              RS_ERR_INVALID_ARGUMENT, p.ctx, "2", NULL);
  EXPECT_FAIL(rs_plan_bind(p.plan, (rs_side)-1, 1, 3, p.d1, 4 * ROWB),
              RS_ERR_INVALID_ARGUMENT, p.ctx, NULL, NULL);
}

Test(bind, null_arguments) {
  EXPECT_FAIL(rs_plan_bind(NULL, RS_SIDE_DST, 1, 3, p.d1, 4 * ROWB),
              RS_ERR_NULL_POINTER, NULL, NULL, NULL);
  EXPECT_FAIL(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 3, NULL, 4 * ROWB),
              RS_ERR_NULL_POINTER, p.ctx, NULL, NULL);
}

Test(bind, strided_shard_needs_its_full_span) {
  /* rows padded to 10 floats: [3,4] box spans (2*10 + 4) * 4 = 96 bytes,
   * not its dense 48; at byte offset 8 it needs 104 */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, "t", RS_DTYPE_F32, 2, I64(3, 4)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "t", RS_DTYPE_F32, 2, I64(3, 4)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "t", 0, I64(0, 0), I64(3, 4), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", 1, I64(0, 0), I64(3, 4), 0, 8,
                                   I64(10, 1)), RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  unsigned char buf[128];
  EXPECT_FAIL(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 103),
              RS_ERR_BUFFER_TOO_SMALL, ctx, "103", NULL);
  EXPECT_FAIL(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 56),
              RS_ERR_BUFFER_TOO_SMALL, ctx, NULL, NULL);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 104), RS_OK, "%s",
               rs_context_last_error(ctx));
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

/* ------------------------------------------------------------- execute */

Test(execute, destination_buffer_unbound) {
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_SRC, 0, 0, p.sbuf, 8 * ROWB),
               RS_OK);
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 3, p.d1, 4 * ROWB),
               RS_OK);
  /* rank 2's buffer 3 is not bound */
  EXPECT_FAIL(rs_plan_execute(p.plan), RS_ERR_UNKNOWN_BUFFER, p.ctx, "2",
              "3");
  expect_poisoned(p.d1, 4 * ROWB, "rank 1");
  expect_poisoned(p.d2, 4 * ROWB, "rank 2");
  /* once bound, the same plan runs */
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_DST, 2, 3, p.d2, 4 * ROWB),
               RS_OK);
  cr_assert_eq(rs_plan_execute(p.plan), RS_OK, "%s",
               rs_context_last_error(p.ctx));
  cr_assert(memcmp(p.d1, p.sbuf, 4 * ROWB) == 0);
  cr_assert(memcmp(p.d2, (unsigned char *)p.sbuf + 4 * ROWB, 4 * ROWB) == 0);
}

Test(execute, source_buffer_unbound) {
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_DST, 1, 3, p.d1, 4 * ROWB),
               RS_OK);
  cr_assert_eq(rs_plan_bind(p.plan, RS_SIDE_DST, 2, 3, p.d2, 4 * ROWB),
               RS_OK);
  EXPECT_FAIL(rs_plan_execute(p.plan), RS_ERR_UNKNOWN_BUFFER, p.ctx, "0",
              NULL);
  expect_poisoned(p.d1, 4 * ROWB, "rank 1");
  expect_poisoned(p.d2, 4 * ROWB, "rank 2");
}

Test(execute, nothing_bound) {
  EXPECT_FAIL(rs_plan_execute(p.plan), RS_ERR_UNKNOWN_BUFFER, p.ctx, NULL,
              NULL);
}

Test(execute, null_plan) {
  EXPECT_FAIL(rs_plan_execute(NULL), RS_ERR_NULL_POINTER, NULL, NULL, NULL);
}

Test(execute, destination_overlaps_source_of_same_rank) {
  /* Own plan: rank 0 holds the whole source and rows [0,4) of the
   * destination; rank 1 rows [4,8). Rank 0's destination is bound inside
   * its source buffer. */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "t", 0, I64(0, 0), I64(8, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", 0, I64(0, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", 1, I64(4, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  unsigned char *big = malloc(512), *snap = malloc(512), *d1 = malloc(96);
  for (int i = 0; i < 512; i++) big[i] = (unsigned char)(i * 13 + 1);
  memcpy(snap, big, 512);
  memset(d1, RT_POISON, 96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, big, 192), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, big + 100, 96), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, d1, 96), RS_OK);
  EXPECT_FAIL(rs_plan_execute(plan), RS_ERR_OVERLAP, ctx, NULL, NULL);
  cr_assert(memcmp(big, snap, 512) == 0, "memory changed by a failed run");
  expect_poisoned(d1, 96, "rank 1");
  /* rebinding rank 0's destination elsewhere fixes it */
  unsigned char *d0 = malloc(96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, d0, 96), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  cr_assert(memcmp(d0, big, 96) == 0);
  cr_assert(memcmp(d1, big + 96, 96) == 0);
  free(big);
  free(snap);
  free(d0);
  free(d1);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

Test(execute, destination_overlaps_source_touching_is_fine) {
  /* adjacent but not overlapping: [0,192) source, [192,288) destination */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "t", 0, I64(0, 0), I64(8, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", 0, I64(2, 0), I64(4, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK);
  unsigned char *big = malloc(288);
  for (int i = 0; i < 192; i++) big[i] = (unsigned char)(i * 7 + 3);
  memset(big + 192, RT_POISON, 96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, big, 192), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, big + 192, 96), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  cr_assert(memcmp(big + 192, big + 2 * ROWB, 96) == 0);
  free(big);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

/* -------------------------------------------------- outs cleared on failure
 * "results come through trailing out-parameters, which are set to 0/NULL on
 * failure": one Test per call and malformed input. */

TestSuite(outs_cleared, .init = px_standard, .fini = px_teardown);

Test(outs_cleared, context_world_size_null_ctx) {
  int i = 5;
  cr_assert_eq(rs_context_world_size(NULL, &i), RS_ERR_NULL_POINTER);
  cr_assert_eq(i, 0, "out left at %d", i);
}

Test(outs_cleared, context_rank_null_ctx) {
  int i = 5;
  cr_assert_eq(rs_context_rank(NULL, &i), RS_ERR_NULL_POINTER);
  cr_assert_eq(i, 0, "out left at %d", i);
}

Test(outs_cleared, context_transport_null_ctx) {
  rs_transport_kind k = RS_TRANSPORT_MPI;
  cr_assert_eq(rs_context_transport(NULL, &k), RS_ERR_NULL_POINTER);
  cr_assert_eq(k, 0, "out left at %d", (int)k);
}

Test(outs_cleared, context_get_domain_null_ctx) {
  int i = 5;
  cr_assert_eq(rs_context_get_domain(NULL, 0, &i), RS_ERR_NULL_POINTER);
  cr_assert_eq(i, 0, "out left at %d", i);
}

Test(outs_cleared, context_get_domain_unknown_rank) {
  int i = 5;
  cr_assert_eq(rs_context_get_domain(p.ctx, 99, &i), RS_ERR_UNKNOWN_RANK);
  cr_assert_eq(i, 0, "out left at %d", i);
}

Test(outs_cleared, context_get_param_null_ctx) {
  int64_t v = 5;
  cr_assert_eq(rs_context_get_param(NULL, RS_PARAM_TIMEOUT_MS, &v),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(v, 0, "out left at %lld", (long long)v);
}

Test(outs_cleared, context_get_param_unknown_param) {
  int64_t v = 5;
  cr_assert_eq(rs_context_get_param(p.ctx, (rs_param)7, &v),
               RS_ERR_BAD_PARAM);
  cr_assert_eq(v, 0, "out left at %lld", (long long)v);
}

Test(outs_cleared, layout_create_null_ctx) {
  rs_layout *l = SENTINEL;
  cr_assert_eq(rs_layout_create(NULL, &l), RS_ERR_NULL_POINTER);
  cr_assert_null(l);
}

Test(outs_cleared, layout_num_tensors_null_layout) {
  int n = 5;
  cr_assert_eq(rs_layout_num_tensors(NULL, &n), RS_ERR_NULL_POINTER);
  cr_assert_eq(n, 0, "out left at %d", n);
}

Test(outs_cleared, layout_num_shards_null_layout) {
  int64_t n = 5;
  cr_assert_eq(rs_layout_num_shards(NULL, &n), RS_ERR_NULL_POINTER);
  cr_assert_eq(n, 0, "out left at %lld", (long long)n);
}

Test(outs_cleared, plan_stat_null_plan) {
  int64_t v = 5;
  cr_assert_eq(rs_plan_stat(NULL, 0, RS_STAT_MOVES, &v), RS_ERR_NULL_POINTER);
  cr_assert_eq(v, 0, "out left at %lld", (long long)v);
}

Test(outs_cleared, plan_stat_unknown_stat) {
  int64_t v = 5;
  cr_assert_eq(rs_plan_stat(p.plan, 0, (rs_stat)99, &v),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(v, 0, "out left at %lld", (long long)v);
}

Test(outs_cleared, plan_num_moves_null_plan) {
  int64_t v = 5;
  cr_assert_eq(rs_plan_num_moves(NULL, &v), RS_ERR_NULL_POINTER);
  cr_assert_eq(v, 0, "out left at %lld", (long long)v);
}

Test(outs_cleared, plan_move_info_index_past_end) {
  int t = 5, s = 5, d = 5, round = 5, fw = 5;
  rs_route route = RS_ROUTE_INTER;
  cr_assert_eq(rs_plan_move_info(p.plan, 1 << 20, &t, &s, &d, &route, &round,
                                 &fw),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(t == 0 && s == 0 && d == 0 && round == 0 && fw == 0 &&
                route == 0,
            "outs left at tensor %d src %d dst %d route %d round %d fw %d", t,
            s, d, (int)route, round, fw);
}

Test(outs_cleared, plan_move_info_null_plan) {
  int t = 5;
  cr_assert_eq(rs_plan_move_info(NULL, 0, &t, NULL, NULL, NULL, NULL, NULL),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(t, 0, "out left at %d", t);
}

Test(outs_cleared, plan_num_tensors_null_plan) {
  int i = 5;
  cr_assert_eq(rs_plan_num_tensors(NULL, &i), RS_ERR_NULL_POINTER);
  cr_assert_eq(i, 0, "out left at %d", i);
}

Test(outs_cleared, plan_tensor_info_index_past_end) {
  const char *name = SENTINEL;
  int nd = 5;
  cr_assert_eq(rs_plan_tensor_info(p.plan, 1, &name, &nd),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_null(name, "name left at %p", (const void *)name);
  cr_assert_eq(nd, 0, "ndim left at %d", nd);
}

Test(outs_cleared, plan_tensor_info_null_plan) {
  const char *name = SENTINEL;
  int nd = 5;
  cr_assert_eq(rs_plan_tensor_info(NULL, 0, &name, &nd), RS_ERR_NULL_POINTER);
  cr_assert_null(name, "name left at %p", (const void *)name);
  cr_assert_eq(nd, 0, "ndim left at %d", nd);
}

Test(outs_cleared, plan_fingerprint_null_plan) {
  uint64_t fp = 5;
  cr_assert_eq(rs_plan_fingerprint(NULL, &fp), RS_ERR_NULL_POINTER);
  cr_assert_eq(fp, 0, "out left at %llu", (unsigned long long)fp);
}

Test(outs_cleared, plan_to_json_null_plan) {
  char *json = SENTINEL;
  size_t len = 5;
  cr_assert_eq(rs_plan_to_json(NULL, &json, &len), RS_ERR_NULL_POINTER);
  cr_assert_null(json, "json left at %p", (void *)json);
  cr_assert_eq(len, 0, "length left at %zu", len);
}

Test(outs_cleared, plan_create_null_layout) {
  rs_plan *plan = SENTINEL;
  cr_assert_eq(rs_plan_create(p.src, NULL, &plan), RS_ERR_NULL_POINTER);
  cr_assert_null(plan);
}

Test(outs_cleared, context_create_local_bad_world) {
  rs_context *ctx = SENTINEL;
  cr_assert_eq(rs_context_create_local(0, &ctx), RS_ERR_INVALID_ARGUMENT);
  cr_assert_null(ctx);
}
