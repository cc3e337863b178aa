/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine's piece table (core/transport/nccl/pieces.h), run
 * through its CPU emulation: random strided boxes (rank 1..6, some up to
 * 16), element sizes 1..16, random sub-ranges, padded and permuted
 * strides, inner dims that are not contiguous, misaligned bases, dense
 * sides, copied into a poisoned destination and compared byte for byte
 * with core/copy/copy.c's rsi_copy_range into another; batches of many copies
 * with the item -> piece search checked over the whole item range; unit
 * selection; empty ranges.
 * Conversions (suite pieces_convert, convert_pieces.h): casts between
 * f32, bf16 and f16 over such boxes against convert.h's cast functions;
 * QUANTIZE and SCALES of random boxes of random block-scaled tensors
 * (ranks 1..4, strided and transposed storage, edge blocks, infinities
 * and NaNs, UE8M0, blocks split into chunks down to one unit a job)
 * against rsi_quantize_blocks of the whole tensor; mixed batches; units,
 * jobs and bad copies.
 *
 * Replay: RESHARD_SEED=<seed> (default fixed); every failure names the
 * seed and the case. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "copy/convert.h"
#include "copy/copy.h"
#include "th_util.h"
#include "transport/nccl/convert_pieces.h"
#include "transport/nccl/pieces.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x91ECE5ull

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) { return th_rand(&r->s); }

/* Uniform in [lo, hi]. */
static int64_t rrange(rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnext(r) % (uint64_t)(hi - lo + 1));
}

static uint64_t test_seed(void) {
  const char *v = getenv("RESHARD_SEED");
  return v && *v ? strtoull(v, NULL, 0) : DEFAULT_SEED;
}

/* A buffer whose usable part starts `misalign` bytes past a 64-byte
 * boundary, with poisoned slack on both sides. */
typedef struct tbuf {
  unsigned char *mem;
  size_t total;
  unsigned char *base;
  size_t bytes;
} tbuf;

#define SLACK 64

static void tbuf_make(tbuf *b, size_t bytes, int misalign, int fill) {
  b->total = bytes + 3 * SLACK;
  b->mem = malloc(b->total);
  cr_assert_not_null(b->mem);
  memset(b->mem, fill, b->total);
  uintptr_t at = ((uintptr_t)b->mem + SLACK + 63) / 64 * 64;
  b->base = (unsigned char *)at + misalign;
  b->bytes = bytes;
}

/* One random copy with its source and two poisoned destinations. */
typedef struct tcase {
  rsi_copy c;
  tbuf src, ref, got;
  int64_t copied_bytes;
} tcase;

static void random_extent(rng *r, int ndim, int64_t max_vol, int64_t *ext) {
  int64_t vol = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t room = max_vol / vol;
    int64_t top = room < 64 ? room : 64;
    if (rrange(r, 0, 5) == 0) top = room; /* one long dim now and then */
    ext[d] = rrange(r, 1, top > 1 ? top : 1);
    if (rrange(r, 0, 6) == 0) ext[d] = 1;
    vol *= ext[d];
  }
  /* shuffle so that the long dim is not always first */
  for (int i = ndim - 1; i > 0; i--) {
    int j = (int)rrange(r, 0, i);
    int64_t t = ext[i];
    ext[i] = ext[j];
    ext[j] = t;
  }
}

/* Padded, sometimes permuted, sometimes with a non-contiguous inner dim;
 * never overlapping, and spanning at most about 4x the dense size. */
static void random_strides(rng *r, int ndim, const int64_t *ext,
                           int64_t *st) {
  int perm[RS_MAX_DIMS];
  for (int d = 0; d < ndim; d++) perm[d] = d;
  if (rrange(r, 0, 2) == 0)
    for (int i = ndim - 1; i > 0; i--) {
      int j = (int)rrange(r, 0, i), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  int64_t s = rrange(r, 0, 3) == 0 ? rrange(r, 2, 4) : 1, dense = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    int d = perm[i];
    st[d] = s;
    int64_t pad = rrange(r, 0, 2) == 0 ? rrange(r, 1, 5) : 0;
    dense *= ext[d];
    if (s * (ext[d] + pad) > 4 * dense) pad = 0;
    s *= ext[d] + pad;
  }
}

static const int ESIZES[] = {1, 2, 4, 8, 1, 2, 4, 8, 16, 3, 12};

static void tcase_make(rng *r, tcase *t, int ndim, int64_t max_vol) {
  memset(t, 0, sizeof *t);
  rsi_copy *c = &t->c;
  c->ndim = ndim;
  c->esize = ESIZES[rrange(r, 0, sizeof ESIZES / sizeof *ESIZES - 1)];
  random_extent(r, ndim, max_vol, c->extent);
  int64_t vol = th_volume(ndim, c->extent);
  switch (rrange(r, 0, 4)) {
    case 0: /* everything */
      c->lo = 0;
      c->hi = vol;
      break;
    case 1: /* empty */
      c->lo = c->hi = rrange(r, 0, vol);
      break;
    default:
      c->lo = rrange(r, 0, vol);
      c->hi = rrange(r, c->lo, vol);
  }
  c->dense_dst = rrange(r, 0, 3) == 0;
  c->dense_src = !c->dense_dst && rrange(r, 0, 3) == 0;
  if (rrange(r, 0, 9) == 0) c->dense_dst = c->dense_src = true;
  random_strides(r, ndim, c->extent, c->dst_strides);
  random_strides(r, ndim, c->extent, c->src_strides);
  /* dense/contiguous strides now and then: where unit 16 comes from */
  if (rrange(r, 0, 3) == 0) th_dense_strides(ndim, c->extent, c->dst_strides);
  if (rrange(r, 0, 3) == 0) th_dense_strides(ndim, c->extent, c->src_strides);

  size_t es = (size_t)c->esize;
  int64_t dense_bytes = (c->hi - c->lo) * c->esize;
  int64_t dbytes = c->dense_dst ? dense_bytes
                                : th_span_bytes(ndim, c->extent,
                                                c->dst_strides, es);
  int64_t sbytes = c->dense_src ? dense_bytes
                                : th_span_bytes(ndim, c->extent,
                                                c->src_strides, es);
  int dmis = rrange(r, 0, 1) == 0 ? 0 : (int)rrange(r, 0, 15);
  int smis = rrange(r, 0, 1) == 0 ? 0 : (int)rrange(r, 0, 15);
  tbuf_make(&t->src, (size_t)sbytes, smis, 0);
  for (size_t i = 0; i < t->src.total; i++) { /* never a poison byte */
    unsigned char v = (unsigned char)rnext(r);
    t->src.mem[i] = v == TH_POISON ? TH_NOT_POISON : v;
  }
  tbuf_make(&t->ref, (size_t)dbytes, dmis, TH_POISON);
  tbuf_make(&t->got, (size_t)dbytes, dmis, TH_POISON);
  c->src = (const char *)t->src.base;
  c->dst = (char *)t->got.base;
  t->copied_bytes = dense_bytes;
  rsi_copy_range(ndim, c->extent, es, (char *)t->ref.base,
                 c->dense_dst ? NULL : c->dst_strides, c->src,
                 c->dense_src ? NULL : c->src_strides, c->lo, c->hi);
}

static void tcase_free(tcase *t) {
  free(t->src.mem);
  free(t->ref.mem);
  free(t->got.mem);
}

static void describe(const tcase *t, char *buf, size_t cap) {
  const rsi_copy *c = &t->c;
  int at = snprintf(buf, cap, "ndim=%d esize=%d lo=%" PRId64 " hi=%" PRId64
                    " dense_dst=%d dense_src=%d ext=(",
                    c->ndim, c->esize, c->lo, c->hi, c->dense_dst,
                    c->dense_src);
  for (int d = 0; d < c->ndim && at < (int)cap; d++)
    at += snprintf(buf + at, cap - (size_t)at, "%s%" PRId64, d ? "," : "",
                   c->extent[d]);
  for (int side = 0; side < 2 && at < (int)cap; side++) {
    const int64_t *st = side ? c->src_strides : c->dst_strides;
    at += snprintf(buf + at, cap - (size_t)at, ") %s_strides=(",
                   side ? "src" : "dst");
    for (int d = 0; d < c->ndim && at < (int)cap; d++)
      at += snprintf(buf + at, cap - (size_t)at, "%s%" PRId64, d ? "," : "",
                     st[d]);
  }
  if (at < (int)cap)
    snprintf(buf + at, cap - (size_t)at, ") dst%%16=%u src%%16=%u",
             (unsigned)((uintptr_t)c->dst % 16),
             (unsigned)((uintptr_t)c->src % 16));
}

/* Both destinations equal byte for byte (with SLACK bytes either side),
 * and exactly the copied bytes are no longer poison. */
static void tcase_check(const tcase *t, const char *where) {
  const unsigned char *ref = t->ref.base - SLACK, *got = t->got.base - SLACK;
  size_t len = t->ref.bytes + 2 * SLACK, diff = len;
  for (size_t i = 0; i < len; i++)
    if (ref[i] != got[i]) {
      diff = i;
      break;
    }
  char what[1024];
  if (diff != len) describe(t, what, sizeof what);
  cr_assert_eq(diff, len,
               "%s: byte %td from base differs: want %#x got %#x; %s", where,
               (ptrdiff_t)diff - SLACK, diff < len ? ref[diff] : 0,
               diff < len ? got[diff] : 0, diff != len ? what : "");
  int64_t written = 0;
  for (size_t i = 0; i < len; i++) written += ref[i] != TH_POISON;
  cr_assert_eq(written, t->copied_bytes, "%s: reference wrote %" PRId64
               " bytes, want %" PRId64, where, written, t->copied_bytes);
}

/* Structural checks of a table: pieces non-empty, items in order, counted
 * right, within their caps; every item found in its own piece; every unit
 * address aligned to its unit. */
static void check_table(const rsi_pieces *t, const char *where) {
  int64_t next = 0;
  for (int64_t i = 0; i < t->n; i++) {
    const rsi_piece *p = &t->v[i];
    cr_assert_eq(p->first_item, next, "%s: piece %" PRId64, where, i);
    cr_assert_gt(p->items, 0, "%s: piece %" PRId64 " has no item", where, i);
    cr_assert_gt(p->nrows, 0, "%s", where);
    cr_assert_gt(p->ncols, 0, "%s", where);
    cr_assert(p->unit == 1 || p->unit == 2 || p->unit == 4 || p->unit == 8 ||
                  p->unit == 16,
              "%s: unit %d", where, p->unit);
    cr_assert_leq(p->chunk_cols * p->rows_per_item,
                  (int64_t)RSI_PIECE_ITEM_UNITS, "%s", where);
    cr_assert(p->chunks == 1 || p->rows_per_item == 1, "%s", where);
    next += p->items;
  }
  cr_assert_eq(next, t->items, "%s: item count", where);
  int64_t units = 0, want_units = 0;
  for (int64_t i = 0; i < t->n; i++)
    want_units += t->v[i].nrows * t->v[i].ncols;
  for (int64_t item = 0; item < t->items; item++) {
    int64_t k = rsi_piece_find(t->v, t->n, item);
    const rsi_piece *p = &t->v[k];
    cr_assert(p->first_item <= item && item < p->first_item + p->items,
              "%s: item %" PRId64 " found in piece %" PRId64, where, item, k);
    rsi_item it;
    rsi_piece_item(p, item, &it);
    cr_assert_gt(it.units, 0, "%s: item %" PRId64 " is empty", where, item);
    cr_assert_leq(it.units, RSI_PIECE_ITEM_UNITS, "%s", where);
    units += it.units;
    /* the GPU faults on a misaligned vector access; memcpy would not */
    uint64_t dst, src, bad = 0;
    for (uint32_t u = 0; rsi_item_unit(p, &it, u, &dst, &src); u++)
      bad |= (dst | src) & (uint64_t)(p->unit - 1);
    cr_assert_eq(bad, 0, "%s: item %" PRId64 " has a unit address not "
                 "aligned to %d bytes", where, item, p->unit);
  }
  cr_assert_eq(units, want_units, "%s: items do not cover the pieces", where);
}

/* What the random cases exercised, logged so that a change of generator
 * that stops covering a path shows. */
static struct {
  int64_t pieces, by_unit[17], chunked, grouped, deep;
  int64_t straight, segmented, unit_by_unit; /* items, as 256 threads go */
} seen;

static void count_table(const rsi_pieces *t) {
  for (int64_t i = 0; i < t->n; i++) {
    const rsi_piece *p = &t->v[i];
    seen.pieces++;
    seen.by_unit[p->unit]++;
    seen.chunked += p->chunks > 1;
    seen.grouped += p->rows_per_item > 1;
    seen.deep += p->rows_per_item > 1 && p->nouter >= 2;
    for (int64_t item = p->first_item; item < p->first_item + p->items;
         item++) {
      rsi_item it;
      rsi_piece_item(p, item, &it);
      if (it.straight_rows == it.rows)
        seen.straight++;
      else if (rsi_item_by_segments(p, &it, 256))
        seen.segmented++;
      else
        seen.unit_by_unit++;
    }
  }
}

static void log_seen(const char *what) {
  cr_log_info("%s: %" PRId64 " pieces; units 16/8/4/2/1: %" PRId64 "/%" PRId64
              "/%" PRId64 "/%" PRId64 "/%" PRId64 "; %" PRId64
              " cut into row chunks, %" PRId64 " with several rows per item (%"
              PRId64 " over 2+ outer dims); items straight/segmented/unit by "
              "unit: %" PRId64 "/%" PRId64 "/%" PRId64,
              what, seen.pieces, seen.by_unit[16], seen.by_unit[8],
              seen.by_unit[4], seen.by_unit[2], seen.by_unit[1], seen.chunked,
              seen.grouped, seen.deep, seen.straight, seen.segmented,
              seen.unit_by_unit);
}

static const int THREADS[] = {1, 3, 32, 256, 1000};

static void run_one(uint64_t seed, int index, int ndim, int64_t max_vol) {
  rng r = {th_mix(seed ^ th_mix((uint64_t)index * TH_GOLDEN))};
  char where[96];
  snprintf(where, sizeof where, "seed=%#" PRIx64 " case=%d", seed, index);
  tcase t;
  tcase_make(&r, &t, ndim, max_vol);
  rsi_pieces tab = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(&t.c, 1, &tab, &err), RS_OK, "%s", where);
  check_table(&tab, where);
  count_table(&tab);
  if (t.c.lo == t.c.hi) cr_assert_eq(tab.items, 0, "%s", where);
  int threads = THREADS[rrange(&r, 0, sizeof THREADS / sizeof *THREADS - 1)];
  rsi_pieces_run_host(tab.v, tab.n, tab.items, threads);
  tcase_check(&t, where);
  rsi_pieces_free(&tab);
  tcase_free(&t);
}

Test(pieces, random_boxes_small) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 5000; i++)
    run_one(seed, i, 1 + (int)(th_mix(seed + (uint64_t)i) % 6), 4096);
  log_seen("small boxes");
}

/* Rows longer than an item (chunked) and many rows per item. */
Test(pieces, random_boxes_large) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 300; i++)
    run_one(seed, 100000 + i, 1 + (int)(th_mix(seed + (uint64_t)i) % 4),
            300000);
  log_seen("large boxes");
}

Test(pieces, random_boxes_high_rank) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 400; i++)
    run_one(seed, 200000 + i, 7 + (int)(th_mix(seed + (uint64_t)i) % 10),
            20000);
  log_seen("high-rank boxes");
}

Test(pieces, batch_of_many_copies) {
  uint64_t seed = test_seed();
  for (int round = 0; round < 6; round++) {
    rng r = {th_mix(seed ^ 0xBA7C4ull ^ (uint64_t)round)};
    char where[96];
    snprintf(where, sizeof where, "seed=%#" PRIx64 " batch=%d", seed, round);
    int n = (int)rrange(&r, 50, 400);
    tcase *cases = calloc((size_t)n, sizeof *cases);
    rsi_copy *copies = calloc((size_t)n, sizeof *copies);
    cr_assert(cases && copies);
    for (int i = 0; i < n; i++) {
      tcase_make(&r, &cases[i], (int)rrange(&r, 1, 8),
                 rrange(&r, 0, 9) == 0 ? 100000 : 3000);
      copies[i] = cases[i].c;
    }
    rsi_pieces tab = {0};
    rsi_err err = {0};
    /* build twice into one table: it resets, and the second is the same */
    cr_assert_eq(rsi_pieces_build(copies, n, &tab, &err), RS_OK);
    int64_t items = tab.items, npieces = tab.n;
    cr_assert_eq(rsi_pieces_build(copies, n, &tab, &err), RS_OK);
    cr_assert_eq(tab.items, items, "%s", where);
    cr_assert_eq(tab.n, npieces, "%s", where);
    cr_assert_gt(tab.n, n / 2, "%s: only %" PRId64 " pieces", where, tab.n);
    check_table(&tab, where);
    rsi_pieces_run_host(tab.v, tab.n, tab.items, 256);
    for (int i = 0; i < n; i++) {
      char w2[128];
      snprintf(w2, sizeof w2, "%s copy=%d", where, i);
      tcase_check(&cases[i], w2);
      tcase_free(&cases[i]);
    }
    rsi_pieces_free(&tab);
    free(cases);
    free(copies);
  }
}

/* One copy of 1000 four-byte elements, both sides dense or contiguous, its
 * bases `dmis` / `smis` bytes past a 64-byte boundary. */
static rsi_pieces contiguous_table(int dmis, int smis, bool dense_dst,
                                   int64_t lo, int64_t hi) {
  static unsigned char dmem[8192] __attribute__((aligned(64)));
  static unsigned char smem[8192] __attribute__((aligned(64)));
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.ndim = 2;
  c.esize = 4;
  c.extent[0] = 10;
  c.extent[1] = 100;
  th_dense_strides(2, c.extent, c.dst_strides);
  th_dense_strides(2, c.extent, c.src_strides);
  c.dense_dst = dense_dst;
  c.dst = (char *)dmem + dmis;
  c.src = (const char *)smem + smis;
  c.lo = lo;
  c.hi = hi;
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(&c, 1, &t, &err), RS_OK);
  return t;
}

Test(pieces, unit_selection) {
  rsi_pieces t = contiguous_table(0, 0, false, 0, 1000);
  cr_assert_eq(t.n, 1, "a contiguous copy is one piece");
  cr_assert_eq(t.v[0].unit, 16);
  cr_assert_eq(t.v[0].nouter, 0, "all dims merged");
  cr_assert_eq(t.v[0].ncols, 250);
  cr_assert_eq(t.items, 1);
  rsi_pieces_free(&t);

  t = contiguous_table(0, 0, true, 4, 1000); /* lo*4 = 16 */
  cr_assert_eq(t.v[0].unit, 16);
  rsi_pieces_free(&t);

  t = contiguous_table(0, 0, true, 2, 1000); /* lo*4 = 8 */
  cr_assert_eq(t.v[0].unit, 8);
  rsi_pieces_free(&t);

  t = contiguous_table(4, 0, false, 0, 1000);
  cr_assert_eq(t.v[0].unit, 4);
  rsi_pieces_free(&t);

  t = contiguous_table(0, 2, false, 0, 1000);
  cr_assert_eq(t.v[0].unit, 2);
  rsi_pieces_free(&t);

  t = contiguous_table(8, 16, false, 0, 1000);
  cr_assert_eq(t.v[0].unit, 8);
  rsi_pieces_free(&t);

  t = contiguous_table(3, 0, false, 0, 1000);
  cr_assert_eq(t.v[0].unit, 1);
  rsi_pieces_free(&t);
}

Test(pieces, strided_inner_dim_uses_element_units) {
  static uint64_t dmem[4096], smem[4096];
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.ndim = 2;
  c.esize = 8;
  c.extent[0] = 20;
  c.extent[1] = 30;
  c.dst_strides[0] = 30;
  c.dst_strides[1] = 1;
  c.src_strides[0] = 1; /* transposed source */
  c.src_strides[1] = 20;
  c.dst = (char *)dmem;
  c.src = (const char *)smem;
  c.lo = 0;
  c.hi = 600;
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.n, 1);
  cr_assert_eq(t.v[0].unit, 8);
  cr_assert_eq(t.v[0].ncols, 1, "one element per row");
  cr_assert_eq(t.v[0].nrows, 600);
  rsi_pieces_free(&t);
}

Test(pieces, column_shard_rows_and_partial_rows) {
  /* rows of 8 KiB out of 16 KiB rows: 64 rows, elements [100, 130000) of
   * 2-byte values: a partial head row, full rows, a partial tail row */
  static unsigned char dmem[1 << 20] __attribute__((aligned(64)));
  static unsigned char smem[1 << 20] __attribute__((aligned(64)));
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.ndim = 2;
  c.esize = 2;
  c.extent[0] = 64;
  c.extent[1] = 4096;
  c.src_strides[0] = 8192;
  c.src_strides[1] = 1;
  c.dense_dst = true;
  c.dst = (char *)dmem;
  c.src = (const char *)smem;
  c.lo = 100;
  c.hi = 130000;
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.n, 3);
  cr_assert_eq(t.v[0].unit, 8, "lo*2 = 200 bytes: 8-aligned");
  cr_assert_eq(t.v[0].nrows, 1);
  cr_assert_eq(t.v[0].col_lo, 25);
  cr_assert_eq(t.v[1].row_lo, 1);
  cr_assert_eq(t.v[1].nrows, 130000 / 4096 - 1);
  cr_assert_eq(t.v[1].ncols, 1024);
  cr_assert_eq(t.v[1].rows_per_item, 4);
  cr_assert_eq(t.v[2].row_lo, 130000 / 4096);
  cr_assert_eq(t.v[2].ncols, 130000 % 4096 / 4);
  rsi_pieces_free(&t);
}

Test(pieces, empty_ranges_have_no_items) {
  static unsigned char mem[256];
  rsi_copy c[3];
  memset(c, 0, sizeof c);
  for (int i = 0; i < 3; i++) {
    c[i].ndim = 1;
    c[i].esize = 4;
    c[i].extent[0] = 16;
    c[i].dst_strides[0] = c[i].src_strides[0] = 1;
    c[i].dst = (char *)mem;
    c[i].src = (const char *)mem + 128;
    c[i].lo = c[i].hi = 5 * i;
  }
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(c, 3, &t, &err), RS_OK);
  cr_assert_eq(t.n, 0);
  cr_assert_eq(t.items, 0);
  rsi_pieces_run_host(t.v, t.n, t.items, 256); /* nothing to do */
  cr_assert_eq(rsi_pieces_build(c, 0, &t, &err), RS_OK);
  cr_assert_eq(t.items, 0);
  rsi_pieces_free(&t);
  rsi_pieces_free(&t); /* twice is harmless */
  rsi_pieces_free(NULL);
}

/* ---- conversions (convert_pieces.h) ------------------------------------ */

static const int FLOATS[] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};

static int rfloat(rng *r) { return FLOATS[rrange(r, 0, 2)]; }

/* Random bits of one element: mostly normal values of a moderate range,
 * some zeros, subnormals and normals of any size, and with `specials`
 * infinities and NaNs of either sign now and then. */
static uint32_t rand_f32(rng *r, bool specials) {
  uint32_t sign = (uint32_t)(rnext(r) & 1) << 31;
  uint32_t man = (uint32_t)rnext(r) & 0x7fffffu;
  int64_t k = rrange(r, 0, 99);
  if (specials && k < 2) return sign | 0x7f800000u | (k ? man | 0x10000u : 0);
  if (k < 5) return sign;
  if (k < 10) return sign | man;
  if (k < 15) return sign | (uint32_t)rrange(r, 1, 254) << 23 | man;
  return sign | (uint32_t)rrange(r, 100, 150) << 23 | man;
}

static uint16_t rand_f16(rng *r, bool specials) {
  uint16_t sign = (uint16_t)((rnext(r) & 1) << 15);
  uint16_t man = (uint16_t)(rnext(r) & 0x3ffu);
  int64_t k = rrange(r, 0, 99);
  if (specials && k < 2) return sign | 0x7c00u | (k ? man | 1u : 0);
  if (k < 5) return sign;
  if (k < 10) return sign | man;
  return sign | (uint16_t)(rrange(r, 1, 30) << 10) | man;
}

static void fill_floats(rng *r, int dtype, unsigned char *p, int64_t n,
                        bool specials) {
  for (int64_t i = 0; i < n; i++) {
    if (dtype == RS_DTYPE_F32) {
      uint32_t v = rand_f32(r, specials);
      memcpy(p + 4 * i, &v, 4);
    } else {
      uint16_t v = dtype == RS_DTYPE_BF16
                       ? (uint16_t)(rand_f32(r, specials) >> 16)
                       : rand_f16(r, specials);
      memcpy(p + 2 * i, &v, 2);
    }
  }
}

/* A conversion copy with its source and two poisoned destinations: ref
 * gets what the host functions of convert.h make, got the emulation's. */
typedef struct ccase {
  rsi_copy c;
  tbuf src, ref, got;
  int64_t off[4]; /* block cases: the box's offset */
} ccase;

static void ccase_free(ccase *t) {
  free(t->src.mem);
  free(t->ref.mem);
  free(t->got.mem);
}

/* Element (of its side) that box index idx, range position lin, is at. */
static int64_t side_at(const rsi_copy *c, bool dense, const int64_t *st,
                       const int64_t *idx, int64_t lin) {
  if (dense) return lin - c->lo;
  int64_t at = 0;
  for (int d = 0; d < c->ndim; d++) at += idx[d] * st[d];
  return at;
}

/* A destination of the box of c: dense (the range) or with random
 * strides, misaligned by a random number of elements of `size` bytes
 * (friendly: dense or contiguous, on 16 bytes). */
static void make_dst(rng *r, ccase *t, int size, bool friendly) {
  rsi_copy *c = &t->c;
  c->dense_dst = rrange(r, 0, 2) == 0;
  random_strides(r, c->ndim, c->extent, c->dst_strides);
  if (friendly || rrange(r, 0, 2) == 0)
    th_dense_strides(c->ndim, c->extent, c->dst_strides);
  int64_t bytes = c->dense_dst ? (c->hi - c->lo) * size
                               : th_span_bytes(c->ndim, c->extent,
                                               c->dst_strides, (size_t)size);
  int mis = friendly ? 0 : (int)rrange(r, 0, 16 / size - 1) * size;
  tbuf_make(&t->ref, (size_t)bytes, mis, TH_POISON);
  tbuf_make(&t->got, (size_t)bytes, mis, TH_POISON);
  c->dst = (char *)t->got.base;
}

static void cast_case_make(rng *r, ccase *t, int ndim, int64_t max_vol) {
  memset(t, 0, sizeof *t);
  rsi_copy *c = &t->c;
  c->ndim = ndim;
  c->op = RSI_COPY_CAST;
  c->src_dtype = rfloat(r);
  c->dst_dtype = rfloat(r);
  int ss = rsi_conv_size(c->src_dtype), ds = rsi_conv_size(c->dst_dtype);
  random_extent(r, ndim, max_vol, c->extent);
  /* half the cases friendly to wide units: rows of 8k elements, the range
   * on multiples of 8, bases on 16 bytes */
  bool friendly = rrange(r, 0, 1);
  if (friendly) c->extent[ndim - 1] = (c->extent[ndim - 1] + 7) / 8 * 8;
  int64_t vol = th_volume(ndim, c->extent);
  c->lo = rrange(r, 0, 3) == 0 ? 0 : rrange(r, 0, vol);
  c->hi = rrange(r, 0, 3) == 0 ? vol : rrange(r, c->lo, vol);
  if (friendly) {
    c->lo = c->lo / 8 * 8;
    c->hi = c->hi / 8 * 8 > c->lo ? c->hi / 8 * 8 : c->hi;
  }
  make_dst(r, t, ds, friendly);
  c->dense_src = !c->dense_dst && rrange(r, 0, 3) == 0;
  random_strides(r, ndim, c->extent, c->src_strides);
  if (friendly || rrange(r, 0, 2) == 0)
    th_dense_strides(ndim, c->extent, c->src_strides);
  int64_t sbytes = c->dense_src ? (c->hi - c->lo) * ss
                                : th_span_bytes(ndim, c->extent,
                                                c->src_strides, (size_t)ss);
  tbuf_make(&t->src, (size_t)sbytes,
            friendly ? 0 : (int)rrange(r, 0, 16 / ss - 1) * ss, 0);
  fill_floats(r, c->src_dtype, t->src.base, sbytes / ss, true);
  c->src = (const char *)t->src.base;

  rsi_cast_fn cast = rsi_convert_cast_fn(c->dst_dtype, c->src_dtype);
  cr_assert_not_null(cast);
  int64_t idx[RS_MAX_DIMS] = {0}, lin = 0;
  if (vol > 0) do {
      if (lin >= c->lo && lin < c->hi)
        cast(t->ref.base +
                 side_at(c, c->dense_dst, c->dst_strides, idx, lin) * ds,
             t->src.base +
                 side_at(c, c->dense_src, c->src_strides, idx, lin) * ss,
             1);
      lin++;
    } while (th_next(ndim, c->extent, idx));
}

/* Both destinations equal byte for byte, SLACK bytes either side too. */
static void ccase_check(const ccase *t, const char *where) {
  const unsigned char *ref = t->ref.base - SLACK, *got = t->got.base - SLACK;
  size_t len = t->ref.bytes + 2 * SLACK;
  for (size_t i = 0; i < len; i++)
    if (ref[i] != got[i]) {
      const rsi_copy *c = &t->c;
      cr_assert_fail("%s: byte %td from base differs: want %#x got %#x; "
                     "op=%d %d->%d ndim=%d lo=%" PRId64 " hi=%" PRId64
                     " dense_dst=%d dense_src=%d blocks %" PRId64 "x%" PRId64
                     " of %" PRId64 "x%" PRId64 " from (%" PRId64 ",%" PRId64
                     ")",
                     where, (ptrdiff_t)i - SLACK, ref[i], got[i], c->op,
                     c->src_dtype, c->dst_dtype, c->ndim, c->lo, c->hi,
                     c->dense_dst, c->dense_src, c->blocks.b0, c->blocks.b1,
                     c->blocks.rows, c->blocks.cols, c->blocks.row0,
                     c->blocks.col0);
    }
}

/* A tensor of values in strided storage, and its block quantization by
 * rsi_quantize_blocks (of a dense copy): the reference. */
typedef struct btensor {
  int dtype, ndim;
  int64_t shape[4], strides[4], sshape[4];
  int64_t b0, b1;
  bool ue8m0, friendly;
  tbuf store;
  uint8_t *q;
  float *scales;
} btensor;

static void btensor_make(rng *r, btensor *b, bool big) {
  memset(b, 0, sizeof *b);
  b->dtype = rfloat(r);
  b->ndim = (int)rrange(r, 1, 4);
  int n = b->ndim;
  static const int64_t BLOCK[] = {1, 2, 3, 4, 8, 16, 32, 5, 128};
  for (int d = 0; d + 2 < n; d++) b->shape[d] = rrange(r, 1, 3);
  if (n >= 2) b->shape[n - 2] = big ? rrange(r, 100, 300) : rrange(r, 1, 40);
  b->shape[n - 1] = big ? rrange(r, 100, 400)
                        : rrange(r, 1, n == 1 ? 300 : 80);
  b->b0 = BLOCK[rrange(r, 0, 8)];
  b->b1 = BLOCK[rrange(r, 0, 8)];
  if (big && rrange(r, 0, 1)) { /* one block a matrix */
    b->b0 = n >= 2 ? b->shape[n - 2] : 1;
    b->b1 = b->shape[n - 1];
  } else if (big) {
    b->b0 = b->b1 = 128;
  }
  /* half friendly to wide units: columns and blocks of 8k, dense and on
   * 16 bytes */
  b->friendly = rrange(r, 0, 1);
  if (b->friendly) {
    b->shape[n - 1] = (b->shape[n - 1] + 7) / 8 * 8;
    b->b1 = b->b1 % 8 ? 8 * b->b1 : b->b1;
  }
  b->ue8m0 = rrange(r, 0, 1);
  random_strides(r, n, b->shape, b->strides);
  if (b->friendly || rrange(r, 0, 1)) th_dense_strides(n, b->shape, b->strides);
  int size = rsi_conv_size(b->dtype);
  int64_t span = th_span_bytes(n, b->shape, b->strides, (size_t)size);
  tbuf_make(&b->store, (size_t)span,
            b->friendly ? 0 : (int)rrange(r, 0, 16 / size - 1) * size, 0);
  fill_floats(r, b->dtype, b->store.base, span / size, rrange(r, 0, 3) == 0);

  int64_t count = th_volume(n, b->shape);
  unsigned char *dense = malloc((size_t)(count * size));
  cr_assert_not_null(dense);
  int64_t idx[4] = {0}, lin = 0;
  do {
    int64_t at = 0;
    for (int d = 0; d < n; d++) at += idx[d] * b->strides[d];
    memcpy(dense + lin++ * size, b->store.base + at * size, (size_t)size);
  } while (th_next(n, b->shape, idx));
  for (int d = 0; d < n; d++) b->sshape[d] = b->shape[d];
  if (n >= 2) b->sshape[n - 2] = (b->shape[n - 2] + b->b0 - 1) / b->b0;
  b->sshape[n - 1] = (b->shape[n - 1] + b->b1 - 1) / b->b1;
  b->q = malloc((size_t)count);
  b->scales = malloc((size_t)th_volume(n, b->sshape) * sizeof(float));
  cr_assert(b->q && b->scales);
  rsi_err err = {0};
  cr_assert_eq(rsi_quantize_blocks(b->dtype, n, b->shape, dense, b->q,
                                   b->scales, b->b0, b->b1, b->ue8m0, &err),
               RS_OK, "%s", err.msg);
  free(dense);
}

static void btensor_free(btensor *b) {
  free(b->store.mem);
  free(b->q);
  free(b->scales);
}

/* A QUANTIZE (scales false) or SCALES copy of a random box of b (of its
 * values or of its scales) and its reference. */
/* A QUANTIZE (or SCALES) copy of a random box of b's values (or scales)
 * and a random range of it; with `twin`, the SCALES copy of exactly the
 * blocks that QUANTIZE copy twin touches, whole ranges both (the pair the
 * builder folds into one piece); `whole`: the whole range of the box. */
static void block_case_make(rng *r, ccase *t, const btensor *b, bool scales,
                            bool whole, const ccase *twin) {
  memset(t, 0, sizeof *t);
  rsi_copy *c = &t->c;
  int n = b->ndim, size = rsi_conv_size(b->dtype);
  const int64_t *shape = scales ? b->sshape : b->shape;
  int64_t off[4] = {0};
  c->ndim = n;
  for (int d = 0; d < n; d++) {
    off[d] = rrange(r, 0, shape[d] - 1);
    c->extent[d] = rrange(r, 1, shape[d] - off[d]);
    if (rrange(r, 0, 3) == 0) { /* the whole dim */
      off[d] = 0;
      c->extent[d] = shape[d];
    }
  }
  if (twin) {
    memcpy(off, twin->off, sizeof off);
    for (int d = 0; d < n; d++) c->extent[d] = twin->c.extent[d];
    for (int d = n >= 2 ? n - 2 : 0; d < n; d++) {
      int64_t blk = d == n - 1 ? b->b1 : b->b0;
      off[d] = twin->off[d] / blk;
      c->extent[d] = (twin->off[d] + twin->c.extent[d] - 1) / blk - off[d] + 1;
    }
  }
  bool friendly = b->friendly && !scales && rrange(r, 0, 3) != 0;
  if (friendly) { /* columns from and of multiples of 8 */
    off[n - 1] = off[n - 1] / 8 * 8;
    c->extent[n - 1] = (c->extent[n - 1] + 7) / 8 * 8;
    if (off[n - 1] + c->extent[n - 1] > shape[n - 1])
      c->extent[n - 1] = shape[n - 1] - off[n - 1];
  }
  memcpy(t->off, off, sizeof off);
  int64_t vol = th_volume(n, c->extent);
  c->lo = rrange(r, 0, 2) == 0 ? 0 : rrange(r, 0, vol - 1);
  c->hi = rrange(r, 0, 2) == 0 ? vol : rrange(r, c->lo + 1, vol);
  if (friendly) {
    c->lo = c->lo / 8 * 8;
    c->hi = c->hi / 8 * 8 > c->lo ? c->hi / 8 * 8 : c->hi;
  }
  if (twin || whole) {
    c->lo = 0;
    c->hi = vol;
  }
  c->op = scales ? RSI_COPY_SCALES : RSI_COPY_QUANTIZE;
  c->src_dtype = b->dtype;
  c->dst_dtype = scales ? RS_DTYPE_F32 : RS_DTYPE_F8_E4M3;
  c->blocks.rows = n >= 2 ? b->shape[n - 2] : 1;
  c->blocks.cols = b->shape[n - 1];
  c->blocks.b0 = b->b0;
  c->blocks.b1 = b->b1;
  c->blocks.row0 = n >= 2 ? off[n - 2] : 0;
  c->blocks.col0 = off[n - 1];
  c->blocks.ue8m0 = b->ue8m0;
  int64_t at = 0;
  for (int d = 0; d < n; d++) {
    int64_t unit = !scales || d + 2 < n ? 1 : d == n - 1 ? b->b1 : b->b0;
    at += off[d] * unit * b->strides[d];
    c->src_strides[d] = b->strides[d];
  }
  c->src = (const char *)b->store.base + at * size;
  int ds = scales ? 4 : 1;
  make_dst(r, t, ds, friendly || (b->friendly && rrange(r, 0, 1)));

  int64_t dense_shape[4], idx[RS_MAX_DIMS] = {0}, lin = 0;
  th_dense_strides(n, shape, dense_shape);
  do {
    if (lin >= c->lo && lin < c->hi) {
      int64_t g = 0;
      for (int d = 0; d < n; d++) g += (off[d] + idx[d]) * dense_shape[d];
      const void *want = scales ? (const void *)&b->scales[g]
                                : (const void *)&b->q[g];
      memcpy(t->ref.base +
                 side_at(c, c->dense_dst, c->dst_strides, idx, lin) * ds,
             want, (size_t)ds);
    }
    lin++;
  } while (th_next(n, c->extent, idx));
}

/* What the conversion cases exercised. */
static struct {
  int64_t cast_pieces, cast_wide, blocks, blocks_wide, split, chunked_cols;
  int64_t folded;
} cseen;

/* Structural checks: cast units aligned on both sides (in bytes), block
 * pieces split first, jobs counted right. */
static void check_conv(const rsi_pieces *t, const char *where) {
  const rsi_conv_tables *c = t->conv;
  if (!c) return;
  check_table(&c->cast, where); /* units are aligned element indices */
  for (int64_t i = 0; i < c->cast.n; i++) {
    const rsi_piece *p = &c->cast.v[i];
    int s = rsi_conv_size(RSI_CAST_SRC(p->cast));
    int d = rsi_conv_size(RSI_CAST_DST(p->cast));
    cr_assert(p->cast != 0, "%s", where);
    cr_assert(p->unit == 1 || p->unit == 16 / (s > d ? s : d), "%s: unit %d",
              where, p->unit);
    cseen.cast_pieces++;
    cseen.cast_wide += p->unit > 1;
  }
  int64_t jobs = 0;
  for (int64_t i = 0; i < c->nblk; i++) {
    const rsi_bpiece *p = &c->blk[i];
    cr_assert_eq(p->first_job, jobs, "%s", where);
    cr_assert_gt(p->jobs, 0, "%s", where);
    cr_assert_eq(p->split != 0, i < c->nsplit, "%s: split pieces first",
                 where);
    jobs += p->jobs;
    if (i + 1 == c->nsplit) cr_assert_eq(jobs, c->split_jobs, "%s", where);
    cseen.blocks++;
    cseen.blocks_wide += p->unit > 1;
    cseen.split += p->split != 0;
    cseen.chunked_cols += p->col_chunks > 1;
    cseen.folded += p->scales != 0;
  }
  cr_assert_eq(jobs, c->jobs, "%s", where);
}

static void run_conv(const rsi_copy *copies, int n, int64_t job_units,
                     int threads, const char *where) {
  rsi_pieces tab = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_pieces_build(copies, n, &tab, &err), RS_OK, "%s: %s",
               where, err.msg);
  cr_assert_eq(rsi_convert_build_cut(copies, n, &tab, job_units, &err), RS_OK,
               "%s: %s", where, err.msg);
  check_conv(&tab, where);
  rsi_pieces_run_host(tab.v, tab.n, tab.items, threads);
  cr_assert_eq(rsi_convert_run_host(&tab, threads, &err), RS_OK, "%s", where);
  rsi_pieces_free(&tab);
}

static void log_cseen(const char *what) {
  cr_log_info("%s: %" PRId64 " cast pieces (%" PRId64 " with wide units), %"
              PRId64 " block pieces (%" PRId64 " with wide units, %" PRId64
              " split, %" PRId64 " cut across rows, %" PRId64
              " with their scales folded in)",
              what, cseen.cast_pieces, cseen.cast_wide, cseen.blocks,
              cseen.blocks_wide, cseen.split, cseen.chunked_cols,
              cseen.folded);
}

static const int64_t JOB_UNITS[] = {RSI_BLOCK_JOB_UNITS, 1, 2, 3, 7, 16, 64,
                                    RSI_BLOCK_JOB_UNITS};

Test(pieces_convert, random_casts) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 3000; i++) {
    rng r = {th_mix(seed ^ 0xCA57ull ^ th_mix((uint64_t)i * TH_GOLDEN))};
    char where[96];
    snprintf(where, sizeof where, "seed=%#" PRIx64 " cast=%d", seed, i);
    ccase t;
    cast_case_make(&r, &t, (int)rrange(&r, 1, 6),
                   rrange(&r, 0, 9) == 0 ? 100000 : 4096);
    run_conv(&t.c, 1, RSI_BLOCK_JOB_UNITS,
             THREADS[rrange(&r, 0, sizeof THREADS / sizeof *THREADS - 1)],
             where);
    ccase_check(&t, where);
    ccase_free(&t);
  }
  log_cseen("casts");
}

static void block_cases(uint64_t salt, int count, bool big) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < count; i++) {
    rng r = {th_mix(seed ^ salt ^ th_mix((uint64_t)i * TH_GOLDEN))};
    char where[96];
    snprintf(where, sizeof where, "seed=%#" PRIx64 " %s=%d", seed,
             big ? "big" : "block", i);
    btensor b;
    btensor_make(&r, &b, big);
    ccase t[2];
    bool twins = rrange(&r, 0, 2) == 0;
    block_case_make(&r, &t[0], &b, false, twins, NULL);
    block_case_make(&r, &t[1], &b, true, false, twins ? &t[0] : NULL);
    rsi_copy copies[2] = {t[0].c, t[1].c};
    int64_t units = big ? RSI_BLOCK_JOB_UNITS
                        : JOB_UNITS[rrange(&r, 0, sizeof JOB_UNITS /
                                                      sizeof *JOB_UNITS - 1)];
    run_conv(copies, 2, units,
             THREADS[rrange(&r, 0, sizeof THREADS / sizeof *THREADS - 1)],
             where);
    ccase_check(&t[0], where);
    ccase_check(&t[1], where);
    ccase_free(&t[0]);
    ccase_free(&t[1]);
    btensor_free(&b);
  }
}

Test(pieces_convert, random_quantize_and_scales) {
  block_cases(0xB10Cull, 2500, false);
  log_cseen("blocks");
  cr_assert_gt(cseen.folded, 100, "SCALES copies folded into QUANTIZE: %"
               PRId64, cseen.folded);
}

/* 128 x 128 blocks, and one block a matrix: split at the real cap. */
Test(pieces_convert, large_blocks) {
  block_cases(0xB16ull, 40, true);
  log_cseen("large blocks");
}

/* Casts, quantizations, scales and plain copies in one batch. */
Test(pieces_convert, mixed_batch) {
  uint64_t seed = test_seed();
  for (int round = 0; round < 8; round++) {
    rng r = {th_mix(seed ^ 0x3173Dull ^ (uint64_t)round)};
    char where[96];
    snprintf(where, sizeof where, "seed=%#" PRIx64 " batch=%d", seed, round);
    enum { NCAST = 30, NTENSOR = 10, NPLAIN = 20 };
    ccase casts[NCAST], blocks[2 * NTENSOR];
    btensor tensors[NTENSOR];
    tcase plain[NPLAIN];
    rsi_copy copies[NCAST + 2 * NTENSOR + NPLAIN];
    int n = 0;
    for (int i = 0; i < NCAST; i++) {
      cast_case_make(&r, &casts[i], (int)rrange(&r, 1, 4), 3000);
      copies[n++] = casts[i].c;
    }
    for (int i = 0; i < NTENSOR; i++) {
      btensor_make(&r, &tensors[i], false);
      bool twins = rrange(&r, 0, 1) == 0;
      block_case_make(&r, &blocks[2 * i], &tensors[i], false, twins, NULL);
      block_case_make(&r, &blocks[2 * i + 1], &tensors[i], true, false,
                      twins ? &blocks[2 * i] : NULL);
      copies[n++] = blocks[2 * i].c;
      copies[n++] = blocks[2 * i + 1].c;
    }
    for (int i = 0; i < NPLAIN; i++) {
      tcase_make(&r, &plain[i], (int)rrange(&r, 1, 4), 3000);
      copies[n++] = plain[i].c;
    }
    /* shuffled: the tables do not depend on the order of ops */
    for (int i = n - 1; i > 0; i--) {
      int j = (int)rrange(&r, 0, i);
      rsi_copy c = copies[i];
      copies[i] = copies[j];
      copies[j] = c;
    }
    run_conv(copies, n, JOB_UNITS[round % 8], 256, where);
    for (int i = 0; i < NCAST; i++) {
      ccase_check(&casts[i], where);
      ccase_free(&casts[i]);
    }
    for (int i = 0; i < 2 * NTENSOR; i++) {
      ccase_check(&blocks[i], where);
      ccase_free(&blocks[i]);
    }
    for (int i = 0; i < NTENSOR; i++) btensor_free(&tensors[i]);
    for (int i = 0; i < NPLAIN; i++) {
      tcase_check(&plain[i], where);
      tcase_free(&plain[i]);
    }
  }
}

/* A row of 1024 contiguous elements, both sides `mis` elements past a
 * 64-byte boundary. */
static rsi_copy contiguous_cast(int src, int dst, int mis) {
  static unsigned char smem[8192] __attribute__((aligned(64)));
  static unsigned char dmem[8192] __attribute__((aligned(64)));
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.op = RSI_COPY_CAST;
  c.src_dtype = src;
  c.dst_dtype = dst;
  c.ndim = 1;
  c.extent[0] = 1024;
  c.src_strides[0] = c.dst_strides[0] = 1;
  c.src = (const char *)smem + mis * rsi_conv_size(src);
  c.dst = (char *)dmem + mis * rsi_conv_size(dst);
  c.hi = 1024;
  return c;
}

Test(pieces_convert, cast_units) {
  rsi_pieces t = {0};
  rsi_err err = {0};
  rsi_copy c = contiguous_cast(RS_DTYPE_BF16, RS_DTYPE_F32, 0);
  cr_assert_eq(rsi_pieces_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.items, 0, "a cast is no plain piece");
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->cast.n, 1);
  cr_assert_eq(t.conv->cast.v[0].unit, 4, "16 bytes of f32");
  cr_assert_eq(t.conv->cast.v[0].ncols, 256);
  cr_assert_eq(t.conv->cast.v[0].cast,
               RSI_CAST_CODE(RS_DTYPE_BF16, RS_DTYPE_F32));
  c = contiguous_cast(RS_DTYPE_BF16, RS_DTYPE_F16, 0);
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->cast.v[0].unit, 8);
  c = contiguous_cast(RS_DTYPE_F32, RS_DTYPE_BF16, 2); /* 8 bytes in */
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->cast.v[0].unit, 1);
  /* a cast to the same dtype is a plain copy of its bytes */
  c = contiguous_cast(RS_DTYPE_BF16, RS_DTYPE_BF16, 0);
  cr_assert_eq(rsi_pieces_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.n, 1);
  cr_assert_eq(t.v[0].unit, 16);
  cr_assert_eq(t.v[0].cast, 0);
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->cast.n, 0);
  rsi_pieces_free(&t);
  cr_assert_null(t.conv);
}

/* One 256 x 384 bf16 matrix, blocks of 128 x 128, quantized whole. */
Test(pieces_convert, block_units_and_jobs) {
  static uint16_t vals[256 * 384];
  static uint8_t out[256 * 384];
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.op = RSI_COPY_QUANTIZE;
  c.src_dtype = RS_DTYPE_BF16;
  c.dst_dtype = RS_DTYPE_F8_E4M3;
  c.ndim = 2;
  c.extent[0] = 256;
  c.extent[1] = 384;
  th_dense_strides(2, c.extent, c.src_strides);
  c.dense_dst = true;
  c.src = (const char *)vals;
  c.dst = (char *)out;
  c.hi = 256 * 384;
  c.blocks = (rsi_copy_blocks){256, 384, 128, 128, 0, 0, false};
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK, "%s", err.msg);
  cr_assert_eq(t.conv->nblk, 1);
  cr_assert_eq(t.conv->blk[0].unit, 8);
  cr_assert_eq(t.conv->blk[0].split, 0);
  cr_assert_eq(t.conv->jobs, 6, "a job a block");
  cr_assert_eq(t.conv->keys, 0);
  /* rows 100..199 only: block rows 0 and 1 */
  c.lo = 100 * 384;
  c.hi = 200 * 384;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->jobs, 6);
  c.hi = 120 * 384;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->jobs, 3);
  /* one block the whole matrix: 12288 units of 8, under the cap; of 1
   * (a source one element off) 98304, split into chunks of 42 rows */
  c.blocks.b0 = 256;
  c.blocks.b1 = 384;
  c.lo = 0;
  c.hi = 256 * 384;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->blk[0].split, 0);
  cr_assert_eq(t.conv->jobs, 1);
  c.src = (const char *)(vals + 1);
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->blk[0].unit, 1);
  cr_assert_eq(t.conv->blk[0].split, 1);
  cr_assert_eq(t.conv->blk[0].chunk_rows, RSI_BLOCK_JOB_UNITS / 384);
  cr_assert_eq(t.conv->jobs, (256 + 41) / 42);
  cr_assert_eq(t.conv->split_jobs, t.conv->jobs);
  cr_assert_eq(t.conv->keys, 1);
  rsi_pieces_free(&t);
}

Test(pieces_convert, bad_copies) {
  static float mem[4096];
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.op = RSI_COPY_CAST;
  c.src_dtype = RS_DTYPE_F32;
  c.dst_dtype = RS_DTYPE_BF16;
  c.ndim = 1;
  c.extent[0] = 16;
  c.src_strides[0] = c.dst_strides[0] = 1;
  c.src = (const char *)mem + 2; /* not on an f32 */
  c.dst = (char *)(mem + 1024);
  c.hi = 16;
  rsi_pieces t = {0};
  rsi_err err = {0};
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(t.conv->cast.n, 0, "left empty");
  c.src = (const char *)mem;
  c.dst_dtype = RS_DTYPE_I32;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_UNSUPPORTED);
  c.dst_dtype = RS_DTYPE_I32;
  c.src_dtype = RS_DTYPE_I32;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_UNSUPPORTED);

  c.op = RSI_COPY_QUANTIZE;
  c.src_dtype = RS_DTYPE_F32;
  c.dst_dtype = RS_DTYPE_F32;
  c.blocks = (rsi_copy_blocks){1, 16, 1, 8, 0, 0, false};
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_UNSUPPORTED);
  c.dst_dtype = RS_DTYPE_F8_E4M3;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  c.blocks.col0 = 1; /* the box past the tensor */
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_INVALID_ARGUMENT);
  c.blocks.col0 = 0;
  c.blocks.b1 = 0;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_INVALID_ARGUMENT);
  c.blocks.b1 = 8;
  c.dense_src = true;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_INVALID_ARGUMENT);
  c.dense_src = false;
  c.op = RSI_COPY_SCALES;
  c.dst_dtype = RS_DTYPE_F32;
  c.extent[0] = 3; /* 16 values hold 2 blocks */
  c.hi = 3;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_ERR_INVALID_ARGUMENT);
  c.extent[0] = 2;
  c.hi = 2;
  cr_assert_eq(rsi_convert_build(&c, 1, &t, &err), RS_OK);
  cr_assert_eq(t.conv->jobs, 2);
  rsi_pieces_free(&t);
}

/* The kernels' quotient (rsi_quant_elem: a value whose quotient is below
 * 2^-10 becomes a signed zero without dividing) against the rule itself,
 * x / scale rounded and saturated, on the edge of the cut (scale x 2^-10
 * and its neighbours), zeros, infinities, NaN and random patterns, for
 * scales from subnormal to infinite. */
Test(pieces_convert, quotient_cut_short_is_the_rule) {
  uint64_t seed = test_seed();
  rng r = {th_mix(seed ^ 0x71D7ull)};
  const uint32_t special_scales[] = {
      0x00000001u, 0x00400000u, 0x00800000u, 0x0d800000u, 0x0d7fffffu,
      0x0d800001u, 0x1a000000u, 0x3b124925u, 0x3f800000u, 0x7e800000u,
      0x7f7fffffu, 0x7f800000u, 0x7fc00000u};
  int64_t checked = 0, cut = 0;
  for (int si = 0; si < 4000; si++) {
    uint32_t su = si < (int)(sizeof special_scales / sizeof *special_scales)
                      ? special_scales[si]
                      : (uint32_t)rnext(&r) & 0x7fffffffu;
    float scale = rsi_bits_f32(su);
    rsi_qscale q = rsi_qscale_of(scale);
    float edge = scale * 0x1p-10f;
    uint32_t eu = rsi_f32_bits(edge);
    uint32_t xs[64];
    int n = 0;
    const uint32_t fixed[] = {0u,          0x80000000u, 0x7f800000u,
                              0xff800000u, 0x7fc00000u, 0x00000001u};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) xs[n++] = fixed[i];
    for (int d = -2; d <= 2; d++) {
      xs[n++] = eu + (uint32_t)d;
      xs[n++] = (eu + (uint32_t)d) | 0x80000000u;
    }
    while (n < 64) xs[n++] = (uint32_t)rnext(&r);
    for (int i = 0; i < n; i++) {
      float x = rsi_bits_f32(xs[i]);
      uint32_t got = rsi_quant_elem(x, &q);
      uint32_t want = rsi_e4m3_quantize(x, scale);
      if (!q.mul && rsi_bits_f32(xs[i] & 0x7fffffffu) < q.tiny) cut++;
      cr_assert_eq(got, want,
                   "seed=%#" PRIx64 " scale %#010x x %#010x: %#04x, the rule "
                   "%#04x",
                   seed, su, xs[i], got, want);
      checked++;
    }
  }
  cr_assert_gt(cut, checked / 20, "the cut was taken %" PRId64 " times of %"
               PRId64, cut, checked);
}
