/* SPDX-License-Identifier: Apache-2.0 */
/* The layout wire format (wire.h): encoding, decoding with every length
 * checked before it is read, and merging encodings into a layout all or
 * nothing. */
#include "layout/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

static const char magic[8] = {'R', 'S', 'L', 'A', 'Y', 'O', 'U', 'T'};

/* ---- writer ---------------------------------------------------------------- */

typedef struct writer {
  unsigned char *b;
  size_t n, cap;
  bool failed;
} writer;

static void put_bytes(writer *w, const void *p, size_t n) {
  if (w->failed) return;
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    while (cap < w->n + n) cap *= 2;
    unsigned char *b = realloc(w->b, cap);
    if (!b) {
      w->failed = true;
      return;
    }
    w->b = b;
    w->cap = cap;
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void put_u64(writer *w, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  put_bytes(w, b, 8);
}

static void put_u32(writer *w, uint32_t v) {
  unsigned char b[4];
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
  put_bytes(w, b, 4);
}

rs_status rsi_wire_encode(const rs_layout *l, int rank, void **out,
                          size_t *len, rsi_err *err) {
  writer w = {0};
  uint32_t nscaled = 0;
  for (int t = 0; t < l->ntensors; t++) nscaled += l->tensors[t].scales >= 0;
  put_bytes(&w, magic, sizeof magic);
  put_u32(&w, nscaled ? RSI_WIRE_VERSION : RSI_WIRE_VERSION_PLAIN);
  put_u32(&w, (uint32_t)rank);
  put_u64(&w, 0); /* total, patched below */
  put_u32(&w, (uint32_t)l->ntensors);
  for (int t = 0; t < l->ntensors; t++) {
    const rsi_tensor *x = &l->tensors[t];
    size_t n = strlen(x->name);
    put_u32(&w, (uint32_t)n);
    put_bytes(&w, x->name, n);
    put_u32(&w, (uint32_t)x->dtype);
    put_u32(&w, (uint32_t)x->ndim);
    for (int d = 0; d < x->ndim; d++) put_u64(&w, (uint64_t)x->shape[d]);
  }
  put_u64(&w, (uint64_t)l->nshards);
  for (int64_t i = 0; i < l->nshards; i++) {
    const rsi_shard *s = &l->shards[i];
    int nd = l->tensors[s->tensor].ndim;
    put_u32(&w, (uint32_t)s->tensor);
    put_u32(&w, (uint32_t)s->rank);
    put_u32(&w, (uint32_t)s->buffer);
    put_u64(&w, (uint64_t)s->byte_offset);
    for (int k = 0; k < 3 * nd; k++)
      put_u64(&w, (uint64_t)l->pool.v[s->geom + k]);
  }
  if (nscaled) {
    put_u32(&w, nscaled);
    for (int t = 0; t < l->ntensors; t++) {
      const rsi_tensor *x = &l->tensors[t];
      if (x->scales < 0) continue;
      put_u32(&w, (uint32_t)t);
      put_u32(&w, (uint32_t)x->scales);
      put_u64(&w, (uint64_t)x->block[0]);
      put_u64(&w, (uint64_t)x->block[1]);
      put_u32(&w, (uint32_t)x->scale_rule);
    }
  }
  put_u64(&w, 0); /* checksum, patched below */
  if (w.failed) {
    free(w.b);
    return RSI_NOMEM(err);
  }
  for (int i = 0; i < 8; i++) w.b[16 + i] = (unsigned char)((uint64_t)w.n >> (8 * i));
  uint64_t sum = rsi_fnv1a64(w.b, w.n - 8);
  for (int i = 0; i < 8; i++) w.b[w.n - 8 + i] = (unsigned char)(sum >> (8 * i));
  *out = w.b;
  *len = w.n;
  return RS_OK;
}

/* ---- reader ---------------------------------------------------------------- */

typedef struct reader {
  const unsigned char *b;
  size_t n, at;
} reader;

static bool get_bytes(reader *r, void *p, size_t n) {
  if (n > r->n - r->at) return false;
  memcpy(p, r->b + r->at, n);
  r->at += n;
  return true;
}

static bool get_u64(reader *r, uint64_t *v) {
  unsigned char b[8];
  if (!get_bytes(r, b, 8)) return false;
  *v = 0;
  for (int i = 0; i < 8; i++) *v |= (uint64_t)b[i] << (8 * i);
  return true;
}

static bool get_u32(reader *r, uint32_t *v) {
  unsigned char b[4];
  if (!get_bytes(r, b, 4)) return false;
  *v = 0;
  for (int i = 0; i < 4; i++) *v |= (uint32_t)b[i] << (8 * i);
  return true;
}

/* "layout bytes from rank 3" or, for rs_layout_deserialize, "layout bytes" */
static const char *origin(int from, char *buf, size_t n) {
  if (from == RSI_WIRE_ANY_SENDER) return "layout bytes";
  snprintf(buf, n, "layout bytes from rank %d", from);
  return buf;
}

#define CORRUPT(what)                                                     \
  RSI_FAIL(err, RS_ERR_CORRUPT, "%s: %s (at byte %zu)",                   \
           origin(from, who, sizeof who), what, r.at)

/* The block-scale declarations of a version 2 encoding, on the tensors
 * map[] gives. A declaration the layout already has is accepted; another
 * one on the same tensors is a mismatch. */
static rs_status decode_scales(rs_layout *l, reader *rp, const int *map,
                               uint32_t ntensors, int from, rsi_err *err) {
  reader r = *rp;
  char who[48];
  uint32_t n;
  if (!get_u32(&r, &n)) return CORRUPT("truncated block-scale count");
  if (n > ntensors) return CORRUPT("more block scales than tensors");
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v, s, rule;
    uint64_t b0, b1;
    if (!get_u32(&r, &v) || !get_u32(&r, &s) || !get_u64(&r, &b0) ||
        !get_u64(&r, &b1) || !get_u32(&r, &rule))
      return CORRUPT("truncated block-scale declaration");
    if (v >= ntensors || s >= ntensors || b0 > INT64_MAX || b1 > INT64_MAX)
      return CORRUPT("block-scale declaration out of range");
    rs_status st = rsi_layout_set_block_scales(l, map[v], map[s], (int64_t)b0,
                                               (int64_t)b1,
                                               (rs_scale_rule)rule);
    if (st != RS_OK) {
      char why[RSI_ERR_MSG_BYTES];
      snprintf(why, sizeof why, "%s", err->msg);
      return RSI_FAIL(err, RS_ERR_MISMATCH, "%s: %s",
                      origin(from, who, sizeof who), why);
    }
  }
  *rp = r;
  return RS_OK;
}

rs_status rsi_wire_decode(rs_layout *l, int from, const void *bytes,
                          size_t len, rsi_err *err) {
  reader r = {bytes, len, 0};
  char who[48];
  char m[8];
  uint32_t version, sender, ntensors;
  uint64_t total = 0, nshards = 0, sum = 0;
  if (len < sizeof magic + 24 || !get_bytes(&r, m, 8) ||
      memcmp(m, magic, 8) != 0)
    return CORRUPT("no RSLAYOUT header");
  get_u32(&r, &version);
  get_u32(&r, &sender);
  get_u64(&r, &total);
  if (version != RSI_WIRE_VERSION && version != RSI_WIRE_VERSION_PLAIN)
    return RSI_FAIL(err, RS_ERR_CORRUPT,
                    "%s: wire version %u, this libreshard reads versions "
                    "%u and %u",
                    origin(from, who, sizeof who), version,
                    RSI_WIRE_VERSION_PLAIN, RSI_WIRE_VERSION);
  if (total != len)
    return CORRUPT("length field disagrees with the bytes received");
  if (from != RSI_WIRE_ANY_SENDER && sender != (uint32_t)from)
    return CORRUPT("sent under another rank");
  {
    reader t = {bytes, len, len - 8};
    get_u64(&t, &sum);
    if (sum != rsi_fnv1a64(bytes, len - 8))
      return CORRUPT("checksum mismatch");
  }
  r.n = len - 8; /* the checksum is not content */
  if (!get_u32(&r, &ntensors)) return CORRUPT("truncated tensor count");
  if (ntensors > (r.n - r.at) / 12) return CORRUPT("tensor count too large");
  int *map = malloc(((size_t)ntensors + 1) * sizeof *map);
  if (!map) return RSI_NOMEM(err);
  rs_status st = RS_OK;
  char *name = NULL;
  for (uint32_t t = 0; t < ntensors && st == RS_OK; t++) {
    uint32_t nlen, dtype, ndim;
    int64_t shape[RSI_MAX_DIMS];
    if (!get_u32(&r, &nlen) || nlen == 0 || nlen > r.n - r.at) {
      st = CORRUPT("bad tensor name length");
      break;
    }
    char *grown = realloc(name, (size_t)nlen + 1);
    if (!grown) {
      st = RSI_NOMEM(err);
      break;
    }
    name = grown;
    get_bytes(&r, name, nlen);
    name[nlen] = '\0';
    if (memchr(name, '\0', nlen)) {
      st = CORRUPT("tensor name holds a NUL byte");
      break;
    }
    if (!get_u32(&r, &dtype) || !get_u32(&r, &ndim) || ndim < 1 ||
        ndim > RSI_MAX_DIMS) {
      st = CORRUPT("bad tensor dtype or ndim");
      break;
    }
    for (uint32_t d = 0; d < ndim && st == RS_OK; d++) {
      uint64_t v = 0;
      if (!get_u64(&r, &v)) st = CORRUPT("truncated tensor shape");
      shape[d] = (int64_t)v;
    }
    if (st != RS_OK) break;
    int known = rsi_layout_find(l, name);
    if (known < 0) {
      st = rsi_layout_add_tensor(l, name, (rs_dtype)dtype, (int)ndim, shape);
      map[t] = l->ntensors - 1;
    } else {
      const rsi_tensor *x = &l->tensors[known];
      bool same = x->dtype == (rs_dtype)dtype && x->ndim == (int)ndim;
      for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == shape[d];
      if (!same)
        st = RSI_FAIL(err, RS_ERR_MISMATCH,
                      "tensor '%s': %s declare another dtype or shape than "
                      "the layout already has",
                      name, origin(from, who, sizeof who));
      map[t] = known;
    }
  }
  if (st == RS_OK && !get_u64(&r, &nshards)) st = CORRUPT("truncated shard count");
  if (st == RS_OK && nshards > (r.n - r.at) / 28) st = CORRUPT("shard count too large");
  for (uint64_t i = 0; st == RS_OK && i < nshards; i++) {
    uint32_t tensor, rank, buffer;
    uint64_t byte_offset;
    int64_t geom[3 * RSI_MAX_DIMS];
    if (!get_u32(&r, &tensor) || !get_u32(&r, &rank) || !get_u32(&r, &buffer) ||
        !get_u64(&r, &byte_offset)) {
      st = CORRUPT("truncated shard");
      break;
    }
    if (tensor >= ntensors) {
      st = CORRUPT("shard names a tensor that is not there");
      break;
    }
    const rsi_tensor *x = &l->tensors[map[tensor]];
    for (int k = 0; k < 3 * x->ndim && st == RS_OK; k++) {
      uint64_t v = 0;
      if (!get_u64(&r, &v)) st = CORRUPT("truncated shard box");
      geom[k] = (int64_t)v;
    }
    if (st != RS_OK) break;
    st = rsi_layout_add_shard_to(l, map[tensor], (int)rank, geom,
                                 geom + x->ndim, (int)buffer,
                                 (int64_t)byte_offset, geom + 2 * x->ndim);
  }
  if (st == RS_OK && version == RSI_WIRE_VERSION)
    st = decode_scales(l, &r, map, ntensors, from, err);
  if (st == RS_OK && r.at != r.n) st = CORRUPT("trailing bytes");
  free(name);
  free(map);
  return st;
}

static void swap_contents(rs_layout *a, rs_layout *b) {
  rs_layout t = *a;
  *a = *b;
  *b = t;
  rs_context *c = a->ctx; /* the context stays with its handle */
  a->ctx = b->ctx;
  b->ctx = c;
}

/* Decode the n encodings into l, one after another. */
static rs_status decode_each(rs_layout *l, const void *bytes,
                             const size_t *counts, int n, bool from_any,
                             rsi_err *err) {
  size_t at = 0;
  for (int r = 0; r < n; r++) {
    RSI_TRY(rsi_wire_decode(l, from_any ? RSI_WIRE_ANY_SENDER : r,
                            (const char *)bytes + at, counts[r], err));
    at += counts[r];
  }
  return RS_OK;
}

rs_status rsi_wire_decode_fresh(rs_context *ctx, const void *bytes,
                                const size_t *counts, int n, rs_layout **out,
                                rsi_err *err) {
  *out = NULL;
  rs_layout *fresh = NULL;
  RSI_TRY(rsi_layout_create(ctx, &fresh));
  rs_status st = decode_each(fresh, bytes, counts, n, false, err);
  if (st != RS_OK) {
    rsi_layout_destroy(fresh);
    return st;
  }
  *out = fresh;
  return RS_OK;
}

void rsi_wire_replace(rs_layout *l, rs_layout *fresh) {
  swap_contents(l, fresh);
  rsi_layout_destroy(fresh);
}

rs_status rsi_wire_merge(rs_layout *l, const void *bytes, const size_t *counts,
                         int n, bool from_any, rsi_err *err) {
  if (from_any) { /* added to what l holds: decode in place, undo on failure */
    rsi_layout_mark mark = rsi_layout_mark_now(l);
    rs_status st = decode_each(l, bytes, counts, n, true, err);
    if (st != RS_OK) rsi_layout_roll_back(l, &mark);
    return st;
  }
  rs_layout *fresh;
  RSI_TRY(rsi_wire_decode_fresh(l->ctx, bytes, counts, n, &fresh, err));
  rsi_wire_replace(l, fresh);
  return RS_OK;
}
