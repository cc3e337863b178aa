/* SPDX-License-Identifier: Apache-2.0 */
/* Planning at scale on valid but adversarial layouts, end to end through
 * the public API and the in-process transport: each layout once made
 * planning quadratic (strided column shards of one destination buffer,
 * 160000 one-column shards, a shard per element of a 16-dim tensor, a
 * whole-tensor replica beside 40000 row shards). Each case is planned,
 * executed, and every destination element and untouched destination byte
 * checked; the timeouts only stop a run that went quadratic again, the
 * assertions are about the plan being right. Plus the destination write
 * check on strided shards, both ways (interleavings that share bytes are
 * refused with RS_ERR_OVERLAP, those that do not are planned), and the
 * plan-size limit refusing before it spends memory. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "th_harness.h"
#include "th_util.h"

enum { WORLD = 16, DOMAIN = 4 };

static void scale_init(rh *h, const char *where) {
  rh_init(h, WORLD, where);
  cr_assert_eq(rs_context_set_domain_size(h->ctx, DOMAIN), RS_OK);
}

/* A dense shard appended to what (side, rank, buffer 0) holds so far. */
static void packed(rh *h, int side, const char *name, int rank,
                   const int64_t *off, const int64_t *ext) {
  rh_shard(h, side, name, rank, off, ext, 0, rh_used(h, side, rank, 0), NULL);
}

/* Plan twice: the same moves in the same order (every rank computes the
 * same plan); then execute and check every destination element. */
static void run_and_replan(rh *h) {
  rh_run(h);
  rs_plan *again = NULL;
  cr_assert_eq(rs_plan_create(h->lay[0], h->lay[1], &again), RS_OK, "%s: %s",
               h->where, rs_context_last_error(h->ctx));
  rh_same_moves(h, again);
  rs_plan_destroy(again);
}

/* ---- the four layouts ---------------------------------------------------- */

/* Each column of a [R, 2048] matrix is its own shard of one destination
 * buffer (byte offset 4j, strides {2048, 1}): every shard's byte span meets
 * every other's, yet no two share a byte. */
Test(scale, strided_columns_in_one_buffer, .timeout = 30) {
  const int64_t R = 64, C = 2048;
  rh h;
  scale_init(&h, "strided_columns_in_one_buffer");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(R, C));
  rh_shard(&h, RS_SIDE_SRC, "w", 9, I64(0, 0), I64(R, C), 0, 0, NULL);
  for (int64_t j = 0; j < C; j++)
    rh_shard(&h, RS_SIDE_DST, "w", 0, I64(0, j), I64(R, 1), 0, 4 * j,
             I64(C, 1));
  run_and_replan(&h);
  rh_fini(&h);
}

/* [4, 160000] cut into one-column shards on both sides: every shard has
 * offset 0 in dim 0. Optionally the last destination domain (ranks 12..15)
 * also holds a box that overlaps its column shards, so that domain is
 * carved into fragments: the whole tensor (on rank 15), which comes before
 * the columns in box order, or its last two rows (on rank 14, in a second
 * buffer), which come after them. */
enum extra_box { NO_EXTRA, WHOLE_TENSOR, LAST_TWO_ROWS };

static void column_shards(rh *h, enum extra_box extra) {
  const int64_t N = 160000;
  rh_tensor_add(h, "w", RS_DTYPE_F32, 2, I64(4, N));
  for (int64_t j = 0; j < N; j++) {
    packed(h, RS_SIDE_SRC, "w", (int)(j % 8), I64(0, j), I64(4, 1));
    packed(h, RS_SIDE_DST, "w", 8 + (int)(j / (N / 7 + 1)), I64(0, j),
           I64(4, 1));
  }
  if (extra == WHOLE_TENSOR)
    packed(h, RS_SIDE_DST, "w", 15, I64(0, 0), I64(4, N));
  if (extra == LAST_TWO_ROWS)
    rh_shard(h, RS_SIDE_DST, "w", 14, I64(2, 0), I64(2, N), 1, 0, NULL);
}

static void run_column_shards(const char *where, enum extra_box extra) {
  rh h;
  scale_init(&h, where);
  column_shards(&h, extra);
  rh_run(&h);
  rh_fini(&h);
}

Test(scale, column_shards, .timeout = 60) {
  run_column_shards("column_shards", NO_EXTRA);
}

Test(scale, column_shards_and_a_destination_replica, .timeout = 60) {
  run_column_shards("column_shards_and_a_destination_replica", WHOLE_TENSOR);
}

Test(scale, column_shards_and_rows_across_them, .timeout = 60) {
  run_column_shards("column_shards_and_rows_across_them", LAST_TWO_ROWS);
}

/* A {2, ..., 2} tensor of 16 dims, a shard per element on both sides: every
 * dim has two distinct offsets only. */
Test(scale, sixteen_dims_of_two, .timeout = 60) {
  enum { ND = 16 };
  int64_t shape[ND], off[ND], ext[ND];
  for (int d = 0; d < ND; d++) shape[d] = 2, ext[d] = 1;
  rh h;
  scale_init(&h, "sixteen_dims_of_two");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, ND, shape);
  for (int64_t lin = 0; lin < (int64_t)1 << ND; lin++) {
    for (int d = 0; d < ND; d++) off[d] = (lin >> (ND - 1 - d)) & 1;
    packed(&h, RS_SIDE_SRC, "w", (int)(lin % 8), off, ext);
    packed(&h, RS_SIDE_DST, "w", 8 + (int)((lin / 8) % 8), off, ext);
  }
  run_and_replan(&h);
  rh_fini(&h);
}

/* Rank 0 holds the whole [40000, 16] tensor, ranks 1..7 hold it again as
 * row shards; the destination holds row shards on ranks 8..15. */
Test(scale, replica_and_rows, .timeout = 60) {
  const int64_t R = 40000, C = 16;
  rh h;
  scale_init(&h, "replica_and_rows");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(R, C));
  packed(&h, RS_SIDE_SRC, "w", 0, I64(0, 0), I64(R, C));
  for (int64_t r = 0; r < R; r++) {
    packed(&h, RS_SIDE_SRC, "w", 1 + (int)(r % 7), I64(r, 0), I64(1, C));
    packed(&h, RS_SIDE_DST, "w", 8 + (int)(r % 8), I64(r, 0), I64(1, C));
  }
  run_and_replan(&h);
  rh_fini(&h);
}

/* ---- the destination write check on strided shards ------------------------ */

/* Plan and expect RS_ERR_OVERLAP with a message naming both tensors. */
static void expect_overlap(rh *h, const char *a, const char *b) {
  rs_plan *plan = NULL;
  rs_status st = rs_plan_create(h->lay[0], h->lay[1], &plan);
  const char *msg = rs_context_last_error(h->ctx);
  cr_assert_eq(st, RS_ERR_OVERLAP, "%s: got %s (%s)", h->where,
               rs_status_name(st), msg);
  cr_assert_null(plan, "%s", h->where);
  cr_assert(th_contains(msg, "write the same bytes") && th_contains(msg, a) &&
                th_contains(msg, b),
            "%s: message %s", h->where, msg);
}

/* Tensor `name` [R, C]: whole in source rank 9 (a buffer per tensor); in
 * destination rank 0 buffer `buffer`, column j at first_byte + j *
 * byte_step with rows row_stride elements apart. */
static void columns_of(rh *h, const char *name, int64_t C, int64_t R,
                       int64_t row_stride, int buffer, int64_t first_byte,
                       int64_t byte_step) {
  rh_tensor_add(h, name, RS_DTYPE_F32, 2, I64(R, C));
  rh_shard(h, RS_SIDE_SRC, name, 9, I64(0, 0), I64(R, C), h->nt, 0, NULL);
  for (int64_t j = 0; j < C; j++)
    rh_shard(h, RS_SIDE_DST, name, 0, I64(0, j), I64(R, 1), buffer,
             first_byte + byte_step * j, I64(row_stride, 1));
}

/* Tensors a and b [32, 256], every column its own strided shard of
 * destination rank 0, rows 512 elements apart: a's column j at byte 8j of
 * buffer 0, b's at b_byte + 8j of buffer b_buffer. With b_byte 4 in one
 * buffer, a[r][c] is element 2*(r*256 + c) and b[r][c] the one after. */
static void interleaved(rh *h, const char *where, int64_t b_byte,
                        int b_buffer) {
  scale_init(h, where);
  columns_of(h, "a", 256, 32, 512, 0, 0, 8);
  columns_of(h, "b", 256, 32, 512, b_buffer, b_byte, 8);
}

Test(writes, a_column_given_twice_is_refused) {
  rh h;
  scale_init(&h, "a_column_given_twice_is_refused");
  columns_of(&h, "w", 512, 8, 512, 0, 0, 4);
  rh_shard(&h, RS_SIDE_DST, "w", 0, I64(0, 300), I64(8, 1), 0, 4 * 300,
           I64(512, 1));
  expect_overlap(&h, "'w'", "'w'");
  rh_fini(&h);
}

Test(writes, columns_wrapping_into_the_next_row_are_refused) {
  /* rows 256 elements apart but 512 columns: column j + 256 of row r sits
   * where column j of row r + 1 does, though no two boxes meet */
  rh h;
  scale_init(&h, "columns_wrapping_into_the_next_row_are_refused");
  columns_of(&h, "w", 512, 8, 256, 0, 0, 4);
  expect_overlap(&h, "'w'", "'w'");
  rh_fini(&h);
}

Test(writes, shards_of_one_tensor_shifted_by_a_row_are_refused) {
  /* dense row blocks whose byte offsets are one row too close: same
   * strides, different bases */
  rh h;
  scale_init(&h, "shards_of_one_tensor_shifted_by_a_row_are_refused");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(64, 16));
  rh_shard(&h, RS_SIDE_SRC, "w", 9, I64(0, 0), I64(64, 16), 0, 0, NULL);
  for (int64_t b = 0; b < 8; b++)
    rh_shard(&h, RS_SIDE_DST, "w", 0, I64(8 * b, 0), I64(8, 16), 0,
             b * 7 * 16 * 4, NULL);
  expect_overlap(&h, "'w'", "'w'");
  rh_fini(&h);
}

Test(writes, two_tensors_interleaved_column_by_column_are_fine,
     .timeout = 30) {
  rh h;
  interleaved(&h, "two_tensors_interleaved_column_by_column_are_fine", 4, 0);
  run_and_replan(&h);
  rh_fini(&h);
}

Test(writes, two_tensors_interleaved_one_slot_late_are_refused) {
  /* column j of b lands on column j + 1 of a */
  rh h;
  interleaved(&h, "two_tensors_interleaved_one_slot_late_are_refused", 8, 0);
  expect_overlap(&h, "'a'", "'b'");
  rh_fini(&h);
}

Test(writes, the_same_bytes_of_two_buffers_never_meet, .timeout = 30) {
  rh h;
  interleaved(&h, "the_same_bytes_of_two_buffers_never_meet", 8, 1);
  run_and_replan(&h);
  rh_fini(&h);
}

/* ---- the plan-size limit ----------------------------------------------------- */

Test(plan_size, a_plan_too_large_is_refused_before_planning, .timeout = 5) {
  /* 2^40 bytes through 64 KiB of staging: at least 2^26 pieces of 16 KiB,
   * more than a plan may hold */
  const int64_t n = (int64_t)1 << 40;
  rh h;
  rh_init(&h, 2, "a_plan_too_large_is_refused_before_planning");
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, 64 << 10),
               RS_OK);
  rh_tensor_add(&h, "big", RS_DTYPE_U8, 1, I64(n));
  rh_shard(&h, RS_SIDE_SRC, "big", 0, I64(0), I64(n), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "big", 1, I64(0), I64(n), 0, 0, NULL);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(h.lay[0], h.lay[1], &plan), RS_ERR_UNSUPPORTED,
               "%s", rs_context_last_error(h.ctx));
  cr_assert_null(plan);
  const char *msg = rs_context_last_error(h.ctx);
  cr_assert(th_contains(msg, "'big'") && th_contains(msg, "moves") &&
                th_contains(msg, "RS_PARAM_STAGING_BYTES"),
            "message: %s", msg);
  rh_fini(&h);
}
