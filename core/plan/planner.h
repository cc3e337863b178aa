/* SPDX-License-Identifier: Apache-2.0 */
/* The planner's state and the functions its files share (the files of plan/).
 *
 * The planner: intersections, replica choice, domain grouping.
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
 * A piece that k domains need from outside crosses into ceil(k /
 * CHAIN_DOMAINS) of them from source replicas (the least loaded) and is
 * forwarded down from there, domain to domain, one round a link, by
 * ranks that hold it whole in destination memory (docs/PLANNING.md, "The
 * chain rule"). */
#ifndef RS_CORE_PLANNER_H
#define RS_CORE_PLANNER_H

#include "base/dtype.h"
#include "layout/box_tree.h"
#include "plan/plan.h"
#include "plan/replica_sets.h"

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

/* Where the parts a cut or a carve makes go: the needers p->needers[0 ..
 * nneed) of a domain (and, to deliver a piece, its source group g; to look
 * sources up, their order). */
typedef struct target {
  const group *g;
  const key_value *order;
  int domain;
  int64_t nneed;
} target;

/* The groups of one domain's entries, from entry e0 on, as boxes. */
typedef struct domain_groups {
  const planner *p;
  int64_t e0;
} domain_groups;

/* Called with each part a carve or a cut leaves (deliver.c). */
typedef rs_status (*carve_fn)(planner *p, const group *g, const int64_t *off,
                              const int64_t *ext, void *ctx);
typedef rs_status (*box_fn)(planner *p, const int64_t *off, const int64_t *ext,
                            void *ctx);

/* What the plan held before an entry of another domain than the one a
 * domain's part keeps was served. */
typedef struct shadow_mark {
  int64_t moves, relays, boxes, units, spent;
} shadow_mark;

/* plan_size.c */

rs_status rsi_planner_too_many_moves(const planner *p, const char *why);

/* Make room for `need` items of `size` bytes in one of the planner's
 * arrays that grow with the pieces: rsi_grow's doubling, as far as the
 * budget allows, charged to p->held. */
rs_status rsi_planner_grow_held(planner *p, void **items, int64_t *cap,
                           int64_t need, size_t size, int64_t first);

/* Room for `more` values in a pool that grows with the pieces. */
rs_status rsi_planner_reserve_held(planner *p, rsi_pool *pool, int64_t more);

/* Refuse, before planning, a plan that cannot fit the budget: every
 * destination shard receives at least one move per largest piece of its
 * bytes. A domain's part holds the moves into its domain only. */
rs_status rsi_planner_check_plan_size(planner *p, const int64_t *dfirst,
                                 const int64_t *dids);

/* Refuse, before any of its moves is made, a tensor whose destination
 * shards (in a domain's part, those of its domain) need more moves than
 * the budget has left: at least one per piece of each source group they
 * meet whose elements no other group holds (moves_into_at_least; where
 * every group is disjoint from the others, that is all of them). A tensor
 * with block scales is bounded by check_plan_size alone. */
rs_status rsi_planner_check_tensor_size(planner *p);

/* moves.c */

rs_status rsi_planner_push_move(planner *p, const int64_t *off,
                                const int64_t *ext, int src_kind,
                                int64_t src_index, int src_rank, int dst_kind,
                                int64_t dst_index, int dst_rank, int stage,
                                int forwarded);

rs_status rsi_planner_end_unit(planner *p);

/* crossing.c */

rs_status rsi_planner_clear_pieces(planner *p);

/* Room for one more slot: the table grows and is rehashed at half full. */
rs_status rsi_planner_reserve_slot(planner *p);

/* How many domains need a piece of source group g from outside: the
 * marked ones (p->ndomains), but those where g has a replica. */
int32_t rsi_planner_domains_needing(const planner *p, const group *g);

/* The slot of piece (g, box), made when it first crosses, with room for
 * the domains it will cross into. */
rs_status rsi_planner_cross_slot(planner *p, const group *g, const int64_t *off,
                            const int64_t *ext, piece_slot **out);

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
                       int entry, int32_t *depth, holder *from);

/* The j-th domain piece s crossed into got it in `unit`, `depth` domains
 * from a replica: its needers that now hold it whole (of p->near[0 ..
 * nnear)) may forward it. */
rs_status rsi_planner_link_holders(planner *p, const piece_slot *s, int32_t j,
                              const int64_t *off, const int64_t *ext,
                              int64_t nnear, int64_t unit, int32_t depth);

rs_status rsi_planner_push_relay(planner *p, int rank, const int64_t *off,
                            const int64_t *ext, rs_dtype dtype,
                            int64_t *index);

/* The replicas of g inside `domain`: p->skeys[*lo .. *hi) (a group's
 * holders are sorted by domain, then rank: cmp_key), found by bisection,
 * so that asking costs O(log replicas) however many domains hold g. */
void rsi_planner_replicas_in(const planner *p, const group *g, int domain,
                        int64_t *lo, int64_t *hi);

/* The replica of g inside `domain` that has sent the fewest bytes inside
 * its domain so far, or NULL. */
const sort_key *rsi_planner_least_loaded_inside(const planner *p,
                                                const group *g, int domain);

/* The replica of g a piece crosses from when no domain forwards it: the
 * one that has sent the fewest bytes across for g's replica set (*set,
 * and *at its place there: charge it with rsi_replica_sets_add). */
rs_status rsi_planner_cross_replica(planner *p, const group *g,
                               const sort_key **src, int64_t *set,
                               int64_t *at);

/* deliver.c */

/* Carve the boxes in w (offset, extent each) by source groups ids[0..n),
 * in that order: each group takes what the earlier ones left of it (`take`
 * is called with each such part); what no group covers is left in w. With
 * whole_blocks, a group offers only the whole scale blocks it holds. */
rs_status rsi_planner_carve_by_groups(planner *p, rsi_pool *w,
                                      const int64_t *ids, int64_t n,
                                      bool whole_blocks, carve_fn take,
                                      void *ctx);

/* Make room for, and index, the fragment's nneed needers. */
rs_status rsi_planner_index_needers(planner *p, int64_t nneed);

/* The needers that box (off, ext) meets, ascending, into p->near. */
int64_t rsi_planner_near_needers(planner *p, const int64_t *off,
                                 const int64_t *ext, int64_t nneed);

/* What a crossing of values without block scales sends from a replica,
 * whatever the entry it lands in: the piece in the wire dtype (into a
 * relay slot where `count` > 1 needers meet it and none wants all of it,
 * !whole), or where it meets one needer only, its part there. */
int64_t rsi_planner_crossing_bytes(const planner *p, const int64_t *off,
                              const int64_t *ext, int64_t count,
                              const needer *entry, bool whole);

/* A crossing of a piece of group g into a shadow's domain (begin_shadow),
 * `place`-th of its slot, without its moves: where it comes from a
 * replica (no link upstream forwards it), the replica's set is charged
 * `bytes` (crossing_bytes), what deliver_across would have sent. *depth:
 * the domains it crossed before. Its holders are the caller's to link. */
rs_status rsi_planner_shadow_crossing(planner *p, const group *g,
                                 const piece_slot *slot, int32_t place,
                                 int64_t bytes, int32_t *depth);

/* Deliver piece (off, ext), held by every replica of source group g, to the
 * needers of one domain (their boxes meet the piece). */
rs_status rsi_planner_deliver(planner *p, const int64_t *off,
                              const int64_t *ext, const group *g, int domain,
                              int64_t nneed);

/* Cut box (off, ext) into parts of at most `limit` bytes (elements of
 * p->esize) and call `take` on each: slabs along the outermost dim that
 * can be cut, one alignment step thick above it (one element, or one
 * block of a block-scaled tensor, which is never cut). */
rs_status rsi_planner_cut_bounded(planner *p, const int64_t *off,
                             const int64_t *ext, int64_t limit, box_fn take,
                             void *ctx);

/* Cut a piece so that one unit (first hop plus forwards) fits a round.
 * One unit must fit an empty round (rounds.c charges each end at
 * most its bytes, 64-aligned): a lone needer is charged the piece once at
 * each end; a first receiver that forwards to the others is charged its
 * receive, a relay slot when it needs one, and a send per forward. Pieces
 * are kept to at most half a round even so, which packs rounds better. */
rs_status rsi_planner_deliver_bounded(planner *p, const int64_t *off,
                                 const int64_t *ext, const group *g,
                                 int domain, int64_t nneed);

/* groups.c */

int rsi_planner_cmp_key(const void *x, const void *y);

int rsi_planner_cmp_int64(const void *x, const void *y);

int rsi_planner_cmp_key_value(const void *x, const void *y);

/* Sort keys[0..n) as qsort with cmp_key would, in O(n) but for the boxes:
 * a tensor's shards have few distinct boxes (thousands of replicas of a
 * few shards), so the boxes are numbered through a hash table, only the
 * distinct ones are sorted, the keys are bucketed by box in a counting
 * sort, and each bucket is sorted by place unless it already is (shards
 * usually come in rank order). Comparing whole boxes at every step of a
 * sort of every key was 7% of planning at 4096 GPUs a side. *nbox_out:
 * the distinct boxes, their keys ending at p->sorter.start[0 .. nbox);
 * -1 where n was small enough for a plain qsort. */
rs_status rsi_planner_sort_keys(planner *p, sort_key *keys, int64_t n,
                           int32_t *nbox_out);

/* Sort one tensor's shards of a side by (box, domain, rank) and cut the
 * runs of identical boxes into groups. */
rs_status rsi_planner_make_groups(planner *p, const rsi_side *side,
                             const int64_t *shard_ids, int64_t n,
                             sort_key *keys, group *groups, int64_t *ngroups);

/* Fill tree with groups[0..n) and tell whether any two share an element. */
rs_status rsi_planner_groups_disjoint(planner *p, rsi_box_tree *tree,
                                 const group *groups, int64_t n,
                                 bool *disjoint);

/* Index the source groups in a box tree, and order them by offset in the
 * dim with the most distinct offsets (the order queries answer in). */
rs_status rsi_planner_index_sources(planner *p, key_value *order);

/* Source groups meeting box (off, ext), in index order, into p->cands. */
int64_t rsi_planner_query_sources(planner *p, const key_value *order,
                             const int64_t *off, const int64_t *ext);

rs_status rsi_planner_not_covered(planner *p, const int64_t *off);

/* Order candidate source groups p->cands[0..n) by locality (stable): those
 * a needer of the fragment holds itself, then those with a replica inside
 * the domain, then the rest. Carved in this order, a piece comes from
 * outside the domain only where no rank inside it holds any of it. */
void rsi_planner_rank_by_locality(planner *p, int domain, int64_t nneed,
                             int64_t n);

/* carve.c */

const int64_t *rsi_planner_domain_group_box(const void *ctx, int64_t i);

/* Carve the groups of entries [e0, e1) (in p->dtree, by entry - e0) into
 * disjoint fragments in p->frags. */
rs_status rsi_planner_carve_domain(planner *p, int64_t e0, int64_t e1);

/* serve.c */

/* Serve what follows as `domain`'s: in a domain's part, where `domain`
 * is another, as a shadow. A shadow keeps what its choices leave for
 * later domains (the pieces that crossed into it and its holders that may
 * forward them, the replica sets' charges, its own domain's loads) and
 * drops what it made (end_shadow), so the part's own choices are the
 * whole plan's. */
void rsi_planner_begin_shadow(planner *p, int domain, shadow_mark *m);

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
rs_status rsi_planner_replay_entry(planner *p, int64_t e);

rs_status rsi_planner_plan_tensor(planner *p, const int64_t *src_ids,
                                  int64_t ns, const int64_t *dst_ids,
                                  int64_t ndst, key_value *order);

/* sides.c */

/* The side of layout l: its shards and geometry borrowed (rsi_side), and
 * the table of the buffers of every rank this process drives. */
rs_status rsi_planner_borrow_side(rs_plan *plan, rsi_side *side,
                             const rs_layout *l, rsi_err *err);

/* Shard ids of each tensor, tensor by tensor (counting sort, stable). */
rs_status rsi_planner_shards_by_tensor(const rs_layout *l,
                                       const int *tensor_map, int ntensors,
                                       int64_t **first_out, int64_t **ids_out,
                                       rsi_err *err);

/* The sides made the plan's own once it is made (rsi_side): copied, the
 * destination's tensors numbered by dst_map, where the plan keeps boxes
 * or is to keep a rank's part (part.c cuts the copy); else, a plan
 * that cannot run (without boxes, or a domain's part), emptied. */
rs_status rsi_planner_own_sides(rs_plan *plan, bool keep, const int *dst_map,
                           rsi_err *err);

/* compat.c */

rs_status rsi_planner_check_compatible(const rs_layout *src,
                                       const rs_layout *dst, rsi_err *err);

/* The plan's fingerprint, over its sides while they are borrowed: the
 * destination's shards hash the plan's number of their tensor,
 * dst_map[tensor]. */
void rsi_planner_fingerprint(rs_plan *plan, const int *dst_map);

/* blocks.c */

/* The scale shards of the tensor being planned, by rank (p->scale_ids). */
rs_status rsi_planner_scale_shards(planner *p);

/* Every block-scaled tensor's destination, rank by rank. */
rs_status rsi_planner_check_blocks(planner *p, const int64_t *dfirst,
                              const int64_t *dids);

/* Small helpers the planner's files share, inline. */

/* The block size of dim d of a block-scaled tensor of ndim dims. */
static inline int64_t rsi_planner_block_size(const rsi_conversion *cv, int ndim,
                                             int d) {
  if (d == ndim - 1) return cv->b1;
  return d == ndim - 2 ? cv->b0 : 1;
}

/* Bytes one move costs from planning to the end of scheduling: the move
 * and its box in plan->boxes; its scheduling unit (end, after, depth: at
 * most one a move); and the larger of the scheduler's scratch per unit
 * or move (rounds.c: a sort key, the radix sort's copy of it and the
 * order; then the order and the move's sorted copy) and its message (at
 * most one a move), which is made once the scratch is freed. */
static inline int64_t rsi_planner_move_cost(int ndim) {
  int64_t sorting = 2 * (int64_t)sizeof(rsi_keyed) + (int64_t)sizeof(int64_t);
  int64_t gathering = (int64_t)sizeof(int64_t) + (int64_t)sizeof(rsi_move);
  int64_t scratch = sorting > gathering ? sorting : gathering;
  int64_t msg = (int64_t)sizeof(rsi_message);
  return (int64_t)sizeof(rsi_move) + 2 * ndim * (int64_t)sizeof(int64_t) +
         2 * (int64_t)sizeof(int64_t) + (int64_t)sizeof(int32_t) +
         (scratch > msg ? scratch : msg);
}

/* A relay slot and its box. */
static inline int64_t rsi_planner_relay_cost(int ndim) {
  return (int64_t)sizeof(rsi_relay) + 2 * ndim * (int64_t)sizeof(int64_t);
}

static inline int64_t rsi_planner_bytes_left(const planner *p) {
  return p->budget - p->spent - p->held;
}

/* How many more moves of the current tensor the plan may hold. */
static inline int64_t rsi_planner_moves_left(const planner *p) {
  return rsi_planner_bytes_left(p) / rsi_planner_move_cost(p->ndim);
}

/* The depth of the link of the domain the j-th domain piece s crosses
 * into gets it from, or -1 where it comes from a source replica
 * (cross_from). */
static inline int32_t rsi_planner_chain_up(const planner *p,
                                           const piece_slot *s, int32_t j) {
  int64_t up = (int64_t)j - s->heads;
  if (up < 0 || up >= s->k) return -1;
  int32_t d = p->link_depth[s->link + up];
  return d + 1 >= CHAIN_DOMAINS ? -1 : d;
}

/* Rank's holder of source group g (the group's box is in its own source
 * memory), or NULL. */
static inline const sort_key *rsi_planner_held_by(const planner *p,
                                                  const group *g, int rank) {
  int64_t lo, hi;
  rsi_planner_replicas_in(p, g, p->domain_ix[rank], &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    if (p->skeys[i].rank == rank) return &p->skeys[i];
  return NULL;
}

/* What travels between two ends: fp8 values are quantized by the sender
 * (the planner sends them from whole blocks only), any other change of
 * dtype happens on the side that leaves the fewer bytes on the wire. */
static inline rs_dtype rsi_planner_wire_dtype(rs_dtype from, rs_dtype to) {
  if (to == RS_DTYPE_F8_E4M3) return to;
  return rsi_dtype_size(to) <= rsi_dtype_size(from) ? to : from;
}

#endif
