/* SPDX-License-Identifier: Apache-2.0 */
/* Input built to hurt: it must not stall a process, and a name must never
 * break JSON or an error message.
 *   - names: 80,000 names that all collide in the name index libreshard
 *     used to have (FNV-1a 32, tests/common/th_hostile.h) are found again
 *     exactly, duplicates are still refused, taking names back out of the
 *     index keeps the rest findable, and plans do not depend on the
 *     index's random key; the hashes themselves against known answers;
 *   - pieces: 1,024 serialized pieces deserialized one call at a time give
 *     the layout one call gives, and a refused deserialize (corrupt bytes,
 *     a known tensor with another shape, a shard or a name refused after
 *     new tensors were declared) leaves the layout byte for byte as it was;
 *   - text: names that are not UTF-8 or hold control bytes are refused with
 *     the offset of the first bad byte; valid UTF-8 names pass and make
 *     valid JSON (checked by json-c, strict and UTF-8-validating); error
 *     messages echo names without control bytes or invalid UTF-8.
 * Correctness only; bench/bench_hostile_input.c has the timings. */
#include <criterion/criterion.h>

#include <json-c/json.h>
#include <reshard/reshard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "layout/layout.h"
#include "th_hostile.h"
#include "th_util.h"
#include "th_wire.h"

static rs_context *new_ctx(int world) {
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local(world, &ctx), RS_OK);
  return ctx;
}

static rs_layout *new_layout(rs_context *ctx) {
  rs_layout *l = NULL;
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  return l;
}

/* The layout's serialization (rs_free it). */
static void *snapshot(const rs_layout *l, size_t *len) {
  void *b = NULL;
  cr_assert_eq(rs_layout_serialize(l, &b, len), RS_OK);
  return b;
}

static void expect_same_bytes(const void *a, size_t alen, const void *b,
                              size_t blen, const char *what) {
  cr_assert_eq(alen, blen, "%s: %zu bytes, expected %zu", what, alen, blen);
  cr_assert(memcmp(a, b, alen) == 0, "%s: the bytes differ", what);
}

/* ================================================================ names === */

enum { N_NAMES = 80000, COLLIDE_BITS = 18, N_SPARE = 1000 };

Test(names, colliding_names_are_found_exactly, .timeout = 60) {
  char(*names)[RH_NAME_BYTES] = calloc(N_NAMES + N_SPARE, RH_NAME_BYTES);
  cr_assert_not_null(names);
  cr_assert_eq(rh_colliding_names(names, N_NAMES + N_SPARE,
                                  "model.layers.7.mlp.experts.",
                                  COLLIDE_BITS),
               (size_t)(N_NAMES + N_SPARE));
  const uint32_t mask = (1u << COLLIDE_BITS) - 1;
  for (int i = 0; i < N_NAMES + N_SPARE; i++)
    cr_assert_eq(rh_fnv32(names[i]) & mask, RH_TARGET & mask,
                 "'%s' would not have collided", names[i]);

  rs_context *ctx = new_ctx(2);
  rs_layout *l = new_layout(ctx);
  for (int i = 0; i < N_NAMES; i++)
    cr_assert_eq(rs_layout_add_tensor(l, names[i], RS_DTYPE_F32, 1, I64(8)),
                 RS_OK, "'%s': %s", names[i], rs_context_last_error(ctx));
  int nt = 0;
  rs_layout_num_tensors(l, &nt);
  cr_assert_eq(nt, N_NAMES);
  for (int i = 0; i < N_NAMES; i++)
    cr_assert_eq(rsi_layout_find(l, names[i]), i, "'%s' found at %d, not %d",
                 names[i], rsi_layout_find(l, names[i]), i);
  /* the spare names collide too but were never added; nor were prefixes */
  for (int i = N_NAMES; i < N_NAMES + N_SPARE; i++)
    cr_assert_eq(rsi_layout_find(l, names[i]), -1, "'%s' found", names[i]);
  char cut[RH_NAME_BYTES];
  for (int i = 0; i < N_NAMES; i += 97) {
    snprintf(cut, sizeof cut, "%s", names[i]);
    cut[strlen(cut) - 1] = '\0';
    cr_assert_eq(rsi_layout_find(l, cut), -1, "'%s' found", cut);
  }
  for (int i = 0; i < N_NAMES; i++)
    cr_assert_eq(rs_layout_add_tensor(l, names[i], RS_DTYPE_F32, 1, I64(8)),
                 RS_ERR_DUPLICATE_NAME, "'%s' declared twice", names[i]);
  rs_layout_num_tensors(l, &nt);
  cr_assert_eq(nt, N_NAMES);
  /* the public calls find them too */
  cr_assert_eq(rs_layout_add_shard(l, names[N_NAMES - 1], 1, I64(0), I64(8),
                                   0, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(l, names[N_NAMES], 1, I64(0), I64(8), 0,
                                   0, NULL), RS_ERR_UNKNOWN_TENSOR);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  free(names);
}

/* Rolling back to any count leaves exactly the names before it findable,
 * and the others can be declared again. */
Test(names, roll_back_keeps_the_index_exact, .timeout = 60) {
  enum { N = 5000 };
  static const int marks[] = {0, 1, 31, 32, 33, 2500, N - 1, N};
  char(*names)[RH_NAME_BYTES] = calloc(N, RH_NAME_BYTES);
  cr_assert_not_null(names);
  for (int i = 0; i < N; i++)
    snprintf(names[i], RH_NAME_BYTES, "layers.%d.w%d", i % 61, i);
  rs_context *ctx = new_ctx(1);
  rs_layout *l = new_layout(ctx);
  for (size_t m = 0; m < sizeof marks / sizeof *marks; m++) {
    int nt = 0;
    rs_layout_num_tensors(l, &nt);
    for (int i = nt; i < N; i++)
      cr_assert_eq(rs_layout_add_tensor(l, names[i], RS_DTYPE_U8, 1, I64(1)),
                   RS_OK, "'%s': %s", names[i], rs_context_last_error(ctx));
    rsi_layout_mark mark = {marks[m], 0, 0};
    rsi_layout_roll_back(l, &mark);
    rs_layout_num_tensors(l, &nt);
    cr_assert_eq(nt, marks[m]);
    for (int i = 0; i < N; i++)
      cr_assert_eq(rsi_layout_find(l, names[i]), i < marks[m] ? i : -1,
                   "after rolling back to %d: '%s' at %d", marks[m], names[i],
                   rsi_layout_find(l, names[i]));
  }
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  free(names);
}

/* Each layout draws its own key, yet plans made from equal layouts are
 * equal: only lookups depend on the key. */
Test(names, plans_do_not_depend_on_the_key) {
  enum { T = 300 };
  rs_context *ctx = new_ctx(4);
  char *json[2] = {NULL, NULL};
  rsi_hash_key key[2];
  for (int k = 0; k < 2; k++) {
    rs_layout *src = new_layout(ctx), *dst = new_layout(ctx);
    char name[64];
    for (int t = 0; t < T; t++) {
      snprintf(name, sizeof name, "blk.%d.ffn_%d", t / 3, t % 3);
      cr_assert_eq(rs_layout_add_tensor(src, name, RS_DTYPE_BF16, 1, I64(64)),
                   RS_OK);
      cr_assert_eq(rs_layout_add_shard(src, name, t % 2, I64(0), I64(64), 0,
                                       t * 128, NULL), RS_OK);
    }
    for (int t = T - 1; t >= 0; t--) { /* declared the other way round */
      snprintf(name, sizeof name, "blk.%d.ffn_%d", t / 3, t % 3);
      cr_assert_eq(rs_layout_add_tensor(dst, name, RS_DTYPE_BF16, 1, I64(64)),
                   RS_OK);
      cr_assert_eq(rs_layout_add_shard(dst, name, 2 + t % 2, I64(0), I64(64),
                                       0, t * 128, NULL), RS_OK);
    }
    key[k] = src->name_key;
    rs_plan *plan = NULL;
    cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
                 rs_context_last_error(ctx));
    cr_assert_eq(rs_plan_to_json(plan, &json[k], NULL), RS_OK);
    rs_plan_destroy(plan);
    rs_layout_destroy(src);
    rs_layout_destroy(dst);
  }
  cr_assert(key[0].k0 != key[1].k0 || key[0].k1 != key[1].k1,
            "two layouts drew the same key");
  cr_assert_str_eq(json[0], json[1]);
  rs_free(json[0]);
  rs_free(json[1]);
  rs_context_destroy(ctx);
}

/* SipHash-2-4 against the paper's vectors (key 00..0f, message 00..n-1),
 * and FNV-1a 64 against its published values. */
Test(hash, known_answers) {
  static const struct {
    size_t n;
    uint64_t h;
  } sip[] = {{0, 0x726fdb47dd0e0e31ull},  {1, 0x74f839c593dc67fdull},
             {7, 0xab0200f58b01d137ull},  {8, 0x93f5f5799a932462ull},
             {15, 0xa129ca6149be45e5ull}, {16, 0x3f2acc7f57c29bdbull},
             {63, 0x958a324ceb064572ull}};
  const rsi_hash_key key = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  unsigned char msg[64];
  for (int i = 0; i < 64; i++) msg[i] = (unsigned char)i;
  for (size_t i = 0; i < sizeof sip / sizeof *sip; i++)
    cr_assert_eq(rsi_siphash(&key, msg, sip[i].n), sip[i].h,
                 "SipHash of %zu bytes", sip[i].n);
  cr_assert_eq(rsi_fnv1a64("", 0), 0xcbf29ce484222325ull);
  cr_assert_eq(rsi_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  cr_assert_eq(rsi_fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  cr_assert_eq(rsi_fnv1a64_update(rsi_fnv1a64("foo", 3), "bar", 3),
               rsi_fnv1a64("foobar", 6));
}

/* The words' sum of a plan's fingerprint sees every bit of an array of n
 * bytes, and two bits flipped at once, at any distance, never cancel. */
static void words_hash_sees_every_bit_of(int n) {
  unsigned char a[128];
  cr_assert(n <= (int)sizeof a);
  for (int i = 0; i < n; i++) a[i] = (unsigned char)(i * 37 + 11);
  const uint64_t h0 = rsi_words_hash_update(RSI_FNV1A64_BASIS, a, (size_t)n);
  uint64_t seen[sizeof a * 8];
  for (int bit = 0; bit < n * 8; bit++) {
    a[bit / 8] ^= (unsigned char)(1u << bit % 8);
    seen[bit] = rsi_words_hash_update(RSI_FNV1A64_BASIS, a, (size_t)n);
    cr_assert_neq(seen[bit], h0, "%d bytes: bit %d flipped, same sum", n,
                  bit);
    for (int other = 0; other < bit; other++) {
      a[other / 8] ^= (unsigned char)(1u << other % 8);
      cr_assert_neq(rsi_words_hash_update(RSI_FNV1A64_BASIS, a, (size_t)n),
                    h0, "%d bytes: bits %d and %d flipped, same sum", n,
                    other, bit);
      a[other / 8] ^= (unsigned char)(1u << other % 8);
    }
    a[bit / 8] ^= (unsigned char)(1u << bit % 8);
  }
  for (int i = 0; i < n * 8; i++)
    for (int j = 0; j < i; j++)
      cr_assert_neq(seen[i], seen[j], "%d bytes: bits %d and %d give the "
                    "same sum", n, j, i);
}

/* Words one at a time and a tail (35 bytes); two rounds of the four lanes
 * and a tail (67); three rounds, a word after them and a tail (107). */
Test(hash, words_hash_sees_every_bit) {
  words_hash_sees_every_bit_of(35);
  words_hash_sees_every_bit_of(67);
  words_hash_sees_every_bit_of(107);
  unsigned char a[3] = {1, 2, 3};
  cr_assert_eq(rsi_words_hash_update(RSI_FNV1A64_BASIS, a, 3),
               rsi_fnv1a64(a, 3), "a tail alone is FNV-1a's");
  cr_assert_eq(rsi_words_hash_update(12345, NULL, 0), 12345,
               "nothing (an empty pool) leaves the sum");
}

/* =============================================================== pieces === */

enum { N_PIECES = 1024, PIECE_TENSORS = 8 };

Test(pieces, one_call_each_equals_one_call, .timeout = 60) {
  rs_context *ctx = new_ctx(N_PIECES);
  void **pieces = calloc(N_PIECES, sizeof *pieces);
  size_t *lens = calloc(N_PIECES, sizeof *lens);
  cr_assert(pieces && lens);
  cr_assert_eq(rh_pieces(ctx, PIECE_TENSORS, N_PIECES, pieces, lens), RS_OK);

  rs_layout *whole = new_layout(ctx);
  cr_assert_eq(rh_whole(whole, PIECE_TENSORS, N_PIECES), RS_OK);
  size_t whole_len = 0;
  void *whole_bytes = snapshot(whole, &whole_len);

  rs_layout *by_piece = new_layout(ctx), *at_once = new_layout(ctx);
  for (int i = 0; i < N_PIECES; i++)
    cr_assert_eq(rs_layout_deserialize(by_piece, pieces[i], lens[i]), RS_OK,
                 "piece %d: %s", i, rs_context_last_error(ctx));
  cr_assert_eq(rs_layout_deserialize(at_once, whole_bytes, whole_len), RS_OK);
  int nt = 0;
  int64_t ns = 0;
  rs_layout_num_tensors(by_piece, &nt);
  rs_layout_num_shards(by_piece, &ns);
  cr_assert_eq(nt, PIECE_TENSORS);
  cr_assert_eq(ns, (int64_t)PIECE_TENSORS * N_PIECES);
  size_t a_len = 0, b_len = 0;
  void *a = snapshot(by_piece, &a_len), *b = snapshot(at_once, &b_len);
  expect_same_bytes(a, a_len, whole_bytes, whole_len, "one call per piece");
  expect_same_bytes(b, b_len, whole_bytes, whole_len, "one call");

  /* and plans from either agree: into rank 0 holding everything */
  rs_layout *dst = new_layout(ctx);
  cr_assert_eq(rh_declare(dst, PIECE_TENSORS, N_PIECES), RS_OK);
  char name[RH_NAME_BYTES];
  for (int t = 0; t < PIECE_TENSORS; t++) {
    rh_piece_name(name, sizeof name, t);
    cr_assert_eq(rs_layout_add_shard(dst, name, 0, I64(0, 0),
                                     I64(RH_ROWS * N_PIECES, RH_COLS), 1,
                                     (int64_t)t * RH_ROWS * N_PIECES *
                                         RH_COLS * 2,
                                     NULL), RS_OK);
  }
  rs_plan *p1 = NULL, *p2 = NULL;
  cr_assert_eq(rs_plan_create(by_piece, dst, &p1), RS_OK, "%s",
               rs_context_last_error(ctx));
  cr_assert_eq(rs_plan_create(at_once, dst, &p2), RS_OK);
  uint64_t f1 = 0, f2 = 1;
  rs_plan_fingerprint(p1, &f1);
  rs_plan_fingerprint(p2, &f2);
  cr_assert_eq(f1, f2);

  rs_plan_destroy(p1);
  rs_plan_destroy(p2);
  rs_free(a);
  rs_free(b);
  rs_free(whole_bytes);
  for (int i = 0; i < N_PIECES; i++) rs_free(pieces[i]);
  free(pieces);
  free(lens);
  rs_layout_destroy(dst);
  rs_layout_destroy(whole);
  rs_layout_destroy(by_piece);
  rs_layout_destroy(at_once);
  rs_context_destroy(ctx);
}

/* A layout of 64 pieces deserialized one by one, to refuse bytes into. */
static struct {
  rs_context *ctx;
  rs_layout *l;
  void *before;
  size_t before_len;
} f;

static void filled_setup(void) {
  enum { WORLD = 64 };
  memset(&f, 0, sizeof f);
  f.ctx = new_ctx(WORLD);
  f.l = new_layout(f.ctx);
  void *pieces[WORLD];
  size_t lens[WORLD];
  cr_assert_eq(rh_pieces(f.ctx, PIECE_TENSORS, WORLD, pieces, lens), RS_OK);
  for (int i = 0; i < WORLD; i++) {
    cr_assert_eq(rs_layout_deserialize(f.l, pieces[i], lens[i]), RS_OK);
    rs_free(pieces[i]);
  }
  f.before = snapshot(f.l, &f.before_len);
}

static void filled_teardown(void) {
  rs_free(f.before);
  rs_layout_destroy(f.l);
  rs_context_destroy(f.ctx);
}

/* Deserialize b, expect status want, and the layout byte for byte as it
 * was, with no new name left in the index. */
static void refuse(const rw_buf *b, rs_status want, const char *new_name) {
  rs_status st = rs_layout_deserialize(f.l, b->b, b->n);
  cr_assert_eq(st, want, "got %s, want %s (%s)", rs_status_name(st),
               rs_status_name(want), rs_context_last_error(f.ctx));
  size_t len = 0;
  void *now = snapshot(f.l, &len);
  expect_same_bytes(now, len, f.before, f.before_len, "a refused decode");
  rs_free(now);
  if (new_name) { /* gone from the index, and free to declare again */
    cr_assert_eq(rsi_layout_find(f.l, new_name), -1, "'%s' left behind",
                 new_name);
    cr_assert_eq(rs_layout_add_tensor(f.l, new_name, RS_DTYPE_U8, 1, I64(4)),
                 RS_OK, "'%s' cannot be declared after the refusal: %s",
                 new_name, rs_context_last_error(f.ctx));
    rs_free(f.before);
    f.before = snapshot(f.l, &f.before_len);
  }
}

/* An encoding that declares `fresh` new tensors (fresh.0, fresh.1, ...),
 * each with a shard on rank 0, then `last` (dtype u8, shape [n]) and one
 * shard of it on `rank`. */
static void encode_fresh_then(rw_buf *b, int fresh, const char *last,
                              uint64_t n, uint32_t rank) {
  char name[32];
  memset(b, 0, sizeof *b);
  rw_header(b, RW_VERSION, 0);
  rw_u32(b, (uint32_t)fresh + 1);
  for (int i = 0; i < fresh; i++) {
    snprintf(name, sizeof name, "fresh.%d", i);
    rw_tensor(b, name, RS_DTYPE_U8, 1, U64(4));
  }
  rw_tensor(b, last, RS_DTYPE_U8, 1, U64(n));
  rw_u64(b, (uint64_t)fresh + 1);
  for (int i = 0; i < fresh; i++)
    rw_shard(b, (uint32_t)i, 0, 0, (uint64_t)i * 4, 1, U64(0, 4, 1));
  rw_shard(b, (uint32_t)fresh, rank, 1, 0, 1, U64(0, 1, 1));
  rw_finish(b);
}

TestSuite(refused, .init = filled_setup, .fini = filled_teardown);

Test(refused, corrupted_piece) {
  rw_buf b;
  encode_fresh_then(&b, 200, "fresh.last", 4, 0);
  b.b[b.n / 2] ^= 0x40; /* the checksum no longer holds */
  refuse(&b, RS_ERR_CORRUPT, NULL);
  b.b[b.n / 2] ^= 0x40;
  b.n -= 30; /* cut inside the shards, framing fixed: the tensors decode */
  rw_reseal(b.b, b.n);
  refuse(&b, RS_ERR_CORRUPT, "fresh.199");
  rw_free(&b);
}

Test(refused, known_tensor_with_another_shape) {
  char known[RH_NAME_BYTES];
  rh_piece_name(known, sizeof known, PIECE_TENSORS - 1);
  rw_buf b;
  encode_fresh_then(&b, 200, known, 7, 0);
  refuse(&b, RS_ERR_MISMATCH, "fresh.199");
  rw_free(&b);
}

Test(refused, shard_after_new_tensors) {
  rw_buf b;
  encode_fresh_then(&b, 200, "fresh.last", 4, 64); /* rank 64: outside */
  refuse(&b, RS_ERR_UNKNOWN_RANK, "fresh.last");
  rw_free(&b);
}

Test(refused, bad_name_after_new_tensors) {
  rw_buf b;
  encode_fresh_then(&b, 200, "fresh.\xff", 4, 0);
  refuse(&b, RS_ERR_INVALID_ARGUMENT, "fresh.0");
  rw_free(&b);
  encode_fresh_then(&b, 3, "fresh.\x01", 4, 0);
  refuse(&b, RS_ERR_INVALID_ARGUMENT, "fresh.2");
  rw_free(&b);
}

/* ================================================================= text === */

/* text parsed by json-c, strictly and checking UTF-8; NULL if invalid, with
 * json-c's reason in *why. json-c lets raw control bytes (and overlong
 * forms) through: callers check control bytes themselves. */
static json_object *parse_strict(const char *text, const char **why) {
  json_tokener *tok = json_tokener_new();
  cr_assert_not_null(tok);
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *o = json_tokener_parse_ex(tok, text, (int)strlen(text));
  *why = json_tokener_error_desc(json_tokener_get_error(tok));
  json_tokener_free(tok);
  return o;
}

/* No byte below 0x20 or DEL, every byte of well-formed UTF-8 (checked by
 * json-c on the message as a JSON string), and every \x followed by two
 * hex digits (no escape cut in half). */
static void expect_clean_message(const char *m) {
  for (const char *p = m; *p; p++) {
    cr_assert((unsigned char)*p >= 0x20 && *p != 0x7f,
              "byte 0x%02x at %td of '%s'", (unsigned char)*p, p - m, m);
    if (p[0] == '\\' && p[1] == 'x')
      cr_assert(p[2] && p[3] && strchr("0123456789abcdef", p[2]) &&
                    strchr("0123456789abcdef", p[3]),
                "a cut escape in '%s'", m);
  }
  size_t n = strlen(m);
  char *quoted = malloc(2 * n + 3);
  cr_assert_not_null(quoted);
  char *q = quoted;
  *q++ = '"';
  for (const char *p = m; *p; p++) { /* escape for JSON: \ and " only */
    if (*p == '\\' || *p == '"') *q++ = '\\';
    *q++ = *p;
  }
  *q++ = '"';
  *q = '\0';
  const char *why = NULL;
  json_object *o = parse_strict(quoted, &why);
  cr_assert_not_null(o, "message is not UTF-8: '%s' (%s)", m, why);
  json_object_put(o);
  free(quoted);
}

typedef struct bad_name {
  const char *name;
  size_t at; /* the first bad byte */
} bad_name;

static const bad_name bad_names[] = {
    {"a\x01" "b", 1},         {"\x7f", 0},
    {"tab\there", 3},         {"line\n", 4},
    {"\xff", 0},              {"ok.\xfe", 3},
    {"x\x80", 1},             /* a stray continuation byte */
    {"ab\xc3", 2},            /* cut short */
    {"\xe6\x97(", 0},         /* a bad continuation */
    {"\xc0\xaf", 0},          /* overlong '/' */
    {"\xe0\x80\xaf", 0},      /* overlong, 3 bytes */
    {"s.\xed\xa0\x80", 2},    /* a surrogate, U+D800 */
    {"\xf4\x90\x80\x80", 0},  /* above U+10FFFF */
    {"\xf5\x80\x80\x80", 0},  /* never a lead byte */
    {"gewicht.\xc3\xbc\x1b", 10},
};

Test(text, bad_names_are_refused) {
  rs_context *ctx = new_ctx(2);
  rs_layout *l = new_layout(ctx);
  char want[32];
  for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
    const bad_name *b = &bad_names[i];
    rs_status st = rs_layout_add_tensor(l, b->name, RS_DTYPE_F32, 1, I64(4));
    const char *m = rs_context_last_error(ctx);
    cr_assert_eq(st, RS_ERR_INVALID_ARGUMENT, "name %zu: %s (%s)", i,
                 rs_status_name(st), m);
    snprintf(want, sizeof want, "byte %zu ", b->at);
    cr_assert(th_contains(m, want), "name %zu: '%s' lacks '%s'", i, m, want);
    expect_clean_message(m);
  }
  int nt = -1;
  rs_layout_num_tensors(l, &nt);
  cr_assert_eq(nt, 0);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

Test(text, bad_name_from_the_wire) {
  rs_context *ctx = new_ctx(2);
  rs_layout *l = new_layout(ctx);
  rw_buf b = {0};
  rw_header(&b, RW_VERSION, 0);
  rw_u32(&b, 1);
  rw_tensor(&b, "a\x01" "b", RS_DTYPE_U8, 1, U64(4));
  rw_u64(&b, 0);
  rw_finish(&b);
  cr_assert_eq(rs_layout_deserialize(l, b.b, b.n), RS_ERR_INVALID_ARGUMENT);
  const char *m = rs_context_last_error(ctx);
  cr_assert(th_contains(m, "byte 1 "), "'%s'", m);
  expect_clean_message(m);
  rw_free(&b);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

static const char *const good_names[] = {
    "gewicht.\xc3\xbc.\xe6\x97\xa5\xe6\x9c\xac", /* gewicht.ü.日本 */
    "emoji.\xf0\x9f\x98\x80.w",                  /* U+1F600 */
    "quote\"back\\slash/solidus",
    "max.\xf4\x8f\xbf\xbf",                      /* U+10FFFF */
    "nonchar.\xef\xbf\xbf",                      /* U+FFFF: well-formed */
    "c1.\xc2\x85",                               /* U+0085: not an ASCII control byte */
    "space and ~tilde",
};
#define N_GOOD ((int)(sizeof good_names / sizeof *good_names))

/* The plan JSON is valid, and the "name" of every entry of its "tensors"
 * array is the name declared. */
static void expect_json_names(const char *json) {
  for (const char *p = json; *p; p++)
    cr_assert((unsigned char)*p >= 0x20, "raw control byte 0x%02x in JSON",
              (unsigned char)*p);
  const char *why = NULL;
  json_object *root = parse_strict(json, &why);
  cr_assert_not_null(root, "invalid JSON (%s): %s", why, json);
  json_object *tensors = NULL;
  cr_assert(json_object_object_get_ex(root, "tensors", &tensors));
  cr_assert_eq((int)json_object_array_length(tensors), N_GOOD);
  for (int t = 0; t < N_GOOD; t++) {
    json_object *name = NULL;
    cr_assert(json_object_object_get_ex(
        json_object_array_get_idx(tensors, (size_t)t), "name", &name));
    cr_assert_str_eq(json_object_get_string(name), good_names[t]);
  }
  json_object_put(root);
}

Test(text, utf8_names_pass_and_make_valid_json) {
  rs_context *ctx = new_ctx(2);
  rs_layout *src = new_layout(ctx), *dst = new_layout(ctx);
  for (int t = 0; t < N_GOOD; t++) {
    cr_assert_eq(rs_layout_add_tensor(src, good_names[t], RS_DTYPE_F32, 1,
                                      I64(4)), RS_OK, "'%s': %s",
                 good_names[t], rs_context_last_error(ctx));
    cr_assert_eq(rs_layout_add_tensor(dst, good_names[t], RS_DTYPE_F32, 1,
                                      I64(4)), RS_OK);
    cr_assert_eq(rs_layout_add_shard(src, good_names[t], 0, I64(0), I64(4), 0,
                                     16 * t, NULL), RS_OK);
    cr_assert_eq(rs_layout_add_shard(dst, good_names[t], 1, I64(0), I64(4), 0,
                                     16 * t, NULL), RS_OK);
  }
  /* and through the wire */
  size_t len = 0;
  void *bytes = snapshot(src, &len);
  rs_layout *copy = new_layout(ctx);
  cr_assert_eq(rs_layout_deserialize(copy, bytes, len), RS_OK, "%s",
               rs_context_last_error(ctx));
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(copy, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  char *json = NULL;
  cr_assert_eq(rs_plan_to_json(plan, &json, NULL), RS_OK);
  expect_json_names(json);
  rs_free(json);
  rs_free(bytes);
  rs_plan_destroy(plan);
  rs_layout_destroy(copy);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

Test(text, messages_escape_what_names_bring) {
  rs_context *ctx = new_ctx(2);
  rs_layout *l = new_layout(ctx);
  cr_assert_eq(rs_layout_add_shard(l, "a\x01" "b", 0, I64(0), I64(1), 0, 0,
                                   NULL), RS_ERR_UNKNOWN_TENSOR);
  const char *m = rs_context_last_error(ctx);
  expect_clean_message(m);
  cr_assert(th_contains(m, "'a\\x01b'"), "'%s'", m);

  cr_assert_eq(rs_layout_add_shard(l, "bad.\xff\xc3(", 0, I64(0), I64(1), 0,
                                   0, NULL), RS_ERR_UNKNOWN_TENSOR);
  m = rs_context_last_error(ctx);
  expect_clean_message(m);
  cr_assert(th_contains(m, "'bad.\\xff\\xc3('"), "'%s'", m);

  /* well-formed UTF-8 is kept as it is */
  cr_assert_eq(rs_layout_add_shard(l, "gewicht.\xc3\xbc", 0, I64(0), I64(1),
                                   0, 0, NULL), RS_ERR_UNKNOWN_TENSOR);
  m = rs_context_last_error(ctx);
  cr_assert(th_contains(m, "'gewicht.\xc3\xbc'"), "'%s'", m);

  /* a long run of control bytes is cut between escapes, never inside one */
  char lots[3001];
  memset(lots, '\x02', 3000);
  lots[3000] = '\0';
  cr_assert_eq(rs_layout_add_shard(l, lots, 0, I64(0), I64(1), 0, 0, NULL),
               RS_ERR_UNKNOWN_TENSOR);
  m = rs_context_last_error(ctx);
  expect_clean_message(m);
  cr_assert(th_contains(m, "\\x02\\x02"), "'%s'", m);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}
