/* SPDX-License-Identifier: Apache-2.0 */
/* The context: world, domains, settings, transport, and the error record
 * that every handle made from it reports into. Reference counted: layouts
 * and plans hold a reference, so any destroy order is safe. What it runs
 * on (transport, engine) is opened by session/open.h, which leaves here
 * how to close it. */
#ifndef RS_CORE_CONTEXT_H
#define RS_CORE_CONTEXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct rsi_transport;

/* RS_PARAM_COPY_THREADS at most: the copy pool's threads. */
#define RSI_COPY_THREADS_MAX 256

struct rs_context {
  atomic_int refs;
  int world_size;
  int rank; /* RS_ALL_RANKS when this process drives every rank */
  rs_transport_kind kind;
  int *domain_of; /* world_size entries */
  int64_t staging_bytes;
  int64_t slice_bytes;
  int64_t timeout_ms;
  int64_t integrity;
  int64_t plan_part; /* RS_PARAM_PLAN_PART */
  int64_t plan_boxes; /* RS_PARAM_PLAN_BOXES */
  int64_t rounds; /* RS_PARAM_ROUNDS: an rs_rounds */
  int64_t copy_threads; /* RS_PARAM_COPY_THREADS, read by own_engine */
  int64_t progress_thread; /* RS_PARAM_PROGRESS_THREAD */
  struct rsi_transport *transport;
  bool failed; /* a transfer failed part-way: the context is done */
  atomic_bool aborted; /* rs_context_abort was called (any thread) */
  /* How bytes are copied and where staging lives (core/copy/engine.h), for the
   * memory kind every bound buffer must be in. */
  struct rsi_engine *engine;
  /* The context's own host engine (the engine above where the transport
   * brings none), destroyed with the context; NULL otherwise. */
  struct rsi_engine *own_engine;
  /* The plan whose execution is in flight, or NULL: one at a time. */
  struct rs_plan *running;
  /* The progress thread (base/progress.h), started by the first
   * execution handed to it; NULL until then. Joined at the last unref. */
  struct rsi_progress *progress;
  /* The plan whose execution the progress thread runs, until the caller
   * saw it end (rs_plan_test saying done, rs_plan_wait); NULL otherwise.
   * Read and written by the caller's thread only: while it is set, the
   * caller reads nothing the thread writes (exec/exec.c). */
  struct rs_plan *handed;
  char failure[384]; /* why, as first recorded */
  uint64_t agreements; /* plans agreed on so far (exec_guard.c) */
  /* Of the last failure: the rank that gave up first (-1: none yet), its
   * status, and the rank it was waiting for (-1: none). */
  int cause_rank, culprit;
  rs_status cause_status;
  /* Sealed collectives run on this context so far (collective.c), and the
   * fault that RESHARD_FAULT_FLIP_COLLECTIVE asks of them (0: none). */
  uint64_t collectives;
  int64_t fault_flip_nth, fault_flip_bit;
  /* The process the context serves: the one that made it, or for an
   * in-process context the child of fork() that last used it. */
  pid_t pid;
  /* Closes what the context runs on (session/open.c), at the last unref;
   * NULL: nothing to close. */
  void (*close)(rs_context *ctx);
  /* The detail of the last failure. Out of line, so that calls taking a
   * const context can still record why they refused. */
  rsi_err *err;
};

/* A context of world_size ranks with default settings, every rank in a
 * domain of its own, running on nothing yet (session/open.h). Fails only
 * for memory (RS_ERR_NO_MEMORY, recorded in this thread's record). */
rs_status rsi_context_new(int world_size, int rank, rs_transport_kind kind,
                          rs_context **out);
void rsi_context_ref(rs_context *ctx);
/* Drop a reference; the last closes the context and frees it. */
void rsi_context_unref(rs_context *ctx);

/* Settings (rs_param). Bounds of a parameter: RS_ERR_BAD_PARAM, recorded
 * in err, for one that does not exist. */
rs_status rsi_param_bounds(rs_param param, int64_t *lo, int64_t *hi,
                           rsi_err *err);
/* Set a parameter within its bounds; else RS_ERR_BAD_PARAM, unchanged.
 * What the transport must support is checked by rsi_session_set_param. */
rs_status rsi_context_set_param(rs_context *ctx, rs_param param,
                                int64_t value);
/* Read a parameter (*value is 0 on failure). */
rs_status rsi_context_get_param(const rs_context *ctx, rs_param param,
                                int64_t *value);

/* RS_ERR_TRANSPORT, with the reason, once a transfer or exchange failed
 * part-way on this context (fail-stop), or when a context between
 * processes is used in a child of fork() of the process that made it (its
 * peers talk to that process). */
rs_status rsi_context_usable(rs_context *ctx);

/* A context between processes inherited through fork(): it belongs to
 * the parent, so the child neither uses nor tears down its engine. */
bool rsi_context_inherited(const rs_context *ctx);

/* The context is done: keep the message recorded last as the reason. */
void rsi_context_fail(rs_context *ctx);
/* The same, with the reason recorded in `why` (an execution on the
 * progress thread records into a record of its own). */
void rsi_context_fail_why(rs_context *ctx, const rsi_err *why);


/* True when this process drives rank r. */
static inline int rsi_context_drives(const rs_context *ctx, int r) {
  return ctx->rank == RS_ALL_RANKS || ctx->rank == r;
}

#endif
