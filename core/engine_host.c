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

static rs_status host_copy(rsi_engine *e, const rsi_copy *c, int64_t n,
                           void *queue, rsi_err *err) {
  (void)e;
  (void)queue;
  for (int64_t i = 0; i < n; i++) {
    if (c[i].op != RSI_COPY_PLAIN) {
      RSI_TRY(rsi_copy_convert(&c[i], err));
      continue;
    }
    rsi_copy_range(c[i].ndim, c[i].extent, (size_t)c[i].esize, c[i].dst,
                   c[i].dense_dst ? NULL : c[i].dst_strides, c[i].src,
                   c[i].dense_src ? NULL : c[i].src_strides, c[i].lo,
                   c[i].hi);
  }
  return RS_OK;
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
