/* SPDX-License-Identifier: Apache-2.0 */
/* The host copy engine: malloc'd staging and core/copy/copy.c's strided copies
 * (copy_convert.c's where a copy converts). Each context has its own
 * (rsi_host_engine_create), which cuts a large batch over the threads
 * RS_PARAM_COPY_THREADS asks for; rsi_host_engine() is a static one that
 * copies on the calling thread, for wherever no context is at hand. */
#include <stdlib.h>
#include <string.h>

#include "copy/copy.h"
#include "copy/copy_convert.h"
#include "copy/copy_pool.h"
#include "base/dtype.h"
#include "copy/engine.h"

/* A batch of less traffic than this runs on the calling thread: waking
 * the workers costs more than they would save. */
int64_t rsi_host_split_bytes = (int64_t)1 << 20;

static rs_status host_alloc(rsi_engine *e, int me, size_t bytes, void **out,
                            rsi_err *err) {
  (void)e;
  (void)me;
  *out = malloc(bytes ? bytes : 1);
  return *out ? RS_OK : RSI_NOMEM(err);
}

static void host_release(rsi_engine *e, void *p) {
  (void)e;
  free(p);
}

/* A batch that writes more than this into user memory (destination
 * shards, relay slots: not a dense stream, which is staging that a
 * transport reads next) writes it with streaming stores: weights land
 * to be read by the inference engine later, not by this thread now, and
 * a cached store would first read every destination line from memory. */
#define STREAM_BATCH_BYTES ((int64_t)4 << 20)

static bool streams(const rsi_copy *c, int64_t n) {
  int64_t bytes = 0;
  for (int64_t i = 0; i < n && bytes < STREAM_BATCH_BYTES; i++)
    if (c[i].op == RSI_COPY_PLAIN && !c[i].dense_dst)
      bytes += (c[i].hi - c[i].lo) * c[i].esize;
  return bytes >= STREAM_BATCH_BYTES;
}

static rs_status copy_one(const rsi_copy *c, bool streaming, rsi_err *err) {
  if (c->op != RSI_COPY_PLAIN) return rsi_copy_convert(c, err);
  rsi_copy_range_to(c->ndim, c->extent, (size_t)c->esize, c->dst,
                    c->dense_dst ? NULL : c->dst_strides, c->src,
                    c->dense_src ? NULL : c->src_strides, c->lo, c->hi,
                    streaming && !c->dense_dst);
  return RS_OK;
}

static rs_status copy_all(const rsi_copy *c, int64_t n, bool streaming,
                          rsi_err *err) {
  rs_status st = RS_OK;
  for (int64_t i = 0; i < n && st == RS_OK; i++)
    st = copy_one(&c[i], streaming, err);
  if (streaming) rsi_copy_fence();
  return st;
}

static rs_status host_query(rsi_engine *e, void *queue, bool *done,
                            rsi_err *err) {
  (void)e;
  (void)queue;
  (void)err;
  *done = true;
  return RS_OK;
}

/* ---- batches spread over threads ------------------------------------------ */

typedef struct host_engine {
  rsi_engine base;
  const int64_t *threads; /* the context's RS_PARAM_COPY_THREADS */
  rsi_copy_pool *pool;    /* started at the first batch that splits */
} host_engine;

/* Bytes an element takes at the source (in) and at the destination. */
static void element_bytes(const rsi_copy *c, int64_t *in, int64_t *out) {
  bool plain = c->op == RSI_COPY_PLAIN;
  *in = plain ? c->esize : (int64_t)rsi_dtype_size(c->src_dtype);
  *out = plain ? c->esize : (int64_t)rsi_dtype_size(c->dst_dtype);
}

/* Bytes a copy reads and writes: what a part's share is measured in. */
static int64_t traffic(const rsi_copy *c) {
  int64_t in, out;
  element_bytes(c, &in, &out);
  return (c->hi - c->lo) * (in + out);
}

/* Plain copies and casts may be cut anywhere in their elements; the fp8
 * copies work on whole blocks and are not cut. */
static bool cuttable(const rsi_copy *c) {
  return c->op == RSI_COPY_PLAIN || c->op == RSI_COPY_CAST;
}

/* Elements [lo, hi) of copy c: a dense side's pointer moves with lo. */
static rsi_copy cut(const rsi_copy *c, int64_t lo, int64_t hi) {
  rsi_copy k = *c;
  int64_t in, out;
  element_bytes(c, &in, &out);
  if (c->dense_dst) k.dst = c->dst + (lo - c->lo) * out;
  if (c->dense_src) k.src = c->src + (lo - c->lo) * in;
  k.lo = lo;
  k.hi = hi;
  return k;
}

/* One batch cut into parts of about equal traffic: with the copies laid
 * end to end, part p takes the elements that start in [p, p + 1) x total
 * / parts of the traffic; a copy that is not cut belongs to the part
 * where it starts. Copies of no element do nothing and belong to none. */
typedef struct split {
  const rsi_copy *c;
  int64_t n, total;
  int parts;
  bool streaming;
  rs_status *st;
  rsi_err *errs;
} split;

static void run_part(void *arg, int part) {
  split *s = arg;
  int64_t from = s->total * part / s->parts;
  int64_t to = s->total * (part + 1) / s->parts;
  int64_t at = 0; /* traffic before copy i */
  rs_status st = RS_OK;
  for (int64_t i = 0; i < s->n && at < to && st == RS_OK; i++) {
    const rsi_copy *c = &s->c[i];
    int64_t t = traffic(c), end = at + t;
    if (end > from && t > 0) {
      if (!cuttable(c)) {
        if (at >= from) st = copy_one(c, s->streaming, &s->errs[part]);
      } else {
        int64_t per = t / (c->hi - c->lo); /* traffic an element */
        int64_t lo = c->lo + (at >= from ? 0 : (from - at + per - 1) / per);
        int64_t hi = c->lo + (end <= to ? c->hi - c->lo
                                        : (to - at + per - 1) / per);
        if (hi > c->hi) hi = c->hi;
        if (lo < hi) {
          rsi_copy k = cut(c, lo, hi);
          st = copy_one(&k, s->streaming, &s->errs[part]);
        }
      }
    }
    at = end;
  }
  if (s->streaming) rsi_copy_fence();
  s->st[part] = st;
}

static int threads_of(const host_engine *te) {
  int64_t n = *te->threads;
  if (n == 0) n = rsi_copy_pool_cpus();
  return n > RSI_COPY_POOL_MAX ? RSI_COPY_POOL_MAX : (int)n;
}

static rs_status host_copy(rsi_engine *e, const rsi_copy *c, int64_t n,
                               void *queue, rsi_err *err) {
  (void)queue;
  host_engine *te = (host_engine *)e;
  bool streaming = streams(c, n);
  int parts = threads_of(te);
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) total += traffic(&c[i]);
  if (parts <= 1 || total < rsi_host_split_bytes)
    return copy_all(c, n, streaming, err);
  if (!te->pool && !(te->pool = rsi_copy_pool_create()))
    return copy_all(c, n, streaming, err); /* no memory for threads */
  rs_status *st = calloc((size_t)parts, sizeof *st);
  rsi_err *errs = calloc((size_t)parts, sizeof *errs);
  if (!st || !errs) {
    free(st);
    free(errs);
    return copy_all(c, n, streaming, err);
  }
  split s = {c, n, total, parts, streaming, st, errs};
  rsi_copy_pool_run(te->pool, parts, run_part, &s);
  rs_status out = RS_OK;
  for (int p = 0; p < parts && out == RS_OK; p++)
    if (st[p] != RS_OK) {
      out = st[p];
      *(err ? err : rsi_thread_err()) = errs[p];
    }
  free(st);
  free(errs);
  return out;
}

static const int64_t one_thread = 1;

static void host_destroy(rsi_engine *e) {
  host_engine *te = (host_engine *)e;
  if (te->threads == &one_thread) return; /* the static one */
  rsi_copy_pool_destroy(te->pool);
  free(te);
}

static const rsi_engine_ops host_ops = {
    .name = "host",
    .memory = RSI_MEMORY_HOST,
    .alloc = host_alloc,
    .release = host_release,
    .copy = host_copy,
    .query = host_query,
    .destroy = host_destroy,
};

static host_engine static_engine = {{&host_ops}, &one_thread, NULL};

rsi_engine *rsi_host_engine(void) { return &static_engine.base; }

rsi_engine *rsi_host_engine_create(const int64_t *threads) {
  host_engine *te = calloc(1, sizeof *te);
  if (!te) return NULL;
  te->base.ops = &host_ops;
  te->threads = threads;
  return &te->base;
}
