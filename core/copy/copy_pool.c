/* SPDX-License-Identifier: Apache-2.0 */
/* The threads of a batch of host copies (copy_pool.h). Parts are claimed
 * from a shared counter, by the workers and by the calling thread alike,
 * so a run finishes even when no worker could be started.
 *
 * fork: a process that forks while a worker is between two states (being
 * started, running a part, on its way back) can hand the child a lock
 * that worker held (the C library's, a sanitizer allocator's) and that
 * nobody in the child will release. So every pool is registered, and a
 * fork first waits until each pool's workers are parked, holding the
 * pools' locks so that no run starts meanwhile; the child, which has none
 * of the workers, starts each pool over with none. */
#ifdef __linux__
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#endif
#include "copy/copy_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

struct rsi_copy_pool {
  rsi_copy_pool *prev_pool, *next_pool; /* in `pools` */
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  pthread_cond_t parked_all; /* signalled when parked reaches started */
  pthread_t th[RSI_COPY_POOL_MAX];
  int started; /* workers running */
  int parked;  /* of them, waiting for a run */
  bool quit, cannot_start; /* a start failed: run with those there are */
  uint64_t gen; /* runs posted so far */
  /* the run in progress */
  void (*fn)(void *arg, int part);
  void *arg;
  int parts, next, pending; /* next part to claim; parts not finished */
};

/* Runs the parts of the current run that nobody claimed yet; mu held on
 * entry and on return. */
static void claim_parts(rsi_copy_pool *p) {
  while (p->next < p->parts) {
    int part = p->next++;
    void (*fn)(void *, int) = p->fn;
    void *arg = p->arg;
    pthread_mutex_unlock(&p->mu);
    fn(arg, part);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
}

static void *worker(void *arg) {
  rsi_copy_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  /* 0, not the current run: a worker started for a run joins it */
  uint64_t seen = 0;
  for (;;) {
    if (++p->parked == p->started) pthread_cond_broadcast(&p->parked_all);
    while (!p->quit && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
    p->parked--;
    if (p->quit) break;
    seen = p->gen;
    claim_parts(p);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Every pool of the process, for the fork handlers. */
static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static rsi_copy_pool *pools;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

static bool init_sync(rsi_copy_pool *p) {
  if (pthread_mutex_init(&p->mu, NULL) != 0) return false;
  if (pthread_cond_init(&p->go, NULL) == 0) {
    if (pthread_cond_init(&p->done, NULL) == 0) {
      if (pthread_cond_init(&p->parked_all, NULL) == 0) return true;
      pthread_cond_destroy(&p->done);
    }
    pthread_cond_destroy(&p->go);
  }
  pthread_mutex_destroy(&p->mu);
  return false;
}

static void destroy_sync(rsi_copy_pool *p) {
  pthread_cond_destroy(&p->parked_all);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->go);
  pthread_mutex_destroy(&p->mu);
}

/* Before fork: every pool locked with all its workers parked. A run in
 * progress finishes first; a run asked for meanwhile waits for the fork. */
static void before_fork(void) {
  pthread_mutex_lock(&pools_mu);
  for (rsi_copy_pool *p = pools; p; p = p->next_pool) {
    pthread_mutex_lock(&p->mu);
    while (p->parked != p->started) pthread_cond_wait(&p->parked_all, &p->mu);
  }
}

static void after_fork_in_parent(void) {
  for (rsi_copy_pool *p = pools; p; p = p->next_pool)
    pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&pools_mu);
}

/* The child has the forking thread alone, the locks it took, and
 * conditions that still count the parent's parked workers as waiters (a
 * signal could wait for them forever): every pool starts over with fresh
 * ones and no worker. Made without attributes, they cannot fail to be
 * made on Linux. */
static void after_fork_in_child(void) {
  pthread_mutex_init(&pools_mu, NULL);
  for (rsi_copy_pool *p = pools; p; p = p->next_pool) {
    p->started = p->parked = 0;
    p->cannot_start = false;
    (void)init_sync(p);
  }
}

static void register_handlers(void) {
  /* if this fails, forking stays as safe as forking any threaded process */
  (void)pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

rsi_copy_pool *rsi_copy_pool_create(void) {
  pthread_once(&handlers_once, register_handlers);
  rsi_copy_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (!init_sync(p)) {
    free(p);
    return NULL;
  }
  pthread_mutex_lock(&pools_mu);
  p->next_pool = pools;
  if (pools) pools->prev_pool = p;
  pools = p;
  pthread_mutex_unlock(&pools_mu);
  return p;
}

void rsi_copy_pool_destroy(rsi_copy_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&pools_mu);
  if (p->prev_pool)
    p->prev_pool->next_pool = p->next_pool;
  else
    pools = p->next_pool;
  if (p->next_pool) p->next_pool->prev_pool = p->prev_pool;
  pthread_mutex_unlock(&pools_mu);
  pthread_mutex_lock(&p->mu);
  p->quit = true;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
  destroy_sync(p);
  free(p);
}

void rsi_copy_pool_run(rsi_copy_pool *p, int parts,
                       void (*fn)(void *arg, int part), void *arg) {
  if (parts > RSI_COPY_POOL_MAX) parts = RSI_COPY_POOL_MAX;
  if (parts <= 1) {
    if (parts == 1) fn(arg, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  while (!p->cannot_start && p->started < parts - 1) {
    if (pthread_create(&p->th[p->started], NULL, worker, p) != 0)
      p->cannot_start = true; /* the parts run on the threads there are */
    else
      p->started++;
  }
  p->fn = fn;
  p->arg = arg;
  p->parts = parts;
  p->next = 1;
  p->pending = parts - 1;
  p->gen++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  fn(arg, 0);
  pthread_mutex_lock(&p->mu);
  claim_parts(p);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

int rsi_copy_pool_cpus(void) {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
