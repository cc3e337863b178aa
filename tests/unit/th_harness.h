/* SPDX-License-Identifier: Apache-2.0 */
/* An end-to-end harness over the public API for the exec and property
 * tests: declares tensors on both sides, adds shards while remembering
 * where each lives in local memory, allocates and binds every buffer
 * (sources filled with derived values, destinations poisoned), executes and
 * checks every destination element and every uncovered destination byte,
 * and cross-checks plan statistics against the move list.
 * Every assertion message starts with h->where (e.g. "seed=.. case=..") so
 * a failure can be replayed. */
#ifndef RESHARD_TESTS_TH_HARNESS_H
#define RESHARD_TESTS_TH_HARNESS_H

#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "th_util.h"

#define RH_MAX_WORLD 16
#define RH_MAX_BUF 8
#define RH_MAX_TENSORS 8
#define RH_SRC_FILL 0x5Au

typedef struct rh_tensor {
  char name[3100];
  rs_dtype dt;
  size_t esize;
  int ndim;
  int64_t shape[RS_MAX_DIMS];
} rh_tensor;

typedef struct rh {
  rs_context *ctx;
  rs_layout *lay[2]; /* RS_SIDE_SRC, RS_SIDE_DST */
  rs_plan *plan;
  int world;
  rh_tensor t[RH_MAX_TENSORS];
  int nt;
  th_shard *sh[2];
  bool *sh_strided[2];
  int nsh[2], cap[2];
  int64_t need[2][RH_MAX_WORLD][RH_MAX_BUF]; /* -1: buffer unused */
  unsigned char *buf[2][RH_MAX_WORLD][RH_MAX_BUF];
  size_t size[2][RH_MAX_WORLD][RH_MAX_BUF];
  int gen; /* bumps the values (re-execute after the source changed) */
  char where[160];
} rh;

static inline void rh_init(rh *h, int world, const char *where) {
  memset(h, 0, sizeof *h);
  cr_assert(world >= 1 && world <= RH_MAX_WORLD, "%s: world %d", where,
            world);
  h->world = world;
  snprintf(h->where, sizeof h->where, "%s", where ? where : "");
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < RH_MAX_WORLD; r++)
      for (int b = 0; b < RH_MAX_BUF; b++) h->need[s][r][b] = -1;
  rs_status st = rs_context_create_local(world, &h->ctx);
  cr_assert_eq(st, RS_OK, "%s: create_local(%d): %s", h->where, world,
               rs_last_error());
  for (int s = 0; s < 2; s++)
    cr_assert_eq(rs_layout_create(h->ctx, &h->lay[s]), RS_OK, "%s",
                 h->where);
}

static inline void rh_free_buffers(rh *h) {
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < RH_MAX_WORLD; r++)
      for (int b = 0; b < RH_MAX_BUF; b++) {
        free(h->buf[s][r][b]);
        h->buf[s][r][b] = NULL;
      }
}

static inline void rh_fini(rh *h) {
  rs_plan_destroy(h->plan);
  rs_layout_destroy(h->lay[0]);
  rs_layout_destroy(h->lay[1]);
  rs_context_destroy(h->ctx);
  rh_free_buffers(h);
  free(h->sh[0]);
  free(h->sh[1]);
  free(h->sh_strided[0]);
  free(h->sh_strided[1]);
  memset(h, 0, sizeof *h);
}

static inline int rh_tensor_id(const rh *h, const char *name) {
  for (int i = 0; i < h->nt; i++)
    if (strcmp(h->t[i].name, name) == 0) return i;
  cr_assert_fail("%s: tensor '%s' unknown to the harness", h->where, name);
  return -1;
}

/* Declare a tensor on both sides. Returns its id. */
static inline int rh_tensor_add(rh *h, const char *name, rs_dtype dt,
                                int ndim, const int64_t *shape) {
  cr_assert_lt(h->nt, RH_MAX_TENSORS, "%s", h->where);
  rh_tensor *t = &h->t[h->nt];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->dt = dt;
  t->esize = rs_dtype_size(dt);
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
  for (int s = 0; s < 2; s++) {
    rs_status st = rs_layout_add_tensor(h->lay[s], name, dt, ndim, shape);
    cr_assert_eq(st, RS_OK, "%s: add_tensor %s: %s (%s)", h->where, name,
                 rs_status_name(st), rs_context_last_error(h->ctx));
  }
  return h->nt++;
}

static inline void rh_record(rh *h, int side, const th_shard *s,
                             bool strided) {
  if (h->nsh[side] == h->cap[side]) {
    h->cap[side] = h->cap[side] ? 2 * h->cap[side] : 32;
    h->sh[side] = realloc(h->sh[side], (size_t)h->cap[side] * sizeof *s);
    h->sh_strided[side] =
        realloc(h->sh_strided[side], (size_t)h->cap[side] * sizeof(bool));
    cr_assert_not_null(h->sh[side]);
    cr_assert_not_null(h->sh_strided[side]);
  }
  h->sh[side][h->nsh[side]] = *s;
  h->sh_strided[side][h->nsh[side]] = strided;
  h->nsh[side]++;
  cr_assert(s->rank >= 0 && s->rank < h->world && s->buffer >= 0 &&
                s->buffer < RH_MAX_BUF,
            "%s: harness limits", h->where);
  int64_t end = s->byte_offset + th_shard_span(s);
  int64_t *n = &h->need[side][s->rank][s->buffer];
  if (end > *n) *n = end;
}

/* Bytes used so far in (side, rank, buffer): where the next shard may go. */
static inline int64_t rh_used(const rh *h, int side, int rank, int buffer) {
  int64_t n = h->need[side][rank][buffer];
  return n < 0 ? 0 : n;
}

/* Add one shard (strides NULL: dense, passed as NULL). */
static inline void rh_shard(rh *h, int side, const char *name, int rank,
                            const int64_t *off, const int64_t *ext,
                            int buffer, int64_t byte_offset,
                            const int64_t *strides) {
  int tid = rh_tensor_id(h, name);
  const rh_tensor *t = &h->t[tid];
  th_shard s;
  th_shard_init(&s, tid, t->ndim, t->shape, t->esize, rank, off, ext, buffer,
                byte_offset, strides);
  rs_status st = th_add(h->lay[side], name, &s, strides != NULL);
  cr_assert_eq(st, RS_OK, "%s: add_shard(%s, %s, rank %d, buffer %d, byte "
               "%lld): %s (%s)", h->where, side ? "dst" : "src", name, rank,
               buffer, (long long)byte_offset, rs_status_name(st),
               rs_context_last_error(h->ctx));
  rh_record(h, side, &s, strides != NULL);
}

/* Add a DTensor placement; records the non-empty local boxes (computed by
 * the test's own reference) as dense shards at (buffer, byte_offset). */
static inline void rh_dtensor(rh *h, int side, const char *name,
                              int mesh_ndim, const int64_t *mesh_shape,
                              const int *mesh_ranks, const int *placements,
                              int buffer, int64_t byte_offset) {
  int tid = rh_tensor_id(h, name);
  const rh_tensor *t = &h->t[tid];
  rs_status st = rs_layout_add_dtensor(h->lay[side], name, mesh_ndim,
                                       mesh_shape, mesh_ranks, placements,
                                       buffer, byte_offset);
  cr_assert_eq(st, RS_OK, "%s: add_dtensor(%s, %s): %s (%s)", h->where,
               side ? "dst" : "src", name, rs_status_name(st),
               rs_context_last_error(h->ctx));
  int64_t coord[RS_MAX_DIMS] = {0};
  int lin = 0;
  do {
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    th_ref_local_box(t->ndim, t->shape, mesh_ndim, mesh_shape, placements,
                     coord, off, ext);
    if (th_volume(t->ndim, ext) > 0) {
      th_shard s;
      th_shard_init(&s, tid, t->ndim, t->shape, t->esize, mesh_ranks[lin],
                    off, ext, buffer, byte_offset, NULL);
      rh_record(h, side, &s, false);
    }
    lin++;
  } while (th_next(mesh_ndim, mesh_shape, coord));
}

static inline void rh_plan(rh *h) {
  rs_plan_destroy(h->plan);
  h->plan = NULL;
  rs_status st = rs_plan_create(h->lay[0], h->lay[1], &h->plan);
  cr_assert_eq(st, RS_OK, "%s: plan_create: %s (%s)", h->where,
               rs_status_name(st), rs_context_last_error(h->ctx));
  cr_assert_not_null(h->plan, "%s", h->where);
}

static inline th_shard rh_gen_shard(const rh *h, const th_shard *s) {
  th_shard c = *s;
  c.gen = (uint64_t)h->gen;
  return c;
}

/* Fill the sources with generation h->gen's values. */
static inline void rh_fill_sources(rh *h) {
  for (int r = 0; r < h->world; r++)
    for (int b = 0; b < RH_MAX_BUF; b++)
      if (h->buf[0][r][b]) memset(h->buf[0][r][b], RH_SRC_FILL,
                                  h->size[0][r][b]);
  for (int i = 0; i < h->nsh[0]; i++) {
    const th_shard *s = &h->sh[0][i];
    th_shard c = rh_gen_shard(h, s);
    th_fill(h->buf[0][s->rank][s->buffer], &c);
  }
}

static inline void rh_poison_destinations(rh *h) {
  for (int r = 0; r < h->world; r++)
    for (int b = 0; b < RH_MAX_BUF; b++)
      if (h->buf[1][r][b]) memset(h->buf[1][r][b], TH_POISON,
                                  h->size[1][r][b]);
}

/* Allocate every used buffer (need + slack bytes), fill, poison, bind. */
static inline void rh_alloc_bind(rh *h, int64_t slack) {
  rh_free_buffers(h);
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < h->world; r++)
      for (int b = 0; b < RH_MAX_BUF; b++) {
        if (h->need[s][r][b] < 0) continue;
        size_t n = (size_t)(h->need[s][r][b] + slack);
        if (n == 0) n = 1;
        h->buf[s][r][b] = malloc(n);
        cr_assert_not_null(h->buf[s][r][b]);
        h->size[s][r][b] = n;
      }
  rh_fill_sources(h);
  rh_poison_destinations(h);
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < h->world; r++)
      for (int b = 0; b < RH_MAX_BUF; b++) {
        if (!h->buf[s][r][b]) continue;
        rs_status st = rs_plan_bind(h->plan, (rs_side)s, r, b,
                                    h->buf[s][r][b], h->size[s][r][b]);
        cr_assert_eq(st, RS_OK, "%s: bind(%s, rank %d, buffer %d, %zu "
                     "bytes): %s (%s)", h->where, s ? "dst" : "src", r, b,
                     h->size[s][r][b], rs_status_name(st),
                     rs_context_last_error(h->ctx));
      }
}

static inline void rh_execute(rh *h) {
  rs_status st = rs_plan_execute(h->plan);
  cr_assert_eq(st, RS_OK, "%s: execute: %s (%s)", h->where,
               rs_status_name(st), rs_context_last_error(h->ctx));
}

/* Every destination element holds its value; every destination byte no
 * shard covers still holds the poison. */
static inline void rh_check_destinations(const rh *h) {
  for (int i = 0; i < h->nsh[1]; i++) {
    const th_shard *s = &h->sh[1][i];
    th_shard c = rh_gen_shard(h, s);
    uint64_t got = 0, want = 0;
    int64_t bad = th_check(h->buf[1][s->rank][s->buffer], &c, &got, &want);
    if (bad >= 0)
      cr_assert_fail("%s: tensor %s dst shard %d (rank %d buffer %d byte "
                     "%lld%s): element %lld is 0x%llx, want 0x%llx",
                     h->where, h->t[s->tid].name, i, s->rank, s->buffer,
                     (long long)s->byte_offset,
                     h->sh_strided[1][i] ? ", strided" : "", (long long)bad,
                     (unsigned long long)got, (unsigned long long)want);
  }
  for (int r = 0; r < h->world; r++)
    for (int b = 0; b < RH_MAX_BUF; b++) {
      if (!h->buf[1][r][b]) continue;
      size_t n = h->size[1][r][b];
      unsigned char *cov = calloc(n, 1);
      cr_assert_not_null(cov);
      for (int i = 0; i < h->nsh[1]; i++) {
        const th_shard *s = &h->sh[1][i];
        if (s->rank == r && s->buffer == b) th_mark(cov, s);
      }
      for (size_t k = 0; k < n; k++)
        if (!cov[k] && h->buf[1][r][b][k] != TH_POISON) {
          unsigned v = h->buf[1][r][b][k];
          free(cov);
          cr_assert_fail("%s: dst rank %d buffer %d byte %zu (covered by no "
                         "shard) changed from poison to 0x%02x", h->where, r,
                         b, k, v);
        }
      free(cov);
    }
}

/* Source buffers are read, never written. */
static inline void rh_check_sources_intact(rh *h) {
  unsigned char *copy[RH_MAX_WORLD][RH_MAX_BUF] = {{0}};
  for (int r = 0; r < h->world; r++)
    for (int b = 0; b < RH_MAX_BUF; b++)
      if (h->buf[0][r][b]) {
        copy[r][b] = malloc(h->size[0][r][b]);
        memcpy(copy[r][b], h->buf[0][r][b], h->size[0][r][b]);
      }
  rh_fill_sources(h); /* rewrite what they should hold */
  for (int r = 0; r < h->world; r++)
    for (int b = 0; b < RH_MAX_BUF; b++)
      if (copy[r][b]) {
        int diff = memcmp(copy[r][b], h->buf[0][r][b], h->size[0][r][b]);
        free(copy[r][b]);
        cr_assert_eq(diff, 0, "%s: src rank %d buffer %d was written",
                     h->where, r, b);
      }
}

static inline int64_t rh_stat(const rh *h, int rank, rs_stat stat) {
  int64_t v = -1;
  rs_status st = rs_plan_stat(h->plan, rank, stat, &v);
  cr_assert_eq(st, RS_OK, "%s: stat %d rank %d: %s", h->where, (int)stat,
               rank, rs_status_name(st));
  return v;
}

static inline int rh_domain(const rh *h, int rank) {
  int d = -1;
  cr_assert_eq(rs_context_get_domain(h->ctx, rank, &d), RS_OK, "%s",
               h->where);
  return d;
}

/* Map the plan's tensor index to the harness's. */
static inline int rh_plan_tensor(const rh *h, int pt) {
  const char *name = NULL;
  int nd = 0;
  cr_assert_eq(rs_plan_tensor_info(h->plan, pt, &name, &nd), RS_OK, "%s",
               h->where);
  int tid = rh_tensor_id(h, name);
  cr_assert_eq(nd, h->t[tid].ndim, "%s: tensor %s ndim", h->where, name);
  return tid;
}

typedef struct rh_move {
  int tid, src, dst, round, fw;
  rs_route route;
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
} rh_move;

/* All moves of the plan (caller frees), each checked for sanity. */
static inline rh_move *rh_moves(const rh *h, int64_t *count) {
  int64_t n = -1;
  cr_assert_eq(rs_plan_num_moves(h->plan, &n), RS_OK, "%s", h->where);
  cr_assert_geq(n, 0, "%s", h->where);
  int nt = -1;
  cr_assert_eq(rs_plan_num_tensors(h->plan, &nt), RS_OK, "%s", h->where);
  int map[RH_MAX_TENSORS];
  cr_assert(nt >= 0 && nt <= RH_MAX_TENSORS, "%s: %d plan tensors",
            h->where, nt);
  for (int i = 0; i < nt; i++) map[i] = rh_plan_tensor(h, i);
  rh_move *m = calloc((size_t)(n ? n : 1), sizeof *m);
  cr_assert_not_null(m);
  int64_t rounds = rh_stat(h, RS_ALL_RANKS, RS_STAT_ROUNDS);
  for (int64_t i = 0; i < n; i++) {
    int pt = -1;
    rs_status st = rs_plan_move_info(h->plan, i, &pt, &m[i].src, &m[i].dst,
                                     &m[i].route, &m[i].round, &m[i].fw);
    cr_assert_eq(st, RS_OK, "%s: move_info %lld", h->where, (long long)i);
    cr_assert(pt >= 0 && pt < nt, "%s: move %lld tensor %d", h->where,
              (long long)i, pt);
    m[i].tid = map[pt];
    const rh_tensor *t = &h->t[m[i].tid];
    cr_assert_eq(rs_plan_move_box(h->plan, i, m[i].off, m[i].ext), RS_OK,
                 "%s", h->where);
    for (int d = 0; d < t->ndim; d++)
      if (m[i].ext[d] < 1 || m[i].off[d] < 0 ||
          m[i].off[d] + m[i].ext[d] > t->shape[d])
        cr_assert_fail("%s: move %lld of %s: dim %d box [%lld, +%lld) "
                       "outside shape %lld", h->where, (long long)i, t->name,
                       d, (long long)m[i].off[d], (long long)m[i].ext[d],
                       (long long)t->shape[d]);
    cr_assert(m[i].src >= 0 && m[i].src < h->world && m[i].dst >= 0 &&
                  m[i].dst < h->world,
              "%s: move %lld ranks %d->%d", h->where, (long long)i, m[i].src,
              m[i].dst);
    cr_assert(m[i].round >= 0 && m[i].round < rounds, "%s: move %lld round "
              "%d of %lld", h->where, (long long)i, m[i].round,
              (long long)rounds);
    cr_assert(m[i].fw == 0 || m[i].fw == 1, "%s", h->where);
    int ds = rh_domain(h, m[i].src), dd = rh_domain(h, m[i].dst);
    switch (m[i].route) {
    case RS_ROUTE_LOCAL:
      cr_assert_eq(m[i].src, m[i].dst, "%s: local move %lld %d->%d",
                   h->where, (long long)i, m[i].src, m[i].dst);
      break;
    case RS_ROUTE_INTRA:
      cr_assert(m[i].src != m[i].dst && ds == dd, "%s: intra move %lld "
                "%d(dom %d)->%d(dom %d)", h->where, (long long)i, m[i].src,
                ds, m[i].dst, dd);
      break;
    case RS_ROUTE_INTER:
      cr_assert(ds != dd, "%s: inter move %lld %d(dom %d)->%d(dom %d)",
                h->where, (long long)i, m[i].src, ds, m[i].dst, dd);
      cr_assert_eq(m[i].fw, 0, "%s: a forwarded move crosses domains",
                   h->where);
      break;
    default:
      cr_assert_fail("%s: move %lld route %d", h->where, (long long)i,
                     (int)m[i].route);
    }
  }
  *count = n;
  return m;
}

static inline bool rh_boxes_meet(int ndim, const rh_move *a,
                                 const rh_move *b) {
  for (int d = 0; d < ndim; d++) {
    int64_t lo = a->off[d] > b->off[d] ? a->off[d] : b->off[d];
    int64_t ha = a->off[d] + a->ext[d], hb = b->off[d] + b->ext[d];
    if ((ha < hb ? ha : hb) <= lo) return false;
  }
  return true;
}

/* Byte accounting and the send-across-once rule:
 * - sum over ranks of sent (intra+inter) == sum of received == the bytes of
 *   the plan's non-local moves; RS_ALL_RANKS sums agree;
 * - per (tensor, destination domain), INTER move boxes are pairwise
 *   disjoint;
 * - every rank's staging <= the staging setting the plan was made with. */
static inline void rh_check_stats(const rh *h, int64_t staging_limit) {
  int64_t n = 0;
  rh_move *m = rh_moves(h, &n);
  int64_t sent = 0, recv = 0, moved = 0, local_moves = 0, max_stage = 0;
  int64_t max_rounds = 0, msent = 0, mrecv = 0, part = 0, relay_copies = 0;
  for (int r = 0; r < h->world; r++) {
    int64_t rank_sent = rh_stat(h, r, RS_STAT_BYTES_SENT_INTRA) +
                        rh_stat(h, r, RS_STAT_BYTES_SENT_INTER);
    int64_t rank_recv = rh_stat(h, r, RS_STAT_BYTES_RECV_INTRA) +
                        rh_stat(h, r, RS_STAT_BYTES_RECV_INTER);
    /* what goes through staging as it is, a part of what moves */
    int64_t packed = rh_stat(h, r, RS_STAT_BYTES_PACKED);
    int64_t unpacked = rh_stat(h, r, RS_STAT_BYTES_UNPACKED);
    cr_assert(packed >= 0 && packed <= rank_sent, "%s: rank %d packs %lld "
              "of the %lld bytes it sends", h->where, r, (long long)packed,
              (long long)rank_sent);
    cr_assert(unpacked >= 0 && unpacked <= rank_recv, "%s: rank %d unpacks "
              "%lld of the %lld bytes it receives", h->where, r,
              (long long)unpacked, (long long)rank_recv);
    sent += rank_sent;
    recv += rank_recv;
    local_moves += rh_stat(h, r, RS_STAT_BYTES_LOCAL);
    relay_copies += rh_stat(h, r, RS_STAT_BYTES_COPIED_FROM_RELAY);
    int64_t stg = rh_stat(h, r, RS_STAT_STAGING_BYTES);
    cr_assert(stg >= 0 && stg <= staging_limit, "%s: rank %d staging %lld > "
              "limit %lld", h->where, r, (long long)stg,
              (long long)staging_limit);
    if (stg > max_stage) max_stage = stg;
    msent += rh_stat(h, r, RS_STAT_MESSAGES_SENT);
    mrecv += rh_stat(h, r, RS_STAT_MESSAGES_RECV);
    part += rh_stat(h, r, RS_STAT_MOVES);
    int64_t rr = rh_stat(h, r, RS_STAT_ROUNDS);
    if (rr > max_rounds) max_rounds = rr;
  }
  int64_t local_bytes = 0, forwarded_local = 0, want_part = 0;
  for (int64_t i = 0; i < n; i++) {
    const rh_tensor *t = &h->t[m[i].tid];
    int64_t bytes = th_volume(t->ndim, m[i].ext) * (int64_t)t->esize;
    if (m[i].route == RS_ROUTE_LOCAL) {
      local_bytes += bytes;
      if (m[i].fw) forwarded_local += bytes;
    } else
      moved += bytes;
    want_part += m[i].route == RS_ROUTE_LOCAL ? 1 : 2;
  }
  cr_assert_eq(msent, mrecv, "%s: messages sent %lld != received %lld",
               h->where, (long long)msent, (long long)mrecv);
  cr_assert_eq(part, want_part, "%s: sum of RS_STAT_MOVES %lld, but the "
               "moves involve ranks %lld times (local once, others twice)",
               h->where, (long long)part, (long long)want_part);
  if (n > 0)
    cr_assert_geq(max_rounds, 1, "%s: %lld moves in 0 rounds", h->where,
                  (long long)n);
  cr_assert_eq(sent, recv, "%s: bytes sent %lld != received %lld", h->where,
               (long long)sent, (long long)recv);
  cr_assert_eq(sent, moved, "%s: bytes sent %lld != non-local move bytes "
               "%lld", h->where, (long long)sent, (long long)moved);
  /* a copy out of a relay slot is a local move of the forwards' stage */
  cr_assert_eq(local_moves + relay_copies, local_bytes, "%s: BYTES_LOCAL "
               "%lld + BYTES_COPIED_FROM_RELAY %lld != local move bytes "
               "%lld", h->where, (long long)local_moves,
               (long long)relay_copies, (long long)local_bytes);
  cr_assert_leq(relay_copies, forwarded_local, "%s: BYTES_COPIED_FROM_RELAY "
                "%lld > bytes of forwarded local moves %lld", h->where,
                (long long)relay_copies, (long long)forwarded_local);
  cr_assert_eq(rh_stat(h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA) +
                   rh_stat(h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER),
               sent, "%s: RS_ALL_RANKS sent differs from the per-rank sum",
               h->where);
  cr_assert_eq(rh_stat(h, RS_ALL_RANKS, RS_STAT_STAGING_BYTES), max_stage,
               "%s: RS_ALL_RANKS staging is not the maximum", h->where);
  cr_assert_eq(rh_stat(h, RS_ALL_RANKS, RS_STAT_ROUNDS), max_rounds,
               "%s: RS_ALL_RANKS rounds is not the maximum", h->where);
  for (int64_t i = 0; i < n; i++) {
    if (m[i].route != RS_ROUTE_INTER) continue;
    int di = rh_domain(h, m[i].dst);
    for (int64_t j = i + 1; j < n; j++) {
      if (m[j].route != RS_ROUTE_INTER || m[j].tid != m[i].tid) continue;
      if (rh_domain(h, m[j].dst) != di) continue;
      if (rh_boxes_meet(h->t[m[i].tid].ndim, &m[i], &m[j]))
        cr_assert_fail("%s: tensor %s crosses into domain %d twice: inter "
                       "moves %lld (%d->%d) and %lld (%d->%d) overlap",
                       h->where, h->t[m[i].tid].name, di, (long long)i,
                       m[i].src, m[i].dst, (long long)j, m[j].src, m[j].dst);
    }
  }
  free(m);
}

static inline bool rh_move_meets_shard(const rh_move *m, const th_shard *s) {
  for (int d = 0; d < s->ndim; d++) {
    int64_t lo = m->off[d] > s->off[d] ? m->off[d] : s->off[d];
    int64_t hm = m->off[d] + m->ext[d], hs = s->off[d] + s->ext[d];
    if ((hm < hs ? hm : hs) <= lo) return false;
  }
  return true;
}

/* Locality first: no move between ranks carries an element that the
 * receiving rank holds in a source shard of its own, and no move across
 * domains carries one that any rank of the receiving domain holds. */
static inline void rh_check_locality(const rh *h) {
  int64_t n = 0;
  rh_move *m = rh_moves(h, &n);
  for (int64_t i = 0; i < n; i++) {
    if (m[i].route == RS_ROUTE_LOCAL) continue;
    int dd = rh_domain(h, m[i].dst);
    for (int k = 0; k < h->nsh[RS_SIDE_SRC]; k++) {
      const th_shard *s = &h->sh[RS_SIDE_SRC][k];
      if (s->tid != m[i].tid || !rh_move_meets_shard(&m[i], s)) continue;
      if (s->rank == m[i].dst)
        cr_assert_fail("%s: move %lld of %s (%d->%d) sends elements rank %d "
                       "holds in its own source shard %d", h->where,
                       (long long)i, h->t[m[i].tid].name, m[i].src, m[i].dst,
                       m[i].dst, k);
      if (m[i].route == RS_ROUTE_INTER && rh_domain(h, s->rank) == dd)
        cr_assert_fail("%s: move %lld of %s (%d->%d) crosses into domain %d, "
                       "where rank %d holds its elements (source shard %d)",
                       h->where, (long long)i, h->t[m[i].tid].name, m[i].src,
                       m[i].dst, dd, s->rank, k);
    }
  }
  free(m);
}

/* Two plans made from the same inputs have the same moves, in order. */
static inline void rh_same_moves(const rh *a, const rs_plan *other) {
  char why[256];
  cr_assert(th_same_moves_of(a->plan, other, -1, why, sizeof why),
            "%s: two plans of the same inputs: %s", a->where, why);
}

/* The usual end-to-end run: plan, buffers, execute, check. */
static inline void rh_run(rh *h) {
  rh_plan(h);
  rh_alloc_bind(h, 8);
  rh_execute(h);
  rh_check_destinations(h);
}

#endif
