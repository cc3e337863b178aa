/* SPDX-License-Identifier: Apache-2.0 */
/* Host copies of strided boxes: the pack and unpack of the executor.
 * Dimensions are merged where both sides are contiguous across them, and
 * contiguous runs are copied with memcpy. The walk over runs is shared
 * with the converting copies (copy_convert.c), whose two sides may have
 * elements of different sizes. */
#ifndef RS_CORE_COPY_H
#define RS_CORE_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <reshard/reshard.h>

/* Copy elements [lo, hi) (row-major order of a box of extent ext) from src
 * to dst. Each side is either strided (strides in elements, base = element
 * 0 of the box) or, with strides NULL, a dense stream whose base holds
 * element lo. */
void rsi_copy_range(int ndim, const int64_t *ext, size_t esize, char *dst,
                    const int64_t *dst_strides, const char *src,
                    const int64_t *src_strides, int64_t lo, int64_t hi);

/* rsi_copy_range, and with `streaming` its contiguous runs of at least
 * RSI_STREAM_MIN_RUN bytes are written with stores that bypass the caches
 * (x86-64; elsewhere memcpy): for bytes nobody reads soon, in copies
 * larger than the caches. The stores are weakly ordered: call
 * rsi_copy_fence() before the copy counts as done. */
#define RSI_STREAM_MIN_RUN 256
void rsi_copy_range_to(int ndim, const int64_t *ext, size_t esize, char *dst,
                       const int64_t *dst_strides, const char *src,
                       const int64_t *src_strides, int64_t lo, int64_t hi,
                       bool streaming);

/* For tests: stream with the 16-byte stores even where AVX2 is there. */
extern bool rsi_copy_stream_sse2_only;

/* Order every streaming store before the stores that follow. */
void rsi_copy_fence(void);

/* Copy count elements of esize bytes, each side stepping dstep / sstep
 * bytes. */
void rsi_copy_strided(char *dst, int64_t dstep, const char *src,
                      int64_t sstep, int64_t count, size_t esize);

/* One run of a walk: count elements, at dst and src, each side stepping
 * by dstep / sstep bytes. */
typedef struct rsi_run {
  char *dst;
  const char *src;
  int64_t dstep, sstep, count;
} rsi_run;

/* A walk over elements [lo, hi) of a box, one run per row of its merged
 * dims; the sides as rsi_copy_range's, with elements of dsize and ssize
 * bytes. */
typedef struct rsi_runs {
  int n; /* merged dims; the last is the row */
  int64_t ext[RS_MAX_DIMS], ds[RS_MAX_DIMS], ss[RS_MAX_DIMS];
  int64_t idx[RS_MAX_DIMS]; /* the current row in the outer dims */
  int64_t col, pos, hi;
  int64_t dsize, ssize, dstep, sstep;
  char *dst, *dense_dst;
  const char *src, *dense_src;
  bool dense_d, dense_s;
} rsi_runs;

void rsi_runs_begin(rsi_runs *w, int ndim, const int64_t *ext, size_t dsize,
                    char *dst, const int64_t *dst_strides, size_t ssize,
                    const char *src, const int64_t *src_strides, int64_t lo,
                    int64_t hi);

/* The next run; false once [lo, hi) is done. */
bool rsi_runs_next(rsi_runs *w, rsi_run *run);

#endif
