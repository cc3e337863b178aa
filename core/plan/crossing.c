/* SPDX-License-Identifier: Apache-2.0 */
/* Pieces that cross into a domain: the table of pieces held in
 * destination memory, the relay chains from domain to domain, relay slots,
 * and the choice of the replica or holder that sends. */
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

/* ---- pieces held in destination memory --------------------------------- */

static uint64_t piece_hash(const planner *p, int64_t gi, const int64_t *off,
                           const int64_t *ext) {
  uint64_t h = (uint64_t)gi * 0x9E3779B97F4A7C15ull;
  for (int d = 0; d < p->ndim; d++)
    h = (h ^ (uint64_t)off[d]) * 0x100000001B3ull ^ (uint64_t)ext[d] * 31u;
  return h ^ (h >> 29);
}

/* The slot of piece (group, box); *found says whether it was there. */
static piece_slot *piece_find(planner *p, int64_t gi, const int64_t *off,
                              const int64_t *ext, bool *found) {
  uint64_t mask = (uint64_t)p->cap_slots - 1;
  for (uint64_t i = piece_hash(p, gi, off, ext) & mask;; i = (i + 1) & mask) {
    piece_slot *s = &p->slots[i];
    if (s->group < 0) {
      *found = false;
      return s;
    }
    const int64_t *k = p->keys_pool.v + s->box;
    if (s->group == gi && rsi_box_equal(p->ndim, k, k + p->ndim, off, ext)) {
      *found = true;
      return s;
    }
  }
}

rs_status rsi_planner_clear_pieces(planner *p) {
  if (!p->cap_slots) {
    int64_t bytes = 1024 * (int64_t)sizeof *p->slots;
    if (bytes > rsi_planner_bytes_left(p))
      return rsi_planner_too_many_moves(p, " and the pieces they carry");
    p->slots = malloc((size_t)bytes);
    if (!p->slots) return RSI_NOMEM(p->err);
    p->cap_slots = 1024;
    p->held += bytes;
  }
  p->nslots = p->nholders = p->nlinks = 0;
  p->keys_pool.n = 0;
  for (int64_t i = 0; i < p->cap_slots; i++) p->slots[i].group = -1;
  return RS_OK;
}

/* Room for one more slot: the table grows and is rehashed at half full. */
rs_status rsi_planner_reserve_slot(planner *p) {
  if ((p->nslots + 1) * 2 <= p->cap_slots) return RS_OK;
  int64_t cap = p->cap_slots * 2, size = (int64_t)sizeof *p->slots;
  if (cap * size >
      rsi_planner_bytes_left(p)) /* while the old table is held too */
    return rsi_planner_too_many_moves(p, " and the pieces they carry");
  piece_slot *old = p->slots;
  int64_t old_cap = p->cap_slots;
  p->slots = malloc((size_t)(cap * size));
  if (!p->slots) {
    p->slots = old;
    return RSI_NOMEM(p->err);
  }
  p->cap_slots = cap;
  p->slots_moved++;
  for (int64_t i = 0; i < cap; i++) p->slots[i].group = -1;
  for (int64_t i = 0; i < old_cap; i++) {
    if (old[i].group < 0) continue;
    bool found;
    const int64_t *k = p->keys_pool.v + old[i].box;
    *piece_find(p, old[i].group, k, k + p->ndim, &found) = old[i];
  }
  free(old);
  p->held += (cap - old_cap) * size;
  return RS_OK;
}

/* How many domains need a piece of source group g from outside: the
 * marked ones (p->ndomains), but those where g has a replica. */
int32_t rsi_planner_domains_needing(const planner *p, const group *g) {
  int64_t inside = 0;
  for (int64_t h = 0; h < g->n; h++) {
    int d = p->skeys[g->first + h].domain; /* sorted by domain */
    if ((h == 0 || d != p->skeys[g->first + h - 1].domain) &&
        p->domain_mark[d] == p->stamp)
      inside++;
  }
  int64_t k = p->ndomains - inside;
  return k < 1 ? 1 : (int32_t)k;
}

/* The slot of piece (g, box), made when it first crosses, with room for
 * the domains it will cross into. */
rs_status rsi_planner_cross_slot(planner *p, const group *g, const int64_t *off,
                            const int64_t *ext, piece_slot **out) {
  RSI_TRY(rsi_planner_reserve_slot(p));
  int64_t gi = g - p->sgroups;
  bool found;
  piece_slot *s = piece_find(p, gi, off, ext, &found);
  if (!found) {
    int32_t k = rsi_planner_domains_needing(p, g);
    RSI_TRY(rsi_planner_grow_held(p, (void **)&p->links, &p->cap_links,
                                  p->nlinks + k, sizeof *p->links, 1024));
    RSI_TRY(rsi_planner_grow_held(p, (void **)&p->link_depth,
                                  &p->cap_link_depth, p->nlinks + k,
                                  sizeof *p->link_depth, 1024));
    RSI_TRY(rsi_planner_reserve_held(p, &p->keys_pool, 2 * p->ndim));
    memset(p->links + p->nlinks, 0, (size_t)k * sizeof *p->links);
    memset(p->link_depth + p->nlinks, -1, (size_t)k);
    int64_t at = rsi_pool_push(&p->keys_pool, off, p->ndim, p->err);
    if (at < 0 || rsi_pool_push(&p->keys_pool, ext, p->ndim, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    *s = (piece_slot){gi, at, p->nlinks, k,
                      (k + CHAIN_DOMAINS - 1) / CHAIN_DOMAINS, 0};
    p->nlinks += k;
    p->nslots++;
  }
  *out = s;
  return RS_OK;
}


/* The i-th holder of link l (chain_link). */
static holder link_holder(const planner *p, const chain_link *l, int32_t i) {
  if (l->first >= 0) return p->holders[l->first + i];
  const sort_key *k = &p->dkeys[-1 - l->first + i];
  return (holder){k->index, -1, k->rank};
}

/* How many rails after `entry`'s, cyclically, rank's rail is. */
static int64_t rail_gap(const planner *p, int rank, int entry) {
  int64_t gap = (int64_t)p->rail[rank] - p->rail[entry];
  return gap < 0 ? gap + p->plan->world_size : gap; /* rails are below it */
}

/* The holder the j-th domain piece s crosses into gets it from (*from, and
 * *depth: domains it crossed before), or false when it comes from a
 * source replica: for the first s->heads domains, and where the domain
 * s->heads places earlier has no holder that may forward it. Inside that
 * domain, the holder on the rail of `entry` (the rank the piece lands
 * in), so that a rank forwards to one peer per domain and its pieces
 * share messages; where none is, the one on the next rail after it
 * (cyclically): a rule of the two domains' layouts, never of what the
 * holders sent before. */
bool rsi_planner_cross_from(const planner *p, const piece_slot *s, int32_t j,
                       int entry, int32_t *depth, holder *from) {
  int32_t up = rsi_planner_chain_up(p, s, j);
  if (up < 0) return false;
  const chain_link *l = &p->links[s->link + j - s->heads];
  *depth = up + 1;
  *from = link_holder(p, l, 0); /* n >= 1: chain_up */
  int64_t best_gap = rail_gap(p, from->rank, entry);
  for (int32_t i = 1; i < l->n; i++) {
    holder h = link_holder(p, l, i);
    int64_t gap = rail_gap(p, h.rank, entry);
    if (gap < best_gap) {
      *from = h;
      best_gap = gap;
    }
  }
  return true;
}

/* The j-th domain piece s crossed into got it in `unit`, `depth` domains
 * from a replica: its needers that now hold it whole (of p->near[0 ..
 * nnear)) may forward it. */
rs_status rsi_planner_link_holders(planner *p, const piece_slot *s, int32_t j,
                              const int64_t *off, const int64_t *ext,
                              int64_t nnear, int64_t unit, int32_t depth) {
  if (j >= s->k) return RS_OK;
  chain_link *l = &p->links[s->link + j];
  RSI_TRY(rsi_planner_grow_held(p, (void **)&p->holders, &p->cap_holders,
                    p->nholders + nnear, sizeof *p->holders, 1024));
  *l = (chain_link){p->nholders, 0};
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (!rsi_box_contains(p->ndim, n->off, n->ext, off, ext)) continue;
    /* a shadow domain's units are dropped: a part does not order its
     * forwards after them */
    p->holders[p->nholders++] =
        (holder){n->shard, p->shadow ? -1 : unit, n->rank};
    l->n++;
  }
  p->link_depth[s->link + j] = l->n > 0 ? (int8_t)depth : -1;
  return RS_OK;
}

rs_status rsi_planner_push_relay(planner *p, int rank, const int64_t *off,
                            const int64_t *ext, rs_dtype dtype,
                            int64_t *index) {
  rs_plan *plan = p->plan;
  if (rsi_planner_bytes_left(p) < rsi_planner_relay_cost(p->ndim))
    return rsi_planner_too_many_moves(p, " and relay slots");
  p->spent += rsi_planner_relay_cost(p->ndim);
  RSI_TRY(rsi_grow((void **)&plan->relays, &plan->cap_relays,
                   plan->nrelays + 1, sizeof *plan->relays, 64, p->err));
  int64_t at = rsi_pool_push(&plan->boxes, NULL, 2 * p->ndim, p->err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  memcpy(plan->boxes.v + at, off, (size_t)p->ndim * sizeof *off);
  memcpy(plan->boxes.v + at + p->ndim, ext, (size_t)p->ndim * sizeof *ext);
  rsi_relay *r = &plan->relays[plan->nrelays];
  r->rank = rank;
  r->round = -1;
  r->box = at;
  r->staging_offset = -1;
  r->dtype = (uint8_t)dtype;
  rsi_box_volume(p->ndim, ext, &r->bytes);
  r->bytes *= (int64_t)rsi_dtype_size(dtype);
  *index = plan->nrelays++;
  return RS_OK;
}

/* ---- replicas and carving ------------------------------------------------ */

/* The replicas of g inside `domain`: p->skeys[*lo .. *hi) (a group's
 * holders are sorted by domain, then rank: cmp_key), found by bisection,
 * so that asking costs O(log replicas) however many domains hold g. */
void rsi_planner_replicas_in(const planner *p, const group *g, int domain,
                        int64_t *lo, int64_t *hi) {
  const sort_key *h = p->skeys;
  int64_t a = g->first, b = g->first + g->n;
  while (a < b) { /* first holder with domain >= `domain` */
    int64_t m = a + (b - a) / 2;
    if (h[m].domain < domain) a = m + 1;
    else b = m;
  }
  *lo = a;
  b = g->first + g->n;
  while (a < b) { /* first holder with domain > `domain` */
    int64_t m = a + (b - a) / 2;
    if (h[m].domain <= domain) a = m + 1;
    else b = m;
  }
  *hi = a;
}


/* The replica of g inside `domain` that has sent the fewest bytes inside
 * its domain so far, or NULL. */
const sort_key *rsi_planner_least_loaded_inside(const planner *p,
                                                const group *g, int domain) {
  const sort_key *best = NULL;
  int64_t lo, hi;
  rsi_planner_replicas_in(p, g, domain, &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    if (!best || p->send_intra_load[p->skeys[i].rank] <
                     p->send_intra_load[best->rank])
      best = &p->skeys[i];
  return best;
}

/* The replica of g a piece crosses from when no domain forwards it: the
 * one that has sent the fewest bytes across for g's replica set (*set,
 * and *at its place there: charge it with rsi_replica_sets_add). */
rs_status rsi_planner_cross_replica(planner *p, const group *g,
                               const sort_key **src, int64_t *set,
                               int64_t *at) {
  int64_t gi = g - p->sgroups;
  if (p->group_set[gi] < 0) {
    RSI_TRY(rsi_grow((void **)&p->set_ranks, &p->cap_set_ranks, g->n,
                     sizeof *p->set_ranks, 64, p->err));
    for (int64_t h = 0; h < g->n; h++)
      p->set_ranks[h] = p->skeys[g->first + h].rank;
    RSI_TRY(rsi_replica_sets_find(&p->sets, p->set_ranks, g->n,
                                  &p->group_set[gi], p->err));
  }
  *set = p->group_set[gi];
  *at = rsi_replica_sets_least_sent(&p->sets, *set);
  *src = &p->skeys[g->first + *at];
  return RS_OK;
}
