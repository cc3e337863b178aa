/* SPDX-License-Identifier: Apache-2.0 */
/* Plans: the moves that turn a source layout into a destination layout.
 *
 * A move copies one box of one tensor from a source endpoint to a
 * destination endpoint. Endpoints are a source shard, a destination shard
 * (a relay rank forwarding what it received), or a relay slot in a rank's
 * staging memory. Moves are grouped into messages (same round, stage,
 * sender and receiver); stage 0 carries direct and first-hop moves, stage 1
 * forwards inside a domain what crossed into it during stage 0. */
#ifndef RS_CORE_PLAN_H
#define RS_CORE_PLAN_H

#include <stdint.h>

#include "layout/layout.h"

enum { RSI_EP_SRC = 0, RSI_EP_DST = 1, RSI_EP_RELAY = 2 };

/* A plan holds tens of millions of moves at thousands of ranks: each is
 * 48 bytes, its small fields packed into bits (the kinds are RSI_EP_*, the
 * route an rs_route, stage and forwarded 0 or 1). */
typedef struct rsi_move {
  int64_t box; /* plan->boxes: offset[ndim], extent[ndim] */
  int64_t bytes;
  int32_t tensor;
  int32_t src_rank, dst_rank;
  int32_t src_index, dst_index; /* shard index, or relay slot index */
  int32_t round;
  uint8_t src_kind : 2, dst_kind : 2, stage : 1, forwarded : 1;
  /* The move carries block scales computed from values: its tensor is a
   * scale tensor and its source end is the values' memory (a source shard
   * or relay slot of plan->conv[tensor].values, holding every element of
   * the blocks of its box, in src_dtype). The scales are computed where
   * the values are read (pack, or the local copy). */
  uint8_t computes_scales : 1;
  uint8_t route : 2;
  /* Its memory is one contiguous run at the source end (bit 0), at the
   * destination end (bit 1): found once, when the move is made. Never set
   * for a move that converts: those always go through staging. */
  uint8_t contiguous : 2;
  /* Element types (rs_dtype) at the source end, on the wire (in the
   * message; bytes counts these) and at the destination end. They differ
   * only where the plan changes dtype: the sender converts when packing
   * (src_dtype -> wire_dtype), the receiver when unpacking (wire_dtype ->
   * dst_dtype), a local move in its copy (src_dtype -> dst_dtype); one of
   * the two steps of a move between ranks is always the identity. */
  uint8_t src_dtype, wire_dtype, dst_dtype;
} rsi_move;
_Static_assert(sizeof(rsi_move) <= 48, "a move is 48 bytes (see above)");

/* How a tensor changes dtype on the way (plan->conv[t]). */
typedef struct rsi_conversion {
  rs_dtype src_dtype, dst_dtype; /* the same: no change */
  int32_t scales; /* block-scaled values: their scale tensor, else -1 */
  int32_t values; /* a scale tensor: its values tensor, else -1 */
  int64_t b0, b1; /* block rows and columns over the last two dims */
  bool ue8m0;     /* power-of-two scales (RS_SCALE_UE8M0) */
} rsi_conversion;

typedef struct rsi_relay {
  int32_t rank, round;
  int64_t box; /* plan->boxes: offset[ndim], extent[ndim]; dense in staging */
  int64_t staging_offset;
  int64_t bytes; /* its size: the box's elements of dtype */
  uint8_t dtype; /* the rs_dtype it holds */
} rsi_relay;

typedef struct rsi_message {
  int32_t round, stage, src_rank, dst_rank;
  int64_t first_move, nmoves, bytes;
} rsi_message;

typedef struct rsi_rank_stats {
  int64_t sent[2], recv[2]; /* [0] inside the domain, [1] across domains */
  int64_t local, msgs_sent, msgs_recv, staging, moves;
  int64_t relay_copied; /* copied out of relay slots, not in local */
  int64_t packed, unpacked; /* staged as they are (staging.h), bytes */
  int64_t converted[2]; /* elements: [0] before sending, [1] after arrival
                           or in a local copy */
} rsi_rank_stats;

/* One side's shards. While rs_plan_create runs they are its layout's own
 * arrays (borrowed: the layout cannot change meanwhile), so that the
 * planning's peak holds them once. Once the plan is made it copies them,
 * with the destination's tensors numbered as the plan's, where it keeps
 * boxes or a rank's part (which then keeps that rank's shards only); a
 * whole plan without boxes, which cannot run, keeps none. */
typedef struct rsi_side {
  rsi_shard *shards;
  int64_t nshards;
  rsi_pool pool;
  bool borrowed; /* shards and pool are the layout's: never freed here */
  /* buffers[rank_first[r] .. rank_first[r+1]) are rank r's buffers 0..n-1:
   * bytes its shards need, and what the caller bound; only for the ranks
   * the plan's context drives (none for another rank). */
  int64_t *rank_first;
  struct rsi_binding {
    int64_t need; /* 0: no shard uses it */
    void *ptr;
    size_t bytes;
    int device; /* CUDA device of device memory, else -1 */
    bool used;  /* a move reads or writes it: an execution needs it bound */
  } * buffers;
} rsi_side;

struct rs_plan {
  rs_context *ctx;
  int world_size;
  int *domain_of;
  int ntensors;
  /* tensors[t] is the source's declaration (a scale tensor, which only the
   * destination declares, the destination's); conv[t] its dtype change */
  rsi_tensor *tensors;
  rsi_conversion *conv;
  rsi_side side[2]; /* RS_SIDE_SRC, RS_SIDE_DST */
  rsi_pool boxes;
  rsi_move *moves;
  int64_t nmoves, cap_moves;
  rsi_relay *relays;
  int64_t nrelays, cap_relays;
  rsi_message *msgs;
  int64_t nmsgs;
  int nrounds;
  int64_t *relay_bytes; /* per rank: relay staging one round needs */
  rsi_rank_stats *stats;
  int64_t staging_bytes, round_capacity;
  /* -1: the whole plan. Else the rank whose part this is (part.c):
   * moves, msgs and relays hold only what that rank sends, receives,
   * forwards and copies; stats, relay_bytes and nrounds are the whole
   * plan's. */
  int part;
  /* A domain's part (rsi_plan_create_domain): only the moves that land
   * in domain `part_domain` (an id of domain_of), scheduled on their own;
   * for inspection and the property tests, never executed. */
  bool domain_part;
  int part_domain;
  /* false (RS_PARAM_PLAN_BOXES = 0): no move has a box (every box is -1);
   * the plan is for inspection, never executed */
  bool keeps_boxes;
  bool integrity; /* checksum every message (RS_PARAM_INTEGRITY) */
  /* RS_ROUNDS_BY_DOMAIN_PAIR: a move's and a message's round is a label
   * (rounds.c), sparse; round_labels holds the whole plan's nrounds
   * labels in increasing order, and what the ABI calls a move's round is
   * its label's place there (rsi_plan_public_round). */
  bool rounds_by_pair;
  int32_t *round_labels;
  uint64_t fingerprint;
  /* Hashes of what the plan was made from: tensors, source shards,
   * destination shards, topology and settings. */
  uint64_t section_hash[4];
  /* The executor's state of this plan (exec/exec_state.h), made at its
   * first execution and freed by rsi_exec_release, which the capi calls
   * before rsi_plan_destroy; never read under plan/. */
  struct rsi_exec *exec;
};

rs_status rsi_plan_create(const rs_layout *src, const rs_layout *dst,
                          rs_plan **out);

/* The memory, in bytes, a plan may take while it is made and scheduled
 * (core/plan/plan_size.c): 100 x 2^26. Tests lower it to reach
 * it with small layouts; nothing else writes it. */
extern int64_t rsi_plan_bytes;
void rsi_plan_destroy(rs_plan *plan);

/* What lands in one destination domain (its ranks' domain_of id
 * `domain`): the crossings into it and their forwards and copies inside
 * it, move for move those of the whole plan, made by the same rules
 * while every other domain is only walked for what its choices leave to
 * later ones (core/plan/serve.c, begin_shadow; docs/PLANNING.md, "A domain's
 * part"). Its rounds are its own, and a forward from another domain is
 * not ordered after the crossing it relays, so the plan is refused by
 * execution. RS_ERR_INVALID_ARGUMENT where no rank is in `domain`; else
 * as rsi_plan_create. Internal, not in the ABI. */
rs_status rsi_plan_create_domain(const rs_layout *src, const rs_layout *dst,
                                 int domain, rs_plan **out);

/* The planner's scheduling units, n of them: end[u] is one past the last
 * move of unit u (each unit has at least one); unit u must run in a later
 * round than unit after[u] (-1: none), whose bytes it relays; depth[u] is
 * how many relays precede it. */
typedef struct rsi_units {
  int64_t *end, *after;
  int32_t *depth;
  int64_t n;
} rsi_units;

/* Number the domains 0.. in the order of their ids (domain_ix[rank]), so
 * that sorting by index sorts as by id; and each rank's place among its
 * domain's ranks, in rank order (rail[rank], NULL: not wanted). False
 * when the sort's scratch could not be allocated. */
bool rsi_plan_number_domains(const rs_plan *plan, int32_t *domain_ix,
                             int32_t *rail, int32_t *ndomains);

/* rounds.c: rounds, relay slots, messages and per-rank figures. The
 * units' arrays are freed (and *units zeroed) as soon as the rounds are
 * set, success or not: they are the largest scratch left when the moves
 * are sorted into messages. */
rs_status rsi_plan_schedule(rs_plan *plan, rsi_units *units, rsi_err *err);

/* Messages, per-rank figures (added to plan->stats) and staging of moves
 * whose rounds and relay slots are set, in any order of messages: what
 * rsi_plan_schedule does once the rounds are. */
rs_status rsi_plan_regroup(rs_plan *plan, rsi_err *err);

/* Sort v[0..n) and drop repeats; the number left. */
int64_t rsi_sort_unique_int32(int32_t *v, int64_t n);

/* part.c: keep only rank `rank`'s part of a scheduled plan. On
 * failure (memory) the plan is to be destroyed. */
rs_status rsi_plan_keep_part(rs_plan *plan, int rank, rsi_err *err);

/* RS_OK if the plan keeps its moves' boxes; else RS_ERR_UNSUPPORTED,
 * saying it was made with RS_PARAM_PLAN_BOXES = 0, for the calls that
 * need the boxes (rs_plan_move_box, execution). */
rs_status rsi_plan_require_boxes(const rs_plan *plan, rsi_err *err);

/* json.c */
rs_status rsi_plan_to_json(const rs_plan *plan, char **json, size_t *len,
                           rsi_err *err);

/* The round the ABI and rs_plan_to_json give for round (or label) r:
 * 0 .. nrounds - 1 in the order the plan runs them. */
static inline int32_t rsi_plan_public_round(const rs_plan *p, int32_t r) {
  if (!p->rounds_by_pair) return r;
  int32_t lo = 0, hi = p->nrounds; /* the first label >= r */
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (p->round_labels[mid] < r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static inline const int64_t *rsi_move_offset(const rs_plan *p,
                                             const rsi_move *m) {
  return p->boxes.v + m->box;
}
static inline const int64_t *rsi_move_extent(const rs_plan *p,
                                             const rsi_move *m) {
  return p->boxes.v + m->box + p->tensors[m->tensor].ndim;
}

#endif
