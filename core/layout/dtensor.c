/* SPDX-License-Identifier: Apache-2.0 */
/* DTensor placements: a mesh coordinate's local box, following torch.chunk
 * and DTensor's _local_shard_size_and_offset exactly: a dim of size s split
 * n ways gets chunks of ceil(s / n); trailing chunks may be short or empty
 * (an empty chunk sits at the end of the dim). Mesh axes that shard the same
 * dim nest left to right: each splits the chunk the axes before it left. */
#include "layout/layout.h"

/* The box of coord into offset and extent (ndim entries each, ndim already
 * checked); on failure they may hold part of it. */
static rs_status compute_box(int ndim, const int64_t *shape, int mesh_ndim,
                             const int64_t *mesh_shape, const int *placements,
                             const int64_t *coord, int64_t *offset,
                             int64_t *extent, rsi_err *err) {
  if (mesh_ndim < 1 || mesh_ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "mesh of %d axes, must be 1..%d", mesh_ndim,
                    RSI_MAX_DIMS);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 1)
      return RSI_FAIL(err, RS_ERR_BAD_SHAPE,
                      "size %lld in dim %d, must be at least 1",
                      (long long)shape[d], d);
    offset[d] = 0;
    extent[d] = shape[d];
  }
  for (int a = 0; a < mesh_ndim; a++) {
    if (mesh_shape[a] < 1)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "mesh axis %d has size %lld, must be at least 1", a,
                      (long long)mesh_shape[a]);
    if (coord[a] < 0 || coord[a] >= mesh_shape[a])
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "mesh coordinate %lld on axis %d outside [0, %lld)",
                      (long long)coord[a], a, (long long)mesh_shape[a]);
    int p = placements[a];
    if (p == RS_REPLICATE) continue;
    if (p < 0 || p >= ndim)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "placement %d of mesh axis %d is neither RS_REPLICATE "
                      "nor a dim of the %d-dim tensor",
                      p, a, ndim);
    int64_t size = extent[p], n = mesh_shape[a];
    int64_t chunk = size / n + (size % n != 0);
    int64_t start;
    if (__builtin_mul_overflow(chunk, coord[a], &start) || start >= size) {
      /* empty: sits at the end, as DTensor puts it */
      offset[p] += size;
      extent[p] = 0;
    } else {
      offset[p] += start;
      extent[p] = chunk < size - start ? chunk : size - start;
    }
  }
  return RS_OK;
}

rs_status rsi_dtensor_box(int ndim, const int64_t *shape, int mesh_ndim,
                          const int64_t *mesh_shape, const int *placements,
                          const int64_t *coord, int64_t *offset,
                          int64_t *extent, rsi_err *err) {
  if (ndim < 1 || ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, ndim < 1 ? RS_ERR_BAD_SHAPE : RS_ERR_TOO_MANY_DIMS,
                    "tensor of %d dims, must be 1..%d", ndim, RSI_MAX_DIMS);
  /* Worked out aside, so that a refusal leaves no half a box behind: the
   * out arrays get the box, or zeros. */
  int64_t off[RSI_MAX_DIMS], ext[RSI_MAX_DIMS];
  rs_status st = compute_box(ndim, shape, mesh_ndim, mesh_shape, placements,
                             coord, off, ext, err);
  for (int d = 0; d < ndim; d++) {
    offset[d] = st == RS_OK ? off[d] : 0;
    extent[d] = st == RS_OK ? ext[d] : 0;
  }
  return st;
}
