/* SPDX-License-Identifier: Apache-2.0 */
/* What the executor keeps of a plan (rs_plan's exec, made at its first
 * execution, freed by rsi_exec_release): the driver, the execution in
 * flight, and the plan's identity among its peers. Only exec/ reads it;
 * the plan itself is data. */
#ifndef RS_CORE_EXEC_STATE_H
#define RS_CORE_EXEC_STATE_H

#include "exec/exec_guard.h"
#include "exec/exec_run.h"

/* Where an execution stands. */
enum { PHASE_IDLE, PHASE_HELLO, PHASE_STEPS, PHASE_DONE };

struct rsi_exec {
  rsi_driver *driver; /* built at the first execution */
  int phase;
  void *queue;
  rs_status last; /* how the last execution ended */
  /* A queued execution ended (everything enqueued) but its queue may not
   * have reached its end yet. */
  bool undrained;
  /* It was in flight in the parent when this process forked; the child
   * did not inherit the thread running it (settle_fork). */
  bool orphaned;
  /* Where the execution in flight records its failure: NULL, the
   * context's record (driven by the caller's calls); &thread_err while the
   * progress thread runs it, copied to the context's record by the
   * caller's thread once it saw it end (exec.c, collect). */
  rsi_err *err;
  rsi_err thread_err;
  rsi_exchange greeting;
  /* The ranks compared fingerprints before the first run (exec_guard.c). */
  bool agreed;
  /* Identity on the wire (exec_guard.h): the plan's place among the plans
   * agreed on its context, and how many executions this rank started. */
  uint64_t serial, epoch;
  /* Ranks this process exchanges messages with (one rank per process),
   * ascending; found at the first execution. */
  int *peers;
  int npeers;
  /* When the execution in flight started (rsi_now_ns), for the INFO log;
   * 0 when that log was off then. */
  int64_t started_ns;
};

/* Where the execution of plan records a failure (see rsi_exec.err). */
static inline rsi_err *rsi_exec_err(const rs_plan *plan) {
  return plan->exec && plan->exec->err ? plan->exec->err : plan->ctx->err;
}

#endif
