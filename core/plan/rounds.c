/* SPDX-License-Identifier: Apache-2.0 */
/* Rounds, relay slots, messages and per-rank figures, in one of two ways
 * (RS_PARAM_ROUNDS): packed over the whole job (assign_rounds, below), or
 * by domain pair (assign_labels, "rounds by domain pair" further down).
 *
 * Packed: the plan's units (a direct move, or a first hop with its
 * forwards) are placed greedily into the earliest round at or after every
 * involved rank's current round where each of them still has room. Units
 * are taken in waves, not in plan order: wave w holds the bytes each sender
 * sends between w and w+1 round capacities, so every round mixes senders
 * (of all pipeline stages, say) instead of draining one tensor at a time. A
 * rank's staging per round (bytes it packs to send, bytes it receives,
 * relay slots it holds, each 64-aligned; a large move that goes straight
 * from or into contiguous memory takes none at that end) stays within
 * round_capacity, half the staging setting (a quarter by domain pair,
 * where a rank may be in two chunks of a round): the executor keeps two steps
 * in flight, each in a half of its own (staging.h), and so allocates at
 * most the setting.
 * Pieces were already cut so that one unit fits an empty round. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "layout/box.h"
#include "base/dtype.h"
#include "base/grow.h"
#include "plan/plan.h"
#include "base/radix_sort.h"
#include "plan/staging.h"

/* How many units ahead assign_rounds asks for the moves it will read (and
 * twice as many for the units' bounds). */
#define PREFETCH 16

#define ALIGN(x, a) (((x) + (a)-1) / (a) * (a))

/* A rank's use of the last WINDOW rounds it is in: a unit may still go
 * into any of them that has room, not only into the newest. 64 rather
 * than 16 halves DeepSeek-V3's rounds on NVL72 racks and cuts the calls
 * of its busiest rank by a fifth, for up to a tenth more scheduling time
 * (docs/PLANNING.md, "A call per step, priced"). */
#define WINDOW 64

/* What placing a unit reads of every rank it touches, 16 bytes a rank so
 * that all of them stay in a core's cache at tens of thousands of ranks
 * (the windows, 1 KiB a rank, live apart and are read a line at a
 * time). */
typedef struct rank_now {
  int64_t cost;  /* of the unit being placed; -1: the unit leaves it out */
  int32_t cur;   /* newest round the rank takes part in */
  int32_t relay_cur; /* newest round whose relay use is counted from 0 */
} rank_now;

typedef struct rank_rounds {
  rank_now *now;
  int64_t *used, *relay; /* WINDOW rounds a rank: see window_of */
} rank_rounds;

/* False when memory ran out (free what it got with rank_rounds_free). */
static bool rank_rounds_alloc(rank_rounds *q, int W) {
  q->now = malloc((size_t)W * sizeof *q->now);
  q->used = calloc((size_t)W * WINDOW, sizeof *q->used);
  q->relay = calloc((size_t)W * WINDOW, sizeof *q->relay);
  if (!q->now || !q->used || !q->relay) return false;
  for (int r = 0; r < W; r++) q->now[r] = (rank_now){-1, 0, 0};
  return true;
}

static void rank_rounds_free(rank_rounds *q) {
  free(q->now);
  free(q->used);
  free(q->relay);
}

/* The rank's window in `windows` (q->used or q->relay): round r at
 * [r % WINDOW]. */
static int64_t *window_of(int64_t *windows, int rank) {
  return windows + (int64_t)rank * WINDOW;
}

static int64_t used_at(const rank_rounds *q, int rank, int32_t r) {
  int32_t cur = q->now[rank].cur;
  if (r > cur) return 0;
  if (r <= cur - WINDOW) return INT64_MAX / 2; /* out of the window */
  return window_of(q->used, rank)[r % WINDOW];
}

static void advance(rank_rounds *q, int rank, int32_t r) {
  rank_now *n = &q->now[rank];
  int64_t *used = window_of(q->used, rank);
  for (int32_t k = n->cur + 1; k <= r && k <= n->cur + WINDOW; k++)
    used[k % WINDOW] = 0;
  if (r > n->cur) n->cur = r;
}

/* The rank's relay use in round r <= its newest round. The relay window
 * is cleared only when it is read, not at every advance: a round's count
 * starts from 0 once the rank took part in it, as its use does. */
static int64_t *relay_at(rank_rounds *q, int rank, int32_t r) {
  rank_now *n = &q->now[rank];
  int64_t *relay = window_of(q->relay, rank);
  for (int32_t k = n->relay_cur + 1; k <= n->cur && k <= n->relay_cur + WINDOW;
       k++)
    relay[k % WINDOW] = 0;
  n->relay_cur = n->cur;
  return &relay[r % WINDOW];
}

/* Charge a rank `staged` bytes of staging and `slot` bytes of relay slot,
 * each 64-aligned as staging.h lays them out. */
static void add_cost(rank_rounds *q, int32_t *touched, int *nt, int rank,
                     int64_t staged, int64_t slot) {
  rank_now *n = &q->now[rank];
  if (n->cost < 0) {
    n->cost = 0;
    touched[(*nt)++] = rank;
  }
  n->cost += ALIGN(staged, 64) + ALIGN(slot, 64);
}

/* The staging move m takes at one end (src: the sender's): none where it
 * is a segment of its own (RSI_DIRECT_BYTES or more) whose memory at that
 * end is one contiguous run, for it travels straight from or into that
 * memory (staging.h); else its bytes, an upper bound on its share of the
 * segment it is packed into. */
static int64_t staged_bytes(const rsi_move *m, bool src) {
  bool straight = m->bytes >= RSI_DIRECT_BYTES &&
                  (m->contiguous >> (src ? 0 : 1)) & 1;
  return straight ? 0 : m->bytes;
}

/* The earliest round from `lo` on where every touched rank has room for
 * its cost. */
static int32_t first_fit(const rank_rounds *q, const int32_t *touched, int nt,
                         int64_t cap, int32_t lo) {
  int32_t hi = lo;
  for (int i = 0; i < nt; i++) {
    int32_t cur = q->now[touched[i]].cur;
    if (cur - WINDOW + 1 > lo) lo = cur - WINDOW + 1;
    if (cur + 1 > hi) hi = cur + 1;
  }
  if (hi < lo) hi = lo;
  for (int32_t r = lo; r < hi; r++) {
    bool fits = true;
    for (int i = 0; i < nt && fits; i++)
      fits = used_at(q, touched[i], r) + q->now[touched[i]].cost <= cap;
    if (fits) return r;
  }
  return hi; /* a round none of them is in yet */
}

/* The scratch of scheduling, one block for every step, so that its pages
 * are touched once (a fresh page costs more here than the sorts
 * themselves): first the units' keys (and their sort's scratch, where a
 * unit's key and index do not fit in one word: see wave_order), then the
 * order of the units and their rounds; then the moves' keys and scratch,
 * the order of the moves in the last eighth of the block, and the sorted
 * moves from its head (see make_messages: they only ever overwrite the
 * order where it was read already). 48 bytes a move. */
#define BLOCK_PER_MOVE (2 * sizeof(rsi_keyed))
_Static_assert(sizeof(rsi_move) <= BLOCK_PER_MOVE &&
                   BLOCK_PER_MOVE - sizeof(int64_t) >= sizeof(rsi_keyed),
               "the sorted moves and the order share the block");

typedef struct sched_block {
  char *v;
} sched_block;

static rs_status block_alloc(sched_block *b, int64_t nmoves, int64_t nunits,
                             rsi_err *err) {
  int64_t n = nmoves > nunits ? nmoves : nunits; /* a unit's keys: 48 B */
  b->v = malloc((size_t)n * BLOCK_PER_MOVE | 1);
  return b->v ? RS_OK : RSI_NOMEM(err);
}

/* The order units are scheduled in: by wave, relay depth, sender, plan
 * order. A relaying unit is in no earlier wave than the unit it follows,
 * and deeper, so it is placed after it. The order is left at the head of
 * the block. */
static rs_status wave_order(const rs_plan *plan, const rsi_units *units,
                            sched_block *b, rsi_err *err) {
  int64_t nunits = units->n;
  rsi_keyed *keys = (rsi_keyed *)b->v;
  int64_t *sent = calloc((size_t)plan->world_size, sizeof *sent);
  if (!sent) return RSI_NOMEM(err);
  int rank_bits = rsi_bits_for((uint64_t)plan->world_size - 1);
  uint64_t last_wave = 0, deepest = 0;
  for (int64_t u = 0; u < nunits; u++) {
    int64_t begin = u ? units->end[u - 1] : 0;
    const rsi_move *first = &plan->moves[begin];
    int64_t bytes = 0;
    for (int64_t i = begin; i < units->end[u]; i++)
      bytes += plan->moves[i].bytes;
    uint64_t wave = (uint64_t)(sent[first->src_rank] / plan->round_capacity);
    int64_t after = units->after[u];
    if (after >= 0 && keys[after].hi > wave) wave = keys[after].hi;
    /* plan order breaks ties: the sort is stable */
    uint64_t depth = (uint32_t)units->depth[u];
    keys[u] = (rsi_keyed){wave,
                          depth << rank_bits | (uint32_t)first->src_rank,
                          (uint64_t)u};
    if (wave > last_wave) last_wave = wave;
    if (depth > deepest) deepest = depth;
    sent[first->src_rank] += bytes;
  }
  free(sent);
  /* The wave beside the depth and sender, so that the sort passes over
   * their bits only; and where the unit's index fits below them, one word
   * a unit, sorted in the first 16 bytes a unit of the block (the keys'
   * first third, read already) instead of 48. */
  int low_bits = rsi_bits_for(deepest) + rank_bits;
  int unit_bits = nunits > 1 ? rsi_bits_for((uint64_t)nunits - 1) : 0;
  int64_t *order = (int64_t *)keys;
  if (rsi_bits_for(last_wave) + low_bits + unit_bits <= 64) {
    /* words[u] lies at or before keys[u]: written after it is read */
    uint64_t *words = (uint64_t *)keys;
    for (int64_t u = 0; u < nunits; u++) {
      uint64_t key = keys[u].hi << low_bits | keys[u].lo;
      words[u] = key << unit_bits | (uint64_t)u;
    }
    rsi_radix_sort_words(words, words + nunits, nunits, unit_bits);
    uint64_t index = (UINT64_C(1) << unit_bits) - 1;
    for (int64_t k = 0; k < nunits; k++) order[k] = (int64_t)(words[k] & index);
    return RS_OK;
  }
  rsi_radix_sort(keys, keys + nunits, nunits);
  /* order[k] lies at or before keys[k]: written after it is read */
  for (int64_t k = 0; k < nunits; k++) order[k] = (int64_t)keys[k].value;
  return RS_OK;
}

static rs_status assign_rounds(rs_plan *plan, const rsi_units *units,
                               sched_block *b, rsi_err *err) {
  int W = plan->world_size;
  int64_t nunits = units->n;
  const int64_t *unit_end = units->end, *unit_after = units->after;
  RSI_TRY(wave_order(plan, units, b, err));
  const int64_t *order = (const int64_t *)b->v;
  /* the units' rounds, behind their order (over keys no longer read) */
  int32_t *unit_round = (int32_t *)(b->v + (size_t)nunits * sizeof *order);
  rank_rounds rr = {0};
  bool have_rr = rank_rounds_alloc(&rr, W);
  int32_t *touched = malloc((size_t)W * sizeof *touched);
  plan->relay_bytes = calloc((size_t)W, sizeof *plan->relay_bytes);
  plan->stats = calloc((size_t)W, sizeof *plan->stats);
  if (!have_rr || !touched || !plan->relay_bytes || !plan->stats) {
    rank_rounds_free(&rr);
    free(touched);
    return RSI_NOMEM(err);
  }
  int64_t cap = plan->round_capacity;
  int32_t last_round = -1;
  for (int64_t k = 0; k < nunits; k++) {
    int64_t u = order[k];
    int64_t begin = u ? unit_end[u - 1] : 0, end = unit_end[u];
    /* Units come in wave order, not memory's: ask for a unit's bounds two
     * distances ahead, and for its moves (once its bounds are in) one
     * distance ahead. */
    if (k + 2 * PREFETCH < nunits) {
      int64_t v = order[k + 2 * PREFETCH];
      __builtin_prefetch(&unit_end[v ? v - 1 : 0]);
      __builtin_prefetch(&unit_after[v]);
    }
    if (k + PREFETCH < nunits) {
      int64_t v = order[k + PREFETCH];
      __builtin_prefetch(&plan->moves[v ? unit_end[v - 1] : 0], 1);
      if (unit_after[v] >= 0) __builtin_prefetch(&unit_round[unit_after[v]]);
    }
    int nt = 0;
    for (int64_t i = begin; i < end; i++) {
      const rsi_move *m = &plan->moves[i];
      if (m->route == RS_ROUTE_LOCAL) continue; /* a copy needs no staging */
      /* pack on the sender unless the move goes straight; land on the
       * receiver, through receive staging unless it goes straight, and
       * in a relay slot when it crosses into one */
      add_cost(&rr, touched, &nt, m->src_rank, staged_bytes(m, true), 0);
      add_cost(&rr, touched, &nt, m->dst_rank, staged_bytes(m, false),
               m->dst_kind == RSI_EP_RELAY ? m->bytes : 0);
    }
    int32_t lo = unit_after[u] >= 0 ? unit_round[unit_after[u]] + 1 : 0;
    int32_t r = nt ? first_fit(&rr, touched, nt, cap, lo)
                   : rr.now[plan->moves[begin].src_rank].cur;
    if (r < lo) r = lo;
    unit_round[u] = r;
    for (int i = 0; i < nt; i++) {
      int rank = touched[i];
      advance(&rr, rank, r);
      window_of(rr.used, rank)[r % WINDOW] += rr.now[rank].cost;
      rr.now[rank].cost = -1;
    }
    for (int64_t i = begin; i < end; i++) {
      rsi_move *m = &plan->moves[i];
      m->round = r;
      if (m->dst_kind == RSI_EP_RELAY &&
          plan->relays[m->dst_index].staging_offset < 0) {
        /* a slot may be filled by several moves: placed at the first */
        rsi_relay *s = &plan->relays[m->dst_index];
        int64_t *relay = relay_at(&rr, s->rank, r);
        s->round = r;
        s->staging_offset = *relay;
        *relay += ALIGN(s->bytes, 64);
        if (*relay > plan->relay_bytes[s->rank])
          plan->relay_bytes[s->rank] = *relay;
      }
    }
    if (r > last_round) last_round = r;
  }
  plan->nrounds = last_round + 1;
  rank_rounds_free(&rr);
  free(touched);
  return RS_OK;
}

/* ---- rounds by domain pair (RS_ROUNDS_BY_DOMAIN_PAIR) ------------------
 *
 * A unit belongs to a pair of domains (S, D) at its relay depth l (one
 * more than the unit it follows, at least): D where its moves land, S the
 * domain other than D they leave from (D itself where none does: copies
 * and forwards inside D). The units of a pair and depth, in plan order,
 * are cut greedily into chunks in which no rank is charged more than
 * round_capacity (a quarter of the staging: plan.c; a unit is charged as
 * assign_rounds charges it, and one that would overflow the chunk starts
 * the next). Chunk k of (S, D) at depth l runs in the round labelled (l,
 * k, (D - S) mod the number of domains). In a label a domain sends into
 * one domain and receives from one, so a rank is in two chunks of a label
 * at most, one it sends first hops in and one it lands in: half the
 * staging, what one of the executor's two steps in flight may take.
 * A mixed unit, whose moves leave from more than one domain besides D (an
 * fp8 block whose parts several domains hold), has no one S: it belongs
 * to D alone, and the mixed units into D are chunked apart and run in
 * labels (l, k, number of domains + D) of their own, in which only D
 * receives and every sender sends into D: a rank is in one chunk of such
 * a label.
 * The chunks into D are a function of the moves into D, which D's part
 * holds whole (docs/PLANNING.md, "Rounds by domain pair"). */

/* The label's fields in a round number, from the top: depth, chunk,
 * domain offset; so rounds sort as (depth, chunk, offset). */
#define LABEL_DEPTH_BITS 4
#define LABEL_BITS 31

typedef struct label_scratch {
  int32_t *domain_ix;
  int64_t *used, *relay, *cost;
  int64_t *chunk_of; /* the chunk whose figures used/relay hold */
  int32_t *touched;
  int32_t *labels; /* each chunk's, to count the distinct rounds */
  int64_t nlabels, cap_labels;
} label_scratch;

static void label_scratch_free(label_scratch *x) {
  free(x->domain_ix);
  free(x->used);
  free(x->relay);
  free(x->cost);
  free(x->chunk_of);
  free(x->touched);
  free(x->labels);
}

/* Rank r's figures in chunk `chunk`, cleared on its first use there. */
static void enter_chunk(label_scratch *x, int r, int64_t chunk) {
  if (x->chunk_of[r] == chunk) return;
  x->chunk_of[r] = chunk;
  x->used[r] = x->relay[r] = 0;
}

/* Charge unit [begin, end) to x->cost, as assign_rounds does; the ranks
 * it touches in x->touched, *nt of them. */
static void unit_cost(const rs_plan *plan, label_scratch *x, int64_t begin,
                      int64_t end, int *nt) {
  *nt = 0;
  for (int64_t i = begin; i < end; i++) {
    const rsi_move *m = &plan->moves[i];
    if (m->route == RS_ROUTE_LOCAL) continue; /* a copy needs no staging */
    int ends[2] = {m->src_rank, m->dst_rank};
    int64_t add[2] = {
        ALIGN(staged_bytes(m, true), 64),
        ALIGN(staged_bytes(m, false), 64) +
            (m->dst_kind == RSI_EP_RELAY ? ALIGN(m->bytes, 64) : 0)};
    for (int e = 0; e < 2; e++) {
      if (x->cost[ends[e]] < 0) {
        x->cost[ends[e]] = 0;
        x->touched[(*nt)++] = ends[e];
      }
      x->cost[ends[e]] += add[e];
    }
  }
}

static int cmp_int32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int64_t rsi_sort_unique_int32(int32_t *v, int64_t n) {
  /* by radix where the scratch is there (hundreds of thousands of labels
   * merged at thousands of ranks: 80 ms by qsort); the bias keeps the
   * order of negative values */
  uint64_t *w = n > 1024 ? malloc((size_t)n * 2 * sizeof *w) : NULL;
  if (w) {
    for (int64_t i = 0; i < n; i++)
      w[i] = (uint64_t)((int64_t)v[i] + ((int64_t)1 << 31));
    rsi_radix_sort_words(w, w + n, n, 0);
    for (int64_t i = 0; i < n; i++)
      v[i] = (int32_t)((int64_t)w[i] - ((int64_t)1 << 31));
    free(w);
  } else if (n) {
    qsort(v, (size_t)n, sizeof *v, cmp_int32);
  }
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
  return k;
}

static rs_status label_refused(rsi_err *err, const char *what, long long n,
                               long long most) {
  return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "RS_ROUNDS_BY_DOMAIN_PAIR: %s %lld, more than a round "
                  "number's label holds (%lld); raise RS_PARAM_STAGING_BYTES "
                  "or use RS_ROUNDS_PACKED",
                  what, n, most);
}

static rs_status label_units(rs_plan *plan, rsi_units *units,
                             sched_block *b, label_scratch *x, rsi_err *err) {
  int W = plan->world_size;
  int64_t nunits = units->n;
  int32_t ndomains = 0;
  x->domain_ix = malloc((size_t)W * sizeof *x->domain_ix);
  x->used = malloc((size_t)W * sizeof *x->used);
  x->relay = malloc((size_t)W * sizeof *x->relay);
  x->cost = malloc((size_t)W * sizeof *x->cost);
  x->chunk_of = malloc((size_t)W * sizeof *x->chunk_of);
  x->touched = malloc((size_t)W * sizeof *x->touched);
  plan->relay_bytes = calloc((size_t)W, sizeof *plan->relay_bytes);
  plan->stats = calloc((size_t)W, sizeof *plan->stats);
  if (!x->domain_ix || !x->used || !x->relay || !x->cost || !x->chunk_of ||
      !x->touched || !plan->relay_bytes || !plan->stats ||
      !rsi_plan_number_domains(plan, x->domain_ix, NULL, &ndomains))
    return RSI_NOMEM(err);
  for (int r = 0; r < W; r++) {
    x->cost[r] = -1;
    x->chunk_of[r] = -1;
  }
  /* offsets (D - S) mod ndomains, then ndomains + D for mixed units */
  int off_bits = rsi_bits_for(2 * (uint64_t)ndomains - 1);
  int chunk_bits = LABEL_BITS - LABEL_DEPTH_BITS - off_bits;
  if (chunk_bits < 1)
    return label_refused(err, "domains", (long long)ndomains,
                         1LL << (LABEL_BITS - LABEL_DEPTH_BITS - 1));
  int64_t max_chunks = (int64_t)1 << chunk_bits;

  /* depth (one past the unit followed, at least), the pair (S = ndomains
   * for a mixed unit); sorted by (depth, D, S), plan order within */
  rsi_keyed *keys = (rsi_keyed *)b->v;
  int32_t *depth = units->depth;
  for (int64_t u = 0; u < nunits; u++) {
    int64_t after = units->after[u];
    if (after >= 0 && depth[u] <= depth[after]) depth[u] = depth[after] + 1;
    if (depth[u] >= 1 << LABEL_DEPTH_BITS)
      return label_refused(err, "a unit relayed", (long long)depth[u],
                           (1 << LABEL_DEPTH_BITS) - 1);
    int64_t begin = u ? units->end[u - 1] : 0;
    const rsi_move *first = &plan->moves[begin];
    /* every move of a unit lands in D, its crossing's domain */
    int32_t D = x->domain_ix[first->dst_rank], S = D;
    for (int64_t i = begin; i < units->end[u] && S < ndomains; i++) {
      int32_t from = x->domain_ix[plan->moves[i].src_rank];
      if (from != D && from != S) S = S == D ? from : ndomains;
    }
    keys[u] = (rsi_keyed){(uint64_t)depth[u] << 32 |
                              (uint32_t)D,
                          (uint64_t)(uint32_t)S, (uint64_t)u};
  }
  rsi_radix_sort(keys, keys + nunits, nunits);

  int64_t cap = plan->round_capacity, chunk = -1, k = 0;
  bool empty = true;
  for (int64_t i = 0; i < nunits; i++) {
    int64_t u = (int64_t)keys[i].value;
    if (i == 0 || keys[i].hi != keys[i - 1].hi ||
        keys[i].lo != keys[i - 1].lo) { /* a pair and depth begins */
      chunk++;
      k = 0;
      empty = true;
    }
    int64_t begin = u ? units->end[u - 1] : 0, end = units->end[u];
    int32_t S = (int32_t)keys[i].lo, D = (int32_t)(keys[i].hi & 0xffffffffu);
    int nt;
    unit_cost(plan, x, begin, end, &nt);
    bool fits = true;
    for (int t = 0; t < nt && fits; t++) {
      int r = x->touched[t];
      enter_chunk(x, r, chunk);
      fits = x->used[r] + x->cost[r] <= cap;
    }
    if (!fits && !empty) { /* the next chunk of this pair */
      chunk++;
      k++;
      empty = true;
    }
    if (k >= max_chunks)
      return label_refused(err, "chunks between two domains",
                           (long long)k + 1, (long long)max_chunks);
    int32_t off = S == ndomains ? ndomains + D : (D - S + ndomains) % ndomains;
    int32_t round = (int32_t)((int64_t)depth[u] << (chunk_bits + off_bits) |
                              k << off_bits | off);
    if (empty) {
      RSI_TRY(rsi_grow((void **)&x->labels, &x->cap_labels, x->nlabels + 1,
                       sizeof *x->labels, 1024, err));
      x->labels[x->nlabels++] = round;
      empty = false;
    }
    for (int t = 0; t < nt; t++) {
      int r = x->touched[t];
      enter_chunk(x, r, chunk);
      x->used[r] += x->cost[r];
      x->cost[r] = -1;
    }
    for (int64_t j = begin; j < end; j++) {
      rsi_move *m = &plan->moves[j];
      m->round = round;
      if (m->dst_kind != RSI_EP_RELAY ||
          plan->relays[m->dst_index].staging_offset >= 0)
        continue;
      /* a slot may be filled by several moves: placed at the first; a
       * rank receives in one chunk a label, so offsets count per chunk */
      rsi_relay *s = &plan->relays[m->dst_index];
      enter_chunk(x, s->rank, chunk);
      s->round = round;
      s->staging_offset = x->relay[s->rank];
      x->relay[s->rank] += ALIGN(s->bytes, 64);
      if (x->relay[s->rank] > plan->relay_bytes[s->rank])
        plan->relay_bytes[s->rank] = x->relay[s->rank];
    }
  }
  /* the rounds: the distinct labels */
  plan->nrounds = (int)rsi_sort_unique_int32(x->labels, x->nlabels);
  plan->round_labels = x->labels; /* the plan's now */
  x->labels = NULL;
  return RS_OK;
}

static rs_status assign_labels(rs_plan *plan, rsi_units *units,
                               sched_block *b, rsi_err *err) {
  label_scratch x = {0};
  rs_status st = label_units(plan, units, b, &x, err);
  label_scratch_free(&x);
  return st;
}

/* Order moves by (round, stage, sender, receiver, plan order) and cut the
 * runs into messages. The block becomes the plan's moves; the messages
 * take the old moves' pages, which are resident already. */
static rs_status make_messages(rs_plan *plan, sched_block *blk, rsi_err *err) {
  int64_t n = plan->nmoves;
  rsi_keyed *keys = (rsi_keyed *)blk->v;
  /* round, stage, sender and receiver side by side, in one word where
   * they fit: the sort passes over their bits only */
  int rank_bits = rsi_bits_for((uint64_t)plan->world_size - 1);
  int32_t last_round = 0; /* labels are sparse: nrounds does not bound them */
  for (int64_t i = 0; i < n; i++)
    if (plan->moves[i].round > last_round) last_round = plan->moves[i].round;
  bool one_word =
      rsi_bits_for((uint64_t)last_round) + 1 + 2 * rank_bits <= 64;
  for (int64_t i = 0; i < n; i++) {
    const rsi_move *m = &plan->moves[i];
    uint64_t when = (uint64_t)(uint32_t)m->round << 1 | m->stage;
    uint64_t ends = (uint64_t)(uint32_t)m->src_rank << rank_bits |
                    (uint32_t)m->dst_rank;
    /* plan order breaks ties: the sort is stable */
    keys[i] = one_word ? (rsi_keyed){0, when << 2 * rank_bits | ends,
                                     (uint64_t)i}
                       : (rsi_keyed){when, ends, (uint64_t)i};
  }
  rsi_radix_sort(keys, keys + n, n);
  /* Gather the moves in that order: independent reads, which the memory
   * system overlaps (following the permutation's cycles in place was a
   * chain of dependent misses, a third of planning time).
   * The order lies past the sorted keys, in what was the sort's scratch;
   * sorted[i] ends at byte 48 (i + 1) at most, below order[j] for every
   * j > i (at byte 40 n + 8 j), so it only covers entries already read. */
  int64_t *order =
      (int64_t *)(blk->v + (size_t)n * (BLOCK_PER_MOVE - sizeof *order));
  for (int64_t i = 0; i < n; i++) order[i] = (int64_t)keys[i].value;
  rsi_move *sorted = (rsi_move *)blk->v, *old = plan->moves;
  for (int64_t i = 0; i < n; i++) sorted[i] = old[order[i]];
  /* the block becomes the moves (a move may take less than its share of
   * the block); shrinking cannot fail to keep them */
  rsi_move *fit = realloc(blk->v, (size_t)n * sizeof *sorted | 1);
  plan->moves = fit ? fit : sorted;
  plan->cap_moves = n;
  blk->v = NULL;

  int64_t nmsgs = 0;
  for (int64_t i = 0; i < n; i++) {
    const rsi_move *a = &plan->moves[i], *b = i ? &plan->moves[i - 1] : NULL;
    nmsgs += !b || a->round != b->round || a->stage != b->stage ||
             a->src_rank != b->src_rank || a->dst_rank != b->dst_rank;
  }
  /* a message takes no more than a move: the old moves' block holds them */
  plan->msgs = realloc(old, (size_t)(nmsgs ? nmsgs : 1) * sizeof *plan->msgs);
  if (!plan->msgs) {
    free(old);
    return RSI_NOMEM(err);
  }
  plan->nmsgs = 0;
  for (int64_t i = 0; i < n; i++) {
    rsi_move *a = &plan->moves[i];
    rsi_message *msg = plan->nmsgs ? &plan->msgs[plan->nmsgs - 1] : NULL;
    if (!msg || a->round != msg->round || a->stage != msg->stage ||
        a->src_rank != msg->src_rank || a->dst_rank != msg->dst_rank) {
      msg = &plan->msgs[plan->nmsgs++];
      *msg = (rsi_message){a->round, a->stage, a->src_rank, a->dst_rank,
                           i, 0, 0};
    }
    /* each move 16-aligned in its message, as staging.h lays it out */
    msg->bytes = ALIGN(msg->bytes, 16) + a->bytes;
    msg->nmoves++;
  }
  return RS_OK;
}

static void count_stats(rs_plan *plan) {
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    rsi_rank_stats *s = &plan->stats[m->src_rank],
                   *d = &plan->stats[m->dst_rank];
    s->moves++;
    /* a move's bytes are its elements in the wire dtype (its box may be
     * gone: moves.c, forget_box) */
    int64_t elems = 0;
    if (m->src_dtype != m->dst_dtype || m->computes_scales)
      elems = m->bytes / (int64_t)rsi_dtype_size((rs_dtype)m->wire_dtype);
    if (m->route == RS_ROUTE_LOCAL) {
      if (m->src_kind == RSI_EP_RELAY)
        s->relay_copied += m->bytes;
      else
        s->local += m->bytes;
      s->converted[1] += elems;
      continue;
    }
    /* every byte sent is converted into staging, copied into it as it is
     * (packed) or goes straight from memory; so at the receiving end */
    if (m->src_dtype != m->wire_dtype || m->computes_scales)
      s->converted[0] += elems;
    else
      s->packed += staged_bytes(m, true);
    if (m->wire_dtype != m->dst_dtype)
      d->converted[1] += elems;
    else
      d->unpacked += staged_bytes(m, false);
    d->moves++;
    int across = m->route == RS_ROUTE_INTER;
    s->sent[across] += m->bytes;
    d->recv[across] += m->bytes;
  }
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *msg = &plan->msgs[i];
    if (msg->src_rank == msg->dst_rank) continue;
    plan->stats[msg->src_rank].msgs_sent++;
    plan->stats[msg->dst_rank].msgs_recv++;
  }
}

/* What each rank's executor will allocate: two staging halves. */
static rs_status count_staging(rs_plan *plan, rsi_err *err) {
  int64_t *half = malloc((size_t)plan->world_size * sizeof *half);
  if (!half) return RSI_NOMEM(err);
  rs_status st = rsi_staging_halves(plan, half, err);
  for (int r = 0; st == RS_OK && r < plan->world_size; r++)
    plan->stats[r].staging = 2 * half[r];
  free(half);
  return st;
}

static void free_units(rsi_units *units) {
  free(units->end);
  free(units->after);
  free(units->depth);
  *units = (rsi_units){0};
}

/* Messages, figures and staging of moves whose rounds are set, in the
 * block (freed). */
static rs_status group_moves(rs_plan *plan, sched_block *b, rsi_err *err) {
  rs_status st = make_messages(plan, b, err);
  free(b->v);
  b->v = NULL;
  if (st != RS_OK) return st;
  count_stats(plan);
  return count_staging(plan, err);
}

rs_status rsi_plan_schedule(rs_plan *plan, rsi_units *units, rsi_err *err) {
  sched_block b = {0};
  rs_status st = block_alloc(&b, plan->nmoves, units->n, err);
  if (st == RS_OK)
    st = plan->rounds_by_pair ? assign_labels(plan, units, &b, err)
                              : assign_rounds(plan, units, &b, err);
  free_units(units);
  if (st != RS_OK) {
    free(b.v);
    return st;
  }
  return group_moves(plan, &b, err);
}

rs_status rsi_plan_regroup(rs_plan *plan, rsi_err *err) {
  free(plan->msgs); /* made again from the moves */
  plan->msgs = NULL;
  plan->nmsgs = 0;
  sched_block b = {0};
  RSI_TRY(block_alloc(&b, plan->nmoves, 0, err));
  return group_moves(plan, &b, err);
}
