/* SPDX-License-Identifier: Apache-2.0 */
/* Conversions in the CUDA copy engine (rsi_copy ops CAST, QUANTIZE and
 * SCALES, engine.h): their tables, and the per-thread math that the
 * kernels (convert_pack.cu) and their CPU emulation (rsi_convert_run_host,
 * what CI tests) share. The element math is convert_elem.h's.
 *
 * Every address here is an element index of its side's dtype (the byte
 * address over the element's size; elements are aligned to their size),
 * so one index math serves sides of different element sizes.
 *
 * CAST: pieces.h's pieces, built in element space (the innermost dim is
 * one element, not esize bytes) and stamped with their dtype pair
 * (rsi_piece.cast); a unit is `unit` elements: 16 bytes on the wider side,
 * or 1 element where the copy's alignment allows no more.
 *
 * QUANTIZE and SCALES: one block piece (rsi_bpiece) a copy, walked in
 * jobs. A job is one block of values (b0 x b1, clipped at the tensor's
 * edges) that the copy needs the scale of: a team finds the block's amax
 * (max of |x| as bit patterns: order-independent, so exact however the
 * threads share it), makes the scale, then QUANTIZE writes the elements of
 * the block that lie in the box and in [lo, hi), SCALES the scale. A block
 * of more than RSI_BLOCK_JOB_UNITS units is "split": it is cut into chunks
 * (a job each), a first pass folds each chunk's amax into the block's key
 * in a zeroed table (atomic max), and the main pass reads the key. Split
 * pieces come first in the table, so the first pass walks jobs
 * [0, split_jobs).
 *
 * A SCALES copy over exactly the blocks that a QUANTIZE copy of the same
 * batch touches (the same source, both whole ranges, blocks not split) is
 * folded into that QUANTIZE piece: each of its jobs writes its block's
 * scale too, so the block's values are not read again for it. */
#ifndef RS_CORE_TRANSPORT_NCCL_CONVERT_PIECES_H
#define RS_CORE_TRANSPORT_NCCL_CONVERT_PIECES_H

#include <stdbool.h>
#include <stdint.h>

#include "copy/convert_elem.h"
#include "pieces.h"

/* Units a block job holds at most (a block of 128 x 128 is one job). */
#define RSI_BLOCK_JOB_UNITS 16384

/* nvcc: always inlined, so that dtypes and unit sizes that a kernel passes
 * as constants fold away. */
#ifdef __CUDACC__
#define RSI_HD_INLINE __host__ __device__ __forceinline__
#else
#define RSI_HD_INLINE inline
#endif

/* One copy of QUANTIZE or SCALES. Indices are element indices (see
 * above); the box's leading dims (all but the last two) are merged where
 * both sides allow and flattened into a leading index. */
typedef struct rsi_bpiece {
  uint64_t dst; /* box element 0 (a dense side: moved back by lo) */
  uint64_t src; /* QUANTIZE: box element 0; SCALES: the first value of the
                   block of box element 0 */
  int64_t lo, hi;
  int64_t rows, cols, b0, b1, row0, col0; /* rsi_copy_blocks */
  int64_t ext_r, ext_c;                   /* the box's last two dims */
  int64_t dst_r, dst_c, src_r, src_c;     /* their strides (elements) */
  int64_t lo_row, lo_col, hi_row, hi_col; /* lo and hi as (row, col) of the
                                             box's rows of ext_c */
  int64_t first_job, jobs;
  /* A block's jobs: `chunks` of its region (rows x units): chunk_rows
   * rows each, or with col_chunks > 1 one row of chunk_units units. */
  int64_t chunks, col_chunks, chunk_rows, chunk_units;
  /* QUANTIZE: the blocks met are nbc block columns from bc0 of the flat
   * block rows g_lo.. (g = leading index * nbr + block row - br0). */
  int64_t g_lo, nbr, nbc, br0, bc0;
  int64_t key0; /* split: the key of the piece's first block */
  int32_t op, src_dtype, unit, nlead;
  int32_t ue8m0, split;
  int64_t lead_ext[RS_MAX_DIMS]; /* outermost first */
  int64_t lead_dst[RS_MAX_DIMS], lead_src[RS_MAX_DIMS];
  /* QUANTIZE with a SCALES copy folded in (scales != 0): the scale of
   * block (lead, br0 + r, bc0 + c) goes to f32 element sdst + the lead
   * index's offset over slead_* (the lead dims of extent > 1, outermost
   * first) + r x sdst_r + c x sdst_c. */
  uint64_t sdst;
  int64_t sdst_r, sdst_c;
  int32_t scales, snlead;
  int64_t slead_ext[RS_MAX_DIMS], slead_dst[RS_MAX_DIMS];
} rsi_bpiece;

/* The conversions of a batch (rsi_pieces.conv). */
typedef struct rsi_conv_tables {
  rsi_pieces cast; /* element space, every piece with cast != 0 */
  rsi_bpiece *blk; /* split pieces first */
  int64_t nblk, cap_blk;
  int64_t jobs;       /* of every block piece */
  int64_t nsplit;     /* split pieces: blk[0..nsplit) */
  int64_t split_jobs; /* their jobs: [0, split_jobs) */
  int64_t keys;       /* uint32 keys the split pieces fold into */
  int64_t folded;     /* SCALES copies folded into QUANTIZE pieces */
  int64_t *pair;      /* the builder's scratch: each copy's partner, */
  int64_t cap_pair;
  void *origins;      /* and the QUANTIZE copies by block origin */
  int64_t cap_origins;
} rsi_conv_tables;

#ifdef __cplusplus
extern "C" {
#endif

/* The conversion tables of copies[0..n) into out->conv (made on first
 * need; reset first): CAST between two different dtypes of f32, bf16,
 * f16; QUANTIZE and SCALES. PLAIN copies, and casts to the same dtype,
 * are rsi_pieces_build's. RS_ERR_UNSUPPORTED for another dtype pair,
 * RS_ERR_INVALID_ARGUMENT for blocks that do not fit the box, a dense
 * block source, or a pointer not aligned to its element size,
 * RS_ERR_NO_MEMORY; on failure the tables are left empty. */
rs_status rsi_convert_build(const rsi_copy *copies, int64_t n,
                            rsi_pieces *out, rsi_err *err);
/* The same with at most job_units units a block job (tests use small
 * ones to split blocks). */
rs_status rsi_convert_build_cut(const rsi_copy *copies, int64_t n,
                                rsi_pieces *out, int64_t job_units,
                                rsi_err *err);

/* The CPU emulation of the conversion kernels over t->conv (nothing when
 * NULL): every item and job run by `threads` threads as the kernels do,
 * on host pointers. RS_ERR_NO_MEMORY when the keys find no room. */
rs_status rsi_convert_run_host(const rsi_pieces *t, int threads,
                               rsi_err *err);

/* convert_pack.cu, enqueued on `stream` (a cudaStream_t); tables and keys
 * in device memory; nothing is launched without work. Each returns the
 * launch's cudaError_t (0: cudaSuccess). */
int rsi_cuda_cast_launch(const rsi_piece *table_dev, int64_t npieces,
                         int64_t items, void *stream);
/* keys_dev: conv->keys zeroed keys (NULL when there are none). */
int rsi_cuda_blocks_launch(const rsi_bpiece *table_dev, int64_t npieces,
                           int64_t jobs, int64_t nsplit, int64_t split_jobs,
                           uint32_t *keys_dev, void *stream);

#ifdef __cplusplus
}
#endif

/* ---- elements ------------------------------------------------------- */

/* Bytes of an element of the dtypes converted here; 0 for another. */
static inline RSI_HD int rsi_conv_size(int dtype) {
  switch (dtype) {
    case RS_DTYPE_F32: return 4;
    case RS_DTYPE_BF16:
    case RS_DTYPE_F16: return 2;
    case RS_DTYPE_F8_E4M3: return 1;
    default: return 0;
  }
}

static inline RSI_HD bool rsi_conv_float(int dtype) {
  return dtype == RS_DTYPE_F32 || dtype == RS_DTYPE_BF16 ||
         dtype == RS_DTYPE_F16;
}

/* A cast piece's stamp: which dtypes; never 0 (a plain piece's). */
#define RSI_CAST_CODE(src_dtype, dst_dtype) (((src_dtype) << 8) | (dst_dtype))
#define RSI_CAST_SRC(code) ((code) >> 8)
#define RSI_CAST_DST(code) ((code) & 0xff)

/* Elements a unit holds at most: 16 bytes on the wider side. */
static inline RSI_HD int rsi_conv_max_unit(int src_dtype, int dst_dtype) {
  int a = rsi_conv_size(src_dtype), b = rsi_conv_size(dst_dtype);
  return 16 / (a > b ? a : b);
}

/* A unit's bytes as little-endian words: element j of a 4-byte dtype is
 * w[j], of a 2-byte one half (j & 1) of w[j / 2], of e4m3 byte (j & 3) of
 * w[j / 4]. */
static RSI_HD_INLINE float rsi_unit_get(int dtype, const uint32_t *w, int j) {
  if (dtype == RS_DTYPE_F32) return rsi_bits_f32(w[j]);
  uint16_t h = (uint16_t)(w[j >> 1] >> ((j & 1) * 16));
  return dtype == RS_DTYPE_BF16 ? rsi_bf16_to_f32(h) : rsi_f16_to_f32(h);
}

/* Element j of a unit, narrowed from f32 (w zeroed beforehand). */
static RSI_HD_INLINE void rsi_unit_put(int dtype, uint32_t *w, int j,
                                       float f) {
  if (dtype == RS_DTYPE_F32) {
    w[j] = rsi_f32_bits(f);
    return;
  }
  uint32_t h = dtype == RS_DTYPE_BF16 ? rsi_f32_to_bf16(f) : rsi_f32_to_f16(f);
  w[j >> 1] |= h << ((j & 1) * 16);
}

/* n elements of a unit from src_dtype to dst_dtype: through f32, as
 * convert.c's casts (bf16 <-> f16 included) do. */
static RSI_HD_INLINE void rsi_cast_unit(int src_dtype, int dst_dtype, int n,
                                        const uint32_t *in, uint32_t *out) {
  for (int j = 0; j < 4; j++) out[j] = 0;
  for (int j = 0; j < n; j++)
    rsi_unit_put(dst_dtype, out, j, rsi_unit_get(src_dtype, in, j));
}

/* |x| as a bit pattern of the source dtype, folded into key by max: the
 * patterns order as the magnitudes, and a NaN above infinity. */
static RSI_HD_INLINE uint32_t rsi_amax_unit(int src_dtype, int n,
                                            const uint32_t *in,
                                            uint32_t key) {
  for (int j = 0; j < n; j++) {
    uint32_t a = src_dtype == RS_DTYPE_F32
                     ? in[j] & 0x7fffffffu
                     : (in[j >> 1] >> ((j & 1) * 16)) & 0x7fffu;
    key = a > key ? a : key;
  }
  return key;
}

/* A block's scale from its key: amax exact in f32 (the quiet NaN for any
 * NaN), then convert_elem.h's scale. */
static inline RSI_HD float rsi_key_scale(int src_dtype, uint32_t key,
                                         bool ue8m0) {
  bool nan = src_dtype == RS_DTYPE_F32    ? key > 0x7f800000u
             : src_dtype == RS_DTYPE_BF16 ? key > 0x7f80u
                                          : key > 0x7c00u;
  float amax = src_dtype == RS_DTYPE_F32    ? rsi_bits_f32(key)
               : src_dtype == RS_DTYPE_BF16 ? rsi_bf16_to_f32((uint16_t)key)
                                            : rsi_f16_to_f32((uint16_t)key);
  if (nan) amax = rsi_bits_f32(0x7fc00000u);
  return ue8m0 ? rsi_e4m3_scale_ue8m0(amax) : rsi_e4m3_scale(amax);
}

/* How the values of a block are divided by its scale: by multiplying
 * with the exact reciprocal where the scale is a power of two that has
 * one (the same result bit for bit, as convert.c does), else dividing.
 * A value whose quotient is below 2^-10 (half the smallest e4m3
 * subnormal) becomes a signed zero without the division: on a GPU such a
 * quotient (a tiny value, or a block with a huge outlier) takes the
 * division's slow path, one lane at a time. `tiny` is scale x 2^-10,
 * exact for a scale of at least 2^-100 (else 0: nothing is cut short),
 * and infinite for an infinite scale, where x / scale is a signed zero
 * too. */
typedef struct rsi_qscale {
  float scale, inv, tiny;
  bool mul;
} rsi_qscale;

static inline RSI_HD rsi_qscale rsi_qscale_of(float scale) {
  rsi_qscale q;
  uint32_t u = rsi_f32_bits(scale);
  uint32_t e = u >> 23;
  q.scale = scale;
  q.mul = ((u & 0x007fffffu) == 0 && e >= 1 && e <= 254) || u == 0x00400000u;
  q.inv = q.mul ? 1.0f / scale : 1.0f;
  q.tiny = scale >= 0x1p-100f ? scale * 0x1p-10f : 0.0f;
  return q;
}

/* x / scale as e4m3, saturated (the rule of convert_elem.h). */
static RSI_HD_INLINE uint32_t rsi_quant_elem(float x, const rsi_qscale *q) {
  if (q->mul) return rsi_f32_to_e4m3_sat(x * q->inv);
  uint32_t u = rsi_f32_bits(x);
  if (rsi_bits_f32(u & 0x7fffffffu) < q->tiny) return (u >> 24) & 0x80u;
  return rsi_f32_to_e4m3_sat(x / q->scale);
}

/* n elements of src_dtype to e4m3 bytes (out zeroed here). */
static RSI_HD_INLINE void rsi_quant_unit(int src_dtype, int n,
                                         const uint32_t *in,
                                         const rsi_qscale *q, uint32_t *out) {
  for (int j = 0; j < 4; j++) out[j] = 0;
  for (int j = 0; j < n; j++) {
    uint32_t b = rsi_quant_elem(rsi_unit_get(src_dtype, in, j), q);
    out[j >> 2] |= b << ((j & 3) * 8);
  }
}

/* ---- block jobs ------------------------------------------------------ */

/* A job as rsi_bjob_at finds it: the block, and the chunk of it. */
typedef struct rsi_bjob {
  uint64_t dst_l; /* QUANTIZE: box element (lead, 0, 0); SCALES: the scale */
  uint64_t src_l; /* QUANTIZE: box element (lead, 0, 0); SCALES: the first
                     value of block (lead, 0, 0) */
  int64_t vr, vc; /* the block's first value from src_l (rows, cols) */
  int64_t flat_row0; /* QUANTIZE: the box row (lead, 0) counted flat */
  int64_t chunk, key;
  uint64_t scale_dst; /* QUANTIZE with scales folded in: the block's scale */
  uint32_t r_lo, r_hi, u_lo, u_hi; /* the chunk: rows and units of the
                                      block; empty when r_lo == r_hi */
} rsi_bjob;

/* The piece of t[0..n) that holds job (0 <= job < total jobs). */
static inline RSI_HD int64_t rsi_bpiece_find(const rsi_bpiece *t, int64_t n,
                                             int64_t job) {
  return rsi_table_find(&t->first_job, sizeof *t, n, job);
}

/* Where a QUANTIZE piece with scales folded in puts the scale of block
 * (lead, gbr, gbc): lead counts the lead dims' elements row-major. */
static inline RSI_HD uint64_t rsi_bpiece_scale_at(const rsi_bpiece *p,
                                                  uint64_t lead, int64_t gbr,
                                                  int64_t gbc) {
  uint64_t d = p->sdst + (uint64_t)((gbr - p->br0) * p->sdst_r +
                                    (gbc - p->bc0) * p->sdst_c);
  rsi_box_at(p->snlead, p->slead_ext, p->slead_dst, NULL, lead, &d, NULL);
  return d;
}

/* Job `job` of p: once per job and thread. */
static inline RSI_HD void rsi_bjob_at(const rsi_bpiece *p, int64_t job,
                                      rsi_bjob *j) {
  uint64_t blk = (uint64_t)(job - p->first_job), ch = 0;
  if (p->chunks > 1) {
    uint64_t q = rsi_piece_udiv(blk, (uint64_t)p->chunks);
    ch = blk - q * (uint64_t)p->chunks;
    blk = q;
  }
  uint64_t lead;
  int64_t gbr, gbc, dst_off = 0;
  if (p->op == RSI_COPY_QUANTIZE) {
    uint64_t gq = rsi_piece_udiv(blk, (uint64_t)p->nbc);
    uint64_t g = (uint64_t)p->g_lo + gq;
    lead = rsi_piece_udiv(g, (uint64_t)p->nbr);
    gbr = p->br0 + (int64_t)(g - lead * (uint64_t)p->nbr);
    gbc = p->bc0 + (int64_t)(blk - gq * (uint64_t)p->nbc);
    j->vr = gbr * p->b0 - p->row0;
    j->vc = gbc * p->b1 - p->col0;
    j->flat_row0 = (int64_t)lead * p->ext_r;
    j->scale_dst = p->scales ? rsi_bpiece_scale_at(p, lead, gbr, gbc) : 0;
  } else {
    uint64_t e = (uint64_t)p->lo + blk;
    uint64_t fr = rsi_piece_udiv(e, (uint64_t)p->ext_c);
    int64_t c = (int64_t)(e - fr * (uint64_t)p->ext_c);
    lead = rsi_piece_udiv(fr, (uint64_t)p->ext_r);
    int64_t r = (int64_t)(fr - lead * (uint64_t)p->ext_r);
    gbr = p->row0 + r;
    gbc = p->col0 + c;
    j->vr = r * p->b0;
    j->vc = c * p->b1;
    j->flat_row0 = 0;
    j->scale_dst = 0;
    dst_off = r * p->dst_r + c * p->dst_c;
  }
  j->dst_l = p->dst + (uint64_t)dst_off;
  j->src_l = p->src;
  rsi_box_at(p->nlead, p->lead_ext, p->lead_dst, p->lead_src, lead, &j->dst_l,
             &j->src_l);
  j->chunk = (int64_t)ch;
  j->key = p->key0 + (int64_t)blk;
  int64_t nr = p->rows - gbr * p->b0, nc = p->cols - gbc * p->b1;
  if (nr > p->b0) nr = p->b0;
  if (nc > p->b1) nc = p->b1;
  int64_t ncu = nc / p->unit, r_lo, r_hi, u_lo, u_hi;
  if (p->col_chunks > 1) {
    uint64_t row = rsi_piece_udiv(ch, (uint64_t)p->col_chunks);
    r_lo = (int64_t)row;
    r_hi = r_lo + 1;
    u_lo = (int64_t)(ch - row * (uint64_t)p->col_chunks) * p->chunk_units;
    u_hi = u_lo + p->chunk_units;
  } else {
    r_lo = (int64_t)ch * p->chunk_rows;
    r_hi = r_lo + p->chunk_rows;
    u_lo = 0;
    u_hi = ncu;
  }
  if (r_hi > nr) r_hi = nr;
  if (u_hi > ncu) u_hi = ncu;
  if (r_lo >= r_hi || u_lo >= u_hi) r_lo = r_hi = u_lo = u_hi = 0;
  j->r_lo = (uint32_t)r_lo;
  j->r_hi = (uint32_t)r_hi;
  j->u_lo = (uint32_t)u_lo;
  j->u_hi = (uint32_t)u_hi;
}

/* The values of the job's chunk, for its amax (src side only). */
static inline RSI_HD void rsi_bjob_values(const rsi_bpiece *p,
                                          const rsi_bjob *j, rsi_rect *r) {
  int64_t row = j->vr + j->r_lo, col = j->vc + (int64_t)j->u_lo * p->unit;
  r->dst = 0;
  r->src = j->src_l + (uint64_t)(row * p->src_r + col * p->src_c);
  r->dst_row = r->dst_unit = 0;
  r->src_row = p->src_r;
  r->src_unit = p->unit * p->src_c;
  r->rows = j->r_hi - j->r_lo;
  r->cols = j->u_hi - j->u_lo;
  r->units = r->rows * r->cols;
}

/* QUANTIZE: part `part` (0: the range's first row, 1: its whole rows, 2:
 * its last row) of the elements of the job's chunk inside the box and in
 * [lo, hi); false when that part is empty. */
static inline RSI_HD bool rsi_bjob_part(const rsi_bpiece *p,
                                        const rsi_bjob *j, int part,
                                        rsi_rect *r) {
  int64_t ra = j->vr + j->r_lo, rb = j->vr + j->r_hi;
  int64_t ca = j->vc + (int64_t)j->u_lo * p->unit;
  int64_t cb = j->vc + (int64_t)j->u_hi * p->unit;
  if (ra < 0) ra = 0;
  if (rb > p->ext_r) rb = p->ext_r;
  if (ca < 0) ca = 0;
  if (cb > p->ext_c) cb = p->ext_c;
  /* rows of the box as flat rows; the range is rows lo_row..hi_row */
  int64_t first = p->lo_row - j->flat_row0, last = p->hi_row - j->flat_row0;
  if (part == 0) {
    if (first < ra || first >= rb) return false;
    ra = first;
    rb = first + 1;
    if (ca < p->lo_col) ca = p->lo_col;
    if (last == first && cb > p->hi_col) cb = p->hi_col;
  } else if (part == 1) {
    if (ra < first + 1) ra = first + 1;
    if (rb > last) rb = last;
  } else {
    if (last == first || last < ra || last >= rb) return false;
    ra = last;
    rb = last + 1;
    if (cb > p->hi_col) cb = p->hi_col;
  }
  if (ra >= rb || ca >= cb) return false;
  r->dst = j->dst_l + (uint64_t)(ra * p->dst_r + ca * p->dst_c);
  r->src = j->src_l + (uint64_t)(ra * p->src_r + ca * p->src_c);
  r->dst_row = p->dst_r;
  r->src_row = p->src_r;
  r->dst_unit = p->unit * p->dst_c;
  r->src_unit = p->unit * p->src_c;
  r->rows = (uint32_t)(rb - ra);
  r->cols = (uint32_t)((cb - ca) / p->unit);
  r->units = r->rows * r->cols;
  return true;
}

/* Whether a QUANTIZE job writes anything (a SCALES job always does). */
static inline RSI_HD bool rsi_bjob_writes(const rsi_bpiece *p,
                                          const rsi_bjob *j) {
  if (p->op != RSI_COPY_QUANTIZE) return j->r_lo < j->r_hi;
  rsi_rect r;
  return rsi_bjob_part(p, j, 0, &r) || rsi_bjob_part(p, j, 1, &r) ||
         rsi_bjob_part(p, j, 2, &r);
}

#endif
