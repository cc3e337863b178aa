#include "copy.h"

#include <string.h>

#include "layout.h"

typedef struct dims {
  int n;
  int64_t ext[RSI_MAX_DIMS], ds[RSI_MAX_DIMS], ss[RSI_MAX_DIMS];
} dims;

/* Drop extent-1 dims; merge dim d into d+1 where both sides step through
 * them as one. A dense side (NULL strides) always merges. */
static void merge_dims(int ndim, const int64_t *ext, const int64_t *dstr,
                       const int64_t *sstr, dims *out) {
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (ext[d] == 1) continue;
    int64_t ds = dstr ? dstr[d] : 0, ss = sstr ? sstr[d] : 0;
    if (n > 0) {
      int k = n - 1;
      bool dok = !dstr || out->ds[k] == ds * ext[d];
      bool sok = !sstr || out->ss[k] == ss * ext[d];
      if (dok && sok) {
        out->ext[k] *= ext[d];
        out->ds[k] = ds;
        out->ss[k] = ss;
        continue;
      }
    }
    out->ext[n] = ext[d];
    out->ds[n] = ds;
    out->ss[n] = ss;
    n++;
  }
  if (n == 0) { /* a single element */
    out->ext[0] = 1;
    out->ds[0] = out->ss[0] = 1;
    n = 1;
  }
  out->n = n;
}

static void copy_strided_row(char *dst, int64_t dstep, const char *src,
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
  dims m;
  merge_dims(ndim, ext, dst_strides, src_strides, &m);
  int inner = m.n - 1;
  int64_t row_len = m.ext[inner];
  bool dense_d = !dst_strides, dense_s = !src_strides;
  int64_t dstep = (dense_d ? 1 : m.ds[inner]) * (int64_t)esize;
  int64_t sstep = (dense_s ? 1 : m.ss[inner]) * (int64_t)esize;
  bool contiguous = dstep == (int64_t)esize && sstep == (int64_t)esize;

  /* Coordinates of element lo in the outer dims. */
  int64_t idx[RSI_MAX_DIMS];
  int64_t row = lo / row_len, col = lo % row_len;
  for (int d = inner - 1; d >= 0; d--) {
    idx[d] = row % m.ext[d];
    row /= m.ext[d];
  }
  const char *dense_src = src;
  char *dense_dst = dst;
  int64_t pos = lo;
  while (pos < hi) {
    int64_t doff = 0, soff = 0;
    for (int d = 0; d < inner; d++) {
      doff += idx[d] * m.ds[d];
      soff += idx[d] * m.ss[d];
    }
    int64_t count = row_len - col;
    if (count > hi - pos) count = hi - pos;
    char *dp = dense_d ? dense_dst
                       : dst + (doff + col * m.ds[inner]) * (int64_t)esize;
    const char *sp = dense_s ? dense_src
                             : src + (soff + col * m.ss[inner]) *
                                         (int64_t)esize;
    if (contiguous)
      memcpy(dp, sp, (size_t)count * esize);
    else
      copy_strided_row(dp, dstep, sp, sstep, count, esize);
    dense_dst += count * (int64_t)esize;
    dense_src += count * (int64_t)esize;
    pos += count;
    col = 0;
    for (int d = inner - 1; d >= 0; d--) {
      if (++idx[d] < m.ext[d]) break;
      idx[d] = 0;
    }
  }
}
