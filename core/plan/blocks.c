/* SPDX-License-Identifier: Apache-2.0 */
/* Block-scaled destinations (fp8 with scales): every destination block
 * whole on the rank that holds its scale. */
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

/* ---- block-scaled fp8 ------------------------------------------------------ */

/* Destination shard ids[0..n) sorted by rank (then id). */
static rs_status sort_by_rank(planner *p, int64_t *ids, int64_t n) {
  const rsi_side *side = &p->plan->side[RS_SIDE_DST];
  key_value *kv = malloc((size_t)(n ? n : 1) * sizeof *kv);
  if (!kv) return RSI_NOMEM(p->err);
  for (int64_t i = 0; i < n; i++)
    kv[i] = (key_value){side->shards[ids[i]].rank, ids[i]};
  qsort(kv, (size_t)n, sizeof *kv, rsi_planner_cmp_key_value);
  for (int64_t i = 0; i < n; i++) ids[i] = kv[i].i;
  free(kv);
  return RS_OK;
}

/* The scale shards of the tensor being planned, by rank (p->scale_ids). */
rs_status rsi_planner_scale_shards(planner *p) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  p->nscale_ids = 0;
  if (cv->scales < 0) return RS_OK;
  int64_t n = p->dfirst[cv->scales + 1] - p->dfirst[cv->scales];
  free(p->scale_ids);
  p->scale_ids = malloc((size_t)(n ? n : 1) * sizeof *p->scale_ids);
  if (!p->scale_ids) return RSI_NOMEM(p->err);
  memcpy(p->scale_ids, p->dids + p->dfirst[cv->scales],
         (size_t)n * sizeof *p->scale_ids);
  p->nscale_ids = n;
  return sort_by_rank(p, p->scale_ids, n);
}

/* The boxes of shards ids[0..n) as block boxes (values: in blocks; scales:
 * as they are, one element a block), into pool. */
static rs_status block_boxes(planner *p, const int64_t *ids, int64_t n,
                             bool values, const rsi_conversion *cv,
                             rsi_pool *pool) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int nd = p->ndim;
  pool->n = 0;
  for (int64_t i = 0; i < n; i++) {
    const rsi_shard *s = &dst->shards[ids[i]];
    const int64_t *o = rsi_shard_offset(&dst->pool, s);
    const int64_t *e = rsi_shard_extent(&dst->pool, s, nd);
    int64_t box[2 * RSI_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      int64_t bs = values ? rsi_planner_block_size(cv, nd, d) : 1;
      box[d] = o[d] / bs;
      box[nd + d] = (o[d] + e[d] + bs - 1) / bs - box[d];
    }
    if (rsi_pool_push(pool, box, 2 * nd, p->err) < 0) return RS_ERR_NO_MEMORY;
  }
  return RS_OK;
}

/* The first block of box b (2*nd) that boxes[0..n) leave uncovered, into
 * at; false when they cover it. Uses p->own_work. */
static rs_status uncovered_block(planner *p, const int64_t *b,
                                 const rsi_pool *boxes, int64_t *at,
                                 bool *found) {
  int nd = p->ndim;
  rsi_pool *w = &p->own_work;
  w->n = 0;
  if (rsi_pool_push(w, b, 2 * nd, p->err) < 0) return RS_ERR_NO_MEMORY;
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS],
      fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
  for (int64_t c = 0; c < boxes->n && w->n > 0; c += 2 * nd) {
    const int64_t *q = boxes->v + c;
    int64_t left = w->n;
    for (int64_t r = 0; r < left; r += 2 * nd) {
      int64_t rb[2 * RSI_MAX_DIMS];
      memcpy(rb, w->v + r, (size_t)(2 * nd) * sizeof *rb);
      int k = rsi_box_subtract(nd, rb, rb + nd, q, q + nd, fo, fe);
      for (int f = 0; f < k; f++)
        if (rsi_pool_push(w, fo + f * nd, nd, p->err) < 0 ||
            rsi_pool_push(w, fe + f * nd, nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
    }
    memmove(w->v, w->v + left, (size_t)(w->n - left) * sizeof *w->v);
    w->n -= left;
  }
  *found = w->n > 0;
  if (*found) memcpy(at, w->v, (size_t)nd * sizeof *at);
  return RS_OK;
}

static rs_status block_problem(planner *p, const char *what, int rank,
                               const int64_t *block) {
  char where[256];
  int n = 0;
  for (int d = 0; d < p->ndim && n < (int)sizeof where - 24; d++)
    n += snprintf(where + n, sizeof where - (size_t)n, "%s%lld", d ? ", " : "",
                  (long long)block[d]);
  return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                  "tensor '%s': rank %d %s block [%s] (blocks of %lld x "
                  "%lld)",
                  p->plan->tensors[p->tensor].name, rank, what, where,
                  (long long)p->plan->conv[p->tensor].b0,
                  (long long)p->plan->conv[p->tensor].b1);
}

/* One rank's destination shards of block-scaled values (vals[0..nv)) and
 * of their scales (scs[0..ns)): whole blocks, no block twice, and the
 * scales of exactly the blocks whose values it holds. */
static rs_status check_rank_blocks(planner *p, int rank, const int64_t *vals,
                                   int64_t nv, const int64_t *scs, int64_t ns) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  const rsi_tensor *t = &p->plan->tensors[p->tensor];
  int nd = p->ndim;
  for (int64_t i = 0; i < nv; i++) {
    const rsi_shard *s = &dst->shards[vals[i]];
    const int64_t *o = rsi_shard_offset(&dst->pool, s);
    const int64_t *e = rsi_shard_extent(&dst->pool, s, nd);
    for (int d = 0; d < nd; d++) {
      int64_t bs = rsi_planner_block_size(cv, nd, d), end = o[d] + e[d];
      if (o[d] % bs == 0 && (end % bs == 0 || end == t->shape[d])) continue;
      int64_t block[RSI_MAX_DIMS];
      for (int k = 0; k < nd; k++)
        block[k] = o[k] / rsi_planner_block_size(cv, nd, k);
      if (o[d] % bs == 0) block[d] = end / bs;
      return block_problem(p, "has a destination shard that cuts", rank,
                           block);
    }
  }
  rsi_pool mine = {0}, theirs = {0};
  rs_status st = block_boxes(p, vals, nv, true, cv, &mine);
  if (st == RS_OK) st = block_boxes(p, scs, ns, false, cv, &theirs);
  for (int pass = 0; st == RS_OK && pass < 2; pass++) {
    const rsi_pool *a = pass ? &theirs : &mine, *b = pass ? &mine : &theirs;
    for (int64_t i = 0; st == RS_OK && i < a->n; i += 2 * nd) {
      const int64_t *x = a->v + i;
      for (int64_t j = i + 2 * nd; j < a->n; j += 2 * nd) {
        int64_t io[RSI_MAX_DIMS], ie[RSI_MAX_DIMS];
        if (rsi_box_intersect(nd, x, x + nd, a->v + j, a->v + j + nd, io, ie)) {
          st = block_problem(p, pass ? "holds twice the scale of"
                                     : "holds twice the values of",
                             rank, io);
          break;
        }
      }
      int64_t at[RSI_MAX_DIMS];
      bool found = false;
      if (st == RS_OK) st = uncovered_block(p, x, b, at, &found);
      if (st == RS_OK && found)
        st = block_problem(p, pass ? "holds the scale but not the values of"
                                   : "holds the values but not the scale of",
                           rank, at);
    }
  }
  rsi_pool_free(&mine);
  rsi_pool_free(&theirs);
  return st;
}

/* Every block-scaled tensor's destination, rank by rank. */
rs_status rsi_planner_check_blocks(planner *p, const int64_t *dfirst,
                              const int64_t *dids) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  for (int t = 0; t < p->plan->ntensors; t++) {
    const rsi_conversion *cv = &p->plan->conv[t];
    if (cv->scales < 0) continue;
    p->tensor = t;
    p->ndim = p->plan->tensors[t].ndim;
    int64_t nv = dfirst[t + 1] - dfirst[t];
    int64_t ns = dfirst[cv->scales + 1] - dfirst[cv->scales];
    int64_t *v = malloc((size_t)(nv + ns + 1) * sizeof *v);
    if (!v) return RSI_NOMEM(p->err);
    int64_t *sc = v + nv;
    memcpy(v, dids + dfirst[t], (size_t)nv * sizeof *v);
    memcpy(sc, dids + dfirst[cv->scales], (size_t)ns * sizeof *sc);
    rs_status st = sort_by_rank(p, v, nv);
    if (st == RS_OK) st = sort_by_rank(p, sc, ns);
    for (int64_t i = 0, j = 0; st == RS_OK && (i < nv || j < ns);) {
      int ri = i < nv ? dst->shards[v[i]].rank : INT32_MAX;
      int rj = j < ns ? dst->shards[sc[j]].rank : INT32_MAX;
      int rank = ri < rj ? ri : rj;
      int64_t i1 = i, j1 = j;
      while (i1 < nv && dst->shards[v[i1]].rank == rank) i1++;
      while (j1 < ns && dst->shards[sc[j1]].rank == rank) j1++;
      st = check_rank_blocks(p, rank, v + i, i1 - i, sc + j, j1 - j);
      i = i1;
      j = j1;
    }
    free(v);
    if (st != RS_OK) return st;
  }
  return RS_OK;
}
