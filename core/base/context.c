/* SPDX-License-Identifier: Apache-2.0 */
/* The context (context.h): its settings with their defaults and bounds,
 * its reference count, and the fail-stop record kept on it. What it runs
 * on (transport, engine) is set and torn down by session/open.c. */
#include "base/context.h"

#include "base/log_sink.h"
#include "base/progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB ((int64_t)1 << 20)

/* RESHARD_TIMEOUT_MS: the first RS_PARAM_TIMEOUT_MS of every context (a
 * transport module's creation waits as long for its peers); 60 s when
 * unset or out of the parameter's bounds. */
static int64_t timeout_from_env(void) {
  const char *v = getenv("RESHARD_TIMEOUT_MS");
  int64_t lo = 0, hi = 0;
  if (!v || !v[0] || rsi_param_bounds(RS_PARAM_TIMEOUT_MS, &lo, &hi, NULL))
    return 60000;
  char *end;
  long long ms = strtoll(v, &end, 10);
  return !*end && ms >= lo && ms <= hi ? (int64_t)ms : 60000;
}

rs_status rsi_context_new(int world_size, int rank, rs_transport_kind kind,
                          rs_context **out) {
  rsi_log_start();
  rs_context *ctx = calloc(1, sizeof *ctx);
  int *domains = calloc((size_t)world_size, sizeof *domains);
  rsi_err *err = calloc(1, sizeof *err);
  if (!ctx || !domains || !err) {
    free(ctx);
    free(domains);
    free(err);
    return RSI_NOMEM(NULL);
  }
  ctx->err = err;
  atomic_init(&ctx->refs, 1);
  ctx->world_size = world_size;
  ctx->rank = rank;
  ctx->kind = kind;
  ctx->domain_of = domains;
  for (int r = 0; r < world_size; r++) domains[r] = r;
  ctx->staging_bytes = 256 * MIB;
  ctx->slice_bytes = 4 * MIB;
  ctx->timeout_ms = timeout_from_env();
  ctx->plan_part = -1;
  ctx->plan_boxes = 1;
  ctx->copy_threads = 1;
  ctx->culprit = ctx->cause_rank = -1;
  ctx->pid = getpid();
  atomic_init(&ctx->aborted, false);
  *out = ctx;
  return RS_OK;
}

void rsi_context_ref(rs_context *ctx) {
  atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
}

void rsi_context_unref(rs_context *ctx) {
  if (!ctx) return;
  if (atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) != 1)
    return;
  /* Idle by now: every plan, which waits for its execution when it is
   * destroyed, held a reference. */
  rsi_progress_destroy(ctx->progress);
  if (ctx->close) ctx->close(ctx);
  free(ctx->domain_of);
  free(ctx->err);
  free(ctx);
}

static int64_t *param_slot(rs_context *ctx, rs_param param) {
  switch (param) {
    case RS_PARAM_STAGING_BYTES: return &ctx->staging_bytes;
    case RS_PARAM_SLICE_BYTES: return &ctx->slice_bytes;
    case RS_PARAM_TIMEOUT_MS: return &ctx->timeout_ms;
    case RS_PARAM_INTEGRITY: return &ctx->integrity;
    case RS_PARAM_PLAN_PART: return &ctx->plan_part;
    case RS_PARAM_PLAN_BOXES: return &ctx->plan_boxes;
    case RS_PARAM_ROUNDS: return &ctx->rounds;
    case RS_PARAM_COPY_THREADS: return &ctx->copy_threads;
    case RS_PARAM_PROGRESS_THREAD: return &ctx->progress_thread;
  }
  return NULL;
}

static rs_status unknown_param(rsi_err *err, rs_param param) {
  return RSI_FAIL(err, RS_ERR_BAD_PARAM, "unknown parameter %d", (int)param);
}

rs_status rsi_param_bounds(rs_param param, int64_t *lo, int64_t *hi,
                           rsi_err *err) {
  switch (param) {
    case RS_PARAM_STAGING_BYTES:
      *lo = 64 * 1024;
      *hi = (int64_t)1 << 40;
      return RS_OK;
    case RS_PARAM_SLICE_BYTES:
      *lo = 4 * 1024;
      *hi = (int64_t)1 << 30;
      return RS_OK;
    case RS_PARAM_COPY_THREADS:
      *lo = 0;
      *hi = RSI_COPY_THREADS_MAX;
      return RS_OK;
    case RS_PARAM_TIMEOUT_MS:
      *lo = 1;
      *hi = 86400000;
      return RS_OK;
    case RS_PARAM_INTEGRITY:
    case RS_PARAM_PROGRESS_THREAD:
      *lo = 0;
      *hi = 1;
      return RS_OK;
    case RS_PARAM_PLAN_PART:
      *lo = -1;
      *hi = INT32_MAX;
      return RS_OK;
    case RS_PARAM_PLAN_BOXES:
    case RS_PARAM_ROUNDS:
      *lo = 0;
      *hi = 1;
      return RS_OK;
  }
  return unknown_param(err, param);
}

rs_status rsi_context_set_param(rs_context *ctx, rs_param param,
                                int64_t value) {
  int64_t lo, hi;
  int64_t *slot = param_slot(ctx, param);
  if (!slot) return unknown_param(ctx->err, param);
  RSI_TRY(rsi_param_bounds(param, &lo, &hi, ctx->err));
  if (value < lo || value > hi)
    return RSI_FAIL(ctx->err, RS_ERR_BAD_PARAM,
                    "parameter %d: value %lld outside [%lld, %lld]",
                    (int)param, (long long)value, (long long)lo,
                    (long long)hi);
  *slot = value;
  return RS_OK;
}

rs_status rsi_context_get_param(const rs_context *ctx, rs_param param,
                                int64_t *value) {
  *value = 0;
  const int64_t *slot = param_slot((rs_context *)ctx, param);
  if (!slot) return unknown_param(ctx->err, param);
  *value = *slot;
  return RS_OK;
}

void rsi_context_fail(rs_context *ctx) { rsi_context_fail_why(ctx, ctx->err); }

void rsi_context_fail_why(rs_context *ctx, const rsi_err *why) {
  if (ctx->failed) return;
  ctx->failed = true;
  size_t n = strnlen(why->msg, sizeof ctx->failure - 1);
  memcpy(ctx->failure, why->msg, n); /* the start says most */
  ctx->failure[n] = '\0';
}

bool rsi_context_inherited(const rs_context *ctx) {
  return ctx->rank != RS_ALL_RANKS && ctx->pid != getpid();
}

rs_status rsi_context_usable(rs_context *ctx) {
  if (rsi_context_inherited(ctx))
    return RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
                    "this context between processes was made by process "
                    "%ld, which forked this one: its peers talk to that "
                    "process, so it cannot be used here; destroy it and "
                    "make a new one in this process",
                    (long)ctx->pid);
  if (!ctx->failed &&
      atomic_load_explicit(&ctx->aborted, memory_order_acquire)) {
    RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
             "the context was aborted (rs_context_abort)");
    rsi_context_fail(ctx);
  }
  if (!ctx->failed) return RS_OK;
  return RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
                  "an earlier transfer on this context failed part-way (%s); "
                  "destroy the context and create a new one",
                  ctx->failure);
}
