/* SPDX-License-Identifier: Apache-2.0 */
/* The destination write check against a byte-by-byte oracle, on the
 * layouts its shortcuts are for: fused buffers whose tensors take turns
 * in one period (the gate and up halves of every expert), with random
 * blocks, gaps, padding, offsets a few bytes off or a whole period off,
 * mixed element sizes and now and then a dense shard in between. Each
 * case is a destination on rank 1, one buffer; rs_plan_create must say
 * RS_ERR_OVERLAP exactly when two shards write one byte, which the
 * oracle finds by marking every byte every element covers. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "th_value.h"

#define CASES 3000
#define MAX_TENSORS 4
#define BUFFER_BYTES 8192

static int64_t pick(uint64_t *r, int64_t lo, int64_t hi) { /* [lo, hi] */
  return lo + (int64_t)(th_rand(r) % (uint64_t)(hi - lo + 1));
}

typedef struct shard {
  rs_dtype dtype;
  int64_t esize, ndim, shape[3], strides[3], byte_offset;
} shard;

static const rs_dtype dtypes[3] = {RS_DTYPE_U8, RS_DTYPE_BF16, RS_DTYPE_F32};

/* Tensors of [experts, rows, cols] taking turns in a period of `period`
 * bytes: block i at about the sum of the blocks before it, nudged now and
 * then; sometimes one tensor is a plain dense shard instead. */
static int make_case(uint64_t *r, shard *sh) {
  int n = (int)pick(r, 2, MAX_TENSORS);
  int64_t esize_all = pick(r, 0, 3) == 0 ? 0 : (int64_t)1 << pick(r, 0, 2);
  int64_t block[MAX_TENSORS], at = 0;
  for (int i = 0; i < n; i++) {
    shard *s = &sh[i];
    int k = esize_all ? (esize_all == 1 ? 0 : esize_all == 2 ? 1 : 2)
                      : (int)pick(r, 0, 2);
    s->dtype = dtypes[k];
    s->esize = (int64_t)1 << k;
    s->ndim = 3;
    s->shape[1] = pick(r, 1, 3);
    s->shape[2] = pick(r, 1, 4);
    s->strides[2] = 1;
    s->strides[1] = s->shape[2] + (pick(r, 0, 3) == 0 ? pick(r, 1, 2) : 0);
    block[i] = ((s->shape[1] - 1) * s->strides[1] + s->shape[2]) * s->esize;
    at += block[i] + (pick(r, 0, 2) == 0 ? pick(r, 0, 8) : 0);
  }
  int64_t period = (at + 3) / 4 * 4 + (pick(r, 0, 2) == 0 ? 4 * pick(r, 1, 3) : 0);
  at = 0;
  for (int i = 0; i < n; i++) {
    shard *s = &sh[i];
    s->shape[0] = pick(r, 1, 4);
    s->strides[0] = period / s->esize;
    int64_t off = at;
    switch (pick(r, 0, 6)) {
    case 0: off += pick(r, -6, 6); break;                 /* a few bytes off */
    case 1: off += period * pick(r, 0, 2); break;         /* periods later */
    case 2: off = pick(r, 0, period + block[i]); break;   /* anywhere */
    default: break;
    }
    if (off < 0) off = 0;
    s->byte_offset = off / s->esize * s->esize;
    if (pick(r, 0, 7) == 0) { /* a dense shard of one row in the middle */
      s->ndim = 1;
      s->shape[0] = pick(r, 1, 6);
      s->strides[0] = 1;
    }
    at += block[i];
  }
  return n;
}

/* Whether two shards write one byte, marking every byte. */
static bool oracle_overlaps(const shard *sh, int n) {
  static uint8_t owner[BUFFER_BYTES];
  memset(owner, 0, sizeof owner);
  for (int i = 0; i < n; i++) {
    const shard *s = &sh[i];
    int64_t idx[3] = {0, 0, 0};
    for (;;) {
      int64_t e = 0;
      for (int d = 0; d < s->ndim; d++) e += idx[d] * s->strides[d];
      for (int64_t b = 0; b < s->esize; b++) {
        int64_t at = s->byte_offset + e * s->esize + b;
        cr_assert(at < BUFFER_BYTES, "case too large for the oracle");
        if (owner[at] && owner[at] != i + 1) return true;
        owner[at] = (uint8_t)(i + 1);
      }
      int d = (int)s->ndim - 1;
      while (d >= 0 && ++idx[d] == s->shape[d]) idx[d--] = 0;
      if (d < 0) break;
    }
  }
  return false;
}

static void describe(const shard *sh, int n, char *out, size_t cap) {
  size_t used = 0;
  for (int i = 0; i < n && used < cap; i++) {
    const shard *s = &sh[i];
    used += (size_t)snprintf(out + used, cap - used, " [t%d esize %lld at %lld",
                             i, (long long)s->esize, (long long)s->byte_offset);
    for (int d = 0; d < s->ndim && used < cap; d++)
      used += (size_t)snprintf(out + used, cap - used, " %lld/%lld",
                               (long long)s->shape[d], (long long)s->strides[d]);
    if (used < cap) used += (size_t)snprintf(out + used, cap - used, "]");
  }
}

static rs_status plan_status(const shard *sh, int n, char *error, size_t cap) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    const shard *s = &sh[i];
    int64_t zero[3] = {0, 0, 0};
    cr_assert_eq(rs_layout_add_tensor(src, name, s->dtype, (int)s->ndim,
                                      s->shape), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(dst, name, s->dtype, (int)s->ndim,
                                      s->shape), RS_OK);
    cr_assert_eq(rs_layout_add_shard(src, name, 0, zero, s->shape, i, 0, NULL),
                 RS_OK, "%s", rs_context_last_error(ctx));
    cr_assert_eq(rs_layout_add_shard(dst, name, 1, zero, s->shape, 0,
                                     s->byte_offset, s->strides),
                 RS_OK, "%s", rs_context_last_error(ctx));
  }
  rs_status st = rs_plan_create(src, dst, &plan);
  snprintf(error, cap, "%s", st == RS_OK ? "" : rs_context_last_error(ctx));
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  return st;
}

Test(write_check, agrees_with_every_byte_on_fused_buffers_that_take_turns) {
  uint64_t r = 20261203;
  int overlapping = 0, apart = 0;
  for (int c = 0; c < CASES; c++) {
    shard sh[MAX_TENSORS];
    int n = make_case(&r, sh);
    bool want = oracle_overlaps(sh, n);
    char error[512], what[1024];
    rs_status st = plan_status(sh, n, error, sizeof error);
    describe(sh, n, what, sizeof what);
    cr_assert_eq(st, want ? RS_ERR_OVERLAP : RS_OK,
                 "case %d:%s: the oracle says %s, rs_plan_create says %d (%s)",
                 c, what, want ? "overlap" : "apart", st, error);
    if (want) {
      cr_assert(strstr(error, "write the same bytes"), "case %d: %s", c,
                error);
      overlapping++;
    } else {
      apart++;
    }
  }
  /* both answers must be common, or the test checks little */
  cr_assert_gt(overlapping, CASES / 10, "only %d overlapping cases",
               overlapping);
  cr_assert_gt(apart, CASES / 10, "only %d cases apart", apart);
}

/* Shards alone in their (rank, buffer) are not swept: the same buffer
 * index on other ranks and the same bytes in other buffers must not count
 * as sharing, a second shard beside a lone one must be swept with it, and
 * the one pair that shares a byte must be found among thousands of lone
 * shards, wherever it sits. */
static rs_status lone_shards_and(int rank2, int buffer2, int64_t byte2) {
  enum { WORLD = 6, N = 4096 };
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  cr_assert_eq(rs_context_create_local(WORLD, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  const int64_t shape[1] = {N}, off[1] = {0}, one[1] = {1};
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_U8, 1, shape), RS_OK);
  cr_assert_eq(rs_layout_add_shard(src, "w", 0, off, shape, 0, 0, one),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_U8, 1, shape), RS_OK);
  /* element i alone at byte 0 of buffer i / WORLD of rank i % WORLD,
   * but the last element, which goes where the caller says */
  for (int64_t i = 0; i < N; i++) {
    bool last = i == N - 1 && rank2 >= 0;
    const int64_t o[1] = {i};
    cr_assert_eq(rs_layout_add_shard(dst, "w", last ? rank2 : (int)(i % WORLD),
                                     o, one, last ? buffer2 : (int)(i / WORLD),
                                     last ? byte2 : 0, one),
                 RS_OK);
  }
  rs_plan *plan = NULL;
  rs_status st = rs_plan_create(src, dst, &plan);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  return st;
}

Test(write_check, lone_shards_are_skipped_and_a_clash_among_them_found) {
  cr_assert_eq(lone_shards_and(-1, 0, 0), RS_OK);
  cr_assert_eq(lone_shards_and(0, 0, 1), RS_OK);      /* beside, no clash */
  cr_assert_eq(lone_shards_and(2, 300, 7), RS_OK);
  cr_assert_eq(lone_shards_and(0, 0, 0), RS_ERR_OVERLAP);
  cr_assert_eq(lone_shards_and(5, 681, 0), RS_ERR_OVERLAP);
  cr_assert_eq(lone_shards_and(3, 17, 0), RS_ERR_OVERLAP);
  cr_assert_eq(lone_shards_and(4, 5000, 0), RS_OK);   /* a buffer of its own */
}
