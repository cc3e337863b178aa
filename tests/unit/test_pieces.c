/* The CUDA copy engine's piece table (core/transport/nccl/pieces.h), run
 * through its CPU emulation: random strided boxes (rank 1..6, some up to
 * 16), element sizes 1..16, random sub-ranges, padded and permuted
 * strides, inner dims that are not contiguous, misaligned bases, dense
 * sides, copied into a poisoned destination and compared byte for byte
 * with core/copy.c's rsi_copy_range into another; batches of many copies
 * with the item -> piece search checked over the whole item range; unit
 * selection; empty ranges.
 *
 * Replay: RESHARD_SEED=<seed> (default fixed); every failure names the
 * seed and the case. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "copy.h"
#include "rt_util.h"
#include "transport/nccl/pieces.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x91ECE5ull

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) { return rt_rand(&r->s); }

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
  int64_t vol = rt_volume(ndim, c->extent);
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
  if (rrange(r, 0, 3) == 0) rt_dense_strides(ndim, c->extent, c->dst_strides);
  if (rrange(r, 0, 3) == 0) rt_dense_strides(ndim, c->extent, c->src_strides);

  size_t es = (size_t)c->esize;
  int64_t dense_bytes = (c->hi - c->lo) * c->esize;
  int64_t dbytes = c->dense_dst ? dense_bytes
                                : rt_span_bytes(ndim, c->extent,
                                                c->dst_strides, es);
  int64_t sbytes = c->dense_src ? dense_bytes
                                : rt_span_bytes(ndim, c->extent,
                                                c->src_strides, es);
  int dmis = rrange(r, 0, 1) == 0 ? 0 : (int)rrange(r, 0, 15);
  int smis = rrange(r, 0, 1) == 0 ? 0 : (int)rrange(r, 0, 15);
  tbuf_make(&t->src, (size_t)sbytes, smis, 0);
  for (size_t i = 0; i < t->src.total; i++) { /* never a poison byte */
    unsigned char v = (unsigned char)rnext(r);
    t->src.mem[i] = v == RT_POISON ? RT_NOT_POISON : v;
  }
  tbuf_make(&t->ref, (size_t)dbytes, dmis, RT_POISON);
  tbuf_make(&t->got, (size_t)dbytes, dmis, RT_POISON);
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
  for (size_t i = 0; i < len; i++) written += ref[i] != RT_POISON;
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
  rng r = {rt_mix(seed ^ rt_mix((uint64_t)index * RT_GOLDEN))};
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
    run_one(seed, i, 1 + (int)(rt_mix(seed + (uint64_t)i) % 6), 4096);
  log_seen("small boxes");
}

/* Rows longer than an item (chunked) and many rows per item. */
Test(pieces, random_boxes_large) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 300; i++)
    run_one(seed, 100000 + i, 1 + (int)(rt_mix(seed + (uint64_t)i) % 4),
            300000);
  log_seen("large boxes");
}

Test(pieces, random_boxes_high_rank) {
  uint64_t seed = test_seed();
  cr_log_info("seed=%#" PRIx64, seed);
  for (int i = 0; i < 400; i++)
    run_one(seed, 200000 + i, 7 + (int)(rt_mix(seed + (uint64_t)i) % 10),
            20000);
  log_seen("high-rank boxes");
}

Test(pieces, batch_of_many_copies) {
  uint64_t seed = test_seed();
  for (int round = 0; round < 6; round++) {
    rng r = {rt_mix(seed ^ 0xBA7C4ull ^ (uint64_t)round)};
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
  rt_dense_strides(2, c.extent, c.dst_strides);
  rt_dense_strides(2, c.extent, c.src_strides);
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
