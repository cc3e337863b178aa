/* SPDX-License-Identifier: Apache-2.0 */
/* Delivering one piece: to the needers of a fragment inside its domain,
 * across into the domain once, and cut to the staging bound. */
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

/* The whole scale blocks inside group g's box, into (off, ext); false
 * when there is none. */
static bool whole_blocks_of(const planner *p, const group *g, int64_t *off,
                            int64_t *ext) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  const int64_t *shape = p->plan->tensors[p->tensor].shape;
  for (int d = 0; d < p->ndim; d++) {
    int64_t bs = rsi_planner_block_size(cv, p->ndim, d),
            end = g->off[d] + g->ext[d];
    int64_t lo = (g->off[d] + bs - 1) / bs * bs;
    int64_t hi = end == shape[d] ? end : end / bs * bs;
    if (hi <= lo) return false;
    off[d] = lo;
    ext[d] = hi - lo;
  }
  return true;
}

/* Carve the boxes in w (offset, extent each) by source groups ids[0..n),
 * in that order: each group takes what the earlier ones left of it (`take`
 * is called with each such part); what no group covers is left in w. With
 * whole_blocks, a group offers only the whole scale blocks it holds. */
rs_status rsi_planner_carve_by_groups(planner *p, rsi_pool *w,
                                      const int64_t *ids, int64_t n,
                                      bool whole_blocks, carve_fn take,
                                      void *ctx) {
  int nd = p->ndim;
  int64_t po[RSI_MAX_DIMS], pe[RSI_MAX_DIMS];
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS],
      fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
  for (int64_t c = 0; c < n && w->n > 0; c++) {
    const group *full = &p->sgroups[ids[c]];
    group part = *full;
    int64_t bo[RSI_MAX_DIMS], be[RSI_MAX_DIMS];
    if (whole_blocks) {
      if (!whole_blocks_of(p, full, bo, be)) continue;
      part.off = bo;
      part.ext = be;
    }
    const group *g = &part;
    int64_t left = w->n / (2 * nd);
    for (int64_t r = 0; r < left; r++) {
      /* the first `left` boxes are the ones to cut; cuts append */
      int64_t rb[2 * RSI_MAX_DIMS]; /* a copy: pushes may move the pool */
      memcpy(rb, w->v + r * 2 * nd, (size_t)(2 * nd) * sizeof *rb);
      if (!rsi_box_intersect(nd, rb, rb + nd, g->off, g->ext, po, pe)) {
        if (rsi_pool_push(w, rb, 2 * nd, p->err) < 0) return RS_ERR_NO_MEMORY;
        continue;
      }
      RSI_TRY(take(p, full, po, pe, ctx));
      int k = rsi_box_subtract(nd, rb, rb + nd, g->off, g->ext, fo, fe);
      for (int f = 0; f < k; f++)
        if (rsi_pool_push(w, fo + f * nd, nd, p->err) < 0 ||
            rsi_pool_push(w, fe + f * nd, nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
    }
    memmove(w->v, w->v + left * 2 * nd,
            (size_t)(w->n - left * 2 * nd) * sizeof *w->v);
    w->n -= left * 2 * nd;
  }
  return RS_OK;
}

/* ---- delivering one piece -------------------------------------------- */

/* A fragment's needers are scanned for those a piece meets; past
 * NEEDER_SCAN of them they are looked up in a box tree built once per
 * fragment (p->ntree). Either way the ones found are in needer order. */
#define NEEDER_SCAN 32

static const int64_t *needer_box(const void *needers, int64_t i) {
  return ((const needer *)needers)[i].off; /* the extent follows */
}

/* Make room for, and index, the fragment's nneed needers. */
rs_status rsi_planner_index_needers(planner *p, int64_t nneed) {
  RSI_TRY(rsi_grow((void **)&p->near, &p->cap_near, nneed, sizeof *p->near,
                   64, p->err));
  RSI_TRY(rsi_grow((void **)&p->far, &p->cap_far, nneed, sizeof *p->far, 64,
                   p->err));
  p->indexed = nneed > NEEDER_SCAN;
  if (!p->indexed) return RS_OK;
  return rsi_box_tree_build(&p->ntree, p->ndim, nneed, needer_box, p->needers,
                            p->err);
}

/* The needers that box (off, ext) meets, ascending, into p->near. */
int64_t rsi_planner_near_needers(planner *p, const int64_t *off,
                                 const int64_t *ext, int64_t nneed) {
  int64_t n = 0, o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
  if (p->indexed) {
    n = rsi_box_tree_query(&p->ntree, off, ext, -1, p->near, nneed);
    qsort(p->near, (size_t)n, sizeof *p->near, rsi_planner_cmp_int64);
    return n;
  }
  for (int64_t i = 0; i < nneed; i++)
    if (rsi_box_intersect(p->ndim, off, ext, p->needers[i].off,
                          p->needers[i].ext, o, e))
      p->near[n++] = i;
  return n;
}

/* A part of a piece that needer `ctx` holds in a source shard of its own:
 * a local copy. */
static rs_status copy_own_part(planner *p, const group *g, const int64_t *off,
                               const int64_t *ext, void *ctx) {
  const needer *n = ctx;
  RSI_TRY(rsi_planner_push_move(p, off, ext, RSI_EP_SRC,
                                rsi_planner_held_by(p, g, n->rank)->index,
                                n->rank, RSI_EP_DST, n->shard, n->rank, 0, 0));
  return rsi_planner_end_unit(p);
}

/* Needer n wants (off, ext) of a piece of group g, which it does not hold.
 * Where source groups overlap it may still hold parts of it in other
 * shards of its own: those are copied locally and only the rest comes from
 * g's least loaded replica in the domain (*done). Nothing is done when it
 * holds no part of it. */
static rs_status serve_own_parts(planner *p, const needer *n, const group *g,
                                 int domain, const int64_t *off,
                                 const int64_t *ext, bool *done) {
  int nd = p->ndim;
  *done = false;
  RSI_TRY(rsi_grow((void **)&p->own, &p->cap_own, p->nsg, sizeof *p->own, 64,
                   p->err));
  int64_t found = rsi_box_tree_query(&p->stree, off, ext, -1, p->own, p->nsg);
  int64_t mine = 0;
  for (int64_t i = 0; i < found; i++)
    if (rsi_planner_held_by(p, &p->sgroups[p->own[i]], n->rank))
      p->own[mine++] = p->own[i];
  if (mine == 0) return RS_OK;
  *done = true;
  qsort(p->own, (size_t)mine, sizeof *p->own, rsi_planner_cmp_int64);
  rsi_pool *w = &p->own_work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  RSI_TRY(rsi_planner_carve_by_groups(p, w, p->own, mine, false, copy_own_part,
                          (void *)n));
  for (int64_t r = 0; r < w->n; r += 2 * nd) {
    int64_t rb[2 * RSI_MAX_DIMS];
    memcpy(rb, w->v + r, (size_t)(2 * nd) * sizeof *rb);
    const sort_key *src = rsi_planner_least_loaded_inside(p, g, domain);
    RSI_TRY(rsi_planner_push_move(p, rb, rb + nd, RSI_EP_SRC, src->index,
                                  src->rank, RSI_EP_DST, n->shard, n->rank, 0,
                                  0));
    RSI_TRY(rsi_planner_end_unit(p));
  }
  return RS_OK;
}

/* Deliver a piece of group g, which has replicas inside the domain, to the
 * needers p->near[0..nnear): locality first. A needer that holds g copies
 * it locally. The others get it from the replicas inside the domain:
 * directly while there are at least as many replicas as receivers; past
 * that (or when the sender converts it: once is enough), one receiver that
 * wants all of it gets it and forwards it to the rest in the same round,
 * so no replica sends a copy per receiver. */
static rs_status deliver_inside(planner *p, const int64_t *off,
                                const int64_t *ext, const group *g,
                                int domain, int64_t nnear) {
  if (p->shadow) return RS_OK; /* nothing crosses: no other domain reads it */
  int nd = p->ndim;
  int64_t so[RSI_MAX_DIMS], se[RSI_MAX_DIMS];
  int64_t nfar = 0, lo, hi;
  rsi_planner_replicas_in(p, g, domain, &lo, &hi);
  int64_t replicas = hi - lo;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (!rsi_box_intersect(nd, off, ext, n->off, n->ext, so, se)) continue;
    const sort_key *mine = rsi_planner_held_by(p, g, n->rank);
    if (!mine) {
      bool done = false;
      if (!p->src_disjoint && p->plan->conv[p->tensor].scales < 0)
        RSI_TRY(serve_own_parts(p, n, g, domain, so, se, &done));
      if (!done) p->far[nfar++] = p->near[i];
      continue;
    }
    RSI_TRY(rsi_planner_push_move(p, so, se, RSI_EP_SRC, mine->index, n->rank,
                                  RSI_EP_DST, n->shard, n->rank, 0, 0));
    RSI_TRY(rsi_planner_end_unit(p));
  }
  /* A piece the sender converts is converted once in the domain: one
   * receiver forwards the result to the others. */
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  bool converts =
      rsi_planner_wire_dtype(cv->src_dtype, cv->dst_dtype) != cv->src_dtype;
  bool fan_out = nfar > replicas || (converts && nfar > 1);
  const needer *relay = NULL;
  for (int64_t i = 0; fan_out && i < nfar; i++) {
    const needer *n = &p->needers[p->far[i]];
    if (rsi_box_contains(nd, n->off, n->ext, off, ext) &&
        (!relay ||
         p->send_intra_load[n->rank] < p->send_intra_load[relay->rank]))
      relay = n;
  }
  const sort_key *src = rsi_planner_least_loaded_inside(p, g, domain);
  if (relay)
    RSI_TRY(rsi_planner_push_move(p, off, ext, RSI_EP_SRC, src->index,
                                  src->rank, RSI_EP_DST, relay->shard,
                                  relay->rank, 0, 0));
  for (int64_t i = 0; i < nfar; i++) {
    const needer *n = &p->needers[p->far[i]];
    if (n == relay) continue;
    rsi_box_intersect(nd, off, ext, n->off, n->ext, so, se);
    if (relay) {
      RSI_TRY(rsi_planner_push_move(p, so, se, RSI_EP_DST, relay->shard,
                                    relay->rank, RSI_EP_DST, n->shard, n->rank,
                                    1, 1));
      continue;
    }
    src = rsi_planner_least_loaded_inside(p, g, domain);
    RSI_TRY(rsi_planner_push_move(p, so, se, RSI_EP_SRC, src->index, src->rank,
                      RSI_EP_DST, n->shard, n->rank, 0, 0));
    RSI_TRY(rsi_planner_end_unit(p));
  }
  return relay ? rsi_planner_end_unit(p) : RS_OK;
}

/* Whether the entry forwards a piece it wants whole better from a relay
 * slot than from its own memory: where the piece is large enough to go
 * straight (staging.h) but not one contiguous run of the entry's memory,
 * every forward from there is packed anew and staged, and the crossing is
 * unpacked through staging too; into a slot it lands straight, every
 * forward leaves straight from it, and the entry copies its own part out
 * once. Not for conversions (their moves are always staged) nor for
 * block-scaled values, whose scales a slot cannot hold. */
static bool forward_from_slot(const planner *p, const int64_t *ext,
                              const needer *entry) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  if (cv->scales >= 0 || cv->src_dtype != cv->dst_dtype) return false;
  int64_t vol;
  rsi_box_volume(p->ndim, ext, &vol);
  if (vol * (int64_t)rsi_dtype_size(cv->dst_dtype) < RSI_DIRECT_BYTES)
    return false;
  return !rsi_shard_box_contiguous(p->plan, RS_SIDE_DST, entry->shard,
                                   p->ndim, ext);
}

/* Deliver piece (off, ext) from outside the domain to its needers
 * p->near[0 .. nnear), `count` of which it meets: it crosses once, from
 * (src_kind, src_index) at src_rank, into `entry` (see deliver), and is
 * forwarded inside the domain; from entry's own memory where it wants all
 * of the piece (`whole`), else, or where forward_from_slot says so, from a
 * relay slot in its staging. */
static rs_status deliver_across(planner *p, const int64_t *off,
                                const int64_t *ext, int64_t nnear,
                                int64_t count, const needer *entry, bool whole,
                                int src_kind, int64_t src_index, int src_rank) {
  int64_t sub_off[RSI_MAX_DIMS], sub_ext[RSI_MAX_DIMS];
  if (!whole && count > 1 && p->plan->conv[p->tensor].scales >= 0) {
    /* fp8 travels with its scales, which a relay slot cannot hold: each
     * needer gets its part straight from the sender */
    for (int64_t i = 0; i < nnear; i++) {
      const needer *n = &p->needers[p->near[i]];
      if (rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                            sub_ext))
        RSI_TRY(rsi_planner_push_move(p, sub_off, sub_ext, src_kind, src_index,
                                      src_rank, RSI_EP_DST, n->shard, n->rank,
                                      0, 0));
    }
    return rsi_planner_end_unit(p);
  }
  if (count == 1) {
    rsi_box_intersect(p->ndim, off, ext, entry->off, entry->ext, sub_off,
                      sub_ext);
    RSI_TRY(rsi_planner_push_move(p, sub_off, sub_ext, src_kind, src_index,
                                  src_rank, RSI_EP_DST, entry->shard,
                                  entry->rank, 0, 0));
    return rsi_planner_end_unit(p);
  }

  int from_kind;
  int64_t from_index = 0;
  if (whole && forward_from_slot(p, ext, entry)) whole = false;
  if (whole) { /* forwarded from the entry's own memory */
    RSI_TRY(rsi_planner_push_move(p, off, ext, src_kind, src_index, src_rank,
                                  RSI_EP_DST, entry->shard, entry->rank, 0, 0));
    from_kind = RSI_EP_DST;
    from_index = entry->shard;
  } else { /* a relay slot in staging */
    const rsi_conversion *cv = &p->plan->conv[p->tensor];
    RSI_TRY(rsi_planner_push_relay(p, entry->rank, off, ext,
                       rsi_planner_wire_dtype(cv->src_dtype, cv->dst_dtype),
                       &from_index));
    RSI_TRY(rsi_planner_push_move(p, off, ext, src_kind, src_index, src_rank,
                      RSI_EP_RELAY, from_index, entry->rank, 0, 0));
    from_kind = RSI_EP_RELAY;
  }
  int from_rank = entry->rank;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (whole && n == entry) continue;
    if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                           sub_ext))
      continue;
    RSI_TRY(rsi_planner_push_move(p, sub_off, sub_ext, from_kind, from_index,
                                  from_rank, RSI_EP_DST, n->shard, n->rank, 1,
                                  1));
  }
  return rsi_planner_end_unit(p);
}

/* What a crossing of values without block scales sends from a replica,
 * whatever the entry it lands in: the piece in the wire dtype (into a
 * relay slot where `count` > 1 needers meet it and none wants all of it,
 * !whole), or where it meets one needer only, its part there. */
int64_t rsi_planner_crossing_bytes(const planner *p, const int64_t *off,
                              const int64_t *ext, int64_t count,
                              const needer *entry, bool whole) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  rs_dtype wire = rsi_planner_wire_dtype(cv->src_dtype, cv->dst_dtype);
  if (count > 1 && !whole) wire = rsi_planner_wire_dtype(cv->src_dtype, wire);
  int64_t so[RSI_MAX_DIMS], se[RSI_MAX_DIMS], vol;
  if (count == 1)
    rsi_box_intersect(p->ndim, off, ext, entry->off, entry->ext, so, se);
  rsi_box_volume(p->ndim, count == 1 ? se : ext, &vol);
  return vol * (int64_t)rsi_dtype_size(wire);
}

/* A crossing of a piece of group g into a shadow's domain (begin_shadow),
 * `place`-th of its slot, without its moves: where it comes from a
 * replica (no link upstream forwards it), the replica's set is charged
 * `bytes` (crossing_bytes), what deliver_across would have sent. *depth:
 * the domains it crossed before. Its holders are the caller's to link. */
rs_status rsi_planner_shadow_crossing(planner *p, const group *g,
                                 const piece_slot *slot, int32_t place,
                                 int64_t bytes, int32_t *depth) {
  int32_t up = rsi_planner_chain_up(p, slot, place);
  *depth = up + 1; /* 0 from a replica */
  if (up >= 0) return RS_OK;
  const sort_key *src;
  int64_t set, at;
  RSI_TRY(rsi_planner_cross_replica(p, g, &src, &set, &at));
  rsi_replica_sets_add(&p->sets, set, at, bytes);
  return RS_OK;
}

/* Deliver piece (off, ext), held by every replica of source group g, to the
 * needers of one domain (their boxes meet the piece). */
rs_status rsi_planner_deliver(planner *p, const int64_t *off,
                              const int64_t *ext, const group *g, int domain,
                              int64_t nneed) {
  int64_t sub_off[RSI_MAX_DIMS], sub_ext[RSI_MAX_DIMS];
  if (p->memo_recording) {
    RSI_TRY(rsi_planner_grow_held(p, (void **)&p->memo_src, &p->cap_memo_src,
                      p->memo_n + 1, sizeof *p->memo_src, 64));
    RSI_TRY(rsi_planner_grow_held(p, (void **)&p->memo_slot, &p->cap_memo_slot,
                      p->memo_n + 1, sizeof *p->memo_slot, 64));
    RSI_TRY(rsi_planner_grow_held(p, (void **)&p->memo_bytes,
                                  &p->cap_memo_bytes, p->memo_n + 1,
                                  sizeof *p->memo_bytes, 64));
    RSI_TRY(rsi_planner_reserve_held(p, &p->memo_boxes, 2 * p->ndim));
    p->memo_slot[p->memo_n] = -1;
    p->memo_bytes[p->memo_n] = -1;
    if (rsi_pool_push(&p->memo_boxes, off, p->ndim, p->err) < 0 ||
        rsi_pool_push(&p->memo_boxes, ext, p->ndim, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    p->memo_src[p->memo_n++] = g - p->sgroups;
  }
  int64_t nnear = rsi_planner_near_needers(p, off, ext, nneed);

  /* A replica inside the domain: no crossing at all. */
  int64_t lo, hi;
  rsi_planner_replicas_in(p, g, domain, &lo, &hi);
  if (lo < hi) return deliver_inside(p, off, ext, g, domain, nnear);

  /* It lands in the needer that wants all of it and has received the
   * least across; where none wants all, in the needer it meets that has
   * received the least. */
  int64_t count = 0;
  const needer *least = NULL, *relay = NULL;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                           sub_ext))
      continue;
    count++;
    int64_t got = p->recv_inter_load[n->rank];
    if (!least || got < p->recv_inter_load[least->rank]) least = n;
    if ((!relay || got < p->recv_inter_load[relay->rank]) &&
        rsi_box_contains(p->ndim, n->off, n->ext, off, ext))
      relay = n;
  }
  if (count == 0) return RS_OK;
  const needer *entry = relay ? relay : least;

  /* Cross once: down the piece's chains from an earlier domain, or from
   * the source replica its set has used least. */
  piece_slot *slot;
  RSI_TRY(rsi_planner_cross_slot(p, g, off, ext, &slot));
  int32_t place = slot->crossed++, depth = 0;
  if (p->shadow && p->plan->conv[p->tensor].scales < 0) {
    RSI_TRY(rsi_planner_shadow_crossing(
        p, g, slot, place,
        rsi_planner_crossing_bytes(p, off, ext, count, entry, relay != NULL),
        &depth));
    return rsi_planner_link_holders(p, slot, place, off, ext, nnear, -1, depth);
  }
  holder ho;
  int src_kind = RSI_EP_DST, src_rank;
  int64_t src_index, set = -1, set_at = 0, first_move = p->plan->nmoves;
  if (rsi_planner_cross_from(p, slot, place, entry->rank, &depth, &ho)) {
    src_index = ho.shard;
    src_rank = ho.rank;
    p->after = ho.unit;
    p->depth = depth;
  } else {
    const sort_key *src;
    RSI_TRY(rsi_planner_cross_replica(p, g, &src, &set, &set_at));
    src_kind = RSI_EP_SRC;
    src_index = src->index;
    src_rank = src->rank;
  }
  RSI_TRY(deliver_across(p, off, ext, nnear, count, entry, relay != NULL,
                         src_kind, src_index, src_rank));
  if (set >= 0) {
    int64_t bytes = 0; /* what the replica sent: the piece, its scales */
    for (int64_t i = first_move; i < p->plan->nmoves; i++)
      if (p->plan->moves[i].src_kind == RSI_EP_SRC &&
          p->plan->moves[i].src_rank == src_rank)
        bytes += p->plan->moves[i].bytes;
    rsi_replica_sets_add(&p->sets, set, set_at, bytes);
  }
  return rsi_planner_link_holders(p, slot, place, off, ext, nnear,
                                  p->units.n - 1, depth);
}

/* Pieces of a block-scaled tensor are cut along block boundaries only. */
static void cut_alignment(const planner *p, int64_t *align) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  for (int d = 0; d < p->ndim; d++)
    align[d] = cv->scales >= 0 ? rsi_planner_block_size(cv, p->ndim, d) : 1;
}

/* Cut box (off, ext) into parts of at most `limit` bytes (elements of
 * p->esize) and call `take` on each: slabs along the outermost dim that
 * can be cut, one alignment step thick above it (one element, or one
 * block of a block-scaled tensor, which is never cut). */
rs_status rsi_planner_cut_bounded(planner *p, const int64_t *off,
                             const int64_t *ext, int64_t limit, box_fn take,
                             void *ctx) {
  int64_t vol, align[RSI_MAX_DIMS];
  rsi_box_volume(p->ndim, ext, &vol);
  if (vol * p->esize <= limit) return take(p, off, ext, ctx);
  cut_alignment(p, align);
  int64_t inner = p->esize; /* bytes of one index step in dim d */
  int d = p->ndim - 1;
  while (d > 0 && inner * ext[d] <= limit) inner *= ext[d--];
  int64_t thick = 1; /* elements of the dims above d in one part */
  for (int j = 0; j < d; j++) thick *= align[j] < ext[j] ? align[j] : ext[j];
  /* A slab one block thick may not fit where one element thick would:
   * then cut further in, blocks thick above. */
  while (d < p->ndim - 1 && align[d] * inner * thick > limit) {
    thick *= align[d] < ext[d] ? align[d] : ext[d];
    inner /= ext[++d];
  }
  int64_t step = limit / (inner * thick) / align[d] * align[d];
  if (step < align[d]) step = align[d];
  if (step * inner * thick > limit && align[d] > 1)
    return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                    "tensor '%s': one slab of whole scale blocks (%lld bytes) "
                    "does not fit the part of a staging round a piece may "
                    "take (%lld bytes); raise RS_PARAM_STAGING_BYTES",
                    p->plan->tensors[p->tensor].name,
                    (long long)(step * inner * thick), (long long)limit);
  /* Refuse before cutting a piece into more parts than a plan may hold. */
  int64_t parts = ext[d] / step + (ext[d] % step != 0);
  bool too_many = false;
  for (int j = 0; j < d && !too_many; j++)
    too_many = __builtin_mul_overflow(parts, (ext[j] + align[j] - 1) / align[j],
                                      &parts);
  if (too_many || parts > rsi_planner_moves_left(p))
    return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                    "tensor '%s': a piece of %lld elements would be cut into "
                    "more parts (of at most %lld bytes, to fit the staging "
                    "setting) than a plan may hold (%lld moves); raise "
                    "RS_PARAM_STAGING_BYTES",
                    p->plan->tensors[p->tensor].name, (long long)vol,
                    (long long)limit,
                    (long long)(p->plan->nmoves + rsi_planner_moves_left(p)));
  int64_t coff[RSI_MAX_DIMS], cext[RSI_MAX_DIMS], idx[RSI_MAX_DIMS] = {0};
  memcpy(coff, off, (size_t)p->ndim * sizeof *off);
  memcpy(cext, ext, (size_t)p->ndim * sizeof *ext);
  for (;;) {
    for (int j = 0; j < d; j++)
      cext[j] = ext[j] - idx[j] < align[j] ? ext[j] - idx[j] : align[j];
    for (int64_t s = 0; s < ext[d]; s += step) {
      coff[d] = off[d] + s;
      cext[d] = ext[d] - s < step ? ext[d] - s : step;
      RSI_TRY(take(p, coff, cext, ctx));
    }
    int j = d - 1;
    for (; j >= 0; j--) {
      idx[j] += align[j];
      if (idx[j] < ext[j]) break;
      idx[j] = 0;
    }
    if (j < 0) break;
    for (int k = 0; k < d; k++) coff[k] = off[k] + idx[k];
  }
  return RS_OK;
}

static rs_status deliver_part_of(planner *p, const int64_t *off,
                                 const int64_t *ext, void *ctx) {
  const target *t = ctx;
  return rsi_planner_deliver(p, off, ext, t->g, t->domain, t->nneed);
}

/* Cut a piece so that one unit (first hop plus forwards) fits a round.
 * One unit must fit an empty round (rounds.c charges each end at
 * most its bytes, 64-aligned): a lone needer is charged the piece once at
 * each end; a first receiver that forwards to the others is charged its
 * receive, a relay slot when it needs one, and a send per forward. Pieces
 * are kept to at most half a round even so, which packs rounds better. */
rs_status rsi_planner_deliver_bounded(planner *p, const int64_t *off,
                                 const int64_t *ext, const group *g,
                                 int domain, int64_t nneed) {
  /* (a round by domain pair is a chunk, which holds a lone needer's
   * piece of a quarter of the staging whole: the packed size) */
  int64_t lone = p->plan->rounds_by_pair ? 1 : 2;
  int64_t limit = p->plan->round_capacity / (nneed < 2 ? lone : nneed + 2);
  limit = limit / 64 * 64;
  if (limit < 64) limit = 64;
  target t = {g, NULL, domain, nneed};
  return rsi_planner_cut_bounded(p, off, ext, limit, deliver_part_of, &t);
}
