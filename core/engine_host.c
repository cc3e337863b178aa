/* The host copy engine: malloc'd staging and core/copy.c's strided copies
 * (copy_convert.c's where a copy converts), done at once on the calling
 * thread. Stateless, so one static instance
 * serves every context. */
#include <stdlib.h>

#include "copy.h"
#include "copy_convert.h"
#include "engine.h"

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

static rs_status host_copy(rsi_engine *e, const rsi_copy *c, int64_t n,
                           void *queue, rsi_err *err) {
  (void)e;
  (void)queue;
  bool streaming = streams(c, n);
  rs_status st = RS_OK;
  for (int64_t i = 0; i < n && st == RS_OK; i++) {
    if (c[i].op != RSI_COPY_PLAIN) {
      st = rsi_copy_convert(&c[i], err);
      continue;
    }
    rsi_copy_range_to(c[i].ndim, c[i].extent, (size_t)c[i].esize, c[i].dst,
                      c[i].dense_dst ? NULL : c[i].dst_strides, c[i].src,
                      c[i].dense_src ? NULL : c[i].src_strides, c[i].lo,
                      c[i].hi, streaming && !c[i].dense_dst);
  }
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

static void host_destroy(rsi_engine *e) { (void)e; }

static const rsi_engine_ops host_ops = {
    .name = "host",
    .memory = RSI_MEMORY_HOST,
    .alloc = host_alloc,
    .release = host_release,
    .copy = host_copy,
    .query = host_query,
    .destroy = host_destroy,
};

static rsi_engine host_engine = {&host_ops};

rsi_engine *rsi_host_engine(void) { return &host_engine; }
