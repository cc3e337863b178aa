#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "grow.h"

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

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int rsi_layout_find(const rs_layout *layout, const char *name) {
  if (!layout->name_index_cap) return -1;
  uint32_t mask = layout->name_index_cap - 1;
  for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    int32_t t = layout->name_index[i];
    if (!t) return -1;
    if (strcmp(layout->tensors[t - 1].name, name) == 0) return t - 1;
  }
}

static rs_status index_insert(rs_layout *layout, int tensor, rsi_err *err) {
  if ((uint32_t)(layout->ntensors + 1) * 2 > layout->name_index_cap) {
    uint32_t cap = layout->name_index_cap ? layout->name_index_cap * 2 : 64;
    int32_t *idx = calloc(cap, sizeof *idx);
    if (!idx) return RSI_NOMEM(err);
    free(layout->name_index);
    layout->name_index = idx;
    layout->name_index_cap = cap;
    for (int t = 0; t < layout->ntensors; t++)
      if (t != tensor) RSI_TRY(index_insert(layout, t, err));
  }
  uint32_t mask = layout->name_index_cap - 1;
  uint32_t i = name_hash(layout->tensors[tensor].name) & mask;
  while (layout->name_index[i]) i = (i + 1) & mask;
  layout->name_index[i] = tensor + 1;
  return RS_OK;
}

rs_status rsi_layout_create(rs_context *ctx, rs_layout **out) {
  rs_layout *l = calloc(1, sizeof *l);
  if (!l) return RSI_NOMEM(&ctx->err);
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
  rsi_err *err = &layout->ctx->err;
  if (!name[0])
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "tensor name is empty");
  size_t esize = rs_dtype_size(dtype);
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
  layout->ntensors++;
  rs_status st = index_insert(layout, layout->ntensors - 1, err);
  if (st != RS_OK) {
    layout->ntensors--;
    free(copy);
  }
  return st;
}

/* ---- shards --------------------------------------------------------------- */

/* Dims of a strided region sorted by descending stride, extent-1 dims
 * dropped. Returns how many remain. */
static int sorted_dims(int ndim, const int64_t *ext, const int64_t *strides,
                       int *order) {
  int n = 0;
  for (int d = 0; d < ndim; d++)
    if (ext[d] > 1) order[n++] = d;
  for (int i = 1; i < n; i++) /* insertion sort, ndim is small */
    for (int j = i; j > 0 && strides[order[j]] > strides[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  return n;
}

/* A strided region cannot overlap itself when each stride, taken from the
 * smallest up, steps past everything the smaller dims reach. This is
 * sufficient, not necessary: exotic interleavings are refused. */
static bool self_disjoint(int ndim, const int64_t *ext, const int64_t *strides) {
  int order[RSI_MAX_DIMS];
  int n = sorted_dims(ndim, ext, strides, order);
  int64_t reach = 0; /* largest element offset the smaller dims reach */
  for (int i = n - 1; i >= 0; i--) {
    int d = order[i];
    if (strides[d] <= reach) return false;
    reach += (ext[d] - 1) * strides[d];
  }
  return true;
}

rs_status rsi_layout_add_shard(rs_layout *layout, const char *name, int rank,
                               const int64_t *offset, const int64_t *extent,
                               int buffer, int64_t byte_offset,
                               const int64_t *strides) {
  rsi_err *err = &layout->ctx->err;
  int t = rsi_layout_find(layout, name);
  if (t < 0)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_TENSOR,
                    "no tensor named '%s' in this layout", name);
  const rsi_tensor *tensor = &layout->tensors[t];
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
  if (strides && !self_disjoint(ndim, extent, st))
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

rs_status rsi_layout_add_dtensor(rs_layout *layout, const char *name,
                                 int mesh_ndim, const int64_t *mesh_shape,
                                 const int *mesh_ranks, const int *placements,
                                 int buffer, int64_t byte_offset) {
  rsi_err *err = &layout->ctx->err;
  int t = rsi_layout_find(layout, name);
  if (t < 0)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_TENSOR,
                    "no tensor named '%s' in this layout", name);
  const rsi_tensor *tensor = &layout->tensors[t];
  if (mesh_ndim < 1 || mesh_ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': mesh of %d axes, must be 1..%d", name,
                    mesh_ndim, RSI_MAX_DIMS);
  int64_t nranks = 1;
  for (int a = 0; a < mesh_ndim; a++) {
    if (mesh_shape[a] < 1 || mesh_shape[a] > layout->ctx->world_size)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "tensor '%s': mesh axis %d has size %lld, must be 1..%d "
                      "(the world size)",
                      name, a, (long long)mesh_shape[a],
                      layout->ctx->world_size);
    nranks *= mesh_shape[a];
    if (nranks > layout->ctx->world_size)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "tensor '%s': the mesh has more ranks than the world "
                      "size %d",
                      name, layout->ctx->world_size);
  }
  /* A rank may appear once per mesh. */
  unsigned char *seen = calloc((size_t)layout->ctx->world_size, 1);
  if (!seen) return RSI_NOMEM(err);
  rs_status st = RS_OK;
  for (int64_t i = 0; i < nranks && st == RS_OK; i++) {
    int r = mesh_ranks[i];
    if (r < 0 || r >= layout->ctx->world_size)
      st = RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                    "tensor '%s': mesh rank %d outside [0, %d)", name, r,
                    layout->ctx->world_size);
    else if (seen[r]++)
      st = RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "tensor '%s': rank %d appears twice in the mesh", name, r);
  }
  free(seen);
  if (st != RS_OK) return st;

  /* Add every non-empty local box; on failure take back what was added. */
  int64_t keep_shards = layout->nshards, keep_pool = layout->pool.n;
  int64_t coord[RSI_MAX_DIMS] = {0};
  int64_t off[RSI_MAX_DIMS], ext[RSI_MAX_DIMS];
  for (int64_t i = 0; i < nranks; i++) {
    st = rsi_dtensor_box(tensor->ndim, tensor->shape, mesh_ndim, mesh_shape,
                         placements, coord, off, ext, err);
    if (st != RS_OK) {
      char why[RSI_ERR_MSG_BYTES];
      snprintf(why, sizeof why, "%s", err->msg);
      RSI_FAIL(err, st, "tensor '%s': %s", name, why);
      break;
    }
    if (!rsi_box_is_empty(tensor->ndim, ext)) {
      st = rsi_layout_add_shard(layout, name, mesh_ranks[i], off, ext, buffer,
                                byte_offset, NULL);
      if (st != RS_OK) break;
    }
    for (int a = mesh_ndim - 1; a >= 0; a--) { /* next row-major coord */
      if (++coord[a] < mesh_shape[a]) break;
      coord[a] = 0;
    }
  }
  if (st != RS_OK) {
    layout->nshards = keep_shards;
    layout->pool.n = keep_pool;
  }
  return st;
}

/* ---- destination write check ---------------------------------------------- */

/* Contiguous byte runs of a strided shard, in ascending address order. */
typedef struct run_iter {
  int n;                        /* iterated dims, outermost first */
  int64_t ext[RSI_MAX_DIMS], stride[RSI_MAX_DIMS], idx[RSI_MAX_DIMS];
  int64_t run_bytes, base, esize;
  bool done;
} run_iter;

static void run_iter_init(run_iter *it, int ndim, const int64_t *ext,
                          const int64_t *strides, int64_t byte_offset,
                          int64_t esize) {
  int order[RSI_MAX_DIMS];
  int n = sorted_dims(ndim, ext, strides, order);
  memset(it, 0, sizeof *it);
  it->esize = esize;
  it->base = byte_offset;
  int64_t run = 1;
  /* Fold the innermost dims while they are contiguous. */
  while (n > 0 && strides[order[n - 1]] == run) {
    run *= ext[order[n - 1]];
    n--;
  }
  it->run_bytes = run * esize;
  it->n = n;
  for (int i = 0; i < n; i++) {
    it->ext[i] = ext[order[i]];
    it->stride[i] = strides[order[i]];
  }
}

static int64_t run_iter_start(const run_iter *it) {
  int64_t off = 0;
  for (int i = 0; i < it->n; i++) off += it->idx[i] * it->stride[i];
  return it->base + off * it->esize;
}

static void run_iter_next(run_iter *it) {
  for (int i = it->n - 1; i >= 0; i--) {
    if (++it->idx[i] < it->ext[i]) return;
    it->idx[i] = 0;
  }
  it->done = true;
}

static bool shards_share_bytes(const rs_layout *l, const rsi_shard *a,
                               const rsi_shard *b) {
  const rsi_tensor *ta = &l->tensors[a->tensor], *tb = &l->tensors[b->tensor];
  run_iter ia, ib;
  run_iter_init(&ia, ta->ndim, rsi_shard_extent(&l->pool, a, ta->ndim),
                rsi_shard_strides(&l->pool, a, ta->ndim), a->byte_offset,
                ta->esize);
  run_iter_init(&ib, tb->ndim, rsi_shard_extent(&l->pool, b, tb->ndim),
                rsi_shard_strides(&l->pool, b, tb->ndim), b->byte_offset,
                tb->esize);
  while (!ia.done && !ib.done) {
    int64_t sa = run_iter_start(&ia), sb = run_iter_start(&ib);
    int64_t ea = sa + ia.run_bytes, eb = sb + ib.run_bytes;
    if (sa < eb && sb < ea) return true;
    if (ea <= sb)
      run_iter_next(&ia);
    else
      run_iter_next(&ib);
  }
  return false;
}

typedef struct write_key {
  int32_t rank, buffer;
  int64_t byte_offset, index;
} write_key;

static int by_rank_buffer_start(const void *x, const void *y) {
  const write_key *a = x, *b = y;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  if (a->buffer != b->buffer) return a->buffer < b->buffer ? -1 : 1;
  if (a->byte_offset != b->byte_offset)
    return a->byte_offset < b->byte_offset ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

rs_status rsi_layout_check_writes(const rs_layout *l, const char *side,
                                  rsi_err *err) {
  if (l->nshards < 2) return RS_OK;
  write_key *order = malloc((size_t)l->nshards * sizeof *order);
  if (!order) return RSI_NOMEM(err);
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    order[i] = (write_key){s->rank, s->buffer, s->byte_offset, i};
  }
  qsort(order, (size_t)l->nshards, sizeof *order, by_rank_buffer_start);
  rs_status st = RS_OK;
  /* Sweep each (rank, buffer) in address order; only shards whose byte
   * spans meet are compared run by run. */
  for (int64_t i = 0; i < l->nshards && st == RS_OK; i++) {
    const rsi_shard *a = &l->shards[order[i].index];
    for (int64_t j = i + 1; j < l->nshards; j++) {
      const rsi_shard *b = &l->shards[order[j].index];
      if (b->rank != a->rank || b->buffer != a->buffer ||
          b->byte_offset >= a->byte_end)
        break;
      if (shards_share_bytes(l, a, b)) {
        st = RSI_FAIL(err, RS_ERR_OVERLAP,
                      "%s layout: rank %d buffer %d: shards of tensors '%s' "
                      "(byte offset %lld) and '%s' (byte offset %lld) write "
                      "the same bytes",
                      side, a->rank, a->buffer, l->tensors[a->tensor].name,
                      (long long)a->byte_offset, l->tensors[b->tensor].name,
                      (long long)b->byte_offset);
        break;
      }
    }
  }
  free(order);
  return st;
}
