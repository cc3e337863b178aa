/* SPDX-License-Identifier: Apache-2.0 */
/* Box trees (box_tree.h): building by median splits, queries by a
 * depth-first walk over the nodes whose bounds meet the query box.
 *
 * A split orders its boxes by (centre in the split dim, box id), a strict
 * order, with a selection that partitions around the median in linear
 * time on average and falls back to sorting the range when its pivots keep
 * failing, so no input makes a build quadratic. Leaves hold at most LEAF
 * boxes; the tree is balanced, so its depth stays below 64 and a query's
 * stack fits in a fixed array. */
#include "layout/box_tree.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

#define LEAF 4
#define MAX_DEPTH 128

typedef struct rsi_box_key {
  int64_t key, id;
} box_key;

static bool key_less(const box_key *a, const box_key *b) {
  return a->key != b->key ? a->key < b->key : a->id < b->id;
}

static int cmp_box_key(const void *x, const void *y) {
  const box_key *a = x, *b = y;
  return key_less(a, b) ? -1 : key_less(b, a);
}

static void swap_keys(box_key *a, box_key *b) {
  box_key t = *a;
  *a = *b;
  *b = t;
}

/* Lomuto partition of v[0..n) around the median of its first, middle and
 * last keys; returns where the pivot lands. */
static int64_t partition(box_key *v, int64_t n) {
  int64_t mid = n / 2, last = n - 1;
  if (key_less(&v[mid], &v[0])) swap_keys(&v[mid], &v[0]);
  if (key_less(&v[last], &v[0])) swap_keys(&v[last], &v[0]);
  if (key_less(&v[last], &v[mid])) swap_keys(&v[last], &v[mid]);
  swap_keys(&v[mid], &v[last]); /* the median of three is the pivot */
  int64_t store = 0;
  for (int64_t i = 0; i < last; i++)
    if (key_less(&v[i], &v[last])) swap_keys(&v[i], &v[store++]);
  swap_keys(&v[store], &v[last]);
  return store;
}

/* Reorder v[0..n) so that v[k] is the k-th smallest key, smaller keys
 * before it and larger after. */
static void select_kth(box_key *v, int64_t n, int64_t k) {
  int budget = 8;
  for (int64_t m = n; m > 1; m /= 2) budget += 2;
  int64_t lo = 0, hi = n;
  while (hi - lo > 8) {
    if (budget-- == 0) {
      qsort(v + lo, (size_t)(hi - lo), sizeof *v, cmp_box_key);
      return;
    }
    int64_t p = lo + partition(v + lo, hi - lo);
    if (p == k) return;
    if (k < p)
      hi = p;
    else
      lo = p + 1;
  }
  qsort(v + lo, (size_t)(hi - lo), sizeof *v, cmp_box_key);
}

static bool meets(int nd, const int64_t *a, const int64_t *b) {
  for (int d = 0; d < nd; d++)
    if (a[d] >= b[nd + d] || b[d] >= a[nd + d]) return false;
  return true;
}

/* Centre of box id in dim d (no overflow: lo <= hi). */
static int64_t centre(const rsi_box_tree *t, int64_t id, int d) {
  const int64_t *b = t->boxes + id * 2 * t->ndim;
  return b[d] + (b[t->ndim + d] - b[d]) / 2;
}

/* The dim where the centres of v[0..n) spread most (the first of equals;
 * 0 when they all coincide). */
static int split_dim(const rsi_box_tree *t, const box_key *v, int64_t n) {
  int nd = t->ndim, best = 0;
  int64_t cmin[RS_MAX_DIMS], cmax[RS_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    cmin[d] = INT64_MAX;
    cmax[d] = INT64_MIN;
  }
  for (int64_t i = 0; i < n; i++)
    for (int d = 0; d < nd; d++) {
      int64_t c = centre(t, v[i].id, d);
      if (c < cmin[d]) cmin[d] = c;
      if (c > cmax[d]) cmax[d] = c;
    }
  for (int d = 1; d < nd; d++)
    if (cmax[d] - cmin[d] > cmax[best] - cmin[best]) best = d;
  return best;
}

/* A new node over order[first .. first+count), with its bounds. */
static rs_status new_node(rsi_box_tree *t, int64_t first, int64_t count,
                          int64_t *index, rsi_err *err) {
  int nd = t->ndim;
  RSI_TRY(rsi_grow((void **)&t->nodes, &t->cap_nodes, t->nnodes + 1,
                   sizeof *t->nodes, 64, err));
  RSI_TRY(rsi_grow((void **)&t->bounds, &t->cap_bounds,
                   (t->nnodes + 1) * 2 * nd, sizeof *t->bounds, 64 * 2 * nd,
                   err));
  int64_t *bound = t->bounds + t->nnodes * 2 * nd;
  for (int d = 0; d < nd; d++) {
    bound[d] = INT64_MAX;
    bound[nd + d] = INT64_MIN;
  }
  for (int64_t i = first; i < first + count; i++) {
    const int64_t *b = t->boxes + t->order[i].id * 2 * nd;
    for (int d = 0; d < nd; d++) {
      if (b[d] < bound[d]) bound[d] = b[d];
      if (b[nd + d] > bound[nd + d]) bound[nd + d] = b[nd + d];
    }
  }
  t->nodes[t->nnodes] = (rsi_box_node){first, count, -1, -1};
  *index = t->nnodes++;
  return RS_OK;
}

static rs_status build_node(rsi_box_tree *t, int64_t first, int64_t count,
                            int depth, int64_t *index, rsi_err *err) {
  RSI_TRY(new_node(t, first, count, index, err));
  if (count <= LEAF || depth >= MAX_DEPTH / 2) return RS_OK;
  box_key *v = t->order + first;
  int d = split_dim(t, v, count);
  for (int64_t i = 0; i < count; i++) v[i].key = centre(t, v[i].id, d);
  int64_t half = count / 2;
  select_kth(v, count, half);
  int64_t left, right;
  RSI_TRY(build_node(t, first, half, depth + 1, &left, err));
  RSI_TRY(build_node(t, first + half, count - half, depth + 1, &right, err));
  t->nodes[*index].left = left;
  t->nodes[*index].right = right;
  return RS_OK;
}

rs_status rsi_box_tree_build(rsi_box_tree *t, int ndim, int64_t n,
                             rsi_box_at box_at, const void *ctx,
                             rsi_err *err) {
  t->ndim = ndim;
  t->n = 0;
  t->nnodes = 0;
  RSI_TRY(rsi_grow((void **)&t->boxes, &t->cap_boxes, n * 2 * ndim,
                   sizeof *t->boxes, 256, err));
  RSI_TRY(rsi_grow((void **)&t->order, &t->cap_order, n, sizeof *t->order,
                   64, err));
  for (int64_t i = 0; i < n; i++) {
    const int64_t *src = box_at(ctx, i);
    int64_t *b = t->boxes + i * 2 * ndim;
    for (int d = 0; d < ndim; d++) {
      b[d] = src[d];
      b[ndim + d] = src[d] + src[ndim + d];
    }
    t->order[i] = (box_key){0, i};
  }
  t->n = n;
  if (n == 0) return RS_OK;
  int64_t root;
  return build_node(t, 0, n, 0, &root, err);
}

/* Boxes meeting box q (lo[ndim], hi[ndim]), other than `skip`. */
static int64_t query(const rsi_box_tree *t, const int64_t *q, int64_t skip,
                     int64_t *out, int64_t max) {
  int nd = t->ndim;
  int64_t stack[MAX_DEPTH], found = 0;
  int top = 0;
  if (t->n == 0 || max <= 0) return 0;
  stack[top++] = 0;
  while (top > 0) {
    const rsi_box_node *node = &t->nodes[stack[--top]];
    if (!meets(nd, t->bounds + (node - t->nodes) * 2 * nd, q)) continue;
    if (node->left >= 0) {
      stack[top++] = node->right;
      stack[top++] = node->left;
      continue;
    }
    for (int64_t i = node->first; i < node->first + node->count; i++) {
      int64_t id = t->order[i].id;
      if (id == skip || !meets(nd, t->boxes + id * 2 * nd, q)) continue;
      out[found++] = id;
      if (found == max) return found;
    }
  }
  return found;
}

int64_t rsi_box_tree_query(const rsi_box_tree *t, const int64_t *off,
                           const int64_t *ext, int64_t skip, int64_t *out,
                           int64_t max) {
  int64_t q[2 * RS_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    q[d] = off[d];
    q[t->ndim + d] = off[d] + ext[d];
  }
  return query(t, q, skip, out, max);
}

bool rsi_box_tree_disjoint(const rsi_box_tree *t, int64_t *a, int64_t *b) {
  for (int64_t i = 0; i < t->n; i++) {
    int64_t other;
    if (query(t, t->boxes + i * 2 * t->ndim, i, &other, 1) == 0) continue;
    *a = i < other ? i : other;
    *b = i < other ? other : i;
    return false;
  }
  return true;
}

void rsi_box_tree_free(rsi_box_tree *t) {
  free(t->boxes);
  free(t->order);
  free(t->nodes);
  free(t->bounds);
  memset(t, 0, sizeof *t);
}
