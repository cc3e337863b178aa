/* SPDX-License-Identifier: Apache-2.0 */
/* The host copy engine's converting copies (engine.h: RSI_COPY_CAST,
 * RSI_COPY_QUANTIZE, RSI_COPY_SCALES), driven directly with rsi_copy
 * batches. Casts of every pair of f32, bf16 and f16, strided and dense
 * both ways, odd strides and padding, against rsi_convert_cast_fn element
 * by element; block quantization and block scales of sub-boxes of 1-D,
 * 2-D and 3-D tensors (blocks reaching outside the box, edge blocks, a
 * NaN block, both scale rules, rows wider than a band of blocks) bit for
 * bit against rsi_quantize_blocks over the whole tensor. Every
 * destination starts poisoned: an element the engine did not write fails
 * its comparison, a byte it should not have written fails the poison
 * check. */
#include <criterion/criterion.h>

#include "copy/convert.h"
#include "copy/convert_elem.h"
#include "base/dtype.h"
#include "copy/engine.h"
#include "th_util.h"

#define SEED 0xC0B7C0DEull
#define SLACK 64 /* poisoned bytes past every destination */

static const rs_dtype FLOATS[3] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};

static char *poisoned(int64_t bytes) {
  char *p = malloc((size_t)bytes + SLACK);
  cr_assert(p);
  memset(p, TH_POISON, (size_t)bytes + SLACK);
  return p;
}

/* Elements a strided box spans from its element 0. */
static int64_t span(int nd, const int64_t *ext, const int64_t *strides) {
  int64_t last = 0;
  for (int d = 0; d < nd; d++) last += (ext[d] - 1) * strides[d];
  return last + 1;
}

static int64_t dot(int nd, const int64_t *idx, const int64_t *strides) {
  int64_t o = 0;
  for (int d = 0; d < nd; d++) o += idx[d] * strides[d];
  return o;
}

static void run(const rsi_copy *c, int64_t n) {
  rsi_engine *e = rsi_host_engine();
  rsi_err err = {0};
  rs_status st = e->ops->copy(e, c, n, NULL, &err);
  cr_assert_eq(st, RS_OK, "copy failed: %s", err.msg);
}

/* Every byte of dst [0, bytes + SLACK) not marked written is poison. */
static void check_poison(const char *dst, const bool *written, int64_t bytes,
                         const char *what) {
  for (int64_t i = 0; i < bytes + SLACK; i++)
    if (i >= bytes || !written[i])
      cr_assert_eq((uint8_t)dst[i], TH_POISON,
                   "%s: byte %lld outside the copy was written", what,
                   (long long)i);
}

/* ---- casts -------------------------------------------------------------- */

/* A 3-D box cast from sd to dd; each side strided, or dense where its
 * strides are NULL; elements [lo_cut, volume - hi_cut). */
static void cast_case(rs_dtype sd, rs_dtype dd, const int64_t *sstr,
                      const int64_t *dstr, int64_t lo_cut, int64_t hi_cut,
                      uint64_t *seed) {
  enum { ND = 3 };
  const int64_t ext[ND] = {3, 5, 7};
  int64_t vol = th_volume(ND, ext), lo = lo_cut, hi = vol - hi_cut;
  int64_t ss = (int64_t)rsi_dtype_size(sd), ds = (int64_t)rsi_dtype_size(dd);
  int64_t sbytes = (sstr ? span(ND, ext, sstr) : hi - lo) * ss;
  int64_t dbytes = (dstr ? span(ND, ext, dstr) : hi - lo) * ds;
  char *src = malloc((size_t)sbytes);
  for (int64_t i = 0; i < sbytes; i++) src[i] = (char)th_rand(seed);
  char *dst = poisoned(dbytes);
  bool *written = calloc((size_t)dbytes, 1);
  rsi_copy c = {.ndim = ND, .esize = (int)ss, .op = RSI_COPY_CAST,
                .src_dtype = sd, .dst_dtype = dd, .dense_dst = !dstr,
                .dense_src = !sstr, .dst = dst, .src = src, .lo = lo,
                .hi = hi};
  memcpy(c.extent, ext, sizeof ext);
  if (sstr) memcpy(c.src_strides, sstr, ND * sizeof *sstr);
  if (dstr) memcpy(c.dst_strides, dstr, ND * sizeof *dstr);
  run(&c, 1);
  rsi_cast_fn fn = rsi_convert_cast_fn(dd, sd);
  int64_t idx[ND] = {0};
  for (int64_t k = 0; k < vol; k++, th_next(ND, ext, idx)) {
    if (k < lo || k >= hi) continue;
    const char *s = src + (sstr ? dot(ND, idx, sstr) : k - lo) * ss;
    int64_t at = (dstr ? dot(ND, idx, dstr) : k - lo) * ds;
    char want[4];
    fn(want, s, 1);
    cr_assert(!memcmp(dst + at, want, (size_t)ds),
              "cast %s -> %s, element %lld: wrong", rsi_dtype_name(sd),
              rsi_dtype_name(dd), (long long)k);
    memset(written + at, 1, (size_t)ds);
  }
  check_poison(dst, written, dbytes, "cast");
  free(src);
  free(dst);
  free(written);
}

Test(copy_cast, every_pair_strided_and_dense) {
  uint64_t seed = SEED;
  const int64_t padded[3] = {71, 11, 1};   /* contiguous rows, padding */
  const int64_t stepped[3] = {123, 17, 2}; /* every other element */
  const int64_t odd[3] = {1, 3, 17};       /* columns first, stride 17 */
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      if (a == b) continue;
      rs_dtype sd = FLOATS[a], dd = FLOATS[b];
      cast_case(sd, dd, padded, NULL, 0, 0, &seed);
      cast_case(sd, dd, NULL, padded, 0, 0, &seed);
      cast_case(sd, dd, stepped, NULL, 4, 3, &seed);
      cast_case(sd, dd, NULL, stepped, 9, 1, &seed);
      cast_case(sd, dd, odd, padded, 2, 5, &seed);
      cast_case(sd, dd, padded, odd, 0, 0, &seed);
      cast_case(sd, dd, stepped, stepped, 17, 0, &seed);
    }
}

/* ---- block-scaled tensors ----------------------------------------------- */

/* A tensor of values held in strided memory (the whole tensor, padded),
 * and the reference: rsi_quantize_blocks over its dense copy. */
typedef struct tensor {
  rs_dtype dt;
  int nd;
  int64_t shape[3], strides[3], b0, b1;
  bool ue8m0;
  int64_t esize, vol, grid[3], nscales;
  char *mem;      /* the values, strided */
  uint8_t *ref_q; /* dense */
  float *ref_s;   /* dense over the grid of blocks */
} tensor;

/* f stored in one of three dtypes. */
static void put_value(rs_dtype dt, char *at, float f) {
  if (dt == RS_DTYPE_F32) {
    memcpy(at, &f, 4);
  } else {
    uint16_t h = dt == RS_DTYPE_BF16 ? rsi_f32_to_bf16(f) : rsi_f32_to_f16(f);
    memcpy(at, &h, 2);
  }
}

/* col_major: the last two dims' strides swapped in order (columns apart
 * in memory); nan_at: the element (dense index) made NaN, or -1. */
static tensor make_tensor(rs_dtype dt, int nd, const int64_t *shape,
                          int64_t b0, int64_t b1, bool ue8m0, bool col_major,
                          int64_t nan_at, uint64_t *seed) {
  tensor t = {.dt = dt, .nd = nd, .b0 = b0, .b1 = b1, .ue8m0 = ue8m0};
  memcpy(t.shape, shape, (size_t)nd * sizeof *shape);
  t.esize = (int64_t)rsi_dtype_size(dt);
  t.vol = th_volume(nd, shape);
  /* padded strides: 3 spare elements after a row, 1 after a matrix */
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.strides[d] = s;
    s = s * shape[d] + (d == nd - 1 ? 3 : 1);
  }
  if (col_major && nd >= 2) {
    int64_t r = shape[nd - 2], c = shape[nd - 1];
    t.strides[nd - 2] = 1;
    t.strides[nd - 1] = r + 5;
    for (int d = nd - 3; d >= 0; d--)
      t.strides[d] =
          (d == nd - 3 ? (r + 5) * c : t.strides[d + 1] * shape[d + 1]) + 1;
  }
  int64_t bytes = span(nd, shape, t.strides) * t.esize;
  t.mem = poisoned(bytes);
  char *dense = malloc((size_t)(t.vol * t.esize));
  int64_t idx[3] = {0};
  for (int64_t k = 0; k < t.vol; k++, th_next(nd, shape, idx)) {
    int64_t row = nd >= 2 ? idx[nd - 2] : 0, col = idx[nd - 1];
    /* each block about 2^e, e from -11 to 11 */
    int e = (int)((row / b0 * 7 + col / b1 * 3 + (nd > 2 ? idx[0] : 0)) % 23) -
            11;
    float f = (float)((int64_t)(th_rand(seed) % 2001) - 1000) / 1000.0f *
              rsi_bits_f32((uint32_t)(127 + e) << 23);
    if (k == nan_at) f = rsi_bits_f32(0x7fc00000u);
    put_value(dt, dense + k * t.esize, f);
    memcpy(t.mem + dot(nd, idx, t.strides) * t.esize, dense + k * t.esize,
           (size_t)t.esize);
  }
  int64_t rows = nd >= 2 ? shape[nd - 2] : 1, cols = shape[nd - 1];
  for (int d = 0; d < nd; d++) t.grid[d] = shape[d];
  if (nd >= 2) t.grid[nd - 2] = (rows + b0 - 1) / b0;
  t.grid[nd - 1] = (cols + b1 - 1) / b1;
  t.nscales = th_volume(nd, t.grid);
  t.ref_q = malloc((size_t)t.vol);
  t.ref_s = malloc((size_t)t.nscales * sizeof *t.ref_s);
  rsi_err err = {0};
  cr_assert_eq(rsi_quantize_blocks(dt, nd, shape, dense, t.ref_q, t.ref_s, b0,
                                   b1, ue8m0, &err),
               RS_OK, "%s", err.msg);
  free(dense);
  return t;
}

static void free_tensor(tensor *t) {
  free(t->mem);
  free(t->ref_q);
  free(t->ref_s);
}

/* The destination of a copy of a box of ext: dense from element lo, or
 * strided memory with padding (inner step `step`). */
typedef struct dest {
  bool dense;
  int64_t strides[3], bytes;
  char *mem;
  bool *written;
} dest;

static dest make_dest(int nd, const int64_t *ext, int64_t esize, bool dense,
                      int64_t step, int64_t lo, int64_t hi) {
  dest d = {.dense = dense};
  if (dense) {
    d.bytes = (hi - lo) * esize;
  } else {
    int64_t s = step;
    for (int k = nd - 1; k >= 0; k--) {
      d.strides[k] = s;
      s = s * ext[k] + 2;
    }
    d.bytes = span(nd, ext, d.strides) * esize;
  }
  d.mem = poisoned(d.bytes);
  d.written = calloc((size_t)d.bytes + 1, 1);
  return d;
}

static int64_t dest_at(const dest *d, int nd, const int64_t *idx, int64_t k,
                       int64_t lo, int64_t esize) {
  return (d->dense ? k - lo : dot(nd, idx, d->strides)) * esize;
}

static rsi_copy_blocks blocks(const tensor *t, const int64_t *off) {
  int nd = t->nd;
  return (rsi_copy_blocks){nd >= 2 ? t->shape[nd - 2] : 1, t->shape[nd - 1],
                           t->b0, t->b1, nd >= 2 ? off[nd - 2] : 0,
                           off[nd - 1], t->ue8m0};
}

/* One box of a test: offset and extent, the range cut at both ends, how
 * the destination is laid out. */
typedef struct box_case {
  int64_t off[3], ext[3];
  int64_t lo_cut, hi_cut;
  bool dense;
  int64_t step;
} box_case;

/* Quantize box b of t through the engine; compare with the reference. */
static void quantize_box(const tensor *t, const box_case *b) {
  int nd = t->nd;
  int64_t vol = th_volume(nd, b->ext), lo = b->lo_cut, hi = vol - b->hi_cut;
  dest d = make_dest(nd, b->ext, 1, b->dense, b->step, lo, hi);
  rsi_copy c = {.ndim = nd, .esize = (int)t->esize, .op = RSI_COPY_QUANTIZE,
                .src_dtype = t->dt, .dst_dtype = RS_DTYPE_F8_E4M3,
                .blocks = blocks(t, b->off), .dense_dst = b->dense,
                .dst = d.mem,
                .src = t->mem + dot(nd, b->off, t->strides) * t->esize,
                .lo = lo, .hi = hi};
  memcpy(c.extent, b->ext, (size_t)nd * sizeof *b->ext);
  memcpy(c.src_strides, t->strides, (size_t)nd * sizeof *t->strides);
  memcpy(c.dst_strides, d.strides, (size_t)nd * sizeof *d.strides);
  run(&c, 1);
  int64_t idx[3] = {0}, g[3], dense_str[3];
  th_dense_strides(nd, t->shape, dense_str);
  for (int64_t k = 0; k < vol; k++, th_next(nd, b->ext, idx)) {
    if (k < lo || k >= hi) continue;
    for (int q = 0; q < nd; q++) g[q] = b->off[q] + idx[q];
    int64_t at = dest_at(&d, nd, idx, k, lo, 1);
    uint8_t want = t->ref_q[dot(nd, g, dense_str)];
    cr_assert_eq((uint8_t)d.mem[at], want,
                 "quantize %s %dD: element %lld of the box: 0x%02x, want "
                 "0x%02x",
                 rsi_dtype_name(t->dt), nd, (long long)k,
                 (uint8_t)d.mem[at], want);
    d.written[at] = true;
  }
  check_poison(d.mem, d.written, d.bytes, "quantize");
  free(d.mem);
  free(d.written);
}

/* The scales of box b of t's grid of blocks through the engine. */
static void scales_box(const tensor *t, const box_case *b) {
  int nd = t->nd;
  int64_t vol = th_volume(nd, b->ext), lo = b->lo_cut, hi = vol - b->hi_cut;
  dest d = make_dest(nd, b->ext, 4, b->dense, b->step, lo, hi);
  int64_t first[3]; /* the values' element of the box's first block */
  memcpy(first, b->off, sizeof first);
  if (nd >= 2) first[nd - 2] *= t->b0;
  first[nd - 1] *= t->b1;
  rsi_copy c = {.ndim = nd, .esize = 4, .op = RSI_COPY_SCALES,
                .src_dtype = t->dt, .dst_dtype = RS_DTYPE_F32,
                .blocks = blocks(t, b->off), .dense_dst = b->dense,
                .dst = d.mem,
                .src = t->mem + dot(nd, first, t->strides) * t->esize,
                .lo = lo, .hi = hi};
  memcpy(c.extent, b->ext, (size_t)nd * sizeof *b->ext);
  memcpy(c.src_strides, t->strides, (size_t)nd * sizeof *t->strides);
  memcpy(c.dst_strides, d.strides, (size_t)nd * sizeof *d.strides);
  run(&c, 1);
  int64_t idx[3] = {0}, g[3], grid_str[3];
  th_dense_strides(nd, t->grid, grid_str);
  for (int64_t k = 0; k < vol; k++, th_next(nd, b->ext, idx)) {
    if (k < lo || k >= hi) continue;
    for (int q = 0; q < nd; q++) g[q] = b->off[q] + idx[q];
    int64_t at = dest_at(&d, nd, idx, k, lo, 4);
    uint32_t got, want;
    memcpy(&got, d.mem + at, 4);
    memcpy(&want, &t->ref_s[dot(nd, g, grid_str)], 4);
    cr_assert_eq(got, want,
                 "scales %s %dD: block %lld of the box: 0x%08x, want 0x%08x",
                 rsi_dtype_name(t->dt), nd, (long long)k, got, want);
    memset(d.written + at, 1, 4);
  }
  check_poison(d.mem, d.written, d.bytes, "scales");
  free(d.mem);
  free(d.written);
}

/* Boxes of a 37 x 45 tensor in blocks of 8 x 16 (edge blocks 5 rows,
 * 13 columns). */
static const box_case BOXES_2D[] = {
    {{5, 7}, {20, 30}, 3, 2, true, 1},    /* inside, blocks reach out */
    {{5, 7}, {20, 30}, 0, 0, false, 1},   /* strided fp8 */
    {{30, 40}, {7, 5}, 0, 0, false, 2},   /* the corner: edge blocks */
    {{0, 0}, {37, 45}, 11, 13, true, 1},  /* all of it, a range */
    {{9, 17}, {1, 1}, 0, 0, true, 1},     /* one element */
    {{16, 0}, {8, 45}, 0, 0, false, 3},   /* one block row, stepped dst */
};

static const box_case SCALE_BOXES_2D[] = { /* grid 5 x 3 */
    {{1, 1}, {4, 2}, 0, 0, true, 1},
    {{0, 0}, {5, 3}, 2, 1, false, 1},
    {{4, 2}, {1, 1}, 0, 0, false, 2},
    {{2, 0}, {2, 3}, 1, 0, false, 3},
};

/* 3 x 21 x 19 in blocks of 4 x 8 (grid 3 x 6 x 3). */
static const box_case BOXES_3D[] = {
    {{1, 3, 5}, {2, 10, 11}, 5, 4, true, 1},
    {{0, 17, 12}, {3, 4, 7}, 0, 0, false, 1},
    {{2, 0, 0}, {1, 21, 19}, 0, 0, false, 2},
};
static const box_case SCALE_BOXES_3D[] = {
    {{1, 2, 1}, {2, 3, 2}, 0, 0, true, 1},
    {{0, 5, 2}, {3, 1, 1}, 0, 0, false, 1},
    {{0, 0, 0}, {3, 6, 3}, 7, 6, true, 1},
};

/* 100 in blocks of 16 (grid 7). */
static const box_case BOXES_1D[] = {
    {{13}, {50}, 2, 3, true, 1},
    {{90}, {10}, 0, 0, false, 1},
    {{0}, {100}, 0, 0, false, 3},
};
static const box_case SCALE_BOXES_1D[] = {
    {{2}, {5}, 0, 0, true, 1},
    {{0}, {7}, 1, 1, false, 2},
};

#define N(a) (int)(sizeof(a) / sizeof *(a))

static void all_boxes(const tensor *t, const box_case *q, int nq,
                      const box_case *s, int ns) {
  for (int i = 0; i < nq; i++) quantize_box(t, &q[i]);
  for (int i = 0; i < ns; i++) scales_box(t, &s[i]);
}

Test(copy_blocks, two_dims) {
  uint64_t seed = SEED + 1;
  for (int k = 0; k < 3; k++)
    for (int rule = 0; rule < 2; rule++) {
      tensor t = make_tensor(FLOATS[k], 2, I64(37, 45), 8, 16, rule, false,
                             -1, &seed);
      all_boxes(&t, BOXES_2D, N(BOXES_2D), SCALE_BOXES_2D, N(SCALE_BOXES_2D));
      free_tensor(&t);
    }
}

/* Column strides other than one (the last two dims column-major), with
 * and without a NaN block. */
Test(copy_blocks, columns_apart_in_memory) {
  uint64_t seed = SEED + 2;
  for (int k = 0; k < 6; k++) {
    tensor t = make_tensor(FLOATS[k % 3], 2, I64(37, 45), 8, 16, k == 1, true,
                           k < 3 ? -1 : 10 * 45 + 20, &seed);
    all_boxes(&t, BOXES_2D, N(BOXES_2D), SCALE_BOXES_2D, N(SCALE_BOXES_2D));
    free_tensor(&t);
  }
}

Test(copy_blocks, three_dims) {
  uint64_t seed = SEED + 3;
  for (int k = 0; k < 3; k++)
    for (int rule = 0; rule < 2; rule++) {
      tensor t = make_tensor(FLOATS[k], 3, I64(3, 21, 19), 4, 8, rule,
                             rule == 1 && k == 2, -1, &seed);
      all_boxes(&t, BOXES_3D, N(BOXES_3D), SCALE_BOXES_3D, N(SCALE_BOXES_3D));
      free_tensor(&t);
    }
}

Test(copy_blocks, one_dim) {
  uint64_t seed = SEED + 4;
  for (int k = 0; k < 3; k++)
    for (int rule = 0; rule < 2; rule++) {
      tensor t = make_tensor(FLOATS[k], 1, I64(100), 4, 16, rule, false, -1,
                             &seed);
      all_boxes(&t, BOXES_1D, N(BOXES_1D), SCALE_BOXES_1D, N(SCALE_BOXES_1D));
      free_tensor(&t);
    }
}

/* A NaN in the block at rows 8..15, columns 16..31: that block is all NaN
 * with a NaN scale, its neighbours are not. */
Test(copy_blocks, nan_block) {
  uint64_t seed = SEED + 5;
  for (int k = 0; k < 3; k++) {
    tensor t = make_tensor(FLOATS[k], 2, I64(37, 45), 8, 16, false, false,
                           10 * 45 + 20, &seed);
    cr_assert(t.ref_s[1 * 3 + 1] != t.ref_s[1 * 3 + 1], "the reference");
    all_boxes(&t, BOXES_2D, N(BOXES_2D), SCALE_BOXES_2D, N(SCALE_BOXES_2D));
    free_tensor(&t);
  }
}

/* 9 x 1400 in blocks of 4 x 5 (grid 3 x 280): a block row of the box
 * is more blocks than a band takes, and a row longer than a run between
 * two slices of prefetching. */
static const box_case WIDE_BOXES[] = {
    {{1, 3}, {7, 1390}, 5, 7, true, 1},     /* parts of rows, dense */
    {{0, 0}, {9, 1400}, 0, 0, false, 1},    /* all of it, strided fp8 */
    {{2, 600}, {5, 800}, 100, 3, false, 2}, /* stepped dst */
};
static const box_case WIDE_SCALE_BOXES[] = {
    {{0, 0}, {3, 280}, 0, 0, true, 1},
    {{1, 7}, {2, 270}, 10, 20, false, 2},
};

Test(copy_blocks, wide_rows) {
  uint64_t seed = SEED + 7;
  for (int k = 0; k < 6; k++) {
    tensor t = make_tensor(FLOATS[k % 3], 2, I64(9, 1400), 4, 5, k == 2,
                           k >= 3, k == 4 ? 5 * 1400 + 700 : -1, &seed);
    all_boxes(&t, WIDE_BOXES, N(WIDE_BOXES), WIDE_SCALE_BOXES,
              N(WIDE_SCALE_BOXES));
    free_tensor(&t);
  }
}

/* Several ops in one batch, in order. */
Test(copy_engine, mixed_batch) {
  uint64_t seed = SEED + 6;
  tensor t = make_tensor(RS_DTYPE_BF16, 2, I64(37, 45), 8, 16, false, false,
                         -1, &seed);
  const box_case *b = &BOXES_2D[0];
  int64_t vol = th_volume(2, b->ext);
  uint8_t *q = (uint8_t *)poisoned(vol);
  float *s = (float *)poisoned(4 * 4);
  float *f = (float *)poisoned(vol * 4);
  uint16_t *p = (uint16_t *)poisoned(vol * 2);
  const char *src = t.mem + dot(2, b->off, t.strides) * 2;
  rsi_copy c[4] = {
      {.op = RSI_COPY_QUANTIZE, .src_dtype = RS_DTYPE_BF16,
       .dst_dtype = RS_DTYPE_F8_E4M3, .dst = (char *)q},
      {.op = RSI_COPY_SCALES, .src_dtype = RS_DTYPE_BF16,
       .dst_dtype = RS_DTYPE_F32, .dst = (char *)s,
       .src = t.mem + dot(2, I64(8, 16), t.strides) * 2},
      {.op = RSI_COPY_CAST, .src_dtype = RS_DTYPE_BF16,
       .dst_dtype = RS_DTYPE_F32, .dst = (char *)f},
      {.op = RSI_COPY_PLAIN, .esize = 2, .src_dtype = RS_DTYPE_BF16,
       .dst_dtype = RS_DTYPE_BF16, .dst = (char *)p},
  };
  for (int i = 0; i < 4; i++) {
    c[i].ndim = 2;
    c[i].dense_dst = true;
    if (i != 1) {
      c[i].src = src;
      memcpy(c[i].extent, b->ext, 2 * sizeof *b->ext);
    } else {
      memcpy(c[i].extent, I64(2, 2), 2 * sizeof(int64_t));
    }
    memcpy(c[i].src_strides, t.strides, 2 * sizeof *t.strides);
    c[i].hi = th_volume(2, c[i].extent);
  }
  c[0].blocks = blocks(&t, b->off);
  c[1].blocks = blocks(&t, I64(1, 1));
  run(c, 4);
  int64_t idx[2] = {0};
  for (int64_t k = 0; k < vol; k++, th_next(2, b->ext, idx)) {
    int64_t r = b->off[0] + idx[0], col = b->off[1] + idx[1];
    cr_assert_eq(q[k], t.ref_q[r * 45 + col]);
    uint16_t v;
    memcpy(&v, src + dot(2, idx, t.strides) * 2, 2);
    cr_assert_eq(p[k], v);
    cr_assert_eq(rsi_f32_bits(f[k]), rsi_f32_bits(rsi_bf16_to_f32(v)));
  }
  for (int i = 0; i < 4; i++) /* blocks (1, 1) .. (2, 2) of 5 x 3 */
    cr_assert_eq(rsi_f32_bits(s[i]),
                 rsi_f32_bits(t.ref_s[(1 + i / 2) * 3 + 1 + i % 2]),
                 "scale %d", i);
  free(q);
  free(s);
  free(f);
  free(p);
  free_tensor(&t);
}

/* ---- refusals ----------------------------------------------------------- */

static rs_status try_copy(const rsi_copy *c) {
  rsi_engine *e = rsi_host_engine();
  rsi_err err = {0};
  return e->ops->copy(e, c, 1, NULL, &err);
}

Test(copy_engine, refusals) {
  float src[64] = {0};
  char dst[256];
  memset(dst, TH_POISON, sizeof dst);
  rsi_copy c = {.ndim = 1, .extent = {8}, .src_strides = {1},
                .dst_strides = {1}, .src = (const char *)src, .dst = dst,
                .hi = 8};
  c.op = RSI_COPY_CAST;
  c.src_dtype = RS_DTYPE_F32;
  c.dst_dtype = RS_DTYPE_I32;
  cr_assert_eq(try_copy(&c), RS_ERR_UNSUPPORTED, "cast to i32");
  c.op = RSI_COPY_QUANTIZE;
  c.dst_dtype = RS_DTYPE_F8_E4M3;
  c.blocks = (rsi_copy_blocks){1, 8, 1, 4, 0, 0, false};
  c.dense_src = true;
  cr_assert_eq(try_copy(&c), RS_ERR_INVALID_ARGUMENT, "dense source");
  c.dense_src = false;
  c.blocks.col0 = 1; /* 8 columns from column 1 of 8 */
  cr_assert_eq(try_copy(&c), RS_ERR_INVALID_ARGUMENT, "box past the tensor");
  c.blocks.col0 = 0;
  c.blocks.b1 = 0;
  cr_assert_eq(try_copy(&c), RS_ERR_INVALID_ARGUMENT, "empty blocks");
  c.blocks.b1 = 4;
  c.dst_dtype = RS_DTYPE_F16;
  cr_assert_eq(try_copy(&c), RS_ERR_UNSUPPORTED, "quantize to f16");
  c.op = RSI_COPY_SCALES;
  c.dst_dtype = RS_DTYPE_F32;
  c.extent[0] = 3; /* 2 blocks of 4 */
  c.hi = 3;
  cr_assert_eq(try_copy(&c), RS_ERR_INVALID_ARGUMENT, "scales past the grid");
  for (size_t i = 0; i < sizeof dst; i++)
    cr_assert_eq((uint8_t)dst[i], TH_POISON, "a refused copy wrote");
}
