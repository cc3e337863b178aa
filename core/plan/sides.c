/* SPDX-License-Identifier: Apache-2.0 */
/* A plan's two sides: the shards borrowed from the layouts while the
 * plan is made, by tensor, and the copy the plan keeps. */
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

/* ---- the plan ------------------------------------------------------------ */

/* The side of layout l: its shards and geometry borrowed (rsi_side), and
 * the table of the buffers of every rank this process drives. */
rs_status rsi_planner_borrow_side(rs_plan *plan, rsi_side *side,
                             const rs_layout *l, rsi_err *err) {
  side->nshards = l->nshards;
  side->shards = l->shards;
  side->pool = l->pool;
  side->borrowed = true;
  side->rank_first =
      calloc((size_t)plan->world_size + 1, sizeof *side->rank_first);
  if (!side->rank_first) return RSI_NOMEM(err);
  /* buffers 0..max of every rank this process drives: only those are
   * ever bound and checked (in an MPI context at 8192 GPUs a side, the
   * slots of every rank would be 8.4 M, 270 MB) */
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    if (!rsi_context_drives(plan->ctx, s->rank)) continue;
    if (s->buffer + 1 > side->rank_first[s->rank + 1])
      side->rank_first[s->rank + 1] = s->buffer + 1;
  }
  for (int r = 0; r < plan->world_size; r++)
    side->rank_first[r + 1] += side->rank_first[r];
  int64_t nbuf = side->rank_first[plan->world_size];
  side->buffers = calloc((size_t)(nbuf ? nbuf : 1), sizeof *side->buffers);
  if (!side->buffers) return RSI_NOMEM(err);
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    if (!rsi_context_drives(plan->ctx, s->rank)) continue;
    struct rsi_binding *b =
        &side->buffers[side->rank_first[s->rank] + s->buffer];
    if (s->byte_end > b->need) b->need = s->byte_end;
  }
  return RS_OK;
}

/* Shard ids of each tensor, tensor by tensor (counting sort, stable). */
rs_status rsi_planner_shards_by_tensor(const rs_layout *l,
                                       const int *tensor_map, int ntensors,
                                       int64_t **first_out, int64_t **ids_out,
                                       rsi_err *err) {
  int64_t *first = calloc((size_t)ntensors + 1, sizeof *first);
  int64_t *ids = malloc((size_t)(l->nshards ? l->nshards : 1) * sizeof *ids);
  if (!first || !ids) {
    free(first);
    free(ids);
    return RSI_NOMEM(err);
  }
  bool in_order = true; /* shards come a tensor at a time, in plan order */
  for (int64_t i = 0; i < l->nshards; i++) {
    int t = tensor_map[l->shards[i].tensor];
    in_order &= i == 0 || t >= tensor_map[l->shards[i - 1].tensor];
    first[t + 1]++;
  }
  for (int t = 0; t < ntensors; t++) first[t + 1] += first[t];
  if (in_order) {
    for (int64_t i = 0; i < l->nshards; i++) ids[i] = i;
    *first_out = first;
    *ids_out = ids;
    return RS_OK;
  }
  int64_t *fill = malloc((size_t)ntensors * sizeof *fill + 1);
  if (!fill) {
    free(first);
    free(ids);
    return RSI_NOMEM(err);
  }
  memcpy(fill, first, (size_t)ntensors * sizeof *fill);
  for (int64_t i = 0; i < l->nshards; i++)
    ids[fill[tensor_map[l->shards[i].tensor]]++] = i;
  free(fill);
  *first_out = first;
  *ids_out = ids;
  return RS_OK;
}

/* The sides made the plan's own once it is made (rsi_side): copied, the
 * destination's tensors numbered by dst_map, where the plan keeps boxes
 * or is to keep a rank's part (part.c cuts the copy); else, a plan
 * that cannot run (without boxes, or a domain's part), emptied. */
rs_status rsi_planner_own_sides(rs_plan *plan, bool keep, const int *dst_map,
                           rsi_err *err) {
  for (int k = 0; k < 2; k++) {
    rsi_side *side = &plan->side[k];
    const rsi_shard *shards = side->shards;
    rsi_pool pool = side->pool;
    side->shards = NULL;
    side->pool = (rsi_pool){0};
    side->borrowed = false;
    if (!keep) {
      side->nshards = 0;
      continue;
    }
    side->shards =
        malloc((size_t)(side->nshards ? side->nshards : 1) * sizeof *shards);
    if (!side->shards) return RSI_NOMEM(err);
    if (side->nshards)
      memcpy(side->shards, shards, (size_t)side->nshards * sizeof *shards);
    if (k == RS_SIDE_DST)
      for (int64_t i = 0; i < side->nshards; i++)
        side->shards[i].tensor = dst_map[side->shards[i].tensor];
    if (rsi_pool_push(&side->pool, pool.v, pool.n, err) < 0)
      return RS_ERR_NO_MEMORY;
  }
  return RS_OK;
}
