/* SPDX-License-Identifier: Apache-2.0 */
/* Box trees: a bounding-volume tree over n boxes of one index space, to find
 * the boxes that meet a query box, or two boxes that meet each other,
 * without comparing every pair and whatever dim the boxes vary in (rows,
 * columns, one element each in 16 dims, a few boxes as large as the
 * tensor among many small ones).
 *
 * A node holds the bounds of its boxes; inner nodes split their boxes at
 * the median of their centres along the dim where the centres spread
 * most. Building costs O(n log n); a query costs O(log n + k) for boxes
 * that tile or nearly tile a region (k boxes found). The tree depends only
 * on the boxes and their order, never on addresses, so every rank that
 * builds it from the same boxes visits them in the same order. A tree is
 * reused: build again to refill it, free once. */
#ifndef RS_CORE_BOX_TREE_H
#define RS_CORE_BOX_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct rsi_box_node {
  int64_t first, count; /* order[first .. first+count) */
  int64_t left, right;  /* child nodes; -1 in a leaf */
} rsi_box_node;

/* A zeroed tree is empty and ready to be built. */
typedef struct rsi_box_tree {
  int ndim;
  int64_t n;
  int64_t *boxes;              /* box i: lo[ndim], hi[ndim] at i*2*ndim */
  struct rsi_box_key *order;   /* box ids in tree order (and build keys) */
  rsi_box_node *nodes;         /* nodes[0] is the root */
  int64_t *bounds;             /* node j: lo[ndim], hi[ndim] at j*2*ndim */
  int64_t nnodes;
  int64_t cap_boxes, cap_order, cap_nodes, cap_bounds;
} rsi_box_tree;

/* Box i of a build: offset[ndim] followed by extent[ndim]. */
typedef const int64_t *(*rsi_box_at)(const void *ctx, int64_t i);

/* Fill tree with boxes 0..n-1 (box_at(ctx, i); extents >= 1). */
rs_status rsi_box_tree_build(rsi_box_tree *tree, int ndim, int64_t n,
                             rsi_box_at box_at, const void *ctx,
                             rsi_err *err);

/* Ids of the boxes meeting (off, ext), other than box `skip` (-1: none),
 * in tree order, into out; stops after max of them. Returns how many. */
int64_t rsi_box_tree_query(const rsi_box_tree *tree, const int64_t *off,
                           const int64_t *ext, int64_t skip, int64_t *out,
                           int64_t max);

/* True when no two boxes of the tree share an element; otherwise false,
 * with two boxes that do in *a < *b. */
bool rsi_box_tree_disjoint(const rsi_box_tree *tree, int64_t *a, int64_t *b);

void rsi_box_tree_free(rsi_box_tree *tree);

#endif
