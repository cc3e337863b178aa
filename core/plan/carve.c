/* SPDX-License-Identifier: Apache-2.0 */
/* Carving a domain whose destination groups overlap into disjoint
 * fragments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/grow.h"
#include "base/hash.h"
#include "base/radix_sort.h"
#include "layout/box.h"
#include "layout/box_tree.h"
#include "plan/planner.h"
#include "plan/replica_sets.h"
#include "plan/staging.h"

const int64_t *rsi_planner_domain_group_box(const void *ctx, int64_t i) {
  const domain_groups *dg = ctx;
  return dg->p->dgroups[dg->p->entries[dg->e0 + i].group].off;
}

/* ---- domains whose groups overlap ---------------------------------------- */

/* A domain's overlapping groups are carved into disjoint fragments, each
 * needed by every group it meets: group by group in entry order, a group
 * adds what the earlier fragments leave of its box. Only the earlier
 * fragments that meet it are taken away (the others would change nothing),
 * found through the groups they came from in the domain's box tree. Up to
 * CARVE_IN_ORDER of them are taken away one after the other, each piece
 * they meet replaced by its slabs; more are split first: the box is halved
 * at the median boundary of the fragments inside it, in the dim that has
 * the most, until few meet each half (or CARVE_DEPTH halvings). */
#define CARVE_IN_ORDER 32
#define CARVE_DEPTH 48

/* Take cutters p->cut[first ..) (n boxes: offset, extent) away, in order,
 * from the pieces p->frags[start ..): a piece that meets a cutter is
 * replaced by the slabs rsi_box_subtract leaves of it. */
static rs_status subtract_in_order(planner *p, int64_t start, int64_t first,
                                   int64_t n) {
  int nd = p->ndim;
  rsi_pool *fr = &p->frags;
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS],
      fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
  for (int64_t c = 0; c < n && fr->n > start; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    int64_t end = fr->n;
    for (int64_t r = start; r < end; r += 2 * nd) {
      int k = rsi_box_subtract(nd, fr->v + r, fr->v + r + nd, q, q + nd, fo,
                               fe);
      for (int f = 0; f < k; f++)
        if (rsi_pool_push(fr, fo + f * nd, nd, p->err) < 0 ||
            rsi_pool_push(fr, fe + f * nd, nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
    }
    memmove(fr->v + start, fr->v + end, (size_t)(fr->n - end) * sizeof *fr->v);
    fr->n -= end - start;
  }
  return RS_OK;
}

/* Where to halve box (offset, extent) among cutters p->cut[first ..): the
 * dim with the most cutter boundaries strictly inside the box, at their
 * median. There is one when no cutter contains the box. */
static rs_status choose_cut(planner *p, const int64_t *box, int64_t first,
                            int64_t n, int *dim, int64_t *at) {
  int nd = p->ndim;
  int64_t count[RSI_MAX_DIMS] = {0};
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    for (int d = 0; d < nd; d++) {
      count[d] += q[d] > box[d];
      count[d] += q[d] + q[nd + d] < box[d] + box[nd + d];
    }
  }
  int best = 0;
  for (int d = 1; d < nd; d++)
    if (count[d] > count[best]) best = d;
  RSI_TRY(rsi_grow((void **)&p->cut_at, &p->cap_cut_at, count[best],
                   sizeof *p->cut_at, 64, p->err));
  int64_t k = 0, lo = box[best], hi = box[best] + box[nd + best];
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    if (q[best] > lo) p->cut_at[k++] = q[best];
    if (q[best] + q[nd + best] < hi) p->cut_at[k++] = q[best] + q[nd + best];
  }
  qsort(p->cut_at, (size_t)k, sizeof *p->cut_at, rsi_planner_cmp_int64);
  *dim = best;
  *at = p->cut_at[k / 2];
  return RS_OK;
}

/* Append to p->frags what cutters p->cut[first ..) (n boxes) leave of box
 * (offset, extent; a copy, the pools move). */
static rs_status carve_rest(planner *p, const int64_t *box, int64_t first,
                            int64_t n, int depth) {
  int nd = p->ndim;
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    if (rsi_box_contains(nd, q, q + nd, box, box + nd)) return RS_OK;
  }
  if (n <= CARVE_IN_ORDER || depth >= CARVE_DEPTH) {
    int64_t start = p->frags.n;
    if (rsi_pool_push(&p->frags, box, 2 * nd, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    return subtract_in_order(p, start, first, n);
  }
  int dim;
  int64_t at;
  RSI_TRY(choose_cut(p, box, first, n, &dim, &at));
  for (int upper = 0; upper < 2; upper++) {
    int64_t half[2 * RSI_MAX_DIMS];
    memcpy(half, box, (size_t)(2 * nd) * sizeof *half);
    half[dim] = upper ? at : box[dim];
    half[nd + dim] = upper ? box[dim] + box[nd + dim] - at : at - box[dim];
    int64_t mark = p->cut.n;
    for (int64_t c = 0; c < n; c++) {
      int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
      const int64_t *q = p->cut.v + first + c * 2 * nd;
      if (!rsi_box_intersect(nd, q, q + nd, half, half + nd, o, e)) continue;
      if (rsi_pool_push(&p->cut, o, nd, p->err) < 0 ||
          rsi_pool_push(&p->cut, e, nd, p->err) < 0)
        return RS_ERR_NO_MEMORY;
    }
    RSI_TRY(carve_rest(p, half, mark, (p->cut.n - mark) / (2 * nd),
                       depth + 1));
    p->cut.n = mark;
  }
  return RS_OK;
}

/* Carve the groups of entries [e0, e1) (in p->dtree, by entry - e0) into
 * disjoint fragments in p->frags. */
rs_status rsi_planner_carve_domain(planner *p, int64_t e0, int64_t e1) {
  int nd = p->ndim;
  int64_t m = e1 - e0;
  RSI_TRY(rsi_grow((void **)&p->frag_first, &p->cap_frag_first, m + 1,
                   sizeof *p->frag_first, 64, p->err));
  RSI_TRY(rsi_grow((void **)&p->hits, &p->cap_hits, m, sizeof *p->hits, 64,
                   p->err));
  p->frags.n = 0;
  for (int64_t i = 0; i < m; i++) {
    const group *g = &p->dgroups[p->entries[e0 + i].group];
    p->frag_first[i] = p->frags.n;
    int64_t nhits =
        rsi_box_tree_query(&p->dtree, g->off, g->ext, i, p->hits, m);
    qsort(p->hits, (size_t)nhits, sizeof *p->hits, rsi_planner_cmp_int64);
    p->cut.n = 0;
    for (int64_t h = 0; h < nhits && p->hits[h] < i; h++)
      for (int64_t f = p->frag_first[p->hits[h]];
           f < p->frag_first[p->hits[h] + 1]; f += 2 * nd) {
        int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
        const int64_t *q = p->frags.v + f;
        if (rsi_box_intersect(nd, q, q + nd, g->off, g->ext, o, e) &&
            rsi_pool_push(&p->cut, q, 2 * nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
      }
    int64_t box[2 * RSI_MAX_DIMS];
    memcpy(box, g->off, (size_t)(2 * nd) * sizeof *box);
    RSI_TRY(carve_rest(p, box, 0, p->cut.n / (2 * nd), 0));
  }
  p->frag_first[m] = p->frags.n;
  return RS_OK;
}
