/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer targets: a reader that turns fuzz bytes into
 * arguments (small numbers most of the time, boundary values often, raw
 * 64-bit values sometimes), the status sets each public call documents,
 * and a check that aborts with a message (libFuzzer then keeps the input
 * as a crash). Header-only: each target is one .c file. */
#ifndef RESHARD_FUZZ_COMMON_H
#define RESHARD_FUZZ_COMMON_H

#include <reshard/reshard.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
static void fz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz invariant violated: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

#define FZ_CHECK(cond, ...)    \
  do {                         \
    if (!(cond)) fz_fail(__VA_ARGS__); \
  } while (0)

/* ---- reading arguments out of the input ------------------------------- */

typedef struct fz_in {
  const uint8_t *p;
  size_t n, at;
} fz_in;

static inline bool fz_more(const fz_in *in) { return in->at < in->n; }

static inline uint8_t fz_u8(fz_in *in) {
  return in->at < in->n ? in->p[in->at++] : 0;
}

static inline uint64_t fz_raw64(fz_in *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)fz_u8(in) << (8 * i);
  return v;
}

static const int64_t fz_edges[] = {
    0, 1, -1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 255, 256, 4096, 65535, 65536,
    INT32_MAX, (int64_t)INT32_MAX + 1, INT32_MIN, (int64_t)1 << 31,
    (int64_t)1 << 32, ((int64_t)1 << 32) + 1, (int64_t)1 << 40,
    (int64_t)1 << 62, INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1,
    INT64_MAX / 2, INT64_MAX / 3, -((int64_t)1 << 32)};
#define FZ_NEDGES ((int)(sizeof fz_edges / sizeof fz_edges[0]))

/* Mostly small (-1..14), often a boundary value or one a little off it
 * (wrapping), sometimes raw bits. */
static inline int64_t fz_i64(fz_in *in) {
  uint8_t s = fz_u8(in);
  if (s < 0xA0) return (int64_t)(s % 16) - 1;
  if (s < 0xD0) return fz_edges[s % FZ_NEDGES];
  if (s < 0xE0)
    return (int64_t)((uint64_t)fz_edges[fz_u8(in) % FZ_NEDGES] +
                     (uint64_t)(int64_t)((s & 7) - 3));
  return (int64_t)fz_raw64(in);
}

static inline int fz_int(fz_in *in) {
  int64_t v = fz_i64(in);
  if (v > INT32_MAX || v < INT32_MIN) return (int)(v & 0x7fffffff);
  return (int)v;
}

/* 0 .. n-1 */
static inline int fz_below(fz_in *in, int n) {
  return n > 0 ? (int)(fz_u8(in) % (unsigned)n) : 0;
}

/* ---- documented statuses ---------------------------------------------- */

static inline bool fz_in_set(rs_status st, const rs_status *set, int n) {
  for (int i = 0; i < n; i++)
    if (set[i] == st) return true;
  return false;
}
#define FZ_SET(...) ((const rs_status[]){__VA_ARGS__}), \
  (int)(sizeof((const rs_status[]){__VA_ARGS__}) / sizeof(rs_status))

/* A failing call returned a documented status and left a message. */
static inline void fz_expect(const char *call, rs_status st,
                             const rs_context *ctx, const rs_status *set,
                             int n) {
  if (st == RS_OK) return;
  FZ_CHECK(fz_in_set(st, set, n), "%s returned %s, which it does not document"
           " (message: %s)", call, rs_status_name(st),
           ctx ? rs_context_last_error(ctx) : rs_last_error());
  const char *m = ctx ? rs_context_last_error(ctx) : rs_last_error();
  FZ_CHECK(m && m[0], "%s returned %s without a message", call,
           rs_status_name(st));
}

#define FZ_ADD_TENSOR_ERRS                                                  \
  RS_ERR_NULL_POINTER, RS_ERR_DUPLICATE_NAME, RS_ERR_TOO_MANY_DIMS,         \
      RS_ERR_BAD_SHAPE, RS_ERR_INVALID_ARGUMENT, RS_ERR_OVERFLOW,           \
      RS_ERR_NO_MEMORY
#define FZ_ADD_SHARD_ERRS                                                   \
  RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_TENSOR, RS_ERR_UNKNOWN_RANK,          \
      RS_ERR_UNKNOWN_BUFFER, RS_ERR_BAD_SHAPE, RS_ERR_OUT_OF_BOUNDS,        \
      RS_ERR_OVERFLOW, RS_ERR_OVERLAP, RS_ERR_INVALID_ARGUMENT,             \
      RS_ERR_NO_MEMORY
/* rs_layout_deserialize: its own, every status of rs_layout_add_shard, and
 * those of declaring a tensor (a bad dtype or shape inside well-framed
 * bytes is reported as rs_layout_add_tensor would). */
#define FZ_DESERIALIZE_ERRS                                                 \
  RS_ERR_CORRUPT, RS_ERR_MISMATCH, FZ_ADD_SHARD_ERRS, RS_ERR_TOO_MANY_DIMS, \
      RS_ERR_DUPLICATE_NAME
#define FZ_PLAN_CREATE_ERRS                                                 \
  RS_ERR_NULL_POINTER, RS_ERR_WRONG_CONTEXT, RS_ERR_INCOMPATIBLE,           \
      RS_ERR_UNSUPPORTED, RS_ERR_NOT_COVERED, RS_ERR_OVERLAP,               \
      RS_ERR_NO_MEMORY

/* ---- layout snapshots --------------------------------------------------- */

/* The serialization of a layout, to see that a refused call left it
 * byte-for-byte as it was. */
typedef struct fz_snap {
  void *bytes;
  size_t len;
  int ntensors;
  int64_t nshards;
} fz_snap;

static inline void fz_snap_take(const rs_layout *l, fz_snap *s) {
  s->bytes = NULL;
  s->len = 0;
  FZ_CHECK(rs_layout_num_tensors(l, &s->ntensors) == RS_OK, "num_tensors");
  FZ_CHECK(rs_layout_num_shards(l, &s->nshards) == RS_OK, "num_shards");
  FZ_CHECK(rs_layout_serialize(l, &s->bytes, &s->len) == RS_OK,
           "serialize failed");
}

static inline void fz_snap_same(const rs_layout *l, const fz_snap *s,
                                const char *after) {
  fz_snap now;
  fz_snap_take(l, &now);
  FZ_CHECK(now.ntensors == s->ntensors && now.nshards == s->nshards &&
               now.len == s->len && memcmp(now.bytes, s->bytes, s->len) == 0,
           "a refused %s changed the layout (%d tensors, %lld shards -> %d, "
           "%lld)",
           after, s->ntensors, (long long)s->nshards, now.ntensors,
           (long long)now.nshards);
  rs_free(now.bytes);
}

static inline void fz_snap_free(fz_snap *s) {
  rs_free(s->bytes);
  s->bytes = NULL;
}

#endif
