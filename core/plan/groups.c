/* SPDX-License-Identifier: Apache-2.0 */
/* Groups: shards with identical boxes sorted into groups (a group's
 * holders are its replicas), the box tree over source groups and the
 * queries that find the groups meeting a box, ranked by locality. */
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

int rsi_planner_cmp_key(const void *x, const void *y) {
  const sort_key *a = x, *b = y;
  for (int i = 0; i < 2 * a->ndim; i++)
    if (a->geom[i] != b->geom[i]) return a->geom[i] < b->geom[i] ? -1 : 1;
  if (a->domain != b->domain) return a->domain < b->domain ? -1 : 1;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* cmp_key between keys of one box. */
static int cmp_place(const void *x, const void *y) {
  const sort_key *a = x, *b = y;
  if (a->domain != b->domain) return a->domain < b->domain ? -1 : 1;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

int rsi_planner_cmp_int64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* ---- groups and the source index ---------------------------------------- */

int rsi_planner_cmp_key_value(const void *x, const void *y) {
  const key_value *a = x, *b = y;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* Below this many keys, sort_keys is a plain qsort (small enough that the
 * random layouts of the property tests take both ways). */
#define SORT_KEYS_SMALL 16

static uint64_t box_hash(const int64_t *geom, int n) {
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < n; i++) {
    h = (h ^ (uint64_t)geom[i]) * 0xff51afd7ed558ccdu;
    h ^= h >> 32;
  }
  return h;
}

/* Sort keys[0..n) as qsort with cmp_key would, in O(n) but for the boxes:
 * a tensor's shards have few distinct boxes (thousands of replicas of a
 * few shards), so the boxes are numbered through a hash table, only the
 * distinct ones are sorted, the keys are bucketed by box in a counting
 * sort, and each bucket is sorted by place unless it already is (shards
 * usually come in rank order). Comparing whole boxes at every step of a
 * sort of every key was 7% of planning at 4096 GPUs a side. *nbox_out:
 * the distinct boxes, their keys ending at p->sorter.start[0 .. nbox);
 * -1 where n was small enough for a plain qsort. */
rs_status rsi_planner_sort_keys(planner *p, sort_key *keys, int64_t n,
                           int32_t *nbox_out) {
  *nbox_out = -1;
  if (n < SORT_KEYS_SMALL) {
    qsort(keys, (size_t)n, sizeof *keys, rsi_planner_cmp_key);
    return RS_OK;
  }
  key_sorter *ks = &p->sorter;
  int nw = 2 * p->ndim;
  int64_t nslots = 1;
  while (nslots < 2 * n) nslots *= 2;
  RSI_TRY(rsi_grow((void **)&ks->tmp, &ks->cap_tmp, n, sizeof *ks->tmp, 64,
                   p->err));
  RSI_TRY(rsi_grow((void **)&ks->box_of, &ks->cap_box_of, n,
                   sizeof *ks->box_of, 64, p->err));
  RSI_TRY(rsi_grow((void **)&ks->slots, &ks->cap_slots, nslots,
                   sizeof *ks->slots, 128, p->err));
  RSI_TRY(rsi_grow((void **)&ks->start, &ks->cap_start, n + 1,
                   sizeof *ks->start, 64, p->err));
  memset(ks->slots, 0xff, (size_t)nslots * sizeof *ks->slots);
  int32_t nbox = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = box_hash(keys[i].geom, nw) & (uint64_t)(nslots - 1);
    while (ks->slots[h] >= 0 &&
           memcmp(keys[ks->start[ks->slots[h]]].geom, keys[i].geom,
                  (size_t)nw * sizeof *keys[i].geom) != 0)
      h = (h + 1) & (uint64_t)(nslots - 1);
    if (ks->slots[h] < 0) {
      ks->slots[h] = nbox;
      ks->start[nbox++] = i;
    }
    ks->box_of[i] = ks->slots[h];
  }
  /* The distinct boxes in order, by their first keys (their place breaks
   * no tie: the boxes differ). */
  for (int32_t b = 0; b < nbox; b++) ks->tmp[b] = keys[ks->start[b]];
  for (int32_t b = 0; b < nbox; b++) ks->tmp[b].index = b;
  qsort(ks->tmp, (size_t)nbox, sizeof *ks->tmp, rsi_planner_cmp_key);
  /* start: box id -> its bucket's start, counted in box order */
  int32_t *rank = ks->slots; /* the table is done with */
  for (int32_t r = 0; r < nbox; r++) rank[ks->tmp[r].index] = r;
  memset(ks->start, 0, (size_t)(nbox + 1) * sizeof *ks->start);
  for (int64_t i = 0; i < n; i++) ks->start[rank[ks->box_of[i]] + 1]++;
  for (int32_t r = 0; r < nbox; r++) ks->start[r + 1] += ks->start[r];
  for (int64_t i = 0; i < n; i++)
    ks->tmp[ks->start[rank[ks->box_of[i]]]++] = keys[i];
  memcpy(keys, ks->tmp, (size_t)n * sizeof *keys);
  /* start[r] is now bucket r's end; each bucket by place */
  for (int32_t r = 0; r < nbox; r++) {
    int64_t lo = r ? ks->start[r - 1] : 0, hi = ks->start[r], k = lo + 1;
    while (k < hi && cmp_place(&keys[k - 1], &keys[k]) < 0) k++;
    if (k < hi) qsort(keys + lo, (size_t)(hi - lo), sizeof *keys, cmp_place);
  }
  *nbox_out = nbox;
  return RS_OK;
}

/* Sort one tensor's shards of a side by (box, domain, rank) and cut the
 * runs of identical boxes into groups. */
rs_status rsi_planner_make_groups(planner *p, const rsi_side *side,
                             const int64_t *shard_ids, int64_t n,
                             sort_key *keys, group *groups, int64_t *ngroups) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_shard *s = &side->shards[shard_ids[i]];
    keys[i] = (sort_key){side->pool.v + s->geom, p->ndim,
                         p->domain_ix[s->rank], s->rank, shard_ids[i]};
  }
  int32_t nbox;
  RSI_TRY(rsi_planner_sort_keys(p, keys, n, &nbox));
  if (nbox >= 0) { /* the sort's buckets are the groups */
    const int64_t *end = p->sorter.start;
    for (int32_t b = 0; b < nbox; b++) {
      int64_t first = b ? end[b - 1] : 0;
      groups[b] = (group){first, end[b] - first, keys[first].geom,
                          keys[first].geom + p->ndim};
    }
    *ngroups = nbox;
    return RS_OK;
  }
  int64_t g = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || !rsi_box_equal(p->ndim, keys[i].geom, keys[i].geom + p->ndim,
                                 keys[i - 1].geom,
                                 keys[i - 1].geom + p->ndim)) {
      groups[g] = (group){i, 0, keys[i].geom, keys[i].geom + p->ndim};
      g++;
    }
    groups[g - 1].n++;
  }
  *ngroups = g;
  return RS_OK;
}

/* Group i's box: its offset, the extent right after it (a sort_key's
 * geometry). */
static const int64_t *group_box(const void *groups, int64_t i) {
  return ((const group *)groups)[i].off;
}

/* Fill tree with groups[0..n) and tell whether any two share an element. */
rs_status rsi_planner_groups_disjoint(planner *p, rsi_box_tree *tree,
                                 const group *groups, int64_t n,
                                 bool *disjoint) {
  RSI_TRY(rsi_box_tree_build(tree, p->ndim, n, group_box, groups, p->err));
  int64_t a, b;
  *disjoint = rsi_box_tree_disjoint(tree, &a, &b);
  return RS_OK;
}

/* Index the source groups in a box tree, and order them by offset in the
 * dim with the most distinct offsets (the order queries answer in). */
rs_status rsi_planner_index_sources(planner *p, key_value *order) {
  int best = 0;
  int64_t best_distinct = -1;
  for (int d = 0; d < p->ndim; d++) {
    for (int64_t i = 0; i < p->nsg; i++)
      order[i] = (key_value){p->sgroups[i].off[d], i};
    qsort(order, (size_t)p->nsg, sizeof *order, rsi_planner_cmp_key_value);
    int64_t distinct = 0;
    for (int64_t i = 0; i < p->nsg; i++)
      distinct += i == 0 || order[i].v != order[i - 1].v;
    if (distinct > best_distinct) {
      best_distinct = distinct;
      best = d;
    }
  }
  p->key = best;
  for (int64_t i = 0; i < p->nsg; i++)
    order[i] = (key_value){p->sgroups[i].off[best], i};
  qsort(order, (size_t)p->nsg, sizeof *order, rsi_planner_cmp_key_value);
  for (int64_t i = 0; i < p->nsg; i++) p->key_rank[order[i].i] = i;
  return rsi_planner_groups_disjoint(p, &p->stree, p->sgroups, p->nsg,
                                     &p->src_disjoint);
}

/* Source groups meeting box (off, ext), in index order, into p->cands. */
int64_t rsi_planner_query_sources(planner *p, const key_value *order,
                             const int64_t *off, const int64_t *ext) {
  int64_t n = rsi_box_tree_query(&p->stree, off, ext, -1, p->cands, p->nsg);
  for (int64_t i = 0; i < n; i++) p->cands[i] = p->key_rank[p->cands[i]];
  if (n > 24) {
    qsort(p->cands, (size_t)n, sizeof *p->cands, rsi_planner_cmp_int64);
  } else { /* usually a few: qsort's calls cost more than they sort */
    for (int64_t i = 1; i < n; i++) {
      int64_t c = p->cands[i], j = i;
      for (; j > 0 && p->cands[j - 1] > c; j--) p->cands[j] = p->cands[j - 1];
      p->cands[j] = c;
    }
  }
  for (int64_t i = 0; i < n; i++) p->cands[i] = order[p->cands[i]].i;
  return n;
}

/* ---- fragments ------------------------------------------------------------ */

rs_status rsi_planner_not_covered(planner *p, const int64_t *off) {
  char where[256];
  int n = 0;
  for (int d = 0; d < p->ndim && n < (int)sizeof where - 24; d++)
    n += snprintf(where + n, sizeof where - (size_t)n, "%s%lld", d ? ", " : "",
                  (long long)off[d]);
  return RSI_FAIL(p->err, RS_ERR_NOT_COVERED,
                  "tensor '%s': destination element [%s] is held by no "
                  "source shard",
                  p->plan->tensors[p->tensor].name, where);
}

/* Order candidate source groups p->cands[0..n) by locality (stable): those
 * a needer of the fragment holds itself, then those with a replica inside
 * the domain, then the rest. Carved in this order, a piece comes from
 * outside the domain only where no rank inside it holds any of it. */
void rsi_planner_rank_by_locality(planner *p, int domain, int64_t nneed,
                             int64_t n) {
  p->mark++;
  for (int64_t i = 0; i < nneed; i++)
    p->rank_mark[p->needers[i].rank] = p->mark;
  for (int64_t c = 0; c < n; c++) {
    const group *g = &p->sgroups[p->cands[c]];
    int64_t lo, hi; /* the needers are all in the domain */
    rsi_planner_replicas_in(p, g, domain, &lo, &hi);
    int64_t level = lo < hi ? 1 : 2;
    for (int64_t k = lo; k < hi && level > 0; k++)
      if (p->rank_mark[p->skeys[k].rank] == p->mark) level = 0;
    p->ranked[c] = (key_value){level * n + c, p->cands[c]};
  }
  qsort(p->ranked, (size_t)n, sizeof *p->ranked, rsi_planner_cmp_key_value);
  for (int64_t c = 0; c < n; c++) p->cands[c] = p->ranked[c].i;
}
