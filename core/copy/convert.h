/* SPDX-License-Identifier: Apache-2.0 */
/* Host conversion of elements, for the copy engine when a destination has
 * another dtype than its source: plain casts between f32, bf16 and f16,
 * and block-scaled fp8 e4m3 as DeepSeek-V3-style engines load it (the
 * per-element math is convert_elem.h's).
 *
 * Regions are rows x cols elements, row strides in elements (a row of a
 * region is contiguous); every pointer is aligned to its element size.
 * Dispatch on dtypes happens once per call, outside the loops over
 * elements.
 *
 * Block-scaled e4m3: a tensor's last two dims are cut into blocks of
 * b0 x b1 (a 1-D tensor: blocks of b1 over its only dim; leading dims are
 * independent; a block at an edge holds what is there). Per block:
 *   amax  = max |x| over the block's values, converted to f32 exactly; a
 *           NaN anywhere in the block makes amax NaN (as torch's amax);
 *   scale = rsi_e4m3_scale(amax) or rsi_e4m3_scale_ue8m0(amax);
 *   value = rsi_e4m3_quantize(x, scale), so a NaN block is all NaN with a
 *           NaN scale;
 * and a reader takes value * scale. */
#ifndef RS_CORE_CONVERT_H
#define RS_CORE_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

/* Converts n contiguous elements of src into dst (no overlap). */
typedef void (*rsi_cast_fn)(void *dst, const void *src, int64_t n);

/* The cast from src_dtype to dst_dtype, for f32, bf16 and f16 in any pair
 * (the same dtype copies); NULL for any other pair. */
rsi_cast_fn rsi_convert_cast_fn(rs_dtype dst_dtype, rs_dtype src_dtype);

/* Casts rows x cols elements: row r of src (src + r * src_stride) into row
 * r of dst. RS_ERR_UNSUPPORTED for a pair rsi_convert_cast_fn refuses;
 * RS_ERR_INVALID_ARGUMENT for negative rows or cols. */
rs_status rsi_convert_cast_rows(rs_dtype dst_dtype, void *dst,
                                int64_t dst_stride, rs_dtype src_dtype,
                                const void *src, int64_t src_stride,
                                int64_t rows, int64_t cols, rsi_err *err);

/* *amax = max |x| over rows x cols elements of src (f32, bf16 or f16),
 * exact; the quiet NaN 0x7fc00000 when any element is NaN; 0 for an empty
 * region. RS_ERR_UNSUPPORTED for another dtype; RS_ERR_INVALID_ARGUMENT
 * for negative rows or cols. */
rs_status rsi_convert_amax(rs_dtype src_dtype, const void *src,
                           int64_t src_stride, int64_t rows, int64_t cols,
                           float *amax, rsi_err *err);

/* dst[r][c] = rsi_e4m3_quantize(src[r][c], scale) over rows x cols (src
 * f32, bf16 or f16). A power-of-two scale (every UE8M0 one) multiplies by
 * its exact reciprocal, which gives the division's result bit for bit.
 * Errors as rsi_convert_amax's. */
rs_status rsi_convert_quantize_e4m3(uint8_t *dst, int64_t dst_stride,
                                    rs_dtype src_dtype, const void *src,
                                    int64_t src_stride, int64_t rows,
                                    int64_t cols, float scale, rsi_err *err);

/* Block-scaled e4m3 a row at a time, for callers that walk the blocks
 * themselves (the copy engine): the two passes over one row of a run of
 * blocks side by side, picked once per source dtype and called without
 * checks, one call per row. A row is `cols` (>= 0) contiguous elements
 * whose element 0 is column `first` (0 <= first < b1) of a block of b1
 * columns: block 0 of the row holds its first min(b1 - first, cols)
 * elements, each next block the next b1 (the last what is left).
 *
 * A block's running max |x| is kept as a "key": the bit pattern of |x| in
 * the source dtype, zero-extended (with the sign clear, patterns order as
 * magnitudes do, and a NaN sorts above infinity). A block starts at key 0.
 * Each block of a row has its own scale, of any value. */
typedef struct rsi_e4m3_rows {
  int64_t esize; /* bytes of a source element */
  /* keys[j] = max(keys[j], key of each element of block j of the row). */
  void (*amax)(const void *src, int64_t cols, int64_t b1, int64_t first,
               uint32_t *keys);
  /* The amax a key stands for, exact; any NaN as the quiet NaN
   * 0x7fc00000. */
  float (*key_amax)(uint32_t key);
  /* dst[c] = rsi_e4m3_quantize(src[c], scales[j]) over each block j of the
   * row (no overlap), as rsi_convert_quantize_e4m3 gives it. */
  void (*quantize)(uint8_t *dst, const void *src, int64_t cols, int64_t b1,
                   int64_t first, const float *scales);
} rsi_e4m3_rows;

/* The row kernels of src_dtype (f32, bf16, f16); NULL for another. */
const rsi_e4m3_rows *rsi_convert_e4m3_rows(rs_dtype src_dtype);

/* Block-scaled e4m3 a band at a time: the rows of one block row that are
 * to be quantized, over a run of its blocks side by side, for callers
 * that walk a tensor or a box (the copy engine). */
typedef struct rsi_e4m3_band {
  /* Amax pass, skipped when have_scales: amax_rows rows of amax_cols
   * elements at amax_src, element 0 at a block's first column (whole
   * blocks, the last one maybe short), one scale a block into scales[]. */
  const void *amax_src;
  int64_t amax_rows, amax_cols;
  bool have_scales; /* scales[] hold the blocks' scales already */
  float *scales;
  /* Quantize pass: rows x cols elements at src (element 0 at column
   * `first` of scales[0]'s block) into dst. */
  const void *src;
  uint8_t *dst;
  int64_t rows, cols, first;
  int64_t src_stride, dst_stride; /* bytes from a row to the next */
} rsi_e4m3_band;

/* The most blocks a band takes, and the source bytes it aims at. */
#define RSI_E4M3_BAND_BLOCKS 256
#define RSI_E4M3_BAND_BYTES (4 << 20)

/* Blocks side by side in a band whose block row has `rows` rows, of
 * elements of esize bytes: 1 to RSI_E4M3_BAND_BLOCKS. */
int64_t rsi_e4m3_band_blocks(int64_t esize, int64_t rows, int64_t b1);

/* Quantizes the bands that next() gives (true with one into *band, false
 * after the last), in order, each band's amax pass before its quantize
 * pass: k's kernels, blocks of b1 columns (amax_cols at most
 * RSI_E4M3_BAND_BLOCKS blocks), the scale rule of ue8m0 (the amax pass
 * writes scales[] only after the quantize pass of the band before has
 * ended). The quantize pass of one band runs with the amax pass of the
 * next between its rows, and prefetches that pass's rows a slice at a
 * time, so that the reads from memory of one overlap the arithmetic of
 * the other. A band that has_scales must come after the band that finds
 * them. */
void rsi_e4m3_run_bands(const rsi_e4m3_rows *k, int64_t b1, bool ue8m0,
                        bool (*next)(void *state, rsi_e4m3_band *band),
                        void *state);

/* Block-scaled e4m3 of a whole dense row-major tensor of `ndim` dims
 * (0..RS_MAX_DIMS; 0 is one element) and `shape` (each >= 0): dst gets
 * every element (dense, same shape), scales one f32 per block, dense over
 * [leading dims..., ceil(shape[ndim-2] / b0), ceil(shape[ndim-1] / b1)]
 * (1-D: [ceil(shape[0] / b1)]). ue8m0 picks rsi_e4m3_scale_ue8m0.
 * RS_ERR_UNSUPPORTED for a src_dtype other than f32, bf16, f16;
 * RS_ERR_TOO_MANY_DIMS for ndim past RS_MAX_DIMS, RS_ERR_BAD_SHAPE for a
 * negative ndim or size, RS_ERR_INVALID_ARGUMENT for a block size < 1,
 * RS_ERR_OVERFLOW for an element count past INT64_MAX, RS_ERR_NULL_POINTER
 * for a NULL shape, or a NULL buffer of a tensor that has elements. */
rs_status rsi_quantize_blocks(rs_dtype src_dtype, int ndim,
                              const int64_t *shape, const void *src,
                              uint8_t *dst, float *scales, int64_t b0,
                              int64_t b1, bool ue8m0, rsi_err *err);

#endif
