/* SPDX-License-Identifier: Apache-2.0 */
/* DTensor placements into a layout (rs_layout_add_dtensor and
 * rs_layout_add_dtensor_strided): the mesh and its ranks checked, then
 * every rank's boxes (dtensor.c) added as shards of its dense row-major
 * local tensor, all or nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "layout/box.h"
#include "layout/dtensor.h"
#include "layout/layout.h"

/* The mesh fits the world, and each of its ranks is in it once. */
static rs_status check_mesh(const rs_layout *layout, const char *name,
                            int mesh_ndim, const int64_t *mesh_shape,
                            const int *mesh_ranks, int64_t *nranks) {
  rsi_err *err = layout->ctx->err;
  int world = layout->ctx->world_size;
  if (mesh_ndim < 1 || mesh_ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': mesh of %d axes, must be 1..%d", name,
                    mesh_ndim, RSI_MAX_DIMS);
  *nranks = 1;
  for (int a = 0; a < mesh_ndim; a++) {
    if (mesh_shape[a] < 1 || mesh_shape[a] > world)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "tensor '%s': mesh axis %d has size %lld, must be 1..%d "
                      "(the world size)",
                      name, a, (long long)mesh_shape[a], world);
    *nranks *= mesh_shape[a];
    if (*nranks > world)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "tensor '%s': the mesh has more ranks than the world "
                      "size %d",
                      name, world);
  }
  unsigned char *seen = calloc((size_t)world, 1);
  if (!seen) return RSI_NOMEM(err);
  rs_status st = RS_OK;
  for (int64_t i = 0; i < *nranks && st == RS_OK; i++) {
    int r = mesh_ranks[i];
    if (r < 0 || r >= world)
      st =
          RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                   "tensor '%s': mesh rank %d outside [0, %d)", name, r, world);
    else if (seen[r]++)
      st = RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': rank %d appears twice in the mesh", name, r);
  }
  free(seen);
  return st;
}

/* The boxes of one rank's dense local tensor at byte_offset of its
 * buffer: one box dense, several with the local tensor's strides, each at
 * its own byte offset (as bindings/python's Layout._add_local). */
static rs_status add_rank(rs_layout *layout, int t, int rank,
                          const rsi_dtensor_runs *runs, int buffer,
                          int64_t byte_offset) {
  const rsi_tensor *tensor = &layout->tensors[t];
  int ndim = tensor->ndim;
  int64_t n = rsi_dtensor_num_boxes(runs);
  int64_t off[RSI_MAX_DIMS], ext[RSI_MAX_DIMS], local[RSI_MAX_DIMS];
  int64_t shape[RSI_MAX_DIMS], strides[RSI_MAX_DIMS];
  rsi_dtensor_local_shape(runs, shape);
  rsi_box_dense_strides(ndim, shape, strides); /* within the tensor's size */
  rsi_box_cursor c = {{0}, {0}};
  for (int64_t i = 0; i < n; i++) {
    rsi_dtensor_box_next(runs, &c, off, ext, local);
    int64_t at = 0, boff;
    for (int d = 0; d < ndim; d++) at += local[d] * strides[d];
    if (__builtin_add_overflow(byte_offset, at * tensor->esize, &boff))
      return RSI_FAIL(layout->ctx->err, RS_ERR_OVERFLOW,
                      "tensor '%s' rank %d: byte offset %lld plus a box's "
                      "place in the local tensor overflows int64",
                      tensor->name, rank, (long long)byte_offset);
    RSI_TRY(rsi_layout_add_shard_to(layout, t, rank, off, ext, buffer, boff,
                                    n == 1 ? NULL : strides));
  }
  return RS_OK;
}

/* The placement's own messages name no tensor: put its name first. */
static rs_status named(rsi_err *err, rs_status st, const char *name) {
  char why[RSI_ERR_MSG_BYTES];
  snprintf(why, sizeof why, "%s", err->msg);
  return RSI_FAIL(err, st, "tensor '%s': %s", name, why);
}

rs_status rsi_layout_add_dtensor(rs_layout *layout, const char *name,
                                 int mesh_ndim, const int64_t *mesh_shape,
                                 const int *mesh_ranks, const int *placements,
                                 const int *split, rs_strided_order order,
                                 int buffer, int64_t byte_offset) {
  rsi_err *err = layout->ctx->err;
  int t = rsi_layout_find(layout, name);
  if (t < 0)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_TENSOR,
                    "no tensor named '%s' in this layout", name);
  const rsi_tensor *tensor = &layout->tensors[t];
  int64_t nranks = 0;
  RSI_TRY(check_mesh(layout, name, mesh_ndim, mesh_shape, mesh_ranks, &nranks));
  rsi_dtensor_spec spec;
  rs_status st =
      rsi_dtensor_spec_init(&spec, tensor->ndim, tensor->shape, mesh_ndim,
                            mesh_shape, placements, split, order, err);
  if (st != RS_OK) return named(err, st, name);
  /* Add every rank's boxes; on failure take back what was added. */
  rsi_layout_mark mark = rsi_layout_mark_now(layout);
  int64_t coord[RSI_MAX_DIMS] = {0};
  for (int64_t i = 0; i < nranks && st == RS_OK; i++) {
    rsi_dtensor_runs runs = {0};
    st = rsi_dtensor_coord_runs(&spec, coord, &runs, err);
    if (st != RS_OK)
      named(err, st, name);
    else
      st = add_rank(layout, t, mesh_ranks[i], &runs, buffer, byte_offset);
    rsi_dtensor_runs_free(&runs);
    for (int a = mesh_ndim - 1; a >= 0; a--) { /* next row-major coord */
      if (++coord[a] < mesh_shape[a]) break;
      coord[a] = 0;
    }
  }
  if (st != RS_OK) rsi_layout_roll_back(layout, &mark);
  return st;
}
