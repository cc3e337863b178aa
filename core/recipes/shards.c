/* SPDX-License-Identifier: Apache-2.0 */
/* A recipe's shards in memory: the dtypes each side declares (fp8 where
 * every engine shard holds whole blocks, the members of one fused buffer
 * together or not at all), the trainer's parameter buffers (one per dtype,
 * tensor after tensor), the engine's buffers (one per parameter, fused
 * ones shared at byte offsets; w13 interleaved per expert; the fp8 block
 * scales of each in a weight_scale_inv buffer of its own, packed alike),
 * and their names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "recipes/recipes.h"

static void dense_strides(int ndim, const int64_t *ext, int64_t *s) {
  int64_t x = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    s[d] = x;
    x *= ext[d];
  }
}

static int64_t volume(int ndim, const int64_t *ext) {
  int64_t v = 1;
  for (int d = 0; d < ndim; d++) v *= ext[d];
  return v;
}

static int64_t block_of(const rs_recipe *r, int ndim, int d) {
  if (d == ndim - 1) return r->block_cols;
  return d == ndim - 2 ? r->block_rows : 1;
}

void rsi_scale_name(const char *values, char *out, size_t n) {
  snprintf(out, n, "%s_scale_inv", values);
}

void rsi_scale_box(int ndim, const int64_t *off, const int64_t *ext,
                   int64_t rows, int64_t cols, int64_t *soff, int64_t *sext) {
  for (int d = 0; d < ndim; d++) {
    soff[d] = off[d];
    sext[d] = ext[d];
  }
  for (int d = ndim >= 2 ? ndim - 2 : 0; d < ndim; d++) {
    int64_t bs = d == ndim - 1 ? cols : d == ndim - 2 ? rows : 1;
    int64_t first = off[d] / bs;
    int64_t end = (off[d] + ext[d] + bs - 1) / bs;
    soff[d] = first;
    sext[d] = end - first;
  }
}

static bool quantizable(const rsi_rtensor *t) {
  switch (t->role) {
    case RS_ROLE_COL:
    case RS_ROLE_ROW:
    case RS_ROLE_REPL:
    case RS_ROLE_EXPERT_COL:
    case RS_ROLE_EXPERT_ROW:
      return t->ndim >= 2;
    default:
      return false;
  }
}

/* Whether every engine shard of tensor t holds whole blocks; if not, the
 * first shard that cuts one goes to td->cut. */
static bool whole_blocks(const rs_recipe *r, int t, rsi_tdtype *td) {
  const rsi_rtensor *x = &r->model->t[t];
  const rsi_mesh *mesh = &r->dmesh[t];
  int64_t off[RSI_RMAXD], ext[RSI_RMAXD];
  int rank;
  for (int i = 0, n = rsi_mesh_size(mesh); i < n; i++) {
    if (!rsi_mesh_box(mesh, x, i, off, ext, NULL, &rank)) continue;
    for (int d = x->ndim - 2; d < x->ndim; d++) {
      int64_t bs = block_of(r, x->ndim, d);
      bool at_end = off[d] + ext[d] == x->shape[d];
      if (off[d] % bs || (!at_end && ext[d] % bs)) {
        td->cut[0] = d;
        td->cut[1] = off[d];
        td->cut[2] = ext[d];
        return false;
      }
    }
  }
  return true;
}

void rsi_recipe_decide(rs_recipe *r) {
  const rs_model *m = r->model;
  bool fp8 = r->infer_dtype == RS_DTYPE_F8_E4M3;
  for (int s = 0; s < 2; s++) {
    rsi_shard_cache *c = &r->cache[s];
    free(c->s);
    free(c->first);
    free(c->by_rank);
    free(c->nbytes);
    memset(c, 0, sizeof *c);
  }
  /* fused groups with a member whose blocks are cut */
  char *group_cut = r->group_cut;
  memset(group_cut, 0, (size_t)m->nfuse + 1);
  for (int t = 0; t < m->n; t++) {
    const rsi_rtensor *x = &m->t[t];
    rsi_tdtype *d = &r->td[t];
    memset(d, 0, sizeof *d);
    d->src = r->train_dtype == RS_DTYPE_F32 ? RS_DTYPE_F32 : x->dtype;
    d->dst = r->infer_dtype == RS_DTYPE_F32 ? RS_DTYPE_F32 : x->dtype;
    if (!fp8 || !quantizable(x)) continue;
    if (whole_blocks(r, t, d)) {
      d->scaled = true;
    } else {
      d->kept = RS_FP8_KEPT_BLOCKS_CUT;
      if (x->fuse_group >= 0) group_cut[x->fuse_group] = 1;
    }
  }
  for (int t = 0; t < m->n; t++) {
    const rsi_rtensor *x = &m->t[t];
    rsi_tdtype *d = &r->td[t];
    if (d->scaled && x->fuse_group >= 0 && group_cut[x->fuse_group]) {
      d->scaled = false;
      d->kept = RS_FP8_KEPT_FUSED;
    }
    if (d->scaled) d->dst = RS_DTYPE_F8_E4M3;
  }
}

/* ---- shards ----------------------------------------------------------------
 */

static rs_status src_shards(const rs_recipe *r, int rank, rsi_shard_fn fn,
                            void *arg, rsi_err *err) {
  const rs_model *m = r->model;
  int64_t *off = calloc((size_t)r->train.world * 2, sizeof *off);
  if (!off) return RSI_NOMEM(err);
  rs_status st = RS_OK;
  for (int t = 0; st == RS_OK && t < m->n; t++) {
    const rsi_rtensor *x = &m->t[t];
    const rsi_mesh *mesh = &r->smesh[t];
    rs_dtype dtype = r->td[t].src;
    int64_t esize = (int64_t)rsi_dtype_size(dtype);
    int buf = dtype == RS_DTYPE_F32 ? 1 : 0;
    for (int i = 0, n = rsi_mesh_size(mesh); st == RS_OK && i < n; i++) {
      rsi_rshard s;
      int64_t held[RSI_RMAXD];
      memset(&s, 0, sizeof s);
      if (!rsi_mesh_box(mesh, x, i, s.off, s.ext, held, &s.rank)) continue;
      s.tensor = t;
      s.buffer = buf;
      s.byte_offset = off[2 * s.rank + buf];
      dense_strides(x->ndim, held, s.strides);
      off[2 * s.rank + buf] += volume(x->ndim, held) * esize;
      s.held_end = off[2 * s.rank + buf];
      if (rank < 0 || rank == s.rank) st = fn(&s, arg);
    }
  }
  free(off);
  return st;
}

/* One fused group (or one tensor) on every engine rank: its values, or
 * (scales) the block scales of its fp8 members, which vLLM keeps as it
 * keeps the values: in the group's own weight_scale_inv buffer, member
 * after member (per expert for w13), in block coordinates. */
static rs_status dst_group(const rs_recipe *r, int rank, const int *members,
                           int nm, bool scales, rsi_shard_fn fn, void *arg,
                           rsi_err *err) {
  const rs_model *m = r->model;
  const int ninf = r->infer.world;
  rsi_rshard *box = malloc(sizeof *box * (size_t)ninf * (size_t)nm);
  int64_t *held = malloc(sizeof *held * RSI_RMAXD * (size_t)ninf * (size_t)nm);
  char *has = calloc((size_t)ninf * (size_t)nm, 1);
  if (!box || !held || !has) {
    free(box);
    free(held);
    free(has);
    return RSI_NOMEM(err);
  }
  for (int k = 0; k < nm; k++) {
    const rsi_mesh *mesh = &r->dmesh[members[k]];
    const rsi_rtensor *x = &m->t[members[k]];
    if (scales && !r->td[members[k]].scaled) continue;
    for (int i = 0, n = rsi_mesh_size(mesh); i < n; i++) {
      rsi_rshard s;
      memset(&s, 0, sizeof s);
      int64_t h[RSI_RMAXD];
      if (!rsi_mesh_box(mesh, x, i, s.off, s.ext, h, &s.rank)) continue;
      if (scales) { /* fp8 tensors hold whole blocks: no padding rows */
        rsi_scale_box(x->ndim, s.off, s.ext, r->block_rows, r->block_cols,
                      s.off, s.ext);
        memcpy(h, s.ext, sizeof h);
      }
      int q = s.rank - r->infer_first;
      box[(size_t)q * nm + k] = s;
      memcpy(&held[((size_t)q * nm + k) * RSI_RMAXD], h, sizeof h);
      has[(size_t)q * nm + k] = 1;
    }
  }
  rs_status st = RS_OK;
  for (int q = 0; st == RS_OK && q < ninf; q++) {
    int64_t at = 0;
    for (int k = 0; st == RS_OK && k < nm; k++) {
      if (!has[(size_t)q * nm + k]) continue;
      const rsi_rtensor *x = &m->t[members[k]];
      int64_t esize = (int64_t)rsi_dtype_size(scales ? RS_DTYPE_F32
                                                     : r->td[members[k]].dst);
      rsi_rshard s = box[(size_t)q * nm + k];
      s.tensor = members[k];
      s.scales = scales;
      s.buffer = r->buf_of[members[k]] + (scales ? r->nvalue_buffers : 0);
      if (x->fuse == RS_FUSE_W13) {
        /* [E_loc, sum of slot rows, H]: per expert, slot rows in order */
        int64_t rows = 0, before = 0;
        for (int j = 0; j < nm; j++) {
          if (!has[(size_t)q * nm + j]) continue;
          if (j < k) before += box[(size_t)q * nm + j].ext[1];
          rows += box[(size_t)q * nm + j].ext[1];
        }
        s.strides[2] = 1;
        s.strides[1] = s.ext[2];
        s.strides[0] = rows * s.ext[2];
        s.byte_offset = before * s.ext[2] * esize;
      } else {
        const int64_t *h = &held[((size_t)q * nm + k) * RSI_RMAXD];
        dense_strides(x->ndim, h, s.strides);
        s.byte_offset = at;
        at += volume(x->ndim, h) * esize;
        s.held_end = at;
      }
      if (rank < 0 || rank == s.rank) st = fn(&s, arg);
    }
  }
  free(box);
  free(held);
  free(has);
  return st;
}

/* Every fused group (or lone tensor) of the engine, values or scales.
 * Groups are walked as units so each slot knows its predecessors. */
static rs_status dst_groups(const rs_recipe *r, int rank, bool scales,
                            rsi_shard_fn fn, void *arg, rsi_err *err) {
  const rs_model *m = r->model;
  char *done = calloc((size_t)m->n + 1, 1);
  if (!done) return RSI_NOMEM(err);
  int members[8];
  rs_status st = RS_OK;
  for (int t0 = 0; st == RS_OK && t0 < m->n; t0++) {
    if (done[t0]) continue;
    int nm = 0;
    const rsi_rtensor *x0 = &m->t[t0];
    if (x0->fuse_group < 0) {
      members[nm++] = t0;
    } else {
      for (int slot = 0; slot < 8; slot++)
        for (int t = t0; t < m->n && t < t0 + 16 && nm < 8; t++)
          if (m->t[t].fuse_group == x0->fuse_group && m->t[t].fuse_slot == slot)
            members[nm++] = t;
    }
    for (int k = 0; k < nm; k++) done[members[k]] = 1;
    st = dst_group(r, rank, members, nm, scales, fn, arg, err);
  }
  free(done);
  return st;
}

/* The values of every tensor, then the fp8 scales. */
static rs_status dst_shards(const rs_recipe *r, int rank, rsi_shard_fn fn,
                            void *arg, rsi_err *err) {
  rs_status st = dst_groups(r, rank, false, fn, arg, err);
  return st == RS_OK ? dst_groups(r, rank, true, fn, arg, err) : st;
}

rs_status rsi_recipe_shards(const rs_recipe *r, rs_side side, int rank,
                            rsi_shard_fn fn, void *arg, rsi_err *err) {
  return side == RS_SIDE_SRC ? src_shards(r, rank, fn, arg, err)
                             : dst_shards(r, rank, fn, arg, err);
}

/* ---- the cache behind the shard and buffer queries --------------------------
 */

typedef struct collect {
  rsi_shard_cache *c;
  int64_t cap;
} collect;

static rs_status keep(const rsi_rshard *s, void *arg) {
  collect *k = arg;
  rsi_shard_cache *c = k->c;
  if (c->n == k->cap) {
    int64_t cap = k->cap ? 2 * k->cap : 1024;
    rsi_rshard *n = realloc(c->s, sizeof *n * (size_t)cap);
    if (!n) return RS_ERR_NO_MEMORY;
    c->s = n;
    k->cap = cap;
  }
  c->s[c->n++] = *s;
  return RS_OK;
}

static rs_status fill_cache(rs_recipe *r, rs_side side, rsi_err *err);

rs_status rsi_recipe_cache(rs_recipe *r, rs_side side, rsi_err *err) {
  pthread_mutex_lock(&r->cache_lock);
  rs_status st = fill_cache(r, side, err);
  pthread_mutex_unlock(&r->cache_lock);
  return st;
}

static rs_status fill_cache(rs_recipe *r, rs_side side, rsi_err *err) {
  rsi_shard_cache *c = &r->cache[side == RS_SIDE_SRC ? 0 : 1];
  if (c->first) return RS_OK;
  collect k = {c, 0};
  rs_status st = rsi_recipe_shards(r, side, -1, keep, &k, err);
  int nranks =
      side == RS_SIDE_SRC ? r->train.world : r->infer_first + r->infer.world;
  int nbuf = side == RS_SIDE_SRC ? 2 : r->ninfer_buffers;
  if (st == RS_OK) {
    c->first = calloc((size_t)nranks + 1, sizeof *c->first);
    c->by_rank = malloc(sizeof *c->by_rank * (size_t)(c->n ? c->n : 1));
    c->nbytes = calloc((size_t)nranks * (size_t)nbuf, sizeof *c->nbytes);
    if (!c->first || !c->by_rank || !c->nbytes) st = RS_ERR_NO_MEMORY;
  }
  if (st != RS_OK) {
    free(c->s);
    free(c->first);
    free(c->by_rank);
    free(c->nbytes);
    memset(c, 0, sizeof *c);
    return st == RS_ERR_NO_MEMORY ? RSI_NOMEM(err) : st;
  }
  c->nranks = nranks;
  c->nbuffers = nbuf;
  for (int64_t i = 0; i < c->n; i++) c->first[c->s[i].rank + 1]++;
  for (int q = 0; q < nranks; q++) c->first[q + 1] += c->first[q];
  int64_t *fill = c->nbytes; /* borrowed as a cursor, zeroed below */
  for (int q = 0; q < nranks; q++) fill[q] = c->first[q];
  for (int64_t i = 0; i < c->n; i++) c->by_rank[fill[c->s[i].rank]++] = i;
  memset(c->nbytes, 0, sizeof *c->nbytes * (size_t)nranks * (size_t)nbuf);
  for (int64_t i = 0; i < c->n; i++) {
    const rsi_rshard *s = &c->s[i];
    const rsi_rtensor *x = &r->model->t[s->tensor];
    rs_dtype dt = s->scales             ? RS_DTYPE_F32
                  : side == RS_SIDE_SRC ? r->td[s->tensor].src
                                        : r->td[s->tensor].dst;
    int64_t last = 0;
    for (int d = 0; d < x->ndim; d++) last += (s->ext[d] - 1) * s->strides[d];
    int64_t end = s->byte_offset + (last + 1) * (int64_t)rsi_dtype_size(dt);
    if (s->held_end > end) end = s->held_end;
    int64_t *nb =
        &c->nbytes[(size_t)s->rank * (size_t)nbuf + (size_t)s->buffer];
    if (end > *nb) *nb = end;
  }
  return RS_OK;
}

/* ---- creating a recipe
 * -------------------------------------------------------- */

void rsi_recipe_free(rs_recipe *r) {
  if (!r) return;
  pthread_mutex_destroy(&r->cache_lock);
  for (int s = 0; s < 2; s++) {
    free(r->cache[s].s);
    free(r->cache[s].first);
    free(r->cache[s].by_rank);
    free(r->cache[s].nbytes);
  }
  if (r->buf_name) /* 2 x tensors slots, NULL where no name was made */
    for (int b = 0; b < 2 * (r->model->n ? r->model->n : 1); b++)
      free(r->buf_name[b]);
  free(r->buf_name);
  free(r->buf_of);
  free(r->smesh);
  free(r->dmesh);
  free(r->td);
  free(r->group_cut);
  rsi_model_free(r->model);
  free(r);
}

/* Engine buffer ids: fused groups share one, in tensor order; then as
 * many again, each the fp8 block scales of its value buffer
 * ("<name>_scale_inv", used where the values are fp8). */
static rs_status engine_buffers(rs_recipe *r, rsi_err *err) {
  const rs_model *m = r->model;
  int *group_buf = malloc(sizeof *group_buf * (size_t)(m->nfuse + 1));
  r->buf_of = malloc(sizeof *r->buf_of * (size_t)(m->n ? m->n : 1));
  r->buf_name = calloc(2 * (size_t)(m->n ? m->n : 1), sizeof *r->buf_name);
  if (!group_buf || !r->buf_of || !r->buf_name) {
    free(group_buf);
    return RSI_NOMEM(err);
  }
  for (int i = 0; i <= m->nfuse; i++) group_buf[i] = -1;
  int next = 0;
  rs_status st = RS_OK;
  for (int t = 0; t < m->n && st == RS_OK; t++) {
    const rsi_rtensor *x = &m->t[t];
    if (x->fuse_group >= 0 && group_buf[x->fuse_group] >= 0) {
      r->buf_of[t] = group_buf[x->fuse_group];
      continue;
    }
    if (x->fuse_group >= 0) group_buf[x->fuse_group] = next;
    r->buf_of[t] = next;
    r->buf_name[next] = strdup(x->engine);
    if (!r->buf_name[next++]) st = RSI_NOMEM(err);
  }
  free(group_buf);
  for (int b = 0; b < next && st == RS_OK; b++) {
    char name[RSI_RNAME + 16];
    rsi_scale_name(r->buf_name[b], name, sizeof name);
    r->buf_name[next + b] = strdup(name);
    if (!r->buf_name[next + b]) st = RSI_NOMEM(err);
  }
  r->nvalue_buffers = next;
  r->ninfer_buffers = 2 * next;
  return st;
}

rs_status rsi_recipe_create(const rs_model *m, const char *train,
                            const char *infer, rs_recipe **out, rsi_err *err) {
  *out = NULL;
  rs_recipe *r = calloc(1, sizeof *r);
  if (!r) return RSI_NOMEM(err);
  pthread_mutex_init(&r->cache_lock, NULL);
  rs_status st = rsi_train_parse(train, &r->train, err);
  if (st == RS_OK) st = rsi_train_resolve(&m->info, &r->train, err);
  if (st == RS_OK) st = rsi_infer_parse(infer, &r->infer, err);
  if (st == RS_OK) st = rsi_infer_resolve(&m->info, &r->infer, err);
  if (st == RS_OK) st = rsi_model_clone(m, &r->model, err);
  if (st != RS_OK) {
    rsi_recipe_free(r);
    return st;
  }
  r->train_dtype = r->infer_dtype = RS_DTYPE_BF16;
  r->block_rows = r->block_cols = 128;
  r->rule = RS_SCALE_AMAX;
  r->infer_first = r->train.world;
  size_t n = (size_t)(m->n ? m->n : 1);
  r->smesh = malloc(sizeof *r->smesh * n);
  r->dmesh = malloc(sizeof *r->dmesh * n);
  r->td = malloc(sizeof *r->td * n);
  r->group_cut = malloc((size_t)m->nfuse + 1);
  if (!r->smesh || !r->dmesh || !r->td || !r->group_cut) {
    rsi_recipe_free(r);
    return RSI_NOMEM(err);
  }
  for (int t = 0; t < m->n; t++) {
    rsi_train_mesh(r->model, &r->train, t, &r->smesh[t]);
    rsi_infer_mesh(r->model, &r->infer, t, r->infer_first, &r->dmesh[t]);
  }
  st = engine_buffers(r, err);
  if (st != RS_OK) {
    rsi_recipe_free(r);
    return st;
  }
  rsi_recipe_decide(r);
  *out = r;
  return RS_OK;
}
