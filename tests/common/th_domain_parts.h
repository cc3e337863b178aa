/* SPDX-License-Identifier: Apache-2.0 */
/* A destination domain's part (rsi_plan_create_domain, core/plan/plan.h)
 * against the whole plan: the part holds exactly the whole plan's moves
 * that land in the domain, and the parts of every domain together are the
 * whole plan. Moves are compared as a set, whatever their rounds (a part
 * is scheduled on its own, except by domain pair) and the numbers of
 * their relay slots (a slot is known by its rank and box). Needs core/'s
 * internal headers; no Criterion here, so the fuzz targets may include it
 * too. */
#ifndef RESHARD_TESTS_TH_DOMAIN_PARTS_H
#define RESHARD_TESTS_TH_DOMAIN_PARTS_H

#include <reshard/reshard.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* A move's words: its ends (a relay slot by its box), stage and flags,
 * dtypes, bytes, route, its box and its slot's box; and where rounds are
 * by domain pair, which a domain's part computes as the whole plan does,
 * its round and its slot's place in staging. */
#define TH_MOVE_WORDS (13 + 4 * RS_MAX_DIMS)

static inline int th_cmp_move_words(const void *a, const void *b) {
  return memcmp(a, b, TH_MOVE_WORDS * sizeof(int64_t));
}

static inline void th_move_words(const rs_plan *plan, int64_t i, int64_t *w) {
  const rsi_move *m = &plan->moves[i];
  int nd = plan->tensors[m->tensor].ndim;
  memset(w, 0, TH_MOVE_WORDS * sizeof *w);
  w[0] = m->tensor;
  w[1] = m->src_kind;
  w[2] = m->src_rank;
  w[3] = m->src_kind == RSI_EP_RELAY ? -1 : m->src_index;
  w[4] = m->dst_kind;
  w[5] = m->dst_rank;
  w[6] = m->dst_kind == RSI_EP_RELAY ? -1 : m->dst_index;
  w[7] = m->stage << 2 | m->forwarded << 1 | m->computes_scales;
  w[8] = m->src_dtype << 16 | m->wire_dtype << 8 | m->dst_dtype;
  w[9] = m->bytes;
  w[10] = m->route;
  int64_t relay = m->src_kind == RSI_EP_RELAY   ? m->src_index
                  : m->dst_kind == RSI_EP_RELAY ? m->dst_index
                                                : -1;
  if (plan->rounds_by_pair) {
    w[11] = m->round;
    w[12] = relay >= 0 ? plan->relays[relay].staging_offset : -1;
  }
  if (m->box >= 0)
    memcpy(w + 13, plan->boxes.v + m->box, (size_t)(2 * nd) * sizeof *w);
  if (relay >= 0)
    memcpy(w + 13 + 2 * RS_MAX_DIMS, plan->boxes.v + plan->relays[relay].box,
           (size_t)(2 * nd) * sizeof *w);
}

/* The moves of plan that land in domain id d, as sorted words (malloc'd,
 * NULL when out of memory); *n of them. */
static inline int64_t *th_moves_into(const rs_plan *plan, int d, int64_t *n) {
  int64_t *w =
      malloc((size_t)(plan->nmoves + 1) * TH_MOVE_WORDS * sizeof *w);
  *n = 0;
  if (!w) return NULL;
  for (int64_t i = 0; i < plan->nmoves; i++)
    if (plan->domain_of[plan->moves[i].dst_rank] == d)
      th_move_words(plan, i, w + (*n)++ * TH_MOVE_WORDS);
  qsort(w, (size_t)*n, TH_MOVE_WORDS * sizeof *w, th_cmp_move_words);
  return w;
}

/* Whether domain d's part of the plan from src to dst is the whole plan's
 * moves into d (else why says how not) with the whole plan's fingerprint,
 * is refused by execution and gives its JSON. *nmoves: the part's
 * moves. */
static inline bool th_same_domain_part(const rs_plan *whole,
                                       const rs_layout *src,
                                       const rs_layout *dst, int d,
                                       int64_t *nmoves, char *why,
                                       size_t cap) {
  rs_plan *part = NULL;
  *nmoves = 0;
  if (rsi_plan_create_domain(src, dst, d, &part) != RS_OK) {
    snprintf(why, cap, "the part of domain %d was not made", d);
    return false;
  }
  int64_t nw = 0, np = 0;
  int64_t *want = th_moves_into(whole, d, &nw);
  int64_t *got = th_moves_into(part, d, &np);
  bool same = want && got;
  if (!same) snprintf(why, cap, "out of memory");
  if (same && np != part->nmoves) {
    snprintf(why, cap, "the part of domain %d holds %lld moves landing "
             "elsewhere", d, (long long)(part->nmoves - np));
    same = false;
  }
  if (same && np != nw) {
    snprintf(why, cap, "the part of domain %d has %lld moves, the whole "
             "plan %lld into it", d, (long long)np, (long long)nw);
    same = false;
  }
  for (int64_t i = 0; same && i < nw; i++)
    if (th_cmp_move_words(want + i * TH_MOVE_WORDS, got + i * TH_MOVE_WORDS)) {
      const int64_t *g = got + i * TH_MOVE_WORDS;
      snprintf(why, cap, "the part of domain %d: its move %lld of %lld "
               "(sorted: tensor %lld, %lld -> %lld) is not the whole plan's",
               d, (long long)i, (long long)nw, (long long)g[0],
               (long long)g[2], (long long)g[5]);
      same = false;
    }
  if (same && rs_plan_execute(part) != RS_ERR_UNSUPPORTED) {
    snprintf(why, cap, "the part of domain %d was executed", d);
    same = false;
  }
  uint64_t fw = 0, fp = 1;
  rs_plan_fingerprint(whole, &fw);
  rs_plan_fingerprint(part, &fp);
  if (same && fw != fp) { /* a fingerprint is of the inputs, not the moves */
    snprintf(why, cap, "the part of domain %d has another fingerprint", d);
    same = false;
  }
  char *json = NULL;
  if (same && rs_plan_to_json(part, &json, NULL) != RS_OK) {
    snprintf(why, cap, "the part of domain %d gives no JSON", d);
    same = false;
  }
  rs_free(json);
  *nmoves = np;
  free(want);
  free(got);
  rs_plan_destroy(part);
  return same;
}

/* Every domain's part of the plan from src to dst (th_same_domain_part),
 * and together they hold every move of the whole plan. */
static inline bool th_same_domain_parts(const rs_plan *whole,
                                        const rs_layout *src,
                                        const rs_layout *dst, char *why,
                                        size_t cap) {
  int64_t covered = 0;
  for (int r = 0; r < whole->world_size; r++) {
    int d = whole->domain_of[r];
    bool seen = false;
    for (int q = 0; q < r && !seen; q++) seen = whole->domain_of[q] == d;
    if (seen) continue; /* checked at its first rank */
    int64_t n = 0;
    if (!th_same_domain_part(whole, src, dst, d, &n, why, cap)) return false;
    covered += n;
  }
  if (covered != whole->nmoves) {
    snprintf(why, cap, "the domains' parts hold %lld moves, the whole plan "
             "%lld", (long long)covered, (long long)whole->nmoves);
    return false;
  }
  return true;
}

/* The shape of rounds by domain pair: in every round a domain sends
 * across into one domain at most, and receives across from one at most,
 * except in a round of mixed units (core/plan/rounds.c), where every move
 * across lands in one domain. True for a plan of packed rounds. */
static inline int th_cmp_triples(const void *a, const void *b) {
  return memcmp(a, b, 3 * sizeof(int64_t));
}

static inline bool th_pair_rounds_hold(const rs_plan *plan, char *why,
                                       size_t cap) {
  if (!plan->rounds_by_pair) return true;
  /* (round, sending domain, receiving domain) of every move across */
  int64_t (*t)[3] = malloc((size_t)(plan->nmoves + 1) * sizeof *t), n = 0;
  if (!t) {
    snprintf(why, cap, "out of memory");
    return false;
  }
  for (int64_t i = 0; i < plan->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int s = plan->domain_of[m->src_rank], d = plan->domain_of[m->dst_rank];
    if (s == d) continue;
    t[n][0] = m->round;
    t[n][1] = s;
    t[n++][2] = d;
  }
  qsort(t, (size_t)n, sizeof *t, th_cmp_triples);
  /* the distinct triples, in order */
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (k == 0 || th_cmp_triples(t[i], t[k - 1]) != 0)
      memcpy(t[k++], t[i], sizeof *t);
  bool ok = true;
  for (int64_t b = 0, e; ok && b < k; b = e) {
    for (e = b; e < k && t[e][0] == t[b][0]; e++) continue;
    bool mixed = false; /* a domain receives from two */
    for (int64_t i = b; i < e && ok; i++) {
      if (i > b && t[i][1] == t[i - 1][1]) {
        snprintf(why, cap, "in round %lld domain %lld sends into domains "
                 "%lld and %lld", (long long)t[b][0], (long long)t[i][1],
                 (long long)t[i - 1][2], (long long)t[i][2]);
        ok = false;
      }
      for (int64_t j = i + 1; j < e; j++) mixed |= t[i][2] == t[j][2];
    }
    for (int64_t i = b + 1; mixed && ok && i < e; i++)
      if (t[i][2] != t[b][2]) {
        snprintf(why, cap, "in round %lld a domain receives from two "
                 "domains, and moves land in domains %lld and %lld too",
                 (long long)t[b][0], (long long)t[b][2], (long long)t[i][2]);
        ok = false;
      }
  }
  free(t);
  return ok;
}

#endif
