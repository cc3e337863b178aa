/* SPDX-License-Identifier: Apache-2.0 */
/* Making a plan: the planner set up, every tensor planned, scheduled;
 * create and destroy. */
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

void rsi_plan_destroy(rs_plan *plan) {
  if (!plan) return;
  for (int t = 0; t < plan->ntensors; t++) free(plan->tensors[t].name);
  free(plan->tensors);
  free(plan->conv);
  for (int s = 0; s < 2; s++) {
    if (!plan->side[s].borrowed) {
      free(plan->side[s].shards);
      rsi_pool_free(&plan->side[s].pool);
    }
    free(plan->side[s].rank_first);
    free(plan->side[s].buffers);
  }
  rsi_pool_free(&plan->boxes);
  free(plan->moves);
  free(plan->relays);
  free(plan->msgs);
  free(plan->relay_bytes);
  free(plan->round_labels);
  free(plan->stats);
  free(plan->domain_of);
  rsi_context_unref(plan->ctx);
  free(plan);
}

static void planner_free(planner *p) {
  free(p->sorter.tmp);
  free(p->sorter.box_of);
  free(p->sorter.slots);
  free(p->sorter.start);
  free(p->skeys);
  free(p->dkeys);
  free(p->sgroups);
  free(p->dgroups);
  free(p->entries);
  free(p->cands);
  free(p->needers);
  rsi_pool_free(&p->frags);
  rsi_pool_free(&p->cut);
  free(p->frag_first);
  free(p->hits);
  free(p->cut_at);
  rsi_pool_free(&p->work);
  free(p->send_intra_load);
  free(p->recv_inter_load);
  free(p->units.end);
  free(p->units.after);
  free(p->units.depth);
  free(p->slots);
  free(p->holders);
  free(p->links);
  free(p->link_depth);
  rsi_pool_free(&p->keys_pool);
  rsi_box_tree_free(&p->stree);
  rsi_box_tree_free(&p->dtree);
  rsi_box_tree_free(&p->ntree);
  free(p->near);
  free(p->far);
  free(p->own);
  rsi_pool_free(&p->own_work);
  free(p->ranked);
  free(p->rank_mark);
  free(p->scale_ids);
  free(p->key_rank);
  rsi_replica_sets_free(&p->sets);
  free(p->group_set);
  free(p->set_ranks);
  free(p->domain_mark);
  free(p->src_in_domain);
  free(p->memo_src);
  free(p->memo_slot);
  free(p->memo_bytes);
  rsi_pool_free(&p->memo_boxes);
  free(p->domain_ix);
  free(p->rail);
}

bool rsi_plan_number_domains(const rs_plan *plan, int32_t *domain_ix,
                             int32_t *rail, int32_t *ndomains) {
  int64_t n = plan->world_size;
  rsi_keyed *keys = malloc((size_t)(2 * n) * sizeof *keys);
  if (!keys) return false;
  for (int64_t r = 0; r < n; r++)
    keys[r] = (rsi_keyed){(uint64_t)plan->domain_of[r], (uint64_t)r,
                          (uint64_t)r};
  rsi_radix_sort(keys, keys + n, n);
  int32_t d = -1, place = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || keys[i].hi != keys[i - 1].hi) {
      d++;
      place = 0;
    }
    domain_ix[keys[i].value] = d;
    if (rail) rail[keys[i].value] = place;
    place++;
  }
  *ndomains = d + 1;
  free(keys);
  return true;
}

static rs_status build(rs_plan *plan, const rs_layout *src,
                       const rs_layout *dst, planner *p) {
  rsi_err *err = p->err;
  rs_context *ctx = src->ctx;
  plan->world_size = ctx->world_size;
  plan->staging_bytes = ctx->staging_bytes;
  plan->integrity = ctx->integrity != 0;
  plan->rounds_by_pair = ctx->rounds == RS_ROUNDS_BY_DOMAIN_PAIR;
  /* Two rounds in flight; a label by domain pair holds two chunks at a
   * rank (one it sends first hops in, one it lands in), each within
   * round_capacity, so that is a quarter of the staging
   * (rounds.c). */
  plan->round_capacity = ctx->staging_bytes / (plan->rounds_by_pair ? 4 : 2);
  plan->domain_of = malloc((size_t)ctx->world_size * sizeof *plan->domain_of);
  if (!plan->domain_of) return RSI_NOMEM(err);
  memcpy(plan->domain_of, ctx->domain_of,
         (size_t)ctx->world_size * sizeof *plan->domain_of);

  /* Tensors in source order, then the scale tensors only the destination
   * declares; destination shards renumbered to match. */
  int nt = src->ntensors;
  for (int u = 0; u < dst->ntensors; u++)
    nt += rsi_layout_find(src, dst->tensors[u].name) < 0;
  plan->tensors = calloc((size_t)(nt ? nt : 1), sizeof *plan->tensors);
  plan->conv = calloc((size_t)(nt ? nt : 1), sizeof *plan->conv);
  int *dst_map =
      malloc((size_t)(dst->ntensors ? dst->ntensors : 1) * sizeof *dst_map);
  int *src_map =
      malloc((size_t)(src->ntensors ? src->ntensors : 1) * sizeof *src_map);
  if (!plan->tensors || !plan->conv || !dst_map || !src_map) {
    free(dst_map);
    free(src_map);
    return RSI_NOMEM(err);
  }
  for (int t = 0; t < nt; t++) {
    bool only_dst = t >= src->ntensors;
    int u = -1;
    if (only_dst)
      for (int k = 0, seen = src->ntensors; k < dst->ntensors && u < 0; k++)
        if (rsi_layout_find(src, dst->tensors[k].name) < 0 && seen++ == t)
          u = k;
    const rsi_tensor *from = only_dst ? &dst->tensors[u] : &src->tensors[t];
    if (!only_dst) u = rsi_layout_find(dst, from->name);
    plan->tensors[t] = *from;
    plan->tensors[t].name = strdup(from->name);
    plan->ntensors = t + 1;
    if (!plan->tensors[t].name) {
      free(dst_map);
      free(src_map);
      return RSI_NOMEM(err);
    }
    if (!only_dst) src_map[t] = t;
    dst_map[u] = t;
    const rsi_tensor *to = &dst->tensors[u];
    plan->conv[t] = (rsi_conversion){from->dtype, to->dtype, -1, -1,
                                     to->block[0], to->block[1],
                                     to->scale_rule == RS_SCALE_UE8M0};
  }
  /* Scales and values by plan index, where the values change dtype. */
  for (int t = 0; t < nt; t++) {
    const rsi_tensor *to =
        &dst->tensors[rsi_layout_find(dst, plan->tensors[t].name)];
    if (to->scales < 0 || plan->conv[t].src_dtype == to->dtype) continue;
    int sc = dst_map[to->scales];
    plan->conv[t].scales = sc;
    plan->conv[sc].values = t;
    plan->conv[sc].b0 = to->block[0];
    plan->conv[sc].b1 = to->block[1];
    plan->conv[sc].ue8m0 = plan->conv[t].ue8m0;
  }
  rs_status st =
      rsi_planner_borrow_side(plan, &plan->side[RS_SIDE_SRC], src, err);
  if (st == RS_OK)
    st = rsi_planner_borrow_side(plan, &plan->side[RS_SIDE_DST], dst, err);
  int64_t *sfirst = NULL, *sids = NULL, *dfirst = NULL, *dids = NULL;
  if (st == RS_OK)
    st = rsi_planner_shards_by_tensor(src, src_map, nt, &sfirst, &sids, err);
  if (st == RS_OK)
    st = rsi_planner_shards_by_tensor(dst, dst_map, nt, &dfirst, &dids, err);
  free(src_map);
  if (st == RS_OK) st = rsi_planner_check_plan_size(p, dfirst, dids);
  if (st == RS_OK) st = rsi_planner_check_blocks(p, dfirst, dids);
  p->dfirst = dfirst;
  p->dids = dids;

  /* Scratch sized for the largest tensor. */
  int64_t max_s = 0, max_d = 0;
  for (int t = 0; st == RS_OK && t < plan->ntensors; t++) {
    if (sfirst[t + 1] - sfirst[t] > max_s) max_s = sfirst[t + 1] - sfirst[t];
    if (dfirst[t + 1] - dfirst[t] > max_d) max_d = dfirst[t + 1] - dfirst[t];
  }
  key_value *order = NULL;
  if (st == RS_OK) {
    p->skeys = malloc((size_t)(max_s + 1) * sizeof *p->skeys);
    p->dkeys = malloc((size_t)(max_d + 1) * sizeof *p->dkeys);
    p->sgroups = malloc((size_t)(max_s + 1) * sizeof *p->sgroups);
    p->dgroups = malloc((size_t)(max_d + 1) * sizeof *p->dgroups);
    p->entries = malloc((size_t)(max_d + 1) * sizeof *p->entries);
    p->cands = malloc((size_t)(max_s + 1) * sizeof *p->cands);
    p->key_rank = malloc((size_t)(max_s + 1) * sizeof *p->key_rank);
    order = malloc((size_t)(max_s + 1) * sizeof *order);
    p->send_intra_load =
        calloc((size_t)plan->world_size, sizeof *p->send_intra_load);
    p->recv_inter_load =
        calloc((size_t)plan->world_size, sizeof *p->recv_inter_load);
    p->rank_mark = calloc((size_t)plan->world_size, sizeof *p->rank_mark);
    p->domain_ix = malloc((size_t)plan->world_size * sizeof *p->domain_ix);
    p->rail = malloc((size_t)plan->world_size * sizeof *p->rail);
    int32_t ndomains = 0;
    if (p->domain_ix && p->rail &&
        rsi_plan_number_domains(plan, p->domain_ix, p->rail, &ndomains))
      p->domain_mark = calloc((size_t)ndomains, sizeof *p->domain_mark);
    p->src_in_domain = calloc((size_t)(ndomains ? ndomains : 1),
                              sizeof *p->src_in_domain);
    for (int r = 0; plan->domain_part && p->domain_ix && r < ctx->world_size;
         r++)
      if (ctx->domain_of[r] == plan->part_domain)
        p->only_domain = p->domain_ix[r];
    p->ranked = malloc((size_t)(max_s + 1) * sizeof *p->ranked);
    if (!p->skeys || !p->dkeys || !p->sgroups || !p->dgroups || !p->entries ||
        !p->cands || !p->key_rank || !order || !p->send_intra_load ||
        !p->recv_inter_load || !p->rank_mark ||
        !p->domain_mark || !p->src_in_domain || !p->domain_ix || !p->rail ||
        !p->ranked)
      st = RSI_NOMEM(err);
    rsi_replica_sets_init(&p->sets);
  }
  for (int t = 0; st == RS_OK && t < plan->ntensors; t++) {
    if (plan->conv[t].values >= 0) continue; /* its values' moves carry it */
    p->tensor = t;
    p->ndim = plan->tensors[t].ndim;
    p->esize = plan->tensors[t].esize;
    st = rsi_planner_scale_shards(p);
    if (st == RS_OK)
      st = rsi_planner_plan_tensor(p, sids + sfirst[t],
                                   sfirst[t + 1] - sfirst[t], dids + dfirst[t],
                                   dfirst[t + 1] - dfirst[t], order);
  }
  p->dfirst = p->dids = NULL;
  free(order);
  free(sfirst);
  free(sids);
  free(dfirst);
  free(dids);
  if (st == RS_OK)
    st = rsi_plan_schedule(plan, &p->units, err);
  if (st == RS_OK) rsi_planner_fingerprint(plan, dst_map);
  if (st == RS_OK)
    st = rsi_planner_own_sides(plan,
                   ctx->plan_part >= 0 ||
                       (plan->keeps_boxes && !plan->domain_part),
                   dst_map, err);
  free(dst_map);
  /* a domain's part planned for a rank (session/plan_rank.c) is cut
   * there */
  if (st == RS_OK && ctx->plan_part >= 0 && !plan->domain_part)
    st = rsi_plan_keep_part(plan, (int)ctx->plan_part, err);
  return st;
}

rs_status rsi_plan_require_boxes(const rs_plan *plan, rsi_err *err) {
  if (plan->keeps_boxes) return RS_OK;
  return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "this plan keeps no boxes (RS_PARAM_PLAN_BOXES was 0 "
                  "when it was made): it is for inspection, not to run");
}

/* The part RS_PARAM_PLAN_PART asks for: a rank of the world, and in a
 * context that drives one rank, that rank. */
static rs_status check_part(const rs_context *ctx, rsi_err *err) {
  int64_t r = ctx->plan_part;
  if (r < 0) return RS_OK;
  if (r >= ctx->world_size)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                    "RS_PARAM_PLAN_PART: rank %lld outside [0, %d)",
                    (long long)r, ctx->world_size);
  if (ctx->rank != RS_ALL_RANKS && r != ctx->rank)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "RS_PARAM_PLAN_PART: this context drives rank %d and "
                    "can keep only its part, not rank %lld's",
                    ctx->rank, (long long)r);
  return RS_OK;
}

/* The whole plan, or where domain_part, what lands in `domain`. */
static rs_status create(const rs_layout *src, const rs_layout *dst,
                        bool domain_part, int domain, rs_plan **out) {
  rs_context *ctx = src->ctx;
  rsi_err *err = ctx->err;
  if (dst->ctx != ctx)
    return RSI_FAIL(err, RS_ERR_WRONG_CONTEXT,
                    "the source and destination layouts come from different "
                    "contexts");
  RSI_TRY(check_part(ctx, err));
  bool known = !domain_part;
  for (int r = 0; !known && r < ctx->world_size; r++)
    known = ctx->domain_of[r] == domain;
  if (!known)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "domain %d: no rank of the world is in it", domain);
  rs_status st = rsi_planner_check_compatible(src, dst, err);
  if (st == RS_OK) st = rsi_layout_check_writes(dst, "destination", err);
  rs_plan *plan = st == RS_OK ? calloc(1, sizeof *plan) : NULL;
  if (st == RS_OK && !plan) st = RSI_NOMEM(err);
  if (st != RS_OK) return st;
  rsi_context_ref(ctx);
  plan->ctx = ctx;
  plan->part = -1;
  plan->domain_part = domain_part;
  plan->part_domain = domain;
  plan->keeps_boxes = ctx->plan_boxes != 0;
  planner p = {0};
  p.plan = plan;
  p.err = err;
  p.after = -1;
  p.only_domain = -1;
  p.part = ctx->plan_part;
  p.keeps_boxes = plan->keeps_boxes;
  p.budget = rsi_plan_bytes;
  st = build(plan, src, dst, &p);
  planner_free(&p);
  if (st != RS_OK) {
    rsi_plan_destroy(plan);
    return st;
  }
  *out = plan;
  return RS_OK;
}

rs_status rsi_plan_create(const rs_layout *src, const rs_layout *dst,
                          rs_plan **out) {
  return create(src, dst, false, 0, out);
}

rs_status rsi_plan_create_domain(const rs_layout *src, const rs_layout *dst,
                                 int domain, rs_plan **out) {
  return create(src, dst, true, domain, out);
}
