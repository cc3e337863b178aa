/* SPDX-License-Identifier: Apache-2.0 */
/* A context's progress thread (RS_PARAM_PROGRESS_THREAD): one thread that
 * runs one job at a time for whoever posted it, so that an execution on a
 * host context goes on while its caller does other work. It knows nothing
 * of plans: exec/ posts the job (driving an execution to its end) and
 * looks whether it returned. Started by its first user, stopped and
 * joined when the context is destroyed. Every signal is blocked on the
 * thread: the application's handlers never run there, and a write to a
 * dead peer fails with EPIPE instead of raising SIGPIPE. */
#ifndef RS_CORE_PROGRESS_H
#define RS_CORE_PROGRESS_H

#include <stdbool.h>

#include "base/error.h"

typedef struct rsi_progress rsi_progress;

/* Start the thread, idle. RS_ERR_NO_MEMORY, recorded in err, when memory
 * or the thread could not be had (the message says which). */
rs_status rsi_progress_create(rsi_progress **out, rsi_err *err);

/* Run fn(arg) on the thread. At most one job at a time: the poster waits
 * for the last one (rsi_progress_wait) before posting the next. */
void rsi_progress_post(rsi_progress *p, void (*fn)(void *arg), void *arg);

/* Whether the job posted last has returned (true when none was posted).
 * Once it says true, what the job wrote is visible to the caller. */
bool rsi_progress_ended(rsi_progress *p);

/* Block until the job posted last has returned. */
void rsi_progress_wait(rsi_progress *p);

/* Whether the thread belongs to another process: this is a child of
 * fork(), which has no such thread (its memory is left alone). */
bool rsi_progress_forked(const rsi_progress *p);

/* Wait for the job in flight, stop and join the thread, free it. NULL
 * does nothing; in a child of fork() only the parent's record is left
 * behind (the child never had the thread, and its lock may be held). */
void rsi_progress_destroy(rsi_progress *p);

#endif
