/* SPDX-License-Identifier: Apache-2.0 */
/* The layout calls of the public API: argument checks, then core/layout
 * (declaring tensors and shards) and core/wire (serializing, and
 * deserializing in place, all or nothing). */
#include <string.h>

#include "api.h"
#include "layout/dtensor.h"
#include "layout/layout.h"
#include "layout/wire.h"

rs_status rs_layout_create(rs_context *ctx, rs_layout **out) {
  API_REQUIRE(out, ctx ? ctx->err : rsi_thread_err(), "rs_layout_create");
  *out = NULL;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_layout_create");
  return rsi_layout_create(ctx, out);
}

void rs_layout_destroy(rs_layout *layout) { rsi_layout_destroy(layout); }

rs_status rs_layout_add_tensor(rs_layout *layout, const char *name,
                               rs_dtype dtype, int ndim,
                               const int64_t *shape) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_add_tensor");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(name, err, "rs_layout_add_tensor");
  API_REQUIRE(shape, err, "rs_layout_add_tensor");
  return rsi_layout_add_tensor(layout, name, dtype, ndim, shape);
}

rs_status rs_layout_set_block_scales(rs_layout *layout, const char *values,
                                     const char *scales, int64_t block_rows,
                                     int64_t block_cols, rs_scale_rule rule) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_set_block_scales");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(values, err, "rs_layout_set_block_scales");
  API_REQUIRE(scales, err, "rs_layout_set_block_scales");
  int v = rsi_layout_find(layout, values), s = rsi_layout_find(layout, scales);
  if (v < 0 || s < 0)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_TENSOR,
                    "no tensor named '%s' in this layout",
                    v < 0 ? values : scales);
  return rsi_layout_set_block_scales(layout, v, s, block_rows, block_cols,
                                     rule);
}

rs_status rs_layout_add_shard(rs_layout *layout, const char *name, int rank,
                              const int64_t *offset, const int64_t *extent,
                              int buffer, int64_t byte_offset,
                              const int64_t *strides) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_add_shard");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(name, err, "rs_layout_add_shard");
  API_REQUIRE(offset, err, "rs_layout_add_shard");
  API_REQUIRE(extent, err, "rs_layout_add_shard");
  return rsi_layout_add_shard(layout, name, rank, offset, extent, buffer,
                              byte_offset, strides);
}

rs_status rs_layout_add_dtensor(rs_layout *layout, const char *name,
                                int mesh_ndim, const int64_t *mesh_shape,
                                const int *mesh_ranks, const int *placements,
                                int buffer, int64_t byte_offset) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_add_dtensor");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(name, err, "rs_layout_add_dtensor");
  API_REQUIRE(mesh_shape, err, "rs_layout_add_dtensor");
  API_REQUIRE(mesh_ranks, err, "rs_layout_add_dtensor");
  API_REQUIRE(placements, err, "rs_layout_add_dtensor");
  return rsi_layout_add_dtensor(layout, name, mesh_ndim, mesh_shape, mesh_ranks,
                                placements, NULL, RS_STRIDED_AUTO, buffer,
                                byte_offset);
}

rs_status rs_layout_add_dtensor_strided(
    rs_layout *layout, const char *name, int mesh_ndim,
    const int64_t *mesh_shape, const int *mesh_ranks, const int *placements,
    const int *split_factors, rs_strided_order order, int buffer,
    int64_t byte_offset) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_add_dtensor_strided");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(name, err, "rs_layout_add_dtensor_strided");
  API_REQUIRE(mesh_shape, err, "rs_layout_add_dtensor_strided");
  API_REQUIRE(mesh_ranks, err, "rs_layout_add_dtensor_strided");
  API_REQUIRE(placements, err, "rs_layout_add_dtensor_strided");
  return rsi_layout_add_dtensor(layout, name, mesh_ndim, mesh_shape, mesh_ranks,
                                placements, split_factors, order, buffer,
                                byte_offset);
}

rs_status rs_dtensor_local_box(int ndim, const int64_t *shape, int mesh_ndim,
                               const int64_t *mesh_shape,
                               const int *placements, const int64_t *coord,
                               int64_t *offset, int64_t *extent) {
  rsi_err *err = rsi_thread_err();
  /* Out arrays are zeroed before anything is checked; their length is
   * known only when ndim is valid. rsi_dtensor_box writes them whole. */
  bool sized = ndim >= 1 && ndim <= RS_MAX_DIMS;
  if (sized && offset) memset(offset, 0, (size_t)ndim * sizeof *offset);
  if (sized && extent) memset(extent, 0, (size_t)ndim * sizeof *extent);
  API_REQUIRE(shape, err, "rs_dtensor_local_box");
  API_REQUIRE(mesh_shape, err, "rs_dtensor_local_box");
  API_REQUIRE(placements, err, "rs_dtensor_local_box");
  API_REQUIRE(coord, err, "rs_dtensor_local_box");
  API_REQUIRE(offset, err, "rs_dtensor_local_box");
  API_REQUIRE(extent, err, "rs_dtensor_local_box");
  return rsi_dtensor_box(ndim, shape, mesh_ndim, mesh_shape, placements,
                         coord, offset, extent, err);
}

rs_status rs_dtensor_local_boxes(
    int ndim, const int64_t *shape, int mesh_ndim, const int64_t *mesh_shape,
    const int *placements, const int *split_factors, rs_strided_order order,
    const int64_t *coord, int64_t *local_shape, int max_boxes, int *num_boxes,
    int64_t *offsets, int64_t *extents, int64_t *local_offsets) {
  rsi_err *err = rsi_thread_err();
  if (num_boxes) *num_boxes = 0;
  API_REQUIRE(shape, err, "rs_dtensor_local_boxes");
  API_REQUIRE(mesh_shape, err, "rs_dtensor_local_boxes");
  API_REQUIRE(placements, err, "rs_dtensor_local_boxes");
  API_REQUIRE(coord, err, "rs_dtensor_local_boxes");
  API_REQUIRE(local_shape, err, "rs_dtensor_local_boxes");
  API_REQUIRE(num_boxes, err, "rs_dtensor_local_boxes");
  /* the box arrays: checked by the core, where max_boxes says if needed */
  return rsi_dtensor_local_boxes(ndim, shape, mesh_ndim, mesh_shape, placements,
                                 split_factors, order, coord, local_shape,
                                 max_boxes, num_boxes, offsets, extents,
                                 local_offsets, err);
}

rs_status rs_layout_num_tensors(const rs_layout *layout, int *out) {
  if (out) *out = 0;
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_num_tensors");
  API_REQUIRE(out, layout->ctx->err, "rs_layout_num_tensors");
  *out = layout->ntensors;
  return RS_OK;
}

rs_status rs_layout_num_shards(const rs_layout *layout, int64_t *out) {
  if (out) *out = 0;
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_num_shards");
  API_REQUIRE(out, layout->ctx->err, "rs_layout_num_shards");
  *out = layout->nshards;
  return RS_OK;
}

rs_status rs_layout_serialize(const rs_layout *layout, void **bytes,
                              size_t *length) {
  if (bytes) *bytes = NULL;
  if (length) *length = 0;
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_serialize");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(bytes, err, "rs_layout_serialize");
  API_REQUIRE(length, err, "rs_layout_serialize");
  int rank = layout->ctx->rank == RS_ALL_RANKS ? 0 : layout->ctx->rank;
  return rsi_wire_encode(layout, rank, bytes, length, err);
}

rs_status rs_layout_deserialize(rs_layout *layout, const void *bytes,
                                size_t length) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_deserialize");
  rsi_err *err = layout->ctx->err;
  API_REQUIRE(bytes, err, "rs_layout_deserialize");
  return rsi_wire_merge(layout, bytes, &length, 1, true, err);
}

const char *rs_layout_last_error(const rs_layout *layout) {
  return layout ? layout->ctx->err->msg : rs_last_error();
}
