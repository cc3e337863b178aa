/* SPDX-License-Identifier: Apache-2.0 */
/* Building the conversion tables of the CUDA copy engine from a batch of
 * copies, and the CPU emulation of the conversion kernels
 * (convert_pieces.h says what the tables hold). */
#include "convert_pieces.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

static const char *dtype_name(int dtype) {
  switch (dtype) {
    case RS_DTYPE_F32: return "f32";
    case RS_DTYPE_BF16: return "bf16";
    case RS_DTYPE_F16: return "f16";
    case RS_DTYPE_F8_E4M3: return "f8_e4m3";
    default: return "another dtype";
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A side's pointer as an element index. */
static rs_status element_index(const void *ptr, int dtype, const char *side,
                               uint64_t *out, rsi_err *err) {
  uint64_t a = (uint64_t)(uintptr_t)ptr, size = (uint64_t)rsi_conv_size(dtype);
  if (a % size)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA engine: %s pointer %p is not aligned to its %s "
                    "elements (%d bytes)",
                    side, ptr, dtype_name(dtype), (int)size);
  *out = a / size;
  return RS_OK;
}

/* ---- casts ------------------------------------------------------------ */

static rs_status add_cast(rsi_pieces *out, const rsi_copy *c, rsi_err *err) {
  if (!rsi_conv_float(c->src_dtype) || !rsi_conv_float(c->dst_dtype))
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "CUDA engine: no cast from %s (%d) to %s (%d)",
                    dtype_name(c->src_dtype), c->src_dtype,
                    dtype_name(c->dst_dtype), c->dst_dtype);
  if (c->hi <= c->lo) return RS_OK;
  rsi_piece_space sp = {1, 0, 0,
                        rsi_conv_max_unit(c->src_dtype, c->dst_dtype),
                        RSI_CAST_CODE(c->src_dtype, c->dst_dtype), true};
  RSI_TRY(element_index(c->dst, c->dst_dtype, "destination", &sp.dst, err));
  RSI_TRY(element_index(c->src, c->src_dtype, "source", &sp.src, err));
  return rsi_pieces_add(out, c, &sp, err);
}

/* ---- block pieces ------------------------------------------------------ */

static rs_status check_blocks(const rsi_copy *c, int64_t ext_r, int64_t ext_c,
                              rsi_err *err) {
  const rsi_copy_blocks *b = &c->blocks;
  const char *op = c->op == RSI_COPY_QUANTIZE ? "quantize" : "scales";
  int want_dst = c->op == RSI_COPY_QUANTIZE ? RS_DTYPE_F8_E4M3 : RS_DTYPE_F32;
  if (!rsi_conv_float(c->src_dtype) || c->dst_dtype != want_dst)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "CUDA engine: no %s from %s (%d) to %s (%d)", op,
                    dtype_name(c->src_dtype), c->src_dtype,
                    dtype_name(c->dst_dtype), c->dst_dtype);
  if (c->dense_src)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA engine: %s needs a strided source (whole blocks)",
                    op);
  if (b->b0 < 1 || b->b1 < 1 || b->rows < 1 || b->cols < 1 || b->row0 < 0 ||
      b->col0 < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA engine: %s: blocks of %lld x %lld over %lld x %lld "
                    "from (%lld, %lld)",
                    op, (long long)b->b0, (long long)b->b1,
                    (long long)b->rows, (long long)b->cols,
                    (long long)b->row0, (long long)b->col0);
  /* the box's rows and cols: values, or blocks for SCALES */
  int64_t rows = b->rows, cols = b->cols;
  if (c->op == RSI_COPY_SCALES) {
    rows = ceil_div(rows, b->b0);
    cols = ceil_div(cols, b->b1);
  }
  if (b->row0 > rows - ext_r || b->col0 > cols - ext_c)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA engine: %s: a box of %lld x %lld from (%lld, %lld) "
                    "leaves %lld x %lld",
                    op, (long long)ext_r, (long long)ext_c,
                    (long long)b->row0, (long long)b->col0, (long long)rows,
                    (long long)cols);
  if (c->ndim < 2 && b->rows != 1)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA engine: %s: a %d-D box of %lld rows", op, c->ndim,
                    (long long)b->rows);
  return RS_OK;
}

/* The largest unit in {max, 1} dividing `all`. */
static int32_t pick_unit(uint64_t all, int32_t max) {
  return (all & (uint64_t)(max - 1)) ? 1 : max;
}

/* The piece of copy c (lo < hi); its jobs counted from first_job. */
static rs_status block_piece(const rsi_copy *c, int64_t job_units,
                             rsi_bpiece *p, rsi_err *err) {
  int n = c->ndim;
  int64_t ext_c = n >= 1 ? c->extent[n - 1] : 1;
  int64_t ext_r = n >= 2 ? c->extent[n - 2] : 1;
  RSI_TRY(check_blocks(c, ext_r, ext_c, err));
  memset(p, 0, sizeof *p); /* unused dims zero: a stable table */
  const rsi_copy_blocks *b = &c->blocks;
  p->op = c->op;
  p->src_dtype = c->src_dtype;
  p->ue8m0 = b->ue8m0;
  p->lo = c->lo;
  p->hi = c->hi;
  p->rows = b->rows;
  p->cols = b->cols;
  p->b0 = b->b0;
  p->b1 = b->b1;
  p->row0 = b->row0;
  p->col0 = b->col0;
  p->ext_r = ext_r;
  p->ext_c = ext_c;
  RSI_TRY(element_index(c->dst, c->dst_dtype, "destination", &p->dst, err));
  RSI_TRY(element_index(c->src, c->src_dtype, "source", &p->src, err));

  /* strides, elements; a dense destination takes the box's own */
  int64_t dense[RS_MAX_DIMS], s = 1;
  for (int d = n - 1; d >= 0; d--) {
    dense[d] = s;
    s *= c->extent[d];
  }
  const int64_t *ds = c->dense_dst ? dense : c->dst_strides;
  if (c->dense_dst) p->dst -= (uint64_t)c->lo;
  p->dst_c = n >= 1 && ext_c > 1 ? ds[n - 1] : 1;
  p->dst_r = n >= 2 && ext_r > 1 ? ds[n - 2] : 0;
  p->src_c = n >= 1 ? c->src_strides[n - 1] : 1;
  p->src_r = n >= 2 ? c->src_strides[n - 2] : 0;
  for (int d = 0; d + 2 < n; d++) {
    int64_t e = c->extent[d], dd = ds[d], ss = c->src_strides[d];
    if (e == 1) continue;
    int k = p->nlead - 1;
    if (k >= 0 && p->lead_dst[k] == dd * e && p->lead_src[k] == ss * e) {
      p->lead_ext[k] *= e;
      p->lead_dst[k] = dd;
      p->lead_src[k] = ss;
      continue;
    }
    p->lead_ext[++k] = e;
    p->lead_dst[k] = dd;
    p->lead_src[k] = ss;
    p->nlead = k + 1;
  }

  /* a unit: every address it is made of a multiple of it, and no unit
   * across a block, a row of the box or an end of the range */
  uint64_t all = p->src | (uint64_t)p->src_r | (uint64_t)b->b1 |
                 (uint64_t)b->cols;
  for (int d = 0; d < p->nlead; d++) all |= (uint64_t)p->lead_src[d];
  bool contiguous = p->src_c == 1;
  if (c->op == RSI_COPY_QUANTIZE) {
    all |= p->dst | (uint64_t)p->dst_r | (uint64_t)b->col0 |
           (uint64_t)ext_c | (uint64_t)c->lo | (uint64_t)c->hi;
    for (int d = 0; d < p->nlead; d++) all |= (uint64_t)p->lead_dst[d];
    contiguous = contiguous && p->dst_c == 1;
  }
  p->unit = contiguous ? pick_unit(all, 16 / rsi_conv_size(c->src_dtype)) : 1;

  p->lo_row = c->lo / ext_c;
  p->lo_col = c->lo % ext_c;
  p->hi_row = c->hi / ext_c;
  p->hi_col = c->hi % ext_c;

  /* chunks of a block, from its size away from the tensor's edges */
  int64_t nr = b->b0 < b->rows ? b->b0 : b->rows;
  int64_t ncu = (b->b1 < b->cols ? b->b1 : b->cols) / p->unit;
  p->col_chunks = 1;
  p->chunk_rows = nr;
  p->chunk_units = ncu;
  p->chunks = 1;
  if (nr > job_units / ncu) {
    p->split = 1;
    if (ncu >= job_units) {
      p->col_chunks = ceil_div(ncu, job_units);
      p->chunk_units = ceil_div(ncu, p->col_chunks);
      p->chunk_rows = 1;
      p->chunks = nr * p->col_chunks;
    } else {
      p->chunk_rows = job_units / ncu;
      p->chunks = ceil_div(nr, p->chunk_rows);
    }
  }

  int64_t blocks;
  if (c->op == RSI_COPY_QUANTIZE) {
    p->br0 = b->row0 / b->b0;
    p->nbr = (b->row0 + ext_r - 1) / b->b0 - p->br0 + 1;
    p->bc0 = b->col0 / b->b1;
    p->nbc = (b->col0 + ext_c - 1) / b->b1 - p->bc0 + 1;
    /* the flat block rows of the range's first and last elements */
    int64_t first = p->lo_row, last = (c->hi - 1) / ext_c;
    p->g_lo = first / ext_r * p->nbr + (b->row0 + first % ext_r) / b->b0 -
              p->br0;
    int64_t g_hi = last / ext_r * p->nbr + (b->row0 + last % ext_r) / b->b0 -
                   p->br0;
    blocks = (g_hi - p->g_lo + 1) * p->nbc;
  } else {
    blocks = c->hi - c->lo;
  }
  if (__builtin_mul_overflow(blocks, p->chunks, &p->jobs))
    return RSI_FAIL(err, RS_ERR_OVERFLOW,
                    "CUDA engine: %lld blocks of %lld jobs each",
                    (long long)blocks, (long long)p->chunks);
  p->key0 = blocks; /* the keys it needs, until placed */
  return RS_OK;
}

/* ---- SCALES folded into QUANTIZE --------------------------------------- */

enum { NO_PARTNER = -1, FOLDED = -2 };

typedef struct origin {
  uintptr_t at; /* the first value of the block of box element 0 */
  int64_t copy;
} origin;

/* A copy of a whole range over blocks that are well formed (the builder
 * refuses the others later, with their message). */
static bool foldable(const rsi_copy *c) {
  if (c->ndim < 1 || c->ndim > RS_MAX_DIMS || c->blocks.b0 < 1 ||
      c->blocks.b1 < 1 || c->blocks.row0 < 0 || c->blocks.col0 < 0 ||
      c->dense_src)
    return false;
  int64_t v = 1;
  for (int d = 0; d < c->ndim; d++) {
    if (c->extent[d] < 1 || __builtin_mul_overflow(v, c->extent[d], &v))
      return false;
  }
  return c->lo == 0 && c->hi == v;
}

/* A QUANTIZE copy's block origin: what the SCALES copy of the same blocks
 * names as its source. */
static uintptr_t block_origin(const rsi_copy *q) {
  int n = q->ndim;
  const rsi_copy_blocks *b = &q->blocks;
  int64_t back = (b->col0 % b->b1) * q->src_strides[n - 1];
  if (n >= 2) back += (b->row0 % b->b0) * q->src_strides[n - 2];
  return (uintptr_t)q->src -
         (uintptr_t)(back * rsi_conv_size(q->src_dtype));
}

/* Whether SCALES copy s writes the scales of exactly the blocks that
 * QUANTIZE copy q touches, from the same values, both whole ranges. */
static bool scales_of(const rsi_copy *q, const rsi_copy *s) {
  int n = q->ndim;
  const rsi_copy_blocks *a = &q->blocks, *b = &s->blocks;
  if (s->ndim != n || n < 1 || s->src_dtype != q->src_dtype ||
      q->dst_dtype != RS_DTYPE_F8_E4M3 || s->dst_dtype != RS_DTYPE_F32 ||
      a->rows != b->rows || a->cols != b->cols || a->b0 != b->b0 ||
      a->b1 != b->b1 || a->ue8m0 != b->ue8m0 || !foldable(q) ||
      !foldable(s) || (uintptr_t)s->src != block_origin(q))
    return false;
  for (int d = 0; d < n; d++)
    if (q->src_strides[d] != s->src_strides[d] ||
        (d + 2 < n && q->extent[d] != s->extent[d]))
      return false;
  int64_t ext_c = q->extent[n - 1], ext_r = n >= 2 ? q->extent[n - 2] : 1;
  int64_t bc0 = a->col0 / a->b1, br0 = a->row0 / a->b0;
  if (b->col0 != bc0 || s->extent[n - 1] != (a->col0 + ext_c - 1) / a->b1 -
                                                bc0 + 1)
    return false;
  if (n >= 2 && (b->row0 != br0 || s->extent[n - 2] != (a->row0 + ext_r -
                                                        1) / a->b0 - br0 + 1))
    return false;
  return n >= 2 || b->row0 == 0;
}

static int origin_cmp(const void *x, const void *y) {
  const origin *a = x, *b = y;
  if (a->at != b->at) return a->at < b->at ? -1 : 1;
  return (a->copy > b->copy) - (a->copy < b->copy);
}

/* t->pair[i]: for a QUANTIZE copy the SCALES copy folded into it, for
 * that SCALES copy FOLDED, else NO_PARTNER. A QUANTIZE copy whose blocks
 * are split takes none (its jobs are chunks, not blocks). */
static rs_status pair_scales(rsi_conv_tables *t, const rsi_copy *copies,
                             int64_t n, int64_t job_units, rsi_err *err) {
  RSI_TRY(rsi_grow((void **)&t->pair, &t->cap_pair, n, sizeof *t->pair, 16,
                   err));
  int64_t nq = 0;
  for (int64_t i = 0; i < n; i++) {
    t->pair[i] = NO_PARTNER;
    nq += copies[i].op == RSI_COPY_QUANTIZE && foldable(&copies[i]);
  }
  if (!nq) return RS_OK;
  RSI_TRY(rsi_grow(&t->origins, &t->cap_origins, nq, sizeof(origin), 16,
                   err));
  origin *o = t->origins;
  nq = 0;
  for (int64_t i = 0; i < n; i++)
    if (copies[i].op == RSI_COPY_QUANTIZE && foldable(&copies[i]))
      o[nq++] = (origin){block_origin(&copies[i]), i};
  qsort(o, (size_t)nq, sizeof *o, origin_cmp);
  for (int64_t s = 0; s < n; s++) {
    const rsi_copy *sc = &copies[s];
    if (sc->op != RSI_COPY_SCALES) continue;
    int64_t lo = 0, hi = nq; /* the first origin at or after sc->src */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (o[mid].at < (uintptr_t)sc->src)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (; lo < nq && o[lo].at == (uintptr_t)sc->src; lo++) {
      int64_t q = o[lo].copy;
      if (t->pair[q] != NO_PARTNER || !scales_of(&copies[q], sc)) continue;
      rsi_bpiece p;
      RSI_TRY(block_piece(&copies[q], job_units, &p, err));
      if (p.split) continue;
      t->pair[q] = s;
      t->pair[s] = FOLDED;
      break;
    }
  }
  return RS_OK;
}

/* Where QUANTIZE piece p writes the scales of SCALES copy s (scales_of). */
static rs_status fold_scales(rsi_bpiece *p, const rsi_copy *s, rsi_err *err) {
  int n = s->ndim;
  RSI_TRY(element_index(s->dst, RS_DTYPE_F32, "destination", &p->sdst, err));
  int64_t dense[RS_MAX_DIMS], m = 1;
  for (int d = n - 1; d >= 0; d--) {
    dense[d] = m;
    m *= s->extent[d];
  }
  const int64_t *ds = s->dense_dst ? dense : s->dst_strides;
  p->scales = 1;
  p->sdst_c = ds[n - 1];
  p->sdst_r = n >= 2 ? ds[n - 2] : 0;
  p->snlead = 0;
  for (int d = 0; d + 2 < n; d++) {
    if (s->extent[d] == 1) continue;
    p->slead_ext[p->snlead] = s->extent[d];
    p->slead_dst[p->snlead++] = ds[d];
  }
  return RS_OK;
}

static rs_status add_blocks(rsi_conv_tables *t, const rsi_copy *copies,
                            int64_t n, int64_t job_units, bool split,
                            rsi_err *err) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_copy *c = &copies[i];
    if (c->op != RSI_COPY_QUANTIZE && c->op != RSI_COPY_SCALES) continue;
    if (c->hi <= c->lo || t->pair[i] == FOLDED) continue;
    rsi_bpiece p;
    RSI_TRY(block_piece(c, job_units, &p, err));
    if ((bool)p.split != split) continue;
    if (t->pair[i] >= 0) {
      RSI_TRY(fold_scales(&p, &copies[t->pair[i]], err));
      t->folded++;
    }
    RSI_TRY(rsi_grow((void **)&t->blk, &t->cap_blk, t->nblk + 1, sizeof p,
                     16, err));
    int64_t keys = p.key0;
    p.key0 = split ? t->keys : 0;
    p.first_job = t->jobs;
    if (split) t->keys += keys;
    t->jobs += p.jobs;
    t->blk[t->nblk++] = p;
  }
  return RS_OK;
}

static rs_status build(const rsi_copy *copies, int64_t n, rsi_conv_tables *t,
                       int64_t job_units, rsi_err *err) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_copy *c = &copies[i];
    if (c->op == RSI_COPY_CAST && c->src_dtype != c->dst_dtype)
      RSI_TRY(add_cast(&t->cast, c, err));
    else if (c->op == RSI_COPY_CAST && !rsi_conv_float(c->src_dtype))
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "CUDA engine: no cast of %s (%d)",
                      dtype_name(c->src_dtype), c->src_dtype);
    else if (c->op < RSI_COPY_PLAIN || c->op > RSI_COPY_SCALES)
      return RSI_FAIL(err, RS_ERR_INTERNAL, "CUDA engine: copy op %d",
                      c->op);
  }
  RSI_TRY(pair_scales(t, copies, n, job_units, err));
  RSI_TRY(add_blocks(t, copies, n, job_units, true, err));
  t->nsplit = t->nblk;
  t->split_jobs = t->jobs;
  return add_blocks(t, copies, n, job_units, false, err);
}

rs_status rsi_convert_build_cut(const rsi_copy *copies, int64_t n,
                                rsi_pieces *out, int64_t job_units,
                                rsi_err *err) {
  rsi_conv_tables *t = out->conv;
  if (t) {
    t->cast.n = t->cast.items = 0;
    t->nblk = t->jobs = t->nsplit = t->split_jobs = t->keys = 0;
    t->folded = 0;
  }
  bool any = false;
  for (int64_t i = 0; i < n && !any; i++)
    any = copies[i].op != RSI_COPY_PLAIN;
  if (!any) return RS_OK;
  if (!t) {
    t = calloc(1, sizeof *t);
    if (!t) return RSI_NOMEM(err);
    out->conv = t;
  }
  if (job_units < 1) job_units = 1;
  rs_status st = build(copies, n, t, job_units, err);
  if (st != RS_OK) {
    t->cast.n = t->cast.items = 0;
    t->nblk = t->jobs = t->nsplit = t->split_jobs = t->keys = 0;
    t->folded = 0;
  }
  return st;
}

rs_status rsi_convert_build(const rsi_copy *copies, int64_t n,
                            rsi_pieces *out, rsi_err *err) {
  return rsi_convert_build_cut(copies, n, out, RSI_BLOCK_JOB_UNITS, err);
}

/* ---- the CPU emulation -------------------------------------------------- */

static void load(uint32_t *w, uint64_t index, int size, int n) {
  w[0] = w[1] = w[2] = w[3] = 0;
  memcpy(w, (const void *)(uintptr_t)(index * (uint64_t)size),
         (size_t)(size * n));
}

static void store(uint64_t index, const uint32_t *w, int size, int n) {
  memcpy((void *)(uintptr_t)(index * (uint64_t)size), w, (size_t)(size * n));
}

static void cast_unit(const void *piece, uint64_t dst, uint64_t src) {
  const rsi_piece *p = piece;
  int sdt = RSI_CAST_SRC(p->cast), ddt = RSI_CAST_DST(p->cast);
  uint32_t in[4], out[4];
  load(in, src, rsi_conv_size(sdt), p->unit);
  rsi_cast_unit(sdt, ddt, p->unit, in, out);
  store(dst, out, rsi_conv_size(ddt), p->unit);
}

/* A block's amax: the max over every thread's units, as the kernels'
 * shuffles make it. */
typedef struct amax_ctx {
  const rsi_bpiece *p;
  uint32_t *key;
} amax_ctx;

static void amax_unit(const void *ctx, uint64_t dst, uint64_t src) {
  const amax_ctx *a = ctx;
  uint32_t in[4];
  load(in, src, rsi_conv_size(a->p->src_dtype), a->p->unit);
  *a->key = rsi_amax_unit(a->p->src_dtype, a->p->unit, in, *a->key);
}

/* The team's amax of the job's chunk. */
static uint32_t team_amax(const rsi_bpiece *p, const rsi_bjob *j,
                          uint32_t threads) {
  rsi_rect r;
  rsi_bjob_values(p, j, &r);
  uint32_t key = 0;
  rsi_rect_walk_host(&r, threads, amax_unit, &(amax_ctx){p, &key});
  return key;
}

typedef struct quant_ctx {
  const rsi_bpiece *p;
  const rsi_qscale *q;
} quant_ctx;

static void quant_unit(const void *ctx, uint64_t dst, uint64_t src) {
  const quant_ctx *c = ctx;
  uint32_t in[4], out[4];
  load(in, src, rsi_conv_size(c->p->src_dtype), c->p->unit);
  rsi_quant_unit(c->p->src_dtype, c->p->unit, in, c->q, out);
  store(dst, out, 1, c->p->unit);
}

static void quantize(const rsi_bpiece *p, const rsi_bjob *j, float scale,
                     uint32_t threads) {
  rsi_qscale q = rsi_qscale_of(scale);
  for (int part = 0; part < 3; part++) {
    rsi_rect r;
    if (rsi_bjob_part(p, j, part, &r))
      rsi_rect_walk_host(&r, threads, quant_unit, &(quant_ctx){p, &q});
  }
}

/* The first pass over the split pieces' jobs, then the main one over all,
 * as the kernels run them. */
static void run_blocks(const rsi_conv_tables *t, uint32_t *keys,
                       uint32_t threads) {
  for (int64_t job = 0; job < t->split_jobs; job++) {
    const rsi_bpiece *p = &t->blk[rsi_bpiece_find(t->blk, t->nblk, job)];
    rsi_bjob j;
    rsi_bjob_at(p, job, &j);
    uint32_t key = team_amax(p, &j, threads);
    if (key > keys[j.key]) keys[j.key] = key;
  }
  for (int64_t job = 0; job < t->jobs; job++) {
    const rsi_bpiece *p = &t->blk[rsi_bpiece_find(t->blk, t->nblk, job)];
    rsi_bjob j;
    rsi_bjob_at(p, job, &j);
    if (!rsi_bjob_writes(p, &j)) continue;
    if (p->op == RSI_COPY_SCALES && p->split && j.chunk != 0) continue;
    uint32_t key = p->split ? keys[j.key] : team_amax(p, &j, threads);
    float scale = rsi_key_scale(p->src_dtype, key, p->ue8m0 != 0);
    if (p->op == RSI_COPY_QUANTIZE) {
      quantize(p, &j, scale, threads);
      if (p->scales) memcpy((void *)(uintptr_t)(j.scale_dst * 4), &scale, 4);
    } else
      memcpy((void *)(uintptr_t)(j.dst_l * 4), &scale, 4);
  }
}

rs_status rsi_convert_run_host(const rsi_pieces *t, int threads,
                               rsi_err *err) {
  const rsi_conv_tables *c = t->conv;
  if (!c) return RS_OK;
  rsi_pieces_walk_host(c->cast.v, c->cast.n, c->cast.items, threads,
                       cast_unit);
  if (!c->jobs) return RS_OK;
  uint32_t *keys = calloc((size_t)(c->keys ? c->keys : 1), sizeof *keys);
  if (!keys) return RSI_NOMEM(err);
  run_blocks(c, keys, (uint32_t)threads);
  free(keys);
  return RS_OK;
}
