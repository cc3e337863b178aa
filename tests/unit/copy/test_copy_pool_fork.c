/* SPDX-License-Identifier: Apache-2.0 */
/* A process may fork while its copy pools work (Python's multiprocessing
 * forks a trainer that may be syncing weights on another thread): the
 * fork waits until no worker is half-way (one caught starting or in the
 * allocator could hand the child a lock nobody there releases), each
 * child runs with workers of its own, and the parent's workers keep
 * serving it.
 *
 * Plain C, not Criterion: Criterion's own threads use the allocator while
 * a test forks, and under clang 14's ASan (whose allocator has no fork
 * handlers) that alone can hang a child. Here the only threads are the
 * pool's and one that asks for runs without allocating. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy/copy_pool.h"

#define FORKS 200

static atomic_int ran[RSI_COPY_POOL_MAX];

static void mark(void *arg, int part) {
  (void)arg;
  atomic_fetch_add(&ran[part], 1);
}

/* Allocates when a worker runs it, not on the thread that asks for runs:
 * a program's own threads in the allocator at a fork are its business. */
static _Thread_local bool asks_for_runs;

static void mark_and_allocate(void *arg, int part) {
  (void)arg;
  if (!asks_for_runs) free(malloc((size_t)(part + 1) * 4096));
  atomic_fetch_add(&ran[part], 1);
}

static atomic_bool stop;
static atomic_long runs;

static void *keep_running(void *pool) {
  asks_for_runs = true;
  while (!atomic_load(&stop)) {
    rsi_copy_pool_run(pool, 4, mark_and_allocate, NULL);
    atomic_fetch_add(&runs, 1);
  }
  return NULL;
}

static void clear_marks(void) {
  for (int i = 0; i < RSI_COPY_POOL_MAX; i++) atomic_store(&ran[i], 0);
}

/* Every part of a run of `parts` ran once, and no other. */
static bool each_once(int parts) {
  for (int i = 0; i < RSI_COPY_POOL_MAX; i++)
    if (atomic_load(&ran[i]) != (i < parts ? 1 : 0)) return false;
  return true;
}

int main(void) {
  rsi_copy_pool *pool = rsi_copy_pool_create();
  if (!pool) {
    fprintf(stderr, "no pool: out of memory\n");
    return 1;
  }
  pthread_t busy;
  if (pthread_create(&busy, NULL, keep_running, pool) != 0) {
    fprintf(stderr, "cannot start the thread that asks for runs\n");
    return 1;
  }
  int failed = 0;
  for (int k = 0; k < FORKS; k++) {
    /* at least one run between forks, so that forks land mid-run */
    for (long seen = atomic_load(&runs); atomic_load(&runs) == seen;)
      sched_yield();
    pid_t child = fork();
    if (child < 0) {
      perror("fork");
      return 1;
    }
    if (child == 0) {
      alarm(10); /* a hang fails the child, named below */
      clear_marks();
      rsi_copy_pool_run(pool, 3, mark, NULL);
      bool ok = each_once(3);
      rsi_copy_pool_destroy(pool);
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
      perror("waitpid");
      return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "fork %d: the child %s\n", k,
              WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                  ? "hung (killed after 10 s)"
                  : "ran a part twice or not at all, or died");
      failed++;
    }
  }
  atomic_store(&stop, true);
  pthread_join(busy, NULL);
  clear_marks();
  rsi_copy_pool_run(pool, 4, mark, NULL);
  if (!each_once(4)) {
    fprintf(stderr, "after the forks, the parent's run missed a part\n");
    failed++;
  }
  rsi_copy_pool_destroy(pool);
  printf("%d forks during runs (%ld runs), %d failed\n", FORKS,
         atomic_load(&runs), failed);
  return failed ? 1 : 0;
}
