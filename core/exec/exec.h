/* SPDX-License-Identifier: Apache-2.0 */
/* Executing a plan (exec.c): binding memory, the checks made before any
 * byte moves, and the life of one execution: started without waiting,
 * advanced by test or wait, aborted from any thread. One execution is in
 * flight per context at a time. */
#ifndef RS_CORE_EXEC_H
#define RS_CORE_EXEC_H

#include "plan/plan.h"

/* memory: RSI_MEMORY_* (core/copy/engine.h); device: its CUDA device. */
rs_status rsi_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                        void *ptr, size_t bytes, int memory, int device);

/* Check everything, then start: between processes the agreement (first
 * execution only) and the hello are begun; nothing waits for peers. */
rs_status rsi_plan_execute_async(rs_plan *plan, void *queue);
/* Advance without waiting; *done = 1 once the execution ended, with its
 * status (and the status of the last one when none is in flight). */
rs_status rsi_plan_test(rs_plan *plan, int *done);
/* Advance until the execution ended; its status. */
rs_status rsi_plan_wait(rs_plan *plan);
/* Start and wait. */
rs_status rsi_plan_execute(rs_plan *plan);
/* Any thread: make the execution in flight (or the next) fail at once. */
void rsi_context_abort(rs_context *ctx);

/* Staging bytes executions of the plan allocated for `rank` (-1: none
 * yet, or the rank takes no part); for tests of the staging promise. */
int64_t rsi_exec_staging(const rs_plan *plan, int rank);

/* Whether an execution of the plan has not ended: started and not yet
 * seen done, or done on the host with its queue (a CUDA stream) not yet
 * known to have reached its end. */
bool rsi_exec_in_flight(const rs_plan *plan);

/* Free what executions of the plan kept, before the plan is destroyed
 * (rs_plan_destroy). An execution in flight is first waited for, within
 * the timeout; if it fails, the context is done. Records that a failed
 * execution left posted keep their memory (the transport adopts it). */
void rsi_exec_release(rs_plan *plan);

#endif
