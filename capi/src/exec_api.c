/* SPDX-License-Identifier: Apache-2.0 */
/* The execution entry points of the ABI: binding memory of a kind,
 * starting, testing, waiting for and aborting an execution. Argument
 * checks here; core/exec/exec.c does the work. */
#include "api.h"
#include "copy/engine.h"
#include "exec/exec.h"
#include "plan/plan.h"

rs_status rs_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                       void *ptr, size_t bytes) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_bind");
  API_REQUIRE(ptr, plan->ctx->err, "rs_plan_bind");
  return rsi_plan_bind(plan, side, rank, buffer, ptr, bytes, RSI_MEMORY_HOST,
                       -1);
}

rs_status rs_plan_bind_memory(rs_plan *plan, rs_side side, int rank,
                              int buffer, void *ptr, size_t bytes,
                              rs_memory memory, int device) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_bind_memory");
  API_REQUIRE(ptr, plan->ctx->err, "rs_plan_bind_memory");
  return rsi_plan_bind(plan, side, rank, buffer, ptr, bytes, (int)memory,
                       memory == RS_MEMORY_CUDA ? device : -1);
}

rs_status rs_plan_execute(rs_plan *plan) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_execute");
  return rsi_plan_execute(plan);
}

rs_status rs_plan_execute_async(rs_plan *plan, void *queue) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_execute_async");
  return rsi_plan_execute_async(plan, queue);
}

rs_status rs_plan_test(rs_plan *plan, int *done) {
  if (done) *done = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_test");
  API_REQUIRE(done, plan->ctx->err, "rs_plan_test");
  return rsi_plan_test(plan, done);
}

rs_status rs_plan_wait(rs_plan *plan) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_wait");
  return rsi_plan_wait(plan);
}

rs_status rs_context_abort(rs_context *ctx) {
  if (ctx) rsi_context_abort(ctx);
  return RS_OK;
}
