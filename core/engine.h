/* Copy engines: how bytes are packed, unpacked, copied and where staging
 * lives, for one kind of memory. The executor computes addresses (base
 * plus offset) but never reads or writes user or staging memory itself:
 * every byte it moves goes through its context's engine, in batches (one
 * call per step: a GPU engine launches one kernel for the lot).
 *
 * The host engine (engine_host.c, core/copy.c's strided copies) serves the
 * in-process and MPI transports; a CUDA engine comes with the NCCL
 * transport's module (rsi_transport.engine). */
#ifndef RS_CORE_ENGINE_H
#define RS_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Kinds of memory; the values are rs_memory's. */
enum { RSI_MEMORY_HOST = 0, RSI_MEMORY_CUDA = 1 };

/* Elements [lo, hi) (row-major order of a box of `extent`) from src to
 * dst. Each side is strided (element strides; the pointer is element 0 of
 * the box) or, with `dense_*`, a dense stream whose pointer holds element
 * lo. Strides are held here, so a batch owns everything it describes. */
typedef struct rsi_copy {
  int ndim;
  int esize;
  bool dense_dst, dense_src;
  char *dst;
  const char *src;
  int64_t lo, hi;
  int64_t extent[RS_MAX_DIMS];
  int64_t dst_strides[RS_MAX_DIMS], src_strides[RS_MAX_DIMS];
} rsi_copy;

typedef struct rsi_engine rsi_engine;

typedef struct rsi_engine_ops {
  const char *name;
  int memory; /* RSI_MEMORY_* it serves */
  /* Staging of `bytes` for driven rank `me` (on its device), in this
   * engine's memory; *out NULL on failure. */
  rs_status (*alloc)(rsi_engine *e, int me, size_t bytes, void **out,
                     rsi_err *err);
  void (*release)(rsi_engine *e, void *p);
  /* Perform copies[0..n) (ordered on `queue` where the engine has queues;
   * the host engine copies at once). */
  rs_status (*copy)(rsi_engine *e, const rsi_copy *copies, int64_t n,
                    void *queue, rsi_err *err);
  /* *done: everything enqueued on `queue` so far has completed. Never
   * blocks; the executor decides how long to wait. */
  rs_status (*query)(rsi_engine *e, void *queue, bool *done, rsi_err *err);
  void (*destroy)(rsi_engine *e);
} rsi_engine_ops;

struct rsi_engine {
  const rsi_engine_ops *ops;
};

/* The host engine; one is enough for any number of contexts. */
rsi_engine *rsi_host_engine(void);

#endif
