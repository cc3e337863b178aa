/* SPDX-License-Identifier: Apache-2.0 */
/* Serving destination groups, domain by domain: a fragment cut into
 * pieces by source group, block-scaled fragments assembled, a domain's
 * part (shadows and their replay), one tensor at a time. */
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

static rs_status deliver_part(planner *p, const group *g, const int64_t *off,
                              const int64_t *ext, void *ctx) {
  const target *t = ctx;
  return rsi_planner_deliver_bounded(p, off, ext, g, t->domain, t->nneed);
}

/* The replica of g a part headed for `rank` in `domain` comes from: the
 * rank's own, else the least loaded inside the domain, else the one its
 * replica set has used least (charged with the part's bytes). */
static rs_status nearest_holder(planner *p, const group *g, int rank,
                                int domain, int64_t bytes,
                                const sort_key **out) {
  *out = rsi_planner_held_by(p, g, rank);
  if (!*out) *out = rsi_planner_least_loaded_inside(p, g, domain);
  if (*out) return RS_OK;
  int64_t set, at;
  RSI_TRY(rsi_planner_cross_replica(p, g, out, &set, &at));
  rsi_replica_sets_add(&p->sets, set, at, bytes);
  return RS_OK;
}

typedef struct assembly {
  int64_t slot; /* the relay slot the parts land in */
  int rank, domain;
} assembly;

static rs_status send_part_to_slot(planner *p, const group *g,
                                   const int64_t *off, const int64_t *ext,
                                   void *ctx) {
  const assembly *a = ctx;
  int64_t bytes;
  rsi_box_volume(p->ndim, ext, &bytes);
  bytes *= (int64_t)rsi_dtype_size(p->plan->conv[p->tensor].src_dtype);
  const sort_key *k;
  RSI_TRY(nearest_holder(p, g, a->rank, a->domain, bytes, &k));
  return rsi_planner_push_move(p, off, ext, RSI_EP_SRC, k->index, k->rank,
                               RSI_EP_RELAY, a->slot, a->rank, 0, 0);
}


/* Assemble blocks (off, ext) at needer n: their parts land in the source
 * dtype in a relay slot of n's, which then quantizes the whole blocks into
 * its destination shard (and computes their scales) in the same round. */
static rs_status assemble_at(planner *p, const target *t, const needer *n,
                             const int64_t *off, const int64_t *ext) {
  int nd = p->ndim;
  assembly a = {0, n->rank, t->domain};
  RSI_TRY(rsi_planner_push_relay(p, n->rank, off, ext,
                     p->plan->conv[p->tensor].src_dtype, &a.slot));
  int64_t ncand = rsi_planner_query_sources(p, t->order, off, ext);
  rsi_planner_rank_by_locality(p, t->domain, t->nneed, ncand);
  rsi_pool *w = &p->own_work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  RSI_TRY(rsi_planner_carve_by_groups(p, w, p->cands, ncand, false,
                                      send_part_to_slot, &a));
  if (w->n > 0) return rsi_planner_not_covered(p, w->v);
  RSI_TRY(rsi_planner_push_move(p, off, ext, RSI_EP_RELAY, a.slot, n->rank,
                                RSI_EP_DST, n->shard, n->rank, 1, 0));
  return rsi_planner_end_unit(p);
}

/* Blocks no source group holds whole, box (off, ext) of them: the needer
 * with the least received across domains so far assembles them (its parts
 * cross into the domain once, in the source dtype), and the other needers
 * that want all of them get the fp8 values and scales from it a round
 * later. A needer that wants only some assembles its own. */
static rs_status assemble_blocks(planner *p, const int64_t *off,
                                 const int64_t *ext, void *ctx) {
  const target *t = ctx;
  int nd = p->ndim;
  int64_t nnear = rsi_planner_near_needers(p, off, ext, t->nneed);
  const needer *first = NULL;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (rsi_box_contains(nd, n->off, n->ext, off, ext) &&
        (!first ||
         p->recv_inter_load[n->rank] < p->recv_inter_load[first->rank]))
      first = n;
  }
  int64_t assembled = -1;
  if (first) {
    RSI_TRY(assemble_at(p, t, first, off, ext));
    assembled = p->units.n - 1;
  }
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    int64_t xo[RSI_MAX_DIMS], xe[RSI_MAX_DIMS];
    if (n == first || !rsi_box_intersect(nd, off, ext, n->off, n->ext, xo, xe))
      continue;
    if (!first || !rsi_box_contains(nd, n->off, n->ext, off, ext)) {
      RSI_TRY(assemble_at(p, t, n, xo, xe));
      continue;
    }
    p->after = assembled;
    p->depth = 1;
    RSI_TRY(rsi_planner_push_move(p, off, ext, RSI_EP_DST, first->shard,
                                  first->rank, RSI_EP_DST, n->shard, n->rank, 0,
                                  0));
    RSI_TRY(rsi_planner_end_unit(p));
  }
  return RS_OK;
}

/* What the fragment's whole-block pieces left (p->work: whole blocks that
 * source shards split), assembled at each needer. A unit holds the slot,
 * its parts and the local conversion, so each is kept to a quarter of a
 * round. */
static rs_status serve_split_blocks(planner *p, const key_value *order,
                                    int domain, int64_t nneed) {
  int nd = p->ndim;
  rsi_pool left = p->work; /* the carve below reuses p->work's scratch */
  p->work = (rsi_pool){0};
  target t = {NULL, order, domain, nneed};
  int64_t limit = p->plan->round_capacity / 4 / 64 * 64;
  rs_status st = RS_OK;
  for (int64_t r = 0; st == RS_OK && r < left.n; r += 2 * nd)
    st = rsi_planner_cut_bounded(p, left.v + r, left.v + r + nd,
                                 limit < 64 ? 64 : limit, assemble_blocks, &t);
  rsi_pool_free(&p->work);
  p->work = left;
  return st;
}

/* Cut fragment (off, ext) into pieces, one per source group covering it,
 * and deliver each to the domain's needers. */
static rs_status serve_fragment(planner *p, const key_value *order,
                                const int64_t *off, const int64_t *ext,
                                int domain, int64_t nneed) {
  int nd = p->ndim;
  RSI_TRY(rsi_planner_index_needers(p, nneed));
  int64_t ncand = rsi_planner_query_sources(p, order, off, ext);
  int64_t po[RSI_MAX_DIMS], pe[RSI_MAX_DIMS];
  if (p->src_disjoint && p->plan->conv[p->tensor].scales < 0) {
    int64_t want, got = 0, v;
    rsi_box_volume(nd, ext, &want);
    for (int64_t c = 0; c < ncand; c++) {
      const group *g = &p->sgroups[p->cands[c]];
      rsi_box_intersect(nd, g->off, g->ext, off, ext, po, pe);
      rsi_box_volume(nd, pe, &v);
      got += v;
    }
    if (got == want) {
      for (int64_t c = 0; c < ncand; c++) {
        const group *g = &p->sgroups[p->cands[c]];
        rsi_box_intersect(nd, g->off, g->ext, off, ext, po, pe);
        RSI_TRY(rsi_planner_deliver_bounded(p, po, pe, g, domain, nneed));
      }
      return RS_OK;
    }
  }
  /* General carve: what is left of the fragment shrinks source by source,
   * the most local sources first. */
  rsi_planner_rank_by_locality(p, domain, nneed, ncand);
  rsi_pool *w = &p->work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  target t = {NULL, order, domain, nneed};
  bool scaled = p->plan->conv[p->tensor].scales >= 0;
  RSI_TRY(rsi_planner_carve_by_groups(p, w, p->cands, ncand, scaled,
                                      deliver_part, &t));
  if (scaled && w->n > 0) return serve_split_blocks(p, order, domain, nneed);
  if (w->n > 0) return rsi_planner_not_covered(p, w->v);
  return RS_OK;
}

static rs_status reserve_needers(planner *p, int64_t n) {
  return rsi_grow((void **)&p->needers, &p->cap_needers, n,
                  sizeof *p->needers, 16, p->err);
}

static void add_needers(planner *p, const domain_entry *e, int64_t *count) {
  for (int64_t h = 0; h < e->n; h++) {
    const sort_key *k = &p->dkeys[e->first + h];
    p->needers[(*count)++] = (needer){k->index, k->rank, k->geom,
                                      k->geom + p->ndim};
  }
}

/* Serve each fragment of p->frags to the needers of every group it meets
 * (in entry order). */
static rs_status serve_carved(planner *p, const key_value *order, int64_t e0,
                              int64_t e1) {
  int nd = p->ndim;
  int64_t total_holders = 0;
  for (int64_t i = e0; i < e1; i++) total_holders += p->entries[i].n;
  RSI_TRY(reserve_needers(p, total_holders));
  const rsi_pool *fr = &p->frags;
  for (int64_t q = 0; q < fr->n; q += 2 * nd) {
    int64_t count = 0;
    int64_t nhits = rsi_box_tree_query(&p->dtree, fr->v + q, fr->v + q + nd,
                                       -1, p->hits, e1 - e0);
    qsort(p->hits, (size_t)nhits, sizeof *p->hits, rsi_planner_cmp_int64);
    for (int64_t h = 0; h < nhits; h++)
      add_needers(p, &p->entries[e0 + p->hits[h]], &count);
    RSI_TRY(serve_fragment(p, order, fr->v + q, fr->v + q + nd,
                           p->entries[e0].domain, count));
  }
  return RS_OK;
}

/* Serve entry e's destination group, its own fragment, to its domain. */
static rs_status serve_entry(planner *p, const key_value *order, int64_t e) {
  const domain_entry *en = &p->entries[e];
  const group *g = &p->dgroups[en->group];
  int64_t count = 0;
  RSI_TRY(reserve_needers(p, en->n));
  add_needers(p, en, &count);
  return serve_fragment(p, order, g->off, g->ext, en->domain, count);
}

/* Mark the domains of entries [e0, e1) as the ones that may need a piece
 * from outside (domains_needing). */
static void mark_domains(planner *p, int64_t e0, int64_t e1) {
  p->stamp++;
  p->ndomains = 0;
  for (int64_t i = e0; i < e1; i++) {
    int d = p->entries[i].domain;
    if (p->domain_mark[d] != p->stamp) p->ndomains++;
    p->domain_mark[d] = p->stamp;
  }
}

/* ---- a domain's part ------------------------------------------------------ */

/* Serve what follows as `domain`'s: in a domain's part, where `domain`
 * is another, as a shadow. A shadow keeps what its choices leave for
 * later domains (the pieces that crossed into it and its holders that may
 * forward them, the replica sets' charges, its own domain's loads) and
 * drops what it made (end_shadow), so the part's own choices are the
 * whole plan's. */
void rsi_planner_begin_shadow(planner *p, int domain, shadow_mark *m) {
  p->shadow = p->only_domain >= 0 && domain != p->only_domain;
  *m = (shadow_mark){p->plan->nmoves, p->plan->nrelays, p->plan->boxes.n,
                     p->units.n, p->spent};
}

static void end_shadow(planner *p, const shadow_mark *m) {
  if (!p->shadow) return;
  p->plan->nmoves = m->moves;
  p->plan->nrelays = m->relays;
  p->plan->boxes.n = m->boxes;
  p->units.n = m->units;
  p->spent = m->spent;
  p->shadow = false;
}

/* The recorded pieces' slots, forgotten where the table grew since. */
static void forget_moved_slots(planner *p) {
  if (p->memo_moved == p->slots_moved) return;
  for (int64_t k = 0; k < p->memo_n; k++) p->memo_slot[k] = -1;
  p->memo_moved = p->slots_moved;
}

/* Serve shadow entry e of a destination group whose pieces, as a shadow's
 * deliver gets them, are recorded (p->memo_*), without cutting them
 * again. Only for a domain that holds no source shard of the tensor and
 * as many needers as the recording had, of values without scales: its
 * fragment is the group's box and its sources come in one order (none
 * is more local than another), so serve_fragment would cut the same
 * pieces; no replica is inside, and every needer's box (the group's)
 * contains each piece, so deliver would cross it into the domain as
 * this does, charge its replica the same bytes for every such domain
 * (kept in p->memo_bytes) and register every needer as a holder: the
 * link names the entry's needers instead of copying them (chain_link). */
rs_status rsi_planner_replay_entry(planner *p, int64_t e) {
  const domain_entry *en = &p->entries[e];
  const sort_key *first = &p->dkeys[en->first];
  const needer entry = {first->index, first->rank, first->geom,
                        first->geom + p->ndim};
  int nd = p->ndim;
  for (int64_t i = 0; i < p->memo_n; i++) {
    const group *g = &p->sgroups[p->memo_src[i]];
    const int64_t *off = p->memo_boxes.v + i * 2 * nd, *ext = off + nd;
    piece_slot *slot;
    forget_moved_slots(p);
    if (p->memo_slot[i] < 0) {
      RSI_TRY(rsi_planner_cross_slot(p, g, off, ext, &slot));
      forget_moved_slots(p); /* the table may have grown */
      p->memo_slot[i] = slot - p->slots;
    }
    slot = &p->slots[p->memo_slot[i]];
    if (p->memo_bytes[i] < 0)
      p->memo_bytes[i] =
          rsi_planner_crossing_bytes(p, off, ext, en->n, &entry, true);
    int32_t place = slot->crossed++, depth;
    RSI_TRY(rsi_planner_shadow_crossing(p, g, slot, place, p->memo_bytes[i],
                                        &depth));
    if (place < slot->k) {
      p->links[slot->link + place] =
          (chain_link){-1 - en->first, (int32_t)en->n};
      p->link_depth[slot->link + place] = (int8_t)depth;
    }
  }
  return RS_OK;
}

/* Serve entry e, in a domain's part a shadow's replayed where it can be
 * (replay_entry), and recorded for the next where it could be. */
static rs_status serve_or_replay(planner *p, const key_value *order,
                                 int64_t e) {
  const domain_entry *en = &p->entries[e];
  bool same_pieces = p->shadow && p->plan->conv[p->tensor].scales < 0 &&
                     p->src_in_domain[en->domain] != p->tensor + 1;
  if (same_pieces && p->memo_nneed == en->n)
    return rsi_planner_replay_entry(p, e);
  p->memo_recording = same_pieces && p->memo_nneed < 0;
  if (p->memo_recording) {
    p->memo_n = 0;
    p->memo_boxes.n = 0;
  }
  rs_status st = serve_entry(p, order, e);
  if (p->memo_recording && st == RS_OK) p->memo_nneed = en->n;
  p->memo_recording = false;
  return st;
}

/* Disjoint destination groups are served one by one, each to all its
 * domains in turn, from a place that turns with the group: a piece then
 * crosses into its domains in that order, so each chain (cross_from) is
 * made before the domains that follow it down, and which domains head the
 * chains, and which end them without forwarding, differs from group to
 * group. (The entries come by group, then domain: make_groups.) */
static rs_status serve_groups(planner *p, const key_value *order) {
  for (int64_t e0 = 0; e0 < p->nentries;) {
    int64_t e1 = e0 + 1;
    while (e1 < p->nentries && p->entries[e1].group == p->entries[e0].group)
      e1++;
    mark_domains(p, e0, e1);
    p->memo_nneed = -1; /* nothing recorded for this group */
    uint64_t h = ((uint64_t)p->tensor << 32 ^ (uint64_t)p->entries[e0].group) *
                 0x9E3779B97F4A7C15ull;
    int64_t n = e1 - e0, turn = (int64_t)((h ^ h >> 31) % (uint64_t)n);
    for (int64_t i = 0; i < n; i++) {
      int64_t e = e0 + (turn + i) % n;
      shadow_mark m;
      rsi_planner_begin_shadow(p, p->entries[e].domain, &m);
      RSI_TRY(serve_or_replay(p, order, e));
      end_shadow(p, &m);
    }
    e0 = e1;
  }
  return RS_OK;
}

/* Serve the destination groups of one domain, entries [e0, e1). */
static rs_status serve_domain(planner *p, const key_value *order, int64_t e0,
                              int64_t e1) {
  int nd = p->ndim;
  bool overlap = false;
  if (!p->dst_disjoint) {
    const domain_groups dg = {p, e0};
    int64_t a, b;
    RSI_TRY(rsi_box_tree_build(&p->dtree, nd, e1 - e0,
                               rsi_planner_domain_group_box, &dg, p->err));
    overlap = !rsi_box_tree_disjoint(&p->dtree, &a, &b);
  }
  if (!overlap) { /* each group is its own fragment */
    for (int64_t i = e0; i < e1; i++) RSI_TRY(serve_entry(p, order, i));
    return RS_OK;
  }
  RSI_TRY(rsi_planner_carve_domain(p, e0, e1));
  return serve_carved(p, order, e0, e1);
}

static int cmp_entry(const void *x, const void *y) {
  const domain_entry *a = x, *b = y;
  if (a->domain != b->domain) return a->domain < b->domain ? -1 : 1;
  return (a->group > b->group) - (a->group < b->group);
}

/* ---- one tensor --------------------------------------------------------- */

rs_status rsi_planner_plan_tensor(planner *p, const int64_t *src_ids,
                                  int64_t ns, const int64_t *dst_ids,
                                  int64_t ndst, key_value *order) {
  RSI_TRY(rsi_planner_clear_pieces(p));
  RSI_TRY(rsi_planner_make_groups(p, &p->plan->side[RS_SIDE_SRC], src_ids, ns,
                                  p->skeys, p->sgroups, &p->nsg));
  for (int64_t i = 0; p->only_domain >= 0 && i < ns; i++)
    p->src_in_domain[p->skeys[i].domain] = p->tensor + 1;
  RSI_TRY(rsi_planner_make_groups(p, &p->plan->side[RS_SIDE_DST], dst_ids, ndst,
                                  p->dkeys, p->dgroups, &p->ndg));
  if (p->ndg == 0) return RS_OK;
  if (p->nsg == 0) return rsi_planner_not_covered(p, p->dgroups[0].off);

  RSI_TRY(rsi_planner_groups_disjoint(p, &p->dtree, p->dgroups, p->ndg,
                                      &p->dst_disjoint));
  RSI_TRY(rsi_planner_index_sources(p, order));
  RSI_TRY(rsi_grow((void **)&p->group_set, &p->cap_group_set, p->nsg,
                   sizeof *p->group_set, 64, p->err));
  for (int64_t g = 0; g < p->nsg; g++) p->group_set[g] = -1;

  /* Entries: each group's holders, split by domain. */
  p->nentries = 0;
  for (int64_t g = 0; g < p->ndg; g++) {
    const group *gr = &p->dgroups[g];
    for (int64_t h = 0; h < gr->n; h++) {
      const sort_key *k = &p->dkeys[gr->first + h];
      if (h == 0 || k->domain != p->dkeys[gr->first + h - 1].domain)
        p->entries[p->nentries++] =
            (domain_entry){k->domain, g, gr->first + h, 0};
      p->entries[p->nentries - 1].n++;
    }
  }
  RSI_TRY(rsi_planner_check_tensor_size(p));
  if (p->dst_disjoint) return serve_groups(p, order);
  qsort(p->entries, (size_t)p->nentries, sizeof *p->entries, cmp_entry);
  mark_domains(p, 0, p->nentries);
  for (int64_t e0 = 0; e0 < p->nentries;) {
    int64_t e1 = e0 + 1;
    while (e1 < p->nentries && p->entries[e1].domain == p->entries[e0].domain)
      e1++;
    shadow_mark m;
    rsi_planner_begin_shadow(p, p->entries[e0].domain, &m);
    RSI_TRY(serve_domain(p, order, e0, e1));
    end_shadow(p, &m);
    e0 = e1;
  }
  return RS_OK;
}
