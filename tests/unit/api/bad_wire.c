/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, layout wire bytes (rs_layout_deserialize):
 * truncated, garbage, bit flips, wrong magic, versions, length and count
 * fields, names, dtypes, shapes, shard records. One table: each case names
 * its malformed bytes (a well-formed encoding with fields edited, an edit
 * of a real layout's bytes, or bytes written by hand with th_wire.h) and
 * asserts the exact rs_status, a message fragment naming the field, no
 * internal sender rank in the message, and that the layout decoded into is
 * byte-for-byte what it was. */
#include "th_bad_input.h"
#include "th_wire.h"

#include <stdio.h>
#include <string.h>

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

TestSuite(wire_bytes, .init = wx_setup, .fini = wx_teardown);

/* The fields of one well-formed encoding: tensor "w" f32 [8,6], one dense
 * shard of rows [2,6) on rank 1, buffer 0, byte offset 0. Cases edit
 * fields and encode. */
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

/* One edit of a field of the spec. */
typedef enum field {
  F_END, F_VERSION, F_NTENSORS, F_NSHARDS, F_DTYPE,
  F_NDIM,    /* ndim v, every dim of size 1 */
  F_SHAPE0, F_SHAPE1, F_NO_SHARD,
  F_TENSOR, F_RANK, F_BUFFER, F_BYTE_OFFSET,
  F_GEOM     /* F_GEOM + k: geom[k] (offsets, extents, strides) */
} field;

typedef struct edit {
  int field;
  uint64_t v;
} edit;

static void apply(wspec *s, const edit *e) {
  for (; e->field != F_END; e++) {
    switch (e->field) {
    case F_VERSION: s->version = (uint32_t)e->v; break;
    case F_NTENSORS: s->ntensors_field = (uint32_t)e->v; break;
    case F_NSHARDS: s->nshards_field = e->v; break;
    case F_DTYPE: s->dtype = (uint32_t)e->v; break;
    case F_NDIM:
      s->ndim = (uint32_t)e->v;
      for (uint32_t d = 0; d < s->ndim; d++) s->shape[d] = 1;
      break;
    case F_SHAPE0: s->shape[0] = e->v; break;
    case F_SHAPE1: s->shape[1] = e->v; break;
    case F_NO_SHARD: s->no_shard = true; break;
    case F_TENSOR: s->s_tensor = (uint32_t)e->v; break;
    case F_RANK: s->s_rank = (uint32_t)e->v; break;
    case F_BUFFER: s->s_buffer = (uint32_t)e->v; break;
    case F_BYTE_OFFSET: s->s_byte_offset = e->v; break;
    default: s->geom[e->field - F_GEOM] = e->v; break;
    }
  }
}

/* What bytes a case decodes. */
typedef enum wire_kind {
  W_SPEC,       /* the spec with its edits (and name) */
  W_PREFIX,     /* the fixture's own bytes cut to a (< 0: length + a;
                   HALF: half of them) */
  W_CUT_PATCHED, /* cut by a bytes, the length field says so, no reseal */
  W_TRAILING,   /* the fixture's bytes and 5 more */
  W_MAGIC,      /* the fixture's bytes, magic replaced by text, resealed */
  W_LENGTH_MAX, /* the fixture's bytes, the length field all ones */
  W_FLIP,       /* the fixture's bytes, byte a (< 0: from the end) ^ mask */
  W_ZEROS,      /* a zero bytes */
  W_RANDOM,     /* a random bytes (seed mask) */
  W_RANDOM_BODY, /* the same behind a valid header, resealed */
  W_NULL_BYTES, W_NULL_LAYOUT,
  /* written field by field */
  W_SHARD_COUNT_ONE_TOO_FEW, W_NAME_LENGTH_HUGE, W_NAME_HOLDS_A_NUL,
  W_SAME_NAME_TWICE, W_SECOND_SHARD_BAD
} wire_kind;

#define HALF INT64_MIN

typedef struct wire_case {
  const char *name;
  wire_kind kind;
  int64_t a;
  unsigned mask;
  const char *text; /* W_SPEC: the tensor name (NULL: "w"); W_MAGIC */
  edit edits[5];
  rs_status want;
  const char *f1, *f2;
} wire_case;

#define SPEC(...) W_SPEC, 0, 0, NULL, {__VA_ARGS__, {F_END, 0}}
#define KEEP_ME(...) W_SPEC, 0, 0, "keep.me", {__VA_ARGS__, {F_END, 0}}
#define RAW(kind, a, mask, text) kind, a, mask, text, {{F_END, 0}}
#define CORRUPT RS_ERR_CORRUPT

static const wire_case wire_cases[] = {
    {"zero_length", RAW(W_ZEROS, 0, 0, NULL), CORRUPT, "RSLAYOUT", NULL},
    /* rs_layout_deserialize has no sender rank: its messages must not show
     * the decoder's internal "any sender" value (-2) as a rank (every case
     * checks that) */
    {"message_names_no_internal_sender", RAW(W_ZEROS, 64, 0, NULL), CORRUPT,
     "RSLAYOUT", NULL},
    {"null_bytes", RAW(W_NULL_BYTES, 100, 0, NULL), RS_ERR_NULL_POINTER,
     "bytes", NULL},
    {"null_layout", RAW(W_NULL_LAYOUT, 0, 0, NULL), RS_ERR_NULL_POINTER,
     "layout", NULL},
    {"shorter_than_a_header", RAW(W_PREFIX, 20, 0, NULL), CORRUPT,
     "RSLAYOUT", NULL},
    {"truncated_by_one_byte", RAW(W_PREFIX, -1, 0, NULL), CORRUPT, "length",
     NULL},
    {"truncated_to_half", RAW(W_PREFIX, HALF, 0, NULL), CORRUPT, "length",
     NULL},
    /* a sender that cut its bytes short and wrote a matching length: the
     * checksum still catches it (it covers the cut-off part) */
    {"truncated_and_length_field_patched", RAW(W_CUT_PATCHED, 12, 0, NULL),
     CORRUPT, "checksum", NULL},
    {"trailing_garbage_after_the_checksum", RAW(W_TRAILING, 0, 0, NULL),
     CORRUPT, "length", NULL},
    {"wrong_magic", RAW(W_MAGIC, 0, 0, "RSPLAN00"), CORRUPT, "RSLAYOUT",
     NULL},
    {"magic_in_lower_case", RAW(W_MAGIC, 0, 0, "rslayout"), CORRUPT,
     "RSLAYOUT", NULL},
    {"future_wire_version", SPEC({F_VERSION, 3}), CORRUPT, "wire version 3",
     "versions 1 and 2"},
    /* version 2 promises block-scale declarations after the shards */
    {"version_2_without_its_block_scales", SPEC({F_VERSION, 2}), CORRUPT,
     "truncated block-scale count", NULL},
    {"wire_version_zero", SPEC({F_VERSION, 0}), CORRUPT, "wire version 0",
     NULL},
    {"wire_version_all_ones", SPEC({F_VERSION, UINT32_MAX}), CORRUPT,
     "wire version 4294967295", NULL},
    {"length_field_too_large", RAW(W_LENGTH_MAX, 0, 0, NULL), CORRUPT,
     "length", NULL},
    {"checksum_flipped", RAW(W_FLIP, -1, 0x80, NULL), CORRUPT, "checksum",
     NULL},
    /* byte 24 + 4 (ntensors) + 4 (name_len) + 7 (name) + 8 (dtype, ndim):
     * the first shape entry; the checksum is not fixed up */
    {"one_bit_flipped_in_a_shape", RAW(W_FLIP, 24 + 4 + 4 + 7 + 8, 0x04, NULL),
     CORRUPT, "checksum", NULL},
    {"every_byte_zero", RAW(W_ZEROS, 64, 0, NULL), CORRUPT, "RSLAYOUT", NULL},
    {"random_garbage", RAW(W_RANDOM, 257, 42, NULL), CORRUPT, "RSLAYOUT",
     NULL},
    /* magic, version and length right, the rest random, checksum resealed */
    {"garbage_behind_a_valid_header", RAW(W_RANDOM_BODY, 200, 7, NULL),
     CORRUPT, "layout bytes", NULL},
    {"tensor_count_huge", SPEC({F_NTENSORS, UINT32_MAX}), CORRUPT,
     "tensor count", NULL},
    /* says 2 tensors, holds 1: the shard count is read as a name */
    {"tensor_count_one_too_many", SPEC({F_NTENSORS, 2}), CORRUPT,
     "layout bytes", NULL},
    {"shard_count_huge", SPEC({F_NSHARDS, UINT64_MAX}), CORRUPT,
     "shard count", NULL},
    {"shard_count_one_too_many", SPEC({F_NSHARDS, 2}), CORRUPT, "shard",
     NULL},
    /* says 0 shards, holds 1: the shard's bytes are left over */
    {"shard_count_one_too_few", RAW(W_SHARD_COUNT_ONE_TOO_FEW, 0, 0, NULL),
     CORRUPT, "trailing bytes", NULL},
    {"tensor_name_length_huge", RAW(W_NAME_LENGTH_HUGE, 0, 0, NULL), CORRUPT,
     "tensor name", NULL},
    {"tensor_name_length_zero", W_SPEC, 0, 0, "", {{F_END, 0}}, CORRUPT,
     "tensor name", NULL},
    {"tensor_name_holds_a_nul", RAW(W_NAME_HOLDS_A_NUL, 0, 0, NULL), CORRUPT,
     "NUL", NULL},
    {"ndim_zero", SPEC({F_NDIM, 0}, {F_NO_SHARD, 0}), CORRUPT, "ndim", NULL},
    {"ndim_above_max", SPEC({F_NDIM, RS_MAX_DIMS + 1}, {F_NO_SHARD, 0}),
     CORRUPT, "ndim", NULL},
    {"dtype_unknown", SPEC({F_DTYPE, 99}), RS_ERR_INVALID_ARGUMENT,
     "dtype 99", "'w'"},
    {"shape_zero", SPEC({F_SHAPE1, 0}, {F_NO_SHARD, 0}), RS_ERR_BAD_SHAPE,
     "size 0", "'w'"},
    {"shape_negative", SPEC({F_SHAPE0, (uint64_t)-5}, {F_NO_SHARD, 0}),
     RS_ERR_BAD_SHAPE, "size -5", NULL},
    {"shape_overflows_int64",
     SPEC({F_SHAPE0, (uint64_t)1 << 40}, {F_SHAPE1, (uint64_t)1 << 40},
          {F_NO_SHARD, 0}),
     RS_ERR_OVERFLOW, "overflows", "'w'"},
    /* keep.me is u8 [16] in the layout; the bytes say u8 [17] */
    {"tensor_declared_with_another_shape",
     KEEP_ME({F_DTYPE, RS_DTYPE_U8}, {F_NDIM, 1}, {F_SHAPE0, 17},
             {F_NO_SHARD, 0}),
     RS_ERR_MISMATCH, "keep.me", "shape"},
    {"tensor_declared_with_another_dtype",
     KEEP_ME({F_DTYPE, RS_DTYPE_I8}, {F_NDIM, 1}, {F_SHAPE0, 16},
             {F_NO_SHARD, 0}),
     RS_ERR_MISMATCH, "keep.me", "dtype"},
    {"same_name_twice_in_one_encoding_differently",
     RAW(W_SAME_NAME_TWICE, 0, 0, NULL), RS_ERR_MISMATCH, "dup", NULL},
    {"shard_names_a_tensor_that_is_not_there", SPEC({F_TENSOR, 1}), CORRUPT,
     "not there", NULL},
    {"shard_tensor_index_all_ones", SPEC({F_TENSOR, UINT32_MAX}), CORRUPT,
     "not there", NULL},
    {"shard_rank_outside_world", SPEC({F_RANK, 9}), RS_ERR_UNKNOWN_RANK,
     "rank 9", "'w'"},
    {"shard_rank_all_ones", SPEC({F_RANK, UINT32_MAX}), RS_ERR_UNKNOWN_RANK,
     "rank -1", NULL},
    {"shard_buffer_outside_range", SPEC({F_BUFFER, 70000}),
     RS_ERR_UNKNOWN_BUFFER, "70000", "'w'"},
    {"shard_byte_offset_negative", SPEC({F_BYTE_OFFSET, (uint64_t)-8}),
     RS_ERR_INVALID_ARGUMENT, "byte offset -8", NULL},
    /* rows [6, 10) of 8 */
    {"shard_box_outside_tensor", SPEC({F_GEOM + 0, 6}), RS_ERR_OUT_OF_BOUNDS,
     "outside", "'w'"},
    {"shard_offset_negative", SPEC({F_GEOM + 1, (uint64_t)-1}),
     RS_ERR_OUT_OF_BOUNDS, "-1", "'w'"},
    {"shard_extent_zero", SPEC({F_GEOM + 2, 0}), RS_ERR_BAD_SHAPE, "extent 0",
     "'w'"},
    {"shard_stride_zero", SPEC({F_GEOM + 4, 0}), RS_ERR_INVALID_ARGUMENT,
     "stride 0", "'w'"},
    {"shard_stride_negative", SPEC({F_GEOM + 5, (uint64_t)-1}),
     RS_ERR_INVALID_ARGUMENT, "stride -1", "'w'"},
    /* rows 3 floats apart, 6 floats long */
    {"shard_strides_overlap_itself", SPEC({F_GEOM + 4, 3}), RS_ERR_OVERLAP,
     "overlap itself", "'w'"},
    {"shard_strided_span_overflows", SPEC({F_GEOM + 4, (uint64_t)1 << 62}),
     RS_ERR_OVERFLOW, "overflows", "'w'"},
    {"shard_byte_offset_plus_span_overflows",
     SPEC({F_BYTE_OFFSET, (uint64_t)INT64_MAX - 10}), RS_ERR_OVERFLOW,
     "overflows", "'w'"},
    /* all or nothing: a good shard followed by a bad one adds neither */
    {"second_shard_bad_leaves_the_first_out_too",
     RAW(W_SECOND_SHARD_BAD, 0, 0, NULL), RS_ERR_UNKNOWN_RANK, "rank 77",
     NULL},
};

/* The bytes written field by field. */
static void by_hand(wire_kind kind, rw_buf *b) {
  wspec s = spec_ok();
  memset(b, 0, sizeof *b);
  rw_header(b, RW_VERSION, 0);
  switch (kind) {
  case W_SHARD_COUNT_ONE_TOO_FEW:
    rw_u32(b, 1);
    rw_tensor(b, s.name, s.dtype, s.ndim, s.shape);
    rw_u64(b, 0);
    rw_shard(b, 0, 1, 0, 0, 2, s.geom);
    break;
  case W_NAME_LENGTH_HUGE:
    rw_u32(b, 1);
    rw_u32(b, 0x7fffffffu); /* name_len */
    rw_bytes(b, "w", 1);
    rw_u64(b, 0);
    break;
  case W_NAME_HOLDS_A_NUL:
    rw_u32(b, 1);
    rw_u32(b, 3);
    rw_bytes(b, "a\0b", 3);
    rw_u32(b, s.dtype);
    rw_u32(b, s.ndim);
    rw_u64(b, 8);
    rw_u64(b, 6);
    rw_u64(b, 0);
    break;
  case W_SAME_NAME_TWICE:
    rw_u32(b, 2);
    rw_tensor(b, "dup", RS_DTYPE_F32, 1, U64(4));
    rw_tensor(b, "dup", RS_DTYPE_F32, 1, U64(5));
    rw_u64(b, 0);
    break;
  default: /* W_SECOND_SHARD_BAD */
    rw_u32(b, 1);
    rw_tensor(b, s.name, s.dtype, s.ndim, s.shape);
    rw_u64(b, 2);
    rw_shard(b, 0, 1, 0, 0, 2, s.geom);
    rw_shard(b, 0, 77, 0, 0, 2, s.geom);
    break;
  }
  rw_finish(b);
}

/* The bytes of a case (into b, which the caller frees). */
static void bytes_of(const wire_case *c, rw_buf *b) {
  size_t n = w.before_len;
  memset(b, 0, sizeof *b);
  switch (c->kind) {
  case W_SPEC: {
    wspec s = spec_ok();
    if (c->text) s.name = c->text;
    apply(&s, c->edits);
    encode(&s, b);
    return;
  }
  case W_PREFIX:
    n = c->a == HALF ? n / 2 : c->a < 0 ? n - (size_t)-c->a : (size_t)c->a;
    rw_bytes(b, w.before, n);
    return;
  case W_CUT_PATCHED:
    rw_bytes(b, w.before, n - (size_t)c->a);
    rw_put_u64_at(b, RW_AT_TOTAL, b->n);
    return;
  case W_TRAILING:
    rw_bytes(b, w.before, n);
    rw_bytes(b, "junk!", 5);
    return;
  case W_MAGIC:
    rw_bytes(b, w.before, n);
    memcpy(b->b, c->text, 8);
    rw_reseal(b->b, b->n);
    return;
  case W_LENGTH_MAX:
    rw_bytes(b, w.before, n);
    rw_put_u64_at(b, RW_AT_TOTAL, UINT64_MAX);
    return;
  case W_FLIP:
    rw_bytes(b, w.before, n);
    b->b[c->a < 0 ? n - (size_t)-c->a : (size_t)c->a] ^= (unsigned char)c->mask;
    return;
  case W_ZEROS:
  case W_NULL_BYTES:
  case W_NULL_LAYOUT:
    for (int64_t k = 0; k < c->a; k++) rw_bytes(b, "", 1);
    return;
  case W_RANDOM:
  case W_RANDOM_BODY: {
    unsigned char r[512];
    uint64_t x = c->mask;
    n = (size_t)c->a;
    cr_assert_leq(n, sizeof r);
    for (size_t k = 0; k < n; k++) r[k] = (unsigned char)(x = th_mix(x));
    if (c->kind == W_RANDOM_BODY) {
      rw_buf h = {r, n, n};
      memcpy(r, "RSLAYOUT", 8);
      rw_put_u32_at(&h, RW_AT_VERSION, RW_VERSION);
      rw_put_u32_at(&h, RW_AT_RANK, 0);
      rw_reseal(r, n);
    }
    rw_bytes(b, r, n);
    return;
  }
  default:
    by_hand(c->kind, b);
    return;
  }
}

/* Decoding the bytes fails with the status and message, and the layout
 * decoded into is byte-for-byte what it was. */
TH_TABLE_TEST(wire_bytes, cases, wire_cases, i) {
  const wire_case *c = &wire_cases[*i];
  rw_buf b;
  bytes_of(c, &b);
  unsigned char none = 0;
  const void *bytes = c->kind == W_NULL_BYTES ? NULL : b.b ? b.b : &none;
  size_t n = c->kind == W_NULL_LAYOUT ? w.before_len : b.n;
  if (c->kind == W_NULL_LAYOUT) bytes = w.before;
  rs_status st = rs_layout_deserialize(
      c->kind == W_NULL_LAYOUT ? NULL : w.into, bytes, n);
  th_expect_case(c->name, st, c->want, RS_OK,
                 c->kind == W_NULL_LAYOUT ? TH_MSG_THREAD : TH_MSG_CTX, w.ctx,
                 c->f1, c->f2);
  const char *msg = c->kind == W_NULL_LAYOUT ? rs_last_error()
                                             : rs_context_last_error(w.ctx);
  cr_assert(!th_contains(msg, "rank -2"),
            "%s: message names an internal rank: '%s'", c->name, msg);
  void *now = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(w.into, &now, &len), RS_OK);
  cr_assert_eq(len, w.before_len, "%s: a refused decode changed the layout "
               "(%zu bytes, was %zu)", c->name, len, w.before_len);
  cr_assert(memcmp(now, w.before, len) == 0,
            "%s: a refused decode changed the layout", c->name);
  rs_free(now);
  rw_free(&b);
}

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
