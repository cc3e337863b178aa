/* Host copies of strided boxes (copy.h): the walk over contiguous runs,
 * and the plain copy that memcpy's them. */
#include "copy.h"

#include <string.h>

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

void rsi_copy_range(int ndim, const int64_t *ext, size_t esize, char *dst,
                    const int64_t *dst_strides, const char *src,
                    const int64_t *src_strides, int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  rsi_runs w;
  rsi_runs_begin(&w, ndim, ext, esize, dst, dst_strides, esize, src,
                 src_strides, lo, hi);
  bool contiguous = w.dstep == (int64_t)esize && w.sstep == (int64_t)esize;
  rsi_run r;
  while (rsi_runs_next(&w, &r)) {
    if (contiguous)
      memcpy(r.dst, r.src, (size_t)r.count * esize);
    else
      rsi_copy_strided(r.dst, r.dstep, r.src, r.sstep, r.count, esize);
  }
}
