/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts: named tensors and the shards (boxes in some rank's memory) that
 * hold them. Everything a shard says is validated when it is added; what
 * needs the whole layout (two destination shards sharing bytes) is checked
 * by rsi_layout_check_writes when a plan is made. */
#ifndef RS_CORE_LAYOUT_H
#define RS_CORE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/context.h"
#include "base/hash.h"

#define RSI_MAX_DIMS RS_MAX_DIMS

typedef struct rsi_tensor {
  char *name;
  rs_dtype dtype;
  int ndim;
  int esize;
  int64_t shape[RSI_MAX_DIMS];
  /* Block-scaled fp8 (rs_layout_set_block_scales): on the values, the
   * index of their scale tensor, the block and the rule; on the scale
   * tensor, the index of its values. -1: none. */
  int32_t scales, values;
  int64_t block[2];
  rs_scale_rule scale_rule;
} rsi_tensor;

/* One box of one tensor held by one rank. Its geometry lives in the
 * layout's pool at [geom, geom + 3*ndim): offset, extent, element strides. */
typedef struct rsi_shard {
  int32_t tensor;
  int32_t rank;
  int32_t buffer;
  int64_t byte_offset;
  int64_t byte_end; /* one past the last byte it touches in its buffer */
  int64_t geom;
} rsi_shard;

/* A growable int64 array; shards and plans keep box coordinates in one. */
typedef struct rsi_pool {
  int64_t *v;
  int64_t n, cap;
} rsi_pool;

rs_status rsi_pool_reserve(rsi_pool *p, int64_t more, rsi_err *err);
/* Append count entries and return the index of the first; -1 when out of
 * memory (recorded in err). */
int64_t rsi_pool_push(rsi_pool *p, const int64_t *vals, int64_t count,
                      rsi_err *err);
void rsi_pool_free(rsi_pool *p);

struct rs_layout {
  rs_context *ctx;
  rsi_tensor *tensors;
  int ntensors;
  int64_t cap_tensors;
  /* Names to tensors: open addressing with linear probing over a keyed
   * hash (SipHash, this layout's own random key), so that names chosen to
   * collide cannot make lookups slow. Slots hold tensor index + 1, 0 =
   * empty; at most half are used. Only lookups depend on the key. */
  int32_t *name_index;
  uint32_t name_index_cap;
  rsi_hash_key name_key;
  /* the tensor rsi_layout_add_shard named last, + 1 (0: none): shards
   * often come a tensor at a time, and its name is then compared, not
   * hashed */
  int last_named;
  rsi_shard *shards;
  int64_t nshards, cap_shards;
  rsi_pool pool;
};

static inline const int64_t *rsi_shard_offset(const rsi_pool *pool,
                                              const rsi_shard *s) {
  return pool->v + s->geom;
}
static inline const int64_t *rsi_shard_extent(const rsi_pool *pool,
                                              const rsi_shard *s, int ndim) {
  return pool->v + s->geom + ndim;
}
static inline const int64_t *rsi_shard_strides(const rsi_pool *pool,
                                               const rsi_shard *s, int ndim) {
  return pool->v + s->geom + 2 * ndim;
}

rs_status rsi_layout_create(rs_context *ctx, rs_layout **out);
void rsi_layout_destroy(rs_layout *layout);

int rsi_layout_find(const rs_layout *layout, const char *name);

rs_status rsi_layout_add_tensor(rs_layout *layout, const char *name,
                                rs_dtype dtype, int ndim,
                                const int64_t *shape);
rs_status rsi_layout_add_shard(rs_layout *layout, const char *name, int rank,
                               const int64_t *offset, const int64_t *extent,
                               int buffer, int64_t byte_offset,
                               const int64_t *strides);
/* rsi_layout_add_shard for the tensor at index `tensor` (which exists). */
rs_status rsi_layout_add_shard_to(rs_layout *layout, int tensor, int rank,
                                  const int64_t *offset, const int64_t *extent,
                                  int buffer, int64_t byte_offset,
                                  const int64_t *strides);
/* rs_layout_add_dtensor_strided (layout_dtensor.c); split NULL: all 1. */
rs_status rsi_layout_add_dtensor(rs_layout *layout, const char *name,
                                 int mesh_ndim, const int64_t *mesh_shape,
                                 const int *mesh_ranks, const int *placements,
                                 const int *split, rs_strided_order order,
                                 int buffer, int64_t byte_offset);

/* rs_layout_set_block_scales, on tensor indices. */
rs_status rsi_layout_set_block_scales(rs_layout *layout, int values,
                                      int scales, int64_t block_rows,
                                      int64_t block_cols, rs_scale_rule rule);

/* The shape a scale tensor of `values` has with blocks of b0 x b1. */
void rsi_block_scales_shape(const rsi_tensor *values, int64_t b0, int64_t b1,
                            int64_t *shape);

/* How much a layout holds, to take back what was added after it. */
typedef struct rsi_layout_mark {
  int ntensors;
  int64_t nshards, pool_n;
} rsi_layout_mark;

rsi_layout_mark rsi_layout_mark_now(const rs_layout *layout);
/* Drop every tensor and shard added since mark; cannot fail. */
void rsi_layout_roll_back(rs_layout *layout, const rsi_layout_mark *mark);

/* Collective over an MPI context's ranks (layout_exchange.c). */
rs_status rsi_layout_allgather(rs_layout *layout);

/* RS_ERR_OVERLAP when two shards of one rank share bytes of one buffer. */
rs_status rsi_layout_check_writes(const rs_layout *layout, const char *side,
                                  rsi_err *err);

/* DTensor/torch.chunk local box of a mesh coordinate (dtensor.c). */
rs_status rsi_dtensor_box(int ndim, const int64_t *shape, int mesh_ndim,
                          const int64_t *mesh_shape, const int *placements,
                          const int64_t *coord, int64_t *offset,
                          int64_t *extent, rsi_err *err);

#endif
