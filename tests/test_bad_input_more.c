/* The bad-input catalog, continued (tests/test_bad_input.c holds the first
 * part): malformed layout wire bytes, every setting out of bounds, buffers
 * (unbound, too small, overlapping), handles used after their context was
 * destroyed, and the MPI entry points without MPI.
 *
 * Each Test is named after one malformed input and asserts the exact
 * rs_status, a message fragment that names the problem, and that nothing
 * the caller owns changed: for wire bytes the layout decoded into (its
 * serialization is byte-for-byte what it was), for settings the old value,
 * for executions every destination byte. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>
#include <reshard/reshard_mpi.h>

#include "rt_util.h"
#include "rt_wire.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define I64(...) ((const int64_t[]){__VA_ARGS__})
/* A non-NULL value to preset out-pointers with, to see them cleared. */
static int sentinel_obj;
#define SENTINEL ((void *)&sentinel_obj)
#define U64(...) ((const uint64_t[]){__VA_ARGS__})

static void expect_fail_(const char *what, rs_status got, rs_status want,
                         const char *msg, const char *frag1,
                         const char *frag2) {
  cr_assert_eq(got, want, "%s: got %s, want %s (message: '%s')", what,
               rs_status_name(got), rs_status_name(want),
               msg ? msg : "(null)");
  cr_assert_not_null(msg, "%s: message is NULL", what);
  cr_assert_gt(strlen(msg), 0, "%s: no message recorded", what);
  if (frag1)
    cr_assert(rt_contains(msg, frag1), "%s: message '%s' lacks '%s'", what,
              msg, frag1);
  if (frag2)
    cr_assert(rt_contains(msg, frag2), "%s: message '%s' lacks '%s'", what,
              msg, frag2);
}
/* ctx NULL: the per-thread message. */
#define EXPECT_FAIL(call, want, ctx, f1, f2)                               \
  do {                                                                     \
    rs_status got_ = (call);                                               \
    expect_fail_(#call, got_, (want),                                      \
                 (ctx) ? rs_context_last_error(ctx) : rs_last_error(), (f1), \
                 (f2));                                                    \
  } while (0)

/* ======================================================= wire bytes ===== */

/* A layout that already holds something, so that "unchanged" means more
 * than "still empty": world 4, tensor keep.me u8 [16], one shard. */
static struct {
  rs_context *ctx;
  rs_layout *into;
  void *before;
  size_t before_len;
} w;

static void wx_setup(void) {
  memset(&w, 0, sizeof w);
  cr_assert_eq(rs_context_create_local(4, &w.ctx), RS_OK);
  cr_assert_eq(rs_layout_create(w.ctx, &w.into), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(w.into, "keep.me", RS_DTYPE_U8, 1,
                                    I64(16)), RS_OK);
  cr_assert_eq(rs_layout_add_shard(w.into, "keep.me", 3, I64(4), I64(8), 2,
                                   100, NULL), RS_OK);
  cr_assert_eq(rs_layout_serialize(w.into, &w.before, &w.before_len), RS_OK);
}

static void wx_teardown(void) {
  rs_free(w.before);
  rs_layout_destroy(w.into);
  rs_context_destroy(w.ctx);
}

/* The layout decoded into is byte-for-byte what it was. */
static void expect_layout_unchanged(void) {
  void *now = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(w.into, &now, &len), RS_OK);
  cr_assert_eq(len, w.before_len, "a refused decode changed the layout "
               "(%zu bytes, was %zu)", len, w.before_len);
  cr_assert(memcmp(now, w.before, len) == 0,
            "a refused decode changed the layout");
  rs_free(now);
}

/* The fields of one well-formed encoding: tensor "w" f32 [8,6], one dense
 * shard of rows [2,6) on rank 1, buffer 0, byte offset 0. Tests edit a
 * field and encode. */
typedef struct wspec {
  uint32_t version, sender;
  const char *name;
  uint32_t dtype, ndim;
  uint64_t shape[RS_MAX_DIMS + 2];
  uint32_t ntensors_field; /* 0: the real count (1) */
  uint64_t nshards_field;  /* 0: the real count (1) */
  uint32_t s_tensor, s_rank, s_buffer;
  uint64_t s_byte_offset;
  uint64_t geom[3 * (RS_MAX_DIMS + 2)];
  bool no_shard;
} wspec;

static wspec spec_ok(void) {
  wspec s;
  memset(&s, 0, sizeof s);
  s.version = RW_VERSION;
  s.sender = 0;
  s.name = "w";
  s.dtype = RS_DTYPE_F32;
  s.ndim = 2;
  s.shape[0] = 8;
  s.shape[1] = 6;
  s.s_rank = 1;
  const uint64_t geom[6] = {2, 0, 4, 6, 6, 1};
  memcpy(s.geom, geom, sizeof geom);
  return s;
}

static void encode(const wspec *s, rw_buf *b) {
  memset(b, 0, sizeof *b);
  rw_header(b, s->version, s->sender);
  rw_u32(b, s->ntensors_field ? s->ntensors_field : 1);
  rw_tensor(b, s->name, s->dtype, s->ndim, s->shape);
  rw_u64(b, s->nshards_field ? s->nshards_field : (s->no_shard ? 0 : 1));
  if (!s->no_shard)
    rw_shard(b, s->s_tensor, s->s_rank, s->s_buffer, s->s_byte_offset,
             s->ndim, s->geom);
  rw_finish(b);
}

/* Decode the bytes of spec s into w.into; expect want and fragments. */
static void decode_spec(const wspec *s, rs_status want, const char *f1,
                        const char *f2) {
  rw_buf b;
  encode(s, &b);
  EXPECT_FAIL(rs_layout_deserialize(w.into, b.b, b.n), want, w.ctx, f1, f2);
  expect_layout_unchanged();
  rw_free(&b);
}

static void decode_raw(const void *bytes, size_t n, rs_status want,
                       const char *f1, const char *f2) {
  EXPECT_FAIL(rs_layout_deserialize(w.into, bytes, n), want, w.ctx, f1, f2);
  expect_layout_unchanged();
}

TestSuite(wire_bytes, .init = wx_setup, .fini = wx_teardown);

Test(wire_bytes, well_formed_spec_is_accepted) {
  /* the control: the unedited spec decodes, into a layout of its own */
  rs_layout *l = NULL;
  rw_buf b;
  wspec s = spec_ok();
  encode(&s, &b);
  cr_assert_eq(rs_layout_create(w.ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_deserialize(l, b.b, b.n), RS_OK, "%s",
               rs_context_last_error(w.ctx));
  int64_t n = 0;
  cr_assert_eq(rs_layout_num_shards(l, &n), RS_OK);
  cr_assert_eq(n, 1);
  rs_layout_destroy(l);
  rw_free(&b);
}

Test(wire_bytes, zero_length) {
  decode_raw("", 0, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
}

Test(wire_bytes, message_names_no_internal_sender) {
  /* rs_layout_deserialize has no sender rank: its messages must not show
   * the decoder's internal "any sender" value (-2) as a rank */
  unsigned char b[64] = {0};
  EXPECT_FAIL(rs_layout_deserialize(w.into, b, sizeof b), RS_ERR_CORRUPT,
              w.ctx, "RSLAYOUT", NULL);
  cr_assert(!rt_contains(rs_context_last_error(w.ctx), "rank -2"),
            "message names an internal rank: '%s'",
            rs_context_last_error(w.ctx));
}

Test(wire_bytes, null_bytes) {
  EXPECT_FAIL(rs_layout_deserialize(w.into, NULL, 100), RS_ERR_NULL_POINTER,
              w.ctx, "bytes", NULL);
  expect_layout_unchanged();
}

Test(wire_bytes, null_layout) {
  EXPECT_FAIL(rs_layout_deserialize(NULL, w.before, w.before_len),
              RS_ERR_NULL_POINTER, NULL, "layout", NULL);
}

Test(wire_bytes, shorter_than_a_header) {
  decode_raw(w.before, 20, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
}

Test(wire_bytes, truncated_by_one_byte) {
  decode_raw(w.before, w.before_len - 1, RS_ERR_CORRUPT, "length", NULL);
}

Test(wire_bytes, truncated_to_half) {
  decode_raw(w.before, w.before_len / 2, RS_ERR_CORRUPT, "length", NULL);
}

Test(wire_bytes, truncated_and_length_field_patched) {
  /* a sender that cut its bytes short and wrote a matching length: the
   * checksum still catches it (it covers the cut-off part) */
  size_t n = w.before_len - 12;
  unsigned char *b = malloc(n);
  memcpy(b, w.before, n);
  rw_put_u64_at(&(rw_buf){b, n, n}, RW_AT_TOTAL, n);
  decode_raw(b, n, RS_ERR_CORRUPT, "checksum", NULL);
  free(b);
}

Test(wire_bytes, trailing_garbage_after_the_checksum) {
  unsigned char *b = malloc(w.before_len + 5);
  memcpy(b, w.before, w.before_len);
  memcpy(b + w.before_len, "junk!", 5);
  decode_raw(b, w.before_len + 5, RS_ERR_CORRUPT, "length", NULL);
  free(b);
}

Test(wire_bytes, wrong_magic) {
  unsigned char *b = malloc(w.before_len);
  memcpy(b, w.before, w.before_len);
  memcpy(b, "RSPLAN00", 8);
  rw_reseal(b, w.before_len);
  decode_raw(b, w.before_len, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
  free(b);
}

Test(wire_bytes, magic_in_lower_case) {
  unsigned char *b = malloc(w.before_len);
  memcpy(b, w.before, w.before_len);
  memcpy(b, "rslayout", 8);
  rw_reseal(b, w.before_len);
  decode_raw(b, w.before_len, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
  free(b);
}

Test(wire_bytes, future_wire_version) {
  wspec s = spec_ok();
  s.version = 2;
  decode_spec(&s, RS_ERR_CORRUPT, "wire version 2", "version 1");
}

Test(wire_bytes, wire_version_zero) {
  wspec s = spec_ok();
  s.version = 0;
  decode_spec(&s, RS_ERR_CORRUPT, "wire version 0", NULL);
}

Test(wire_bytes, wire_version_all_ones) {
  wspec s = spec_ok();
  s.version = UINT32_MAX;
  decode_spec(&s, RS_ERR_CORRUPT, "wire version 4294967295", NULL);
}

Test(wire_bytes, length_field_too_large) {
  unsigned char *b = malloc(w.before_len);
  memcpy(b, w.before, w.before_len);
  rw_put_u64_at(&(rw_buf){b, w.before_len, w.before_len}, RW_AT_TOTAL,
                UINT64_MAX);
  decode_raw(b, w.before_len, RS_ERR_CORRUPT, "length", NULL);
  free(b);
}

Test(wire_bytes, checksum_flipped) {
  unsigned char *b = malloc(w.before_len);
  memcpy(b, w.before, w.before_len);
  b[w.before_len - 1] ^= 0x80;
  decode_raw(b, w.before_len, RS_ERR_CORRUPT, "checksum", NULL);
  free(b);
}

Test(wire_bytes, one_bit_flipped_in_a_shape) {
  /* byte 24 + 4 (ntensors) + 4 (name_len) + 7 (name) + 8 (dtype, ndim):
   * the first shape entry; the checksum is not fixed up */
  unsigned char *b = malloc(w.before_len);
  memcpy(b, w.before, w.before_len);
  b[24 + 4 + 4 + 7 + 8] ^= 0x04;
  decode_raw(b, w.before_len, RS_ERR_CORRUPT, "checksum", NULL);
  free(b);
}

Test(wire_bytes, every_byte_zero) {
  unsigned char b[64] = {0};
  decode_raw(b, sizeof b, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
}

Test(wire_bytes, random_garbage) {
  unsigned char b[257];
  uint64_t x = 42;
  for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(x = rt_mix(x));
  decode_raw(b, sizeof b, RS_ERR_CORRUPT, "RSLAYOUT", NULL);
}

Test(wire_bytes, garbage_behind_a_valid_header) {
  /* magic, version and length right, the rest random, checksum resealed */
  unsigned char b[200];
  uint64_t x = 7;
  for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(x = rt_mix(x));
  memcpy(b, "RSLAYOUT", 8);
  rw_put_u32_at(&(rw_buf){b, sizeof b, sizeof b}, RW_AT_VERSION, RW_VERSION);
  rw_put_u32_at(&(rw_buf){b, sizeof b, sizeof b}, RW_AT_RANK, 0);
  rw_reseal(b, sizeof b);
  decode_raw(b, sizeof b, RS_ERR_CORRUPT, "layout bytes", NULL);
}

Test(wire_bytes, tensor_count_huge) {
  wspec s = spec_ok();
  s.ntensors_field = UINT32_MAX;
  decode_spec(&s, RS_ERR_CORRUPT, "tensor count", NULL);
}

Test(wire_bytes, tensor_count_one_too_many) {
  /* says 2 tensors, holds 1: the shard count is read as a name */
  wspec s = spec_ok();
  s.ntensors_field = 2;
  decode_spec(&s, RS_ERR_CORRUPT, "layout bytes", NULL);
}

Test(wire_bytes, shard_count_huge) {
  wspec s = spec_ok();
  s.nshards_field = UINT64_MAX;
  decode_spec(&s, RS_ERR_CORRUPT, "shard count", NULL);
}

Test(wire_bytes, shard_count_one_too_many) {
  wspec s = spec_ok();
  s.nshards_field = 2;
  decode_spec(&s, RS_ERR_CORRUPT, "shard", NULL);
}

Test(wire_bytes, shard_count_one_too_few) {
  /* says 0 shards, holds 1: the shard's bytes are left over */
  rw_buf b;
  wspec s = spec_ok();
  memset(&b, 0, sizeof b);
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 1);
  rw_tensor(&b, s.name, s.dtype, s.ndim, s.shape);
  rw_u64(&b, 0);
  rw_shard(&b, 0, 1, 0, 0, 2, s.geom);
  rw_finish(&b);
  decode_raw(b.b, b.n, RS_ERR_CORRUPT, "trailing bytes", NULL);
  rw_free(&b);
}

Test(wire_bytes, tensor_name_length_huge) {
  rw_buf b;
  memset(&b, 0, sizeof b);
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 1);
  rw_u32(&b, 0x7fffffffu); /* name_len */
  rw_bytes(&b, "w", 1);
  rw_u64(&b, 0);
  rw_finish(&b);
  decode_raw(b.b, b.n, RS_ERR_CORRUPT, "tensor name", NULL);
  rw_free(&b);
}

Test(wire_bytes, tensor_name_length_zero) {
  wspec s = spec_ok();
  s.name = "";
  decode_spec(&s, RS_ERR_CORRUPT, "tensor name", NULL);
}

Test(wire_bytes, tensor_name_holds_a_nul) {
  rw_buf b;
  wspec s = spec_ok();
  memset(&b, 0, sizeof b);
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 1);
  rw_u32(&b, 3);
  rw_bytes(&b, "a\0b", 3);
  rw_u32(&b, s.dtype);
  rw_u32(&b, s.ndim);
  rw_u64(&b, 8);
  rw_u64(&b, 6);
  rw_u64(&b, 0);
  rw_finish(&b);
  decode_raw(b.b, b.n, RS_ERR_CORRUPT, "NUL", NULL);
  rw_free(&b);
}

Test(wire_bytes, ndim_zero) {
  wspec s = spec_ok();
  s.ndim = 0;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_CORRUPT, "ndim", NULL);
}

Test(wire_bytes, ndim_above_max) {
  wspec s = spec_ok();
  s.ndim = RS_MAX_DIMS + 1;
  for (int d = 0; d < RS_MAX_DIMS + 1; d++) s.shape[d] = 1;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_CORRUPT, "ndim", NULL);
}

Test(wire_bytes, dtype_unknown) {
  wspec s = spec_ok();
  s.dtype = 99;
  decode_spec(&s, RS_ERR_INVALID_ARGUMENT, "dtype 99", "'w'");
}

Test(wire_bytes, shape_zero) {
  wspec s = spec_ok();
  s.shape[1] = 0;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_BAD_SHAPE, "size 0", "'w'");
}

Test(wire_bytes, shape_negative) {
  wspec s = spec_ok();
  s.shape[0] = (uint64_t)-5;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_BAD_SHAPE, "size -5", NULL);
}

Test(wire_bytes, shape_overflows_int64) {
  wspec s = spec_ok();
  s.shape[0] = (uint64_t)1 << 40;
  s.shape[1] = (uint64_t)1 << 40;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_OVERFLOW, "overflows", "'w'");
}

Test(wire_bytes, tensor_declared_with_another_shape) {
  /* keep.me is u8 [16] in the layout; the bytes say u8 [17] */
  wspec s = spec_ok();
  s.name = "keep.me";
  s.dtype = RS_DTYPE_U8;
  s.ndim = 1;
  s.shape[0] = 17;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_MISMATCH, "keep.me", "shape");
}

Test(wire_bytes, tensor_declared_with_another_dtype) {
  wspec s = spec_ok();
  s.name = "keep.me";
  s.dtype = RS_DTYPE_I8;
  s.ndim = 1;
  s.shape[0] = 16;
  s.no_shard = true;
  decode_spec(&s, RS_ERR_MISMATCH, "keep.me", "dtype");
}

Test(wire_bytes, same_name_twice_in_one_encoding_differently) {
  rw_buf b;
  memset(&b, 0, sizeof b);
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 2);
  rw_tensor(&b, "dup", RS_DTYPE_F32, 1, U64(4));
  rw_tensor(&b, "dup", RS_DTYPE_F32, 1, U64(5));
  rw_u64(&b, 0);
  rw_finish(&b);
  decode_raw(b.b, b.n, RS_ERR_MISMATCH, "dup", NULL);
  rw_free(&b);
}

Test(wire_bytes, shard_names_a_tensor_that_is_not_there) {
  wspec s = spec_ok();
  s.s_tensor = 1;
  decode_spec(&s, RS_ERR_CORRUPT, "not there", NULL);
}

Test(wire_bytes, shard_tensor_index_all_ones) {
  wspec s = spec_ok();
  s.s_tensor = UINT32_MAX;
  decode_spec(&s, RS_ERR_CORRUPT, "not there", NULL);
}

Test(wire_bytes, shard_rank_outside_world) {
  wspec s = spec_ok();
  s.s_rank = 9;
  decode_spec(&s, RS_ERR_UNKNOWN_RANK, "rank 9", "'w'");
}

Test(wire_bytes, shard_rank_all_ones) {
  wspec s = spec_ok();
  s.s_rank = UINT32_MAX;
  decode_spec(&s, RS_ERR_UNKNOWN_RANK, "rank -1", NULL);
}

Test(wire_bytes, shard_buffer_outside_range) {
  wspec s = spec_ok();
  s.s_buffer = 70000;
  decode_spec(&s, RS_ERR_UNKNOWN_BUFFER, "70000", "'w'");
}

Test(wire_bytes, shard_byte_offset_negative) {
  wspec s = spec_ok();
  s.s_byte_offset = (uint64_t)-8;
  decode_spec(&s, RS_ERR_INVALID_ARGUMENT, "byte offset -8", NULL);
}

Test(wire_bytes, shard_box_outside_tensor) {
  wspec s = spec_ok();
  s.geom[0] = 6; /* rows [6, 10) of 8 */
  decode_spec(&s, RS_ERR_OUT_OF_BOUNDS, "outside", "'w'");
}

Test(wire_bytes, shard_offset_negative) {
  wspec s = spec_ok();
  s.geom[1] = (uint64_t)-1;
  decode_spec(&s, RS_ERR_OUT_OF_BOUNDS, "-1", "'w'");
}

Test(wire_bytes, shard_extent_zero) {
  wspec s = spec_ok();
  s.geom[2] = 0;
  decode_spec(&s, RS_ERR_BAD_SHAPE, "extent 0", "'w'");
}

Test(wire_bytes, shard_stride_zero) {
  wspec s = spec_ok();
  s.geom[4] = 0;
  decode_spec(&s, RS_ERR_INVALID_ARGUMENT, "stride 0", "'w'");
}

Test(wire_bytes, shard_stride_negative) {
  wspec s = spec_ok();
  s.geom[5] = (uint64_t)-1;
  decode_spec(&s, RS_ERR_INVALID_ARGUMENT, "stride -1", "'w'");
}

Test(wire_bytes, shard_strides_overlap_itself) {
  wspec s = spec_ok();
  s.geom[4] = 3; /* rows 3 floats apart, 6 floats long */
  decode_spec(&s, RS_ERR_OVERLAP, "overlap itself", "'w'");
}

Test(wire_bytes, shard_strided_span_overflows) {
  wspec s = spec_ok();
  s.geom[4] = (uint64_t)1 << 62;
  decode_spec(&s, RS_ERR_OVERFLOW, "overflows", "'w'");
}

Test(wire_bytes, shard_byte_offset_plus_span_overflows) {
  wspec s = spec_ok();
  s.s_byte_offset = (uint64_t)INT64_MAX - 10;
  decode_spec(&s, RS_ERR_OVERFLOW, "overflows", "'w'");
}

Test(wire_bytes, second_shard_bad_leaves_the_first_out_too) {
  /* all or nothing: a good shard followed by a bad one adds neither */
  rw_buf b;
  wspec s = spec_ok();
  memset(&b, 0, sizeof b);
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 1);
  rw_tensor(&b, s.name, s.dtype, s.ndim, s.shape);
  rw_u64(&b, 2);
  rw_shard(&b, 0, 1, 0, 0, 2, s.geom);
  rw_shard(&b, 0, 77, 0, 0, 2, s.geom);
  rw_finish(&b);
  decode_raw(b.b, b.n, RS_ERR_UNKNOWN_RANK, "rank 77", NULL);
  rw_free(&b);
}

/* ========================================================= settings ===== */

static struct {
  rs_context *ctx;
} sx;

static void sx_setup(void) {
  cr_assert_eq(rs_context_create_local(2, &sx.ctx), RS_OK);
}
static void sx_teardown(void) { rs_context_destroy(sx.ctx); }

TestSuite(settings, .init = sx_setup, .fini = sx_teardown);

/* set(param, value) must fail with RS_ERR_BAD_PARAM, name the value, and
 * leave the setting at its default. */
static void expect_bad_value(rs_param param, int64_t value, int64_t dflt) {
  char want[32];
  snprintf(want, sizeof want, "%lld", (long long)value);
  EXPECT_FAIL(rs_context_set_param(sx.ctx, param, value), RS_ERR_BAD_PARAM,
              sx.ctx, want, "outside");
  int64_t v = -7;
  cr_assert_eq(rs_context_get_param(sx.ctx, param, &v), RS_OK);
  cr_assert_eq(v, dflt, "param %d changed to %lld by a refused set",
               (int)param, (long long)v);
}

#define KIB ((int64_t)1 << 10)
#define MIB ((int64_t)1 << 20)

Test(settings, staging_one_below_min) {
  expect_bad_value(RS_PARAM_STAGING_BYTES, 64 * KIB - 1, 256 * MIB);
}
Test(settings, staging_one_above_max) {
  expect_bad_value(RS_PARAM_STAGING_BYTES, ((int64_t)1 << 40) + 1, 256 * MIB);
}
Test(settings, staging_negative) {
  expect_bad_value(RS_PARAM_STAGING_BYTES, -256 * MIB, 256 * MIB);
}
Test(settings, slice_one_below_min) {
  expect_bad_value(RS_PARAM_SLICE_BYTES, 4 * KIB - 1, 4 * MIB);
}
Test(settings, slice_one_above_max) {
  expect_bad_value(RS_PARAM_SLICE_BYTES, ((int64_t)1 << 30) + 1, 4 * MIB);
}
Test(settings, slice_zero) {
  expect_bad_value(RS_PARAM_SLICE_BYTES, 0, 4 * MIB);
}
Test(settings, timeout_zero) {
  expect_bad_value(RS_PARAM_TIMEOUT_MS, 0, 60000);
}
Test(settings, timeout_negative) {
  expect_bad_value(RS_PARAM_TIMEOUT_MS, -1, 60000);
}
Test(settings, timeout_one_above_max) {
  expect_bad_value(RS_PARAM_TIMEOUT_MS, 86400001, 60000);
}
Test(settings, integrity_two) {
  expect_bad_value(RS_PARAM_INTEGRITY, 2, 0);
}
Test(settings, integrity_negative) {
  expect_bad_value(RS_PARAM_INTEGRITY, -1, 0);
}
Test(settings, value_int64_min) {
  expect_bad_value(RS_PARAM_TIMEOUT_MS, INT64_MIN, 60000);
}
Test(settings, value_int64_max) {
  expect_bad_value(RS_PARAM_STAGING_BYTES, INT64_MAX, 256 * MIB);
}

Test(settings, bounds_themselves_are_accepted) {
  const rs_param all[4] = {RS_PARAM_STAGING_BYTES, RS_PARAM_SLICE_BYTES,
                           RS_PARAM_TIMEOUT_MS, RS_PARAM_INTEGRITY};
  for (int i = 0; i < 4; i++) {
    int64_t lo = 0, hi = 0, v = 0;
    cr_assert_eq(rs_param_bounds(all[i], &lo, &hi), RS_OK);
    cr_assert_eq(rs_context_set_param(sx.ctx, all[i], lo), RS_OK);
    cr_assert_eq(rs_context_get_param(sx.ctx, all[i], &v), RS_OK);
    cr_assert_eq(v, lo);
    cr_assert_eq(rs_context_set_param(sx.ctx, all[i], hi), RS_OK);
    cr_assert_eq(rs_context_get_param(sx.ctx, all[i], &v), RS_OK);
    cr_assert_eq(v, hi);
  }
}

/* Unknown parameters: neighbours of the real values, zero, negative, big. */
static void expect_unknown_param(int param) {
  char want[32];
  snprintf(want, sizeof want, "%d", param);
  int64_t v = 5, lo = 5, hi = 5;
  EXPECT_FAIL(rs_context_set_param(sx.ctx, (rs_param)param, 1),
              RS_ERR_BAD_PARAM, sx.ctx, "unknown parameter", want);
  EXPECT_FAIL(rs_context_get_param(sx.ctx, (rs_param)param, &v),
              RS_ERR_BAD_PARAM, sx.ctx, "unknown parameter", want);
  cr_assert_eq(v, 0);
  EXPECT_FAIL(rs_param_bounds((rs_param)param, &lo, &hi), RS_ERR_BAD_PARAM,
              NULL, "unknown parameter", want);
  cr_assert_eq(lo, 0);
  cr_assert_eq(hi, 0);
}

Test(settings, param_zero) { expect_unknown_param(0); }
Test(settings, param_between_staging_and_slice_neighbours) {
  expect_unknown_param(102);
}
Test(settings, param_just_below_timeout) { expect_unknown_param(199); }
Test(settings, param_just_above_integrity) { expect_unknown_param(202); }
Test(settings, param_negative) { expect_unknown_param(-100); }
Test(settings, param_int_max) { expect_unknown_param(INT_MAX); }

/* ========================================================== buffers ===== */

/* world 4; source: rank 0 holds the whole f32 [8,6] in buffer 0;
 * destination: ranks 1 and 2 hold rows [0,4) and [4,8) in buffer 3. */
#define BT "blk.3.ffn_up.weight"
#define ROWB (6 * 4)

static struct {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  unsigned char *s0, *d1, *d2;
} b;

static void build_plan(rs_context *ctx, rs_layout **src, rs_layout **dst,
                       rs_plan **plan) {
  cr_assert_eq(rs_layout_create(ctx, src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*src, BT, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*dst, BT, RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(*src, BT, 0, I64(0, 0), I64(8, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*dst, BT, 1, I64(0, 0), I64(4, 6), 3, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*dst, BT, 2, I64(4, 0), I64(4, 6), 3, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_plan_create(*src, *dst, plan), RS_OK, "%s",
               rs_context_last_error(ctx));
}

static void fill_source(unsigned char *s, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) s[i] = (unsigned char)(i * 31u + seed);
}

static void bx_setup(void) {
  memset(&b, 0, sizeof b);
  cr_assert_eq(rs_context_create_local(4, &b.ctx), RS_OK);
  build_plan(b.ctx, &b.src, &b.dst, &b.plan);
  /* one arena, so that tests can bind overlapping ranges */
  b.s0 = malloc(8 * ROWB);
  b.d1 = malloc(4 * ROWB);
  b.d2 = malloc(4 * ROWB);
  fill_source(b.s0, 8 * ROWB, 1);
  memset(b.d1, RT_POISON, 4 * ROWB);
  memset(b.d2, RT_POISON, 4 * ROWB);
}

static void bx_teardown(void) {
  rs_plan_destroy(b.plan);
  rs_layout_destroy(b.src);
  rs_layout_destroy(b.dst);
  rs_context_destroy(b.ctx);
  free(b.s0);
  free(b.d1);
  free(b.d2);
}

static void expect_poisoned(const unsigned char *p, size_t n,
                            const char *what) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != RT_POISON)
      cr_assert_fail("%s: destination byte %zu changed to 0x%02x", what, i,
                     p[i]);
}

static void expect_delivered(const unsigned char *s0, const unsigned char *d1,
                             const unsigned char *d2) {
  cr_assert(memcmp(d1, s0, 4 * ROWB) == 0, "rank 1 holds wrong bytes");
  cr_assert(memcmp(d2, s0 + 4 * ROWB, 4 * ROWB) == 0,
            "rank 2 holds wrong bytes");
}

TestSuite(buffers, .init = bx_setup, .fini = bx_teardown);

Test(buffers, bind_buffer_index_negative) {
  EXPECT_FAIL(rs_plan_bind(b.plan, RS_SIDE_DST, 1, -1, b.d1, 4 * ROWB),
              RS_ERR_UNKNOWN_BUFFER, b.ctx, "buffer -1", NULL);
}

Test(buffers, bind_buffer_index_past_max) {
  EXPECT_FAIL(rs_plan_bind(b.plan, RS_SIDE_DST, 1, RS_MAX_BUFFERS, b.d1,
                           4 * ROWB),
              RS_ERR_UNKNOWN_BUFFER, b.ctx, "65536", NULL);
}

Test(buffers, bind_zero_bytes) {
  EXPECT_FAIL(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, b.d2, 0),
              RS_ERR_BUFFER_TOO_SMALL, b.ctx, "0 bytes", "96");
}

Test(buffers, bind_source_one_byte_short) {
  EXPECT_FAIL(rs_plan_bind(b.plan, RS_SIDE_SRC, 0, 0, b.s0, 8 * ROWB - 1),
              RS_ERR_BUFFER_TOO_SMALL, b.ctx, "191", "192");
}

/* The caller meant to replace the binding: the earlier memory may be freed
 * by now, so a refused rebind leaves the buffer unbound and the next
 * execution refuses to run instead of writing it. */
Test(buffers, failed_rebind_unbinds) {
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_SRC, 0, 0, b.s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 1, 3, b.d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, b.d2, 4 * ROWB), RS_OK);
  unsigned char small[8];
  memset(small, RT_POISON, sizeof small);
  EXPECT_FAIL(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, small, sizeof small),
              RS_ERR_BUFFER_TOO_SMALL, b.ctx, "8 bytes", "now unbound");
  EXPECT_FAIL(rs_plan_execute(b.plan), RS_ERR_UNKNOWN_BUFFER, b.ctx,
              "destination buffer 3 of rank 2", "not bound");
  expect_poisoned(b.d1, 4 * ROWB, "rank 1");
  expect_poisoned(b.d2, 4 * ROWB, "the earlier binding of rank 2");
  expect_poisoned(small, sizeof small, "the refused buffer");
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, b.d2, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_execute(b.plan), RS_OK, "%s",
               rs_context_last_error(b.ctx));
  expect_delivered(b.s0, b.d1, b.d2);
}

Test(buffers, destination_never_bound_after_a_failed_bind) {
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_SRC, 0, 0, b.s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 1, 3, b.d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, b.d2, 4 * ROWB - 4),
               RS_ERR_BUFFER_TOO_SMALL);
  EXPECT_FAIL(rs_plan_execute(b.plan), RS_ERR_UNKNOWN_BUFFER, b.ctx,
              "destination buffer 3 of rank 2", "not bound");
  expect_poisoned(b.d1, 4 * ROWB, "rank 1");
  expect_poisoned(b.d2, 4 * ROWB, "rank 2");
}

Test(buffers, huge_size_is_fine) {
  /* the size is what the caller promises; it only has to be enough */
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 1, 3, b.d1, SIZE_MAX), RS_OK,
               "%s", rs_context_last_error(b.ctx));
}

/* Bind src rank 0 at s, dst ranks 1 and 2 at d1, d2; execute must refuse
 * with RS_ERR_OVERLAP and change no byte of the arena. */
static void expect_overlap_refused(unsigned char *arena, size_t arena_len,
                                   unsigned char *s, unsigned char *d1,
                                   unsigned char *d2, const char *frag) {
  unsigned char *snap = malloc(arena_len);
  memcpy(snap, arena, arena_len);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_SRC, 0, 0, s, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 1, 3, d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(b.plan, RS_SIDE_DST, 2, 3, d2, 4 * ROWB), RS_OK);
  EXPECT_FAIL(rs_plan_execute(b.plan), RS_ERR_OVERLAP, b.ctx, "overlaps",
              frag);
  cr_assert(memcmp(snap, arena, arena_len) == 0,
            "a refused execution changed memory");
  free(snap);
}

Test(buffers, destination_is_the_source_buffer) {
  unsigned char *a = malloc(8 * ROWB);
  fill_source(a, 8 * ROWB, 3);
  expect_overlap_refused(a, 8 * ROWB, a, a, a + 4 * ROWB, "source buffer 0");
  free(a);
}

Test(buffers, destination_of_another_rank_inside_the_source) {
  /* in one process every rank's memory is one memory: rank 2's
   * destination inside rank 0's source would be read while written */
  unsigned char *a = malloc(8 * ROWB);
  fill_source(a, 8 * ROWB, 5);
  unsigned char *d1 = malloc(4 * ROWB);
  memset(d1, RT_POISON, 4 * ROWB);
  expect_overlap_refused(a, 8 * ROWB, a, d1, a + 2 * ROWB, "rank 2");
  expect_poisoned(d1, 4 * ROWB, "rank 1");
  free(d1);
  free(a);
}

Test(buffers, destination_overlaps_source_by_one_byte) {
  unsigned char *a = malloc(12 * ROWB);
  fill_source(a, 12 * ROWB, 7);
  unsigned char *d1 = malloc(4 * ROWB);
  memset(d1, RT_POISON, 4 * ROWB);
  /* source [0, 192), rank 2's destination [191, 287) */
  expect_overlap_refused(a, 12 * ROWB, a, d1, a + 8 * ROWB - 1, "rank 2");
  expect_poisoned(d1, 4 * ROWB, "rank 1");
  free(d1);
  free(a);
}

Test(buffers, two_destinations_share_memory) {
  unsigned char *a = malloc(8 * ROWB);
  memset(a, RT_POISON, 8 * ROWB);
  unsigned char *s = malloc(8 * ROWB);
  fill_source(s, 8 * ROWB, 9);
  /* rank 1's [0,96) and rank 2's [48,144): written twice */
  expect_overlap_refused(a, 8 * ROWB, s, a, a + 2 * ROWB, "destination");
  expect_poisoned(a, 8 * ROWB, "destinations");
  free(s);
  free(a);
}

Test(buffers, two_destinations_are_the_same_memory) {
  unsigned char *a = malloc(4 * ROWB);
  memset(a, RT_POISON, 4 * ROWB);
  expect_overlap_refused(a, 4 * ROWB, b.s0, a, a, "destination");
  expect_poisoned(a, 4 * ROWB, "destinations");
  free(a);
}

Test(buffers, two_sources_sharing_memory_is_fine) {
  /* reading the same bytes twice is allowed: rank 0 and rank 3 both hold
   * the whole tensor in the same memory */
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_layout_create(b.ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(b.ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, BT, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, BT, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, BT, 0, I64(0, 0), I64(8, 6), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, BT, 3, I64(0, 0), I64(8, 6), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 1, I64(0, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, BT, 2, I64(4, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, b.s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 3, 0, b.s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, b.d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 3, b.d2, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(b.ctx));
  expect_delivered(b.s0, b.d1, b.d2);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
}

/* ============================= handles after their context's destroy ===== */

/* The API keeps a context alive while a layout or plan made from it
 * exists, so "use after the context was destroyed" is not an error to
 * detect: everything made from it must go on working. (Messages of later
 * failures are recorded on that context, which the caller no longer may
 * name, so these Tests assert the status alone.) */

static void execute_and_check(rs_plan *plan, unsigned seed) {
  unsigned char s0[8 * ROWB], d1[4 * ROWB], d2[4 * ROWB];
  fill_source(s0, sizeof s0, seed);
  memset(d1, RT_POISON, sizeof d1);
  memset(d2, RT_POISON, sizeof d2);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, s0, sizeof s0), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, d1, sizeof d1), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 3, d2, sizeof d2), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK);
  expect_delivered(s0, d1, d2);
}

Test(after_context_destroy, plan_executes) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  build_plan(ctx, &s, &d, &plan);
  rs_context_destroy(ctx);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  execute_and_check(plan, 11);
  execute_and_check(plan, 12); /* and again, after the source changed */
  rs_plan_destroy(plan);
}

Test(after_context_destroy, plan_queries_answer) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  build_plan(ctx, &s, &d, &plan);
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
  cr_assert(rt_contains(json, BT));
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
  build_plan(ctx, &s, &d, &plan);
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
  build_plan(ctx, &s, &d, &plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
  unsigned char d1[4 * ROWB];
  memset(d1, RT_POISON, sizeof d1);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 3, d1, sizeof d1), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_ERR_UNKNOWN_BUFFER);
  expect_poisoned(d1, sizeof d1, "rank 1");
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
  build_plan(ctx, &s, &d, &plan);
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
    build_plan(ctx, &s, &d, &plan);
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

/* ============================================ MPI entry points, no MPI ===== */

Test(mpi_without_mpi, allgather_on_an_in_process_context) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "t", RS_DTYPE_U8, 1, I64(4)), RS_OK);
  EXPECT_FAIL(rs_layout_allgather(l), RS_ERR_UNSUPPORTED, ctx, "MPI", NULL);
  int n = 0;
  cr_assert_eq(rs_layout_num_tensors(l, &n), RS_OK);
  cr_assert_eq(n, 1);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

Test(mpi_without_mpi, allgather_null_layout) {
  EXPECT_FAIL(rs_layout_allgather(NULL), RS_ERR_NULL_POINTER, NULL, "layout",
              NULL);
}

Test(mpi_without_mpi, create_out_null) {
  EXPECT_FAIL(rs_context_create_mpi_fortran(0, NULL), RS_ERR_NULL_POINTER,
              NULL, "out", NULL);
}

static void expect_bad_domain_env(const char *value) {
  rs_context *ctx = (rs_context *)SENTINEL;
  setenv("RESHARD_DOMAIN_SIZE", value, 1);
  char want[64];
  snprintf(want, sizeof want, "RESHARD_DOMAIN_SIZE='%s'", value);
  EXPECT_FAIL(rs_context_create_mpi_fortran(0, &ctx), RS_ERR_INVALID_ARGUMENT,
              NULL, want, NULL);
  cr_assert_null(ctx);
}

Test(mpi_without_mpi, domain_size_env_not_a_number) {
  expect_bad_domain_env("eight");
}
Test(mpi_without_mpi, domain_size_env_zero) { expect_bad_domain_env("0"); }
Test(mpi_without_mpi, domain_size_env_negative) {
  expect_bad_domain_env("-4");
}
Test(mpi_without_mpi, domain_size_env_trailing_garbage) {
  expect_bad_domain_env("4x");
}
Test(mpi_without_mpi, domain_size_env_too_large) {
  expect_bad_domain_env("99999999999");
}

Test(mpi_without_mpi, module_not_found) {
  rs_context *ctx = (rs_context *)SENTINEL;
  unsetenv("RESHARD_DOMAIN_SIZE");
  setenv("RESHARD_MPI_MODULE", "/nonexistent/libreshard-mpi.so.0", 1);
  rs_status st = rs_context_create_mpi_fortran(0, &ctx);
  cr_assert_null(ctx);
  if (st == RS_ERR_INVALID_ARGUMENT &&
      rt_contains(rs_last_error(), "not initialized"))
    return; /* a module is installed where the loader finds it anyway */
  expect_fail_("rs_context_create_mpi_fortran", st, RS_ERR_UNSUPPORTED,
               rs_last_error(), "/nonexistent/libreshard-mpi.so.0",
               "RESHARD_MPI_MODULE");
}

#ifdef RT_MPI_MODULE
Test(mpi_without_mpi, mpi_not_initialized) {
  rs_context *ctx = (rs_context *)SENTINEL;
  unsetenv("RESHARD_DOMAIN_SIZE");
  setenv("RESHARD_MPI_MODULE", RT_MPI_MODULE, 1);
  EXPECT_FAIL(rs_context_create_mpi_fortran(0, &ctx), RS_ERR_INVALID_ARGUMENT,
              NULL, "not initialized", "MPI_Init");
  cr_assert_null(ctx);
}
#endif

/* ====================================================== plan limits ===== */

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
    cr_assert(rt_contains(rs_context_last_error(ctx), "huge"),
              "message does not name the tensor: %s",
              rs_context_last_error(ctx));
    cr_assert_null(plan);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}
