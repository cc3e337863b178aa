/* SPDX-License-Identifier: Apache-2.0 */
/* Holding SIGPIPE while a call talks to peers (see sigpipe.h). */
#include "base/sigpipe.h"

#include <pthread.h>
#include <time.h>

static void pipe_only(sigset_t *s) {
  sigemptyset(s);
  sigaddset(s, SIGPIPE);
}

void rsi_sigpipe_hold_begin(rsi_sigpipe_hold *h) {
  sigset_t pipe;
  pipe_only(&pipe);
  h->holding = pthread_sigmask(SIG_BLOCK, &pipe, &h->saved) == 0 &&
               !sigismember(&h->saved, SIGPIPE);
}

void rsi_sigpipe_hold_end(rsi_sigpipe_hold *h) {
  if (!h->holding) return;
  sigset_t pipe, pending;
  pipe_only(&pipe);
  /* SIGPIPE does not queue: one pending instance stands for any number of
   * failed writes. sigtimedwait with a zero timeout takes it without
   * waiting (a process-directed SIGPIPE too, when every thread blocked it,
   * which is as rare as it is harmless). */
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
    const struct timespec now = {0, 0};
    (void)sigtimedwait(&pipe, NULL, &now);
  }
  pthread_sigmask(SIG_SETMASK, &h->saved, NULL);
  h->holding = false;
}
