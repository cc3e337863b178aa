/* SPDX-License-Identifier: Apache-2.0 */
/* Host copies of strided boxes (copy.h): the walk over contiguous runs,
 * and the plain copy that memcpy's them. */
#include "copy/copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <immintrin.h>
#define RSI_HAVE_STREAM 1
#endif

/* Drop extent-1 dims; merge dim d into d+1 where both sides step through
 * them as one. A dense side (NULL strides) always merges. */
static void merge_dims(rsi_runs *w, int ndim, const int64_t *ext,
                       const int64_t *dstr, const int64_t *sstr) {
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (ext[d] == 1) continue;
    int64_t ds = dstr ? dstr[d] : 0, ss = sstr ? sstr[d] : 0;
    if (n > 0) {
      int k = n - 1;
      bool dok = !dstr || w->ds[k] == ds * ext[d];
      bool sok = !sstr || w->ss[k] == ss * ext[d];
      if (dok && sok) {
        w->ext[k] *= ext[d];
        w->ds[k] = ds;
        w->ss[k] = ss;
        continue;
      }
    }
    w->ext[n] = ext[d];
    w->ds[n] = ds;
    w->ss[n] = ss;
    n++;
  }
  if (n == 0) { /* a single element */
    w->ext[0] = 1;
    w->ds[0] = w->ss[0] = 1;
    n = 1;
  }
  w->n = n;
}

void rsi_runs_begin(rsi_runs *w, int ndim, const int64_t *ext, size_t dsize,
                    char *dst, const int64_t *dst_strides, size_t ssize,
                    const char *src, const int64_t *src_strides, int64_t lo,
                    int64_t hi) {
  merge_dims(w, ndim, ext, dst_strides, src_strides);
  int inner = w->n - 1;
  w->dense_d = !dst_strides;
  w->dense_s = !src_strides;
  w->dsize = (int64_t)dsize;
  w->ssize = (int64_t)ssize;
  w->dstep = (w->dense_d ? 1 : w->ds[inner]) * w->dsize;
  w->sstep = (w->dense_s ? 1 : w->ss[inner]) * w->ssize;
  w->dst = w->dense_dst = dst;
  w->src = w->dense_src = src;
  w->pos = lo;
  w->hi = hi;
  /* coordinates of element lo in the outer dims */
  int64_t row_len = w->ext[inner], row = hi > lo ? lo / row_len : 0;
  w->col = hi > lo ? lo % row_len : 0;
  for (int d = inner - 1; d >= 0; d--) {
    w->idx[d] = row % w->ext[d];
    row /= w->ext[d];
  }
}

bool rsi_runs_next(rsi_runs *w, rsi_run *run) {
  if (w->pos >= w->hi) return false;
  int inner = w->n - 1;
  int64_t doff = 0, soff = 0;
  for (int d = 0; d < inner; d++) {
    doff += w->idx[d] * w->ds[d];
    soff += w->idx[d] * w->ss[d];
  }
  int64_t count = w->ext[inner] - w->col;
  if (count > w->hi - w->pos) count = w->hi - w->pos;
  run->dst = w->dense_d ? w->dense_dst
                        : w->dst + (doff + w->col * w->ds[inner]) * w->dsize;
  run->src = w->dense_s ? w->dense_src
                        : w->src + (soff + w->col * w->ss[inner]) * w->ssize;
  run->dstep = w->dstep;
  run->sstep = w->sstep;
  run->count = count;
  w->dense_dst += count * w->dsize;
  w->dense_src += count * w->ssize;
  w->pos += count;
  w->col = 0;
  for (int d = inner - 1; d >= 0; d--) {
    if (++w->idx[d] < w->ext[d]) break;
    w->idx[d] = 0;
  }
  return true;
}

void rsi_copy_strided(char *dst, int64_t dstep, const char *src,
                      int64_t sstep, int64_t count, size_t esize) {
  switch (esize) {
#define ROW(T)                                                  \
  for (int64_t j = 0; j < count; j++) {                         \
    T v;                                                        \
    memcpy(&v, src + j * sstep, sizeof v);                      \
    memcpy(dst + j * dstep, &v, sizeof v);                      \
  }                                                             \
  return;
    case 1: ROW(uint8_t)
    case 2: ROW(uint16_t)
    case 4: ROW(uint32_t)
    case 8: ROW(uint64_t)
#undef ROW
    default:
      for (int64_t j = 0; j < count; j++)
        memcpy(dst + j * dstep, src + j * sstep, esize);
  }
}

/* memcpy with stores that bypass the caches: a read of each source byte
 * and a write of each destination byte, where a cached store first reads
 * the destination's line from memory. The stores are `align`-byte aligned
 * ones; the ends before and after them go through memcpy. Weakly ordered:
 * rsi_copy_fence() before anyone else reads dst. AVX2 where the CPU has
 * it (about 1.15x the 16-byte stores on bench_exec_local), else SSE2,
 * which every x86-64 has; elsewhere plain memcpy. */
#ifdef RSI_HAVE_STREAM
/* Bytes before dst + head is `align`-aligned; n below it: all memcpy. */
static size_t stream_head(char *dst, const char *src, size_t n,
                          size_t align, size_t block) {
  size_t head = (align - ((uintptr_t)dst & (align - 1))) & (align - 1);
  if (n < head + block) head = n;
  memcpy(dst, src, head);
  return head;
}

/* One streaming loop, `vec` (`width` bytes) at a time, four per step. */
#define STREAM_COPY(name, attr, vec, width, load, store)                  \
  attr static void name(char *dst, const char *src, size_t n) {          \
    size_t i = stream_head(dst, src, n, width, 4 * width);                \
    for (; i + 4 * width <= n; i += 4 * width) {                          \
      const vec *s = (const vec *)(const void *)(src + i);                \
      vec *d = (vec *)(void *)(dst + i);                                  \
      vec a = load(s), b = load(s + 1), c = load(s + 2), e = load(s + 3); \
      store(d, a);                                                        \
      store(d + 1, b);                                                    \
      store(d + 2, c);                                                    \
      store(d + 3, e);                                                    \
    }                                                                     \
    memcpy(dst + i, src + i, n - i);                                      \
  }

STREAM_COPY(stream_avx2, __attribute__((target("avx2"))), __m256i, 32,
            _mm256_loadu_si256, _mm256_stream_si256)
STREAM_COPY(stream_sse2, , __m128i, 16, _mm_loadu_si128, _mm_stream_si128)
#undef STREAM_COPY
#endif

bool rsi_copy_stream_sse2_only = false;

static void copy_streaming(char *dst, const char *src, size_t n) {
#ifdef RSI_HAVE_STREAM
  if (!rsi_copy_stream_sse2_only && __builtin_cpu_supports("avx2"))
    stream_avx2(dst, src, n);
  else
    stream_sse2(dst, src, n);
#else
  memcpy(dst, src, n);
#endif
}

void rsi_copy_fence(void) {
#ifdef RSI_HAVE_STREAM
  _mm_sfence();
#endif
}

void rsi_copy_range_to(int ndim, const int64_t *ext, size_t esize, char *dst,
                       const int64_t *dst_strides, const char *src,
                       const int64_t *src_strides, int64_t lo, int64_t hi,
                       bool streaming) {
  if (hi <= lo) return;
  rsi_runs w;
  rsi_runs_begin(&w, ndim, ext, esize, dst, dst_strides, esize, src,
                 src_strides, lo, hi);
  bool contiguous = w.dstep == (int64_t)esize && w.sstep == (int64_t)esize;
  rsi_run r;
  while (rsi_runs_next(&w, &r)) {
    size_t bytes = (size_t)r.count * esize;
    if (contiguous && streaming && bytes >= RSI_STREAM_MIN_RUN)
      copy_streaming(r.dst, r.src, bytes);
    else if (contiguous)
      memcpy(r.dst, r.src, bytes);
    else
      rsi_copy_strided(r.dst, r.dstep, r.src, r.sstep, r.count, esize);
  }
}

void rsi_copy_range(int ndim, const int64_t *ext, size_t esize, char *dst,
                    const int64_t *dst_strides, const char *src,
                    const int64_t *src_strides, int64_t lo, int64_t hi) {
  rsi_copy_range_to(ndim, ext, esize, dst, dst_strides, src, src_strides, lo,
                    hi, false);
}
