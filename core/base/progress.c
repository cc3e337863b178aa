/* SPDX-License-Identifier: Apache-2.0 */
/* The progress thread (progress.h): a job slot under one lock, one
 * condition for both directions (a job posted; a job returned or the
 * thread told to stop). */
#include "base/progress.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rsi_progress {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
  pid_t pid;             /* the process that started the thread */
  void (*fn)(void *arg); /* the job posted and not returned; NULL: none */
  void *arg;
  bool quit;
};

static void *progress_main(void *arg) {
  rsi_progress *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && !p->fn) pthread_cond_wait(&p->cv, &p->mu);
    if (!p->fn) break; /* told to stop, and no job left */
    void (*fn)(void *) = p->fn;
    void *job = p->arg;
    pthread_mutex_unlock(&p->mu);
    fn(job);
    pthread_mutex_lock(&p->mu);
    p->fn = NULL;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

rs_status rsi_progress_create(rsi_progress **out, rsi_err *err) {
  *out = NULL;
  rsi_progress *p = calloc(1, sizeof *p);
  if (!p) return RSI_NOMEM(err);
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return RSI_NOMEM(err);
  }
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return RSI_NOMEM(err);
  }
  p->pid = getpid();
  /* The thread starts with every signal blocked (it inherits this mask),
   * and the caller's mask is put back at once. */
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  int rc = pthread_create(&p->th, NULL, progress_main, p);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return RSI_FAIL(err, RS_ERR_NO_MEMORY,
                    "could not start the progress thread "
                    "(RS_PARAM_PROGRESS_THREAD): pthread_create: %s",
                    strerror(rc));
  }
  *out = p;
  return RS_OK;
}

void rsi_progress_post(rsi_progress *p, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

bool rsi_progress_ended(rsi_progress *p) {
  pthread_mutex_lock(&p->mu);
  bool ended = !p->fn;
  pthread_mutex_unlock(&p->mu);
  return ended;
}

void rsi_progress_wait(rsi_progress *p) {
  pthread_mutex_lock(&p->mu);
  while (p->fn) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

bool rsi_progress_forked(const rsi_progress *p) { return p->pid != getpid(); }

void rsi_progress_destroy(rsi_progress *p) {
  if (!p || rsi_progress_forked(p)) return;
  pthread_mutex_lock(&p->mu);
  while (p->fn) pthread_cond_wait(&p->cv, &p->mu);
  p->quit = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
