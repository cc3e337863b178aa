/* SPDX-License-Identifier: Apache-2.0 */
/* Box algebra (box.h): volumes, intersections, containment, subtraction
 * into slabs, and the order and aliasing of a strided box's dims. */
#include "layout/box.h"

#include <string.h>

bool rsi_box_volume(int ndim, const int64_t *ext, int64_t *out) {
  int64_t v = 1;
  for (int d = 0; d < ndim; d++) {
    if (ext[d] <= 0) {
      *out = 0;
      return true;
    }
    if (__builtin_mul_overflow(v, ext[d], &v)) return false;
  }
  *out = v;
  return true;
}

bool rsi_box_is_empty(int ndim, const int64_t *ext) {
  for (int d = 0; d < ndim; d++)
    if (ext[d] <= 0) return true;
  return false;
}

bool rsi_box_equal(int ndim, const int64_t *aoff, const int64_t *aext,
                   const int64_t *boff, const int64_t *bext) {
  for (int d = 0; d < ndim; d++)
    if (aoff[d] != boff[d] || aext[d] != bext[d]) return false;
  return true;
}

bool rsi_box_intersect(int ndim, const int64_t *aoff, const int64_t *aext,
                       const int64_t *boff, const int64_t *bext,
                       int64_t *ooff, int64_t *oext) {
  for (int d = 0; d < ndim; d++) {
    int64_t lo = aoff[d] > boff[d] ? aoff[d] : boff[d];
    int64_t ahi = aoff[d] + aext[d], bhi = boff[d] + bext[d];
    int64_t hi = ahi < bhi ? ahi : bhi;
    if (hi <= lo) return false;
    ooff[d] = lo;
    oext[d] = hi - lo;
  }
  return true;
}

bool rsi_box_contains(int ndim, const int64_t *aoff, const int64_t *aext,
                      const int64_t *boff, const int64_t *bext) {
  for (int d = 0; d < ndim; d++)
    if (boff[d] < aoff[d] || boff[d] + bext[d] > aoff[d] + aext[d])
      return false;
  return true;
}

int rsi_box_subtract(int ndim, const int64_t *aoff, const int64_t *aext,
                     const int64_t *boff, const int64_t *bext,
                     int64_t *frag_off, int64_t *frag_ext) {
  int64_t ioff[64], iext[64];
  if (!rsi_box_intersect(ndim, aoff, aext, boff, bext, ioff, iext)) {
    memcpy(frag_off, aoff, (size_t)ndim * sizeof *aoff);
    memcpy(frag_ext, aext, (size_t)ndim * sizeof *aext);
    return 1;
  }
  /* Peel slabs off the remainder one dim at a time: below and above the
   * intersection in dim d, with dims < d already narrowed to it. */
  int64_t coff[64], cext[64];
  memcpy(coff, aoff, (size_t)ndim * sizeof *aoff);
  memcpy(cext, aext, (size_t)ndim * sizeof *aext);
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    int64_t lo = ioff[d], hi = ioff[d] + iext[d];
    int64_t clo = coff[d], chi = coff[d] + cext[d];
    if (lo > clo) {
      memcpy(frag_off + n * ndim, coff, (size_t)ndim * sizeof *coff);
      memcpy(frag_ext + n * ndim, cext, (size_t)ndim * sizeof *cext);
      frag_ext[n * ndim + d] = lo - clo;
      n++;
    }
    if (hi < chi) {
      memcpy(frag_off + n * ndim, coff, (size_t)ndim * sizeof *coff);
      memcpy(frag_ext + n * ndim, cext, (size_t)ndim * sizeof *cext);
      frag_off[n * ndim + d] = hi;
      frag_ext[n * ndim + d] = chi - hi;
      n++;
    }
    coff[d] = lo;
    cext[d] = hi - lo;
  }
  return n;
}

void rsi_box_dense_strides(int ndim, const int64_t *ext, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= ext[d] > 0 ? ext[d] : 1;
  }
}

int rsi_box_stride_order(int ndim, const int64_t *ext, const int64_t *strides,
                         int *order) {
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (ext[d] <= 1) continue;
    int at = n++; /* insert d after every dim of larger or equal stride */
    for (; at > 0 && strides[order[at - 1]] < strides[d]; at--)
      order[at] = order[at - 1];
    order[at] = d;
  }
  return n;
}

bool rsi_box_strides_injective(int ndim, const int64_t *ext,
                               const int64_t *strides) {
  int order[64];
  int n = rsi_box_stride_order(ndim, ext, strides, order);
  int64_t reach = 0; /* the largest offset the smaller strides reach */
  for (int i = n - 1; i >= 0; i--) {
    int64_t step = strides[order[i]], span;
    if (step <= reach ||
        __builtin_mul_overflow(ext[order[i]] - 1, step, &span) ||
        __builtin_add_overflow(reach, span, &reach))
      return false;
  }
  return true;
}
