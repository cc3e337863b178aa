/* SPDX-License-Identifier: Apache-2.0 */
/* The bindings' shim (rsw.h): each function calls the C API and records
 * the outcome in an rsw_result. */
#include "rsw.h"

#include <reshard/reshard_mpi.h>
#include <reshard/reshard_nccl.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rsw_ints {
  int64_t *v;
  int64_t n, cap;
};

struct rsw_buffer {
  unsigned char *p;
  int64_t n;
};

/* ---- results -------------------------------------------------------------- */

rsw_result *rsw_result_new(void) { return calloc(1, sizeof(rsw_result)); }
void rsw_result_free(rsw_result *r) { free(r); }
rs_context *rsw_result_context(const rsw_result *r) { return r->handle; }
rs_layout *rsw_result_layout(const rsw_result *r) { return r->handle; }
rs_plan *rsw_result_plan(const rsw_result *r) { return r->handle; }
rsw_buffer *rsw_result_buffer(const rsw_result *r) { return r->handle; }
rs_model *rsw_result_model(const rsw_result *r) { return r->handle; }
rs_recipe *rsw_result_recipe(const rsw_result *r) { return r->handle; }

static void set_status(rsw_result *r, rs_status st) {
  r->status = (int)st;
  snprintf(r->name, sizeof r->name, "%s", rs_status_name(st));
}

static void begin(rsw_result *r) {
  set_status(r, RS_OK);
  r->value = 0;
  r->real = 0;
  r->handle = NULL;
  r->message[0] = '\0';
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void failf(rsw_result *r, rs_status st, const char *fmt, ...) {
  set_status(r, st);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

static void fail(rsw_result *r, const char *what) {
  failf(r, RS_ERR_INVALID_ARGUMENT, "%s", what);
}

/* Record st and the message of ctx (or this thread's, without one); the
 * layout's or plan's context with end_layout and end_plan (below). */
static void end(rsw_result *r, rs_status st, const rs_context *ctx) {
  if (st == RS_OK)
    set_status(r, st);
  else
    failf(r, st, "%s", ctx ? rs_context_last_error(ctx) : rs_last_error());
}

/* A call that hands out an integer: fn(args..., &out) with OUT_T out = 0;
 * its status and the message of handle h (END: end, end_layout, end_plan)
 * go to r, out to r->value. */
#define GET_VALUE(r, OUT_T, END, h, fn, ...)                                 \
  do {                                                                       \
    OUT_T out_ = 0;                                                          \
    END(r, fn(__VA_ARGS__, &out_), h);                                       \
    r->value = (int64_t)out_;                                                \
  } while (0)

/* A call that makes a handle: fn(args..., &out) with OUT_T *out = NULL;
 * the status as GET_VALUE's, out to r->handle when the call succeeded. */
#define MAKE_HANDLE(r, OUT_T, END, h, fn, ...)                               \
  do {                                                                       \
    OUT_T *out_ = NULL;                                                      \
    rs_status st_ = fn(__VA_ARGS__, &out_);                                  \
    END(r, st_, h);                                                          \
    r->handle = st_ == RS_OK ? out_ : NULL;                                  \
  } while (0)

/* ---- integer vectors ------------------------------------------------------ */

rsw_ints *rsw_ints_new(void) { return calloc(1, sizeof(rsw_ints)); }

void rsw_ints_free(rsw_ints *v) {
  if (!v) return;
  free(v->v);
  free(v);
}

void rsw_ints_clear(rsw_ints *v) { v->n = 0; }

int rsw_ints_push(rsw_ints *v, int64_t x) {
  if (v->n == v->cap) {
    int64_t cap = v->cap ? v->cap * 2 : 8;
    int64_t *p = realloc(v->v, (size_t)cap * sizeof *p);
    if (!p) return -1;
    v->v = p;
    v->cap = cap;
  }
  v->v[v->n++] = x;
  return 0;
}

int64_t rsw_ints_len(const rsw_ints *v) { return v ? v->n : 0; }

int64_t rsw_ints_get(const rsw_ints *v, int64_t i) {
  return v && i >= 0 && i < v->n ? v->v[i] : 0;
}

/* The elements as int (mesh ranks, placements); NULL if one does not fit
 * or memory is short (message in r). */
static int *as_ints(rsw_result *r, const rsw_ints *v) {
  int *out = malloc((size_t)(v->n ? v->n : 1) * sizeof *out);
  if (!out) {
    failf(r, RS_ERR_NO_MEMORY, "out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < v->n; i++) {
    if (v->v[i] < -2147483647 - 1 || v->v[i] > 2147483647) {
      failf(r, RS_ERR_INVALID_ARGUMENT,
            "element %lld (%lld) does not fit an int", (long long)i,
            (long long)v->v[i]);
      free(out);
      return NULL;
    }
    out[i] = (int)v->v[i];
  }
  return out;
}

static int dims(const rsw_ints *v) {
  return v->n > 2147483647 ? 2147483647 : (int)v->n;
}

/* ---- buffers ---------------------------------------------------------------- */

rsw_buffer *rsw_buffer_new(int64_t bytes) {
  if (bytes < 0) return NULL;
  rsw_buffer *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  size_t n = (size_t)(bytes + 63) / 64 * 64;
  b->p = aligned_alloc(64, n ? n : 64);
  if (!b->p) {
    free(b);
    return NULL;
  }
  memset(b->p, 0, n ? n : 64);
  b->n = bytes;
  return b;
}

void rsw_buffer_free(rsw_buffer *b) {
  if (!b) return;
  free(b->p);
  free(b);
}

int64_t rsw_buffer_size(const rsw_buffer *b) { return b->n; }
uint64_t rsw_buffer_address(const rsw_buffer *b) {
  return (uint64_t)(uintptr_t)b->p;
}
void rsw_buffer_fill(rsw_buffer *b, int byte) {
  memset(b->p, byte, (size_t)b->n);
}

static float f32_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t bits_of_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0    ? m / 1024.0 / 16384.0
             : e == 31 ? (m ? 0.0 / 0.0 : 1.0 / 0.0)
                       : (1 + m / 1024.0) * (double)(1u << e) / 32768.0;
  return h & 0x8000 ? -v : v;
}

/* f32 to f16, round to nearest even. */
static uint16_t double_to_half(double d) {
  uint32_t x = bits_of_f32((float)d);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 255, m = x & 0x7fffff;
  if (e == 255) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  int ue = (int)e - 127 + 15;
  if (ue >= 31) return (uint16_t)(sign | 0x7c00);
  if (ue <= 0) {
    if (ue < -10) return (uint16_t)sign;
    m |= 0x800000;
    int shift = 14 - ue;
    uint32_t half = m >> shift, rest = m & ((1u << shift) - 1),
             mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = (uint32_t)(ue << 10) | (m >> 13), rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
  return (uint16_t)(sign | half);
}

static uint16_t double_to_bf16(double d) {
  uint32_t x = bits_of_f32((float)d);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* Where element `index` of `dtype` lies, or NULL (message in r). */
static unsigned char *element(rsw_result *r, const rsw_buffer *b, int dtype,
                              int64_t index, size_t *size) {
  *size = rs_dtype_size((rs_dtype)dtype);
  if (*size == 0) {
    fail(r, "unknown dtype");
    return NULL;
  }
  if (index < 0 || index >= b->n / (int64_t)*size) {
    failf(r, RS_ERR_INVALID_ARGUMENT,
          "element %lld of a %s array of %lld elements", (long long)index,
          rs_dtype_name((rs_dtype)dtype), (long long)(b->n / (int64_t)*size));
    return NULL;
  }
  return b->p + (size_t)index * *size;
}

static int is_float(int dtype) {
  return dtype == RS_DTYPE_F16 || dtype == RS_DTYPE_BF16 ||
         dtype == RS_DTYPE_F32 || dtype == RS_DTYPE_F64;
}

void rsw_buffer_get_int(rsw_result *r, const rsw_buffer *b, int dtype,
                        int64_t index) {
  begin(r);
  size_t n;
  unsigned char *p = element(r, b, dtype, index, &n);
  if (!p) return;
  if (is_float(dtype) || n > 8) {
    fail(r, "not an integer dtype");
    return;
  }
  uint64_t u = 0;
  memcpy(&u, p, n); /* little-endian hosts */
  int sign = dtype == RS_DTYPE_I8 || dtype == RS_DTYPE_I16 ||
             dtype == RS_DTYPE_I32 || dtype == RS_DTYPE_I64;
  if (sign && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~(uint64_t)0 << (8 * n);
  r->value = (int64_t)u;
}

void rsw_buffer_get_float(rsw_result *r, const rsw_buffer *b, int dtype,
                          int64_t index) {
  begin(r);
  size_t n;
  unsigned char *p = element(r, b, dtype, index, &n);
  if (!p) return;
  uint16_t h;
  uint32_t u;
  switch (dtype) {
  case RS_DTYPE_F16: memcpy(&h, p, 2); r->real = half_to_double(h); return;
  case RS_DTYPE_BF16:
    memcpy(&h, p, 2);
    r->real = f32_of_bits((uint32_t)h << 16);
    return;
  case RS_DTYPE_F32: memcpy(&u, p, 4); r->real = f32_of_bits(u); return;
  case RS_DTYPE_F64: memcpy(&r->real, p, 8); return;
  }
  fail(r, "not a floating-point dtype");
}

void rsw_buffer_set_int(rsw_result *r, rsw_buffer *b, int dtype,
                        int64_t index, int64_t value) {
  begin(r);
  size_t n;
  unsigned char *p = element(r, b, dtype, index, &n);
  if (!p) return;
  if (is_float(dtype) || n > 8) {
    fail(r, "not an integer dtype");
    return;
  }
  uint64_t u = (uint64_t)value;
  memcpy(p, &u, n); /* truncated to the element, little-endian */
}

void rsw_buffer_set_float(rsw_result *r, rsw_buffer *b, int dtype,
                          int64_t index, double value) {
  begin(r);
  size_t n;
  unsigned char *p = element(r, b, dtype, index, &n);
  if (!p) return;
  uint16_t h;
  float f;
  switch (dtype) {
  case RS_DTYPE_F16: h = double_to_half(value); memcpy(p, &h, 2); return;
  case RS_DTYPE_BF16: h = double_to_bf16(value); memcpy(p, &h, 2); return;
  case RS_DTYPE_F32: f = (float)value; memcpy(p, &f, 4); return;
  case RS_DTYPE_F64: memcpy(p, &value, 8); return;
  }
  fail(r, "not a floating-point dtype");
}

/* ---- library ---------------------------------------------------------------- */

const char *rsw_version(void) { return rs_version_string(); }
const char *rsw_status_name(int status) {
  return rs_status_name((rs_status)status);
}
const char *rsw_dtype_name(int dtype) { return rs_dtype_name((rs_dtype)dtype); }

void rsw_log_set_level(rsw_result *r, int level, int64_t subsystems) {
  begin(r);
  if (subsystems < 0 || subsystems > (int64_t)RS_LOG_ALL) {
    failf(r, RS_ERR_INVALID_ARGUMENT,
          "log subsystems %lld: a mask of RS_LOG_* bits, 0 to 0x%x",
          (long long)subsystems, RS_LOG_ALL);
    return;
  }
  end(r, rs_log_set_level((rs_log_level)level, (unsigned)subsystems), NULL);
}

int rsw_log_level(void) {
  rs_log_level level = RS_LOG_NONE;
  rs_log_get_level(&level, NULL);
  return (int)level;
}

int64_t rsw_log_subsystems(void) {
  unsigned bits = 0;
  rs_log_get_level(NULL, &bits);
  return (int64_t)bits;
}
int64_t rsw_dtype_size(int dtype) {
  return (int64_t)rs_dtype_size((rs_dtype)dtype);
}

/* ---- contexts ---------------------------------------------------------------- */

void rsw_context_create_local(rsw_result *r, int world_size) {
  begin(r);
  MAKE_HANDLE(r, rs_context, end, NULL, rs_context_create_local, world_size);
}

void rsw_context_create_mpi(rsw_result *r, int64_t fortran_comm) {
  begin(r);
  MAKE_HANDLE(r, rs_context, end, NULL, rs_context_create_mpi_fortran,
              fortran_comm);
}

void rsw_nccl_unique_id(rsw_result *r, rsw_buffer *id) {
  begin(r);
  if (!id || id->n != RS_NCCL_UNIQUE_ID_BYTES) {
    fail(r, "an NCCL unique id needs a buffer of 128 bytes");
    return;
  }
  end(r, rs_nccl_unique_id(id->p, (size_t)id->n), NULL);
}

void rsw_context_create_nccl_id(rsw_result *r, const rsw_buffer *id,
                                int rank, int world_size, int device) {
  begin(r);
  if (!id) {
    fail(r, "no unique id");
    return;
  }
  MAKE_HANDLE(r, rs_context, end, NULL, rs_context_create_nccl_id, id->p,
              (size_t)id->n, rank, world_size, device);
}

void rsw_context_create_nccl_comm(rsw_result *r, uint64_t comm) {
  begin(r);
  MAKE_HANDLE(r, rs_context, end, NULL, rs_context_create_nccl_comm,
              (void *)(uintptr_t)comm);
}

void rsw_context_create_nccl_devices(rsw_result *r, const rsw_ints *devices) {
  begin(r);
  int *d = as_ints(r, devices);
  if (!d) return;
  MAKE_HANDLE(r, rs_context, end, NULL, rs_context_create_nccl_devices, d,
              dims(devices));
  free(d);
}

void rsw_context_destroy(rs_context *ctx) { rs_context_destroy(ctx); }

void rsw_context_world_size(rsw_result *r, const rs_context *ctx) {
  begin(r);
  GET_VALUE(r, int, end, ctx, rs_context_world_size, ctx);
}

void rsw_context_rank(rsw_result *r, const rs_context *ctx) {
  begin(r);
  GET_VALUE(r, int, end, ctx, rs_context_rank, ctx);
}

void rsw_context_transport(rsw_result *r, const rs_context *ctx) {
  begin(r);
  GET_VALUE(r, rs_transport_kind, end, ctx, rs_context_transport, ctx);
}

void rsw_context_set_domain(rsw_result *r, rs_context *ctx, int rank,
                            int domain) {
  begin(r);
  end(r, rs_context_set_domain(ctx, rank, domain), ctx);
}

void rsw_context_get_domain(rsw_result *r, const rs_context *ctx, int rank) {
  begin(r);
  GET_VALUE(r, int, end, ctx, rs_context_get_domain, ctx, rank);
}

void rsw_context_set_domain_size(rsw_result *r, rs_context *ctx, int size) {
  begin(r);
  end(r, rs_context_set_domain_size(ctx, size), ctx);
}

void rsw_context_set_param(rsw_result *r, rs_context *ctx, int param,
                           int64_t value) {
  begin(r);
  end(r, rs_context_set_param(ctx, (rs_param)param, value), ctx);
}

void rsw_context_get_param(rsw_result *r, const rs_context *ctx, int param) {
  begin(r);
  GET_VALUE(r, int64_t, end, ctx, rs_context_get_param, ctx, (rs_param)param);
}

void rsw_context_abort(rs_context *ctx) { rs_context_abort(ctx); }

/* ---- layouts ------------------------------------------------------------------ */

/* Record st with the message of the layout's (or plan's) context. */
static void end_layout(rsw_result *r, rs_status st, const rs_layout *l) {
  if (st == RS_OK)
    set_status(r, st);
  else
    failf(r, st, "%s", rs_layout_last_error(l));
}

static void end_plan(rsw_result *r, rs_status st, const rs_plan *p) {
  if (st == RS_OK)
    set_status(r, st);
  else
    failf(r, st, "%s", rs_plan_last_error(p));
}

void rsw_layout_create(rsw_result *r, rs_context *ctx) {
  begin(r);
  MAKE_HANDLE(r, rs_layout, end, ctx, rs_layout_create, ctx);
}

void rsw_layout_destroy(rs_layout *layout) { rs_layout_destroy(layout); }

void rsw_layout_add_tensor(rsw_result *r, rs_layout *layout, const char *name,
                           int dtype, const rsw_ints *shape) {
  begin(r);
  end_layout(r,
             rs_layout_add_tensor(layout, name, (rs_dtype)dtype, dims(shape),
                                  shape->v),
             layout);
}

/* A box vector copied into RS_MAX_DIMS zeroed slots: the C API reads as
 * many entries as the tensor has dimensions, which a short list must not
 * make it read past. False (message in r) when it is too long. */
static int padded(rsw_result *r, const rsw_ints *v, int64_t *out) {
  memset(out, 0, RS_MAX_DIMS * sizeof *out);
  if (v && v->n > RS_MAX_DIMS) {
    fail(r, "a box has at most 16 dimensions");
    return 0;
  }
  if (v && v->n) memcpy(out, v->v, (size_t)v->n * sizeof *out);
  return 1;
}

void rsw_layout_add_shard(rsw_result *r, rs_layout *layout, const char *name,
                          int rank, const rsw_ints *offset,
                          const rsw_ints *extent, int buffer,
                          int64_t byte_offset, const rsw_ints *strides) {
  begin(r);
  if (offset->n != extent->n || (strides && strides->n &&
                                 strides->n != offset->n)) {
    fail(r, "offset, extent and strides have different lengths");
    return;
  }
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], str[RS_MAX_DIMS];
  if (!padded(r, offset, off) || !padded(r, extent, ext) ||
      !padded(r, strides, str))
    return;
  end_layout(r,
             rs_layout_add_shard(layout, name, rank, off, ext, buffer,
                                 byte_offset,
                                 strides && strides->n ? str : NULL),
             layout);
}

/* As many mesh ranks as the mesh shape says (sizes below 1 are the C
 * API's to name); 0 with the message in r otherwise. */
static int mesh_ranks_match(rsw_result *r, const rsw_ints *mesh_shape,
                            const rsw_ints *mesh_ranks) {
  int64_t nranks = 1;
  for (int64_t i = 0; i < mesh_shape->n; i++) {
    int64_t e = mesh_shape->v[i];
    if (e < 1 || nranks > mesh_ranks->n) break; /* the C API names it */
    nranks *= e;
  }
  if (mesh_shape->n && nranks != mesh_ranks->n) {
    failf(r, RS_ERR_INVALID_ARGUMENT,
          "a mesh of %lld ranks needs %lld mesh ranks, %lld were given",
          (long long)nranks, (long long)nranks, (long long)mesh_ranks->n);
    return 0;
  }
  return 1;
}

void rsw_layout_add_dtensor(rsw_result *r, rs_layout *layout, const char *name,
                            const rsw_ints *mesh_shape,
                            const rsw_ints *mesh_ranks,
                            const rsw_ints *placements, int buffer,
                            int64_t byte_offset) {
  begin(r);
  if (placements->n != mesh_shape->n) {
    fail(r, "one placement per mesh axis is needed");
    return;
  }
  if (!mesh_ranks_match(r, mesh_shape, mesh_ranks)) return;
  int *ranks = as_ints(r, mesh_ranks);
  int *place = ranks ? as_ints(r, placements) : NULL;
  if (ranks && place)
    end_layout(r,
               rs_layout_add_dtensor(layout, name, dims(mesh_shape),
                                     mesh_shape->v, ranks, place, buffer,
                                     byte_offset),
               layout);
  free(ranks);
  free(place);
}

void rsw_layout_add_dtensor_strided(rsw_result *r, rs_layout *layout,
                                    const char *name,
                                    const rsw_ints *mesh_shape,
                                    const rsw_ints *mesh_ranks,
                                    const rsw_ints *placements,
                                    const rsw_ints *split_factors, int order,
                                    int buffer, int64_t byte_offset) {
  begin(r);
  if (placements->n != mesh_shape->n ||
      (split_factors->n && split_factors->n != mesh_shape->n)) {
    fail(r,
         "one placement per mesh axis is needed, and one split factor "
         "per mesh axis or none");
    return;
  }
  if (!mesh_ranks_match(r, mesh_shape, mesh_ranks)) return;
  int *ranks = as_ints(r, mesh_ranks);
  int *place = ranks ? as_ints(r, placements) : NULL;
  int *split = place ? as_ints(r, split_factors) : NULL;
  if (ranks && place && split)
    end_layout(r,
               rs_layout_add_dtensor_strided(
                   layout, name, dims(mesh_shape), mesh_shape->v, ranks, place,
                   split_factors->n ? split : NULL, (rs_strided_order)order,
                   buffer, byte_offset),
               layout);
  free(ranks);
  free(place);
  free(split);
}

void rsw_dtensor_local_box(rsw_result *r, const rsw_ints *shape,
                           const rsw_ints *mesh_shape,
                           const rsw_ints *placements, const rsw_ints *coord,
                           rsw_ints *offset, rsw_ints *extent) {
  begin(r);
  rsw_ints_clear(offset);
  rsw_ints_clear(extent);
  if (placements->n != mesh_shape->n || coord->n != mesh_shape->n) {
    fail(r, "one placement and one coordinate per mesh axis");
    return;
  }
  if (shape->n < 1 || shape->n > RS_MAX_DIMS) {
    fail(r, "a shape has 1 to 16 dimensions");
    return;
  }
  int *place = as_ints(r, placements);
  if (!place) return;
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
  rs_status st =
      rs_dtensor_local_box(dims(shape), shape->v, dims(mesh_shape),
                           mesh_shape->v, place, coord->v, off, ext);
  free(place);
  end(r, st, NULL);
  for (int64_t i = 0; st == RS_OK && i < shape->n; i++)
    if (rsw_ints_push(offset, off[i]) || rsw_ints_push(extent, ext[i])) {
      failf(r, RS_ERR_NO_MEMORY, "out of memory");
      return;
    }
}

void rsw_dtensor_local_boxes(rsw_result *r, const rsw_ints *shape,
                             const rsw_ints *mesh_shape,
                             const rsw_ints *placements,
                             const rsw_ints *split_factors, int order,
                             const rsw_ints *coord, rsw_ints *local_shape,
                             rsw_ints *offsets, rsw_ints *extents,
                             rsw_ints *local_offsets) {
  begin(r);
  rsw_ints *outs[4] = {local_shape, offsets, extents, local_offsets};
  for (int i = 0; i < 4; i++) rsw_ints_clear(outs[i]);
  if (placements->n != mesh_shape->n || coord->n != mesh_shape->n ||
      (split_factors->n && split_factors->n != mesh_shape->n)) {
    fail(r,
         "one placement and one coordinate per mesh axis, and one split "
         "factor per mesh axis or none");
    return;
  }
  if (shape->n < 1 || shape->n > RS_MAX_DIMS) {
    fail(r, "a shape has 1 to 16 dimensions");
    return;
  }
  int *place = as_ints(r, placements);
  int *split = place ? as_ints(r, split_factors) : NULL;
  if (!place || !split) {
    free(place);
    return;
  }
  int nd = dims(shape), n = 0;
  const int *sf = split_factors->n ? split : NULL;
  int64_t local[RS_MAX_DIMS], *box = NULL;
  int oom = 0;
  /* count, then fill */
  rs_status st = rs_dtensor_local_boxes(
      nd, shape->v, dims(mesh_shape), mesh_shape->v, place, sf,
      (rs_strided_order)order, coord->v, local, 0, &n, NULL, NULL, NULL);
  if (st == RS_OK && n > 0) {
    size_t per = (size_t)n * (size_t)nd;
    box = malloc(3 * per * sizeof *box);
    oom = !box;
    if (box)
      st = rs_dtensor_local_boxes(nd, shape->v, dims(mesh_shape), mesh_shape->v,
                                  place, sf, (rs_strided_order)order, coord->v,
                                  local, n, &n, box, box + per, box + 2 * per);
  }
  int64_t per = (int64_t)n * nd;
  for (int64_t i = 0; st == RS_OK && !oom && i < nd; i++)
    oom = rsw_ints_push(local_shape, local[i]) != 0;
  for (int64_t i = 0; st == RS_OK && box && !oom && i < 3 * per; i++)
    oom = rsw_ints_push(outs[1 + i / per], box[i]) != 0;
  if (oom) {
    for (int i = 0; i < 4; i++) rsw_ints_clear(outs[i]);
    failf(r, RS_ERR_NO_MEMORY, "out of memory");
  } else {
    end(r, st, NULL);
    if (st == RS_OK) r->value = n;
  }
  free(box);
  free(place);
  free(split);
}

void rsw_layout_num_tensors(rsw_result *r, const rs_layout *layout) {
  begin(r);
  GET_VALUE(r, int, end_layout, layout, rs_layout_num_tensors, layout);
}

void rsw_layout_num_shards(rsw_result *r, const rs_layout *layout) {
  begin(r);
  GET_VALUE(r, int64_t, end_layout, layout, rs_layout_num_shards, layout);
}

void rsw_layout_serialize(rsw_result *r, const rs_layout *layout) {
  begin(r);
  void *bytes = NULL;
  size_t len = 0;
  rs_status st = rs_layout_serialize(layout, &bytes, &len);
  end_layout(r, st, layout);
  if (st != RS_OK) return;
  rsw_buffer *b = rsw_buffer_new((int64_t)len);
  if (!b) {
    rs_free(bytes);
    failf(r, RS_ERR_NO_MEMORY, "out of memory");
    return;
  }
  memcpy(b->p, bytes, len);
  rs_free(bytes);
  r->handle = b;
  r->value = (int64_t)len;
}

void rsw_layout_deserialize(rsw_result *r, rs_layout *layout,
                            const rsw_buffer *bytes) {
  begin(r);
  end_layout(r, rs_layout_deserialize(layout, bytes->p, (size_t)bytes->n),
             layout);
}

void rsw_layout_allgather(rsw_result *r, rs_layout *layout) {
  begin(r);
  end_layout(r, rs_layout_allgather(layout), layout);
}

void rsw_layout_set_block_scales(rsw_result *r, rs_layout *layout,
                                 const char *values, const char *scales,
                                 int64_t block_rows, int64_t block_cols,
                                 int rule) {
  begin(r);
  end_layout(r,
             rs_layout_set_block_scales(layout, values, scales, block_rows,
                                        block_cols, (rs_scale_rule)rule),
             layout);
}

/* ---- plans ---------------------------------------------------------------------- */

void rsw_plan_create(rsw_result *r, const rs_layout *src,
                     const rs_layout *dst) {
  begin(r);
  MAKE_HANDLE(r, rs_plan, end_layout, src, rs_plan_create, src, dst);
}

void rsw_plan_destroy(rs_plan *plan) { rs_plan_destroy(plan); }

void rsw_plan_stat(rsw_result *r, const rs_plan *plan, int rank, int stat) {
  begin(r);
  GET_VALUE(r, int64_t, end_plan, plan, rs_plan_stat, plan, rank,
            (rs_stat)stat);
}

void rsw_plan_num_moves(rsw_result *r, const rs_plan *plan) {
  begin(r);
  GET_VALUE(r, int64_t, end_plan, plan, rs_plan_num_moves, plan);
}

void rsw_plan_num_tensors(rsw_result *r, const rs_plan *plan) {
  begin(r);
  GET_VALUE(r, int, end_plan, plan, rs_plan_num_tensors, plan);
}

void rsw_plan_fingerprint(rsw_result *r, const rs_plan *plan) {
  begin(r);
  GET_VALUE(r, uint64_t, end_plan, plan, rs_plan_fingerprint, plan);
}

char *rsw_plan_to_json(rsw_result *r, const rs_plan *plan) {
  begin(r);
  char *json = NULL;
  size_t len = 0;
  rs_status st = rs_plan_to_json(plan, &json, &len);
  end_plan(r, st, plan);
  if (st != RS_OK) return NULL;
  char *copy = malloc(len + 1); /* SWIG frees with free() */
  if (copy) {
    memcpy(copy, json, len);
    copy[len] = '\0';
  }
  rs_free(json);
  r->value = (int64_t)len;
  return copy;
}

void rsw_plan_bind(rsw_result *r, rs_plan *plan, int side, int rank,
                   int buffer, uint64_t address, uint64_t bytes, int memory,
                   int device) {
  begin(r);
  end_plan(r,
           rs_plan_bind_memory(plan, (rs_side)side, rank, buffer,
                               (void *)(uintptr_t)address, (size_t)bytes,
                               (rs_memory)memory, device),
           plan);
}

void rsw_plan_bind_buffer(rsw_result *r, rs_plan *plan, int side, int rank,
                          int buffer, rsw_buffer *b) {
  begin(r);
  if (!b) {
    fail(r, "no buffer");
    return;
  }
  end_plan(r,
           rs_plan_bind(plan, (rs_side)side, rank, buffer, b->p, (size_t)b->n),
           plan);
}

void rsw_plan_execute(rsw_result *r, rs_plan *plan) {
  begin(r);
  end_plan(r, rs_plan_execute(plan), plan);
}

void rsw_plan_execute_async(rsw_result *r, rs_plan *plan, uint64_t queue) {
  begin(r);
  end_plan(r, rs_plan_execute_async(plan, (void *)(uintptr_t)queue), plan);
}

void rsw_plan_test(rsw_result *r, rs_plan *plan) {
  begin(r);
  GET_VALUE(r, int, end_plan, plan, rs_plan_test, plan);
}

void rsw_plan_wait(rsw_result *r, rs_plan *plan) {
  begin(r);
  end_plan(r, rs_plan_wait(plan), plan);
}

/* ---- recipes
 * ------------------------------------------------------------------ */

int rsw_model_catalog_count(void) { return rs_model_catalog_count(); }

const char *rsw_model_catalog_name(int index) {
  return rs_model_catalog_name(index);
}

void rsw_model_from_config(rsw_result *r, const char *json) {
  begin(r);
  if (!json) {
    fail(r, "rsw_model_from_config: no text");
    return;
  }
  MAKE_HANDLE(r, rs_model, end, NULL, rs_model_from_config, json, strlen(json));
}

void rsw_model_from_catalog(rsw_result *r, const char *name) {
  begin(r);
  MAKE_HANDLE(r, rs_model, end, NULL, rs_model_from_catalog, name);
}

void rsw_model_destroy(rs_model *model) { rs_model_destroy(model); }

const char *rsw_model_name(const rs_model *model) {
  return rs_model_name(model);
}

void rsw_model_num_tensors(rsw_result *r, const rs_model *model) {
  begin(r);
  GET_VALUE(r, int, end, NULL, rs_model_num_tensors, model);
}

const char *rsw_model_tensor_info(rsw_result *r, const rs_model *model,
                                  int tensor, rsw_ints *shape) {
  begin(r);
  rsw_ints_clear(shape);
  const char *name = NULL;
  rs_dtype dtype = RS_DTYPE_U8;
  int ndim = 0;
  int64_t dims_out[RS_MAX_DIMS];
  rs_status st =
      rs_model_tensor_info(model, tensor, &name, &dtype, &ndim, dims_out);
  end(r, st, NULL);
  if (st != RS_OK) return NULL;
  r->value = (int64_t)dtype;
  for (int i = 0; i < ndim; i++)
    if (rsw_ints_push(shape, dims_out[i])) {
      failf(r, RS_ERR_NO_MEMORY, "out of memory");
      return NULL;
    }
  return name;
}

void rsw_model_get(rsw_result *r, const rs_model *model, int param) {
  begin(r);
  GET_VALUE(r, int64_t, end, NULL, rs_model_get, model, (rs_model_param)param);
}

void rsw_recipe_create(rsw_result *r, const rs_model *model, const char *train,
                       const char *infer) {
  begin(r);
  MAKE_HANDLE(r, rs_recipe, end, NULL, rs_recipe_create, model, train, infer);
}

void rsw_recipe_destroy(rs_recipe *recipe) { rs_recipe_destroy(recipe); }

void rsw_recipe_set(rsw_result *r, rs_recipe *recipe, int param,
                    int64_t value) {
  begin(r);
  end(r, rs_recipe_set(recipe, (rs_recipe_param)param, value), NULL);
}

void rsw_recipe_get(rsw_result *r, const rs_recipe *recipe, int param) {
  begin(r);
  GET_VALUE(r, int64_t, end, NULL, rs_recipe_get, recipe,
            (rs_recipe_param)param);
}

/* A side's add: the message of the layout's context when there is one. */
static void end_add(rsw_result *r, rs_status st, const rs_layout *layout) {
  if (st == RS_OK || !layout)
    end(r, st, NULL);
  else
    failf(r, st, "%s", rs_layout_last_error(layout));
}

void rsw_recipe_add_train(rsw_result *r, rs_layout *layout,
                          const rs_recipe *recipe, int rank) {
  begin(r);
  end_add(r, rs_recipe_add_train(layout, recipe, rank), layout);
}

void rsw_recipe_add_infer(rsw_result *r, rs_layout *layout,
                          const rs_recipe *recipe, int rank) {
  begin(r);
  end_add(r, rs_recipe_add_infer(layout, recipe, rank), layout);
}

void rsw_recipe_num_buffers(rsw_result *r, const rs_recipe *recipe, int side) {
  begin(r);
  GET_VALUE(r, int, end, NULL, rs_recipe_num_buffers, recipe, (rs_side)side);
}

const char *rsw_recipe_buffer(rsw_result *r, rs_recipe *recipe, int side,
                              int rank, int buffer) {
  begin(r);
  const char *name = NULL;
  int64_t bytes = 0;
  end(r, rs_recipe_buffer(recipe, (rs_side)side, rank, buffer, &name, &bytes),
      NULL);
  r->value = bytes;
  return name;
}

void rsw_recipe_num_shards(rsw_result *r, rs_recipe *recipe, int side,
                           int rank) {
  begin(r);
  GET_VALUE(r, int64_t, end, NULL, rs_recipe_num_shards, recipe,
            (rs_side)side, rank);
}

const char *rsw_recipe_shard(rsw_result *r, rs_recipe *recipe, int side,
                             int rank, int64_t index, rsw_ints *fields) {
  begin(r);
  rsw_ints_clear(fields);
  int tensor = 0, scales = 0, shard_rank = 0, buffer = 0, ndim = 0;
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], strides[RS_MAX_DIMS], at = 0;
  const rs_model *model = NULL;
  const char *name = NULL;
  rs_status st = rs_recipe_shard(recipe, (rs_side)side, rank, index, &tensor,
                                 &scales, &shard_rank, off, ext, &buffer, &at,
                                 strides);
  if (st == RS_OK) st = rs_recipe_model(recipe, &model);
  if (st == RS_OK)
    st = rs_model_tensor_info(model, tensor, &name, NULL, &ndim, NULL);
  rs_dtype src = RS_DTYPE_U8, dst = RS_DTYPE_U8;
  if (st == RS_OK)
    st = rs_recipe_tensor_dtypes(recipe, tensor, &src, &dst, NULL, NULL, NULL);
  end(r, st, NULL);
  if (st != RS_OK) return NULL;
  rs_dtype held = scales ? RS_DTYPE_F32 : side == RS_SIDE_SRC ? src : dst;
  int64_t head[] = {tensor, scales, shard_rank, buffer, at, held, ndim};
  const int64_t *boxes[] = {off, ext, strides};
  int failed = 0;
  for (size_t i = 0; i < sizeof head / sizeof *head; i++)
    failed |= rsw_ints_push(fields, head[i]);
  for (int b = 0; b < 3; b++)
    for (int d = 0; d < ndim; d++) failed |= rsw_ints_push(fields, boxes[b][d]);
  if (failed) {
    failf(r, RS_ERR_NO_MEMORY, "out of memory");
    return NULL;
  }
  return name;
}
