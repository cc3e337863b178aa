/* SPDX-License-Identifier: Apache-2.0 */
/* The layout wire format through the public API: a layout serialized and
 * deserialized plans exactly as the original; malformed bytes are refused
 * with RS_ERR_CORRUPT and leave the layout unchanged. */
#include <criterion/criterion.h>
#include <reshard/reshard.h>
#include <stdlib.h>
#include <string.h>

static rs_context *ctx;

static void setup(void) { cr_assert_eq(rs_context_create_local(6, &ctx), RS_OK); }
static void teardown(void) { rs_context_destroy(ctx); }

/* A source over ranks 0-1 (rows), a destination over 2-5 (columns), with a
 * strided shard and two tensors. */
static void build(rs_layout **src, rs_layout **dst) {
  const int64_t shape[2] = {10, 7}, mesh2[1] = {2}, mesh4[1] = {4};
  const int r01[2] = {0, 1}, r25[4] = {2, 3, 4, 5}, rows[1] = {0}, cols[1] = {1};
  cr_assert_eq(rs_layout_create(ctx, src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, dst), RS_OK);
  const char *names[2] = {"a.weight", "b.weight"};
  for (int t = 0; t < 2; t++) {
    cr_assert_eq(rs_layout_add_tensor(*src, names[t], RS_DTYPE_BF16, 2, shape), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(*dst, names[t], RS_DTYPE_BF16, 2, shape), RS_OK);
    cr_assert_eq(rs_layout_add_dtensor(*src, names[t], 1, mesh2, r01, rows, t, 0), RS_OK);
    cr_assert_eq(rs_layout_add_dtensor(*dst, names[t], 1, mesh4, r25, cols, 0, t * 64), RS_OK);
  }
  const int64_t off[2] = {0, 0}, ext[2] = {10, 7}, strides[2] = {9, 1};
  cr_assert_eq(rs_layout_add_shard(*src, "a.weight", 5, off, ext, 3, 8, strides), RS_OK);
}

Test(wire, round_trip_plans_the_same, .init = setup, .fini = teardown) {
  rs_layout *src, *dst, *copy;
  build(&src, &dst);
  void *bytes = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(src, &bytes, &len), RS_OK);
  cr_assert_gt(len, 0);
  cr_assert_eq(rs_layout_create(ctx, &copy), RS_OK);
  cr_assert_eq(rs_layout_deserialize(copy, bytes, len), RS_OK);
  int64_t a, b;
  rs_layout_num_shards(src, &a);
  rs_layout_num_shards(copy, &b);
  cr_assert_eq(a, b);
  rs_plan *p1, *p2;
  cr_assert_eq(rs_plan_create(src, dst, &p1), RS_OK);
  cr_assert_eq(rs_plan_create(copy, dst, &p2), RS_OK);
  uint64_t f1, f2;
  rs_plan_fingerprint(p1, &f1);
  rs_plan_fingerprint(p2, &f2);
  cr_assert_eq(f1, f2);
  rs_plan_destroy(p1);
  rs_plan_destroy(p2);
  rs_free(bytes);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_layout_destroy(copy);
}

Test(wire, every_truncation_and_bit_flip_is_refused, .init = setup, .fini = teardown) {
  rs_layout *src, *dst, *into;
  build(&src, &dst);
  void *bytes = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(src, &bytes, &len), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &into), RS_OK);
  for (size_t n = 0; n < len; n++) {
    rs_status st = rs_layout_deserialize(into, bytes, n);
    cr_assert_eq(st, RS_ERR_CORRUPT, "truncated to %zu of %zu bytes: %s", n, len,
                 rs_status_name(st));
  }
  unsigned char *flip = malloc(len);
  for (size_t i = 0; i < len; i++) {
    memcpy(flip, bytes, len);
    flip[i] ^= 0x01;
    rs_status st = rs_layout_deserialize(into, flip, len);
    cr_assert_neq(st, RS_OK, "bit flipped in byte %zu was accepted", i);
  }
  int n;
  int64_t shards;
  rs_layout_num_tensors(into, &n);
  rs_layout_num_shards(into, &shards);
  cr_assert_eq(n, 0, "a refused decode left %d tensors behind", n);
  cr_assert_eq(shards, 0);
  cr_assert(strstr(rs_context_last_error(ctx), "layout bytes") != NULL ||
            strstr(rs_context_last_error(ctx), "checksum") != NULL);
  free(flip);
  rs_free(bytes);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_layout_destroy(into);
}

Test(wire, a_tensor_declared_differently_is_a_mismatch, .init = setup, .fini = teardown) {
  rs_layout *src, *dst, *other;
  build(&src, &dst);
  void *bytes = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(src, &bytes, &len), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &other), RS_OK);
  const int64_t shape[2] = {10, 8};
  cr_assert_eq(rs_layout_add_tensor(other, "a.weight", RS_DTYPE_BF16, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_deserialize(other, bytes, len), RS_ERR_MISMATCH);
  cr_assert(strstr(rs_context_last_error(ctx), "a.weight") != NULL);
  int n;
  rs_layout_num_tensors(other, &n);
  cr_assert_eq(n, 1, "the layout changed although the decode failed");
  rs_free(bytes);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_layout_destroy(other);
}
