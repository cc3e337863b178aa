/* SPDX-License-Identifier: Apache-2.0 */
/* Copy engines: how bytes are packed, unpacked, copied and where staging
 * lives, for one kind of memory. The executor computes addresses (base
 * plus offset) but never reads or writes user or staging memory itself:
 * every byte it moves goes through its context's engine, in batches (one
 * call per step: a GPU engine launches one kernel for the lot).
 *
 * The host engine (engine_host.c, core/copy/copy.c's strided copies) serves the
 * in-process and MPI transports; a CUDA engine comes with the NCCL
 * transport's module (rsi_transport.engine). */
#ifndef RS_CORE_ENGINE_H
#define RS_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Kinds of memory; the values are rs_memory's. */
enum { RSI_MEMORY_HOST = 0, RSI_MEMORY_CUDA = 1 };

/* Elements [lo, hi) (row-major order of a box of `extent`) from src to
 * dst. Each side is strided (element strides; the pointer is element 0 of
 * the box) or, with `dense_*`, a dense stream whose pointer holds element
 * lo (elements of that side's dtype). Strides are held here, so a batch
 * owns everything it describes. */
/* What a copy does to the elements on the way (rsi_copy.op). */
enum {
  RSI_COPY_PLAIN = 0,    /* the bytes as they are, esize each */
  RSI_COPY_CAST = 1,     /* each element from src_dtype to dst_dtype (f32,
                            bf16, f16: convert.h) */
  RSI_COPY_QUANTIZE = 2, /* src_dtype to f8_e4m3, each element with the
                            scale of its block (blocks) */
  RSI_COPY_SCALES = 3    /* the f32 scale of each block, from its values
                            (blocks) */
};

/* The blocks of a block-scaled tensor as one copy sees them. The values'
 * tensor's last two dims (`rows` x `cols`; a 1-D tensor has rows 1 and
 * its only dim is the column dim) are cut into blocks of b0 x b1; leading
 * dims are independent. The rule is convert.h's.
 * QUANTIZE: the box is a box of the values; (row0, col0) are the global
 * row and column (in the last two dims) of its first element. The source
 * end is strided and holds every whole block the box meets: blocks are
 * read from the box's first element with src_strides, reaching before and
 * after the box.
 * SCALES: the box is a box of the scale tensor (one element a block);
 * (row0, col0) are the global block row and column of its first element.
 * The source end is the values (src_dtype), strided: src points at the
 * first element of the block of the box's first element, src_strides are
 * the values' strides (ndim of them, like the box's). */
typedef struct rsi_copy_blocks {
  int64_t rows, cols, b0, b1, row0, col0;
  bool ue8m0;
} rsi_copy_blocks;

typedef struct rsi_copy {
  int ndim;
  int esize;     /* PLAIN: bytes an element */
  int op;        /* RSI_COPY_* */
  int src_dtype, dst_dtype; /* rs_dtype at each side (any op) */
  rsi_copy_blocks blocks;   /* QUANTIZE, SCALES */
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

/* The host engine that copies on the calling thread; stateless, one for
 * wherever no context is at hand. */
rsi_engine *rsi_host_engine(void);

/* A context's host engine: a batch of at least 1 MiB of traffic is cut
 * over *threads threads (0: one per CPU the process may run on), read at
 * every batch; threads is the context's setting and outlives the engine.
 * Destroyed by its ops->destroy. NULL when memory ran out. */
rsi_engine *rsi_host_engine_create(const int64_t *threads);

/* The least traffic (bytes read plus written) of a batch that a context's
 * host engine cuts over threads; tests lower it to cut small batches. */
extern int64_t rsi_host_split_bytes;

#endif
