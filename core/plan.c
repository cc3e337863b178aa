/* SPDX-License-Identifier: Apache-2.0 */
/* The planner: intersections, replica choice, domain grouping.
 *
 * Per tensor, shards with identical boxes are grouped (a group's holders are
 * its replicas). Source groups are indexed by a box tree (box_tree.h): a
 * query finds the k groups meeting a box in about O(log G + k), whatever
 * dim the groups vary in (rows, columns, an element each in 16 dims, a
 * replica as large as the tensor beside many small shards), instead of
 * comparing every source shard with every destination shard. The groups
 * found are taken in the order of their offset in the dim whose offsets
 * are most varied (then by group), so plans do not depend on the tree.
 * Whether the groups of a side, or of one domain, overlap at all is asked
 * of a box tree too, never pair by pair.
 *
 * Destination groups are visited per domain. A region several ranks of one
 * domain need is a "fragment": it is cut into pieces, one per source group
 * covering it, locality first: the groups a needer of the fragment holds
 * itself take their part first, then the groups with a replica inside the
 * domain, then the rest, so a piece comes from outside the domain only
 * where no rank inside holds any of it. A piece with a replica inside the
 * domain never crosses: a needer holding it copies it locally (or, where
 * source groups overlap, the parts it holds), the others get it from the
 * replicas, or, when they outnumber the replicas, from one of them that
 * forwards it in the same round. Any other piece crosses into the domain
 * once (to the needer with the least inter-domain receive load so far),
 * which then forwards it to the other needers over the domain's fabric.
 * The sender into a domain
 * is the least loaded (bytes sent across domains so far) of the source
 * replicas and of the ranks of earlier domains that already hold the whole
 * piece in their destination memory: a destination domain relays to the
 * next one in a later round, so the sources' network links are not the
 * limit when there are many more destination domains than replicas. Relay
 * chains are at most RELAY_DEPTH long. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "box_tree.h"
#include "dtype.h"
#include "grow.h"
#include "hash.h"
#include "radix_sort.h"
#include "replica_sets.h"
#include "staging.h"
#include "transport/transport.h"

/* ---- scratch ---------------------------------------------------------- */

typedef struct sort_key {
  const int64_t *geom; /* offset, extent */
  int32_t ndim, domain, rank;
  int64_t index;       /* shard index */
} sort_key;

/* Scratch of sort_keys, grown as needed. */
typedef struct key_sorter {
  sort_key *tmp;
  int32_t *box_of; /* key -> its box's id (first seen, first numbered) */
  int32_t *slots;  /* hash table of box ids, -1: empty */
  int64_t *start;  /* box id -> its first key; then its bucket's start */
  int64_t cap_tmp, cap_box_of, cap_slots, cap_start;
} key_sorter;

typedef struct group {
  int64_t first, n; /* holders: keys[first .. first+n) of their side */
  const int64_t *off, *ext;
} group;

typedef struct needer {
  int64_t shard;
  int32_t rank;
  const int64_t *off, *ext;
} needer;

typedef struct domain_entry {
  int32_t domain;
  int64_t group, first, n; /* holders keys[first .. first+n) in domain */
} domain_entry;

/* A rank that holds a piece (source group, box) whole in destination
 * memory once `unit` ran: it may forward it to a later domain. */
typedef struct holder {
  int64_t shard, unit;
  int32_t rank;
} holder;

/* One domain a piece crossed into: the holders it registered,
 * p->holders[first .. first+n), or where first < 0, a replayed shadow's
 * (replay_entry): every needer of its entry, p->dkeys[-1 - first ..][0 ..
 * n), none of them in a unit. How many domains the piece crossed before
 * it got there (0: straight from a source replica) is the planner's
 * link_depth. */
typedef struct chain_link {
  int64_t first;
  int32_t n;
} chain_link;

/* A piece and the domains it crossed into, in the order it crossed:
 * p->links[link .. link+k) has room for the k domains that need it from
 * outside (known when it first crosses). The first `heads` of them get it
 * from a source replica; the j-th after them from the (j - heads)-th, so
 * the piece travels down `heads` chains of at most CHAIN_DOMAINS domains
 * (see cross_from). */
typedef struct piece_slot {
  int64_t group, box; /* box: planner->keys_pool */
  int64_t link;
  int32_t k, heads, crossed;
} piece_slot;

typedef struct key_value {
  int64_t v, i;
} key_value;


/* A piece that k domains need from outside crosses into ceil(k /
 * CHAIN_DOMAINS) of them from source replicas and is forwarded down from
 * there, domain to domain, one round a link: chains of at most this many
 * domains, so no holder forwards a piece more than once and a replica
 * sends it ceil(k / 8) times over all its replicas. Shorter chains cost
 * the sources more: Llama-3.1-70B from 32 GPUs into 32 domains, one
 * replica of each shard, is 1.56 of its lower bound with chains of 6,
 * 1.30 with 7, 1.04 with 8 (docs/PLANNING.md). */
#define CHAIN_DOMAINS 8

/* The memory a plan may take while it is made and scheduled: what the
 * first limit, 2^26 moves of about 100 bytes, meant to allow. Moves and
 * relays are charged what they really cost (move_cost, relay_cost), and
 * so are the planner's arrays that grow with the pieces (grow_held); a
 * plan that would not fit is refused before its memory is spent, from
 * its shards where it can be (check_plan_size, check_tensor_size), else
 * at the budget. */
int64_t rsi_plan_bytes = (int64_t)100 << 26;

typedef struct planner {
  rs_plan *plan;
  rsi_err *err;
  int tensor, ndim, esize;
  /* per tensor */
  sort_key *skeys, *dkeys;
  group *sgroups, *dgroups;
  int64_t nsg, ndg;
  rsi_box_tree stree, dtree; /* source groups; destination groups */
  /* the replica sets of the whole plan; per source group of this tensor,
   * its set (-1: not looked up yet) */
  rsi_replica_sets sets;
  int64_t *group_set;
  int64_t cap_group_set;
  int32_t *set_ranks; /* scratch: a group's ranks */
  int64_t cap_set_ranks;
  int64_t *key_rank; /* source group -> its place in `order` (dim `key`) */
  int key;
  bool src_disjoint, dst_disjoint;
  domain_entry *entries;
  int64_t nentries;
  /* scratch lists */
  int64_t *cands;
  needer *needers;
  int64_t cap_needers;
  rsi_box_tree ntree; /* the fragment's needers, when indexed */
  int64_t *near;      /* the needers a piece meets */
  int64_t cap_near;
  int64_t *far;       /* of those, the ones another rank serves */
  int64_t cap_far;
  int64_t *own;       /* source groups a needer holds part of a piece in */
  int64_t cap_own;
  rsi_pool own_work;  /* carving a needer's own parts */
  key_value *ranked;  /* candidate source groups by locality */
  int64_t *rank_mark; /* per rank: == mark when it needs the fragment */
  int64_t mark;
  /* the destination shards of the current tensor's scale tensor, by rank
   * (block-scaled values only) */
  int64_t *scale_ids;
  int64_t nscale_ids;
  const int64_t *dfirst, *dids; /* destination shards by tensor */
  bool indexed;
  rsi_pool frags; /* fragments: offset[ndim], extent[ndim] each */
  rsi_pool cut;   /* carving a domain: boxes taken away */
  int64_t *frag_first, *hits, *cut_at; /* carving: per group, found, cuts */
  int64_t cap_frag_first, cap_hits, cap_cut_at;
  rsi_pool work;  /* carving */
  /* loads, for balance: what a rank sent to ranks of its own domain and
   * received from other domains. Each changes only with the choices made
   * for its own domain, so no choice depends on another domain's traffic
   * (docs/PLANNING.md, "Choices that read their own domain only"). */
  int64_t *send_intra_load, *recv_inter_load;
  /* per rank: its domain as an index 0.. in the order of the domain ids
   * (ids are any ints a caller chose; the planner's arrays need no more
   * room than there are domains), and its place among its domain's ranks */
  int32_t *domain_ix, *rail;
  /* scheduling units: end, the unit it must follow (-1), relay depth */
  rsi_units units;
  int64_t cap_units, cap_after, cap_depth;
  /* pieces held in destination memory, this tensor (open addressing) */
  piece_slot *slots;
  int64_t cap_slots, nslots;
  int64_t slots_moved; /* how many times the table grew (reserve_slot) */
  holder *holders;
  int64_t nholders, cap_holders;
  chain_link *links;
  /* per link: its depth where it has a holder that may forward the piece,
   * else -1; what chain_up reads, a byte instead of the link's 16, so
   * that the links a chain looks back at stay in cache */
  int8_t *link_depth;
  int64_t nlinks, cap_links, cap_link_depth;
  rsi_pool keys_pool;
  /* the domains that may need a piece from outside: those whose mark is
   * `stamp` (the current destination group's, or the tensor's, domains),
   * `ndomains` of them */
  int64_t *domain_mark;
  int64_t stamp, ndomains;
  /* the relay chosen for the piece being delivered */
  int64_t after;
  int32_t depth;
  int64_t budget; /* rsi_plan_bytes, when the plan was asked for */
  int64_t spent;  /* bytes charged to moves and relays, of the budget */
  int64_t held;   /* bytes of the arrays that grow with the pieces */
  int64_t part;  /* the rank whose part the plan keeps (RS_PARAM_PLAN_PART) */
  bool keeps_boxes; /* RS_PARAM_PLAN_BOXES: moves keep their boxes */
  /* A domain's part (rsi_plan_create_domain): the index of the domain
   * whose moves the plan keeps, -1 for the whole plan; `shadow` while an
   * entry of another domain is served (begin_shadow) */
  int32_t only_domain;
  bool shadow;
  /* in a domain's part, per domain: tensor + 1 where it holds a source
   * shard of the current tensor */
  int32_t *src_in_domain;
  /* The pieces of the current destination group as a shadow's deliver
   * was given them (boxes: offset, extent each; their source groups),
   * for `memo_nneed` needers; recorded while `memo_recording`, replayed
   * for the shadows that get the same ones (replay_entry). */
  rsi_pool memo_boxes;
  int64_t *memo_src;
  int64_t *memo_slot; /* its slot, once found, while slots_moved is */
  int64_t *memo_bytes; /* what its crossing sends, once known; else -1 */
  int64_t memo_n, cap_memo_src, cap_memo_slot, cap_memo_bytes, memo_nneed,
      memo_moved;
  bool memo_recording;
  key_sorter sorter;
} planner;

static int cmp_key(const void *x, const void *y) {
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

static int cmp_int64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* ---- the plan's size -------------------------------------------------- */

/* Bytes one move costs from planning to the end of scheduling: the move
 * and its box in plan->boxes; its scheduling unit (end, after, depth: at
 * most one a move); and the larger of the scheduler's scratch per unit
 * or move (plan_rounds.c: a sort key, the radix sort's copy of it and the
 * order; then the order and the move's sorted copy) and its message (at
 * most one a move), which is made once the scratch is freed. */
static int64_t move_cost(int ndim) {
  int64_t sorting = 2 * (int64_t)sizeof(rsi_keyed) + (int64_t)sizeof(int64_t);
  int64_t gathering = (int64_t)sizeof(int64_t) + (int64_t)sizeof(rsi_move);
  int64_t scratch = sorting > gathering ? sorting : gathering;
  int64_t msg = (int64_t)sizeof(rsi_message);
  return (int64_t)sizeof(rsi_move) + 2 * ndim * (int64_t)sizeof(int64_t) +
         2 * (int64_t)sizeof(int64_t) + (int64_t)sizeof(int32_t) +
         (scratch > msg ? scratch : msg);
}

/* A relay slot and its box. */
static int64_t relay_cost(int ndim) {
  return (int64_t)sizeof(rsi_relay) + 2 * ndim * (int64_t)sizeof(int64_t);
}

static int64_t bytes_left(const planner *p) {
  return p->budget - p->spent - p->held;
}

/* How many more moves of the current tensor the plan may hold. */
static int64_t moves_left(const planner *p) {
  return bytes_left(p) / move_cost(p->ndim);
}

static rs_status too_many_moves(const planner *p, const char *why) {
  return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                  "tensor '%s': the plan would hold more than %lld moves "
                  "(%lld bytes each while it is made, at most %lld bytes in "
                  "all)%s; raise RS_PARAM_STAGING_BYTES or split the work",
                  p->plan->tensors[p->tensor].name,
                  (long long)(p->plan->nmoves + moves_left(p)),
                  (long long)move_cost(p->ndim), (long long)p->budget, why);
}

/* Make room for `need` items of `size` bytes in one of the planner's
 * arrays that grow with the pieces: rsi_grow's doubling, as far as the
 * budget allows, charged to p->held. */
static rs_status grow_held(planner *p, void **items, int64_t *cap,
                           int64_t need, size_t size, int64_t first) {
  if (need <= *cap) return RS_OK;
  int64_t most = *cap + bytes_left(p) / (int64_t)size, was = *cap;
  if (most < need) return too_many_moves(p, " and the pieces they carry");
  RSI_TRY(rsi_grow_at_most(items, cap, need, size, first, most, p->err));
  p->held += (*cap - was) * (int64_t)size;
  return RS_OK;
}

/* Room for `more` values in a pool that grows with the pieces. */
static rs_status reserve_held(planner *p, rsi_pool *pool, int64_t more) {
  return grow_held(p, (void **)&pool->v, &pool->cap, pool->n + more,
                   sizeof *pool->v, 256);
}

/* The most bytes a piece carries: a quarter of the staging (half a round,
 * or by domain pair a round), since deliver_bounded never cuts a larger
 * one. */
static int64_t largest_piece(const rs_plan *plan) {
  return plan->round_capacity / (plan->rounds_by_pair ? 1 : 2);
}

/* Refuse, before planning, a plan that cannot fit the budget: every
 * destination shard receives at least one move per largest piece of its
 * bytes. A domain's part holds the moves into its domain only. */
static rs_status check_plan_size(planner *p, const int64_t *dfirst,
                                 const int64_t *dids) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int64_t half = largest_piece(p->plan);
  int64_t need = 0;
  for (int t = 0; t < p->plan->ntensors; t++) {
    p->tensor = t;
    p->ndim = p->plan->tensors[t].ndim;
    int64_t moves = 0, vol;
    for (int64_t i = dfirst[t]; i < dfirst[t + 1]; i++) {
      const rsi_shard *s = &dst->shards[dids[i]];
      if (p->plan->domain_part &&
          p->plan->domain_of[s->rank] != p->plan->part_domain)
        continue;
      rsi_box_volume(p->ndim, rsi_shard_extent(&dst->pool, s, p->ndim), &vol);
      int64_t bytes = vol * p->plan->tensors[t].esize; /* within the tensor */
      int64_t parts = bytes / half + (bytes % half != 0), cost;
      if (__builtin_add_overflow(moves, parts, &moves) ||
          __builtin_mul_overflow(moves, move_cost(p->ndim), &cost) ||
          cost > p->budget - need)
        return too_many_moves(p, ": its destination shards need at least "
                                 "one move per quarter of the staging");
    }
    need += moves * move_cost(p->ndim);
  }
  return RS_OK;
}

/* The moves each shard of destination group g receives at least, counted
 * until they pass `enough`, where the tensor has no block scales: every
 * move then carries a box inside one source group and one piece (no block
 * is assembled from several), so each source group g meets whose elements
 * no other group holds (exclusive[i], or every group where exclusive is
 * NULL) sends it at least a move per largest piece of what they share. */
static int64_t moves_into_at_least(planner *p, const group *g,
                                   const bool *exclusive, int64_t enough) {
  int nd = p->ndim;
  int64_t largest = largest_piece(p->plan), moves = 0;
  int64_t n = rsi_box_tree_query(&p->stree, g->off, g->ext, -1, p->cands,
                                 p->nsg);
  for (int64_t c = 0; c < n && moves <= enough; c++) {
    if (exclusive && !exclusive[p->cands[c]]) continue;
    const group *s = &p->sgroups[p->cands[c]];
    int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS], vol;
    rsi_box_intersect(nd, s->off, s->ext, g->off, g->ext, o, e);
    rsi_box_volume(nd, e, &vol);
    int64_t bytes = vol * p->esize; /* within the tensor */
    moves += bytes / largest + (bytes % largest != 0);
  }
  return moves;
}

/* Where source groups overlap: which of them meet no other (*out, nsg
 * entries, malloc'd). Only such a group's elements must come from it. */
static rs_status exclusive_sources(planner *p, bool **out) {
  bool *ex = malloc((size_t)(p->nsg ? p->nsg : 1) * sizeof *ex);
  if (!ex) return RSI_NOMEM(p->err);
  for (int64_t i = 0; i < p->nsg; i++)
    ex[i] = rsi_box_tree_query(&p->stree, p->sgroups[i].off,
                               p->sgroups[i].ext, -1, p->cands, p->nsg) == 1;
  *out = ex;
  return RS_OK;
}

/* Refuse, before any of its moves is made, a tensor whose destination
 * shards (in a domain's part, those of its domain) need more moves than
 * the budget has left: at least one per piece of each source group they
 * meet whose elements no other group holds (moves_into_at_least; where
 * every group is disjoint from the others, that is all of them). A tensor
 * with block scales is bounded by check_plan_size alone. */
static rs_status check_tensor_size(planner *p) {
  if (p->plan->conv[p->tensor].scales >= 0) return RS_OK;
  bool *exclusive = NULL;
  if (!p->src_disjoint) RSI_TRY(exclusive_sources(p, &exclusive));
  int64_t left = moves_left(p), need = 0, each = 0, counted = -1, more;
  for (int64_t e = 0; e < p->nentries && need <= left; e++) {
    const domain_entry *en = &p->entries[e];
    if (p->only_domain >= 0 && en->domain != p->only_domain) continue;
    if (en->group != counted) { /* a group's entries come together */
      each = moves_into_at_least(p, &p->dgroups[en->group], exclusive, left);
      counted = en->group;
    }
    if (__builtin_mul_overflow(each, en->n, &more) ||
        __builtin_add_overflow(need, more, &need))
      need = INT64_MAX;
  }
  free(exclusive);
  if (need <= left) return RS_OK;
  char why[160];
  snprintf(why, sizeof why,
           ": its destination shards need at least %lld, one per piece of "
           "each source shard they meet",
           (long long)need);
  return too_many_moves(p, why);
}

/* ---- moves ------------------------------------------------------------ */

/* The element type at one end of a move of tensor t. */
static rs_dtype end_dtype(const planner *p, int t, int kind, int64_t index) {
  if (kind == RSI_EP_RELAY) return (rs_dtype)p->plan->relays[index].dtype;
  return kind == RSI_EP_SRC ? p->plan->conv[t].src_dtype
                            : p->plan->conv[t].dst_dtype;
}

/* What travels between two ends: fp8 values are quantized by the sender
 * (the planner sends them from whole blocks only), any other change of
 * dtype happens on the side that leaves the fewer bytes on the wire. */
static rs_dtype wire_dtype(rs_dtype from, rs_dtype to) {
  if (to == RS_DTYPE_F8_E4M3) return to;
  return rsi_dtype_size(to) <= rsi_dtype_size(from) ? to : from;
}

static rs_status add_scale_moves(planner *p, const rsi_move *values);

/* A plan that keeps one rank's part needs the boxes of that rank's moves
 * only, and a plan without boxes (RS_PARAM_PLAN_BOXES = 0) none: once a
 * move is made (its contiguity found, its scales' moves made from it), its
 * box, the last in the pool, is given back. After that the scheduler and
 * the figures read a move's bytes, never its box; its elements are its
 * bytes over its wire dtype's size. At 8192 GPUs a side the boxes are a
 * fifth of the planner's peak memory (bench_plan_dsv3). */
static void forget_box(planner *p, rsi_move *m) {
  if (p->keeps_boxes &&
      (p->part < 0 || m->src_rank == p->part || m->dst_rank == p->part))
    return;
  rsi_pool *boxes = &p->plan->boxes;
  if (m->box + 2 * p->ndim != boxes->n) return; /* a later box was kept */
  boxes->n -= 2 * p->ndim;
  m->box = -1;
}

/* The buffers some move reads or writes: only those must be bound (a
 * replica the plan does not read from needs no memory). */
static void mark_used(rs_plan *plan, int kind, int32_t index) {
  if (kind == RSI_EP_RELAY) return;
  rsi_side *side = &plan->side[kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST];
  const rsi_shard *s = &side->shards[index];
  if (!rsi_context_drives(plan->ctx, s->rank)) return; /* no slot here */
  side->buffers[side->rank_first[s->rank] + s->buffer].used = true;
}

/* A move of tensor t; for block-scaled values landing in a destination
 * shard, the moves of their scales follow it. */
static rs_status push_move_of(planner *p, int t, const int64_t *off,
                              const int64_t *ext, int src_kind,
                              int64_t src_index, int src_rank, int dst_kind,
                              int64_t dst_index, int dst_rank, int stage,
                              int forwarded, bool computes_scales) {
  rs_plan *plan = p->plan;
  if (moves_left(p) < 1) return too_many_moves(p, "");
  p->spent += move_cost(p->ndim);
  RSI_TRY(rsi_grow_at_most((void **)&plan->moves, &plan->cap_moves,
                           plan->nmoves + 1, sizeof *plan->moves, 1024,
                           plan->nmoves + 1 + moves_left(p), p->err));
  int64_t at = rsi_pool_push(&plan->boxes, NULL, 2 * p->ndim, p->err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  memcpy(plan->boxes.v + at, off, (size_t)p->ndim * sizeof *off);
  memcpy(plan->boxes.v + at + p->ndim, ext, (size_t)p->ndim * sizeof *ext);
  int64_t vol;
  rsi_box_volume(p->ndim, ext, &vol); /* within a checked shard */
  /* scales computed from values read them in the values' dtype */
  rs_dtype from = computes_scales ? plan->conv[plan->conv[t].values].src_dtype
                                  : end_dtype(p, t, src_kind, src_index);
  rs_dtype to = end_dtype(p, t, dst_kind, dst_index);
  if (computes_scales && src_kind == RSI_EP_RELAY)
    from = (rs_dtype)plan->relays[src_index].dtype;
  rs_dtype wire = computes_scales ? to
                  : src_rank == dst_rank ? to : wire_dtype(from, to);
  rsi_move *m = &plan->moves[plan->nmoves++];
  memset(m, 0, sizeof *m);
  m->box = at;
  m->bytes = vol * (int64_t)rsi_dtype_size(wire);
  m->tensor = t;
  m->src_kind = (uint8_t)src_kind;
  m->src_index = (int32_t)src_index;
  m->src_rank = src_rank;
  m->dst_kind = (uint8_t)dst_kind;
  m->dst_index = (int32_t)dst_index;
  m->dst_rank = dst_rank;
  m->stage = (uint8_t)stage;
  m->forwarded = (uint8_t)forwarded;
  m->src_dtype = (uint8_t)from;
  m->wire_dtype = (uint8_t)wire;
  m->dst_dtype = (uint8_t)to;
  m->computes_scales = computes_scales;
  if (!p->shadow) { /* a shadow's moves are dropped: nothing runs them */
    mark_used(plan, src_kind, (int32_t)src_index);
    mark_used(plan, dst_kind, (int32_t)dst_index);
  }
  if (from == to && !computes_scales && !p->shadow)
    m->contiguous = (uint8_t)(rsi_move_contiguous(plan, m, true) |
                              rsi_move_contiguous(plan, m, false) << 1);
  if (src_rank == dst_rank)
    m->route = RS_ROUTE_LOCAL;
  else if (plan->domain_of[src_rank] == plan->domain_of[dst_rank])
    m->route = RS_ROUTE_INTRA;
  else
    m->route = RS_ROUTE_INTER;
  if (m->route == RS_ROUTE_INTRA) p->send_intra_load[src_rank] += m->bytes;
  if (m->route == RS_ROUTE_INTER) p->recv_inter_load[dst_rank] += m->bytes;
  if (dst_kind == RSI_EP_DST && plan->conv[t].scales >= 0) {
    int64_t values = plan->nmoves - 1;
    RSI_TRY(add_scale_moves(p, m)); /* which reads m's box */
    m = &plan->moves[values]; /* its pushes may have moved the array */
  }
  forget_box(p, m);
  return RS_OK;
}

static rs_status push_move(planner *p, const int64_t *off, const int64_t *ext,
                           int src_kind, int64_t src_index, int src_rank,
                           int dst_kind, int64_t dst_index, int dst_rank,
                           int stage, int forwarded) {
  return push_move_of(p, p->tensor, off, ext, src_kind, src_index, src_rank,
                      dst_kind, dst_index, dst_rank, stage, forwarded, false);
}

/* The block size of dim d of a block-scaled tensor of ndim dims. */
static int64_t block_size(const rsi_conversion *cv, int ndim, int d) {
  if (d == ndim - 1) return cv->b1;
  return d == ndim - 2 ? cv->b0 : 1;
}

/* Scale-tensor shards of `rank`: p->scale_ids[*lo .. *hi). */
static void scale_shards_of(const planner *p, int rank, int64_t *lo,
                            int64_t *hi) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int64_t a = 0, b = p->nscale_ids;
  while (a < b) {
    int64_t mid = a + (b - a) / 2;
    if (dst->shards[p->scale_ids[mid]].rank < rank) a = mid + 1;
    else b = mid;
  }
  *lo = a;
  while (a < p->nscale_ids && dst->shards[p->scale_ids[a]].rank == rank) a++;
  *hi = a;
}

/* The scales of the blocks whose first element a values move carries, into
 * every scale shard of its receiver that holds them: computed from the
 * values where the move reads them in the source dtype (a source shard or
 * a relay slot, holding the whole blocks), else copied from the sender's
 * own scale shards (it holds the values of those blocks in fp8, so their
 * scales too). */
static rs_status add_scale_moves(planner *p, const rsi_move *values) {
  const rsi_move v = *values; /* pushes move the array */
  const rs_plan *plan = p->plan;
  const rsi_conversion *cv = &plan->conv[v.tensor];
  const rsi_side *dst = &plan->side[RS_SIDE_DST];
  int nd = p->ndim;
  const int64_t *off = plan->boxes.v + v.box, *ext = off + nd;
  int64_t bo[RSI_MAX_DIMS], be[RSI_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t bs = block_size(cv, nd, d);
    int64_t first = (off[d] + bs - 1) / bs, last = (off[d] + ext[d] - 1) / bs;
    if (last < first) return RS_OK; /* no block starts in it */
    bo[d] = first;
    be[d] = last - first + 1;
  }
  bool computed = v.src_kind != RSI_EP_DST;
  int64_t lo, hi, slo = 0, shi = 0;
  scale_shards_of(p, v.dst_rank, &lo, &hi);
  if (!computed) scale_shards_of(p, v.src_rank, &slo, &shi);
  for (int64_t i = lo; i < hi; i++) {
    const rsi_shard *e = &dst->shards[p->scale_ids[i]];
    int64_t xo[RSI_MAX_DIMS], xe[RSI_MAX_DIMS];
    if (!rsi_box_intersect(nd, bo, be, rsi_shard_offset(&dst->pool, e),
                           rsi_shard_extent(&dst->pool, e, nd), xo, xe))
      continue;
    if (computed) {
      RSI_TRY(push_move_of(p, cv->scales, xo, xe, v.src_kind, v.src_index,
                           v.src_rank, RSI_EP_DST, p->scale_ids[i],
                           v.dst_rank, v.stage, v.forwarded, true));
      continue;
    }
    for (int64_t j = slo; j < shi; j++) {
      const rsi_shard *f = &dst->shards[p->scale_ids[j]];
      int64_t yo[RSI_MAX_DIMS], ye[RSI_MAX_DIMS];
      if (rsi_box_intersect(nd, xo, xe, rsi_shard_offset(&dst->pool, f),
                            rsi_shard_extent(&dst->pool, f, nd), yo, ye))
        RSI_TRY(push_move_of(p, cv->scales, yo, ye, RSI_EP_DST,
                             p->scale_ids[j], v.src_rank, RSI_EP_DST,
                             p->scale_ids[i], v.dst_rank, v.stage,
                             v.forwarded, false));
    }
  }
  return RS_OK;
}

static rs_status end_unit(planner *p) {
  rsi_units *u = &p->units;
  RSI_TRY(rsi_grow((void **)&u->end, &p->cap_units, u->n + 1, sizeof *u->end,
                   1024, p->err));
  RSI_TRY(rsi_grow((void **)&u->after, &p->cap_after, u->n + 1,
                   sizeof *u->after, 1024, p->err));
  RSI_TRY(rsi_grow((void **)&u->depth, &p->cap_depth, u->n + 1,
                   sizeof *u->depth, 1024, p->err));
  u->after[u->n] = p->after;
  u->depth[u->n] = p->depth;
  u->end[u->n++] = p->plan->nmoves;
  p->after = -1;
  p->depth = 0;
  return RS_OK;
}

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

static rs_status clear_pieces(planner *p) {
  if (!p->cap_slots) {
    int64_t bytes = 1024 * (int64_t)sizeof *p->slots;
    if (bytes > bytes_left(p))
      return too_many_moves(p, " and the pieces they carry");
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
static rs_status reserve_slot(planner *p) {
  if ((p->nslots + 1) * 2 <= p->cap_slots) return RS_OK;
  int64_t cap = p->cap_slots * 2, size = (int64_t)sizeof *p->slots;
  if (cap * size > bytes_left(p)) /* while the old table is held too */
    return too_many_moves(p, " and the pieces they carry");
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
static int32_t domains_needing(const planner *p, const group *g) {
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
static rs_status cross_slot(planner *p, const group *g, const int64_t *off,
                            const int64_t *ext, piece_slot **out) {
  RSI_TRY(reserve_slot(p));
  int64_t gi = g - p->sgroups;
  bool found;
  piece_slot *s = piece_find(p, gi, off, ext, &found);
  if (!found) {
    int32_t k = domains_needing(p, g);
    RSI_TRY(grow_held(p, (void **)&p->links, &p->cap_links, p->nlinks + k,
                      sizeof *p->links, 1024));
    RSI_TRY(grow_held(p, (void **)&p->link_depth, &p->cap_link_depth,
                      p->nlinks + k, sizeof *p->link_depth, 1024));
    RSI_TRY(reserve_held(p, &p->keys_pool, 2 * p->ndim));
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

/* The depth of the link of the domain the j-th domain piece s crosses
 * into gets it from, or -1 where it comes from a source replica
 * (cross_from). */
static int32_t chain_up(const planner *p, const piece_slot *s, int32_t j) {
  int64_t up = (int64_t)j - s->heads;
  if (up < 0 || up >= s->k) return -1;
  int32_t d = p->link_depth[s->link + up];
  return d + 1 >= CHAIN_DOMAINS ? -1 : d;
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
static bool cross_from(const planner *p, const piece_slot *s, int32_t j,
                       int entry, int32_t *depth, holder *from) {
  int32_t up = chain_up(p, s, j);
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
static rs_status link_holders(planner *p, const piece_slot *s, int32_t j,
                              const int64_t *off, const int64_t *ext,
                              int64_t nnear, int64_t unit, int32_t depth) {
  if (j >= s->k) return RS_OK;
  chain_link *l = &p->links[s->link + j];
  RSI_TRY(grow_held(p, (void **)&p->holders, &p->cap_holders,
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

static rs_status push_relay(planner *p, int rank, const int64_t *off,
                            const int64_t *ext, rs_dtype dtype,
                            int64_t *index) {
  rs_plan *plan = p->plan;
  if (bytes_left(p) < relay_cost(p->ndim))
    return too_many_moves(p, " and relay slots");
  p->spent += relay_cost(p->ndim);
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
static void replicas_in(const planner *p, const group *g, int domain,
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

/* Rank's holder of source group g (the group's box is in its own source
 * memory), or NULL. */
static const sort_key *held_by(const planner *p, const group *g, int rank) {
  int64_t lo, hi;
  replicas_in(p, g, p->domain_ix[rank], &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    if (p->skeys[i].rank == rank) return &p->skeys[i];
  return NULL;
}

/* The replica of g inside `domain` that has sent the fewest bytes inside
 * its domain so far, or NULL. */
static const sort_key *least_loaded_inside(const planner *p, const group *g,
                                           int domain) {
  const sort_key *best = NULL;
  int64_t lo, hi;
  replicas_in(p, g, domain, &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    if (!best || p->send_intra_load[p->skeys[i].rank] <
                     p->send_intra_load[best->rank])
      best = &p->skeys[i];
  return best;
}

/* The replica of g a piece crosses from when no domain forwards it: the
 * one that has sent the fewest bytes across for g's replica set (*set,
 * and *at its place there: charge it with rsi_replica_sets_add). */
static rs_status cross_replica(planner *p, const group *g,
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

typedef rs_status (*carve_fn)(planner *p, const group *g, const int64_t *off,
                              const int64_t *ext, void *ctx);

/* The whole scale blocks inside group g's box, into (off, ext); false
 * when there is none. */
static bool whole_blocks_of(const planner *p, const group *g, int64_t *off,
                            int64_t *ext) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  const int64_t *shape = p->plan->tensors[p->tensor].shape;
  for (int d = 0; d < p->ndim; d++) {
    int64_t bs = block_size(cv, p->ndim, d), end = g->off[d] + g->ext[d];
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
static rs_status carve_by_groups(planner *p, rsi_pool *w, const int64_t *ids,
                                 int64_t n, bool whole_blocks, carve_fn take,
                                 void *ctx) {
  int nd = p->ndim;
  int64_t po[RSI_MAX_DIMS], pe[RSI_MAX_DIMS];
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS], fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
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
static rs_status index_needers(planner *p, int64_t nneed) {
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
static int64_t near_needers(planner *p, const int64_t *off, const int64_t *ext,
                            int64_t nneed) {
  int64_t n = 0, o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
  if (p->indexed) {
    n = rsi_box_tree_query(&p->ntree, off, ext, -1, p->near, nneed);
    qsort(p->near, (size_t)n, sizeof *p->near, cmp_int64);
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
  RSI_TRY(push_move(p, off, ext, RSI_EP_SRC, held_by(p, g, n->rank)->index,
                    n->rank, RSI_EP_DST, n->shard, n->rank, 0, 0));
  return end_unit(p);
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
    if (held_by(p, &p->sgroups[p->own[i]], n->rank)) p->own[mine++] = p->own[i];
  if (mine == 0) return RS_OK;
  *done = true;
  qsort(p->own, (size_t)mine, sizeof *p->own, cmp_int64);
  rsi_pool *w = &p->own_work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  RSI_TRY(carve_by_groups(p, w, p->own, mine, false, copy_own_part,
                          (void *)n));
  for (int64_t r = 0; r < w->n; r += 2 * nd) {
    int64_t rb[2 * RSI_MAX_DIMS];
    memcpy(rb, w->v + r, (size_t)(2 * nd) * sizeof *rb);
    const sort_key *src = least_loaded_inside(p, g, domain);
    RSI_TRY(push_move(p, rb, rb + nd, RSI_EP_SRC, src->index, src->rank,
                      RSI_EP_DST, n->shard, n->rank, 0, 0));
    RSI_TRY(end_unit(p));
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
  replicas_in(p, g, domain, &lo, &hi);
  int64_t replicas = hi - lo;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (!rsi_box_intersect(nd, off, ext, n->off, n->ext, so, se)) continue;
    const sort_key *mine = held_by(p, g, n->rank);
    if (!mine) {
      bool done = false;
      if (!p->src_disjoint && p->plan->conv[p->tensor].scales < 0)
        RSI_TRY(serve_own_parts(p, n, g, domain, so, se, &done));
      if (!done) p->far[nfar++] = p->near[i];
      continue;
    }
    RSI_TRY(push_move(p, so, se, RSI_EP_SRC, mine->index, n->rank, RSI_EP_DST,
                      n->shard, n->rank, 0, 0));
    RSI_TRY(end_unit(p));
  }
  /* A piece the sender converts is converted once in the domain: one
   * receiver forwards the result to the others. */
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  bool converts = wire_dtype(cv->src_dtype, cv->dst_dtype) != cv->src_dtype;
  bool fan_out = nfar > replicas || (converts && nfar > 1);
  const needer *relay = NULL;
  for (int64_t i = 0; fan_out && i < nfar; i++) {
    const needer *n = &p->needers[p->far[i]];
    if (rsi_box_contains(nd, n->off, n->ext, off, ext) &&
        (!relay ||
         p->send_intra_load[n->rank] < p->send_intra_load[relay->rank]))
      relay = n;
  }
  const sort_key *src = least_loaded_inside(p, g, domain);
  if (relay)
    RSI_TRY(push_move(p, off, ext, RSI_EP_SRC, src->index, src->rank,
                      RSI_EP_DST, relay->shard, relay->rank, 0, 0));
  for (int64_t i = 0; i < nfar; i++) {
    const needer *n = &p->needers[p->far[i]];
    if (n == relay) continue;
    rsi_box_intersect(nd, off, ext, n->off, n->ext, so, se);
    if (relay) {
      RSI_TRY(push_move(p, so, se, RSI_EP_DST, relay->shard, relay->rank,
                        RSI_EP_DST, n->shard, n->rank, 1, 1));
      continue;
    }
    src = least_loaded_inside(p, g, domain);
    RSI_TRY(push_move(p, so, se, RSI_EP_SRC, src->index, src->rank,
                      RSI_EP_DST, n->shard, n->rank, 0, 0));
    RSI_TRY(end_unit(p));
  }
  return relay ? end_unit(p) : RS_OK;
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
        RSI_TRY(push_move(p, sub_off, sub_ext, src_kind, src_index, src_rank,
                          RSI_EP_DST, n->shard, n->rank, 0, 0));
    }
    return end_unit(p);
  }
  if (count == 1) {
    rsi_box_intersect(p->ndim, off, ext, entry->off, entry->ext, sub_off,
                      sub_ext);
    RSI_TRY(push_move(p, sub_off, sub_ext, src_kind, src_index, src_rank,
                      RSI_EP_DST, entry->shard, entry->rank, 0, 0));
    return end_unit(p);
  }

  int from_kind;
  int64_t from_index = 0;
  if (whole && forward_from_slot(p, ext, entry)) whole = false;
  if (whole) { /* forwarded from the entry's own memory */
    RSI_TRY(push_move(p, off, ext, src_kind, src_index, src_rank, RSI_EP_DST,
                      entry->shard, entry->rank, 0, 0));
    from_kind = RSI_EP_DST;
    from_index = entry->shard;
  } else { /* a relay slot in staging */
    const rsi_conversion *cv = &p->plan->conv[p->tensor];
    RSI_TRY(push_relay(p, entry->rank, off, ext,
                       wire_dtype(cv->src_dtype, cv->dst_dtype),
                       &from_index));
    RSI_TRY(push_move(p, off, ext, src_kind, src_index, src_rank,
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
    RSI_TRY(push_move(p, sub_off, sub_ext, from_kind, from_index, from_rank,
                      RSI_EP_DST, n->shard, n->rank, 1, 1));
  }
  return end_unit(p);
}

/* What a crossing of values without block scales sends from a replica,
 * whatever the entry it lands in: the piece in the wire dtype (into a
 * relay slot where `count` > 1 needers meet it and none wants all of it,
 * !whole), or where it meets one needer only, its part there. */
static int64_t crossing_bytes(const planner *p, const int64_t *off,
                              const int64_t *ext, int64_t count,
                              const needer *entry, bool whole) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  rs_dtype wire = wire_dtype(cv->src_dtype, cv->dst_dtype);
  if (count > 1 && !whole) wire = wire_dtype(cv->src_dtype, wire);
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
static rs_status shadow_crossing(planner *p, const group *g,
                                 const piece_slot *slot, int32_t place,
                                 int64_t bytes, int32_t *depth) {
  int32_t up = chain_up(p, slot, place);
  *depth = up + 1; /* 0 from a replica */
  if (up >= 0) return RS_OK;
  const sort_key *src;
  int64_t set, at;
  RSI_TRY(cross_replica(p, g, &src, &set, &at));
  rsi_replica_sets_add(&p->sets, set, at, bytes);
  return RS_OK;
}

/* Deliver piece (off, ext), held by every replica of source group g, to the
 * needers of one domain (their boxes meet the piece). */
static rs_status deliver(planner *p, const int64_t *off, const int64_t *ext,
                         const group *g, int domain, int64_t nneed) {
  int64_t sub_off[RSI_MAX_DIMS], sub_ext[RSI_MAX_DIMS];
  if (p->memo_recording) {
    RSI_TRY(grow_held(p, (void **)&p->memo_src, &p->cap_memo_src,
                      p->memo_n + 1, sizeof *p->memo_src, 64));
    RSI_TRY(grow_held(p, (void **)&p->memo_slot, &p->cap_memo_slot,
                      p->memo_n + 1, sizeof *p->memo_slot, 64));
    RSI_TRY(grow_held(p, (void **)&p->memo_bytes, &p->cap_memo_bytes,
                      p->memo_n + 1, sizeof *p->memo_bytes, 64));
    RSI_TRY(reserve_held(p, &p->memo_boxes, 2 * p->ndim));
    p->memo_slot[p->memo_n] = -1;
    p->memo_bytes[p->memo_n] = -1;
    if (rsi_pool_push(&p->memo_boxes, off, p->ndim, p->err) < 0 ||
        rsi_pool_push(&p->memo_boxes, ext, p->ndim, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    p->memo_src[p->memo_n++] = g - p->sgroups;
  }
  int64_t nnear = near_needers(p, off, ext, nneed);

  /* A replica inside the domain: no crossing at all. */
  int64_t lo, hi;
  replicas_in(p, g, domain, &lo, &hi);
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
  RSI_TRY(cross_slot(p, g, off, ext, &slot));
  int32_t place = slot->crossed++, depth = 0;
  if (p->shadow && p->plan->conv[p->tensor].scales < 0) {
    RSI_TRY(shadow_crossing(
        p, g, slot, place,
        crossing_bytes(p, off, ext, count, entry, relay != NULL), &depth));
    return link_holders(p, slot, place, off, ext, nnear, -1, depth);
  }
  holder ho;
  int src_kind = RSI_EP_DST, src_rank;
  int64_t src_index, set = -1, set_at = 0, first_move = p->plan->nmoves;
  if (cross_from(p, slot, place, entry->rank, &depth, &ho)) {
    src_index = ho.shard;
    src_rank = ho.rank;
    p->after = ho.unit;
    p->depth = depth;
  } else {
    const sort_key *src;
    RSI_TRY(cross_replica(p, g, &src, &set, &set_at));
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
  return link_holders(p, slot, place, off, ext, nnear, p->units.n - 1, depth);
}

/* Pieces of a block-scaled tensor are cut along block boundaries only. */
static void cut_alignment(const planner *p, int64_t *align) {
  const rsi_conversion *cv = &p->plan->conv[p->tensor];
  for (int d = 0; d < p->ndim; d++)
    align[d] = cv->scales >= 0 ? block_size(cv, p->ndim, d) : 1;
}

typedef rs_status (*box_fn)(planner *p, const int64_t *off, const int64_t *ext,
                            void *ctx);

/* Cut box (off, ext) into parts of at most `limit` bytes (elements of
 * p->esize) and call `take` on each: slabs along the outermost dim that
 * can be cut, one alignment step thick above it (one element, or one
 * block of a block-scaled tensor, which is never cut). */
static rs_status cut_bounded(planner *p, const int64_t *off,
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
  if (too_many || parts > moves_left(p))
    return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                    "tensor '%s': a piece of %lld elements would be cut into "
                    "more parts (of at most %lld bytes, to fit the staging "
                    "setting) than a plan may hold (%lld moves); raise "
                    "RS_PARAM_STAGING_BYTES",
                    p->plan->tensors[p->tensor].name, (long long)vol,
                    (long long)limit,
                    (long long)(p->plan->nmoves + moves_left(p)));
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

/* Where the parts a cut or a carve makes go: the needers p->needers[0 ..
 * nneed) of a domain (and, to deliver a piece, its source group g; to look
 * sources up, their order). */
typedef struct target {
  const group *g;
  const key_value *order;
  int domain;
  int64_t nneed;
} target;

static rs_status deliver_part_of(planner *p, const int64_t *off,
                                 const int64_t *ext, void *ctx) {
  const target *t = ctx;
  return deliver(p, off, ext, t->g, t->domain, t->nneed);
}

/* Cut a piece so that one unit (first hop plus forwards) fits a round.
 * One unit must fit an empty round (plan_rounds.c charges each end at
 * most its bytes, 64-aligned): a lone needer is charged the piece once at
 * each end; a first receiver that forwards to the others is charged its
 * receive, a relay slot when it needs one, and a send per forward. Pieces
 * are kept to at most half a round even so, which packs rounds better. */
static rs_status deliver_bounded(planner *p, const int64_t *off,
                                 const int64_t *ext, const group *g,
                                 int domain, int64_t nneed) {
  /* (a round by domain pair is a chunk, which holds a lone needer's
   * piece of a quarter of the staging whole: the packed size) */
  int64_t lone = p->plan->rounds_by_pair ? 1 : 2;
  int64_t limit = p->plan->round_capacity / (nneed < 2 ? lone : nneed + 2);
  limit = limit / 64 * 64;
  if (limit < 64) limit = 64;
  target t = {g, NULL, domain, nneed};
  return cut_bounded(p, off, ext, limit, deliver_part_of, &t);
}

/* ---- groups and the source index ---------------------------------------- */

static int cmp_key_value(const void *x, const void *y) {
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
static rs_status sort_keys(planner *p, sort_key *keys, int64_t n,
                           int32_t *nbox_out) {
  *nbox_out = -1;
  if (n < SORT_KEYS_SMALL) {
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
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
  qsort(ks->tmp, (size_t)nbox, sizeof *ks->tmp, cmp_key);
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
static rs_status make_groups(planner *p, const rsi_side *side,
                             const int64_t *shard_ids, int64_t n,
                             sort_key *keys, group *groups, int64_t *ngroups) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_shard *s = &side->shards[shard_ids[i]];
    keys[i] = (sort_key){side->pool.v + s->geom, p->ndim,
                         p->domain_ix[s->rank], s->rank, shard_ids[i]};
  }
  int32_t nbox;
  RSI_TRY(sort_keys(p, keys, n, &nbox));
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
static rs_status groups_disjoint(planner *p, rsi_box_tree *tree,
                                 const group *groups, int64_t n,
                                 bool *disjoint) {
  RSI_TRY(rsi_box_tree_build(tree, p->ndim, n, group_box, groups, p->err));
  int64_t a, b;
  *disjoint = rsi_box_tree_disjoint(tree, &a, &b);
  return RS_OK;
}

/* Index the source groups in a box tree, and order them by offset in the
 * dim with the most distinct offsets (the order queries answer in). */
static rs_status index_sources(planner *p, key_value *order) {
  int best = 0;
  int64_t best_distinct = -1;
  for (int d = 0; d < p->ndim; d++) {
    for (int64_t i = 0; i < p->nsg; i++)
      order[i] = (key_value){p->sgroups[i].off[d], i};
    qsort(order, (size_t)p->nsg, sizeof *order, cmp_key_value);
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
  qsort(order, (size_t)p->nsg, sizeof *order, cmp_key_value);
  for (int64_t i = 0; i < p->nsg; i++) p->key_rank[order[i].i] = i;
  return groups_disjoint(p, &p->stree, p->sgroups, p->nsg, &p->src_disjoint);
}

/* Source groups meeting box (off, ext), in index order, into p->cands. */
static int64_t query_sources(planner *p, const key_value *order,
                             const int64_t *off, const int64_t *ext) {
  int64_t n = rsi_box_tree_query(&p->stree, off, ext, -1, p->cands, p->nsg);
  for (int64_t i = 0; i < n; i++) p->cands[i] = p->key_rank[p->cands[i]];
  if (n > 24) {
    qsort(p->cands, (size_t)n, sizeof *p->cands, cmp_int64);
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

static rs_status not_covered(planner *p, const int64_t *off) {
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
static void rank_by_locality(planner *p, int domain, int64_t nneed,
                             int64_t n) {
  p->mark++;
  for (int64_t i = 0; i < nneed; i++)
    p->rank_mark[p->needers[i].rank] = p->mark;
  for (int64_t c = 0; c < n; c++) {
    const group *g = &p->sgroups[p->cands[c]];
    int64_t lo, hi; /* the needers are all in the domain */
    replicas_in(p, g, domain, &lo, &hi);
    int64_t level = lo < hi ? 1 : 2;
    for (int64_t k = lo; k < hi && level > 0; k++)
      if (p->rank_mark[p->skeys[k].rank] == p->mark) level = 0;
    p->ranked[c] = (key_value){level * n + c, p->cands[c]};
  }
  qsort(p->ranked, (size_t)n, sizeof *p->ranked, cmp_key_value);
  for (int64_t c = 0; c < n; c++) p->cands[c] = p->ranked[c].i;
}

static rs_status deliver_part(planner *p, const group *g, const int64_t *off,
                              const int64_t *ext, void *ctx) {
  const target *t = ctx;
  return deliver_bounded(p, off, ext, g, t->domain, t->nneed);
}

/* The replica of g a part headed for `rank` in `domain` comes from: the
 * rank's own, else the least loaded inside the domain, else the one its
 * replica set has used least (charged with the part's bytes). */
static rs_status nearest_holder(planner *p, const group *g, int rank,
                                int domain, int64_t bytes,
                                const sort_key **out) {
  *out = held_by(p, g, rank);
  if (!*out) *out = least_loaded_inside(p, g, domain);
  if (*out) return RS_OK;
  int64_t set, at;
  RSI_TRY(cross_replica(p, g, out, &set, &at));
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
  return push_move(p, off, ext, RSI_EP_SRC, k->index, k->rank, RSI_EP_RELAY,
                   a->slot, a->rank, 0, 0);
}


/* Assemble blocks (off, ext) at needer n: their parts land in the source
 * dtype in a relay slot of n's, which then quantizes the whole blocks into
 * its destination shard (and computes their scales) in the same round. */
static rs_status assemble_at(planner *p, const target *t, const needer *n,
                             const int64_t *off, const int64_t *ext) {
  int nd = p->ndim;
  assembly a = {0, n->rank, t->domain};
  RSI_TRY(push_relay(p, n->rank, off, ext,
                     p->plan->conv[p->tensor].src_dtype, &a.slot));
  int64_t ncand = query_sources(p, t->order, off, ext);
  rank_by_locality(p, t->domain, t->nneed, ncand);
  rsi_pool *w = &p->own_work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  RSI_TRY(carve_by_groups(p, w, p->cands, ncand, false, send_part_to_slot,
                          &a));
  if (w->n > 0) return not_covered(p, w->v);
  RSI_TRY(push_move(p, off, ext, RSI_EP_RELAY, a.slot, n->rank, RSI_EP_DST,
                    n->shard, n->rank, 1, 0));
  return end_unit(p);
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
  int64_t nnear = near_needers(p, off, ext, t->nneed);
  const needer *first = NULL;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (rsi_box_contains(nd, n->off, n->ext, off, ext) &&
        (!first || p->recv_inter_load[n->rank] < p->recv_inter_load[first->rank]))
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
    RSI_TRY(push_move(p, off, ext, RSI_EP_DST, first->shard, first->rank,
                      RSI_EP_DST, n->shard, n->rank, 0, 0));
    RSI_TRY(end_unit(p));
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
    st = cut_bounded(p, left.v + r, left.v + r + nd, limit < 64 ? 64 : limit,
                     assemble_blocks, &t);
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
  RSI_TRY(index_needers(p, nneed));
  int64_t ncand = query_sources(p, order, off, ext);
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
        RSI_TRY(deliver_bounded(p, po, pe, g, domain, nneed));
      }
      return RS_OK;
    }
  }
  /* General carve: what is left of the fragment shrinks source by source,
   * the most local sources first. */
  rank_by_locality(p, domain, nneed, ncand);
  rsi_pool *w = &p->work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  target t = {NULL, order, domain, nneed};
  bool scaled = p->plan->conv[p->tensor].scales >= 0;
  RSI_TRY(carve_by_groups(p, w, p->cands, ncand, scaled, deliver_part, &t));
  if (scaled && w->n > 0) return serve_split_blocks(p, order, domain, nneed);
  if (w->n > 0) return not_covered(p, w->v);
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

/* The groups of one domain's entries, from entry e0 on, as boxes. */
typedef struct domain_groups {
  const planner *p;
  int64_t e0;
} domain_groups;

static const int64_t *domain_group_box(const void *ctx, int64_t i) {
  const domain_groups *dg = ctx;
  return dg->p->dgroups[dg->p->entries[dg->e0 + i].group].off;
}

/* ---- domains whose groups overlap ---------------------------------------- */

/* A domain's overlapping groups are carved into disjoint fragments, each
 * needed by every group it meets: group by group in entry order, a group
 * adds what the earlier fragments leave of its box. Only the earlier
 * fragments that meet it are taken away (the others would change nothing),
 * found through the groups they came from in the domain's box tree. Up to
 * CARVE_IN_ORDER of them are taken away one after the other, each piece
 * they meet replaced by its slabs; more are split first: the box is halved
 * at the median boundary of the fragments inside it, in the dim that has
 * the most, until few meet each half (or CARVE_DEPTH halvings). */
#define CARVE_IN_ORDER 32
#define CARVE_DEPTH 48

/* Take cutters p->cut[first ..) (n boxes: offset, extent) away, in order,
 * from the pieces p->frags[start ..): a piece that meets a cutter is
 * replaced by the slabs rsi_box_subtract leaves of it. */
static rs_status subtract_in_order(planner *p, int64_t start, int64_t first,
                                   int64_t n) {
  int nd = p->ndim;
  rsi_pool *fr = &p->frags;
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS], fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
  for (int64_t c = 0; c < n && fr->n > start; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    int64_t end = fr->n;
    for (int64_t r = start; r < end; r += 2 * nd) {
      int k = rsi_box_subtract(nd, fr->v + r, fr->v + r + nd, q, q + nd, fo,
                               fe);
      for (int f = 0; f < k; f++)
        if (rsi_pool_push(fr, fo + f * nd, nd, p->err) < 0 ||
            rsi_pool_push(fr, fe + f * nd, nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
    }
    memmove(fr->v + start, fr->v + end, (size_t)(fr->n - end) * sizeof *fr->v);
    fr->n -= end - start;
  }
  return RS_OK;
}

/* Where to halve box (offset, extent) among cutters p->cut[first ..): the
 * dim with the most cutter boundaries strictly inside the box, at their
 * median. There is one when no cutter contains the box. */
static rs_status choose_cut(planner *p, const int64_t *box, int64_t first,
                            int64_t n, int *dim, int64_t *at) {
  int nd = p->ndim;
  int64_t count[RSI_MAX_DIMS] = {0};
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    for (int d = 0; d < nd; d++) {
      count[d] += q[d] > box[d];
      count[d] += q[d] + q[nd + d] < box[d] + box[nd + d];
    }
  }
  int best = 0;
  for (int d = 1; d < nd; d++)
    if (count[d] > count[best]) best = d;
  RSI_TRY(rsi_grow((void **)&p->cut_at, &p->cap_cut_at, count[best],
                   sizeof *p->cut_at, 64, p->err));
  int64_t k = 0, lo = box[best], hi = box[best] + box[nd + best];
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    if (q[best] > lo) p->cut_at[k++] = q[best];
    if (q[best] + q[nd + best] < hi) p->cut_at[k++] = q[best] + q[nd + best];
  }
  qsort(p->cut_at, (size_t)k, sizeof *p->cut_at, cmp_int64);
  *dim = best;
  *at = p->cut_at[k / 2];
  return RS_OK;
}

/* Append to p->frags what cutters p->cut[first ..) (n boxes) leave of box
 * (offset, extent; a copy, the pools move). */
static rs_status carve_rest(planner *p, const int64_t *box, int64_t first,
                            int64_t n, int depth) {
  int nd = p->ndim;
  for (int64_t c = 0; c < n; c++) {
    const int64_t *q = p->cut.v + first + c * 2 * nd;
    if (rsi_box_contains(nd, q, q + nd, box, box + nd)) return RS_OK;
  }
  if (n <= CARVE_IN_ORDER || depth >= CARVE_DEPTH) {
    int64_t start = p->frags.n;
    if (rsi_pool_push(&p->frags, box, 2 * nd, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    return subtract_in_order(p, start, first, n);
  }
  int dim;
  int64_t at;
  RSI_TRY(choose_cut(p, box, first, n, &dim, &at));
  for (int upper = 0; upper < 2; upper++) {
    int64_t half[2 * RSI_MAX_DIMS];
    memcpy(half, box, (size_t)(2 * nd) * sizeof *half);
    half[dim] = upper ? at : box[dim];
    half[nd + dim] = upper ? box[dim] + box[nd + dim] - at : at - box[dim];
    int64_t mark = p->cut.n;
    for (int64_t c = 0; c < n; c++) {
      int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
      const int64_t *q = p->cut.v + first + c * 2 * nd;
      if (!rsi_box_intersect(nd, q, q + nd, half, half + nd, o, e)) continue;
      if (rsi_pool_push(&p->cut, o, nd, p->err) < 0 ||
          rsi_pool_push(&p->cut, e, nd, p->err) < 0)
        return RS_ERR_NO_MEMORY;
    }
    RSI_TRY(carve_rest(p, half, mark, (p->cut.n - mark) / (2 * nd),
                       depth + 1));
    p->cut.n = mark;
  }
  return RS_OK;
}

/* Carve the groups of entries [e0, e1) (in p->dtree, by entry - e0) into
 * disjoint fragments in p->frags. */
static rs_status carve_domain(planner *p, int64_t e0, int64_t e1) {
  int nd = p->ndim;
  int64_t m = e1 - e0;
  RSI_TRY(rsi_grow((void **)&p->frag_first, &p->cap_frag_first, m + 1,
                   sizeof *p->frag_first, 64, p->err));
  RSI_TRY(rsi_grow((void **)&p->hits, &p->cap_hits, m, sizeof *p->hits, 64,
                   p->err));
  p->frags.n = 0;
  for (int64_t i = 0; i < m; i++) {
    const group *g = &p->dgroups[p->entries[e0 + i].group];
    p->frag_first[i] = p->frags.n;
    int64_t nhits = rsi_box_tree_query(&p->dtree, g->off, g->ext, i, p->hits, m);
    qsort(p->hits, (size_t)nhits, sizeof *p->hits, cmp_int64);
    p->cut.n = 0;
    for (int64_t h = 0; h < nhits && p->hits[h] < i; h++)
      for (int64_t f = p->frag_first[p->hits[h]];
           f < p->frag_first[p->hits[h] + 1]; f += 2 * nd) {
        int64_t o[RSI_MAX_DIMS], e[RSI_MAX_DIMS];
        const int64_t *q = p->frags.v + f;
        if (rsi_box_intersect(nd, q, q + nd, g->off, g->ext, o, e) &&
            rsi_pool_push(&p->cut, q, 2 * nd, p->err) < 0)
          return RS_ERR_NO_MEMORY;
      }
    int64_t box[2 * RSI_MAX_DIMS];
    memcpy(box, g->off, (size_t)(2 * nd) * sizeof *box);
    RSI_TRY(carve_rest(p, box, 0, p->cut.n / (2 * nd), 0));
  }
  p->frag_first[m] = p->frags.n;
  return RS_OK;
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
    qsort(p->hits, (size_t)nhits, sizeof *p->hits, cmp_int64);
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

/* What the plan held before an entry of another domain than the one a
 * domain's part keeps was served. */
typedef struct shadow_mark {
  int64_t moves, relays, boxes, units, spent;
} shadow_mark;

/* Serve what follows as `domain`'s: in a domain's part, where `domain`
 * is another, as a shadow. A shadow keeps what its choices leave for
 * later domains (the pieces that crossed into it and its holders that may
 * forward them, the replica sets' charges, its own domain's loads) and
 * drops what it made (end_shadow), so the part's own choices are the
 * whole plan's. */
static void begin_shadow(planner *p, int domain, shadow_mark *m) {
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
static rs_status replay_entry(planner *p, int64_t e) {
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
      RSI_TRY(cross_slot(p, g, off, ext, &slot));
      forget_moved_slots(p); /* the table may have grown */
      p->memo_slot[i] = slot - p->slots;
    }
    slot = &p->slots[p->memo_slot[i]];
    if (p->memo_bytes[i] < 0)
      p->memo_bytes[i] = crossing_bytes(p, off, ext, en->n, &entry, true);
    int32_t place = slot->crossed++, depth;
    RSI_TRY(shadow_crossing(p, g, slot, place, p->memo_bytes[i], &depth));
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
  if (same_pieces && p->memo_nneed == en->n) return replay_entry(p, e);
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
      begin_shadow(p, p->entries[e].domain, &m);
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
    RSI_TRY(rsi_box_tree_build(&p->dtree, nd, e1 - e0, domain_group_box, &dg,
                               p->err));
    overlap = !rsi_box_tree_disjoint(&p->dtree, &a, &b);
  }
  if (!overlap) { /* each group is its own fragment */
    for (int64_t i = e0; i < e1; i++) RSI_TRY(serve_entry(p, order, i));
    return RS_OK;
  }
  RSI_TRY(carve_domain(p, e0, e1));
  return serve_carved(p, order, e0, e1);
}

static int cmp_entry(const void *x, const void *y) {
  const domain_entry *a = x, *b = y;
  if (a->domain != b->domain) return a->domain < b->domain ? -1 : 1;
  return (a->group > b->group) - (a->group < b->group);
}

/* ---- one tensor --------------------------------------------------------- */

static rs_status plan_tensor(planner *p, const int64_t *src_ids, int64_t ns,
                             const int64_t *dst_ids, int64_t ndst,
                             key_value *order) {
  RSI_TRY(clear_pieces(p));
  RSI_TRY(make_groups(p, &p->plan->side[RS_SIDE_SRC], src_ids, ns, p->skeys,
                      p->sgroups, &p->nsg));
  for (int64_t i = 0; p->only_domain >= 0 && i < ns; i++)
    p->src_in_domain[p->skeys[i].domain] = p->tensor + 1;
  RSI_TRY(make_groups(p, &p->plan->side[RS_SIDE_DST], dst_ids, ndst, p->dkeys,
                      p->dgroups, &p->ndg));
  if (p->ndg == 0) return RS_OK;
  if (p->nsg == 0) return not_covered(p, p->dgroups[0].off);

  RSI_TRY(groups_disjoint(p, &p->dtree, p->dgroups, p->ndg, &p->dst_disjoint));
  RSI_TRY(index_sources(p, order));
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
  RSI_TRY(check_tensor_size(p));
  if (p->dst_disjoint) return serve_groups(p, order);
  qsort(p->entries, (size_t)p->nentries, sizeof *p->entries, cmp_entry);
  mark_domains(p, 0, p->nentries);
  for (int64_t e0 = 0; e0 < p->nentries;) {
    int64_t e1 = e0 + 1;
    while (e1 < p->nentries && p->entries[e1].domain == p->entries[e0].domain)
      e1++;
    shadow_mark m;
    begin_shadow(p, p->entries[e0].domain, &m);
    RSI_TRY(serve_domain(p, order, e0, e1));
    end_shadow(p, &m);
    e0 = e1;
  }
  return RS_OK;
}

/* ---- the plan ------------------------------------------------------------ */

/* The side of layout l: its shards and geometry borrowed (rsi_side), and
 * the table of the buffers of every rank this process drives. */
static rs_status borrow_side(rs_plan *plan, rsi_side *side,
                             const rs_layout *l, rsi_err *err) {
  side->nshards = l->nshards;
  side->shards = l->shards;
  side->pool = l->pool;
  side->borrowed = true;
  side->rank_first = calloc((size_t)plan->world_size + 1, sizeof *side->rank_first);
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
    struct rsi_binding *b = &side->buffers[side->rank_first[s->rank] + s->buffer];
    if (s->byte_end > b->need) b->need = s->byte_end;
  }
  return RS_OK;
}

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

static rs_status check_compatible(const rs_layout *src, const rs_layout *dst,
                                  rsi_err *err) {
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

/* Shard ids of each tensor, tensor by tensor (counting sort, stable). */
static rs_status shards_by_tensor(const rs_layout *l, const int *tensor_map,
                                  int ntensors, int64_t **first_out,
                                  int64_t **ids_out, rsi_err *err) {
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

enum { HASH_TENSORS, HASH_SRC, HASH_DST, HASH_TOPOLOGY };

/* The plan's fingerprint, over its sides while they are borrowed: the
 * destination's shards hash the plan's number of their tensor,
 * dst_map[tensor]. */
static void fingerprint(rs_plan *plan, const int *dst_map) {
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
  h = rsi_fnv1a64_update(h, plan->domain_of, (size_t)plan->world_size * sizeof *plan->domain_of);
  h = rsi_fnv1a64_update(h, &plan->staging_bytes, sizeof plan->staging_bytes);
  h = rsi_fnv1a64_update(h, &plan->integrity, sizeof plan->integrity);
  if (plan->rounds_by_pair) /* hashed where not the default: packed plans'
                               fingerprints stay what they were */
    h = rsi_fnv1a64_update(h, &plan->rounds_by_pair,
                           sizeof plan->rounds_by_pair);
  plan->section_hash[HASH_TOPOLOGY] = h;
  plan->fingerprint = rsi_fnv1a64_update(basis, plan->section_hash, sizeof plan->section_hash);
}

/* The sides made the plan's own once it is made (rsi_side): copied, the
 * destination's tensors numbered by dst_map, where the plan keeps boxes
 * or is to keep a rank's part (plan_part.c cuts the copy); else, a plan
 * that cannot run (without boxes, or a domain's part), emptied. */
static rs_status own_sides(rs_plan *plan, bool keep, const int *dst_map,
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
  free(plan->peers);
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

/* ---- block-scaled fp8 ------------------------------------------------------ */

/* Destination shard ids[0..n) sorted by rank (then id). */
static rs_status sort_by_rank(planner *p, int64_t *ids, int64_t n) {
  const rsi_side *side = &p->plan->side[RS_SIDE_DST];
  key_value *kv = malloc((size_t)(n ? n : 1) * sizeof *kv);
  if (!kv) return RSI_NOMEM(p->err);
  for (int64_t i = 0; i < n; i++)
    kv[i] = (key_value){side->shards[ids[i]].rank, ids[i]};
  qsort(kv, (size_t)n, sizeof *kv, cmp_key_value);
  for (int64_t i = 0; i < n; i++) ids[i] = kv[i].i;
  free(kv);
  return RS_OK;
}

/* The scale shards of the tensor being planned, by rank (p->scale_ids). */
static rs_status scale_shards(planner *p) {
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
      int64_t bs = values ? block_size(cv, nd, d) : 1;
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
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS], fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
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
      int64_t bs = block_size(cv, nd, d), end = o[d] + e[d];
      if (o[d] % bs == 0 && (end % bs == 0 || end == t->shape[d])) continue;
      int64_t block[RSI_MAX_DIMS];
      for (int k = 0; k < nd; k++) block[k] = o[k] / block_size(cv, nd, k);
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
static rs_status check_blocks(planner *p, const int64_t *dfirst,
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
   * (plan_rounds.c). */
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
  int *dst_map = malloc((size_t)(dst->ntensors ? dst->ntensors : 1) * sizeof *dst_map);
  int *src_map = malloc((size_t)(src->ntensors ? src->ntensors : 1) * sizeof *src_map);
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
  rs_status st = borrow_side(plan, &plan->side[RS_SIDE_SRC], src, err);
  if (st == RS_OK) st = borrow_side(plan, &plan->side[RS_SIDE_DST], dst, err);
  int64_t *sfirst = NULL, *sids = NULL, *dfirst = NULL, *dids = NULL;
  if (st == RS_OK)
    st = shards_by_tensor(src, src_map, nt, &sfirst, &sids, err);
  if (st == RS_OK)
    st = shards_by_tensor(dst, dst_map, nt, &dfirst, &dids, err);
  free(src_map);
  if (st == RS_OK) st = check_plan_size(p, dfirst, dids);
  if (st == RS_OK) st = check_blocks(p, dfirst, dids);
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
    p->recv_inter_load = calloc((size_t)plan->world_size, sizeof *p->recv_inter_load);
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
    st = scale_shards(p);
    if (st == RS_OK)
      st = plan_tensor(p, sids + sfirst[t], sfirst[t + 1] - sfirst[t],
                       dids + dfirst[t], dfirst[t + 1] - dfirst[t], order);
  }
  p->dfirst = p->dids = NULL;
  free(order);
  free(sfirst);
  free(sids);
  free(dfirst);
  free(dids);
  if (st == RS_OK)
    st = rsi_plan_schedule(plan, &p->units, err);
  if (st == RS_OK) fingerprint(plan, dst_map);
  if (st == RS_OK)
    st = own_sides(plan,
                   ctx->plan_part >= 0 ||
                       (plan->keeps_boxes && !plan->domain_part),
                   dst_map, err);
  free(dst_map);
  /* a domain's part planned for a rank's (plan_rank.c) is cut there */
  if (st == RS_OK && ctx->plan_part >= 0 && !plan->domain_part)
    st = rsi_plan_keep_part(plan, (int)ctx->plan_part, err);
  return st;
}

bool rsi_plan_per_rank(const rs_context *ctx) {
  const rsi_transport *tp = ctx->transport;
  return ctx->rank != RS_ALL_RANKS && ctx->plan_part == ctx->rank &&
         ctx->rounds == RS_ROUNDS_BY_DOMAIN_PAIR && tp && tp->control;
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
  bool per_rank = !domain_part && rsi_plan_per_rank(ctx);
  if (per_rank) { /* its domain's part, then the exchange */
    domain_part = true;
    domain = ctx->domain_of[ctx->rank];
  }
  bool known = !domain_part;
  for (int r = 0; !known && r < ctx->world_size; r++)
    known = ctx->domain_of[r] == domain;
  if (!known)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "domain %d: no rank of the world is in it", domain);
  rs_status st = check_compatible(src, dst, err);
  if (st == RS_OK) st = rsi_layout_check_writes(dst, "destination", err);
  rs_plan *plan = st == RS_OK ? calloc(1, sizeof *plan) : NULL;
  if (st == RS_OK && !plan) st = RSI_NOMEM(err);
  if (st != RS_OK) /* the peers planning with this rank learn of it */
    return per_rank ? rsi_plan_rank_refused(ctx, st) : st;
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
  if (per_rank) st = rsi_plan_rank_part(plan, st, err);
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
