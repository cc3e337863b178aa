/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: plan creation (and execution) from fuzzed pairs of layouts.
 *
 * The input chooses a world (1-8 ranks, in this process), domains, the
 * staging and slice settings, up to three tensors (dtype, up to 6 dims,
 * small sizes mostly, huge ones sometimes) declared on both sides (now and
 * then differently), and for each side up to 12 shard operations: DTensor
 * placements over a shuffled mesh, dense boxes, strided boxes (padded or
 * transposed), and boxes made of raw fuzz values. The harness places every
 * shard it adds in its own bytes of its rank's buffer (sometimes at an odd
 * byte offset), so it knows what every byte should hold. Checked:
 *   - rs_plan_create returns RS_OK or a documented status with a message;
 *   - a plan made twice from the same layouts has the same fingerprint;
 *   - every move lies inside its tensor between ranks of the world, and
 *     plan figures are never negative; the JSON is NUL-terminated at its
 *     length;
 *   - when the layouts are small: binding every buffer at exactly the size
 *     its shards reach succeeds (one byte less fails), the execution
 *     succeeds, every destination element holds the source value, every
 *     destination byte no shard covers is untouched, and a second execution
 *     after the sources changed delivers the new values;
 *   - every rank allocated the staging RS_STAT_STAGING_BYTES says, within
 *     the setting;
 *   - one rank's part (RS_PARAM_PLAN_PART) holds exactly that rank's moves
 *     of the whole plan, in order, and its domain's part
 *     (rsi_plan_create_domain) exactly the whole plan's moves into it.
 * The destination now and then casts a float tensor (f32, bf16, f16) to
 * another of the three: every destination element must then hold the
 * source value cast by the host engine's own per-pair cast (convert.h),
 * one element at a time, away from the plan, the transport and the
 * executor. Or it quantizes one to block-scaled f8_e4m3 (blocks of 1-3 x
 * 1-3, either scale rule), with a scale tensor s<i> whose shards follow
 * the values' shards that hold whole blocks, in the same buffer: every
 * value and scale must then hold what the host's whole-tensor quantizer
 * (rsi_quantize_blocks) makes of the source tensor, NaN for NaN. */
#include "copy/convert.h"
#include "copy/engine.h"
#include "exec/exec.h"
#include "fuzz_common.h"
#include "th_domain_parts.h"
#include "th_util.h"
#include "th_value.h"

#define MAXW 8
#define MAXT 3
#define MAXS 12 /* shard operations per side */
#define MAXREC 128
#define NBUF 3
#define EXEC_MAX_ELEMS 4096
#define EXEC_MAX_BYTES (1 << 20)

typedef struct tensor {
  char name[16];
  rs_dtype dt, dst_dt; /* the destination may cast f32, bf16, f16 */
  int esize, dst_esize, ndim;
  int64_t shape[RS_MAX_DIMS];
  bool big;
  /* the destination holds it as block-scaled f8_e4m3 (dst_dt), blocks of
   * b0 x b1 over the last two dims (b0 1 for one dim) */
  bool fp8, ue8m0;
  int64_t b0, b1;
} tensor;

typedef struct rec { /* a shard the layout accepted */
  int t; /* w->t[t], or its scales w->st[t] */
  bool scales;
  int rank, buffer;
  int64_t byte_offset;
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], strides[RS_MAX_DIMS];
} rec;

typedef struct side {
  rs_layout *l;
  rec r[MAXREC];
  int n;
  int64_t used[MAXW][NBUF];
  bool raw; /* a shard with fuzzed placement was accepted */
} side;

typedef struct world {
  rs_context *ctx;
  int size;
  tensor t[MAXT];
  tensor st[MAXT]; /* st[i]: the scales of t[i], where t[i].fp8 */
  int nt;
  side s[2];
  bool decl_ok[2][MAXT]; /* declared on that side as the tensor is */
  bool mismatch;         /* some tensor declared differently or missing */
  int64_t staging;       /* RS_PARAM_STAGING_BYTES */
} world;

static const rs_dtype dtypes[] = {
    RS_DTYPE_U8,  RS_DTYPE_I8,   RS_DTYPE_U16,     RS_DTYPE_I16,
    RS_DTYPE_U32, RS_DTYPE_I32,  RS_DTYPE_U64,     RS_DTYPE_I64,
    RS_DTYPE_F16, RS_DTYPE_BF16, RS_DTYPE_F32,     RS_DTYPE_F64,
    RS_DTYPE_F8_E4M3, RS_DTYPE_F8_E5M2, RS_DTYPE_BOOL};

static int64_t last_elem(int ndim, const int64_t *ext, const int64_t *st) {
  int64_t last = 0;
  for (int d = 0; d < ndim; d++) last += (ext[d] - 1) * st[d];
  return last;
}

/* A tensor's element size on side s. */
static int esize_on(const tensor *t, int s) {
  return s == RS_SIDE_DST ? t->dst_esize : t->esize;
}

static int64_t byte_end(const tensor *t, int s, const rec *r) {
  return r->byte_offset +
         (last_elem(t->ndim, r->ext, r->strides) + 1) * esize_on(t, s);
}

static void dense(int ndim, const int64_t *ext, int64_t *st) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= ext[d];
  }
}

static int64_t elems(int ndim, const int64_t *ext) {
  int64_t v = 1;
  for (int d = 0; d < ndim; d++) v *= ext[d];
  return v;
}

/* ---- building ------------------------------------------------------------ */

static void declare(fz_in *in, world *w) {
  w->nt = 1 + fz_below(in, MAXT);
  for (int i = 0; i < w->nt; i++) {
    tensor *t = &w->t[i];
    snprintf(t->name, sizeof t->name, "t%d", i);
    t->dt = dtypes[fz_below(in, 15)];
    t->esize = (int)rs_dtype_size(t->dt);
    t->dst_dt = t->dt;
    t->dst_esize = t->esize;
    t->ndim = 1 + fz_below(in, fz_u8(in) < 16 ? 6 : 3);
    int64_t bytes = t->esize;
    for (int d = 0; d < t->ndim; d++) {
      uint8_t k = fz_u8(in);
      int64_t v = 1 + (k % 9);
      if (k >= 0xF0) { /* a huge dim now and then */
        v = 1 + (int64_t)(fz_raw64(in) & (((uint64_t)1 << (k & 31)) - 1));
        t->big = true;
      }
      if (bytes > ((int64_t)1 << 44) / v) v = 1; /* keep planning bounded */
      bytes *= v;
      t->shape[d] = v;
    }
    if (elems(t->ndim, t->shape) > EXEC_MAX_ELEMS) t->big = true;
  }
}

/* A float dtype the engines cast (f32, bf16, f16). */
static bool castable(rs_dtype d) {
  return rsi_convert_cast_fn(RS_DTYPE_F32, d) != NULL;
}

/* The scales of fp8 tensor i: st[i], "s<i>", f32, one per block. */
static void declare_scales(world *w, int i) {
  const tensor *t = &w->t[i];
  tensor *sc = &w->st[i];
  memset(sc, 0, sizeof *sc);
  snprintf(sc->name, sizeof sc->name, "s%d", i);
  sc->dt = sc->dst_dt = RS_DTYPE_F32;
  sc->esize = sc->dst_esize = 4;
  sc->ndim = t->ndim;
  memcpy(sc->shape, t->shape, sizeof sc->shape);
  int nd = t->ndim;
  sc->shape[nd - 1] = (t->shape[nd - 1] + t->b1 - 1) / t->b1;
  if (nd > 1) sc->shape[nd - 2] = (t->shape[nd - 2] + t->b0 - 1) / t->b0;
  rs_layout *l = w->s[RS_SIDE_DST].l;
  rs_status st = rs_layout_add_tensor(l, sc->name, sc->dt, sc->ndim, sc->shape);
  FZ_CHECK(st == RS_OK, "add_tensor of scales: %s (%s)", rs_status_name(st),
           rs_context_last_error(w->ctx));
  st = rs_layout_set_block_scales(l, t->name, sc->name, t->b0, t->b1,
                                  t->ue8m0 ? RS_SCALE_UE8M0 : RS_SCALE_AMAX);
  FZ_CHECK(st == RS_OK, "set_block_scales %lld x %lld: %s (%s)",
           (long long)t->b0, (long long)t->b1, rs_status_name(st),
           rs_context_last_error(w->ctx));
}

/* Declare the tensors on one side; the destination now and then gets a
 * tensor declared differently or left out, casts a float tensor to
 * another of f32, bf16 and f16, or quantizes one to block-scaled fp8 with
 * its scales (dtype changes the plan makes). */
static void declare_side(fz_in *in, world *w, int s) {
  static const rs_dtype casts[3] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};
  for (int i = 0; i < w->nt; i++) {
    tensor *t = &w->t[i];
    int64_t shape[RS_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    rs_dtype dt = t->dt;
    w->decl_ok[s][i] = true;
    if (s == RS_SIDE_DST) {
      uint8_t k = fz_u8(in);
      w->decl_ok[s][i] = k < 0xFD;
      w->mismatch |= k >= 0xFD;
      if (k == 0xFF) continue;          /* missing */
      if (k == 0xFE) shape[0] += 1;     /* another shape */
      if (k == 0xFD) dt = dt == RS_DTYPE_U8 ? RS_DTYPE_I8 : RS_DTYPE_U8;
      if (k >= 0xF8 && k < 0xFD && castable(dt)) {
        rs_dtype to = casts[k % 3];
        if (to == dt) to = casts[(k + 1) % 3];
        dt = t->dst_dt = to;
        t->dst_esize = (int)rs_dtype_size(to);
      }
      if (k >= 0xF4 && k < 0xF8 && castable(dt) && !t->big) {
        dt = t->dst_dt = RS_DTYPE_F8_E4M3;
        t->dst_esize = 1;
        t->fp8 = true;
        t->ue8m0 = k & 1;
        t->b0 = t->ndim > 1 ? 1 + fz_below(in, 3) : 1;
        t->b1 = 1 + fz_below(in, 3);
      }
    }
    rs_status st = rs_layout_add_tensor(w->s[s].l, t->name, dt, t->ndim, shape);
    FZ_CHECK(st == RS_OK, "add_tensor of a valid tensor: %s (%s)",
             rs_status_name(st), rs_context_last_error(w->ctx));
    if (t->fp8) declare_scales(w, i);
  }
}

/* Where the next shard of (rank, buffer) goes: past what is used, with a
 * gap sometimes, at an odd byte offset sometimes. */
static int64_t place(fz_in *in, side *sd, int rank, int buffer, int esize) {
  int64_t at = sd->used[rank][buffer];
  uint8_t k = fz_u8(in);
  if (k >= 0xC0) at += (k & 7);          /* possibly misaligned */
  else if (k >= 0x80) at += esize * (k & 3);
  return at;
}

static int fp8_tensors(const world *w) {
  int n = 0;
  for (int i = 0; i < w->nt; i++) n += w->t[i].fp8;
  return n;
}

static const tensor *rec_tensor(const world *w, const rec *r) {
  return r->scales ? &w->st[r->t] : &w->t[r->t];
}

static bool add_rec(world *w, int s, const rec *r, bool raw) {
  side *sd = &w->s[s];
  const tensor *t = rec_tensor(w, r);
  fz_snap before;
  fz_snap_take(sd->l, &before);
  rs_status st = rs_layout_add_shard(sd->l, t->name, r->rank, r->off, r->ext,
                                     r->buffer, r->byte_offset, r->strides);
  fz_expect("rs_layout_add_shard", st, w->ctx, FZ_SET(FZ_ADD_SHARD_ERRS));
  if (st != RS_OK) fz_snap_same(sd->l, &before, "rs_layout_add_shard");
  fz_snap_free(&before);
  FZ_CHECK(raw || st == RS_OK || !w->decl_ok[s][r->t],
           "a well-formed shard was refused: %s (%s)",
           rs_status_name(st), rs_context_last_error(w->ctx));
  if (st != RS_OK || sd->n == MAXREC) {
    if (st == RS_OK) sd->raw = true; /* accepted but not tracked */
    return false;
  }
  sd->r[sd->n++] = *r;
  if (raw) sd->raw = true;
  if (r->rank >= 0 && r->rank < MAXW && r->buffer >= 0 && r->buffer < NBUF &&
      !raw) {
    int64_t end = byte_end(t, s, r);
    if (end > sd->used[r->rank][r->buffer]) sd->used[r->rank][r->buffer] = end;
  }
  return true;
}

/* The blocks of b elements over [off, off + ext) of a dim of n elements
 * (from *bo, *be of them), when that span holds whole blocks. */
static bool whole_blocks(int64_t off, int64_t ext, int64_t n, int64_t b,
                         int64_t *bo, int64_t *be) {
  if (off % b || ((off + ext) % b && off + ext != n)) return false;
  *bo = off / b;
  *be = (off + ext + b - 1) / b - *bo;
  return true;
}

/* A destination shard of fp8 values that holds whole blocks gets the
 * shard of their scales beside it (same rank and buffer, dense): the
 * plan then has every scale's values where the scale is. */
static void add_scales_of(world *w, const rec *v) {
  const tensor *t = &w->t[v->t];
  if (!t->fp8) return;
  rec r = *v;
  r.scales = true;
  int nd = t->ndim;
  if (!whole_blocks(v->off[nd - 1], v->ext[nd - 1], t->shape[nd - 1], t->b1,
                    &r.off[nd - 1], &r.ext[nd - 1]))
    return;
  if (nd > 1 && !whole_blocks(v->off[nd - 2], v->ext[nd - 2],
                              t->shape[nd - 2], t->b0, &r.off[nd - 2],
                              &r.ext[nd - 2]))
    return;
  dense(nd, r.ext, r.strides);
  r.byte_offset = w->s[RS_SIDE_DST].used[r.rank][r.buffer];
  add_rec(w, RS_SIDE_DST, &r, false);
}

static void op_box(fz_in *in, world *w, int s, int kind) {
  side *sd = &w->s[s];
  rec r;
  memset(&r, 0, sizeof r);
  r.t = fz_below(in, w->nt);
  const tensor *t = &w->t[r.t];
  r.rank = fz_below(in, w->size);
  r.buffer = fz_below(in, NBUF);
  for (int d = 0; d < t->ndim; d++) {
    uint64_t a = fz_u8(in), b = fz_u8(in);
    if (t->big) {
      a = fz_raw64(in);
      b = fz_raw64(in);
    }
    r.off[d] = (int64_t)(a % (uint64_t)t->shape[d]);
    r.ext[d] = 1 + (int64_t)(b % (uint64_t)(t->shape[d] - r.off[d]));
  }
  dense(t->ndim, r.ext, r.strides);
  if (kind == 1) { /* padded rows, or dims stored in another order */
    if (fz_u8(in) & 1) {
      int64_t step = 1;
      for (int d = t->ndim - 1; d >= 0; d--) {
        r.strides[d] = step;
        step *= r.ext[d] + fz_below(in, 3);
      }
    } else {
      int order[RS_MAX_DIMS];
      for (int d = 0; d < t->ndim; d++) order[d] = d;
      for (int d = t->ndim - 1; d > 0; d--) {
        int j = fz_below(in, d + 1), x = order[d];
        order[d] = order[j];
        order[j] = x;
      }
      int64_t step = 1;
      for (int k = t->ndim - 1; k >= 0; k--) {
        r.strides[order[k]] = step;
        step *= r.ext[order[k]];
      }
    }
  }
  r.byte_offset = place(in, sd, r.rank, r.buffer, esize_on(t, s));
  if (add_rec(w, s, &r, false) && s == RS_SIDE_DST) add_scales_of(w, &r);
}

static void op_raw(fz_in *in, world *w, int s) {
  rec r;
  memset(&r, 0, sizeof r);
  r.t = fz_below(in, w->nt);
  r.rank = fz_int(in);
  r.buffer = fz_int(in);
  r.byte_offset = fz_i64(in);
  for (int d = 0; d < RS_MAX_DIMS; d++) {
    r.off[d] = fz_i64(in);
    r.ext[d] = fz_i64(in);
    r.strides[d] = fz_i64(in);
  }
  add_rec(w, s, &r, true);
}

static void op_dtensor(fz_in *in, world *w, int s) {
  side *sd = &w->s[s];
  int ti = fz_below(in, w->nt);
  const tensor *t = &w->t[ti];
  int mesh_ndim = 1 + fz_below(in, 2);
  int64_t mesh[2] = {1, 1};
  int left = w->size;
  for (int a = 0; a < mesh_ndim; a++) {
    mesh[a] = 1 + fz_below(in, left);
    left /= (int)mesh[a];
    if (left < 1) left = 1;
  }
  int nranks = (int)(mesh[0] * mesh[1]);
  int ranks[MAXW];
  for (int i = 0; i < w->size; i++) ranks[i] = i;
  for (int i = w->size - 1; i > 0; i--) {
    int j = fz_below(in, i + 1), x = ranks[i];
    ranks[i] = ranks[j];
    ranks[j] = x;
  }
  int placements[2];
  for (int a = 0; a < mesh_ndim; a++)
    placements[a] = fz_below(in, t->ndim + 1) - 1; /* -1: replicate */
  int buffer = fz_below(in, NBUF);
  int64_t at = 0;
  for (int i = 0; i < nranks; i++)
    if (sd->used[ranks[i]][buffer] > at) at = sd->used[ranks[i]][buffer];
  fz_snap before;
  fz_snap_take(sd->l, &before);
  rs_status st = rs_layout_add_dtensor(sd->l, t->name, mesh_ndim, mesh, ranks,
                                       placements, buffer, at);
  fz_expect("rs_layout_add_dtensor", st, w->ctx, FZ_SET(FZ_ADD_SHARD_ERRS));
  if (st != RS_OK) fz_snap_same(sd->l, &before, "rs_layout_add_dtensor");
  fz_snap_free(&before);
  FZ_CHECK(st == RS_OK || !w->decl_ok[s][ti],
           "a well-formed DTensor was refused: %s (%s)", rs_status_name(st),
           rs_context_last_error(w->ctx));
  if (st != RS_OK) return;
  /* track the boxes it added, computed the same way */
  int64_t coord[2] = {0, 0};
  for (int i = 0; i < nranks; i++) {
    coord[0] = i / mesh[1];
    coord[1] = i % mesh[1];
    rec r;
    memset(&r, 0, sizeof r);
    r.t = ti;
    r.rank = ranks[i];
    r.buffer = buffer;
    r.byte_offset = at;
    FZ_CHECK(rs_dtensor_local_box(t->ndim, t->shape, mesh_ndim, mesh,
                                  placements, coord, r.off, r.ext) == RS_OK,
             "local_box");
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) empty |= r.ext[d] == 0;
    if (empty) continue;
    dense(t->ndim, r.ext, r.strides);
    if (sd->n == MAXREC) {
      sd->raw = true;
      continue;
    }
    sd->r[sd->n++] = r;
    int64_t end = byte_end(t, s, &r);
    if (end > sd->used[r.rank][buffer]) sd->used[r.rank][buffer] = end;
    if (s == RS_SIDE_DST) add_scales_of(w, &r);
  }
}

/* ---- checking a plan ------------------------------------------------------ */

static void check_queries(world *w, rs_plan *plan) {
  int ntensors = w->nt + fp8_tensors(w); /* and the fp8 ones' scales */
  int64_t n = -1;
  FZ_CHECK(rs_plan_num_moves(plan, &n) == RS_OK && n >= 0, "num_moves");
  for (int64_t i = 0; i < n && i < 512; i++) {
    int t = -1, sr = -1, dr = -1, round = -1, fw = -1;
    rs_route route;
    FZ_CHECK(rs_plan_move_info(plan, i, &t, &sr, &dr, &route, &round, &fw) ==
                 RS_OK, "move_info");
    FZ_CHECK(t >= 0 && t < ntensors && sr >= 0 && sr < w->size && dr >= 0 &&
                 dr < w->size && round >= 0 && (fw == 0 || fw == 1) &&
                 route >= RS_ROUTE_LOCAL && route <= RS_ROUTE_INTER,
             "move %lld: tensor %d, ranks %d -> %d, round %d", (long long)i,
             t, sr, dr, round);
    const char *name = NULL;
    int nd = 0;
    FZ_CHECK(rs_plan_tensor_info(plan, t, &name, &nd) == RS_OK, "tensor_info");
    int ti = name && (name[0] == 't' || name[0] == 's') ? name[1] - '0' : -1;
    FZ_CHECK(ti >= 0 && ti < w->nt && (name[0] == 't' || w->t[ti].fp8) &&
                 nd == w->t[ti].ndim,
             "tensor %d: %s", t, name ? name : "(null)");
    const tensor *x = name[0] == 's' ? &w->st[ti] : &w->t[ti];
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    FZ_CHECK(rs_plan_move_box(plan, i, off, ext) == RS_OK, "move_box");
    for (int d = 0; d < nd; d++)
      FZ_CHECK(off[d] >= 0 && ext[d] >= 1 && ext[d] <= x->shape[d] - off[d],
               "move %lld leaves its tensor in dim %d", (long long)i, d);
  }
  for (int r = -1; r < w->size; r++)
    for (int s = RS_STAT_BYTES_SENT_INTRA;
         s <= RS_STAT_BYTES_UNPACKED; s++) {
      int64_t v = -1;
      FZ_CHECK(rs_plan_stat(plan, r, (rs_stat)s, &v) == RS_OK && v >= 0,
               "stat %d of rank %d: %lld", s, r, (long long)v);
    }
  char *json = NULL;
  size_t len = 0;
  rs_status st = rs_plan_to_json(plan, &json, &len);
  FZ_CHECK(st == RS_OK || st == RS_ERR_NO_MEMORY, "to_json: %s",
           rs_status_name(st));
  if (st == RS_OK) FZ_CHECK(strlen(json) == len, "json length");
  rs_free(json);
}

/* Visit every element of a shard: its global linear index and its byte
 * position in the buffer. */
typedef void (*visit_fn)(void *arg, int64_t lin, int64_t at);

static void visit(const tensor *t, const rec *r, int esize, visit_fn fn,
                  void *arg) {
  int64_t idx[RS_MAX_DIMS] = {0};
  for (;;) {
    int64_t lin = 0, el = 0;
    for (int d = 0; d < t->ndim; d++) {
      lin = lin * t->shape[d] + r->off[d] + idx[d];
      el += idx[d] * r->strides[d];
    }
    fn(arg, lin, r->byte_offset + el * esize);
    int d = t->ndim - 1;
    for (; d >= 0; d--) {
      if (++idx[d] < r->ext[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

typedef struct vis {
  unsigned char *buf, *covered;
  int gen, t, esize; /* esize: of the source values */
  rs_dtype from, to; /* check: the value cast from -> to */
  const char *where;
  /* check, of fp8 values or their scales: what each element must hold */
  const uint8_t *want8;
  const float *want_scales;
} vis;

/* The bits of value x of dtype `from` cast to `to`: one element through
 * the engine's cast of that pair, stored and loaded as the buffers are. */
static uint64_t cast_bits(uint64_t x, rs_dtype from, rs_dtype to) {
  if (from == to) return x;
  unsigned char in[8], out[8];
  th_store(in, rs_dtype_size(from), x);
  rsi_convert_cast_fn(to, from)(out, in, 1);
  return th_load(out, rs_dtype_size(to));
}

static void store(void *arg, int64_t lin, int64_t at) {
  vis *v = arg;
  th_store(v->buf + at, (size_t)v->esize,
           th_value((uint64_t)v->gen, (uint64_t)v->t, lin, (size_t)v->esize));
}

/* A NaN of f8_e4m3 (either sign) or f32: the quantizers may differ in
 * the sign and payload of a NaN, never in what is one. */
static bool nan_bits(uint64_t x, size_t size) {
  if (size == 1) return (x & 0x7F) == 0x7F;
  return (x & 0x7F800000u) == 0x7F800000u && (x & 0x007FFFFFu);
}

static void check(void *arg, int64_t lin, int64_t at) {
  vis *v = arg;
  size_t size = rs_dtype_size(v->to);
  uint64_t want;
  if (v->want8) {
    want = v->want8[lin];
  } else if (v->want_scales) {
    uint32_t bits;
    memcpy(&bits, &v->want_scales[lin], sizeof bits);
    want = bits;
  } else {
    want = cast_bits(th_value((uint64_t)v->gen, (uint64_t)v->t, lin,
                              (size_t)v->esize),
                     v->from, v->to);
  }
  uint64_t got = th_load(v->buf + at, size);
  bool quantized = v->want8 || v->want_scales;
  FZ_CHECK(got == want ||
               (quantized && nan_bits(got, size) && nan_bits(want, size)),
           "%s: tensor %c%d element %lld holds %llx, want %llx (%s -> %s)",
           v->where, v->want_scales ? 's' : 't', v->t, (long long)lin,
           (unsigned long long)got, (unsigned long long)want,
           rs_dtype_name(v->from), rs_dtype_name(v->to));
  for (size_t i = 0; i < size; i++) v->covered[at + i] = 1;
}

/* What the host's whole-tensor quantizer makes of fp8 tensor t's source
 * values of generation gen: *values (an e4m3 byte an element) and
 * *scales (one f32 a block), for the caller to free. */
static void quantize_source(const world *w, int ti, int gen, uint8_t **values,
                            float **scales) {
  const tensor *t = &w->t[ti];
  int64_t n = elems(t->ndim, t->shape), ns = elems(t->ndim, w->st[ti].shape);
  unsigned char *src = malloc((size_t)(n * t->esize));
  *values = malloc((size_t)n);
  *scales = malloc((size_t)ns * sizeof **scales);
  FZ_CHECK(src && *values && *scales, "malloc");
  for (int64_t lin = 0; lin < n; lin++)
    th_store(src + lin * t->esize, (size_t)t->esize,
             th_value((uint64_t)gen, (uint64_t)ti, lin, (size_t)t->esize));
  rsi_err err = {0};
  rs_status st = rsi_quantize_blocks(t->dt, t->ndim, t->shape, src, *values,
                                     *scales, t->b0, t->b1, t->ue8m0, &err);
  FZ_CHECK(st == RS_OK, "rsi_quantize_blocks: %s", rs_status_name(st));
  free(src);
}

static bool executable(const world *w) {
  if (w->s[0].raw || w->s[1].raw) return false;
  for (int i = 0; i < w->nt; i++)
    if (w->t[i].big) return false;
  int64_t total = 0;
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < w->size; r++)
      for (int b = 0; b < NBUF; b++) total += w->s[s].used[r][b];
  return total <= EXEC_MAX_BYTES;
}

static void execute_and_verify(world *w, rs_plan *plan) {
  /* A world of a multiple of three ranks copies over three threads, every
   * batch cut (the choice reads no input, so the corpus keeps its
   * meaning) */
  rsi_host_split_bytes = 1;
  FZ_CHECK(rs_context_set_param(w->ctx, RS_PARAM_COPY_THREADS,
                                w->size % 3 == 0 ? 3 : 1) == RS_OK,
           "copy threads");
  unsigned char *buf[2][MAXW][NBUF] = {{{0}}};
  unsigned char *cov[MAXW][NBUF] = {{0}};
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < w->size; r++)
      for (int b = 0; b < NBUF; b++) {
        int64_t n = w->s[s].used[r][b];
        if (!n) continue;
        buf[s][r][b] = malloc((size_t)n);
        FZ_CHECK(buf[s][r][b] != NULL, "malloc");
        memset(buf[s][r][b], TH_POISON, (size_t)n);
        if (s == RS_SIDE_DST) cov[r][b] = calloc((size_t)n, 1);
        /* one byte short is refused; exactly enough is accepted */
        rs_status st = rs_plan_bind(plan, (rs_side)s, r, b, buf[s][r][b],
                                    (size_t)n - 1);
        FZ_CHECK(st == RS_ERR_BUFFER_TOO_SMALL,
                 "side %d rank %d buffer %d bound one byte short: %s", s, r,
                 b, rs_status_name(st));
        st = rs_plan_bind(plan, (rs_side)s, r, b, buf[s][r][b], (size_t)n);
        FZ_CHECK(st == RS_OK, "side %d rank %d buffer %d (%lld bytes): %s (%s)",
                 s, r, b, (long long)n, rs_status_name(st),
                 rs_context_last_error(w->ctx));
      }
  for (int gen = 1; gen <= 2; gen++) {
    const side *src = &w->s[RS_SIDE_SRC], *dst = &w->s[RS_SIDE_DST];
    for (int i = 0; i < src->n; i++) {
      const rec *r = &src->r[i];
      const tensor *t = &w->t[r->t];
      vis v = {buf[0][r->rank][r->buffer], NULL, gen, r->t, t->esize,
               t->dt, t->dt, "source", NULL, NULL};
      visit(t, r, t->esize, store, &v);
    }
    rs_status st = rs_plan_execute(plan);
    FZ_CHECK(st == RS_OK, "execute (generation %d): %s (%s)", gen,
             rs_status_name(st), rs_context_last_error(w->ctx));
    uint8_t *want8[MAXT] = {0};
    float *want_scales[MAXT] = {0};
    for (int i = 0; i < w->nt; i++)
      if (w->t[i].fp8) quantize_source(w, i, gen, &want8[i], &want_scales[i]);
    for (int i = 0; i < dst->n; i++) {
      const rec *r = &dst->r[i];
      const tensor *t = rec_tensor(w, r);
      vis v = {buf[1][r->rank][r->buffer], cov[r->rank][r->buffer], gen,
               r->t, w->t[r->t].esize, w->t[r->t].dt, t->dst_dt,
               "destination", NULL, NULL};
      if (r->scales) v.want_scales = want_scales[r->t];
      else if (t->fp8) v.want8 = want8[r->t];
      visit(t, r, t->dst_esize, check, &v);
    }
    for (int i = 0; i < w->nt; i++) {
      free(want8[i]);
      free(want_scales[i]);
    }
    for (int r = 0; r < w->size; r++)
      for (int b = 0; b < NBUF; b++)
        for (int64_t i = 0; i < w->s[1].used[r][b]; i++)
          FZ_CHECK(cov[r][b][i] || buf[1][r][b][i] == TH_POISON,
                   "rank %d buffer %d: byte %lld outside every shard was "
                   "written",
                   r, b, (long long)i);
  }
  /* Each rank allocated the staging the plan says, within the setting. */
  for (int r = 0; r < w->size; r++) {
    int64_t said = -1, got = rsi_exec_staging(plan, r);
    FZ_CHECK(rs_plan_stat(plan, r, RS_STAT_STAGING_BYTES, &said) == RS_OK,
             "stat");
    FZ_CHECK(got < 0 || got == said,
             "rank %d allocated %lld bytes of staging, the plan says %lld", r,
             (long long)got, (long long)said);
    FZ_CHECK(said <= w->staging,
             "rank %d: staging %lld above the setting %lld", r,
             (long long)said, (long long)w->staging);
  }
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < MAXW; r++)
      for (int b = 0; b < NBUF; b++) free(buf[s][r][b]);
  for (int r = 0; r < MAXW; r++)
    for (int b = 0; b < NBUF; b++) free(cov[r][b]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size, 0};
  static world w;
  memset(&w, 0, sizeof w);
  w.size = 1 + fz_below(&in, MAXW);
  FZ_CHECK(rs_context_create_local(w.size, &w.ctx) == RS_OK, "context");
  rs_context_set_domain_size(w.ctx, 1 + fz_below(&in, w.size));
  static const int64_t staging[4] = {(int64_t)64 << 10, (int64_t)1 << 20,
                                     (int64_t)256 << 20, (int64_t)1 << 40};
  static const int64_t slice[3] = {(int64_t)4 << 10, (int64_t)64 << 10,
                                   (int64_t)4 << 20};
  int64_t stage = staging[fz_below(&in, 4)];
  rs_context_set_param(w.ctx, RS_PARAM_SLICE_BYTES, slice[fz_below(&in, 3)]);
  declare(&in, &w);
  for (int i = 0; i < w.nt; i++)
    if (w.t[i].big) stage = (int64_t)1 << 40; /* bounded number of pieces */
  FZ_CHECK(rs_context_set_param(w.ctx, RS_PARAM_STAGING_BYTES, stage) == RS_OK,
           "staging");
  w.staging = stage;
  for (int s = 0; s < 2; s++) {
    FZ_CHECK(rs_layout_create(w.ctx, &w.s[s].l) == RS_OK, "layout_create");
    declare_side(&in, &w, s);
  }
  for (int s = 0; s < 2; s++) {
    int nops = 1 + fz_below(&in, MAXS);
    for (int k = 0; k < nops; k++) {
      uint8_t op = fz_u8(&in) % 8;
      if (op < 3) op_dtensor(&in, &w, s);
      else if (op < 5) op_box(&in, &w, s, 0);
      else if (op < 7) op_box(&in, &w, s, 1);
      else op_raw(&in, &w, s);
    }
  }

  rs_plan *plan = NULL;
  rs_status st = rs_plan_create(w.s[0].l, w.s[1].l, &plan);
  fz_expect("rs_plan_create", st, w.ctx, FZ_SET(FZ_PLAN_CREATE_ERRS));
  FZ_CHECK((st == RS_OK) == (plan != NULL), "plan out-pointer vs status");
  FZ_CHECK(!w.mismatch || st != RS_OK,
           "a plan between layouts that declare a tensor differently");
  if (st == RS_OK) {
    /* planned again, without boxes (RS_PARAM_PLAN_BOXES = 0): the same
     * plan but for them */
    rs_plan *again = NULL;
    uint64_t f1 = 0, f2 = 0;
    char same_why[256];
    rs_context_set_param(w.ctx, RS_PARAM_PLAN_BOXES, 0);
    FZ_CHECK(rs_plan_create(w.s[0].l, w.s[1].l, &again) == RS_OK,
             "the same layouts planned twice");
    rs_context_set_param(w.ctx, RS_PARAM_PLAN_BOXES, 1);
    rs_plan_fingerprint(plan, &f1);
    rs_plan_fingerprint(again, &f2);
    FZ_CHECK(f1 == f2, "fingerprints differ for the same layouts");
    FZ_CHECK(th_same_plan_without_boxes(plan, again, w.size, same_why,
                                        sizeof same_why),
             "planned again without boxes: %s", same_why);
    rs_plan_destroy(again);
    check_queries(&w, plan);
    if (executable(&w)) execute_and_verify(&w, plan);
    /* One rank's part holds exactly its moves of the whole plan (read
     * last, so that the input before is consumed as it always was). */
    int rank = fz_below(&in, w.size);
    rs_plan *part = NULL;
    char why[256];
    rs_context_set_param(w.ctx, RS_PARAM_PLAN_PART, rank);
    FZ_CHECK(rs_plan_create(w.s[0].l, w.s[1].l, &part) == RS_OK,
             "the part of rank %d of a plan that was made", rank);
    rs_context_set_param(w.ctx, RS_PARAM_PLAN_PART, -1);
    FZ_CHECK(th_same_moves_of(plan, part, rank, why, sizeof why),
             "the part of rank %d: %s", rank, why);
    rs_plan_destroy(part);
    /* and its domain's part holds exactly the moves into that domain */
    int64_t into = 0;
    FZ_CHECK(th_same_domain_part(plan, w.s[0].l, w.s[1].l,
                                 plan->domain_of[rank], &into, why,
                                 sizeof why),
             "%s", why);
    /* Rounds by domain pair, where the input asks (read after all else):
     * the plan runs, its rounds have the pairs' shape, and the domain's
     * part has its rounds too. */
    if (fz_u8(&in) & 1) {
      rs_plan *paired = NULL;
      rs_context_set_param(w.ctx, RS_PARAM_ROUNDS, RS_ROUNDS_BY_DOMAIN_PAIR);
      st = rs_plan_create(w.s[0].l, w.s[1].l, &paired);
      FZ_CHECK(st == RS_OK || st == RS_ERR_UNSUPPORTED,
               "rounds by domain pair: %s", rs_status_name(st));
      if (st == RS_OK) {
        if (executable(&w)) execute_and_verify(&w, paired);
        FZ_CHECK(th_pair_rounds_hold(paired, why, sizeof why),
                 "rounds by domain pair: %s", why);
        FZ_CHECK(th_same_domain_part(paired, w.s[0].l, w.s[1].l,
                                     plan->domain_of[rank], &into, why,
                                     sizeof why),
                 "rounds by domain pair: %s", why);
      }
      rs_plan_destroy(paired);
      rs_context_set_param(w.ctx, RS_PARAM_ROUNDS, RS_ROUNDS_PACKED);
    }
  }
  if (getenv("FUZZ_VERBOSE")) {
    int64_t moves = 0;
    if (plan) rs_plan_num_moves(plan, &moves);
    printf("world %d, %d tensors (%d fp8), %d + %d shards: %s, %lld moves%s%s%s\n",
           w.size, w.nt, fp8_tensors(&w), w.s[0].n, w.s[1].n, rs_status_name(st),
           (long long)moves, st == RS_OK && executable(&w) ? ", executed" : "",
           st == RS_OK ? "" : ": ", st == RS_OK ? "" : rs_context_last_error(w.ctx));
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(w.s[0].l);
  rs_layout_destroy(w.s[1].l);
  rs_context_destroy(w.ctx);
  return 0;
}
