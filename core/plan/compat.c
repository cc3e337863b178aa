/* SPDX-License-Identifier: Apache-2.0 */
/* Whether two layouts can be resharded into each other (tensors, shapes,
 * dtypes, conversions), and the plan's fingerprint. */
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

static bool castable(rs_dtype d) {
  return d == RS_DTYPE_F32 || d == RS_DTYPE_BF16 || d == RS_DTYPE_F16;
}

/* Whether destination tensor u holds scales computed on the way: the
 * scales of values that the source has in another dtype. */
static bool computed_scales(const rs_layout *src, const rs_layout *dst,
                            int u) {
  int v = dst->tensors[u].values;
  if (v < 0) return false;
  int a = rsi_layout_find(src, dst->tensors[v].name);
  return a >= 0 && src->tensors[a].dtype != dst->tensors[v].dtype;
}

rs_status rsi_planner_check_compatible(const rs_layout *src,
                                       const rs_layout *dst, rsi_err *err) {
  for (int t = 0; t < src->ntensors; t++) {
    const rsi_tensor *a = &src->tensors[t];
    int u = rsi_layout_find(dst, a->name);
    if (u < 0)
      return RSI_FAIL(err, RS_ERR_INCOMPATIBLE,
                      "tensor '%s' is in the source layout but not in the "
                      "destination",
                      a->name);
    const rsi_tensor *b = &dst->tensors[u];
    if (a->ndim != b->ndim)
      return RSI_FAIL(err, RS_ERR_INCOMPATIBLE,
                      "tensor '%s' has %d dims in the source, %d in the "
                      "destination",
                      a->name, a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
      if (a->shape[d] != b->shape[d])
        return RSI_FAIL(err, RS_ERR_INCOMPATIBLE,
                        "tensor '%s' has size %lld in dim %d in the source, "
                        "%lld in the destination",
                        a->name, (long long)a->shape[d], d,
                        (long long)b->shape[d]);
    if (computed_scales(src, dst, u))
      return RSI_FAIL(err, RS_ERR_INCOMPATIBLE,
                      "tensor '%s' holds the block scales of '%s', which are "
                      "computed on the way: leave it out of the source "
                      "layout",
                      a->name, dst->tensors[b->values].name);
    bool fine = a->dtype == b->dtype ||
                (castable(a->dtype) && castable(b->dtype)) ||
                (castable(a->dtype) && b->dtype == RS_DTYPE_F8_E4M3 &&
                 b->scales >= 0);
    if (!fine)
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "tensor '%s' is %s in the source and %s in the "
                      "destination: on the way libreshard casts between f32, "
                      "bf16 and f16, and quantizes them to f8_e4m3 with "
                      "block scales declared by rs_layout_set_block_scales",
                      a->name, rsi_dtype_name(a->dtype),
                      rsi_dtype_name(b->dtype));
  }
  for (int u = 0; u < dst->ntensors; u++)
    if (rsi_layout_find(src, dst->tensors[u].name) < 0 &&
        !computed_scales(src, dst, u))
      return RSI_FAIL(err, RS_ERR_INCOMPATIBLE,
                      "tensor '%s' is in the destination layout but not in "
                      "the source",
                      dst->tensors[u].name);
  return RS_OK;
}

enum { HASH_TENSORS, HASH_SRC, HASH_DST, HASH_TOPOLOGY };

/* The plan's fingerprint, over its sides while they are borrowed: the
 * destination's shards hash the plan's number of their tensor,
 * dst_map[tensor]. */
void rsi_planner_fingerprint(rs_plan *plan, const int *dst_map) {
  const uint64_t basis = RSI_FNV1A64_BASIS;
  uint64_t h = basis;
  for (int t = 0; t < plan->ntensors; t++) {
    const rsi_tensor *x = &plan->tensors[t];
    h = rsi_fnv1a64_update(h, x->name, strlen(x->name) + 1);
    h = rsi_fnv1a64_update(h, &x->dtype, sizeof x->dtype);
    h = rsi_fnv1a64_update(h, x->shape, (size_t)x->ndim * sizeof *x->shape);
    const rsi_conversion *c = &plan->conv[t];
    int64_t conv[6] = {c->dst_dtype, c->scales, c->values, c->b0, c->b1,
                       c->ue8m0};
    h = rsi_fnv1a64_update(h, conv, sizeof conv);
  }
  plan->section_hash[HASH_TENSORS] = h;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    h = basis;
    /* the shards' heads summed 256 at a time (rsi_words_hash_update is
     * fastest over long runs) */
    uint64_t heads[3 * 256];
    int nh = 0;
    for (int64_t i = 0; i < side->nshards; i++) {
      const rsi_shard *sh = &side->shards[i];
      int tensor = s == RS_SIDE_DST ? dst_map[sh->tensor] : sh->tensor;
      heads[nh++] = (uint64_t)(uint32_t)tensor << 32 | (uint32_t)sh->rank;
      heads[nh++] = (uint64_t)(uint32_t)sh->buffer;
      heads[nh++] = (uint64_t)sh->byte_offset;
      if (nh == 3 * 256 || i + 1 == side->nshards) {
        h = rsi_words_hash_update(h, heads, (size_t)nh * sizeof *heads);
        nh = 0;
      }
    }
    plan->section_hash[s == RS_SIDE_SRC ? HASH_SRC : HASH_DST] =
        rsi_words_hash_update(h, side->pool.v,
                              (size_t)side->pool.n * sizeof *side->pool.v);
  }
  h = rsi_fnv1a64_update(basis, &plan->world_size, sizeof plan->world_size);
  h = rsi_fnv1a64_update(h, plan->domain_of,
                         (size_t)plan->world_size * sizeof *plan->domain_of);
  h = rsi_fnv1a64_update(h, &plan->staging_bytes, sizeof plan->staging_bytes);
  h = rsi_fnv1a64_update(h, &plan->integrity, sizeof plan->integrity);
  if (plan->rounds_by_pair) /* hashed where not the default: packed plans'
                               fingerprints stay what they were */
    h = rsi_fnv1a64_update(h, &plan->rounds_by_pair,
                           sizeof plan->rounds_by_pair);
  plan->section_hash[HASH_TOPOLOGY] = h;
  plan->fingerprint =
      rsi_fnv1a64_update(basis, plan->section_hash, sizeof plan->section_hash);
}
