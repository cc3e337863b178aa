/* SPDX-License-Identifier: Apache-2.0 */
/* Replica sets: the ranks that hold one source box, and the bytes each of
 * them has sent across domains for pieces of any box the same ranks hold.
 *
 * The planner picks the replica a piece crosses from by these bytes: the
 * one that has sent least for its set. That is a function of the set's
 * own pieces, not of every rank's traffic in the job (the loads the
 * planner chose by before), so a rank can work it out from the layouts
 * and the pieces of the sets it sends from or receives from. */
#ifndef RS_CORE_REPLICA_SETS_H
#define RS_CORE_REPLICA_SETS_H

#include <stdint.h>

#include "base/error.h"
#include "base/hash.h"

typedef struct rsi_replica_sets {
  /* set i: ranks[sets[i].first ..][0 .. sets[i].n), sent beside them */
  struct rsi_replica_set {
    int64_t first, n;
    uint64_t hash;
    /* its tournament: tree[tree_first + k], k in [1, 2 leaves): node k
     * holds the place that has sent least among its leaves' (the first
     * on a tie; -1 for none), leaf `leaves + i` place i */
    int64_t tree_first, leaves;
  } * sets;
  int64_t count, cap_sets;
  int32_t *ranks;
  int64_t *sent;
  int64_t nranks, cap_ranks, cap_sent;
  int32_t *tree;
  int64_t ntree, cap_tree;
  int64_t *table; /* open addressing over set ids, -1 empty */
  int64_t cap_table;
  rsi_hash_key key; /* places sets in the table only: decides no order */
} rsi_replica_sets;

/* An empty collection. */
void rsi_replica_sets_init(rsi_replica_sets *s);
void rsi_replica_sets_free(rsi_replica_sets *s);

/* The id of the set of ranks[0 .. n) (n >= 1, in the order the caller
 * always gives them), added with nothing sent when it is new. */
rs_status rsi_replica_sets_find(rsi_replica_sets *s, const int32_t *ranks,
                                int64_t n, int64_t *id, rsi_err *err);

/* The place (0 .. n) in set `id` of the replica that has sent the fewest
 * bytes for the set; the first of them on a tie. O(1): the sets keep a
 * tournament of their places, which an add updates in O(log n) (a set of
 * 64 expert replicas was read whole for every piece that crossed). */
int64_t rsi_replica_sets_least_sent(const rsi_replica_sets *s, int64_t id);

/* Replica `at` of set `id` sent `bytes` more for the set. */
void rsi_replica_sets_add(rsi_replica_sets *s, int64_t id, int64_t at,
                          int64_t bytes);

#endif
