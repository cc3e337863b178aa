/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the libreshard Criterion tests: array literals, filling
 * and checking shards in strided local memory with the values of
 * th_value.h, the torch.chunk / DTensor reference box, and small string and
 * JSON checks. Header-only (static inline) so each test binary is one .c;
 * no Criterion here, so the fuzz targets and benches may include it too. */
#ifndef RESHARD_TESTS_TH_UTIL_H
#define RESHARD_TESTS_TH_UTIL_H

#include <reshard/reshard.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "th_value.h"

/* 1 under AddressSanitizer, which reserves terabytes of address space and
 * keeps freed memory resident in its quarantine: a test that limits or
 * judges its memory leaves that to LeakSanitizer there. */
#if defined(__SANITIZE_ADDRESS__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_SANITIZED 1
#endif
#endif
#ifndef TH_SANITIZED
#define TH_SANITIZED 0
#endif

/* Array literals for calls that take shapes, offsets, ranks: the one
 * definition the tests use. */
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define U64(...) ((const uint64_t[]){__VA_ARGS__})
#define INTS(...) ((const int[]){__VA_ARGS__})

/* Advance a row-major multi-index idx over extents ext; false when done. */
static inline bool th_next(int ndim, const int64_t *ext, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < ext[d]) return true;
    idx[d] = 0;
  }
  return false;
}

static inline int64_t th_volume(int ndim, const int64_t *ext) {
  int64_t v = 1;
  for (int d = 0; d < ndim; d++) v *= ext[d];
  return v;
}

static inline void th_dense_strides(int ndim, const int64_t *ext,
                                    int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= ext[d];
  }
}

/* Bytes a shard spans from byte_offset (0 for an empty box). */
static inline int64_t th_span_bytes(int ndim, const int64_t *ext,
                                    const int64_t *strides, size_t esize) {
  int64_t last = 0;
  for (int d = 0; d < ndim; d++) {
    if (ext[d] == 0) return 0;
    last += (ext[d] - 1) * strides[d];
  }
  return (last + 1) * (int64_t)esize;
}

/* One shard as the tests know it: where its box lives in local memory. */
typedef struct th_shard {
  int tid;                 /* test's tensor id (value derivation) */
  uint64_t gen;            /* value generation (0 unless set) */
  int ndim;
  int64_t shape[RS_MAX_DIMS];
  int64_t off[RS_MAX_DIMS];
  int64_t ext[RS_MAX_DIMS];
  int64_t strides[RS_MAX_DIMS];
  size_t esize;
  int rank;
  int buffer;
  int64_t byte_offset;
} th_shard;

static inline void th_shard_init(th_shard *s, int tid, int ndim,
                                 const int64_t *shape, size_t esize,
                                 int rank, const int64_t *off,
                                 const int64_t *ext, int buffer,
                                 int64_t byte_offset,
                                 const int64_t *strides) {
  memset(s, 0, sizeof *s);
  s->tid = tid;
  s->ndim = ndim;
  s->esize = esize;
  s->rank = rank;
  s->buffer = buffer;
  s->byte_offset = byte_offset;
  for (int d = 0; d < ndim; d++) {
    s->shape[d] = shape[d];
    s->off[d] = off[d];
    s->ext[d] = ext[d];
  }
  if (strides)
    for (int d = 0; d < ndim; d++) s->strides[d] = strides[d];
  else
    th_dense_strides(ndim, ext, s->strides);
}

static inline int64_t th_shard_span(const th_shard *s) {
  return th_span_bytes(s->ndim, s->ext, s->strides, s->esize);
}

/* Byte position (from the buffer start) of local index idx. */
static inline int64_t th_shard_pos(const th_shard *s, const int64_t *idx) {
  int64_t p = 0;
  for (int d = 0; d < s->ndim; d++) p += idx[d] * s->strides[d];
  return s->byte_offset + p * (int64_t)s->esize;
}

static inline int64_t th_shard_lin(const th_shard *s, const int64_t *idx) {
  int64_t lin = 0;
  for (int d = 0; d < s->ndim; d++)
    lin = lin * s->shape[d] + s->off[d] + idx[d];
  return lin;
}

/* Write the derived values of the shard's box into buf. */
static inline void th_fill(unsigned char *buf, const th_shard *s) {
  int64_t idx[RS_MAX_DIMS] = {0};
  if (th_volume(s->ndim, s->ext) == 0) return;
  do {
    th_store(buf + th_shard_pos(s, idx), s->esize,
             th_value(s->gen, (uint64_t)s->tid, th_shard_lin(s, idx),
                      s->esize));
  } while (th_next(s->ndim, s->ext, idx));
}

/* Check the shard's box in buf; returns -1 when right, else the global
 * linear index of the first wrong element (got and want tell the values). */
static inline int64_t th_check(const unsigned char *buf, const th_shard *s,
                               uint64_t *got, uint64_t *want) {
  int64_t idx[RS_MAX_DIMS] = {0};
  if (th_volume(s->ndim, s->ext) == 0) return -1;
  do {
    int64_t lin = th_shard_lin(s, idx);
    uint64_t w = th_value(s->gen, (uint64_t)s->tid, lin, s->esize);
    uint64_t g = th_load(buf + th_shard_pos(s, idx), s->esize);
    if (g != w) {
      if (got) *got = g;
      if (want) *want = w;
      return lin;
    }
  } while (th_next(s->ndim, s->ext, idx));
  return -1;
}

/* Mark the bytes the shard's elements occupy. */
static inline void th_mark(unsigned char *covered, const th_shard *s) {
  int64_t idx[RS_MAX_DIMS] = {0};
  if (th_volume(s->ndim, s->ext) == 0) return;
  do {
    memset(covered + th_shard_pos(s, idx), 1, s->esize);
  } while (th_next(s->ndim, s->ext, idx));
}

/* Declare the shard in a layout (tensor name given by the caller). */
static inline rs_status th_add(rs_layout *l, const char *name,
                               const th_shard *s, bool pass_strides) {
  return rs_layout_add_shard(l, name, s->rank, s->off, s->ext, s->buffer,
                             s->byte_offset,
                             pass_strides ? s->strides : NULL);
}

/* torch.chunk / DTensor reference: the box a mesh coordinate holds.
 * chunk = ceil(size / n); shard i covers [min(i*chunk, size),
 * min((i+1)*chunk, size)); nested axes split the current local chunk and
 * the offsets add up. */
static inline void th_ref_local_box(int ndim, const int64_t *shape,
                                    int mesh_ndim, const int64_t *mesh_shape,
                                    const int *placements,
                                    const int64_t *coord, int64_t *off,
                                    int64_t *ext) {
  for (int d = 0; d < ndim; d++) {
    off[d] = 0;
    ext[d] = shape[d];
  }
  for (int a = 0; a < mesh_ndim; a++) {
    int d = placements[a];
    if (d < 0) continue;
    int64_t s = ext[d], n = mesh_shape[a];
    int64_t chunk = (s + n - 1) / n;
    int64_t lo = chunk * coord[a];
    if (lo > s) lo = s;
    int64_t hi = lo + chunk;
    if (hi > s) hi = s;
    off[d] += lo;
    ext[d] = hi - lo;
  }
}

static inline bool th_contains(const char *hay, const char *needle) {
  return hay && needle && strstr(hay, needle) != NULL;
}

/* Balanced braces/brackets outside JSON strings. */
static inline bool th_json_balanced(const char *s) {
  int depth = 0;
  char stack[256];
  bool in_str = false;
  for (; *s; s++) {
    char c = *s;
    if (in_str) {
      if (c == '\\' && s[1]) {
        s++;
        continue;
      }
      if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      if (depth >= 256) return false;
      stack[depth++] = c;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return false;
      char o = stack[--depth];
      if ((c == '}' && o != '{') || (c == ']' && o != '[')) return false;
    }
  }
  return depth == 0 && !in_str;
}

/* Every JSON string is well-formed: no raw control byte, only the escapes
 * JSON allows (\" \\ \/ \b \f \n \r \t \uXXXX). */
static inline bool th_json_strings_valid(const char *s) {
  bool in_str = false;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (!in_str) {
      if (c == '"') in_str = true;
      continue;
    }
    if (c < 0x20) return false;
    if (c == '"') {
      in_str = false;
    } else if (c == '\\') {
      char e = s[1];
      if (e == 'u') {
        for (int i = 2; i < 6; i++) {
          char h = s[i];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                (h >= 'A' && h <= 'F')))
            return false;
        }
        s += 5;
      } else if (e && strchr("\"\\/bfnrt", e)) {
        s++;
      } else {
        return false;
      }
    }
  }
  return !in_str;
}

/* Whether `part` holds exactly the moves of `whole` that have `rank` at
 * either end (rank -1: every move), in the same order, with the same
 * tensor, ranks, route, round, forwarding and box (no box when `part` was
 * made without, RS_PARAM_PLAN_BOXES = 0). On a difference, false and `why`
 * (cap bytes) says which move. */
static inline bool th_same_moves_of(const rs_plan *whole, const rs_plan *part,
                                    int rank, char *why, size_t cap) {
  int64_t nw = 0, np = 0, k = 0;
  if (rs_plan_num_moves(whole, &nw) != RS_OK ||
      rs_plan_num_moves(part, &np) != RS_OK) {
    snprintf(why, cap, "rs_plan_num_moves failed");
    return false;
  }
  for (int64_t i = 0; i < nw; i++) {
    int t1, s1, d1, r1, f1, t2, s2, d2, r2, f2, nd = 0;
    rs_route q1, q2;
    int64_t o1[RS_MAX_DIMS], e1[RS_MAX_DIMS], o2[RS_MAX_DIMS], e2[RS_MAX_DIMS];
    rs_plan_move_info(whole, i, &t1, &s1, &d1, &q1, &r1, &f1);
    if (rank >= 0 && s1 != rank && d1 != rank) continue;
    if (k >= np) {
      snprintf(why, cap, "the part ends after %lld moves; the whole plan's "
               "move %lld (%d -> %d) is missing", (long long)k, (long long)i,
               s1, d1);
      return false;
    }
    rs_plan_move_info(part, k, &t2, &s2, &d2, &q2, &r2, &f2);
    rs_plan_tensor_info(whole, t1, NULL, &nd);
    rs_plan_move_box(whole, i, o1, e1);
    rs_status boxed = rs_plan_move_box(part, k, o2, e2);
    if (boxed == RS_ERR_UNSUPPORTED) { /* a plan without boxes */
      memcpy(o2, o1, sizeof o2);
      memcpy(e2, e1, sizeof e2);
    }
    if (t1 != t2 || s1 != s2 || d1 != d2 || q1 != q2 || r1 != r2 ||
        f1 != f2 || memcmp(o1, o2, (size_t)nd * sizeof *o1) ||
        memcmp(e1, e2, (size_t)nd * sizeof *e1)) {
      snprintf(why, cap, "move %lld of the part (tensor %d, %d -> %d, round "
               "%d) differs from move %lld of the whole plan (tensor %d, %d "
               "-> %d, round %d)", (long long)k, t2, s2, d2, r2,
               (long long)i, t1, s1, d1, r1);
      return false;
    }
    k++;
  }
  if (k != np) {
    snprintf(why, cap, "the part has %lld moves, the whole plan %lld of "
             "rank %d", (long long)np, (long long)k, rank);
    return false;
  }
  return true;
}

/* The JSON of a plan as the same plan made without boxes
 * (RS_PARAM_PLAN_BOXES = 0) writes it: "boxes" false, and no move's
 * "offset" and "extent". Owned by the caller (free); NULL if it is no
 * plan's JSON. */
static inline char *th_json_without_boxes(const char *json) {
  /* one pass with lengths known, no str* call on the rest of the text:
   * those are linear each under ASan's strict_string_checks */
  static const char on[] = "\"boxes\":true", off[] = "\"boxes\":false";
  static const char offset[] = "\"offset\":[", extent[] = "],\"extent\":[";
  size_t len = strlen(json), n = 0;
  char *out = (char *)malloc(len + 2); /* "true" becomes "false" */
  if (!out) return NULL;
  bool flag = false, bad = false;
  for (size_t i = 0; i < len && !bad;) {
    size_t left = len - i;
    if (!flag && left >= sizeof on - 1 && !memcmp(json + i, on, sizeof on - 1)) {
      memcpy(out + n, off, sizeof off - 1);
      n += sizeof off - 1;
      i += sizeof on - 1;
      flag = true;
      continue;
    }
    /* a move's box: "offset":[...],"extent":[...], (plain integers) */
    if (left >= sizeof offset - 1 &&
        !memcmp(json + i, offset, sizeof offset - 1)) {
      size_t j = i + sizeof offset - 1;
      while (j < len && json[j] != ']') j++;
      bad = len - j < sizeof extent - 1 ||
            memcmp(json + j, extent, sizeof extent - 1);
      j += sizeof extent - 1;
      while (!bad && j < len && json[j] != ']') j++;
      bad = bad || len - j < 2 || json[j + 1] != ',';
      i = j + 2;
      continue;
    }
    out[n++] = json[i++];
  }
  if (bad || !flag) {
    free(out);
    return NULL;
  }
  out[n] = 0;
  return out;
}

/* Whether `bare`, made from the same layouts as `whole` but without
 * boxes (RS_PARAM_PLAN_BOXES = 0), is the same plan: the same moves but
 * for their boxes, which it refuses to give, the same figures for every
 * rank, the same fingerprint, and the same JSON but for the boxes. On a
 * difference, false and `why` (cap bytes) says what differs. */
static inline bool th_same_plan_without_boxes(const rs_plan *whole,
                                              const rs_plan *bare, int world,
                                              char *why, size_t cap) {
  if (!th_same_moves_of(whole, bare, -1, why, cap)) return false;
  int64_t nm = 0, o[RS_MAX_DIMS], e[RS_MAX_DIMS];
  rs_plan_num_moves(bare, &nm);
  if (nm > 0 && rs_plan_move_box(bare, 0, o, e) != RS_ERR_UNSUPPORTED) {
    snprintf(why, cap, "a plan without boxes gives a move's box");
    return false;
  }
  uint64_t f1 = 0, f2 = 1;
  rs_plan_fingerprint(whole, &f1);
  rs_plan_fingerprint(bare, &f2);
  if (f1 != f2) {
    snprintf(why, cap, "another fingerprint");
    return false;
  }
  for (int r = -1; r < world; r++)
    for (int s = RS_STAT_BYTES_SENT_INTRA;
         s <= RS_STAT_BYTES_UNPACKED; s++) {
      int64_t a = -1, b = -2;
      rs_status sa = rs_plan_stat(whole, r < 0 ? RS_ALL_RANKS : r,
                                  (rs_stat)s, &a);
      rs_status sb = rs_plan_stat(bare, r < 0 ? RS_ALL_RANKS : r,
                                  (rs_stat)s, &b);
      if (sa != sb || a != b) {
        snprintf(why, cap, "figure %d of rank %d: %lld with boxes, %lld "
                 "without", s, r, (long long)a, (long long)b);
        return false;
      }
    }
  char *j1 = NULL, *j2 = NULL;
  if (rs_plan_to_json(whole, &j1, NULL) != RS_OK ||
      rs_plan_to_json(bare, &j2, NULL) != RS_OK) {
    rs_free(j1);
    snprintf(why, cap, "rs_plan_to_json failed");
    return false;
  }
  char *want = th_json_without_boxes(j1);
  bool same = want && !strcmp(want, j2);
  if (!same)
    snprintf(why, cap, "the JSON differs but for the boxes: %.120s", j2);
  free(want);
  rs_free(j1);
  rs_free(j2);
  return same;
}

#endif
