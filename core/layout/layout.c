/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts (layout.h): the coordinate pool, tensors and the index from
 * names to them, shards, each validated as it is added, and taking back
 * what was added since a mark. (DTensor placements: layout_dtensor.c.) */
#include "layout/layout.h"

#include <stdlib.h>
#include <string.h>

#include "layout/box.h"
#include "base/dtype.h"
#include "base/grow.h"
#include "base/utf8.h"

/* ---- pool --------------------------------------------------------------- */

rs_status rsi_pool_reserve(rsi_pool *p, int64_t more, rsi_err *err) {
  return rsi_grow((void **)&p->v, &p->cap, p->n + more, sizeof *p->v, 256,
                  err);
}

int64_t rsi_pool_push(rsi_pool *p, const int64_t *vals, int64_t count,
                      rsi_err *err) {
  if (rsi_pool_reserve(p, count, err) != RS_OK) return -1;
  int64_t at = p->n;
  if (vals) memcpy(p->v + at, vals, (size_t)count * sizeof *vals);
  p->n += count;
  return at;
}

void rsi_pool_free(rsi_pool *p) {
  free(p->v);
  p->v = NULL;
  p->n = p->cap = 0;
}

/* ---- tensors and the name index ------------------------------------------ */

/* The most index slots; half of it is the most tensors a layout holds. */
#define NAME_INDEX_MAX_CAP (1u << 31)

/* Where a name's probe run starts; depends on the layout's key. */
static uint32_t home_slot(const rs_layout *l, const char *name) {
  uint64_t h = rsi_siphash(&l->name_key, name, strlen(name));
  return (uint32_t)h & (l->name_index_cap - 1);
}

int rsi_layout_find(const rs_layout *layout, const char *name) {
  if (!layout->name_index_cap) return -1;
  uint32_t mask = layout->name_index_cap - 1;
  for (uint32_t i = home_slot(layout, name);; i = (i + 1) & mask) {
    int32_t t = layout->name_index[i];
    if (!t) return -1;
    if (strcmp(layout->tensors[t - 1].name, name) == 0) return t - 1;
  }
}

/* Put tensor in the first free slot from its home on. */
static void index_place(rs_layout *l, int tensor) {
  uint32_t mask = l->name_index_cap - 1;
  uint32_t i = home_slot(l, l->tensors[tensor].name);
  while (l->name_index[i]) i = (i + 1) & mask;
  l->name_index[i] = tensor + 1;
}

/* Room in the index for one more tensor with at most half the slots used.
 * The first index of a layout draws its key. */
static rs_status index_reserve(rs_layout *l, rsi_err *err) {
  uint64_t need = 2 * ((uint64_t)l->ntensors + 1);
  if (need <= l->name_index_cap) return RS_OK;
  if (need > NAME_INDEX_MAX_CAP)
    return RSI_FAIL(err, RS_ERR_NO_MEMORY,
                    "a layout holds at most %u tensors",
                    NAME_INDEX_MAX_CAP / 2);
  uint32_t cap = l->name_index_cap ? l->name_index_cap * 2 : 64;
  int32_t *idx = calloc(cap, sizeof *idx);
  if (!idx) return RSI_NOMEM(err);
  if (!l->name_index_cap) rsi_hash_key_random(&l->name_key);
  free(l->name_index);
  l->name_index = idx;
  l->name_index_cap = cap;
  for (int t = 0; t < l->ntensors; t++) index_place(l, t);
  return RS_OK;
}

/* Take the last tensor out of the index. The index is always what placing
 * tensors 0, 1, ... in that order into an empty table gives (a rebuild
 * places them in that order too), so emptying the last one's slot leaves
 * exactly the index of the others: no probe run passes through it. */
static void index_remove_last(rs_layout *l) {
  int32_t last = l->ntensors; /* tensor index + 1, as slots hold it */
  uint32_t mask = l->name_index_cap - 1;
  uint32_t i = home_slot(l, l->tensors[last - 1].name);
  while (l->name_index[i] != last) i = (i + 1) & mask;
  l->name_index[i] = 0;
}

/* Non-empty, well-formed UTF-8 and no control bytes, so that a name goes
 * into JSON and messages as it is. The name comes last in the message: a
 * long one is cut there, not the offset. */
static rs_status check_name(const char *name, rsi_err *err) {
  if (!name[0])
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "tensor name is empty");
  const unsigned char *s = (const unsigned char *)name;
  size_t n = strlen(name);
  for (size_t at = 0; at < n;) {
    size_t k = rsi_utf8_char_len(s + at, n - at);
    if (!k || rsi_is_control_byte(s[at]))
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "tensor name: byte %zu (0x%02x) is %s; names must be "
                      "UTF-8 without control characters: '%s'",
                      at, s[at],
                      k ? "a control character" : "not valid UTF-8", name);
    at += k;
  }
  return RS_OK;
}

rs_status rsi_layout_create(rs_context *ctx, rs_layout **out) {
  rs_layout *l = calloc(1, sizeof *l);
  if (!l) return RSI_NOMEM(ctx->err);
  rsi_context_ref(ctx);
  l->ctx = ctx;
  *out = l;
  return RS_OK;
}

void rsi_layout_destroy(rs_layout *layout) {
  if (!layout) return;
  for (int t = 0; t < layout->ntensors; t++) free(layout->tensors[t].name);
  free(layout->tensors);
  free(layout->name_index);
  free(layout->shards);
  rsi_pool_free(&layout->pool);
  rsi_context_unref(layout->ctx);
  free(layout);
}

rs_status rsi_layout_add_tensor(rs_layout *layout, const char *name,
                                rs_dtype dtype, int ndim,
                                const int64_t *shape) {
  rsi_err *err = layout->ctx->err;
  RSI_TRY(check_name(name, err));
  size_t esize = rsi_dtype_size(dtype);
  if (!esize)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': unknown dtype %d", name, (int)dtype);
  if (ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_TOO_MANY_DIMS,
                    "tensor '%s': %d dims, at most %d supported", name, ndim,
                    RSI_MAX_DIMS);
  if (ndim < 1)
    return RSI_FAIL(err, RS_ERR_BAD_SHAPE,
                    "tensor '%s': ndim %d, must be at least 1", name, ndim);
  int64_t bytes = (int64_t)esize;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 1)
      return RSI_FAIL(err, RS_ERR_BAD_SHAPE,
                      "tensor '%s': size %lld in dim %d, must be at least 1",
                      name, (long long)shape[d], d);
    if (__builtin_mul_overflow(bytes, shape[d], &bytes))
      return RSI_FAIL(err, RS_ERR_OVERFLOW,
                      "tensor '%s': byte size overflows int64 at dim %d",
                      name, d);
  }
  if (rsi_layout_find(layout, name) >= 0)
    return RSI_FAIL(err, RS_ERR_DUPLICATE_NAME,
                    "tensor '%s' is already declared in this layout", name);
  RSI_TRY(index_reserve(layout, err));
  RSI_TRY(rsi_grow((void **)&layout->tensors, &layout->cap_tensors,
                   layout->ntensors + 1, sizeof *layout->tensors, 16, err));
  char *copy = strdup(name);
  if (!copy) return RSI_NOMEM(err);
  rsi_tensor *t = &layout->tensors[layout->ntensors];
  memset(t, 0, sizeof *t);
  t->name = copy;
  t->dtype = dtype;
  t->ndim = ndim;
  t->esize = (int)esize;
  memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  t->scales = t->values = -1;
  index_place(layout, layout->ntensors);
  layout->ntensors++;
  return RS_OK;
}

/* ---- block scales ----------------------------------------------------------- */

void rsi_block_scales_shape(const rsi_tensor *values, int64_t b0, int64_t b1,
                            int64_t *shape) {
  int nd = values->ndim;
  memcpy(shape, values->shape, (size_t)nd * sizeof *shape);
  shape[nd - 1] = (values->shape[nd - 1] + b1 - 1) / b1;
  if (nd > 1) shape[nd - 2] = (values->shape[nd - 2] + b0 - 1) / b0;
}

rs_status rsi_layout_set_block_scales(rs_layout *layout, int values,
                                      int scales, int64_t block_rows,
                                      int64_t block_cols, rs_scale_rule rule) {
  rsi_err *err = layout->ctx->err;
  rsi_tensor *v = &layout->tensors[values], *s = &layout->tensors[scales];
  if (rule != RS_SCALE_AMAX && rule != RS_SCALE_UE8M0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': unknown scale rule %d", v->name, (int)rule);
  if (block_rows < 1 || block_cols < 1 || (v->ndim == 1 && block_rows != 1))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': blocks of %lld x %lld elements; both must "
                    "be at least 1 (block_rows 1 for a 1-D tensor)",
                    v->name, (long long)block_rows, (long long)block_cols);
  if (values == scales || v->dtype != RS_DTYPE_F8_E4M3 ||
      s->dtype != RS_DTYPE_F32)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s' (%s) with scales '%s' (%s): the values must "
                    "be f8_e4m3 and the scales f32, two tensors",
                    v->name, rsi_dtype_name(v->dtype), s->name,
                    rsi_dtype_name(s->dtype));
  int64_t want[RSI_MAX_DIMS];
  rsi_block_scales_shape(v, block_rows, block_cols, want);
  bool same = s->ndim == v->ndim;
  for (int d = 0; same && d < v->ndim; d++) same = s->shape[d] == want[d];
  if (!same)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "scales '%s' of tensor '%s': with blocks of %lld x %lld "
                    "they need the values' shape with the last two dims "
                    "divided by the block, rounded up",
                    s->name, v->name, (long long)block_rows,
                    (long long)block_cols);
  bool again = v->scales == scales && s->values == values &&
               v->block[0] == block_rows && v->block[1] == block_cols &&
               v->scale_rule == rule;
  if (again) return RS_OK;
  if (v->scales >= 0 || v->values >= 0 || s->scales >= 0 || s->values >= 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s' or '%s' already takes part in another block "
                    "scale declaration",
                    v->name, s->name);
  v->scales = scales;
  s->values = values;
  v->block[0] = block_rows;
  v->block[1] = block_cols;
  v->scale_rule = rule;
  return RS_OK;
}

rsi_layout_mark rsi_layout_mark_now(const rs_layout *layout) {
  return (rsi_layout_mark){layout->ntensors, layout->nshards,
                           layout->pool.n};
}

void rsi_layout_roll_back(rs_layout *layout, const rsi_layout_mark *mark) {
  layout->nshards = mark->nshards;
  layout->pool.n = mark->pool_n;
  while (layout->ntensors > mark->ntensors) {
    index_remove_last(layout);
    free(layout->tensors[--layout->ntensors].name);
  }
  for (int t = 0; t < layout->ntensors; t++) {
    rsi_tensor *x = &layout->tensors[t];
    if (x->scales >= layout->ntensors) x->scales = -1;
    if (x->values >= layout->ntensors) x->values = -1;
  }
}

/* ---- shards --------------------------------------------------------------- */


rs_status rsi_layout_add_shard(rs_layout *layout, const char *name, int rank,
                               const int64_t *offset, const int64_t *extent,
                               int buffer, int64_t byte_offset,
                               const int64_t *strides) {
  int t = layout->last_named - 1;
  if (t < 0 || strcmp(layout->tensors[t].name, name) != 0)
    t = rsi_layout_find(layout, name);
  if (t < 0)
    return RSI_FAIL(layout->ctx->err, RS_ERR_UNKNOWN_TENSOR,
                    "no tensor named '%s' in this layout", name);
  layout->last_named = t + 1;
  return rsi_layout_add_shard_to(layout, t, rank, offset, extent, buffer,
                                 byte_offset, strides);
}

rs_status rsi_layout_add_shard_to(rs_layout *layout, int t, int rank,
                                  const int64_t *offset, const int64_t *extent,
                                  int buffer, int64_t byte_offset,
                                  const int64_t *strides) {
  rsi_err *err = layout->ctx->err;
  const rsi_tensor *tensor = &layout->tensors[t];
  const char *name = tensor->name;
  int ndim = tensor->ndim;
  if (rank < 0 || rank >= layout->ctx->world_size)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                    "tensor '%s': rank %d outside [0, %d)", name, rank,
                    layout->ctx->world_size);
  if (buffer < 0 || buffer >= RS_MAX_BUFFERS)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_BUFFER,
                    "tensor '%s' rank %d: buffer index %d outside [0, %d)",
                    name, rank, buffer, RS_MAX_BUFFERS);
  if (byte_offset < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s' rank %d: byte offset %lld is negative", name,
                    rank, (long long)byte_offset);
  for (int d = 0; d < ndim; d++) {
    if (extent[d] < 1)
      return RSI_FAIL(err, RS_ERR_BAD_SHAPE,
                      "tensor '%s' rank %d: extent %lld in dim %d, must be at "
                      "least 1",
                      name, rank, (long long)extent[d], d);
    if (offset[d] < 0 || offset[d] > tensor->shape[d] - extent[d])
      return RSI_FAIL(err, RS_ERR_OUT_OF_BOUNDS,
                      "tensor '%s' rank %d: box [%lld, +%lld) in dim %d is "
                      "outside the tensor's size %lld",
                      name, rank, (long long)offset[d], (long long)extent[d],
                      d, (long long)tensor->shape[d]);
  }
  int64_t geom[3 * RSI_MAX_DIMS];
  memcpy(geom, offset, (size_t)ndim * sizeof *offset);
  memcpy(geom + ndim, extent, (size_t)ndim * sizeof *extent);
  int64_t *st = geom + 2 * ndim;
  if (strides) {
    for (int d = 0; d < ndim; d++)
      if (strides[d] < 1)
        return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                        "tensor '%s' rank %d: stride %lld in dim %d, must be "
                        "at least 1",
                        name, rank, (long long)strides[d], d);
    memcpy(st, strides, (size_t)ndim * sizeof *strides);
  } else {
    int64_t v;
    if (!rsi_box_volume(ndim, extent, &v))
      return RSI_FAIL(err, RS_ERR_OVERFLOW,
                      "tensor '%s' rank %d: box volume overflows", name, rank);
    rsi_box_dense_strides(ndim, extent, st);
  }
  /* Last element's offset, then bytes, all checked. */
  int64_t last = 0, term;
  for (int d = 0; d < ndim; d++)
    if (__builtin_mul_overflow(extent[d] - 1, st[d], &term) ||
        __builtin_add_overflow(last, term, &last))
      return RSI_FAIL(err, RS_ERR_OVERFLOW,
                      "tensor '%s' rank %d: strided extent overflows int64",
                      name, rank);
  int64_t end;
  if (__builtin_add_overflow(last, 1, &end) ||
      __builtin_mul_overflow(end, (int64_t)tensor->esize, &end) ||
      __builtin_add_overflow(end, byte_offset, &end))
    return RSI_FAIL(err, RS_ERR_OVERFLOW,
                    "tensor '%s' rank %d: byte offset %lld plus the shard's "
                    "span overflows int64",
                    name, rank, (long long)byte_offset);
  if (strides && !rsi_box_strides_injective(ndim, extent, st))
    return RSI_FAIL(err, RS_ERR_OVERLAP,
                    "tensor '%s' rank %d: the strides make the shard overlap "
                    "itself",
                    name, rank);
  RSI_TRY(rsi_grow((void **)&layout->shards, &layout->cap_shards,
                   layout->nshards + 1, sizeof *layout->shards, 64, err));
  int64_t at = rsi_pool_push(&layout->pool, geom, 3 * ndim, err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  rsi_shard *s = &layout->shards[layout->nshards++];
  s->tensor = t;
  s->rank = rank;
  s->buffer = buffer;
  s->byte_offset = byte_offset;
  s->byte_end = end;
  s->geom = at;
  return RS_OK;
}
