/* SPDX-License-Identifier: Apache-2.0 */
/* Writing layout wire bytes by hand, field by field, for the bad-input
 * catalog and the fuzz seed corpus: every field of the format can be given
 * any value, then the length field and the checksum are fixed up (or not).
 * The format (core/layout/wire.h, docs in the header there):
 *
 *   "RSLAYOUT" u32 version u32 rank u64 total_bytes
 *   u32 ntensors; per tensor: u32 name_len, name, u32 dtype, u32 ndim,
 *       u64 shape[ndim]
 *   u64 nshards; per shard: u32 tensor, u32 rank, u32 buffer,
 *       u64 byte_offset, u64 offset[ndim], extent[ndim], strides[ndim]
 *   u64 checksum (FNV-1a 64 of every byte before it)
 *
 * All little-endian. Header-only; no Criterion, so the fuzz tools use it. */
#ifndef RESHARD_TESTS_TH_WIRE_H
#define RESHARD_TESTS_TH_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RW_HEADER_BYTES 24u   /* magic, version, rank, total */
#define RW_VERSION 1u
#define RW_AT_VERSION 8u
#define RW_AT_RANK 12u
#define RW_AT_TOTAL 16u

typedef struct rw_buf {
  unsigned char *b;
  size_t n, cap;
} rw_buf;

static inline void rw_bytes(rw_buf *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->n + n) cap *= 2;
    unsigned char *b = (unsigned char *)realloc(w->b, cap);
    if (!b) abort();
    w->b = b;
    w->cap = cap;
  }
  if (n) memcpy(w->b + w->n, p, n);
  w->n += n;
}

static inline void rw_u32(rw_buf *w, uint32_t v) {
  unsigned char b[4];
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
  rw_bytes(w, b, 4);
}

static inline void rw_u64(rw_buf *w, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  rw_bytes(w, b, 8);
}

static inline void rw_put_u32_at(rw_buf *w, size_t at, uint32_t v) {
  for (int i = 0; i < 4; i++) w->b[at + (size_t)i] = (unsigned char)(v >> (8 * i));
}

static inline void rw_put_u64_at(rw_buf *w, size_t at, uint64_t v) {
  for (int i = 0; i < 8; i++) w->b[at + (size_t)i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t rw_get_u64_at(const unsigned char *b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[at + (size_t)i] << (8 * i);
  return v;
}

static inline uint64_t rw_fnv1a(const unsigned char *b, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Magic, version, sender rank, and a length field patched by rw_finish. */
static inline void rw_header(rw_buf *w, uint32_t version, uint32_t rank) {
  rw_bytes(w, "RSLAYOUT", 8);
  rw_u32(w, version);
  rw_u32(w, rank);
  rw_u64(w, 0);
}

static inline void rw_tensor(rw_buf *w, const char *name, uint32_t dtype,
                             uint32_t ndim, const uint64_t *shape) {
  uint32_t n = (uint32_t)strlen(name);
  rw_u32(w, n);
  rw_bytes(w, name, n);
  rw_u32(w, dtype);
  rw_u32(w, ndim);
  for (uint32_t d = 0; d < ndim; d++) rw_u64(w, shape[d]);
}

/* geom: offset[ndim], extent[ndim], strides[ndim] */
static inline void rw_shard(rw_buf *w, uint32_t tensor, uint32_t rank,
                            uint32_t buffer, uint64_t byte_offset,
                            uint32_t ndim, const uint64_t *geom) {
  rw_u32(w, tensor);
  rw_u32(w, rank);
  rw_u32(w, buffer);
  rw_u64(w, byte_offset);
  for (uint32_t k = 0; k < 3 * ndim; k++) rw_u64(w, geom[k]);
}

/* Append the checksum and patch the length field: the bytes are then
 * well-formed as far as framing goes, whatever the fields say. */
static inline void rw_finish(rw_buf *w) {
  rw_u64(w, 0);
  rw_put_u64_at(w, RW_AT_TOTAL, (uint64_t)w->n);
  rw_put_u64_at(w, w->n - 8, rw_fnv1a(w->b, w->n - 8));
}

/* Recompute length field and checksum of complete bytes after an edit. */
static inline void rw_reseal(unsigned char *b, size_t n) {
  if (n < 32) return;
  for (int i = 0; i < 8; i++) b[RW_AT_TOTAL + (size_t)i] = (unsigned char)((uint64_t)n >> (8 * i));
  uint64_t sum = rw_fnv1a(b, n - 8);
  for (int i = 0; i < 8; i++) b[n - 8 + (size_t)i] = (unsigned char)(sum >> (8 * i));
}

static inline void rw_free(rw_buf *w) {
  free(w->b);
  w->b = NULL;
  w->n = w->cap = 0;
}

#endif
