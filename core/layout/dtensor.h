/* SPDX-License-Identifier: Apache-2.0 */
/* DTensor placements (dtensor.c): which elements of a tensor a mesh
 * coordinate holds under Shard(d), Replicate and torch's
 * _StridedShard(d, split_factor), in distribute_tensor's order or in
 * FSDP2's. Along each tensor dim a coordinate holds a list of global
 * indices, kept as runs (start, length) in local order; its local tensor
 * is the product of these lists, dense row-major, and its boxes are the
 * products of one run per dim. The one implementation behind
 * rs_dtensor_local_box, rs_dtensor_local_boxes, rs_layout_add_dtensor and
 * rs_layout_add_dtensor_strided (plain placements: split factors all 1,
 * one run per dim). */
#ifndef RS_CORE_LAYOUT_DTENSOR_H
#define RS_CORE_LAYOUT_DTENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "layout/layout.h"

/* The most boxes a coordinate may hold, and the most pieces a strided
 * placement may cut a dim into: more is refused (RS_ERR_UNSUPPORTED). */
#define RSI_DTENSOR_MAX_BOXES (1 << 20)

/* Placements checked once, and the order their mesh axes apply in. The
 * arrays are the caller's and must outlive it. */
typedef struct rsi_dtensor_spec {
  int ndim, mesh_ndim;
  const int64_t *shape, *mesh_shape;
  const int *placements;
  const int *split;       /* NULL: all 1 */
  bool fsdp2;             /* strided axes cut after the Shard axes they span */
  int axes[RSI_MAX_DIMS]; /* mesh axes in the order they apply */
} rsi_dtensor_spec;

/* Check shape, mesh, placements, split factors and order, and settle the
 * order: RS_STRIDED_AUTO takes distribute_tensor's where the two orders
 * agree and is refused (RS_ERR_INVALID_ARGUMENT) where they do not.
 * Messages name no tensor; callers that have one prefix it. */
rs_status rsi_dtensor_spec_init(rsi_dtensor_spec *s, int ndim,
                                const int64_t *shape, int mesh_ndim,
                                const int64_t *mesh_shape,
                                const int *placements, const int *split,
                                rs_strided_order order, rsi_err *err);

/* The runs of one dim: pairs (start, length) at runs_at(); where the list
 * is empty, `at` is the global index it sits at (torch.chunk's empty
 * chunk sits at the end of what it chunked). */
typedef struct rsi_runs {
  int64_t *heap; /* NULL: the one run in `one` */
  int64_t n, cap, at;
  int64_t one[2];
} rsi_runs;

typedef struct rsi_dtensor_runs {
  int ndim;
  rsi_runs dim[RSI_MAX_DIMS];
} rsi_dtensor_runs;

static inline const int64_t *rsi_runs_at(const rsi_runs *r) {
  return r->heap ? r->heap : r->one;
}

/* What coordinate coord (mesh_ndim entries) holds; out needs
 * rsi_dtensor_runs_free afterwards, whatever the status. */
rs_status rsi_dtensor_coord_runs(const rsi_dtensor_spec *s,
                                 const int64_t *coord, rsi_dtensor_runs *out,
                                 rsi_err *err);
void rsi_dtensor_runs_free(rsi_dtensor_runs *r);

/* The number of boxes (0 when the local tensor is empty) and the local
 * shape. */
int64_t rsi_dtensor_num_boxes(const rsi_dtensor_runs *r);
void rsi_dtensor_local_shape(const rsi_dtensor_runs *r, int64_t *shape);

/* Walks the boxes row-major over the dims' runs; start zeroed. */
typedef struct rsi_box_cursor {
  int64_t k[RSI_MAX_DIMS], pos[RSI_MAX_DIMS];
} rsi_box_cursor;

/* The box at c (global offset and extent, and where it starts in the
 * local tensor: local may be NULL), then c moves to the next. Only for
 * the rsi_dtensor_num_boxes boxes there are. */
void rsi_dtensor_box_next(const rsi_dtensor_runs *r, rsi_box_cursor *c,
                          int64_t *offset, int64_t *extent, int64_t *local);

/* rs_dtensor_local_boxes after its NULL checks; *num_boxes set. */
rs_status rsi_dtensor_local_boxes(
    int ndim, const int64_t *shape, int mesh_ndim, const int64_t *mesh_shape,
    const int *placements, const int *split, rs_strided_order order,
    const int64_t *coord, int64_t *local_shape, int max_boxes, int *num_boxes,
    int64_t *offsets, int64_t *extents, int64_t *local_offsets, rsi_err *err);

/* "[StridedShard(0, 2), Shard(0)]" into buf (placements as the spec's). */
void rsi_dtensor_describe(const rsi_dtensor_spec *s, char *buf, size_t n);

#endif
