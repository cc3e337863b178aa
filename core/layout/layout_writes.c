/* SPDX-License-Identifier: Apache-2.0 */
/* The destination write check (rsi_layout_check_writes, layout.h): no two
 * shards of one rank write the same byte of one buffer.
 *
 * Shards are swept per (rank, buffer) in byte-offset order and cut into
 * clusters, runs of shards whose byte spans chain together; shards of two
 * clusters cannot share a byte. Inside a cluster:
 * - when every shard belongs to one tensor, with the same element strides
 *   and the same base (the byte where the tensor's element 0 would sit),
 *   every element of the tensor has one address for all of them. If those
 *   strides cannot alias over the cluster's bounding box, two shards share
 *   bytes exactly when their boxes meet, which a box tree finds in
 *   O(k log k) for k shards, however their spans interleave (each column of
 *   a matrix as its own shard of one buffer, say);
 * - otherwise the shards' contiguous byte runs are merged in address order
 *   (a heap over one run iterator per shard), and a run that starts before
 *   the furthest end seen so far shares a byte with the run that reached
 *   it: exact for any strides, O(R log k) for R runs, and never shard
 *   against shard. Before that, a cluster whose shards take turns in one
 *   period (each strided by it, their slices apart modulo it: a fused
 *   buffer whose tensors alternate block by block) passes in O(k log k):
 *   merging the runs of a 671B model's fused expert weights at 16,384
 *   ranks walked half a billion runs. */
#include "layout/layout.h"

#include <stdlib.h>
#include <string.h>

#include "layout/box.h"
#include "layout/box_tree.h"
#include "base/grow.h"
#include "base/radix_sort.h"

/* A shard in sweep order: by (rank, buffer, byte offset), then index.
 * Ranks, buffers (below RS_MAX_BUFFERS) and offsets are >= 0
 * (rs_layout_add_shard), so the unsigned radix order of (hi, lo) is
 * theirs, and the sort's stability keeps equal offsets in index order.
 * The rank and buffer lie side by side, so that the sort passes over
 * their bits only. */
#define BUFFER_BITS 16
_Static_assert(RS_MAX_BUFFERS <= 1 << BUFFER_BITS, "a buffer index fits");
static rsi_keyed write_key(const rsi_shard *s, int64_t index) {
  return (rsi_keyed){(uint64_t)(uint32_t)s->rank << BUFFER_BITS |
                         (uint32_t)s->buffer,
                     (uint64_t)s->byte_offset, (uint64_t)index};
}

/* One cluster: shards keys[0..n) of one (rank, buffer), and where a pair
 * that shares bytes is reported (positions in keys, a < b). */
typedef struct cluster {
  const rs_layout *l;
  const rsi_keyed *keys; /* value: the shard's index */
  int64_t n;
  bool shared;
  int64_t a, b;
} cluster;

static const rsi_shard *shard_at(const cluster *c, int64_t i) {
  return &c->l->shards[c->keys[i].value];
}

static void found_pair(cluster *c, int64_t i, int64_t j) {
  c->shared = true;
  c->a = i < j ? i : j;
  c->b = i < j ? j : i;
}

/* ---- shards of one tensor, strides and base: their boxes decide ---------- */

/* The byte where the tensor's element 0 would sit under the shard's
 * strides; false when it overflows. */
static bool shard_base(const rs_layout *l, const rsi_shard *s, int64_t *base) {
  const rsi_tensor *t = &l->tensors[s->tensor];
  const int64_t *off = rsi_shard_offset(&l->pool, s);
  const int64_t *st = rsi_shard_strides(&l->pool, s, t->ndim);
  int64_t elems = 0, term;
  for (int d = 0; d < t->ndim; d++)
    if (__builtin_mul_overflow(off[d], st[d], &term) ||
        __builtin_add_overflow(elems, term, &elems))
      return false;
  return !__builtin_mul_overflow(elems, (int64_t)t->esize, &term) &&
         !__builtin_sub_overflow(s->byte_offset, term, base);
}

/* Whether every shard of the cluster maps the tensor's elements to bytes
 * the same way, without aliasing over the cluster's bounding box. */
static bool one_mapping(const cluster *c) {
  const rs_layout *l = c->l;
  const rsi_shard *first = shard_at(c, 0);
  const rsi_tensor *t = &l->tensors[first->tensor];
  const int64_t *strides = rsi_shard_strides(&l->pool, first, t->ndim);
  int64_t base, lo[RSI_MAX_DIMS], hi[RSI_MAX_DIMS];
  if (!shard_base(l, first, &base)) return false;
  for (int d = 0; d < t->ndim; d++) {
    lo[d] = INT64_MAX;
    hi[d] = INT64_MIN;
  }
  for (int64_t i = 0; i < c->n; i++) {
    const rsi_shard *s = shard_at(c, i);
    int64_t b;
    if (s->tensor != first->tensor || !shard_base(l, s, &b) || b != base ||
        memcmp(rsi_shard_strides(&l->pool, s, t->ndim), strides,
               (size_t)t->ndim * sizeof *strides) != 0)
      return false;
    const int64_t *off = rsi_shard_offset(&l->pool, s);
    const int64_t *ext = rsi_shard_extent(&l->pool, s, t->ndim);
    for (int d = 0; d < t->ndim; d++) {
      if (off[d] < lo[d]) lo[d] = off[d];
      if (off[d] + ext[d] > hi[d]) hi[d] = off[d] + ext[d];
    }
  }
  for (int d = 0; d < t->ndim; d++) hi[d] -= lo[d]; /* bounding extent */
  return rsi_box_strides_injective(t->ndim, hi, strides);
}

static const int64_t *cluster_box(const void *ctx, int64_t i) {
  const cluster *c = ctx;
  return rsi_shard_offset(&c->l->pool, shard_at(c, i));
}

static rs_status check_boxes(cluster *c, rsi_box_tree *tree, rsi_err *err) {
  int ndim = c->l->tensors[shard_at(c, 0)->tensor].ndim;
  RSI_TRY(rsi_box_tree_build(tree, ndim, c->n, cluster_box, c, err));
  int64_t a, b;
  if (!rsi_box_tree_disjoint(tree, &a, &b)) found_pair(c, a, b);
  return RS_OK;
}

/* ---- any shards: their byte runs, merged in address order ---------------- */

/* The contiguous byte runs of one strided shard, in ascending address
 * order: dims by descending stride, the contiguous innermost ones folded
 * into the run. Its extents, strides and index live in a pool at `at`. */
typedef struct run_iter {
  int64_t at, start, run_bytes, esize;
  int n;
  bool done;
} run_iter;

static rs_status run_iter_init(run_iter *it, rsi_pool *pool, const rs_layout *l,
                               const rsi_shard *s, rsi_err *err) {
  const rsi_tensor *t = &l->tensors[s->tensor];
  const int64_t *ext = rsi_shard_extent(&l->pool, s, t->ndim);
  const int64_t *strides = rsi_shard_strides(&l->pool, s, t->ndim);
  int order[RSI_MAX_DIMS];
  int n = rsi_box_stride_order(t->ndim, ext, strides, order);
  int64_t run = 1;
  while (n > 0 && strides[order[n - 1]] == run) run *= ext[order[--n]];
  int64_t at = rsi_pool_push(pool, NULL, 3 * n, err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  for (int i = 0; i < n; i++) {
    pool->v[at + i] = ext[order[i]];
    pool->v[at + n + i] = strides[order[i]];
    pool->v[at + 2 * n + i] = 0;
  }
  *it = (run_iter){at, s->byte_offset, run * t->esize, t->esize, n, false};
  return RS_OK;
}

static void run_iter_next(run_iter *it, int64_t *v) {
  if (it->n == 0) { /* one run: the pool may hold nothing at all */
    it->done = true;
    return;
  }
  int64_t *ext = v + it->at, *stride = ext + it->n, *idx = stride + it->n;
  for (int i = it->n - 1; i >= 0; i--) {
    if (++idx[i] < ext[i]) {
      it->start += stride[i] * it->esize;
      return;
    }
    idx[i] = 0;
    it->start -= (ext[i] - 1) * stride[i] * it->esize;
  }
  it->done = true;
}

/* A min-heap of cluster positions by (run start, position). */
typedef struct run_heap {
  int64_t *v, n;
  const run_iter *its;
} run_heap;

static bool run_before(const run_heap *h, int64_t i, int64_t j) {
  int64_t a = h->its[h->v[i]].start, b = h->its[h->v[j]].start;
  return a != b ? a < b : h->v[i] < h->v[j];
}

static void sift_down(run_heap *h, int64_t i) {
  for (;;) {
    int64_t m = i, l = 2 * i + 1, r = l + 1;
    if (l < h->n && run_before(h, l, m)) m = l;
    if (r < h->n && run_before(h, r, m)) m = r;
    if (m == i) return;
    int64_t t = h->v[i];
    h->v[i] = h->v[m];
    h->v[m] = t;
    i = m;
  }
}

static rs_status merge_runs(cluster *c, rsi_err *err) {
  run_iter *its = malloc((size_t)c->n * sizeof *its);
  int64_t *heap = malloc((size_t)c->n * sizeof *heap);
  rsi_pool pool = {0};
  rs_status st = its && heap ? RS_OK : RSI_NOMEM(err);
  for (int64_t i = 0; st == RS_OK && i < c->n; i++)
    st = run_iter_init(&its[i], &pool, c->l, shard_at(c, i), err);
  if (st == RS_OK) {
    run_heap h = {heap, c->n, its};
    for (int64_t i = 0; i < c->n; i++) heap[i] = i;
    for (int64_t i = c->n / 2 - 1; i >= 0; i--) sift_down(&h, i);
    int64_t reach = INT64_MIN, reached_by = -1; /* furthest end so far */
    while (h.n > 0 && !c->shared) {
      int64_t i = heap[0];
      run_iter *it = &its[i];
      if (it->start < reach) {
        found_pair(c, reached_by, i);
        break;
      }
      reach = it->start + it->run_bytes;
      reached_by = i;
      run_iter_next(it, pool.v);
      if (it->done) heap[0] = heap[--h.n];
      sift_down(&h, 0);
    }
  }
  free(its);
  free(heap);
  rsi_pool_free(&pool);
  return st;
}

/* ---- shards that take turns in a common period ----------------------------- */

/* A byte range [start, start + bytes) of one period. */
typedef struct span {
  int64_t start, bytes;
} span;

static int span_cmp(const void *x, const void *y) {
  const span *a = x, *b = y;
  return (a->start > b->start) - (a->start < b->start);
}

/* The period of shard s: the byte stride of its dim of largest stride
 * (extent > 1), with the bytes one step of that dim spans; false when
 * every extent is 1. */
static bool shard_period(const rs_layout *l, const rsi_shard *s,
                         int64_t *period, int64_t *slice) {
  const rsi_tensor *t = &l->tensors[s->tensor];
  const int64_t *ext = rsi_shard_extent(&l->pool, s, t->ndim);
  const int64_t *st = rsi_shard_strides(&l->pool, s, t->ndim);
  int order[RSI_MAX_DIMS];
  if (rsi_box_stride_order(t->ndim, ext, st, order) == 0) return false;
  int o = order[0];
  *period = st[o] * t->esize; /* within byte_end, which did not overflow */
  *slice = s->byte_end - s->byte_offset - (ext[o] - 1) * *period;
  return true;
}

/* Whether the cluster's shards provably share no byte because they take
 * turns in one period P (fused buffers: the gate and up halves of every
 * expert, each tensor's shard strided by the pair): every shard's bytes
 * lie in [b + kP, b + kP + w) for its byte offset b, some k >= 0 and a
 * w <= P (a shard whose whole span is at most P is one such slice), so a
 * byte both shards write would put their slices' images modulo P on the
 * same point; images that are disjoint rule that out. False says nothing:
 * the byte runs decide (merge_runs). */
static bool take_turns(const cluster *c, span *images) {
  int64_t period = 0, slice;
  for (int64_t i = 0; i < c->n && period == 0; i++)
    if (shard_period(c->l, shard_at(c, i), &period, &slice) && slice >= period)
      period = 0; /* its steps overlap: no period from it */
  if (period == 0) return false;
  for (int64_t i = 0; i < c->n; i++) {
    const rsi_shard *s = shard_at(c, i);
    int64_t p = period, w = s->byte_end - s->byte_offset;
    if (w > period && !shard_period(c->l, s, &p, &w)) return false;
    if (p != period || w > period) return false;
    images[i] = (span){s->byte_offset % period, w};
  }
  qsort(images, (size_t)c->n, sizeof *images, span_cmp);
  for (int64_t i = 0; i + 1 < c->n; i++)
    if (images[i].start + images[i].bytes > images[i + 1].start) return false;
  const span *last = &images[c->n - 1]; /* may wrap around into the first */
  return last->start + last->bytes - period <= images[0].start;
}

/* ---- the sweep ------------------------------------------------------------ */

/* Scratch the sweep reuses from cluster to cluster. */
typedef struct sweep_scratch {
  rsi_box_tree tree;
  span *images;
  int64_t cap_images;
} sweep_scratch;

static rs_status check_cluster(cluster *c, sweep_scratch *w, rsi_err *err) {
  if (c->n < 2) return RS_OK;
  if (one_mapping(c)) return check_boxes(c, &w->tree, err);
  RSI_TRY(rsi_grow((void **)&w->images, &w->cap_images, c->n,
                   sizeof *w->images, 16, err));
  return take_turns(c, w->images) ? RS_OK : merge_runs(c, err);
}

static rs_status report(const cluster *c, const char *side, rsi_err *err) {
  const rs_layout *l = c->l;
  const rsi_shard *a = shard_at(c, c->a), *b = shard_at(c, c->b);
  return RSI_FAIL(err, RS_ERR_OVERLAP,
                  "%s layout: rank %d buffer %d: shards of tensors '%s' "
                  "(byte offset %lld) and '%s' (byte offset %lld) write the "
                  "same bytes",
                  side, a->rank, a->buffer, l->tensors[a->tensor].name,
                  (long long)a->byte_offset, l->tensors[b->tensor].name,
                  (long long)b->byte_offset);
}

/* How many shards share each (rank, buffer) of layout l, up to 2 (a byte
 * a buffer, so that the counts of millions of buffers stay in cache):
 * shares[slot[r] + buffer], slot[r] the first of rank r's buffers. NULL
 * when out of memory; the caller frees both. */
static uint8_t *count_shares(const rs_layout *l, int64_t **slot) {
  int world = l->ctx->world_size;
  int64_t *first = calloc((size_t)world + 1, sizeof *first);
  if (!first) return NULL;
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    if (s->buffer + 1 > first[s->rank + 1]) first[s->rank + 1] = s->buffer + 1;
  }
  for (int r = 0; r < world; r++) first[r + 1] += first[r];
  uint8_t *shares = calloc((size_t)(first[world] ? first[world] : 1),
                           sizeof *shares);
  if (!shares) {
    free(first);
    return NULL;
  }
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    uint8_t *n = &shares[first[s->rank] + s->buffer];
    *n += *n < 2;
  }
  *slot = first;
  return shares;
}

rs_status rsi_layout_check_writes(const rs_layout *l, const char *side,
                                  rsi_err *err) {
  if (l->nshards < 2) return RS_OK;
  /* A shard alone in its (rank, buffer) shares no byte: only the others
   * are sorted and swept (with one buffer per tensor, as vLLM keeps
   * them, that is none, and the sort's 48 bytes a shard of fresh memory
   * are never touched). */
  int64_t *slot = NULL, n = 0;
  uint8_t *shares = count_shares(l, &slot);
  if (!shares) return RSI_NOMEM(err);
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    n += shares[slot[s->rank] + s->buffer] > 1;
  }
  if (n == 0) { /* every shard alone in its buffer */
    free(shares);
    free(slot);
    return RS_OK;
  }
  /* the keys, then the sort's scratch */
  rsi_keyed *keys = malloc((size_t)n * 2 * sizeof *keys);
  if (!keys) {
    free(shares);
    free(slot);
    return RSI_NOMEM(err);
  }
  n = 0;
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    if (shares[slot[s->rank] + s->buffer] > 1) keys[n++] = write_key(s, i);
  }
  free(shares);
  free(slot);
  rsi_radix_sort(keys, keys + n, n);
  sweep_scratch w = {0};
  rs_status st = RS_OK;
  for (int64_t first = 0; first < n && st == RS_OK;) {
    const rsi_shard *s = &l->shards[keys[first].value];
    int64_t end = s->byte_end, next = first + 1;
    for (; next < n; next++) {
      const rsi_shard *t = &l->shards[keys[next].value];
      if (t->rank != s->rank || t->buffer != s->buffer ||
          t->byte_offset >= end)
        break;
      if (t->byte_end > end) end = t->byte_end;
    }
    cluster c = {l, keys + first, next - first, false, 0, 0};
    st = check_cluster(&c, &w, err);
    if (st == RS_OK && c.shared) st = report(&c, side, err);
    first = next;
  }
  rsi_box_tree_free(&w.tree);
  free(w.images);
  free(keys);
  return st;
}
