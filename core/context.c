#include "context.h"

#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

#define MIB ((int64_t)1 << 20)

rs_status rsi_context_create(int world_size, int rank, rs_transport_kind kind,
                             struct rsi_transport *transport,
                             rs_context **out) {
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
  ctx->timeout_ms = 60000;
  ctx->culprit = ctx->cause_rank = -1;
  ctx->transport = transport;
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
  if (ctx->failed && ctx->transport && ctx->transport->ops->adopt) {
    /* abandoned sends may still read the staging */
    ctx->transport->ops->adopt(ctx->transport, ctx->scratch);
    ctx->scratch = NULL;
  }
  if (ctx->transport) ctx->transport->ops->destroy(ctx->transport);
  free(ctx->scratch);
  free(ctx->domain_of);
  free(ctx->err);
  free(ctx);
}

rs_status rsi_param_bounds(rs_param param, int64_t *lo, int64_t *hi) {
  switch (param) {
    case RS_PARAM_STAGING_BYTES:
      *lo = 64 * 1024;
      *hi = (int64_t)1 << 40;
      return RS_OK;
    case RS_PARAM_SLICE_BYTES:
      *lo = 4 * 1024;
      *hi = (int64_t)1 << 30;
      return RS_OK;
    case RS_PARAM_TIMEOUT_MS:
      *lo = 1;
      *hi = 86400000;
      return RS_OK;
    case RS_PARAM_INTEGRITY:
      *lo = 0;
      *hi = 1;
      return RS_OK;
  }
  return RS_ERR_BAD_PARAM;
}

void rsi_context_fail(rs_context *ctx) {
  if (ctx->failed) return;
  ctx->failed = true;
  size_t n = strnlen(ctx->err->msg, sizeof ctx->failure - 1);
  memcpy(ctx->failure, ctx->err->msg, n); /* the start says most */
  ctx->failure[n] = '\0';
}

rs_status rsi_context_usable(rs_context *ctx) {
  if (!ctx->failed) return RS_OK;
  return RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
                  "an earlier transfer on this context failed part-way (%s); "
                  "destroy the context and create a new one",
                  ctx->failure);
}

rs_status rsi_context_scratch(rs_context *ctx, int64_t bytes, char **out) {
  if (bytes > ctx->scratch_bytes) {
    if (ctx->failed) /* something may still use the old block: keep it */
      return RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
                      "the context failed earlier; destroy it");
    char *p = realloc(ctx->scratch, (size_t)bytes);
    if (!p) return RSI_NOMEM(ctx->err);
    ctx->scratch = p;
    ctx->scratch_bytes = bytes;
  }
  *out = ctx->scratch;
  return RS_OK;
}
