/* SPDX-License-Identifier: Apache-2.0 */
/* Threads that share a batch of host copies (RS_PARAM_COPY_THREADS): the
 * calling thread and up to RSI_COPY_POOL_MAX - 1 workers, started when a
 * batch first asks for them and kept until the pool is destroyed. A
 * process may fork at any time: the fork waits until no worker of any pool
 * is between runs, and the child's pools start over without workers. */
#ifndef RS_CORE_COPY_POOL_H
#define RS_CORE_COPY_POOL_H

#include <stdbool.h>

#include "base/context.h"

#define RSI_COPY_POOL_MAX RSI_COPY_THREADS_MAX

typedef struct rsi_copy_pool rsi_copy_pool;

/* An empty pool (no thread started yet); NULL when memory ran out. */
rsi_copy_pool *rsi_copy_pool_create(void);

/* Stops and joins the workers. NULL does nothing. */
void rsi_copy_pool_destroy(rsi_copy_pool *pool);

/* Runs fn(arg, part) for every part in [0, parts), part 0 on the calling
 * thread and the others on workers, and returns once all have returned.
 * Where a worker cannot be started, the parts it would have run run on
 * the calling thread; so every part runs exactly once, whatever happens.
 * parts is at most RSI_COPY_POOL_MAX. One run at a time per pool. */
void rsi_copy_pool_run(rsi_copy_pool *pool, int parts,
                       void (*fn)(void *arg, int part), void *arg);

/* How many CPUs this process may run on (at least 1). */
int rsi_copy_pool_cpus(void);

#endif
