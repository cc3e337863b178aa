/* SPDX-License-Identifier: Apache-2.0 */
/* Host conversion loops (convert.h): one small loop per dtype pair, picked
 * once per call, over convert_elem.h's per-element functions, written so
 * that the compiler vectorizes them (no branch inside; selects only).
 *
 * amax works on bit patterns: with the sign cleared, the patterns of a
 * float format order as their magnitudes do, and every NaN pattern sorts
 * above infinity, so an integer max is exact and lets a NaN win.
 *
 * Block quantization reads its source twice (the amax pass, then the
 * quantize pass, which waits on arithmetic); the band driver runs the
 * first pass of one block row between the rows of the second pass of the
 * one before, prefetching ahead of it, so that one thread keeps memory
 * and arithmetic busy at once. Whole-width block rows keep the reads long
 * sequential runs, which the hardware prefetchers follow. */
#include "copy/convert.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "copy/convert_elem.h"
#include "base/dtype.h"

/* On x86-64 (GCC), the element loops also come as AVX2 and AVX-512
 * copies, one picked when the library loads (function multiversioning,
 * an ifunc): the baseline's SSE2 has no unsigned 32-bit min, blend or
 * 32 -> 8-bit narrowing, and runs the quantize loops some 5x slower. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 12 && defined(__gnu_linux__)
#define RSI_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RSI_SIMD_CLONES
#endif

static bool is_float_dtype(rs_dtype t) {
  return t == RS_DTYPE_F32 || t == RS_DTYPE_BF16 || t == RS_DTYPE_F16;
}

/* ---- casts ------------------------------------------------------------ */

/* A shard may start at any byte offset (rs_layout_add_shard), so either
 * end of a cast may be misaligned for its type. Elements go through
 * memcpy, never through a misaligned typed access, which C leaves
 * undefined (and a vectorizer may turn into an aligned vector store); a
 * memcpy of one element compiles to a plain load or store, vectorized as
 * unaligned ones, as fast as aligned ones on aligned data. */
#define RSI_CAST_FN(name, dst_t, src_t, expr)                               \
  RSI_SIMD_CLONES static void name(void *dst, const void *src, int64_t n) { \
    unsigned char *restrict d = dst;                                        \
    const unsigned char *restrict s = src;                                  \
    for (int64_t i = 0; i < n; i++) {                                       \
      src_t x;                                                              \
      memcpy(&x, s + i * (int64_t)sizeof x, sizeof x);                      \
      dst_t y = expr(x);                                                    \
      memcpy(d + i * (int64_t)sizeof y, &y, sizeof y);                      \
    }                                                                       \
  }

RSI_CAST_FN(cast_bf16_f32, float, uint16_t, rsi_bf16_to_f32)
RSI_CAST_FN(cast_f16_f32, float, uint16_t, rsi_f16_to_f32)
RSI_CAST_FN(cast_f32_bf16, uint16_t, float, rsi_f32_to_bf16)
RSI_CAST_FN(cast_f32_f16, uint16_t, float, rsi_f32_to_f16)
RSI_CAST_FN(cast_f16_bf16, uint16_t, uint16_t, rsi_f16_to_bf16)
RSI_CAST_FN(cast_bf16_f16, uint16_t, uint16_t, rsi_bf16_to_f16)

static void copy2(void *dst, const void *src, int64_t n) {
  memcpy(dst, src, (size_t)n * 2);
}

static void copy4(void *dst, const void *src, int64_t n) {
  memcpy(dst, src, (size_t)n * 4);
}

rsi_cast_fn rsi_convert_cast_fn(rs_dtype dst_dtype, rs_dtype src_dtype) {
  if (!is_float_dtype(dst_dtype) || !is_float_dtype(src_dtype)) return NULL;
  if (dst_dtype == src_dtype) return dst_dtype == RS_DTYPE_F32 ? copy4 : copy2;
  switch (src_dtype) {
    case RS_DTYPE_BF16:
      return dst_dtype == RS_DTYPE_F32 ? cast_bf16_f32 : cast_bf16_f16;
    case RS_DTYPE_F16:
      return dst_dtype == RS_DTYPE_F32 ? cast_f16_f32 : cast_f16_bf16;
    default:
      return dst_dtype == RS_DTYPE_BF16 ? cast_f32_bf16 : cast_f32_f16;
  }
}

static rs_status check_region(int64_t rows, int64_t cols, rsi_err *err) {
  if (rows < 0 || cols < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "region of %lld x %lld elements: sizes must be >= 0",
                    (long long)rows, (long long)cols);
  return RS_OK;
}

static rs_status unsupported(rsi_err *err, const char *what, rs_dtype dst,
                             rs_dtype src) {
  return RSI_FAIL(err, RS_ERR_UNSUPPORTED, "%s from %s to %s: not supported",
                  what, rsi_dtype_name(src), rsi_dtype_name(dst));
}

rs_status rsi_convert_cast_rows(rs_dtype dst_dtype, void *dst,
                                int64_t dst_stride, rs_dtype src_dtype,
                                const void *src, int64_t src_stride,
                                int64_t rows, int64_t cols, rsi_err *err) {
  rsi_cast_fn fn = rsi_convert_cast_fn(dst_dtype, src_dtype);
  if (!fn) return unsupported(err, "cast", dst_dtype, src_dtype);
  RSI_TRY(check_region(rows, cols, err));
  int64_t all;
  if (rows > 1 && dst_stride == cols && src_stride == cols &&
      !__builtin_mul_overflow(rows, cols, &all)) {
    fn(dst, src, all); /* one dense run */
    return RS_OK;
  }
  size_t dsize = rsi_dtype_size(dst_dtype), ssize = rsi_dtype_size(src_dtype);
  char *d = dst;
  const char *s = src;
  for (int64_t r = 0; r < rows; r++)
    fn(d + r * dst_stride * (int64_t)dsize, s + r * src_stride * (int64_t)ssize,
       cols);
  return RS_OK;
}

/* ---- amax and quantize: the row kernels of one source dtype ----------- */

/* The kernels take one row of n elements cut into blocks (convert.h's
 * rsi_e4m3_rows): block 0 holds the first b - first, each next one b
 * (the last what is left); one key or scale per block. A loop runs per
 * block, so that a block's key or scale stays in a register. */

/* The end (exclusive) of the block that starts at c: len columns on, or
 * the row's end. */
static inline int64_t block_end(int64_t c, int64_t len, int64_t n) {
  return n - c < len ? n : c + len;
}

/* The row kernels read their source through these: a values shard may
 * start at any byte offset (as the casts' note says), and a memcpy of
 * one element is a plain load that the vectorizer turns into unaligned
 * vector loads, where a misaligned typed access would be undefined. */
static inline uint16_t load_u16(const unsigned char *s, int64_t i) {
  uint16_t v;
  memcpy(&v, s + 2 * i, sizeof v);
  return v;
}

static inline uint32_t load_u32(const unsigned char *s, int64_t i) {
  uint32_t v;
  memcpy(&v, s + 4 * i, sizeof v);
  return v;
}

static inline float load_f32(const unsigned char *s, int64_t i) {
  float v;
  memcpy(&v, s + 4 * i, sizeof v);
  return v;
}

/* Folds the largest |x| bit pattern ("key") of each block into keys[]. */
RSI_SIMD_CLONES
static void amax_row16(const void *src, int64_t n, int64_t b, int64_t first,
                       uint32_t *keys) {
  const unsigned char *restrict s = src;
  for (int64_t c = 0, j = 0, len = b - first; c < n; c += len, len = b, j++) {
    int64_t end = block_end(c, len, n);
    uint16_t k = (uint16_t)keys[j];
    for (int64_t i = c; i < end; i++) {
      uint16_t a = load_u16(s, i) & 0x7fffu;
      k = a > k ? a : k;
    }
    keys[j] = k;
  }
}

RSI_SIMD_CLONES
static void amax_row32(const void *src, int64_t n, int64_t b, int64_t first,
                       uint32_t *keys) {
  const unsigned char *restrict s = src;
  for (int64_t c = 0, j = 0, len = b - first; c < n; c += len, len = b, j++) {
    int64_t end = block_end(c, len, n);
    uint32_t k = keys[j];
    for (int64_t i = c; i < end; i++) {
      uint32_t a = load_u32(s, i) & 0x7fffffffu;
      k = a > k ? a : k;
    }
    keys[j] = k;
  }
}

/* A key as a value; any NaN as the quiet NaN 0x7fc00000. */
static float nan_canonical(float v) {
  return v != v ? rsi_bits_f32(0x7fc00000u) : v;
}
static float key_f32(uint32_t k) { return nan_canonical(rsi_bits_f32(k)); }
static float key_bf16(uint32_t k) {
  return nan_canonical(rsi_bf16_to_f32((uint16_t)k));
}
static float key_f16(uint32_t k) {
  return nan_canonical(rsi_f16_to_f32((uint16_t)k));
}

/* A scale 2^k whose reciprocal 2^-k is an f32 too: then x * 2^-k and
 * x / 2^k are one rounding of the same real number, so equal bit for bit
 * (subnormal results included). Normal powers of two qualify, and 2^-127,
 * the smallest UE8M0 scale. */
static inline bool exact_reciprocal(float scale, float *inv) {
  uint32_t u = rsi_f32_bits(scale);
  uint32_t e = u >> 23; /* sign clear: positive scales only */
  bool pow2 = ((u & 0x007fffffu) == 0 && e >= 1 && e <= 254) ||
              u == 0x00400000u;
  if (pow2) *inv = 1.0f / scale;
  return pow2;
}

static inline float same_f32(float f) { return f; }

/* bf16 widened without quieting a NaN: any NaN quantizes to 0x7f|sign. */
static inline float bf16_bits_f32(uint16_t h) {
  return rsi_bits_f32((uint32_t)h << 16);
}

/* Quantizes each block dividing by its scale, or multiplying by the exact
 * reciprocal of a power-of-two one. */
#define RSI_QUANT_ROW(suffix, load, widen)                                   \
  RSI_SIMD_CLONES static void quant_row_##suffix(                            \
      uint8_t *restrict d, const void *src, int64_t n, int64_t b,            \
      int64_t first, const float *scales) {                                  \
    const unsigned char *restrict s = src;                                   \
    for (int64_t c = 0, j = 0, len = b - first; c < n;                       \
         c += len, len = b, j++) {                                           \
      int64_t end = block_end(c, len, n);                                    \
      float scale = scales[j], inv = 0;                                      \
      if (exact_reciprocal(scale, &inv))                                     \
        for (int64_t i = c; i < end; i++)                                    \
          d[i] = rsi_f32_to_e4m3_sat(widen(load(s, i)) * inv);               \
      else                                                                   \
        for (int64_t i = c; i < end; i++)                                    \
          d[i] = rsi_f32_to_e4m3_sat(widen(load(s, i)) / scale);             \
    }                                                                        \
  }

RSI_QUANT_ROW(f32, load_f32, same_f32)
RSI_QUANT_ROW(f16, load_u16, rsi_f16_to_f32)

/* bf16 two elements at a time: a 32-bit word holds a pair, whose f32
 * widenings are the word shifted and masked (no widening shuffle), and
 * whose two codes go out as one 16-bit word (half the narrowing). Taken
 * for a finite positive scale, where x / scale has the sign of x (a NaN
 * keeps its own): the magnitude is quantized and the input's sign bit
 * put back. The pair order inside a word does not matter, so this holds
 * on either byte order. */
#define RSI_QUANT_PAIRS_BF16(name, op)                                       \
  static inline void name(uint8_t *restrict d,                               \
                          const unsigned char *restrict s, int64_t pairs,    \
                          float arg) {                                       \
    for (int64_t p = 0; p < pairs; p++) {                                    \
      uint32_t w = load_u32(s, p);                                           \
      uint32_t mag = w & 0x7fff7fffu;                                        \
      float lo = rsi_bits_f32(mag << 16) op arg;                             \
      float hi = rsi_bits_f32(mag & 0xffff0000u) op arg;                     \
      uint32_t code_lo = rsi_e4m3_code_of_magnitude(lo) | ((w >> 8) & 0x80u); \
      uint32_t code_hi =                                                     \
          rsi_e4m3_code_of_magnitude(hi) | ((w >> 24) & 0x80u);              \
      uint16_t out = (uint16_t)(code_lo | code_hi << 8);                     \
      memcpy(d + 2 * p, &out, sizeof out);                                   \
    }                                                                        \
  }

RSI_QUANT_PAIRS_BF16(quant_pairs_mul_bf16, *)
RSI_QUANT_PAIRS_BF16(quant_pairs_div_bf16, /)

RSI_SIMD_CLONES
static void quant_row_bf16(uint8_t *restrict d, const void *src, int64_t n,
                           int64_t b, int64_t first, const float *scales) {
  const unsigned char *restrict s = src;
  for (int64_t c = 0, j = 0, len = b - first; c < n; c += len, len = b, j++) {
    int64_t end = block_end(c, len, n);
    float scale = scales[j], inv = 0;
    bool mul = exact_reciprocal(scale, &inv);
    uint32_t u = rsi_f32_bits(scale);
    if (u == 0 || u >= 0x7f800000u) { /* NaN, infinite, zero or negative */
      for (int64_t i = c; i < end; i++)
        d[i] = rsi_f32_to_e4m3_sat(bf16_bits_f32(load_u16(s, i)) / scale);
      continue;
    }
    int64_t pairs = (end - c) / 2;
    if (mul)
      quant_pairs_mul_bf16(d + c, s + 2 * c, pairs, inv);
    else
      quant_pairs_div_bf16(d + c, s + 2 * c, pairs, scale);
    if ((end - c) & 1) {
      float x = bf16_bits_f32(load_u16(s, end - 1));
      d[end - 1] = rsi_f32_to_e4m3_sat(mul ? x * inv : x / scale);
    }
  }
}

static const rsi_e4m3_rows ROWS_F32 = {4, amax_row32, key_f32, quant_row_f32};
static const rsi_e4m3_rows ROWS_BF16 = {2, amax_row16, key_bf16,
                                        quant_row_bf16};
static const rsi_e4m3_rows ROWS_F16 = {2, amax_row16, key_f16, quant_row_f16};

const rsi_e4m3_rows *rsi_convert_e4m3_rows(rs_dtype src_dtype) {
  switch (src_dtype) {
    case RS_DTYPE_F32: return &ROWS_F32;
    case RS_DTYPE_BF16: return &ROWS_BF16;
    case RS_DTYPE_F16: return &ROWS_F16;
    default: return NULL;
  }
}

/* The kernels of src_dtype; NULL (and an error recorded) for a dtype other
 * than f32, bf16, f16. */
static const rsi_e4m3_rows *kernels_for(rs_dtype src_dtype, const char *what,
                                        rsi_err *err) {
  const rsi_e4m3_rows *k = rsi_convert_e4m3_rows(src_dtype);
  if (!k) unsupported(err, what, RS_DTYPE_F8_E4M3, src_dtype);
  return k;
}

rs_status rsi_convert_amax(rs_dtype src_dtype, const void *src,
                           int64_t src_stride, int64_t rows, int64_t cols,
                           float *amax, rsi_err *err) {
  const rsi_e4m3_rows *k = kernels_for(src_dtype, "amax", err);
  if (!k) return err ? err->status : RS_ERR_UNSUPPORTED;
  RSI_TRY(check_region(rows, cols, err));
  const char *s = src;
  uint32_t key = 0;
  for (int64_t r = 0; r < rows; r++)
    k->amax(s + r * src_stride * k->esize, cols, cols, 0, &key);
  *amax = k->key_amax(key);
  return RS_OK;
}

rs_status rsi_convert_quantize_e4m3(uint8_t *dst, int64_t dst_stride,
                                    rs_dtype src_dtype, const void *src,
                                    int64_t src_stride, int64_t rows,
                                    int64_t cols, float scale, rsi_err *err) {
  const rsi_e4m3_rows *k = kernels_for(src_dtype, "quantize", err);
  if (!k) return err ? err->status : RS_ERR_UNSUPPORTED;
  RSI_TRY(check_region(rows, cols, err));
  const char *s = src;
  for (int64_t r = 0; r < rows; r++)
    k->quantize(dst + r * dst_stride, s + r * src_stride * k->esize, cols,
                cols, 0, &scale);
  return RS_OK;
}

/* ---- bands: the two passes overlapped -------------------------------- */

/* Elements quantized between two slices of prefetching; whole blocks. */
enum { PREFETCH_RUN = 512 };

static void prefetch(const char *p, int64_t bytes) {
#if defined(__GNUC__)
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
#else
  (void)p;
  (void)bytes;
#endif
}

static int64_t blocks_of(int64_t cols, int64_t b1) {
  return cols / b1 + (cols % b1 != 0);
}

int64_t rsi_e4m3_band_blocks(int64_t esize, int64_t rows, int64_t b1) {
  int64_t per;
  if (__builtin_mul_overflow(b1, esize, &per) ||
      __builtin_mul_overflow(per, rows < 1 ? 1 : rows, &per))
    return 1;
  per = RSI_E4M3_BAND_BYTES / per;
  return per < 1 ? 1 : per > RSI_E4M3_BAND_BLOCKS ? RSI_E4M3_BAND_BLOCKS : per;
}

/* The scales of band b from the keys of its blocks. */
static void band_scales(const rsi_e4m3_rows *k, const rsi_e4m3_band *b,
                        int64_t b1, bool ue8m0, const uint32_t *keys) {
  for (int64_t j = 0, nb = blocks_of(b->amax_cols, b1); j < nb; j++) {
    float amax = k->key_amax(keys[j]);
    b->scales[j] = ue8m0 ? rsi_e4m3_scale_ue8m0(amax) : rsi_e4m3_scale(amax);
  }
}

/* Row i of band b's quantize pass; with `ahead` (a row of `ahead_bytes`
 * that the amax pass reads next), prefetches slices of it between runs of
 * blocks, so that its memory reads overlap this row's arithmetic. */
static void quantize_band_row(const rsi_e4m3_rows *k, const rsi_e4m3_band *b,
                              int64_t i, int64_t b1, const char *ahead,
                              int64_t ahead_bytes) {
  const char *src = (const char *)b->src + i * b->src_stride;
  uint8_t *dst = b->dst + i * b->dst_stride;
  if (!ahead) {
    k->quantize(dst, src, b->cols, b1, b->first, b->scales);
    return;
  }
  int64_t per_blocks = PREFETCH_RUN / b1 < 1 ? 1 : PREFETCH_RUN / b1;
  int64_t per = per_blocks * b1;
  int64_t slice = ahead_bytes / (b->cols / per + 1) + 64, done = 0;
  const float *scales = b->scales;
  for (int64_t c = 0, len = per - b->first; c < b->cols; c += len, len = per) {
    if (len > b->cols - c) len = b->cols - c;
    k->quantize(dst + c, src + c * k->esize, len, b1, c == 0 ? b->first : 0,
                scales);
    scales += per_blocks;
    int64_t n = ahead_bytes - done < slice ? ahead_bytes - done : slice;
    prefetch(ahead + done, n);
    done += n;
  }
}

void rsi_e4m3_run_bands(const rsi_e4m3_rows *k, int64_t b1, bool ue8m0,
                        bool (*next)(void *state, rsi_e4m3_band *band),
                        void *state) {
  uint32_t keys[RSI_E4M3_BAND_BLOCKS];
  rsi_e4m3_band cur, nxt;
  if (!next(state, &cur)) return;
  if (!cur.have_scales) {
    memset(keys, 0, sizeof(uint32_t) * (size_t)blocks_of(cur.amax_cols, b1));
    for (int64_t i = 0; i < cur.amax_rows; i++)
      k->amax((const char *)cur.amax_src + i * cur.src_stride, cur.amax_cols,
              b1, 0, keys);
    band_scales(k, &cur, b1, ue8m0, keys);
  }
  /* the quantize pass of one band, row by row, with the amax pass of the
   * next band between its rows */
  for (;;) {
    bool more = next(state, &nxt);
    int64_t arows = more && !nxt.have_scales ? nxt.amax_rows : 0, abytes = 0;
    if (arows > 0) {
      abytes = nxt.amax_cols * k->esize;
      memset(keys, 0, sizeof(uint32_t) * (size_t)blocks_of(nxt.amax_cols, b1));
    }
    int64_t n = cur.rows > arows ? cur.rows : arows;
    for (int64_t i = 0; i < n; i++) {
      const char *arow =
          i < arows ? (const char *)nxt.amax_src + i * nxt.src_stride : NULL;
      if (i < cur.rows) quantize_band_row(k, &cur, i, b1, arow, abytes);
      if (arow) k->amax(arow, nxt.amax_cols, b1, 0, keys);
    }
    if (!more) break;
    if (arows > 0) band_scales(k, &nxt, b1, ue8m0, keys);
    cur = nxt;
  }
}

/* ---- whole tensors ---------------------------------------------------- */

static rs_status check_tensor(int ndim, const int64_t *shape, int64_t b0,
                              int64_t b1, int64_t *count, rsi_err *err) {
  if (ndim > RS_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_TOO_MANY_DIMS, "%d dims: at most %d", ndim,
                    RS_MAX_DIMS);
  if (ndim < 0)
    return RSI_FAIL(err, RS_ERR_BAD_SHAPE, "%d dims: must be >= 0", ndim);
  if (ndim > 0 && !shape)
    return RSI_FAIL(err, RS_ERR_NULL_POINTER, "shape is NULL");
  if (b0 < 1 || b1 < 1)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "block of %lld x %lld: sizes must be >= 1", (long long)b0,
                    (long long)b1);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return RSI_FAIL(err, RS_ERR_BAD_SHAPE, "shape[%d] = %lld: must be >= 0",
                      d, (long long)shape[d]);
    if (__builtin_mul_overflow(n, shape[d], &n))
      return RSI_FAIL(err, RS_ERR_OVERFLOW, "element count past INT64_MAX");
  }
  *count = n;
  return RS_OK;
}

/* A dense tensor as matrices of rows x cols, each cut into blocks of
 * b0 x b1, walked as bands: one block row, `per` blocks wide at most. */
typedef struct tensor_bands {
  const char *src;
  uint8_t *dst;
  float *scales;
  int64_t esize, mats, rows, cols, b0, b1, brows, bcols, per;
  int64_t m, br, bc; /* the next band */
} tensor_bands;

static bool next_tensor_band(void *state, rsi_e4m3_band *band) {
  tensor_bands *t = state;
  if (t->m >= t->mats) return false;
  int64_t r0 = t->br * t->b0, c0 = t->bc * t->b1;
  int64_t nb = t->bcols - t->bc < t->per ? t->bcols - t->bc : t->per;
  int64_t at = (t->m * t->rows + r0) * t->cols + c0;
  band->src = band->amax_src = t->src + at * t->esize;
  band->dst = t->dst + at;
  band->scales = t->scales + (t->m * t->brows + t->br) * t->bcols + t->bc;
  band->have_scales = false;
  band->rows = band->amax_rows = t->rows - r0 < t->b0 ? t->rows - r0 : t->b0;
  int64_t left = t->cols - c0;
  band->cols = band->amax_cols = left / t->b1 < nb ? left : nb * t->b1;
  band->first = 0;
  band->src_stride = t->cols * t->esize;
  band->dst_stride = t->cols;
  if ((t->bc += nb) >= t->bcols) {
    t->bc = 0;
    if (++t->br >= t->brows) t->br = 0, t->m++;
  }
  return true;
}

rs_status rsi_quantize_blocks(rs_dtype src_dtype, int ndim,
                              const int64_t *shape, const void *src,
                              uint8_t *dst, float *scales, int64_t b0,
                              int64_t b1, bool ue8m0, rsi_err *err) {
  const rsi_e4m3_rows *k = kernels_for(src_dtype, "block quantization", err);
  if (!k) return err ? err->status : RS_ERR_UNSUPPORTED;
  int64_t count = 0;
  RSI_TRY(check_tensor(ndim, shape, b0, b1, &count, err));
  if (count == 0) return RS_OK;
  if (!src || !dst || !scales)
    return RSI_FAIL(err, RS_ERR_NULL_POINTER, "%s is NULL",
                    !src ? "src" : !dst ? "dst" : "scales");
  tensor_bands t = {.src = src, .dst = dst, .scales = scales,
                    .esize = k->esize, .b0 = b0, .b1 = b1};
  /* matrices of rows x cols; a 1-D tensor is one row, a 0-D one element */
  t.rows = ndim >= 2 ? shape[ndim - 2] : 1;
  t.cols = ndim >= 1 ? shape[ndim - 1] : 1;
  t.mats = count / (t.rows * t.cols);
  t.brows = blocks_of(t.rows, b0);
  t.bcols = blocks_of(t.cols, b1);
  t.per = rsi_e4m3_band_blocks(k->esize, b0 < t.rows ? b0 : t.rows, b1);
  rsi_e4m3_run_bands(k, b1, ue8m0, next_tensor_band, &t);
  return RS_OK;
}
