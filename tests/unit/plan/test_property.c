/* SPDX-License-Identifier: Apache-2.0 */
/* Property test over random layout pairs, through the in-process transport.
 *
 * Each case: a random world (1..12 ranks) in random domains, 1..4 tensors
 * of rank 1..6 with odd-ish sizes (<= 4096 elements) and dtype u8, bf16,
 * f32 or f64. Source and destination are each built from random DTensor
 * meshes (random mesh shapes over random subsets of ranks, Replicate /
 * Shard(d) placements, nested too) and/or random explicit grids with
 * several boxes per rank, some strided (padded, permuted strides), many
 * fused (shards of several tensors in one buffer at different offsets).
 * The source covers every element by construction. Sources hold values
 * derived from (tensor, global index); every destination byte is poisoned
 * first. After execute: every destination element is right, every byte no
 * destination shard covers is still poison, byte statistics agree with the
 * move list, no domain receives an element across domains twice, staging
 * stays within its setting; for every fourth case, each rank's part
 * (RS_PARAM_PLAN_PART) is exactly its moves of the whole plan (every
 * other part made without boxes, RS_PARAM_PLAN_BOXES = 0); for another
 * fourth, each destination domain's part (rsi_plan_create_domain) holds
 * exactly the whole plan's moves into that domain; and for another fourth
 * the whole plan made without boxes is the same plan but for them.
 *
 * Beside the random cases, one job of 28 domains (trainers into TP4 and
 * TP2 engines) checks the domains' parts where pieces travel down chains.
 *
 * Replay: RESHARD_SEED=<seed> (default fixed) and RESHARD_CASE=<index> to
 * run one case (RESHARD_LARGE_CASE=<index> for the large ones);
 * RESHARD_PROPERTY_CASES=<n> / RESHARD_PROPERTY_LARGE_CASES=<n> change the
 * counts (2000 / 120). A failing assertion names "seed=S case=I" (or
 * "large case=I"). */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <reshard/reshard.h>

#include "th_harness.h"

#include "th_domain_parts.h"

#include "exec/exec.h" /* rsi_exec_staging: what the executor allocated */
#include "plan/plan.h" /* the stage of a move, which the API does not show */
#include "th_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x5EED2024ull
#define DEFAULT_CASES 2000
#define PARTS 4

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) { return th_rand(&r->s); }

/* Uniform in [lo, hi]. */
static int rint_(rng *r, int lo, int hi) {
  return lo + (int)(rnext(r) % (uint64_t)(hi - lo + 1));
}

static void shuffle(rng *r, int *a, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = rint_(r, 0, i), t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static uint64_t env_u64(const char *name, uint64_t dflt, bool *set) {
  const char *v = getenv(name);
  if (set) *set = false;
  if (!v || !*v) return dflt;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 0);
  if (end == v) return dflt;
  if (set) *set = true;
  return (uint64_t)x;
}

/* ------------------------------------------------------------ generators */

#define NBUF 3

/* Next free byte offset in (side, buffer) over all the given ranks, plus a
 * random pad (possibly leaving the offset unaligned to the element). */
static int64_t place_after(const rh *h, rng *r, int side, int buffer,
                           const int *ranks, int nranks) {
  int64_t at = 0;
  for (int i = 0; i < nranks; i++) {
    int64_t u = rh_used(h, side, ranks[i], buffer);
    if (u > at) at = u;
  }
  return at + (rint_(r, 0, 3) == 0 ? rint_(r, 0, 9) : 0);
}

static void add_dtensor_part(rh *h, rng *r, int side, int tid) {
  const rh_tensor *t = &h->t[tid];
  int mesh_ndim = rint_(r, 1, 3);
  int64_t mesh[3];
  int64_t prod = 1;
  for (int a = 0; a < mesh_ndim; a++) {
    int64_t m = rint_(r, 1, 4);
    if (prod * m > h->world) m = 1;
    mesh[a] = m;
    prod *= m;
  }
  int perm[RH_MAX_WORLD];
  for (int i = 0; i < h->world; i++) perm[i] = i;
  shuffle(r, perm, h->world);
  int pl[3];
  for (int a = 0; a < mesh_ndim; a++)
    pl[a] = rint_(r, 0, 2) == 0 ? RS_REPLICATE : rint_(r, 0, t->ndim - 1);
  /* sometimes nest: two axes on one dim */
  if (mesh_ndim >= 2 && rint_(r, 0, 3) == 0) pl[1] = pl[0] = rint_(r, 0,
                                                                 t->ndim - 1);
  int buffer = rint_(r, 0, NBUF - 1);
  int64_t at = place_after(h, r, side, buffer, perm, (int)prod);
  rh_dtensor(h, side, t->name, mesh_ndim, mesh, perm, pl, buffer, at);
}

/* Padded strides in a random dim order (never self-overlapping). */
static void random_strides(rng *r, int ndim, const int64_t *ext,
                           int64_t *strides) {
  int order[RS_MAX_DIMS];
  for (int d = 0; d < ndim; d++) order[d] = d;
  if (rint_(r, 0, 2) == 0) shuffle(r, order, ndim);
  int64_t s = rint_(r, 0, 4) == 0 ? 2 : 1; /* sometimes every other one */
  for (int k = ndim - 1; k >= 0; k--) {
    int d = order[k];
    strides[d] = s;
    s *= ext[d] + (rint_(r, 0, 1) ? rint_(r, 0, 2) : 0);
  }
}

static void add_grid_part(rh *h, rng *r, int side, int tid) {
  const rh_tensor *t = &h->t[tid];
  int ndim = t->ndim;
  /* cut points per dim; at most 24 cells */
  int64_t cuts[RS_MAX_DIMS][4];
  int pieces[RS_MAX_DIMS];
  int cells = 1;
  for (int d = 0; d < ndim; d++) {
    int p = rint_(r, 1, 3);
    if (p > t->shape[d]) p = (int)t->shape[d];
    if (cells * p > 24) p = 1;
    pieces[d] = p;
    cells *= p;
    /* p-1 distinct interior cut points, sorted */
    cuts[d][0] = 0;
    cuts[d][p] = t->shape[d];
    int64_t chosen[3];
    int n = 0;
    while (n < p - 1) {
      int64_t c = 1 + (int64_t)(rnext(r) % (uint64_t)(t->shape[d] - 1));
      bool dup = false;
      for (int i = 0; i < n; i++) dup |= chosen[i] == c;
      if (!dup) chosen[n++] = c;
    }
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++)
        if (chosen[j] < chosen[i]) {
          int64_t x = chosen[i];
          chosen[i] = chosen[j];
          chosen[j] = x;
        }
    for (int i = 0; i < n; i++) cuts[d][i + 1] = chosen[i];
  }
  int64_t cell[RS_MAX_DIMS] = {0}, pc[RS_MAX_DIMS];
  for (int d = 0; d < ndim; d++) pc[d] = pieces[d];
  do {
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
      off[d] = cuts[d][cell[d]];
      ext[d] = cuts[d][cell[d] + 1] - off[d];
    }
    int copies = side == RS_SIDE_SRC ? rint_(r, 1, 2)
                                     : (rint_(r, 0, 4) == 0 ? 0
                                                            : rint_(r, 1, 2));
    for (int c = 0; c < copies; c++) {
      int rank = rint_(r, 0, h->world - 1);
      int buffer = rint_(r, 0, NBUF - 1);
      int64_t at = place_after(h, r, side, buffer, &rank, 1);
      if (rint_(r, 0, 9) < 4) {
        int64_t strides[RS_MAX_DIMS];
        random_strides(r, ndim, ext, strides);
        rh_shard(h, side, t->name, rank, off, ext, buffer, at, strides);
      } else {
        rh_shard(h, side, t->name, rank, off, ext, buffer, at, NULL);
      }
    }
  } while (th_next(ndim, pc, cell));
}

static void build_side(rh *h, rng *r, int side, int tid) {
  int mode = rint_(r, 0, 9);
  if (mode <= 4 || mode >= 8) add_dtensor_part(h, r, side, tid);
  if (mode >= 5) add_grid_part(h, r, side, tid);
}

/* Per-dim size caps by tensor rank: <= 4096 elements (small cases) or
 * <= 65536 (large cases). */
static const int64_t size_cap[7] = {0, 300, 40, 12, 7, 5, 4};
static const int64_t size_cap_large[7] = {0, 60000, 250, 40, 16, 9, 6};

/* Totals over a part, logged so a reader can see the cases are not empty. */
static struct {
  int64_t cases, src_shards, dst_shards, dst_elems, moves, inter_bytes;
  int64_t staging_checked; /* ranks whose real staging was checked */
  int64_t self_plans;      /* plans from a source layout to itself */
  int64_t domain_parts;    /* cases whose domains' parts were checked */
  int64_t by_pair;         /* cases cut into rounds by domain pair */
} totals;

/* A plan from the source layout to itself moves nothing between ranks.
 * (A source layout with two shards on one rank in the same bytes is no
 * destination: then there is no such plan.) */
static void check_self_plan(const rh *h, const char *where) {
  rs_plan *self = NULL;
  rs_status st = rs_plan_create(h->lay[0], h->lay[0], &self);
  if (st == RS_ERR_OVERLAP) return;
  cr_assert_eq(st, RS_OK, "%s: plan from the source to itself: %s", where,
               rs_context_last_error(h->ctx));
  int64_t sent = -1;
  cr_assert_eq(rs_plan_stat(self, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA,
                            &sent), RS_OK, "%s", where);
  int64_t inter = -1;
  cr_assert_eq(rs_plan_stat(self, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER,
                            &inter), RS_OK, "%s", where);
  cr_assert_eq(sent + inter, 0, "%s: a plan from the source to itself sends "
               "%lld bytes between ranks", where, (long long)(sent + inter));
  totals.self_plans++;
  rs_plan_destroy(self);
}

/* rs_plan_move_info's promise: moves in the order the plan runs them, by
 * round, stage, sender and receiver, so that a message's moves are
 * consecutive. */
static void check_move_order(const rh *h, const char *where) {
  int64_t nm = 0;
  cr_assert_eq(rs_plan_num_moves(h->plan, &nm), RS_OK, "%s", where);
  int64_t last[4] = {-1, -1, -1, -1};
  for (int64_t i = 0; i < nm; i++) {
    int src, dst, round;
    cr_assert_eq(rs_plan_move_info(h->plan, i, NULL, &src, &dst, NULL, &round,
                                   NULL), RS_OK, "%s", where);
    int64_t key[4] = {round, h->plan->moves[i].stage, src, dst};
    int c = 0;
    for (int k = 0; k < 4 && !c; k++)
      c = key[k] < last[k] ? -1 : key[k] > last[k];
    cr_assert_geq(c, 0, "%s: move %lld (round %d, stage %lld, %d -> %d) "
                  "comes after (round %lld, stage %lld, %lld -> %lld)", where,
                  (long long)i, round, (long long)key[1], src, dst,
                  (long long)last[0], (long long)last[1], (long long)last[2],
                  (long long)last[3]);
    memcpy(last, key, sizeof last);
  }
}

/* RS_PARAM_PLAN_PART: each rank's part holds the whole plan's moves of
 * that rank, in order, with the whole plan's figures and fingerprint; in
 * process a part is for inspection, and executing it is refused. The
 * parts of odd ranks are made without boxes (RS_PARAM_PLAN_BOXES = 0). */
static void check_parts(const rh *h, const char *where) {
  uint64_t whole_fp = 0, fp = 0;
  cr_assert_eq(rs_plan_fingerprint(h->plan, &whole_fp), RS_OK, "%s", where);
  for (int r = 0; r < h->world; r++) {
    rs_plan *part = NULL;
    cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_PART, r), RS_OK,
                 "%s", where);
    cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_BOXES, r % 2 == 0),
                 RS_OK, "%s", where);
    rs_status st = rs_plan_create(h->lay[0], h->lay[1], &part);
    cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_PART, -1), RS_OK,
                 "%s", where);
    cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_BOXES, 1), RS_OK,
                 "%s", where);
    cr_assert_eq(st, RS_OK, "%s: the part of rank %d: %s", where, r,
                 rs_context_last_error(h->ctx));
    char why[256];
    cr_assert(th_same_moves_of(h->plan, part, r, why, sizeof why),
              "%s: the part of rank %d: %s", where, r, why);
    cr_assert_eq(rs_plan_fingerprint(part, &fp), RS_OK, "%s", where);
    cr_assert_eq(fp, whole_fp, "%s: the part of rank %d has another "
                 "fingerprint", where, r);
    for (int q = 0; q < h->world; q++)
      for (int s = RS_STAT_BYTES_SENT_INTRA;
           s <= RS_STAT_BYTES_UNPACKED; s++) {
        int64_t a = -1, b = -2;
        rs_plan_stat(h->plan, q, (rs_stat)s, &a);
        rs_plan_stat(part, q, (rs_stat)s, &b);
        cr_assert_eq(a, b, "%s: figure %d of rank %d: %lld in the whole "
                     "plan, %lld in rank %d's part", where, s, q,
                     (long long)a, (long long)b, r);
      }
    if (r == 0)
      cr_assert_eq(rs_plan_execute(part), RS_ERR_UNSUPPORTED,
                   "%s: a part executed in process", where);
    rs_plan_destroy(part);
  }
}

/* Each destination domain's part holds exactly the whole plan's moves
 * into that domain (th_domain_parts.h). */
static void check_domain_parts(const rh *h, const char *where) {
  char why[256];
  cr_assert(th_same_domain_parts(h->plan, h->lay[0], h->lay[1], why,
                                 sizeof why),
            "%s: %s", where, why);
  totals.domain_parts++;
}

/* RS_PARAM_PLAN_BOXES = 0: the same plan, without its moves' boxes. */
static void check_without_boxes(const rh *h, const char *where) {
  rs_plan *bare = NULL;
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_BOXES, 0), RS_OK,
               "%s", where);
  rs_status st = rs_plan_create(h->lay[0], h->lay[1], &bare);
  cr_assert_eq(rs_context_set_param(h->ctx, RS_PARAM_PLAN_BOXES, 1), RS_OK,
               "%s", where);
  cr_assert_eq(st, RS_OK, "%s: without boxes: %s", where,
               rs_context_last_error(h->ctx));
  char why[256];
  cr_assert(th_same_plan_without_boxes(h->plan, bare, h->world, why,
                                       sizeof why),
            "%s: without boxes: %s", where, why);
  cr_assert_eq(rs_plan_execute(bare), RS_ERR_UNSUPPORTED, "%s", where);
  rs_plan_destroy(bare);
}

static void run_case(uint64_t seed, int index, bool large) {
  rng r = {th_mix(seed ^ th_mix((uint64_t)index * TH_GOLDEN) ^
                  (large ? 0x4C41524745ull : 0))};
  const int64_t *cap = large ? size_cap_large : size_cap;
  char where[96];
  snprintf(where, sizeof where, "seed=%" PRIu64 " %scase=%d", seed,
           large ? "large " : "", index);
  int world = rint_(&r, 1, 12);
  rh h;
  rh_init(&h, world, where);

  int ndom = rint_(&r, 1, world < 4 ? world : 4);
  int dom_ids[4];
  for (int k = 0; k < ndom; k++)
    dom_ids[k] = rint_(&r, 0, 9) == 0 ? 2147483647 - k * rint_(&r, 1, 1000)
                                      : k * rint_(&r, 1, 9) + (index & 1);
  for (int rank = 0; rank < world; rank++) {
    rs_status st = rs_context_set_domain(h.ctx, rank,
                                         dom_ids[rint_(&r, 0, ndom - 1)]);
    cr_assert_eq(st, RS_OK, "%s: set_domain", where);
  }
  int64_t staging = 256LL << 20;
  if (large || rint_(&r, 0, 3) == 0) {
    staging = 64 << 10;
    cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, staging),
                 RS_OK, "%s", where);
  }

  if (rint_(&r, 0, 3) == 0)
    cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_SLICE_BYTES, 4096),
                 RS_OK, "%s", where);

  static const rs_dtype dts[4] = {RS_DTYPE_U8, RS_DTYPE_BF16, RS_DTYPE_F32,
                                  RS_DTYPE_F64};
  int nt = rint_(&r, 1, 4);
  for (int i = 0; i < nt; i++) {
    int ndim = rint_(&r, 1, 6);
    int64_t shape[RS_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
      shape[d] = rint_(&r, 1, (int)cap[ndim]);
      if (shape[d] > 2 && rint_(&r, 0, 1)) shape[d] |= 1; /* odd-ish */
      if (shape[d] > cap[ndim]) shape[d] = cap[ndim];
    }
    char name[32];
    snprintf(name, sizeof name, "m.l%d.w%d", rint_(&r, 0, 99), i);
    rh_tensor_add(&h, name, dts[rint_(&r, 0, 3)], ndim, shape);
  }
  /* Shards come a tensor at a time; in a quarter of the cases (drawn
   * apart, so that the others stay as they were) each side's tensors come
   * in another order than the plan's, as a caller may add them. */
  rng order_rng = {th_mix(r.s ^ 0x4F52444552ull)};
  int order[2][4] = {{0, 1, 2, 3}, {0, 1, 2, 3}};
  if (rint_(&order_rng, 0, 3) == 0)
    for (int side = 0; side < 2; side++) shuffle(&order_rng, order[side], nt);
  for (int i = 0; i < nt; i++) build_side(&h, &r, RS_SIDE_SRC, order[0][i]);
  for (int i = 0; i < nt; i++) build_side(&h, &r, RS_SIDE_DST, order[1][i]);
  /* A third of the cases (drawn apart, as the order) are cut into rounds
   * by domain pair. */
  if (rint_(&order_rng, 0, 2) == 0) {
    cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_ROUNDS,
                                      RS_ROUNDS_BY_DOMAIN_PAIR),
                 RS_OK, "%s", where);
    totals.by_pair++;
  }

  rh_plan(&h);
  rh_alloc_bind(&h, rint_(&r, 0, 16));
  rh_execute(&h);
  rh_check_destinations(&h);
  rh_check_sources_intact(&h);
  rh_check_stats(&h, staging);
  rh_check_locality(&h);
  check_move_order(&h, where);
  check_self_plan(&h, where);
  char shape[256];
  cr_assert(th_pair_rounds_hold(h.plan, shape, sizeof shape), "%s: %s", where,
            shape);
  if (index % 4 == 0) check_parts(&h, where);
  if (index % 4 == 1) check_domain_parts(&h, where);
  if (index % 4 == 2) check_without_boxes(&h, where);
  /* What the executor really allocated is what the plan said, and within
   * the setting. */
  for (int rank = 0; rank < world; rank++) {
    int64_t got = rsi_exec_staging(h.plan, rank);
    if (got < 0) continue;
    int64_t said = rh_stat(&h, rank, RS_STAT_STAGING_BYTES);
    cr_assert_eq(got, said, "%s: rank %d allocated %lld bytes of staging, "
                 "the plan says %lld", where, rank, (long long)got,
                 (long long)said);
    cr_assert_leq(got, staging, "%s: rank %d allocated %lld > setting %lld",
                  where, rank, (long long)got, (long long)staging);
    totals.staging_checked++;
  }
  totals.cases++;
  totals.src_shards += h.nsh[RS_SIDE_SRC];
  totals.dst_shards += h.nsh[RS_SIDE_DST];
  for (int i = 0; i < h.nsh[RS_SIDE_DST]; i++)
    totals.dst_elems += th_volume(h.sh[1][i].ndim, h.sh[1][i].ext);
  int64_t nm = 0;
  cr_assert_eq(rs_plan_num_moves(h.plan, &nm), RS_OK, "%s", where);
  totals.moves += nm;
  totals.inter_bytes += rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER);

  if (index % 10 == 0) {
    /* deterministic planning: the same inputs give the same fingerprint
     * and the same number of moves */
    uint64_t f1 = 0, f2 = 0;
    int64_t n1 = 0, n2 = 0;
    rs_plan *again = NULL;
    cr_assert_eq(rs_plan_fingerprint(h.plan, &f1), RS_OK, "%s", where);
    cr_assert_eq(rs_plan_num_moves(h.plan, &n1), RS_OK, "%s", where);
    cr_assert_eq(rs_plan_create(h.lay[0], h.lay[1], &again), RS_OK, "%s",
                 where);
    cr_assert_eq(rs_plan_fingerprint(again, &f2), RS_OK, "%s", where);
    cr_assert_eq(rs_plan_num_moves(again, &n2), RS_OK, "%s", where);
    cr_assert_eq(f1, f2, "%s: fingerprint differs on re-plan", where);
    cr_assert_eq(n1, n2, "%s: move count differs on re-plan", where);
    rh_same_moves(&h, again);
    rs_plan_destroy(again);
  }
  rh_fini(&h);
}

static void run_part(int part) {
  bool one = false;
  uint64_t seed = env_u64("RESHARD_SEED", DEFAULT_SEED, NULL);
  uint64_t only = env_u64("RESHARD_CASE", 0, &one);
  int total = (int)env_u64("RESHARD_PROPERTY_CASES", DEFAULT_CASES, NULL);
  int per = (total + PARTS - 1) / PARTS;
  int lo = part * per, hi = lo + per < total ? lo + per : total;
  cr_log_info("property part %d: seed=%" PRIu64 " cases [%d, %d)%s", part,
              seed, lo, hi, one ? " (one case only)" : "");
  for (int i = lo; i < hi; i++) {
    if (one && (uint64_t)i != only) continue;
    run_case(seed, i, false);
  }
  cr_log_info("property part %d: %lld cases, %lld src shards, %lld dst "
              "shards, %lld dst elements checked, %lld moves, %lld bytes "
              "across domains, real staging of %lld ranks checked, %lld plans "
              "from a source layout to itself, %lld cases' domain parts, "
              "%lld cases with rounds by domain pair",
              part, (long long)totals.cases,
              (long long)totals.src_shards, (long long)totals.dst_shards,
              (long long)totals.dst_elems, (long long)totals.moves,
              (long long)totals.inter_bytes,
              (long long)totals.staging_checked,
              (long long)totals.self_plans, (long long)totals.domain_parts,
              (long long)totals.by_pair);
  cr_assert_gt(totals.staging_checked, 0, "no rank's staging was checked");
  if (!one) {
    cr_assert_gt(totals.self_plans, totals.cases / 2, "only %lld of %lld "
                 "self plans were made", (long long)totals.self_plans,
                 (long long)totals.cases);
    cr_assert_geq(totals.domain_parts, totals.cases / 4, "the domains' parts "
                  "of %lld of %lld cases were checked",
                  (long long)totals.domain_parts, (long long)totals.cases);
    cr_assert_geq(totals.by_pair, totals.cases / 4, "%lld of %lld cases had "
                  "rounds by domain pair", (long long)totals.by_pair,
                  (long long)totals.cases);
  }
}

/* Fewer, larger cases (<= 65536 elements per tensor), always 64 KiB of
 * staging: many rounds, slices, forwarding under memory pressure. */
static void run_large(int part) {
  bool one = false;
  uint64_t seed = env_u64("RESHARD_SEED", DEFAULT_SEED, NULL);
  uint64_t only = env_u64("RESHARD_LARGE_CASE", 0, &one);
  int total = (int)env_u64("RESHARD_PROPERTY_LARGE_CASES", 120, NULL);
  int lo = part * total / 2, hi = (part + 1) * total / 2;
  cr_log_info("large property part %d: seed=%" PRIu64 " cases [%d, %d)", part,
              seed, lo, hi);
  for (int i = lo; i < hi; i++) {
    if (one && (uint64_t)i != only) continue;
    run_case(seed, i, true);
  }
  cr_log_info("large property part %d: %lld cases, %lld dst elements "
              "checked, %lld moves, %lld cases with rounds by domain pair",
              part, (long long)totals.cases, (long long)totals.dst_elems,
              (long long)totals.moves, (long long)totals.by_pair);
}

Test(property, random_layouts_part0, .timeout = 80) { run_part(0); }
Test(property, random_layouts_part1, .timeout = 80) { run_part(1); }
Test(property, random_layouts_part2, .timeout = 80) { run_part(2); }
Test(property, random_layouts_part3, .timeout = 80) { run_part(3); }
Test(property, large_layouts_small_staging_part0, .timeout = 80) {
  run_large(0);
}
Test(property, large_layouts_small_staging_part1, .timeout = 80) {
  run_large(1);
}

/* ------------------------------------------- a job of many domains */

/* A trainer-to-engine job of 28 domains, where a piece crosses into many
 * domains and travels down chains: 16 trainer ranks (2 domains of 8, TP8
 * x DP2), 96 engine ranks (24 domains of 4); tensors sharded unevenly on
 * either side, an engine of TP2 (two replicas in a domain), one of TP4,
 * a 3-D tensor, and one replicated over every rank (trainers too, so a
 * domain holds its own source). Small staging cuts the pieces. Every
 * domain's part is the whole plan's moves into it. */
static void add_dtensor_or_fail(rs_layout *l, const char *name, int ndim,
                                const int64_t *mesh, int nranks, int first,
                                const int *placements, int buffer) {
  int ranks[128];
  for (int i = 0; i < nranks; i++) ranks[i] = first + i;
  cr_assert_eq(rs_layout_add_dtensor(l, name, ndim, mesh, ranks, placements,
                                     buffer, 0),
               RS_OK, "%s: %s", name, rs_last_error());
}

Test(property, domain_parts_of_a_job_of_many_domains) {
  enum { TRAIN = 16, INFER = 96, WORLD = TRAIN + INFER };
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  cr_assert_eq(rs_context_create_local(WORLD, &ctx), RS_OK);
  for (int r = 0; r < WORLD; r++)
    cr_assert_eq(rs_context_set_domain(ctx, r, r < TRAIN ? r / 8
                                                         : 2 + (r - TRAIN) / 4),
                 RS_OK);
  cr_assert_eq(rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, 64 << 10),
               RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[3];
  } t[5] = {{"w.col", 2, {203, 77}}, {"w.row", 2, {96, 131}},
            {"w.experts", 3, {8, 45, 33}}, {"w.norm", 1, {1001}},
            {"w.all", 2, {17, 300}}};
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(rs_layout_add_tensor(src, t[i].name, RS_DTYPE_BF16,
                                      t[i].ndim, t[i].shape), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(dst, t[i].name, RS_DTYPE_BF16,
                                      t[i].ndim, t[i].shape), RS_OK);
  }
  const int64_t train_mesh[2] = {2, 8}; /* DP2 x TP8 */
  add_dtensor_or_fail(src, "w.col", 2, train_mesh, TRAIN, 0,
                      INTS(RS_REPLICATE, 0), 0);
  add_dtensor_or_fail(src, "w.row", 2, train_mesh, TRAIN, 0,
                      INTS(RS_REPLICATE, 1), 1);
  add_dtensor_or_fail(src, "w.experts", 2, train_mesh, TRAIN, 0,
                      INTS(RS_REPLICATE, 0), 2);
  add_dtensor_or_fail(src, "w.norm", 2, train_mesh, TRAIN, 0,
                      INTS(RS_REPLICATE, RS_REPLICATE), 3);
  add_dtensor_or_fail(src, "w.all", 2, train_mesh, TRAIN, 0,
                      INTS(0, 1), 4);
  const int64_t tp4[2] = {24, 4}, tp2[2] = {48, 2}, every[1] = {WORLD};
  add_dtensor_or_fail(dst, "w.col", 2, tp4, INFER, TRAIN, INTS(RS_REPLICATE, 1),
                      0);
  add_dtensor_or_fail(dst, "w.row", 2, tp2, INFER, TRAIN, INTS(RS_REPLICATE, 0),
                      1);
  add_dtensor_or_fail(dst, "w.experts", 2, tp4, INFER, TRAIN,
                      INTS(RS_REPLICATE, 2), 2);
  add_dtensor_or_fail(dst, "w.norm", 2, tp2, INFER, TRAIN,
                      INTS(RS_REPLICATE, RS_REPLICATE), 3);
  add_dtensor_or_fail(dst, "w.all", 1, every, WORLD, 0, INTS(RS_REPLICATE),
                      5);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  int64_t moves = 0, forwarded = 0;
  cr_assert_eq(rs_plan_num_moves(plan, &moves), RS_OK);
  for (int64_t i = 0; i < plan->nmoves; i++)
    forwarded += plan->moves[i].route == RS_ROUTE_INTER &&
                 plan->moves[i].src_kind == RSI_EP_DST;
  cr_log_info("a job of 28 domains: %lld moves, %lld of them crossings "
              "forwarded down a chain", (long long)moves,
              (long long)forwarded);
  cr_assert_gt(forwarded, 100, "too few pieces travel down chains to "
               "check them");
  char why[256];
  cr_assert(th_same_domain_parts(plan, src, dst, why, sizeof why), "%s", why);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}
