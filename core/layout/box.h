/* SPDX-License-Identifier: Apache-2.0 */
/* Box algebra: hyper-rectangles [off, off+ext) in a tensor's index space.
 * A box of ndim dims is two int64 arrays (offset, extent). Pure functions,
 * no allocation. Extents are >= 0; a box with any extent 0 is empty. */
#ifndef RS_CORE_BOX_H
#define RS_CORE_BOX_H

#include <stdbool.h>
#include <stdint.h>

/* Number of elements; false if it overflows int64. */
bool rsi_box_volume(int ndim, const int64_t *ext, int64_t *out);

bool rsi_box_is_empty(int ndim, const int64_t *ext);

bool rsi_box_equal(int ndim, const int64_t *aoff, const int64_t *aext,
                   const int64_t *boff, const int64_t *bext);

/* Intersection of a and b into (ooff, oext); returns false (and leaves the
 * output undefined) when it is empty. The output may alias a. */
bool rsi_box_intersect(int ndim, const int64_t *aoff, const int64_t *aext,
                       const int64_t *boff, const int64_t *bext,
                       int64_t *ooff, int64_t *oext);

/* True when b lies entirely inside a. */
bool rsi_box_contains(int ndim, const int64_t *aoff, const int64_t *aext,
                      const int64_t *boff, const int64_t *bext);

/* a minus b as at most 2*ndim disjoint boxes, written to frag_off/frag_ext
 * (each room for 2*ndim*ndim int64, box k at [k*ndim, (k+1)*ndim)). Returns
 * the number of fragments: 0 when b covers a, 1 (a itself) when they do
 * not meet. Fragments are slabs cut dim by dim, in a fixed order. */
int rsi_box_subtract(int ndim, const int64_t *aoff, const int64_t *aext,
                     const int64_t *boff, const int64_t *bext,
                     int64_t *frag_off, int64_t *frag_ext);

/* Dense row-major strides (in elements) of a box of extent ext. */
void rsi_box_dense_strides(int ndim, const int64_t *ext, int64_t *strides);

/* The dims of a strided region of extent ext whose extent is above 1, by
 * descending stride (equal strides: the lower dim first), into order.
 * Returns how many there are. */
int rsi_box_stride_order(int ndim, const int64_t *ext, const int64_t *strides,
                         int *order);

/* Whether element strides map every index of extent ext to its own
 * element offset, by a sufficient rule: taken from the smallest stride up,
 * each stride steps past all that the smaller ones reach. False as well
 * when a reach overflows int64. */
bool rsi_box_strides_injective(int ndim, const int64_t *ext,
                               const int64_t *strides);

#endif
