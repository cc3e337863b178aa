/* SPDX-License-Identifier: Apache-2.0 */
#include "plan/replica_sets.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void rsi_replica_sets_init(rsi_replica_sets *s) {
  memset(s, 0, sizeof *s);
  rsi_hash_key_random(&s->key);
}

void rsi_replica_sets_free(rsi_replica_sets *s) {
  free(s->sets);
  free(s->ranks);
  free(s->sent);
  free(s->table);
  free(s->tree);
  memset(s, 0, sizeof *s);
}

static bool same_set(const rsi_replica_sets *s, int64_t id, uint64_t h,
                     const int32_t *ranks, int64_t n) {
  const struct rsi_replica_set *e = &s->sets[id];
  return e->hash == h && e->n == n &&
         memcmp(s->ranks + e->first, ranks, (size_t)n * sizeof *ranks) == 0;
}

/* The table slot of hash h: where set `ranks` is, or the empty slot it
 * would go in. */
static int64_t *slot_of(const rsi_replica_sets *s, uint64_t h,
                        const int32_t *ranks, int64_t n) {
  uint64_t mask = (uint64_t)s->cap_table - 1;
  for (uint64_t i = h & mask;; i = (i + 1) & mask) {
    int64_t *at = &s->table[i];
    if (*at < 0 || (ranks && same_set(s, *at, h, ranks, n))) return at;
  }
}

static rs_status grow_table(rsi_replica_sets *s, rsi_err *err) {
  int64_t cap = s->cap_table ? 2 * s->cap_table : 64;
  int64_t *t = malloc((size_t)cap * sizeof *t);
  if (!t) return RSI_NOMEM(err);
  free(s->table);
  s->table = t;
  s->cap_table = cap;
  for (int64_t i = 0; i < cap; i++) t[i] = -1;
  for (int64_t id = 0; id < s->count; id++)
    *slot_of(s, s->sets[id].hash, NULL, 0) = id;
  return RS_OK;
}

rs_status rsi_replica_sets_find(rsi_replica_sets *s, const int32_t *ranks,
                                int64_t n, int64_t *id, rsi_err *err) {
  if (2 * (s->count + 1) > s->cap_table) RSI_TRY(grow_table(s, err));
  uint64_t h = rsi_siphash(&s->key, ranks, (size_t)n * sizeof *ranks);
  int64_t *at = slot_of(s, h, ranks, n);
  if (*at >= 0) {
    *id = *at;
    return RS_OK;
  }
  int64_t nr = s->nranks + n, leaves = 1;
  while (leaves < n) leaves *= 2;
  RSI_TRY(rsi_grow((void **)&s->sets, &s->cap_sets, s->count + 1,
                   sizeof *s->sets, 64, err));
  RSI_TRY(rsi_grow((void **)&s->ranks, &s->cap_ranks, nr, sizeof *s->ranks,
                   256, err));
  RSI_TRY(rsi_grow((void **)&s->sent, &s->cap_sent, nr, sizeof *s->sent, 256,
                   err));
  RSI_TRY(rsi_grow((void **)&s->tree, &s->cap_tree, s->ntree + 2 * leaves,
                   sizeof *s->tree, 256, err));
  int64_t i = s->count++;
  s->sets[i] = (struct rsi_replica_set){s->nranks, n, h, s->ntree, leaves};
  memcpy(s->ranks + s->nranks, ranks, (size_t)n * sizeof *ranks);
  memset(s->sent + s->nranks, 0, (size_t)n * sizeof *s->sent);
  s->nranks = nr;
  /* nothing sent yet: every node holds its first leaf's place */
  int32_t *tree = s->tree + s->ntree;
  s->ntree += 2 * leaves;
  for (int64_t k = 0; k < leaves; k++)
    tree[leaves + k] = k < n ? (int32_t)k : -1;
  for (int64_t k = leaves - 1; k >= 1; k--) tree[k] = tree[2 * k];
  *at = i;
  *id = i;
  return RS_OK;
}

int64_t rsi_replica_sets_least_sent(const rsi_replica_sets *s, int64_t id) {
  return s->tree[s->sets[id].tree_first + 1];
}

void rsi_replica_sets_add(rsi_replica_sets *s, int64_t id, int64_t at,
                          int64_t bytes) {
  const struct rsi_replica_set *e = &s->sets[id];
  const int64_t *sent = s->sent + e->first;
  int32_t *tree = s->tree + e->tree_first;
  s->sent[e->first + at] += bytes;
  for (int64_t k = (e->leaves + at) / 2; k >= 1; k /= 2) {
    int32_t a = tree[2 * k], b = tree[2 * k + 1];
    /* a's leaves come before b's: a wins a tie */
    tree[k] = b < 0 || sent[a] <= sent[b] ? a : b;
  }
}
