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
 * covering it, and each piece crosses into the domain once (to the needer
 * with the least inter-domain receive load so far), which then forwards it to
 * the other needers over the domain's fabric. A piece whose source has a
 * replica inside the domain never crosses at all. The sender into a domain
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
#include "exec.h"
#include "box_tree.h"
#include "dtype.h"
#include "grow.h"
#include "hash.h"
#include "staging.h"

/* ---- scratch ---------------------------------------------------------- */

typedef struct sort_key {
  const int64_t *geom; /* offset, extent */
  int32_t ndim, domain, rank;
  int64_t index;       /* shard index */
} sort_key;

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

/* Who holds a piece (source group, box) whole in destination memory after
 * which unit: a destination domain that can relay it to the next. */
typedef struct holder {
  int64_t shard, unit, next; /* next holder of the same piece, -1 */
  int32_t rank, depth;
} holder;

typedef struct piece_slot {
  int64_t group, box, first; /* box: planner->keys_pool; first holder */
} piece_slot;

#define RELAY_DEPTH 3

/* The memory a plan may take while it is made and scheduled: what the
 * first limit, 2^26 moves of about 100 bytes, meant to allow. Moves and
 * relays are charged what they really cost (move_cost, relay_cost), and a
 * plan that would not fit is refused before its memory is spent. */
#define PLAN_BYTES ((int64_t)100 << 26)

typedef struct planner {
  rs_plan *plan;
  rsi_err *err;
  int tensor, ndim, esize;
  /* per tensor */
  sort_key *skeys, *dkeys;
  group *sgroups, *dgroups;
  int64_t nsg, ndg;
  rsi_box_tree stree, dtree; /* source groups; destination groups */
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
  bool indexed;
  rsi_pool frags; /* fragments: offset[ndim], extent[ndim] each */
  rsi_pool cut;   /* carving a domain: boxes taken away */
  int64_t *frag_first, *hits, *cut_at; /* carving: per group, found, cuts */
  int64_t cap_frag_first, cap_hits, cap_cut_at;
  rsi_pool work;  /* carving */
  /* loads, for balance */
  int64_t *send_load, *send_inter_load, *recv_inter_load;
  /* scheduling units: end, the unit it must follow (-1), relay depth */
  int64_t *unit_end, *unit_after;
  int32_t *unit_depth;
  int64_t nunits, cap_units, cap_after, cap_depth;
  /* pieces held in destination memory, this tensor (open addressing) */
  piece_slot *slots;
  int64_t cap_slots, nslots;
  holder *holders;
  int64_t nholders, cap_holders;
  rsi_pool keys_pool;
  /* the relay chosen for the piece being delivered */
  int64_t after;
  int32_t depth;
  int64_t spent; /* bytes charged to moves and relays, of PLAN_BYTES */
} planner;

static int cmp_key(const void *x, const void *y) {
  const sort_key *a = x, *b = y;
  for (int i = 0; i < 2 * a->ndim; i++)
    if (a->geom[i] != b->geom[i]) return a->geom[i] < b->geom[i] ? -1 : 1;
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
 * most one a move); and, the largest of the scheduler's per-move scratch,
 * the move's sorted copy and its message (at most one a move). */
static int64_t move_cost(int ndim) {
  return 2 * (int64_t)sizeof(rsi_move) + 2 * ndim * (int64_t)sizeof(int64_t) +
         2 * (int64_t)sizeof(int64_t) + (int64_t)sizeof(int32_t) +
         (int64_t)sizeof(rsi_message);
}

/* A relay slot and its box. */
static int64_t relay_cost(int ndim) {
  return (int64_t)sizeof(rsi_relay) + 2 * ndim * (int64_t)sizeof(int64_t);
}

/* How many more moves of the current tensor the plan may hold. */
static int64_t moves_left(const planner *p) {
  return (PLAN_BYTES - p->spent) / move_cost(p->ndim);
}

static rs_status too_many_moves(const planner *p, const char *why) {
  return RSI_FAIL(p->err, RS_ERR_UNSUPPORTED,
                  "tensor '%s': the plan would hold more than %lld moves "
                  "(%lld bytes each while it is made, at most %lld bytes in "
                  "all)%s; raise RS_PARAM_STAGING_BYTES or split the work",
                  p->plan->tensors[p->tensor].name,
                  (long long)(p->plan->nmoves + moves_left(p)),
                  (long long)move_cost(p->ndim), (long long)PLAN_BYTES, why);
}

/* Refuse, before planning, a plan that cannot fit PLAN_BYTES: every
 * destination shard receives at least one move per half round of its
 * bytes, since deliver_bounded never cuts a larger piece. */
static rs_status check_plan_size(planner *p, const int64_t *dfirst,
                                 const int64_t *dids) {
  const rsi_side *dst = &p->plan->side[RS_SIDE_DST];
  int64_t half = p->plan->round_capacity / 2, need = 0;
  for (int t = 0; t < p->plan->ntensors; t++) {
    p->tensor = t;
    p->ndim = p->plan->tensors[t].ndim;
    int64_t moves = 0, vol;
    for (int64_t i = dfirst[t]; i < dfirst[t + 1]; i++) {
      const rsi_shard *s = &dst->shards[dids[i]];
      rsi_box_volume(p->ndim, rsi_shard_extent(&dst->pool, s, p->ndim), &vol);
      int64_t bytes = vol * p->plan->tensors[t].esize; /* within the tensor */
      int64_t parts = bytes / half + (bytes % half != 0), cost;
      if (__builtin_add_overflow(moves, parts, &moves) ||
          __builtin_mul_overflow(moves, move_cost(p->ndim), &cost) ||
          cost > PLAN_BYTES - need)
        return too_many_moves(p, ": its destination shards need at least "
                                 "one move per half round of staging");
    }
    need += moves * move_cost(p->ndim);
  }
  return RS_OK;
}

/* ---- moves ------------------------------------------------------------ */

static rs_status push_move(planner *p, const int64_t *off, const int64_t *ext,
                           int src_kind, int64_t src_index, int src_rank,
                           int dst_kind, int64_t dst_index, int dst_rank,
                           int stage, int forwarded) {
  rs_plan *plan = p->plan;
  if (moves_left(p) < 1) return too_many_moves(p, "");
  p->spent += move_cost(p->ndim);
  RSI_TRY(rsi_grow((void **)&plan->moves, &plan->cap_moves, plan->nmoves + 1,
                   sizeof *plan->moves, 1024, p->err));
  int64_t at = rsi_pool_push(&plan->boxes, NULL, 2 * p->ndim, p->err);
  if (at < 0) return RS_ERR_NO_MEMORY;
  memcpy(plan->boxes.v + at, off, (size_t)p->ndim * sizeof *off);
  memcpy(plan->boxes.v + at + p->ndim, ext, (size_t)p->ndim * sizeof *ext);
  int64_t vol;
  rsi_box_volume(p->ndim, ext, &vol); /* within a checked shard */
  rsi_move *m = &plan->moves[plan->nmoves++];
  memset(m, 0, sizeof *m);
  m->box = at;
  m->bytes = vol * p->esize;
  m->tensor = p->tensor;
  m->src_kind = (uint8_t)src_kind;
  m->src_index = (int32_t)src_index;
  m->src_rank = src_rank;
  m->dst_kind = (uint8_t)dst_kind;
  m->dst_index = (int32_t)dst_index;
  m->dst_rank = dst_rank;
  m->stage = (uint8_t)stage;
  m->forwarded = (uint8_t)forwarded;
  m->contiguous = (uint8_t)(rsi_move_contiguous(plan, m, true) |
                            rsi_move_contiguous(plan, m, false) << 1);
  if (src_rank == dst_rank)
    m->route = RS_ROUTE_LOCAL;
  else if (plan->domain_of[src_rank] == plan->domain_of[dst_rank])
    m->route = RS_ROUTE_INTRA;
  else
    m->route = RS_ROUTE_INTER;
  if (m->route != RS_ROUTE_LOCAL) p->send_load[src_rank] += m->bytes;
  if (m->route == RS_ROUTE_INTER) {
    p->send_inter_load[src_rank] += m->bytes;
    p->recv_inter_load[dst_rank] += m->bytes;
  }
  return RS_OK;
}

static rs_status end_unit(planner *p) {
  RSI_TRY(rsi_grow((void **)&p->unit_end, &p->cap_units, p->nunits + 1,
                   sizeof *p->unit_end, 1024, p->err));
  RSI_TRY(rsi_grow((void **)&p->unit_after, &p->cap_after, p->nunits + 1,
                   sizeof *p->unit_after, 1024, p->err));
  RSI_TRY(rsi_grow((void **)&p->unit_depth, &p->cap_depth, p->nunits + 1,
                   sizeof *p->unit_depth, 1024, p->err));
  p->unit_after[p->nunits] = p->after;
  p->unit_depth[p->nunits] = p->depth;
  p->unit_end[p->nunits++] = p->plan->nmoves;
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
    p->slots = malloc(1024 * sizeof *p->slots);
    if (!p->slots) return RSI_NOMEM(p->err);
    p->cap_slots = 1024;
  }
  p->nslots = p->nholders = 0;
  p->keys_pool.n = 0;
  for (int64_t i = 0; i < p->cap_slots; i++) p->slots[i].group = -1;
  return RS_OK;
}

/* Record that `rank` holds the piece whole in dst shard `shard` once unit
 * `unit` ran. */
static rs_status piece_held(planner *p, int64_t gi, const int64_t *off,
                            const int64_t *ext, int rank, int64_t shard,
                            int64_t unit, int32_t depth) {
  if ((p->nslots + 1) * 2 > p->cap_slots) { /* grow and rehash */
    int64_t cap = p->cap_slots ? p->cap_slots * 2 : 1024;
    piece_slot *old = p->slots;
    int64_t old_cap = p->cap_slots;
    p->slots = malloc((size_t)cap * sizeof *p->slots);
    if (!p->slots) {
      p->slots = old;
      return RSI_NOMEM(p->err);
    }
    p->cap_slots = cap;
    for (int64_t i = 0; i < cap; i++) p->slots[i].group = -1;
    for (int64_t i = 0; i < old_cap; i++) {
      if (old[i].group < 0) continue;
      bool found;
      const int64_t *k = p->keys_pool.v + old[i].box;
      *piece_find(p, old[i].group, k, k + p->ndim, &found) = old[i];
    }
    free(old);
  }
  RSI_TRY(rsi_grow((void **)&p->holders, &p->cap_holders, p->nholders + 1,
                   sizeof *p->holders, 1024, p->err));
  bool found;
  piece_slot *s = piece_find(p, gi, off, ext, &found);
  if (!found) {
    int64_t at = rsi_pool_push(&p->keys_pool, off, p->ndim, p->err);
    if (at < 0 || rsi_pool_push(&p->keys_pool, ext, p->ndim, p->err) < 0)
      return RS_ERR_NO_MEMORY;
    s = piece_find(p, gi, off, ext, &found); /* the pool may have moved */
    *s = (piece_slot){gi, at, -1};
    p->nslots++;
  }
  p->holders[p->nholders] = (holder){shard, unit, s->first, rank, depth};
  s->first = p->nholders++;
  return RS_OK;
}

/* Register every needer of a domain that now holds the piece whole. */
static rs_status needers_hold(planner *p, int64_t gi, const int64_t *off,
                              const int64_t *ext, int64_t nnear, int64_t unit,
                              int32_t depth) {
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (rsi_box_contains(p->ndim, n->off, n->ext, off, ext))
      RSI_TRY(piece_held(p, gi, off, ext, n->rank, n->shard, unit, depth));
  }
  return RS_OK;
}

static rs_status push_relay(planner *p, int rank, const int64_t *off,
                            const int64_t *ext, int64_t *index) {
  rs_plan *plan = p->plan;
  if (PLAN_BYTES - p->spent < relay_cost(p->ndim))
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
  *index = plan->nrelays++;
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

/* Deliver piece (off, ext), held by every replica of source group g, to the
 * needers of one domain (their boxes meet the piece). */
static rs_status deliver(planner *p, const int64_t *off, const int64_t *ext,
                         const group *g, int domain, int64_t nneed) {
  const sort_key *holders = p->skeys + g->first;
  int64_t sub_off[RSI_MAX_DIMS], sub_ext[RSI_MAX_DIMS];
  int64_t nnear = near_needers(p, off, ext, nneed);

  /* A replica inside the domain: no crossing at all. */
  bool inside = false;
  for (int64_t h = 0; h < g->n && !inside; h++)
    inside = holders[h].domain == domain;
  if (inside) {
    for (int64_t i = 0; i < nnear; i++) {
      const needer *n = &p->needers[p->near[i]];
      if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                             sub_ext))
        continue;
      const sort_key *best = NULL;
      for (int64_t h = 0; h < g->n; h++) {
        const sort_key *k = &holders[h];
        if (k->domain != domain) continue;
        if (k->rank == n->rank) {
          best = k;
          break;
        }
        if (!best || p->send_load[k->rank] < p->send_load[best->rank])
          best = k;
      }
      RSI_TRY(push_move(p, sub_off, sub_ext, RSI_EP_SRC, best->index,
                        best->rank, RSI_EP_DST, n->shard, n->rank, 0, 0));
      RSI_TRY(end_unit(p));
      if (rsi_box_contains(p->ndim, n->off, n->ext, off, ext))
        RSI_TRY(piece_held(p, g - p->sgroups, off, ext, n->rank, n->shard,
                           p->nunits - 1, 0));
    }
    return RS_OK;
  }

  /* Cross once: the least loaded across domains of the source replicas and
   * of the earlier domains holding the piece whole sends. */
  const sort_key *src = &holders[0];
  for (int64_t h = 1; h < g->n; h++) {
    int64_t a = p->send_inter_load[holders[h].rank];
    int64_t b = p->send_inter_load[src->rank];
    if (a < b || (a == b && p->send_load[holders[h].rank] < p->send_load[src->rank]))
      src = &holders[h];
  }
  int src_kind = RSI_EP_SRC, src_rank = src->rank;
  int64_t src_index = src->index;
  bool known;
  piece_slot *slot = piece_find(p, g - p->sgroups, off, ext, &known);
  for (int64_t h = known ? slot->first : -1; h >= 0; h = p->holders[h].next) {
    const holder *ho = &p->holders[h];
    if (ho->depth >= RELAY_DEPTH) continue;
    if (p->send_inter_load[ho->rank] < p->send_inter_load[src_rank]) {
      src_kind = RSI_EP_DST;
      src_index = ho->shard;
      src_rank = ho->rank;
      p->after = ho->unit;
      p->depth = ho->depth + 1;
    }
  }
  int32_t depth = p->depth;

  int64_t count = 0;
  const needer *only = NULL, *relay = NULL;
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                           sub_ext))
      continue;
    count++;
    only = n;
    bool whole = rsi_box_contains(p->ndim, n->off, n->ext, off, ext);
    if (whole && (!relay || p->recv_inter_load[n->rank] <
                                p->recv_inter_load[relay->rank]))
      relay = n;
  }
  if (count == 0) {
    p->after = -1;
    p->depth = 0;
    return RS_OK;
  }
  if (count == 1) {
    rsi_box_intersect(p->ndim, off, ext, only->off, only->ext, sub_off,
                      sub_ext);
    RSI_TRY(push_move(p, sub_off, sub_ext, src_kind, src_index, src_rank,
                      RSI_EP_DST, only->shard, only->rank, 0, 0));
    RSI_TRY(end_unit(p));
    return needers_hold(p, g - p->sgroups, off, ext, nnear, p->nunits - 1,
                        depth);
  }

  int from_kind, from_rank;
  int64_t from_index = 0;
  if (relay) { /* lands in a needer that wants all of it, forwarded from there */
    RSI_TRY(push_move(p, off, ext, src_kind, src_index, src_rank, RSI_EP_DST,
                      relay->shard, relay->rank, 0, 0));
    from_kind = RSI_EP_DST;
    from_index = relay->shard;
    from_rank = relay->rank;
  } else { /* no needer wants all of it: a relay slot in staging */
    const needer *at = NULL;
    for (int64_t i = 0; i < nnear; i++) {
      const needer *n = &p->needers[p->near[i]];
      if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                             sub_ext))
        continue;
      if (!at || p->recv_inter_load[n->rank] < p->recv_inter_load[at->rank])
        at = n;
    }
    RSI_TRY(push_relay(p, at->rank, off, ext, &from_index));
    RSI_TRY(push_move(p, off, ext, src_kind, src_index, src_rank,
                      RSI_EP_RELAY, from_index, at->rank, 0, 0));
    from_kind = RSI_EP_RELAY;
    from_rank = at->rank;
  }
  for (int64_t i = 0; i < nnear; i++) {
    const needer *n = &p->needers[p->near[i]];
    if (from_kind == RSI_EP_DST && n == relay) continue;
    if (!rsi_box_intersect(p->ndim, off, ext, n->off, n->ext, sub_off,
                           sub_ext))
      continue;
    RSI_TRY(push_move(p, sub_off, sub_ext, from_kind, from_index, from_rank,
                      RSI_EP_DST, n->shard, n->rank, 1, 1));
  }
  RSI_TRY(end_unit(p));
  return needers_hold(p, g - p->sgroups, off, ext, nnear, p->nunits - 1,
                      depth);
}

/* Cut a piece so that one unit (first hop plus forwards) fits a round:
 * slabs along the outermost dim that can be cut, 1-thick above it. */
static rs_status deliver_bounded(planner *p, const int64_t *off,
                                 const int64_t *ext, const group *g,
                                 int domain, int64_t nneed) {
  int64_t vol;
  rsi_box_volume(p->ndim, ext, &vol);
  /* One unit must fit an empty round (plan_rounds.c charges each end
   * 64-aligned): a lone needer is charged the piece once at each end; a
   * first receiver that forwards to the others is charged its receive, a
   * relay slot when it needs one, and a send per forward. Pieces are kept
   * to at most half a round even so, which packs rounds better. */
  int64_t limit = p->plan->round_capacity / (nneed < 2 ? 2 : nneed + 2);
  limit = limit / 64 * 64;
  if (limit < 64) limit = 64;
  if (vol * p->esize <= limit) return deliver(p, off, ext, g, domain, nneed);

  int64_t inner = p->esize; /* bytes of one index step in dim d */
  int d = p->ndim - 1;
  while (d > 0 && inner * ext[d] <= limit) inner *= ext[d--];
  int64_t step = limit / inner;
  if (step < 1) step = 1;
  /* Refuse before cutting a piece into more parts than a plan may hold. */
  int64_t parts = ext[d] / step + (ext[d] % step != 0);
  bool too_many = false;
  for (int j = 0; j < d && !too_many; j++)
    too_many = __builtin_mul_overflow(parts, ext[j], &parts);
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
  for (int j = 0; j < d; j++) cext[j] = 1;
  for (;;) {
    for (int64_t s = 0; s < ext[d]; s += step) {
      coff[d] = off[d] + s;
      cext[d] = ext[d] - s < step ? ext[d] - s : step;
      RSI_TRY(deliver(p, coff, cext, g, domain, nneed));
    }
    int j = d - 1;
    for (; j >= 0; j--) {
      if (++idx[j] < ext[j]) break;
      idx[j] = 0;
    }
    if (j < 0) break;
    for (int k = 0; k < d; k++) coff[k] = off[k] + idx[k];
  }
  return RS_OK;
}

/* ---- groups and the source index ---------------------------------------- */

typedef struct key_value {
  int64_t v, i;
} key_value;

static int cmp_key_value(const void *x, const void *y) {
  const key_value *a = x, *b = y;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* Sort one tensor's shards of a side by (box, domain, rank) and cut the
 * runs of identical boxes into groups. */
static rs_status make_groups(planner *p, const rsi_side *side,
                             const int64_t *shard_ids, int64_t n,
                             sort_key *keys, group *groups, int64_t *ngroups) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_shard *s = &side->shards[shard_ids[i]];
    keys[i] = (sort_key){side->pool.v + s->geom, p->ndim,
                         p->plan->domain_of[s->rank], s->rank, shard_ids[i]};
  }
  qsort(keys, (size_t)n, sizeof *keys, cmp_key);
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
  qsort(p->cands, (size_t)n, sizeof *p->cands, cmp_int64);
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

/* Cut fragment (off, ext) into pieces, one per source group covering it,
 * and deliver each to the domain's needers. */
static rs_status serve_fragment(planner *p, const key_value *order,
                                const int64_t *off, const int64_t *ext,
                                int domain, int64_t nneed) {
  int nd = p->ndim;
  RSI_TRY(index_needers(p, nneed));
  int64_t ncand = query_sources(p, order, off, ext);
  int64_t po[RSI_MAX_DIMS], pe[RSI_MAX_DIMS];
  if (p->src_disjoint) {
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
  /* General carve: what is left of the fragment shrinks source by source. */
  rsi_pool *w = &p->work;
  w->n = 0;
  if (rsi_pool_push(w, off, nd, p->err) < 0 ||
      rsi_pool_push(w, ext, nd, p->err) < 0)
    return RS_ERR_NO_MEMORY;
  int64_t fo[2 * RSI_MAX_DIMS * RSI_MAX_DIMS], fe[2 * RSI_MAX_DIMS * RSI_MAX_DIMS];
  for (int64_t c = 0; c < ncand && w->n > 0; c++) {
    const group *g = &p->sgroups[p->cands[c]];
    int64_t left = w->n / (2 * nd);
    for (int64_t r = 0; r < left; r++) {
      /* the first `left` boxes are the ones to cut; cuts append */
      int64_t rb[2 * RSI_MAX_DIMS]; /* a copy: pushes may move the pool */
      memcpy(rb, w->v + r * 2 * nd, (size_t)(2 * nd) * sizeof *rb);
      if (!rsi_box_intersect(nd, rb, rb + nd, g->off, g->ext, po, pe)) {
        if (rsi_pool_push(w, rb, 2 * nd, p->err) < 0) return RS_ERR_NO_MEMORY;
        continue;
      }
      RSI_TRY(deliver_bounded(p, po, pe, g, domain, nneed));
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

/* Serve the destination groups of one domain, entries [e0, e1). */
static rs_status serve_domain(planner *p, const key_value *order, int64_t e0,
                              int64_t e1) {
  int nd = p->ndim;
  int domain = p->entries[e0].domain;
  bool overlap = false;
  if (!p->dst_disjoint) {
    const domain_groups dg = {p, e0};
    int64_t a, b;
    RSI_TRY(rsi_box_tree_build(&p->dtree, nd, e1 - e0, domain_group_box, &dg,
                               p->err));
    overlap = !rsi_box_tree_disjoint(&p->dtree, &a, &b);
  }
  if (!overlap) { /* each group is its own fragment */
    for (int64_t i = e0; i < e1; i++) {
      const domain_entry *e = &p->entries[i];
      const group *g = &p->dgroups[e->group];
      int64_t count = 0;
      RSI_TRY(reserve_needers(p, e->n));
      add_needers(p, e, &count);
      RSI_TRY(serve_fragment(p, order, g->off, g->ext, domain, count));
    }
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
  RSI_TRY(make_groups(p, &p->plan->side[RS_SIDE_DST], dst_ids, ndst, p->dkeys,
                      p->dgroups, &p->ndg));
  if (p->ndg == 0) return RS_OK;
  if (p->nsg == 0) return not_covered(p, p->dgroups[0].off);

  RSI_TRY(groups_disjoint(p, &p->dtree, p->dgroups, p->ndg, &p->dst_disjoint));
  RSI_TRY(index_sources(p, order));

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
  qsort(p->entries, (size_t)p->nentries, sizeof *p->entries, cmp_entry);
  for (int64_t e0 = 0; e0 < p->nentries;) {
    int64_t e1 = e0 + 1;
    while (e1 < p->nentries && p->entries[e1].domain == p->entries[e0].domain)
      e1++;
    RSI_TRY(serve_domain(p, order, e0, e1));
    e0 = e1;
  }
  return RS_OK;
}

/* ---- the plan ------------------------------------------------------------ */

static rs_status copy_side(rs_plan *plan, rsi_side *side, const rs_layout *l,
                           rsi_err *err) {
  side->nshards = l->nshards;
  side->shards = malloc((size_t)(l->nshards ? l->nshards : 1) * sizeof *side->shards);
  side->rank_first = calloc((size_t)plan->world_size + 1, sizeof *side->rank_first);
  if (!side->shards || !side->rank_first) return RSI_NOMEM(err);
  if (l->nshards)
    memcpy(side->shards, l->shards, (size_t)l->nshards * sizeof *l->shards);
  if (rsi_pool_push(&side->pool, l->pool.v, l->pool.n, err) < 0)
    return RS_ERR_NO_MEMORY;
  /* buffers 0..max of every rank */
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
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
    struct rsi_binding *b = &side->buffers[side->rank_first[s->rank] + s->buffer];
    if (s->byte_end > b->need) b->need = s->byte_end;
  }
  return RS_OK;
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
    if (a->dtype != b->dtype)
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "tensor '%s' is %s in the source and %s in the "
                      "destination: a dtype change is not supported",
                      a->name, rsi_dtype_name(a->dtype),
                      rsi_dtype_name(b->dtype));
  }
  for (int u = 0; u < dst->ntensors; u++)
    if (rsi_layout_find(src, dst->tensors[u].name) < 0)
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
  for (int64_t i = 0; i < l->nshards; i++)
    first[tensor_map[l->shards[i].tensor] + 1]++;
  for (int t = 0; t < ntensors; t++) first[t + 1] += first[t];
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

static void fingerprint(rs_plan *plan) {
  const uint64_t basis = RSI_FNV1A64_BASIS;
  uint64_t h = basis;
  for (int t = 0; t < plan->ntensors; t++) {
    const rsi_tensor *x = &plan->tensors[t];
    h = rsi_fnv1a64_update(h, x->name, strlen(x->name) + 1);
    h = rsi_fnv1a64_update(h, &x->dtype, sizeof x->dtype);
    h = rsi_fnv1a64_update(h, x->shape, (size_t)x->ndim * sizeof *x->shape);
  }
  plan->section_hash[HASH_TENSORS] = h;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    h = basis;
    for (int64_t i = 0; i < side->nshards; i++) {
      const rsi_shard *sh = &side->shards[i];
      int32_t head[3] = {sh->tensor, sh->rank, sh->buffer};
      h = rsi_fnv1a64_update(h, head, sizeof head);
      h = rsi_fnv1a64_update(h, &sh->byte_offset, sizeof sh->byte_offset);
    }
    plan->section_hash[s == RS_SIDE_SRC ? HASH_SRC : HASH_DST] =
        rsi_fnv1a64_update(h, side->pool.v, (size_t)side->pool.n * sizeof *side->pool.v);
  }
  h = rsi_fnv1a64_update(basis, &plan->world_size, sizeof plan->world_size);
  h = rsi_fnv1a64_update(h, plan->domain_of, (size_t)plan->world_size * sizeof *plan->domain_of);
  h = rsi_fnv1a64_update(h, &plan->staging_bytes, sizeof plan->staging_bytes);
  plan->section_hash[HASH_TOPOLOGY] =
      rsi_fnv1a64_update(h, &plan->integrity, sizeof plan->integrity);
  plan->fingerprint = rsi_fnv1a64_update(basis, plan->section_hash, sizeof plan->section_hash);
}

void rsi_plan_destroy(rs_plan *plan) {
  if (!plan) return;
  for (int t = 0; t < plan->ntensors; t++) free(plan->tensors[t].name);
  free(plan->tensors);
  for (int s = 0; s < 2; s++) {
    free(plan->side[s].shards);
    rsi_pool_free(&plan->side[s].pool);
    free(plan->side[s].rank_first);
    free(plan->side[s].buffers);
  }
  rsi_pool_free(&plan->boxes);
  free(plan->moves);
  free(plan->relays);
  free(plan->msgs);
  free(plan->relay_bytes);
  free(plan->peers);
  rsi_exec_release(plan);
  free(plan->stats);
  free(plan->domain_of);
  rsi_context_unref(plan->ctx);
  free(plan);
}

static void planner_free(planner *p) {
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
  free(p->send_load);
  free(p->send_inter_load);
  free(p->recv_inter_load);
  free(p->unit_end);
  free(p->unit_after);
  free(p->unit_depth);
  free(p->slots);
  free(p->holders);
  rsi_pool_free(&p->keys_pool);
  rsi_box_tree_free(&p->stree);
  rsi_box_tree_free(&p->dtree);
  rsi_box_tree_free(&p->ntree);
  free(p->near);
  free(p->key_rank);
}

/* The buffers some move reads or writes: only those must be bound (a
 * replica the plan does not read from needs no memory). */
static void mark_used(rs_plan *plan, int kind, int32_t index) {
  if (kind == RSI_EP_RELAY) return;
  rsi_side *side = &plan->side[kind == RSI_EP_SRC ? RS_SIDE_SRC : RS_SIDE_DST];
  const rsi_shard *s = &side->shards[index];
  side->buffers[side->rank_first[s->rank] + s->buffer].used = true;
}

static void mark_used_buffers(rs_plan *plan) {
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    mark_used(plan, m->src_kind, m->src_index);
    mark_used(plan, m->dst_kind, m->dst_index);
  }
}

static rs_status build(rs_plan *plan, const rs_layout *src,
                       const rs_layout *dst, planner *p) {
  rsi_err *err = p->err;
  rs_context *ctx = src->ctx;
  plan->world_size = ctx->world_size;
  plan->staging_bytes = ctx->staging_bytes;
  plan->integrity = ctx->integrity != 0;
  plan->round_capacity = ctx->staging_bytes / 2; /* two rounds in flight */
  plan->domain_of = malloc((size_t)ctx->world_size * sizeof *plan->domain_of);
  if (!plan->domain_of) return RSI_NOMEM(err);
  memcpy(plan->domain_of, ctx->domain_of,
         (size_t)ctx->world_size * sizeof *plan->domain_of);

  /* Tensors in source order; destination shards renumbered to match. */
  plan->tensors = calloc((size_t)(src->ntensors ? src->ntensors : 1), sizeof *plan->tensors);
  int *dst_map = malloc((size_t)(dst->ntensors ? dst->ntensors : 1) * sizeof *dst_map);
  int *src_map = malloc((size_t)(src->ntensors ? src->ntensors : 1) * sizeof *src_map);
  if (!plan->tensors || !dst_map || !src_map) {
    free(dst_map);
    free(src_map);
    return RSI_NOMEM(err);
  }
  for (int t = 0; t < src->ntensors; t++) {
    plan->tensors[t] = src->tensors[t];
    plan->tensors[t].name = strdup(src->tensors[t].name);
    plan->ntensors = t + 1;
    if (!plan->tensors[t].name) {
      free(dst_map);
      free(src_map);
      return RSI_NOMEM(err);
    }
    src_map[t] = t;
    dst_map[rsi_layout_find(dst, src->tensors[t].name)] = t;
  }
  rs_status st = copy_side(plan, &plan->side[RS_SIDE_SRC], src, err);
  if (st == RS_OK) st = copy_side(plan, &plan->side[RS_SIDE_DST], dst, err);
  for (int64_t i = 0; st == RS_OK && i < plan->side[RS_SIDE_DST].nshards; i++)
    plan->side[RS_SIDE_DST].shards[i].tensor =
        dst_map[plan->side[RS_SIDE_DST].shards[i].tensor];
  int64_t *sfirst = NULL, *sids = NULL, *dfirst = NULL, *dids = NULL;
  if (st == RS_OK)
    st = shards_by_tensor(src, src_map, src->ntensors, &sfirst, &sids, err);
  if (st == RS_OK)
    st = shards_by_tensor(dst, dst_map, src->ntensors, &dfirst, &dids, err);
  free(dst_map);
  free(src_map);
  if (st == RS_OK) st = check_plan_size(p, dfirst, dids);

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
    p->send_load = calloc((size_t)plan->world_size, sizeof *p->send_load);
    p->recv_inter_load = calloc((size_t)plan->world_size, sizeof *p->recv_inter_load);
    p->send_inter_load = calloc((size_t)plan->world_size, sizeof *p->send_inter_load);
    if (!p->skeys || !p->dkeys || !p->sgroups || !p->dgroups || !p->entries ||
        !p->cands || !p->key_rank || !order || !p->send_load ||
        !p->recv_inter_load || !p->send_inter_load)
      st = RSI_NOMEM(err);
  }
  for (int t = 0; st == RS_OK && t < plan->ntensors; t++) {
    p->tensor = t;
    p->ndim = plan->tensors[t].ndim;
    p->esize = plan->tensors[t].esize;
    st = plan_tensor(p, sids + sfirst[t], sfirst[t + 1] - sfirst[t],
                     dids + dfirst[t], dfirst[t + 1] - dfirst[t], order);
  }
  free(order);
  free(sfirst);
  free(sids);
  free(dfirst);
  free(dids);
  if (st == RS_OK)
    st = rsi_plan_schedule(plan, p->unit_end, p->unit_after, p->unit_depth,
                           p->nunits, err);
  if (st == RS_OK) mark_used_buffers(plan);
  if (st == RS_OK) fingerprint(plan);
  return st;
}

rs_status rsi_plan_create(const rs_layout *src, const rs_layout *dst,
                          rs_plan **out) {
  rs_context *ctx = src->ctx;
  rsi_err *err = ctx->err;
  if (dst->ctx != ctx)
    return RSI_FAIL(err, RS_ERR_WRONG_CONTEXT,
                    "the source and destination layouts come from different "
                    "contexts");
  RSI_TRY(check_compatible(src, dst, err));
  RSI_TRY(rsi_layout_check_writes(dst, "destination", err));
  rs_plan *plan = calloc(1, sizeof *plan);
  if (!plan) return RSI_NOMEM(err);
  rsi_context_ref(ctx);
  plan->ctx = ctx;
  planner p = {0};
  p.plan = plan;
  p.err = err;
  p.after = -1;
  rs_status st = build(plan, src, dst, &p);
  planner_free(&p);
  if (st != RS_OK) {
    rsi_plan_destroy(plan);
    return st;
  }
  *out = plan;
  return RS_OK;
}
