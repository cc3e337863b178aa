/* SPDX-License-Identifier: Apache-2.0 */
/* DTensor placements (dtensor.h): which elements a mesh coordinate holds,
 * following torch.chunk and DTensor exactly: a list of n indices split p
 * ways gets chunks of ceil(n / p); trailing chunks may be short or empty
 * (an empty chunk sits at the end of the list). Mesh axes apply left to
 * right (distribute_tensor), each cutting what the axes before it left of
 * its dim; a StridedShard(d, f) axis cuts the list into f pieces first and
 * keeps its chunk of each. In FSDP2's order a StridedShard axis applies,
 * as a plain chunk, after the later Shard(d) axes it spans. The same
 * algorithm as bindings/python/reshard/mesh.py (_local_runs), which is
 * checked against torch. */
#include "layout/dtensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- run lists ----------------------------------------------------------- */

static int64_t *runs_w(rsi_runs *r) { return r->heap ? r->heap : r->one; }

static int64_t runs_total(const rsi_runs *r) {
  const int64_t *v = rsi_runs_at(r);
  int64_t t = 0;
  for (int64_t i = 0; i < r->n; i++) t += v[2 * i + 1];
  return t;
}

/* Room for `need` runs (contents kept). */
static rs_status runs_reserve(rsi_runs *r, int64_t need, rsi_err *err) {
  int64_t cap = r->heap ? r->cap : 1;
  if (need <= cap) return RS_OK;
  int64_t ncap = cap * 2 > need ? cap * 2 : need;
  int64_t *p = realloc(r->heap, (size_t)ncap * 2 * sizeof *p);
  if (!p) return RSI_NOMEM(err);
  if (!r->heap) memcpy(p, r->one, sizeof r->one);
  r->heap = p;
  r->cap = ncap;
  return RS_OK;
}

/* Append run (start, len > 0), merged with the last when adjacent. */
static rs_status runs_push(rsi_runs *r, int64_t start, int64_t len,
                           rsi_err *err) {
  int64_t *v = runs_w(r);
  if (r->n && v[2 * r->n - 2] + v[2 * r->n - 1] == start) {
    v[2 * r->n - 1] += len;
    return RS_OK;
  }
  RSI_TRY(runs_reserve(r, r->n + 1, err));
  v = runs_w(r);
  v[2 * r->n] = start;
  v[2 * r->n + 1] = len;
  r->n++;
  return RS_OK;
}

/* The global index at position pos (0..total) of a list. */
static int64_t runs_index(const rsi_runs *r, int64_t pos) {
  const int64_t *v = rsi_runs_at(r);
  if (!r->n) return r->at;
  for (int64_t i = 0; i < r->n; i++) {
    if (pos < v[2 * i + 1]) return v[2 * i] + pos;
    pos -= v[2 * i + 1];
  }
  return v[2 * r->n - 2] + v[2 * r->n - 1];
}

/* Keep the positions [lo, hi) of r, in place (a range of a list is never
 * more runs than the list). */
static void runs_take(rsi_runs *r, int64_t lo, int64_t hi) {
  int64_t *v = runs_w(r);
  if (lo >= hi) {
    r->at = runs_index(r, lo);
    r->n = 0;
    return;
  }
  int64_t k = 0, pos = 0;
  for (int64_t i = 0; i < r->n; i++) {
    int64_t s = v[2 * i], n = v[2 * i + 1];
    int64_t a = lo > pos ? lo : pos, b = hi < pos + n ? hi : pos + n;
    if (a < b) {
      v[2 * k] = s + a - pos;
      v[2 * k + 1] = b - a;
      k++;
    }
    pos += n;
  }
  r->n = k;
}

/* Chunk i of torch.chunk(positions [0, total), pieces): [lo, hi). */
static void chunk_range(int64_t total, int64_t pieces, int64_t i, int64_t *lo,
                        int64_t *hi) {
  int64_t size = total / pieces + (total % pieces != 0), at;
  if (__builtin_mul_overflow(size, i, &at) || at > total) at = total;
  *lo = at;
  *hi = size < total - at ? at + size : total;
}

/* Append the positions [lo, hi) of src to dst; *ci and *cpos are a cursor
 * into src (its run, and that run's first position), moving forward only:
 * the ranges come in increasing order. */
static rs_status runs_append(rsi_runs *dst, const rsi_runs *src, int64_t lo,
                             int64_t hi, int64_t *ci, int64_t *cpos,
                             rsi_err *err) {
  const int64_t *v = rsi_runs_at(src);
  for (; *ci < src->n && lo < hi;) {
    int64_t s = v[2 * *ci], n = v[2 * *ci + 1];
    if (lo >= *cpos + n) {
      *cpos += n;
      ++*ci;
      continue;
    }
    int64_t a = lo, b = hi < *cpos + n ? hi : *cpos + n;
    RSI_TRY(runs_push(dst, s + a - *cpos, b - a, err));
    lo = b;
  }
  return RS_OK;
}

/* The StridedShard(d, f) step of distribute_tensor's order: coordinate c
 * of an axis of n keeps chunk c of each of the f pieces of r. */
static rs_status strided_step(rsi_runs *r, int64_t f, int64_t n, int64_t c,
                              int axis, rsi_err *err) {
  int64_t total = runs_total(r);
  rsi_runs out = {0};
  rs_status st = RS_OK;
  int64_t ci = 0, cpos = 0;
  for (int64_t j = 0; j < f && st == RS_OK; j++) {
    int64_t lo1, hi1, lo2, hi2;
    chunk_range(total, f, j, &lo1, &hi1);
    if (lo1 >= total) break; /* the later pieces are empty */
    if (j >= RSI_DTENSOR_MAX_BOXES) {
      st =
          RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                   "mesh axis %d: split factor %lld cuts %lld elements "
                   "into more than %d pieces",
                   axis, (long long)f, (long long)total, RSI_DTENSOR_MAX_BOXES);
      break;
    }
    chunk_range(hi1 - lo1, n, c, &lo2, &hi2);
    st = runs_append(&out, r, lo1 + lo2, lo1 + hi2, &ci, &cpos, err);
    if (st == RS_OK && out.n > RSI_DTENSOR_MAX_BOXES)
      st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "mesh axis %d: split factor %lld leaves more than %d "
                    "runs in one dim",
                    axis, (long long)f, RSI_DTENSOR_MAX_BOXES);
  }
  if (st != RS_OK) {
    free(out.heap);
    return st;
  }
  out.at = runs_index(r, total);
  free(r->heap);
  *r = out; /* `one` travels with it where out has no heap */
  return RS_OK;
}

void rsi_dtensor_runs_free(rsi_dtensor_runs *r) {
  for (int d = 0; d < r->ndim; d++) /* only these ever get a heap */
    if (r->dim[d].heap) {
      free(r->dim[d].heap);
      r->dim[d].heap = NULL;
    }
}

/* ---- placements ---------------------------------------------------------- */

static int split_of(const rsi_dtensor_spec *s, int a) {
  return s->split ? s->split[a] : 1;
}

static bool is_strided(const rsi_dtensor_spec *s, int a) {
  return s->placements[a] != RS_REPLICATE && split_of(s, a) > 1;
}

void rsi_dtensor_describe(const rsi_dtensor_spec *s, char *buf, size_t n) {
  size_t at = 0;
  at += (size_t)snprintf(buf, n, "[");
  for (int a = 0; a < s->mesh_ndim && at < n; a++) {
    const char *sep = a ? ", " : "";
    int p = s->placements[a];
    if (p == RS_REPLICATE)
      at += (size_t)snprintf(buf + at, n - at, "%sReplicate()", sep);
    else if (is_strided(s, a))
      at += (size_t)snprintf(buf + at, n - at, "%sStridedShard(%d, %d)", sep, p,
                             split_of(s, a));
    else
      at += (size_t)snprintf(buf + at, n - at, "%sShard(%d)", sep, p);
  }
  if (at < n) snprintf(buf + at, n - at, "]");
}

static void describe_mesh(const rsi_dtensor_spec *s, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "(");
  for (int a = 0; a < s->mesh_ndim && at < n; a++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", a ? ", " : "",
                           (long long)s->mesh_shape[a]);
  if (at < n) snprintf(buf + at, n - at, ")");
}

/* FSDP2's order (mesh.py _fsdp2_order): each StridedShard(d, f) axis moves
 * after the later Shard(d) axes whose sizes multiply to f. */
static rs_status fsdp2_axes(rsi_dtensor_spec *s, rsi_err *err) {
  int m = s->mesh_ndim;
  for (int a = 0; a < m; a++) {
    if (!is_strided(s, a)) continue;
    int d = s->placements[a], f = split_of(s, a), last = -1;
    int64_t prod = 1;
    for (int b = a + 1; b < m; b++) {
      if (prod >= f) break;
      int q = s->placements[b];
      if (q == d && !is_strided(s, b)) {
        last = b;
        if (__builtin_mul_overflow(prod, s->mesh_shape[b], &prod))
          prod = INT64_MAX;
      } else if (q == d) {
        break;
      }
    }
    if (prod != f) {
      char mesh[256], places[512];
      describe_mesh(s, mesh, sizeof mesh);
      rsi_dtensor_describe(s, places, sizeof places);
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "StridedShard(%d, %d) on mesh axis %d: FSDP2 order "
                      "needs later Shard(%d) axes whose sizes multiply to "
                      "%d (mesh %s, placements %s)",
                      d, f, a, d, f, mesh, places);
    }
    /* move a from where it is to just after `last` */
    int from = 0, to = 0;
    while (s->axes[from] != a) from++;
    for (int i = from; i + 1 < m; i++) s->axes[i] = s->axes[i + 1];
    while (s->axes[to] != last) to++;
    for (int i = m - 1; i > to + 1; i--) s->axes[i] = s->axes[i - 1];
    s->axes[to + 1] = a;
  }
  return RS_OK;
}

static rs_status check_spec(const rsi_dtensor_spec *s, rs_strided_order order,
                            rsi_err *err) {
  if (s->ndim < 1 || s->ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, s->ndim < 1 ? RS_ERR_BAD_SHAPE : RS_ERR_TOO_MANY_DIMS,
                    "tensor of %d dims, must be 1..%d", s->ndim, RSI_MAX_DIMS);
  if (s->mesh_ndim < 1 || s->mesh_ndim > RSI_MAX_DIMS)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "mesh of %d axes, must be 1..%d", s->mesh_ndim,
                    RSI_MAX_DIMS);
  for (int d = 0; d < s->ndim; d++)
    if (s->shape[d] < 1)
      return RSI_FAIL(err, RS_ERR_BAD_SHAPE,
                      "size %lld in dim %d, must be at least 1",
                      (long long)s->shape[d], d);
  if (order != RS_STRIDED_AUTO && order != RS_STRIDED_DISTRIBUTE &&
      order != RS_STRIDED_FSDP2)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "strided order %d is none of RS_STRIDED_AUTO, "
                    "RS_STRIDED_DISTRIBUTE, RS_STRIDED_FSDP2",
                    (int)order);
  for (int a = 0; a < s->mesh_ndim; a++) {
    if (s->mesh_shape[a] < 1)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "mesh axis %d has size %lld, must be at least 1", a,
                      (long long)s->mesh_shape[a]);
    int p = s->placements[a], f = split_of(s, a);
    if (p != RS_REPLICATE && (p < 0 || p >= s->ndim))
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "placement %d of mesh axis %d is neither RS_REPLICATE "
                      "nor a dim of the %d-dim tensor",
                      p, a, s->ndim);
    if (f < 1 || (f > 1 && p == RS_REPLICATE))
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "split factor %d of mesh axis %d (%s): a split factor "
                      "is at least 1, and 1 on a Replicate axis",
                      f, a, p == RS_REPLICATE ? "Replicate" : "Shard");
  }
  return RS_OK;
}

/* Whether the two orders keep the same elements on every coordinate:
 * only the axes over dims that a StridedShard cuts matter (a dim's runs
 * depend on its own axes alone), the others stay at 0. *where gets the
 * first coordinate where they differ. */
static rs_status orders_agree(const rsi_dtensor_spec *dist,
                              const rsi_dtensor_spec *fsdp, bool *agree,
                              int64_t *where, rsi_err *err) {
  int m = dist->mesh_ndim;
  bool dim_strided[RSI_MAX_DIMS] = {false}, axis_used[RSI_MAX_DIMS];
  for (int a = 0; a < m; a++)
    if (is_strided(dist, a)) dim_strided[dist->placements[a]] = true;
  int64_t count = 1;
  for (int a = 0; a < m; a++) {
    int p = dist->placements[a];
    axis_used[a] = p != RS_REPLICATE && dim_strided[p];
    if (!axis_used[a]) continue;
    if (__builtin_mul_overflow(count, dist->mesh_shape[a], &count) ||
        count > RSI_DTENSOR_MAX_BOXES)
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "comparing the strided orders would visit more than "
                      "%d mesh coordinates; give RS_STRIDED_DISTRIBUTE or "
                      "RS_STRIDED_FSDP2",
                      RSI_DTENSOR_MAX_BOXES);
  }
  *agree = true;
  memset(where, 0, (size_t)m * sizeof *where);
  for (int64_t i = 0; i < count && *agree; i++) {
    rsi_dtensor_runs x = {0}, y = {0};
    rs_status st = rsi_dtensor_coord_runs(dist, where, &x, err);
    if (st == RS_OK) st = rsi_dtensor_coord_runs(fsdp, where, &y, err);
    for (int d = 0; st == RS_OK && d < dist->ndim && *agree; d++) {
      const rsi_runs *u = &x.dim[d], *v = &y.dim[d];
      *agree = u->n == v->n && !memcmp(rsi_runs_at(u), rsi_runs_at(v),
                                       (size_t)(2 * u->n) * sizeof(int64_t));
    }
    rsi_dtensor_runs_free(&x);
    rsi_dtensor_runs_free(&y);
    if (st != RS_OK) return st;
    if (!*agree) break;
    for (int a = m - 1; a >= 0; a--) { /* next coordinate of the used axes */
      if (!axis_used[a]) continue;
      if (++where[a] < dist->mesh_shape[a]) break;
      where[a] = 0;
    }
  }
  return RS_OK;
}

rs_status rsi_dtensor_spec_init(rsi_dtensor_spec *s, int ndim,
                                const int64_t *shape, int mesh_ndim,
                                const int64_t *mesh_shape,
                                const int *placements, const int *split,
                                rs_strided_order order, rsi_err *err) {
  *s = (rsi_dtensor_spec){.ndim = ndim,
                          .mesh_ndim = mesh_ndim,
                          .shape = shape,
                          .mesh_shape = mesh_shape,
                          .placements = placements,
                          .split = split};
  RSI_TRY(check_spec(s, order, err));
  for (int a = 0; a < mesh_ndim; a++) s->axes[a] = a;
  bool strided = false;
  for (int a = 0; a < mesh_ndim; a++) strided |= is_strided(s, a);
  if (!strided || order == RS_STRIDED_DISTRIBUTE) return RS_OK;
  rsi_dtensor_spec f = *s;
  f.fsdp2 = true;
  rs_status st = fsdp2_axes(&f, err);
  if (order == RS_STRIDED_FSDP2) {
    if (st == RS_OK) *s = f;
    return st;
  }
  /* RS_STRIDED_AUTO: either order, where they agree */
  char places[512], shp[256];
  rsi_dtensor_describe(s, places, sizeof places);
  size_t at = (size_t)snprintf(shp, sizeof shp, "[");
  for (int d = 0; d < ndim && at < sizeof shp; d++)
    at += (size_t)snprintf(shp + at, sizeof shp - at, "%s%lld", d ? ", " : "",
                           (long long)shape[d]);
  if (at < sizeof shp) snprintf(shp + at, sizeof shp - at, "]");
  if (st != RS_OK) {
    char why[RSI_ERR_MSG_BYTES];
    snprintf(why, sizeof why, "%s", err->msg);
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "shape %s with placements %s: the FSDP2 order does not "
                    "apply (%s); say which order made it: "
                    "RS_STRIDED_DISTRIBUTE (distribute_tensor) or "
                    "RS_STRIDED_FSDP2",
                    shp, places, why);
  }
  bool agree;
  int64_t where[RSI_MAX_DIMS];
  RSI_TRY(orders_agree(s, &f, &agree, where, err));
  if (!agree) {
    char c[256];
    rsi_dtensor_spec w = *s;
    w.mesh_shape = where;
    describe_mesh(&w, c, sizeof c);
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "shape %s with placements %s is uneven along a strided "
                    "dim, where RS_STRIDED_DISTRIBUTE (distribute_tensor) "
                    "and RS_STRIDED_FSDP2 (FSDP2) keep different elements "
                    "(mesh coordinate %s); say which order made it",
                    shp, places, c);
  }
  return RS_OK;
}

/* ---- what a coordinate holds --------------------------------------------- */

rs_status rsi_dtensor_coord_runs(const rsi_dtensor_spec *s,
                                 const int64_t *coord, rsi_dtensor_runs *out,
                                 rsi_err *err) {
  out->ndim = s->ndim;
  for (int d = 0; d < s->ndim; d++)
    out->dim[d] = (rsi_runs){.n = 1, .one = {0, s->shape[d]}};
  for (int a = 0; a < s->mesh_ndim; a++)
    if (coord[a] < 0 || coord[a] >= s->mesh_shape[a])
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "mesh coordinate %lld on axis %d outside [0, %lld)",
                      (long long)coord[a], a, (long long)s->mesh_shape[a]);
  for (int k = 0; k < s->mesh_ndim; k++) {
    int a = s->axes[k], p = s->placements[a];
    if (p == RS_REPLICATE) continue;
    rsi_runs *r = &out->dim[p];
    if (!is_strided(s, a) || s->fsdp2) {
      int64_t lo, hi;
      chunk_range(runs_total(r), s->mesh_shape[a], coord[a], &lo, &hi);
      runs_take(r, lo, hi);
    } else {
      RSI_TRY(
          strided_step(r, split_of(s, a), s->mesh_shape[a], coord[a], a, err));
    }
  }
  int64_t boxes = rsi_dtensor_num_boxes(out);
  if (boxes > RSI_DTENSOR_MAX_BOXES)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "mesh coordinate holds %lld boxes of the tensor, more "
                    "than %d",
                    (long long)boxes, RSI_DTENSOR_MAX_BOXES);
  return RS_OK;
}

int64_t rsi_dtensor_num_boxes(const rsi_dtensor_runs *r) {
  int64_t n = 1;
  for (int d = 0; d < r->ndim; d++) {
    if (!r->dim[d].n) return 0;
    if (__builtin_mul_overflow(n, r->dim[d].n, &n)) n = INT64_MAX;
  }
  return n;
}

void rsi_dtensor_local_shape(const rsi_dtensor_runs *r, int64_t *shape) {
  for (int d = 0; d < r->ndim; d++) shape[d] = runs_total(&r->dim[d]);
}

void rsi_dtensor_box_next(const rsi_dtensor_runs *r, rsi_box_cursor *c,
                          int64_t *offset, int64_t *extent, int64_t *local) {
  for (int d = 0; d < r->ndim; d++) {
    const int64_t *v = rsi_runs_at(&r->dim[d]);
    offset[d] = v[2 * c->k[d]];
    extent[d] = v[2 * c->k[d] + 1];
    if (local) local[d] = c->pos[d];
  }
  for (int d = r->ndim - 1; d >= 0; d--) {
    c->pos[d] += extent[d];
    if (++c->k[d] < r->dim[d].n) break;
    c->k[d] = c->pos[d] = 0;
  }
}

/* ---- the public calls' cores --------------------------------------------- */

rs_status rsi_dtensor_box(int ndim, const int64_t *shape, int mesh_ndim,
                          const int64_t *mesh_shape, const int *placements,
                          const int64_t *coord, int64_t *offset,
                          int64_t *extent, rsi_err *err) {
  /* Worked out aside, so that a refusal leaves no half a box behind: the
   * out arrays get the box, or zeros. Plain placements: one run per dim,
   * or none where the shard is empty (extent 0 where it sits). */
  rsi_dtensor_spec s;
  rsi_dtensor_runs r = {0};
  rs_status st = rsi_dtensor_spec_init(&s, ndim, shape, mesh_ndim, mesh_shape,
                                       placements, NULL, RS_STRIDED_AUTO, err);
  if (st == RS_OK) st = rsi_dtensor_coord_runs(&s, coord, &r, err);
  for (int d = 0; d < ndim && ndim <= RSI_MAX_DIMS; d++) {
    const rsi_runs *x = &r.dim[d];
    bool ok = st == RS_OK;
    offset[d] = !ok ? 0 : x->n ? rsi_runs_at(x)[0] : x->at;
    extent[d] = ok && x->n ? rsi_runs_at(x)[1] : 0;
  }
  rsi_dtensor_runs_free(&r);
  return st;
}

rs_status rsi_dtensor_local_boxes(
    int ndim, const int64_t *shape, int mesh_ndim, const int64_t *mesh_shape,
    const int *placements, const int *split, rs_strided_order order,
    const int64_t *coord, int64_t *local_shape, int max_boxes, int *num_boxes,
    int64_t *offsets, int64_t *extents, int64_t *local_offsets, rsi_err *err) {
  *num_boxes = 0;
  if (max_boxes < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "max_boxes %d is negative",
                    max_boxes);
  if (max_boxes > 0 && (!offsets || !extents || !local_offsets))
    return RSI_FAIL(err, RS_ERR_NULL_POINTER,
                    "rs_dtensor_local_boxes: %s is NULL with max_boxes %d",
                    !offsets   ? "offsets"
                    : !extents ? "extents"
                               : "local_offsets",
                    max_boxes);
  rsi_dtensor_spec s;
  rsi_dtensor_runs r = {0};
  rs_status st = rsi_dtensor_spec_init(&s, ndim, shape, mesh_ndim, mesh_shape,
                                       placements, split, order, err);
  if (st == RS_OK) st = rsi_dtensor_coord_runs(&s, coord, &r, err);
  int64_t n = st == RS_OK ? rsi_dtensor_num_boxes(&r) : 0;
  if (st == RS_OK && max_boxes > 0 && max_boxes < n)
    st = RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                  "the coordinate holds %lld boxes, room was given for %d",
                  (long long)n, max_boxes);
  if (st == RS_OK) {
    rsi_dtensor_local_shape(&r, local_shape);
    rsi_box_cursor c = {{0}, {0}};
    for (int64_t i = 0; max_boxes > 0 && i < n; i++)
      rsi_dtensor_box_next(&r, &c, offsets + i * ndim, extents + i * ndim,
                           local_offsets + i * ndim);
  }
  *num_boxes = (int)n;
  rsi_dtensor_runs_free(&r);
  return st;
}
