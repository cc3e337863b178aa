/* SPDX-License-Identifier: Apache-2.0 */
/* Converting host copies (copy_convert.h).
 *
 * CAST walks copy.c's runs (merged dims) and casts each run with one call.
 * QUANTIZE and SCALES walk the box as matrices (leading dims, then the
 * last two), because a block is a region of the last two dims, and call
 * convert.h's row kernels once per row of a run of blocks. QUANTIZE takes
 * whole rows up to the end of their block row at a time, each block's
 * scale once per copy (kept for the current block row of the box); where
 * rows are contiguous at both ends it hands the walk to
 * rsi_e4m3_run_bands as bands (a block row's rows, the box's width), which
 * overlaps the amax pass of one with the quantize pass of the other.
 * A run with a step other than one element at a side goes through small
 * buffers on the stack: gathered, converted, scattered. */
#include "copy/copy_convert.h"

#include <stdlib.h>
#include <string.h>

#include "copy/convert.h"
#include "copy/convert_elem.h"
#include "copy/copy.h"
#include "base/dtype.h"

enum { CHUNK = 512 }; /* elements a stack buffer holds */

typedef union chunk_buf {
  float f[CHUNK];
  uint8_t b[CHUNK * sizeof(float)];
} chunk_buf;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static bool is_float(int t) {
  return t == RS_DTYPE_F32 || t == RS_DTYPE_BF16 || t == RS_DTYPE_F16;
}

static rs_status unsupported(const rsi_copy *c, const char *what,
                             rsi_err *err) {
  return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "%s from %s to %s: not supported by the host engine", what,
                  rsi_dtype_name((rs_dtype)c->src_dtype),
                  rsi_dtype_name((rs_dtype)c->dst_dtype));
}

/* ---- casts -------------------------------------------------------------- */

/* A run with a step of more than one element at a side. */
static void cast_strided(rsi_cast_fn fn, const rsi_run *r, int64_t dsize,
                         int64_t ssize) {
  chunk_buf in, out;
  for (int64_t at = 0; at < r->count; at += CHUNK) {
    int64_t n = min64(CHUNK, r->count - at);
    const char *s = r->src + at * r->sstep;
    char *d = r->dst + at * r->dstep;
    if (r->sstep != ssize) {
      rsi_copy_strided((char *)in.b, ssize, s, r->sstep, n, (size_t)ssize);
      s = (const char *)in.b;
    }
    if (r->dstep == dsize) {
      fn(d, s, n);
    } else {
      fn(out.b, s, n);
      rsi_copy_strided(d, r->dstep, (const char *)out.b, dsize, n,
                       (size_t)dsize);
    }
  }
}

static rs_status cast_copy(const rsi_copy *c, rsi_err *err) {
  rsi_cast_fn fn =
      rsi_convert_cast_fn((rs_dtype)c->dst_dtype, (rs_dtype)c->src_dtype);
  if (!fn) return unsupported(c, "cast", err);
  int64_t dsize = (int64_t)rsi_dtype_size((rs_dtype)c->dst_dtype);
  int64_t ssize = (int64_t)rsi_dtype_size((rs_dtype)c->src_dtype);
  rsi_runs w;
  rsi_runs_begin(&w, c->ndim, c->extent, (size_t)dsize, c->dst,
                 c->dense_dst ? NULL : c->dst_strides, (size_t)ssize, c->src,
                 c->dense_src ? NULL : c->src_strides, c->lo, c->hi);
  rsi_run r;
  while (rsi_runs_next(&w, &r)) {
    if (r.dstep == dsize && r.sstep == ssize)
      fn(r.dst, r.src, r.count);
    else
      cast_strided(fn, &r, dsize, ssize);
  }
  return RS_OK;
}

/* ---- the box as matrices ------------------------------------------------ */

/* A walk over elements [lo, hi) of a box, a piece at a time (part of one
 * row of its last dim, or whole rows). The box is matrices of rows x cols
 * (its last two dims; a 1-D box is one row, a 0-D box one element) over
 * its leading dims.
 * Strides in elements; the dst ones only for a strided dst. */
typedef struct rows_walk {
  int nlead;
  int64_t lext[RS_MAX_DIMS], lsrc[RS_MAX_DIMS], ldst[RS_MAX_DIMS];
  int64_t rows, cols, srow, scol, drow, dcol;
  /* where the walk is */
  int64_t idx[RS_MAX_DIMS], mat, r, c, pos, hi, src_lead, dst_lead;
} rows_walk;

/* One piece: columns [c, c + count) of rows [r, r + nrows) of matrix
 * `mat`; several rows only when they are whole (c 0, count the cols). */
typedef struct row_piece {
  int64_t mat, r, nrows, c, count;
  int64_t src_lead, dst_lead; /* offsets of the matrix's element (0, 0) */
} row_piece;

static void rows_lead_offsets(rows_walk *w) {
  w->src_lead = w->dst_lead = 0;
  for (int d = 0; d < w->nlead; d++) {
    w->src_lead += w->idx[d] * w->lsrc[d];
    w->dst_lead += w->idx[d] * w->ldst[d];
  }
}

/* Empty (false) when [lo, hi) holds no element. */
static bool rows_begin(rows_walk *w, const rsi_copy *c) {
  int nd = c->ndim;
  const int64_t *ds = c->dst_strides, *ss = c->src_strides;
  w->nlead = nd > 2 ? nd - 2 : 0;
  for (int d = 0; d < w->nlead; d++) {
    w->lext[d] = c->extent[d];
    w->lsrc[d] = ss[d];
    w->ldst[d] = ds[d];
  }
  w->rows = nd >= 2 ? c->extent[nd - 2] : 1;
  w->cols = nd >= 1 ? c->extent[nd - 1] : 1;
  w->srow = nd >= 2 ? ss[nd - 2] : 0;
  w->drow = nd >= 2 ? ds[nd - 2] : 0;
  w->scol = nd >= 1 ? ss[nd - 1] : 1;
  w->dcol = nd >= 1 ? ds[nd - 1] : 1;
  w->pos = c->lo;
  w->hi = c->hi;
  if (w->hi <= w->pos || w->rows < 1 || w->cols < 1) return false;
  int64_t row = w->pos / w->cols;
  w->c = w->pos % w->cols;
  w->r = row % w->rows;
  w->mat = row / w->rows;
  int64_t m = w->mat;
  for (int d = w->nlead - 1; d >= 0; d--) {
    w->idx[d] = m % w->lext[d];
    m /= w->lext[d];
  }
  rows_lead_offsets(w);
  return true;
}

/* The next piece: whole rows, at most max_rows (>= 1) of them, or what
 * is left of one row. */
static bool rows_next(rows_walk *w, int64_t max_rows, row_piece *p) {
  if (w->pos >= w->hi) return false;
  int64_t count = min64(w->cols - w->c, w->hi - w->pos), nrows = 1;
  if (w->c == 0 && count == w->cols)
    nrows = min64(min64(max_rows, w->rows - w->r), (w->hi - w->pos) / w->cols);
  *p = (row_piece){w->mat, w->r, nrows, w->c, count, w->src_lead, w->dst_lead};
  w->pos += nrows * count;
  w->c = 0;
  w->r += nrows;
  if (w->r == w->rows) {
    w->r = 0;
    w->mat++;
    for (int d = w->nlead - 1; d >= 0; d--) {
      if (++w->idx[d] < w->lext[d]) break;
      w->idx[d] = 0;
    }
    rows_lead_offsets(w);
  }
  return true;
}

/* ---- block scales ------------------------------------------------------- */

/* The values of a block-scaled copy: their row kernels, element 0 of the
 * box (of block 0 of the box for SCALES) and the strides of the last two
 * dims. */
typedef struct values {
  const rsi_e4m3_rows *k;
  int64_t size, srow, scol;
  const char *at;
  const rsi_copy_blocks *bl;
} values;

/* Folds into keys[] the |x| of nr rows of `width` columns at p, whole
 * blocks from a block's first column; a row with columns apart in memory
 * is gathered a chunk at a time. */
static void amax_rows(const values *v, const char *p, int64_t nr,
                      int64_t width, uint32_t *keys) {
  const rsi_e4m3_rows *k = v->k;
  int64_t b1 = v->bl->b1;
  for (int64_t i = 0; i < nr; i++) {
    const char *row = p + i * v->srow * v->size;
    if (v->scol == 1) {
      k->amax(row, width, b1, 0, keys);
      continue;
    }
    chunk_buf in;
    for (int64_t at = 0; at < width; at += CHUNK) {
      int64_t n = min64(CHUNK, width - at);
      rsi_copy_strided((char *)in.b, v->size, row + at * v->scol * v->size,
                       v->scol * v->size, n, (size_t)v->size);
      k->amax(in.b, n, b1, at % b1, keys + at / b1);
    }
  }
}

/* scales[j] from keys[j], j < n. */
static void scales_of_keys(const values *v, const uint32_t *keys, int64_t n,
                           float *scales) {
  for (int64_t j = 0; j < n; j++) {
    float amax = v->k->key_amax(keys[j]);
    scales[j] =
        v->bl->ue8m0 ? rsi_e4m3_scale_ue8m0(amax) : rsi_e4m3_scale(amax);
  }
}

/* The box's rows and cols (as rows_walk counts them). */
static void box_size(const rsi_copy *c, int64_t *rows, int64_t *cols) {
  *rows = c->ndim >= 2 ? c->extent[c->ndim - 2] : 1;
  *cols = c->ndim >= 1 ? c->extent[c->ndim - 1] : 1;
}

/* The blocks are sane, and the box lies inside the values (QUANTIZE) or
 * inside the grid of blocks (SCALES). */
static rs_status check_blocks(const rsi_copy *c, bool scales, rsi_err *err) {
  const rsi_copy_blocks *b = &c->blocks;
  int64_t rows, cols;
  box_size(c, &rows, &cols);
  int64_t lim_r = b->rows, lim_c = b->cols;
  if (scales && b->b0 >= 1 && b->b1 >= 1) {
    lim_r = (b->rows + b->b0 - 1) / b->b0;
    lim_c = (b->cols + b->b1 - 1) / b->b1;
  }
  if (b->b0 < 1 || b->b1 < 1 || b->rows < 1 || b->cols < 1 || b->row0 < 0 ||
      b->col0 < 0 || rows > lim_r - b->row0 || cols > lim_c - b->col0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s copy of a %lld x %lld box at (%lld, %lld): blocks "
                    "of %lld x %lld over %lld x %lld do not hold it",
                    scales ? "scales" : "quantizing", (long long)rows,
                    (long long)cols, (long long)b->row0, (long long)b->col0,
                    (long long)b->b0, (long long)b->b1, (long long)b->rows,
                    (long long)b->cols);
  if (c->dense_src)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s copy from a dense stream: its source must be strided",
                    scales ? "scales" : "quantizing");
  rs_dtype want = scales ? RS_DTYPE_F32 : RS_DTYPE_F8_E4M3;
  if (!is_float(c->src_dtype) || c->dst_dtype != (int)want)
    return unsupported(c, scales ? "block scales" : "block quantization", err);
  return RS_OK;
}

static void values_begin(values *v, const rsi_copy *c, const rows_walk *w) {
  *v = (values){rsi_convert_e4m3_rows((rs_dtype)c->src_dtype), 0, w->srow,
                w->scol, c->src, &c->blocks};
  v->size = v->k->esize;
}

/* ---- quantize ----------------------------------------------------------- */

/* The scales of one block row of the box: scale[k] for block column
 * first + k, valid where have[k]. */
typedef struct scale_row {
  int64_t mat, br, first, n;
  float *scale;
  bool *have;
} scale_row;

/* Where piece p's block row is: the scales of p's block row made current
 * (forgotten when it is another than the last piece's), the offset of
 * its first row (reaching before the box) and its rows. */
static void piece_block_row(const values *v, scale_row *sr, const row_piece *p,
                            int64_t *lead, int64_t *nr) {
  const rsi_copy_blocks *bl = v->bl;
  int64_t br = (bl->row0 + p->r) / bl->b0;
  if (p->mat != sr->mat || br != sr->br) {
    sr->mat = p->mat;
    sr->br = br;
    memset(sr->have, 0, (size_t)sr->n * sizeof *sr->have);
  }
  *lead = p->src_lead + (br * bl->b0 - bl->row0) * v->srow;
  *nr = min64(bl->b0, bl->rows - br * bl->b0);
}

/* Blocks [k, k + n) of the current block row (at offset `lead`, nr
 * rows): element 0 of the first one, and the columns they span. */
static const char *blocks_at(const values *v, const scale_row *sr,
                             int64_t lead, int64_t k, int64_t n,
                             int64_t *width) {
  const rsi_copy_blocks *bl = v->bl;
  int64_t bc = sr->first + k;
  *width = min64(bl->cols, (bc + n) * bl->b1) - bc * bl->b1;
  return v->at + (lead + (bc * bl->b1 - bl->col0) * v->scol) * v->size;
}

/* Blocks [k, k + n) of the piece's block row: true when all have scales;
 * all marked as having them. */
static bool take_scales(scale_row *sr, int64_t k, int64_t n) {
  bool all = true;
  for (int64_t j = k; j < k + n; j++) {
    all = all && sr->have[j];
    sr->have[j] = true;
  }
  return all;
}

/* The walk of a box as rsi_e4m3_run_bands' bands (rows of the source and
 * of the destination contiguous): each piece of the walk (whole rows of a
 * block row, or part of a row) cut into runs of at most `per` blocks. */
typedef struct box_bands {
  const rsi_copy *c;
  const values *v;
  rows_walk w;
  scale_row *sr;
  int64_t per;
  row_piece p;
  bool in_piece;
  int64_t col;    /* the piece's next column */
  uint8_t *dense; /* a dense destination's piece */
} box_bands;

static bool next_box_band(void *state, rsi_e4m3_band *band) {
  box_bands *b = state;
  const values *v = b->v;
  const rsi_copy_blocks *bl = v->bl;
  const row_piece *p = &b->p;
  if (!b->in_piece) {
    if (!rows_next(&b->w, bl->b0 - (bl->row0 + b->w.r) % bl->b0, &b->p))
      return false;
    b->in_piece = true;
    b->col = p->c;
  }
  int64_t lead, nr;
  piece_block_row(v, b->sr, p, &lead, &nr);
  int64_t c = b->col, stop = p->c + p->count;
  int64_t k = (bl->col0 + c) / bl->b1 - b->sr->first;
  int64_t last = (bl->col0 + stop - 1) / bl->b1 - b->sr->first;
  int64_t n = min64(b->per, last - k + 1);
  int64_t end = min64(stop, (b->sr->first + k + n) * bl->b1 - bl->col0);
  band->amax_src = blocks_at(v, b->sr, lead, k, n, &band->amax_cols);
  band->amax_rows = nr;
  band->have_scales = take_scales(b->sr, k, n);
  band->scales = b->sr->scale + k;
  band->src = v->at + (p->src_lead + p->r * v->srow + c) * v->size;
  band->rows = p->nrows;
  band->cols = end - c;
  band->first = (bl->col0 + c) % bl->b1;
  band->src_stride = v->srow * v->size;
  if (b->c->dense_dst) {
    band->dst = b->dense + (c - p->c);
    band->dst_stride = p->count;
  } else {
    band->dst = (uint8_t *)b->c->dst + p->dst_lead + p->r * b->w.drow + c;
    band->dst_stride = b->w.drow;
  }
  b->col = end;
  if (end == stop) {
    b->in_piece = false;
    b->dense += p->nrows * p->count;
  }
  return true;
}

/* The scales of blocks [k, k + n) of piece p's block row that lack them. */
static void piece_scales(const values *v, scale_row *sr, int64_t lead,
                         int64_t nr, int64_t k, int64_t n) {
  uint32_t keys[RSI_E4M3_BAND_BLOCKS];
  for (int64_t j = k; j < k + n;) {
    if (sr->have[j]) {
      j++;
      continue;
    }
    int64_t e = j, width;
    while (e < k + n && e - j < RSI_E4M3_BAND_BLOCKS && !sr->have[e]) e++;
    const char *at = blocks_at(v, sr, lead, j, e - j, &width);
    memset(keys, 0, sizeof(uint32_t) * (size_t)(e - j));
    amax_rows(v, at, nr, width, keys);
    scales_of_keys(v, keys, e - j, sr->scale + j);
    for (; j < e; j++) sr->have[j] = true;
  }
}

/* Piece p into d (rows drow bytes apart, columns dcol), where the source
 * or the destination has columns apart in memory: the scales it lacks,
 * then each row a chunk at a time, gathered and scattered. */
static void quantize_piece_strided(const values *v, scale_row *sr,
                                   const row_piece *p, uint8_t *d, int64_t drow,
                                   int64_t dcol) {
  const rsi_copy_blocks *bl = v->bl;
  int64_t lead, nr;
  piece_block_row(v, sr, p, &lead, &nr);
  int64_t k0 = (bl->col0 + p->c) / bl->b1 - sr->first;
  int64_t k1 = (bl->col0 + p->c + p->count - 1) / bl->b1 - sr->first;
  piece_scales(v, sr, lead, nr, k0, k1 - k0 + 1);
  chunk_buf in, out;
  for (int64_t i = 0; i < p->nrows; i++) {
    const char *row = v->at + (p->src_lead + (p->r + i) * v->srow) * v->size;
    for (int64_t at = 0; at < p->count; at += CHUNK) {
      int64_t n = min64(CHUNK, p->count - at), c = p->c + at;
      const char *s = row + c * v->scol * v->size;
      if (v->scol != 1) {
        rsi_copy_strided((char *)in.b, v->size, s, v->scol * v->size, n,
                         (size_t)v->size);
        s = (const char *)in.b;
      }
      uint8_t *dp = d + i * drow + at * dcol;
      v->k->quantize(dcol == 1 ? dp : out.b, s, n, bl->b1,
                     (bl->col0 + c) % bl->b1,
                     sr->scale + (bl->col0 + c) / bl->b1 - sr->first);
      if (dcol != 1)
        rsi_copy_strided((char *)dp, dcol, (const char *)out.b, 1, n, 1);
    }
  }
}

enum { STACK_SCALES = 256 };

static rs_status quantize_copy(const rsi_copy *c, rsi_err *err) {
  RSI_TRY(check_blocks(c, false, err));
  box_bands b = {.c = c};
  if (!rows_begin(&b.w, c)) return RS_OK;
  const rsi_copy_blocks *bl = &c->blocks;
  values v;
  values_begin(&v, c, &b.w);
  scale_row sr = {-1, -1, bl->col0 / bl->b1, 0, NULL, NULL};
  sr.n = (bl->col0 + b.w.cols - 1) / bl->b1 - sr.first + 1;
  float stack_scale[STACK_SCALES];
  bool stack_have[STACK_SCALES];
  if (sr.n <= STACK_SCALES) {
    sr.scale = stack_scale;
    sr.have = stack_have;
  } else {
    sr.scale = malloc((size_t)sr.n * sizeof *sr.scale);
    sr.have = malloc((size_t)sr.n * sizeof *sr.have);
  }
  rs_status st = sr.scale && sr.have ? RS_OK : RSI_NOMEM(err);
  bool dst_rows = c->dense_dst || b.w.dcol == 1;
  if (st == RS_OK && v.scol == 1 && dst_rows) {
    /* rows contiguous at both ends: the two passes overlapped */
    b.v = &v;
    b.sr = &sr;
    b.per = rsi_e4m3_band_blocks(v.size, min64(bl->b0, bl->rows), bl->b1);
    b.dense = (uint8_t *)c->dst;
    rsi_e4m3_run_bands(v.k, bl->b1, bl->ue8m0, next_box_band, &b);
  } else if (st == RS_OK) {
    uint8_t *dense = (uint8_t *)c->dst;
    row_piece p;
    while (rows_next(&b.w, bl->b0 - (bl->row0 + b.w.r) % bl->b0, &p)) {
      if (c->dense_dst)
        quantize_piece_strided(&v, &sr, &p, dense, p.count, 1);
      else
        quantize_piece_strided(
            &v, &sr, &p,
            (uint8_t *)c->dst + p.dst_lead + p.r * b.w.drow + p.c * b.w.dcol,
            b.w.drow, b.w.dcol);
      dense += p.nrows * p.count;
    }
  }
  if (sr.scale != stack_scale) {
    free(sr.scale);
    free(sr.have);
  }
  return st;
}

/* ---- scales ------------------------------------------------------------- */

static rs_status scales_copy(const rsi_copy *c, rsi_err *err) {
  RSI_TRY(check_blocks(c, true, err));
  rows_walk w;
  if (!rows_begin(&w, c)) return RS_OK;
  const rsi_copy_blocks *bl = &c->blocks;
  values v;
  values_begin(&v, c, &w);
  char *dense = c->dst;
  uint32_t keys[RSI_E4M3_BAND_BLOCKS];
  float scales[RSI_E4M3_BAND_BLOCKS];
  row_piece p;
  /* each piece: blocks [p.c, p.c + count) of one block row, a run of
   * blocks at a time, each read row by row */
  while (rows_next(&w, 1, &p)) {
    int64_t br = bl->row0 + p.r;
    int64_t nr = min64(bl->b0, bl->rows - br * bl->b0);
    const char *row = v.at + (p.src_lead + p.r * bl->b0 * v.srow) * v.size;
    for (int64_t j = 0; j < p.count; j += RSI_E4M3_BAND_BLOCKS) {
      int64_t n = min64(RSI_E4M3_BAND_BLOCKS, p.count - j);
      int64_t bc = bl->col0 + p.c + j;
      int64_t width = min64(bl->cols, (bc + n) * bl->b1) - bc * bl->b1;
      memset(keys, 0, sizeof(uint32_t) * (size_t)n);
      amax_rows(&v, row + (p.c + j) * bl->b1 * v.scol * v.size, nr, width,
                keys);
      scales_of_keys(&v, keys, n, scales);
      if (c->dense_dst)
        memcpy(dense + j * 4, scales, sizeof(float) * (size_t)n);
      else
        rsi_copy_strided(
            c->dst + (p.dst_lead + p.r * w.drow + (p.c + j) * w.dcol) * 4,
            w.dcol * 4, (const char *)scales, 4, n, 4);
    }
    dense += p.count * 4;
  }
  return RS_OK;
}

rs_status rsi_copy_convert(const rsi_copy *c, rsi_err *err) {
  switch (c->op) {
    case RSI_COPY_CAST: return cast_copy(c, err);
    case RSI_COPY_QUANTIZE: return quantize_copy(c, err);
    case RSI_COPY_SCALES: return scales_copy(c, err);
    default:
      return RSI_FAIL(err, RS_ERR_INTERNAL, "copy op %d: unknown", c->op);
  }
}
