/* The threads of a batch of host copies (copy_pool.h). Parts are claimed
 * from a shared counter, by the workers and by the calling thread alike,
 * so a run finishes even when no worker could be started. */
#ifdef __linux__
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#endif
#include "copy_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

struct rsi_copy_pool {
  pid_t pid; /* of the process whose threads `th` are (fork copies none) */
  pthread_mutex_t mu;
  pthread_cond_t go, done;
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
    p->parked++;
    while (!p->quit && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
    p->parked--;
    if (p->quit) break;
    seen = p->gen;
    claim_parts(p);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* In a child forked after the workers started, none of them is there, and
 * the lock and conditions still count them as waiters (signalling such a
 * condition can wait for them forever): start over, the child having one
 * thread. */
static void after_fork(rsi_copy_pool *p) {
  if (p->pid == getpid()) return;
  p->pid = getpid();
  p->started = p->parked = 0;
  p->cannot_start = false;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
}

rsi_copy_pool *rsi_copy_pool_create(void) {
  rsi_copy_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->pid = getpid();
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->go, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->done, NULL) != 0) {
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  return p;
}

void rsi_copy_pool_destroy(rsi_copy_pool *p) {
  if (!p) return;
  after_fork(p);
  pthread_mutex_lock(&p->mu);
  p->quit = true;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->go);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

void rsi_copy_pool_run(rsi_copy_pool *p, int parts,
                       void (*fn)(void *arg, int part), void *arg) {
  if (parts > RSI_COPY_POOL_MAX) parts = RSI_COPY_POOL_MAX;
  if (parts <= 1) {
    if (parts == 1) fn(arg, 0);
    return;
  }
  after_fork(p);
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

bool rsi_copy_pool_settled(rsi_copy_pool *p) {
  pthread_mutex_lock(&p->mu);
  bool settled = p->parked == p->started;
  pthread_mutex_unlock(&p->mu);
  return settled;
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
