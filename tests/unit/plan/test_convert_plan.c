/* SPDX-License-Identifier: Apache-2.0 */
/* Changing dtype on the way, end to end through the in-process transport:
 * casts between f32, bf16 and f16, and bf16 to block-scaled fp8 with its
 * scales, where the sender converts (it holds whole blocks) and where the
 * receiver does (source shards split the blocks). Every destination byte
 * is compared with core/copy/convert.h's functions over the whole tensor, and
 * what the plan says it converts where is checked against the wire bytes.
 * Then the refusals: blocks cut by a destination shard, scales without
 * their values, pairs libreshard does not convert. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include <stdlib.h>
#include <string.h>

#include "copy/convert.h"
#include "copy/convert_elem.h"
#include "exec/exec.h" /* rsi_exec_staging: what the executor allocated */
#include "th_domain_parts.h"
#include "th_util.h"

#define MAX_SHARDS 64

/* A shard of a 2-D tensor: rows x cols from (r0, c0), dense in its own
 * buffer. */
typedef struct piece {
  int rank;
  int64_t r0, c0, rows, cols;
} piece;

typedef struct job {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  int64_t shape[2];
  int64_t block[2];
  bool ue8m0;
  rs_dtype from, to;
  int64_t skew; /* every shard's byte offset in its buffer (odd: misaligned) */
  rs_rounds rounds; /* RS_PARAM_ROUNDS */
  piece srcs[MAX_SHARDS], dsts[MAX_SHARDS], scales[MAX_SHARDS];
  int nsrc, ndst, nscale;
  void *sbuf[MAX_SHARDS], *dbuf[MAX_SHARDS], *cbuf[MAX_SHARDS];
  unsigned char *values; /* the whole source tensor, dtype `from` */
} job;

static int64_t esize(rs_dtype d) { return (int64_t)rs_dtype_size(d); }

/* Values with a wide range of magnitudes (and a zero block row), so that
 * scales differ from block to block. */
static void make_values(job *j) {
  int64_t n = j->shape[0] * j->shape[1];
  j->values = malloc((size_t)(n * esize(j->from)));
  uint64_t state = 0x5eed;
  for (int64_t i = 0; i < n; i++) {
    int64_t row = i / j->shape[1];
    double mag = row >= 128 && row < 140 ? 0.0 : (double)(1 + row % 7) * 3.0;
    double x = ((double)(th_rand(&state) % 20001) / 10000.0 - 1.0) * mag;
    float f = (float)x;
    if (j->from == RS_DTYPE_F32)
      memcpy(j->values + 4 * i, &f, 4);
    else {
      uint16_t h = j->from == RS_DTYPE_BF16 ? rsi_f32_to_bf16(f)
                                            : rsi_f32_to_f16(f);
      memcpy(j->values + 2 * i, &h, 2);
    }
  }
}

static void add(job *j, rs_layout *l, const char *name, const piece *p,
                int buffer) {
  rs_status st = rs_layout_add_shard(l, name, p->rank, I64(p->r0, p->c0),
                                     I64(p->rows, p->cols), buffer, j->skew,
                                     NULL);
  cr_assert_eq(st, RS_OK, "add_shard %s: %s", name,
               rs_context_last_error(j->ctx));
}

/* Layouts from the job's pieces; scales only when block[0] > 0. */
static rs_status make_plan_staged(job *j, int world, int domain_size,
                                  int64_t staging) {
  cr_assert_eq(rs_context_create_local(world, &j->ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain_size(j->ctx, domain_size), RS_OK);
  if (staging)
    cr_assert_eq(rs_context_set_param(j->ctx, RS_PARAM_STAGING_BYTES, staging),
                 RS_OK);
  cr_assert_eq(rs_context_set_param(j->ctx, RS_PARAM_ROUNDS, j->rounds),
               RS_OK);
  cr_assert_eq(rs_layout_create(j->ctx, &j->src), RS_OK);
  cr_assert_eq(rs_layout_create(j->ctx, &j->dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(j->src, "w", j->from, 2, j->shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(j->dst, "w", j->to, 2, j->shape), RS_OK);
  if (j->block[0] > 0) {
    int64_t sshape[2] = {(j->shape[0] + j->block[0] - 1) / j->block[0],
                         (j->shape[1] + j->block[1] - 1) / j->block[1]};
    cr_assert_eq(rs_layout_add_tensor(j->dst, "w_scale", RS_DTYPE_F32, 2,
                                      sshape), RS_OK);
    cr_assert_eq(rs_layout_set_block_scales(j->dst, "w", "w_scale",
                                            j->block[0], j->block[1],
                                            j->ue8m0 ? RS_SCALE_UE8M0
                                                     : RS_SCALE_AMAX),
                 RS_OK, "%s", rs_context_last_error(j->ctx));
  }
  for (int i = 0; i < j->nsrc; i++) add(j, j->src, "w", &j->srcs[i], i);
  for (int i = 0; i < j->ndst; i++) add(j, j->dst, "w", &j->dsts[i], i);
  for (int i = 0; i < j->nscale; i++)
    add(j, j->dst, "w_scale", &j->scales[i], MAX_SHARDS + i);
  return rs_plan_create(j->src, j->dst, &j->plan);
}

static rs_status make_plan(job *j, int world, int domain_size) {
  return make_plan_staged(j, world, domain_size, 0);
}

static void bind_and_run(job *j) {
  make_values(j);
  for (int i = 0; i < j->nsrc; i++) {
    const piece *p = &j->srcs[i];
    int64_t es = esize(j->from);
    size_t n = (size_t)(j->skew + p->rows * p->cols * es);
    unsigned char *b = malloc(n);
    for (int64_t r = 0; r < p->rows; r++)
      memcpy(b + j->skew + r * p->cols * es,
             j->values + ((p->r0 + r) * j->shape[1] + p->c0) * es,
             (size_t)(p->cols * es));
    j->sbuf[i] = b;
    cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_SRC, p->rank, i, b, n), RS_OK,
                 "%s", rs_context_last_error(j->ctx));
  }
  for (int i = 0; i < j->ndst; i++) {
    const piece *p = &j->dsts[i];
    size_t n = (size_t)(j->skew + p->rows * p->cols * esize(j->to));
    j->dbuf[i] = malloc(n);
    memset(j->dbuf[i], 0xA5, n);
    cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_DST, p->rank, i, j->dbuf[i],
                              n), RS_OK, "%s", rs_context_last_error(j->ctx));
  }
  for (int i = 0; i < j->nscale; i++) {
    const piece *p = &j->scales[i];
    size_t n = (size_t)(j->skew + p->rows * p->cols * 4);
    j->cbuf[i] = malloc(n);
    memset(j->cbuf[i], 0xA5, n);
    cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_DST, p->rank, MAX_SHARDS + i,
                              j->cbuf[i], n), RS_OK, "%s",
                 rs_context_last_error(j->ctx));
  }
  cr_assert_eq(rs_plan_execute(j->plan), RS_OK, "execute: %s",
               rs_context_last_error(j->ctx));
}

/* Every destination element against the whole-tensor conversion. */
static void check(job *j) {
  int64_t n = j->shape[0] * j->shape[1], es = esize(j->to);
  unsigned char *want = malloc((size_t)(n * es));
  float *want_scales = NULL;
  int64_t scols = 0;
  if (j->to == RS_DTYPE_F8_E4M3) {
    int64_t srows = (j->shape[0] + j->block[0] - 1) / j->block[0];
    scols = (j->shape[1] + j->block[1] - 1) / j->block[1];
    want_scales = malloc((size_t)(srows * scols) * sizeof *want_scales);
    rsi_err err = {0};
    cr_assert_eq(rsi_quantize_blocks(j->from, 2, j->shape, j->values, want,
                                     want_scales, j->block[0], j->block[1],
                                     j->ue8m0, &err), RS_OK);
  } else {
    rsi_cast_fn cast = rsi_convert_cast_fn(j->to, j->from);
    cr_assert_not_null(cast);
    cast(want, j->values, n);
  }
  for (int i = 0; i < j->ndst; i++) {
    const piece *p = &j->dsts[i];
    for (int64_t r = 0; r < p->rows; r++) {
      const unsigned char *got =
          (unsigned char *)j->dbuf[i] + j->skew + r * p->cols * es;
      const unsigned char *exp =
          want + ((p->r0 + r) * j->shape[1] + p->c0) * es;
      for (int64_t c = 0; c < p->cols * es; c++)
        if (got[c] != exp[c])
          cr_assert_fail("destination shard %d: row %lld byte %lld is 0x%02x, "
                         "want 0x%02x", i, (long long)(p->r0 + r),
                         (long long)c, got[c], exp[c]);
    }
  }
  for (int i = 0; i < j->nscale; i++) {
    const piece *p = &j->scales[i];
    for (int64_t r = 0; r < p->rows; r++)
      for (int64_t c = 0; c < p->cols; c++) {
        float got, exp;
        memcpy(&got, (char *)j->cbuf[i] + j->skew + 4 * (r * p->cols + c), 4);
        exp = want_scales[(p->r0 + r) * scols + p->c0 + c];
        cr_assert(memcmp(&got, &exp, 4) == 0, "scale [%lld, %lld] is %g, "
                  "want %g", (long long)(p->r0 + r), (long long)(p->c0 + c),
                  got, exp);
      }
  }
  free(want);
  free(want_scales);
}

static int64_t stat(const job *j, rs_stat s) {
  int64_t v = -1;
  cr_assert_eq(rs_plan_stat(j->plan, RS_ALL_RANKS, s, &v), RS_OK);
  return v;
}

static int64_t wire_bytes(const job *j) {
  return stat(j, RS_STAT_BYTES_SENT_INTRA) + stat(j, RS_STAT_BYTES_SENT_INTER);
}

static void finish(job *j) {
  rs_plan_destroy(j->plan);
  rs_layout_destroy(j->src);
  rs_layout_destroy(j->dst);
  rs_context_destroy(j->ctx);
  for (int i = 0; i < MAX_SHARDS; i++) {
    free(j->sbuf[i]);
    free(j->dbuf[i]);
    free(j->cbuf[i]);
  }
  free(j->values);
}

/* Sources hold whole 128x128 blocks (rows cut at 256, an edge block of 44
 * rows): the senders quantize; one byte an element and four a block travel,
 * to a TP2-like destination whose scales sit beside their values. */
static void whole_blocks(bool ue8m0) {
  job j = {.shape = {300, 384}, .block = {128, 128}, .ue8m0 = ue8m0,
           .from = RS_DTYPE_BF16, .to = RS_DTYPE_F8_E4M3};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 256, 384};
  j.srcs[j.nsrc++] = (piece){1, 256, 0, 44, 384};
  j.dsts[j.ndst++] = (piece){2, 0, 0, 300, 256};
  j.dsts[j.ndst++] = (piece){3, 0, 256, 300, 128};
  j.scales[j.nscale++] = (piece){2, 0, 0, 3, 2};
  j.scales[j.nscale++] = (piece){3, 0, 2, 3, 1};
  cr_assert_eq(make_plan(&j, 4, 1), RS_OK, "%s",
               rs_context_last_error(j.ctx));
  cr_assert_eq(wire_bytes(&j), 300 * 384 + 9 * 4);
  cr_assert_eq(stat(&j, RS_STAT_CONVERTED_SENDING), 300 * 384 + 9);
  cr_assert_eq(stat(&j, RS_STAT_CONVERTED_RECEIVING), 0);
  bind_and_run(&j);
  check(&j);
  finish(&j);
}

Test(convert_plan, fp8_senders_quantize_whole_blocks) { whole_blocks(false); }
Test(convert_plan, fp8_ue8m0_scales) { whole_blocks(true); }

/* Sources cut the blocks (rows at 100 and 200, columns at 64): the parts
 * travel in bf16 and each receiver quantizes; a replicated destination
 * across two domains gets each block from the nearest holders. */
Test(convert_plan, fp8_receivers_quantize_split_blocks) {
  job j = {.shape = {300, 256}, .block = {128, 128}, .from = RS_DTYPE_BF16,
           .to = RS_DTYPE_F8_E4M3};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 100, 64};
  j.srcs[j.nsrc++] = (piece){0, 0, 64, 100, 192};
  j.srcs[j.nsrc++] = (piece){1, 100, 0, 100, 256};
  j.srcs[j.nsrc++] = (piece){4, 200, 0, 100, 256};
  for (int r = 2; r < 4; r++) {
    j.dsts[j.ndst++] = (piece){r, 0, 0, 300, 256};
    j.scales[j.nscale++] = (piece){r, 0, 0, 3, 2};
  }
  j.dsts[j.ndst++] = (piece){5, 0, 0, 300, 256};
  j.scales[j.nscale++] = (piece){5, 0, 0, 3, 2};
  cr_assert_eq(make_plan(&j, 6, 4), RS_OK, "%s",
               rs_context_last_error(j.ctx));
  cr_assert_gt(stat(&j, RS_STAT_CONVERTED_RECEIVING), 0);
  bind_and_run(&j);
  check(&j);
  finish(&j);
}

/* Casts: the narrower side decides who converts; bytes on the wire are
 * the narrower dtype's. Shards at byte `skew` of their buffers. */
static void cast_case(rs_dtype from, rs_dtype to, int64_t skew) {
  job j = {.shape = {40, 70}, .from = from, .to = to, .skew = skew};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 20, 70};
  j.srcs[j.nsrc++] = (piece){1, 20, 0, 20, 70};
  j.dsts[j.ndst++] = (piece){1, 0, 0, 40, 35};
  j.dsts[j.ndst++] = (piece){2, 0, 35, 40, 35};
  cr_assert_eq(make_plan(&j, 3, 1), RS_OK, "%s",
               rs_context_last_error(j.ctx));
  int64_t narrow = esize(from) < esize(to) ? esize(from) : esize(to);
  /* rank 1 holds rows 20..40 of its columns: 20 x 35 elements stay */
  cr_assert_eq(wire_bytes(&j), (40 * 70 - 20 * 35) * narrow);
  int64_t moved = 40 * 70 - 20 * 35;
  if (esize(to) < esize(from))
    cr_assert_eq(stat(&j, RS_STAT_CONVERTED_SENDING), moved);
  else if (esize(to) > esize(from))
    cr_assert_eq(stat(&j, RS_STAT_CONVERTED_RECEIVING), 40 * 70);
  bind_and_run(&j);
  check(&j);
  finish(&j);
}

Test(convert_plan, casts_every_pair) {
  const rs_dtype d[3] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      if (a != b)
        for (int64_t skew = 0; skew < 2; skew++) cast_case(d[a], d[b], skew);
}

static void refused(job *j, rs_status want, const char *words) {
  rs_status st = make_plan(j, 4, 1);
  cr_assert_eq(st, want, "got %s: %s", rs_status_name(st),
               rs_context_last_error(j->ctx));
  cr_assert(strstr(rs_context_last_error(j->ctx), words),
            "message '%s' lacks '%s'", rs_context_last_error(j->ctx), words);
  cr_assert_null(j->plan);
  finish(j);
}

Test(convert_plan, destination_shard_cutting_a_block_is_refused) {
  job j = {.shape = {256, 256}, .block = {128, 128}, .from = RS_DTYPE_BF16,
           .to = RS_DTYPE_F8_E4M3};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 256, 256};
  j.dsts[j.ndst++] = (piece){1, 0, 0, 256, 100};
  j.dsts[j.ndst++] = (piece){2, 0, 100, 256, 156};
  j.scales[j.nscale++] = (piece){1, 0, 0, 2, 1};
  j.scales[j.nscale++] = (piece){2, 0, 1, 2, 1};
  refused(&j, RS_ERR_UNSUPPORTED, "cuts block [0, 0]");
}

Test(convert_plan, scales_without_their_values_are_refused) {
  job j = {.shape = {256, 256}, .block = {128, 128}, .from = RS_DTYPE_BF16,
           .to = RS_DTYPE_F8_E4M3};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 256, 256};
  j.dsts[j.ndst++] = (piece){1, 0, 0, 256, 256};
  j.scales[j.nscale++] = (piece){2, 0, 0, 2, 2};
  refused(&j, RS_ERR_UNSUPPORTED, "holds the values but not the scale");
}

Test(convert_plan, other_pairs_are_refused) {
  job j = {.shape = {8, 8}, .from = RS_DTYPE_I32, .to = RS_DTYPE_F32};
  j.srcs[j.nsrc++] = (piece){0, 0, 0, 8, 8};
  j.dsts[j.ndst++] = (piece){1, 0, 0, 8, 8};
  refused(&j, RS_ERR_UNSUPPORTED, "i32 in the source and f32");
  job k = {.shape = {8, 8}, .from = RS_DTYPE_BF16, .to = RS_DTYPE_F8_E4M3};
  k.srcs[k.nsrc++] = (piece){0, 0, 0, 8, 8};
  k.dsts[k.ndst++] = (piece){1, 0, 0, 8, 8};
  refused(&k, RS_ERR_UNSUPPORTED, "rs_layout_set_block_scales");
}

Test(convert_plan, declaration_is_checked) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "w", RS_DTYPE_F8_E4M3, 2, I64(300, 200)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "s", RS_DTYPE_F32, 2, I64(3, 1)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "b", RS_DTYPE_BF16, 2, I64(3, 2)),
               RS_OK);
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "s", 128, 128,
                                          RS_SCALE_AMAX),
               RS_ERR_INVALID_ARGUMENT, "the scales need shape [3, 2]");
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "b", 128, 128,
                                          RS_SCALE_AMAX),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "s", 0, 128, RS_SCALE_AMAX),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "nope", 128, 128,
                                          RS_SCALE_AMAX),
               RS_ERR_UNKNOWN_TENSOR);
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "s", 128, 200,
                                          (rs_scale_rule)7),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rs_layout_set_block_scales(l, "w", "s", 128, 200,
                                          RS_SCALE_AMAX), RS_OK, "%s",
               rs_context_last_error(ctx));
  /* the declaration travels with the layout's bytes */
  void *bytes = NULL;
  size_t len = 0;
  cr_assert_eq(rs_layout_serialize(l, &bytes, &len), RS_OK);
  rs_layout *copy = NULL;
  cr_assert_eq(rs_layout_create(ctx, &copy), RS_OK);
  cr_assert_eq(rs_layout_deserialize(copy, bytes, len), RS_OK, "%s",
               rs_context_last_error(ctx));
  cr_assert_eq(rs_layout_set_block_scales(copy, "w", "s", 128, 200,
                                          RS_SCALE_AMAX), RS_OK,
               "the same declaration again is a no-op");
  cr_assert_eq(rs_layout_set_block_scales(copy, "w", "s", 128, 200,
                                          RS_SCALE_UE8M0),
               RS_ERR_INVALID_ARGUMENT, "another one is refused");
  rs_free(bytes);
  rs_layout_destroy(copy);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

/* Cuts of [0, n) at `k` random places (multiples of `align`), ascending,
 * with 0 and n: returns the number of cells. */
static int random_cuts(uint64_t *rng, int64_t n, int64_t align, int k,
                       int64_t *at) {
  int m = 0;
  at[m++] = 0;
  for (int i = 0; i < k; i++) {
    int64_t c = (int64_t)(th_rand(rng) % (uint64_t)n) / align * align;
    if (c > at[m - 1]) at[m++] = c;
  }
  if (at[m - 1] != n) at[m++] = n;
  return m - 1;
}

/* Random sources (any cuts, replicas, and an overlapping extra shard) into
 * random block-aligned destinations (replicated, over random domains),
 * staging small or large, rounds packed or by domain pair: every fp8 byte
 * and scale as the whole-tensor rule gives them, staging within its
 * setting, and each domain's part is the whole plan's moves into it. */
/* The plan made without boxes (RS_PARAM_PLAN_BOXES = 0) is the same plan
 * but for them: the scale moves made from a values move's box too. */
static void same_without_boxes(job *j, int world, int c) {
  rs_plan *bare = NULL;
  char why[256];
  cr_assert_eq(rs_context_set_param(j->ctx, RS_PARAM_PLAN_BOXES, 0), RS_OK);
  cr_assert_eq(rs_plan_create(j->src, j->dst, &bare), RS_OK, "case %d: %s", c,
               rs_context_last_error(j->ctx));
  cr_assert_eq(rs_context_set_param(j->ctx, RS_PARAM_PLAN_BOXES, 1), RS_OK);
  cr_assert(th_same_plan_without_boxes(j->plan, bare, world, why, sizeof why),
            "case %d: %s", c, why);
  rs_plan_destroy(bare);
}

Test(convert_plan, fp8_random_layouts, .timeout = 120) {
  uint64_t rng = 0xF8F8;
  const int64_t blocks[4] = {16, 32, 64, 128};
  int cases = 0, split = 0, whole = 0, by_pair = 0;
  for (int c = 0; c < 150; c++) {
    job j = {.from = c % 3 == 0 ? RS_DTYPE_F32 : RS_DTYPE_BF16,
             .to = RS_DTYPE_F8_E4M3, .ue8m0 = c % 4 == 1,
             .skew = (int64_t[]){0, 0, 1, 0, 3}[c % 5],
             .rounds = c % 7 < 3 ? RS_ROUNDS_BY_DOMAIN_PAIR
                                 : RS_ROUNDS_PACKED};
    j.shape[0] = 1 + (int64_t)(th_rand(&rng) % 300);
    j.shape[1] = 1 + (int64_t)(th_rand(&rng) % 300);
    j.block[0] = blocks[th_rand(&rng) % 4];
    j.block[1] = blocks[th_rand(&rng) % 4];
    int world = 2 + (int)(th_rand(&rng) % 7);
    int64_t rc[8], cc[8];
    int nr = random_cuts(&rng, j.shape[0], 1, (int)(th_rand(&rng) % 3), rc);
    int ncol = random_cuts(&rng, j.shape[1], 1, (int)(th_rand(&rng) % 3), cc);
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < ncol; b++) {
        int copies = 1 + (int)(th_rand(&rng) % 2);
        for (int k = 0; k < copies && j.nsrc < MAX_SHARDS; k++)
          j.srcs[j.nsrc++] = (piece){(int)(th_rand(&rng) % (uint64_t)world),
                                     rc[a], cc[b], rc[a + 1] - rc[a],
                                     cc[b + 1] - cc[b]};
      }
    if (th_rand(&rng) % 2) { /* a source box overlapping the others */
      int64_t r0 = (int64_t)(th_rand(&rng) % (uint64_t)j.shape[0]);
      int64_t c0 = (int64_t)(th_rand(&rng) % (uint64_t)j.shape[1]);
      j.srcs[j.nsrc++] = (piece){(int)(th_rand(&rng) % (uint64_t)world), r0,
                                 c0, j.shape[0] - r0, j.shape[1] - c0};
    }
    nr = random_cuts(&rng, j.shape[0], j.block[0], (int)(th_rand(&rng) % 3),
                     rc);
    ncol = random_cuts(&rng, j.shape[1], j.block[1],
                       (int)(th_rand(&rng) % 3), cc);
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < ncol; b++) {
        int copies = 1 + (int)(th_rand(&rng) % 3);
        int first = (int)(th_rand(&rng) % (uint64_t)world);
        for (int k = 0; k < copies && k < world && j.ndst < MAX_SHARDS; k++) {
          int rank = (first + k) % world;
          piece v = {rank, rc[a], cc[b], rc[a + 1] - rc[a], cc[b + 1] - cc[b]};
          j.dsts[j.ndst++] = v;
          j.scales[j.nscale++] = (piece){
              rank, v.r0 / j.block[0], v.c0 / j.block[1],
              (v.r0 + v.rows + j.block[0] - 1) / j.block[0] - v.r0 / j.block[0],
              (v.c0 + v.cols + j.block[1] - 1) / j.block[1] - v.c0 / j.block[1]};
        }
      }
    /* 512 KiB, the least that takes a slab of whole 128 x 128 f32 blocks,
     * makes chunks the larger cases fill (a quarter of it, 128 KiB) */
    int64_t staging = (int64_t[]){0, (int64_t)1 << 20, 512 << 10}
        [th_rand(&rng) % 3];
    rs_status st = make_plan_staged(&j, world, 1 + (int)(th_rand(&rng) % 4),
                                    staging);
    cr_assert_eq(st, RS_OK, "case %d: %s", c, rs_context_last_error(j.ctx));
    cr_assert_leq(stat(&j, RS_STAT_STAGING_BYTES),
                  staging ? staging : 256 << 20,
                  "case %d: staging beyond the setting", c);
    by_pair += j.rounds == RS_ROUNDS_BY_DOMAIN_PAIR;
    same_without_boxes(&j, world, c);
    char why[256];
    cr_assert(th_pair_rounds_hold(j.plan, why, sizeof why), "case %d: %s", c,
              why);
    cr_assert(th_same_domain_parts(j.plan, j.src, j.dst, why, sizeof why),
              "case %d: %s", c, why);
    split += stat(&j, RS_STAT_CONVERTED_RECEIVING) > 0;
    whole += stat(&j, RS_STAT_CONVERTED_SENDING) > 0;
    bind_and_run(&j);
    check(&j);
    finish(&j);
    cases++;
  }
  cr_log_info("%d cases: %d with receivers converting, %d with senders "
              "converting, %d with rounds by domain pair",
              cases, split, whole, by_pair);
  cr_assert_gt(split, 10);
  cr_assert_gt(whole, 10);
}

/* An N-D tensor (1-D and 3-D here) with boxes of any rank: sources that
 * split blocks, destinations of whole blocks on two ranks. */
typedef struct nbox {
  int rank;
  int64_t off[3], ext[3];
} nbox;

static int64_t nvolume(int nd, const int64_t *e) {
  int64_t v = 1;
  for (int d = 0; d < nd; d++) v *= e[d];
  return v;
}

/* Copy box b of a dense tensor of `shape` between the tensor and a dense
 * buffer of the box (to_box: tensor -> buffer). */
static void box_copy(int nd, const int64_t *shape, const nbox *b,
                     unsigned char *tensor, unsigned char *buf, int64_t es,
                     bool to_box) {
  int64_t n = nvolume(nd, b->ext);
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, at = 0;
    int64_t idx[3];
    for (int d = nd - 1; d >= 0; d--) {
      idx[d] = rem % b->ext[d] + b->off[d];
      rem /= b->ext[d];
    }
    for (int d = 0; d < nd; d++) at = at * shape[d] + idx[d];
    if (to_box)
      memcpy(buf + i * es, tensor + at * es, (size_t)es);
    else
      memcpy(tensor + at * es, buf + i * es, (size_t)es);
  }
}

static void nd_case(int nd, const int64_t *shape, int64_t b0, int64_t b1,
                    const nbox *srcs, int nsrc, const nbox *dsts, int ndst) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  int64_t sshape[3];
  memcpy(sshape, shape, (size_t)nd * sizeof *shape);
  sshape[nd - 1] = (shape[nd - 1] + b1 - 1) / b1;
  if (nd > 1) sshape[nd - 2] = (shape[nd - 2] + b0 - 1) / b0;
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_BF16, nd, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_F8_E4M3, nd, shape),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "s", RS_DTYPE_F32, nd, sshape), RS_OK);
  cr_assert_eq(rs_layout_set_block_scales(dst, "w", "s", b0, b1, RS_SCALE_AMAX),
               RS_OK, "%s", rs_context_last_error(ctx));
  int64_t n = nvolume(nd, shape), ns = nvolume(nd, sshape);
  job values = {.from = RS_DTYPE_BF16, .shape = {n, 1}};
  make_values(&values);
  unsigned char *want = malloc((size_t)n);
  float *want_scales = malloc((size_t)ns * sizeof *want_scales);
  rsi_err err = {0};
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, nd, shape, values.values,
                                   want, want_scales, b0, b1, false, &err),
               RS_OK);
  for (int i = 0; i < nsrc; i++)
    cr_assert_eq(rs_layout_add_shard(src, "w", srcs[i].rank, srcs[i].off,
                                     srcs[i].ext, i, 0, NULL), RS_OK);
  nbox sboxes[4];
  for (int i = 0; i < ndst; i++) {
    cr_assert_eq(rs_layout_add_shard(dst, "w", dsts[i].rank, dsts[i].off,
                                     dsts[i].ext, i, 0, NULL), RS_OK);
    sboxes[i] = dsts[i];
    for (int d = 0; d < nd; d++) {
      int64_t bs = d == nd - 1 ? b1 : d == nd - 2 ? b0 : 1;
      sboxes[i].off[d] = dsts[i].off[d] / bs;
      sboxes[i].ext[d] = (dsts[i].off[d] + dsts[i].ext[d] + bs - 1) / bs -
                         sboxes[i].off[d];
    }
    cr_assert_eq(rs_layout_add_shard(dst, "s", dsts[i].rank, sboxes[i].off,
                                     sboxes[i].ext, 8 + i, 0, NULL), RS_OK);
  }
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  unsigned char *bufs[12] = {0};
  for (int i = 0; i < nsrc; i++) {
    int64_t v = nvolume(nd, srcs[i].ext);
    bufs[i] = malloc((size_t)(2 * v));
    box_copy(nd, shape, &srcs[i], values.values, bufs[i], 2, true);
    cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, srcs[i].rank, i, bufs[i],
                              (size_t)(2 * v)), RS_OK);
  }
  unsigned char *got = malloc((size_t)n);
  float *got_scales = malloc((size_t)ns * sizeof *got_scales);
  memset(got, 0xA5, (size_t)n);
  memset(got_scales, 0xA5, (size_t)ns * sizeof *got_scales);
  unsigned char *dbuf[4], *sbuf[4];
  for (int i = 0; i < ndst; i++) {
    int64_t v = nvolume(nd, dsts[i].ext), vs = nvolume(nd, sboxes[i].ext);
    dbuf[i] = malloc((size_t)v);
    sbuf[i] = malloc((size_t)(4 * vs));
    memset(dbuf[i], 0xA5, (size_t)v);
    memset(sbuf[i], 0xA5, (size_t)(4 * vs));
    cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, dsts[i].rank, i, dbuf[i],
                              (size_t)v), RS_OK);
    cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, dsts[i].rank, 8 + i, sbuf[i],
                              (size_t)(4 * vs)), RS_OK);
  }
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  for (int i = 0; i < ndst; i++) {
    box_copy(nd, shape, &dsts[i], got, dbuf[i], 1, false);
    box_copy(nd, sshape, &sboxes[i], (unsigned char *)got_scales, sbuf[i], 4,
             false);
    free(dbuf[i]);
    free(sbuf[i]);
  }
  cr_assert(memcmp(got, want, (size_t)n) == 0, "fp8 values differ");
  cr_assert(memcmp(got_scales, want_scales, (size_t)ns * 4) == 0,
            "scales differ");
  for (int i = 0; i < nsrc; i++) free(bufs[i]);
  free(got);
  free(got_scales);
  free(want);
  free(want_scales);
  free(values.values);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

Test(convert_plan, fp8_one_dim) {
  const int64_t shape[1] = {1000};
  const nbox srcs[3] = {{0, {0}, {300}}, {1, {300}, {400}}, {0, {700}, {300}}};
  const nbox dsts[2] = {{2, {0}, {512}}, {3, {512}, {488}}};
  nd_case(1, shape, 1, 128, srcs, 3, dsts, 2);
}

Test(convert_plan, fp8_leading_dims_are_independent) {
  const int64_t shape[3] = {3, 200, 130};
  const nbox srcs[3] = {{0, {0, 0, 0}, {2, 100, 130}},
                        {1, {0, 100, 0}, {2, 100, 130}},
                        {1, {2, 0, 0}, {1, 200, 130}}};
  const nbox dsts[2] = {{2, {0, 0, 0}, {3, 200, 64}},
                        {3, {0, 0, 64}, {3, 200, 66}}};
  nd_case(3, shape, 64, 64, srcs, 3, dsts, 2);
}

/* fp8 blocks whose parts come from source ranks of more than one domain,
 * by domain pair (every rank its own domain): rank 7 holds the lower
 * halves of blocks whose upper halves ranks 0, 1 and 2 hold for ranks 4,
 * 5 and 6, and ranks 4, 5 and 6 for ranks 0, 1 and 2 (every pair four
 * domains apart); it also sends whole blocks to rank 3 (four apart too)
 * and receives from it. The receivers quantize, so rank 7's halves travel
 * in bf16, about as many bytes as its own pairs'. Its share of the mixed
 * blocks must not pile onto the rounds in which its own pairs take their
 * quarters of the staging (it did before 2026-12-07: 1.25x the setting). */
Test(convert_plan, fp8_blocks_from_several_domains_stay_within_staging) {
  const int64_t C = 2048, staging = (int64_t)1 << 20;
  for (int mode = 0; mode < 2; mode++) {
    job j = {.shape = {512, 3 * C}, .block = {128, 128},
             .from = RS_DTYPE_BF16, .to = RS_DTYPE_F8_E4M3,
             .rounds = mode ? RS_ROUNDS_BY_DOMAIN_PAIR : RS_ROUNDS_PACKED};
    for (int k = 0; k < 3; k++)
      for (int h = 0; h < 2; h++) { /* rows 0-127 into 4+k, 384-511 into k */
        int64_t r0 = h ? 384 : 0;
        int top = h ? 4 + k : k, to = h ? k : 4 + k;
        j.srcs[j.nsrc++] = (piece){top, r0, k * C, 64, C};
        j.srcs[j.nsrc++] = (piece){7, r0 + 64, k * C, 64, C};
        j.dsts[j.ndst++] = (piece){to, r0, k * C, 128, C};
        j.scales[j.nscale++] = (piece){to, r0 / 128, k * C / 128, 1, C / 128};
      }
    j.srcs[j.nsrc++] = (piece){7, 128, 0, 128, 3 * C};
    j.srcs[j.nsrc++] = (piece){3, 256, 0, 128, 3 * C};
    j.dsts[j.ndst++] = (piece){3, 128, 0, 128, 3 * C};
    j.scales[j.nscale++] = (piece){3, 1, 0, 1, 3 * C / 128};
    j.dsts[j.ndst++] = (piece){7, 256, 0, 128, 3 * C};
    j.scales[j.nscale++] = (piece){7, 2, 0, 1, 3 * C / 128};
    const char *how = mode ? "by domain pair" : "packed";
    cr_assert_eq(make_plan_staged(&j, 8, 1, staging), RS_OK, "%s: %s", how,
                 rs_context_last_error(j.ctx));
    for (int r = 0; r < 8; r++) {
      int64_t said = -1;
      cr_assert_eq(rs_plan_stat(j.plan, r, RS_STAT_STAGING_BYTES, &said),
                   RS_OK);
      cr_assert_leq(said, staging, "%s: rank %d's staging %lld > setting "
                    "%lld", how, r, (long long)said, (long long)staging);
    }
    char why[256];
    cr_assert(th_pair_rounds_hold(j.plan, why, sizeof why), "%s: %s", how,
              why);
    cr_assert(th_same_domain_parts(j.plan, j.src, j.dst, why, sizeof why),
              "%s: %s", how, why);
    bind_and_run(&j);
    check(&j);
    for (int r = 0; r < 8; r++) /* what the executor allocated */
      cr_assert_leq(rsi_exec_staging(j.plan, r), staging, "%s: rank %d", how,
                    r);
    finish(&j);
  }
}
