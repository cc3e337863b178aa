/* SPDX-License-Identifier: Apache-2.0 */
/* The context entry points: argument checks, then the core (context.h),
 * which assembles contexts and holds the settings. */
#include "api.h"
#include "base/context.h"
#include "session/open.h"
#include "transport/transport.h"

rs_status rs_context_create_local(int world_size, rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_local");
  *out = NULL;
  if (world_size < 1 || world_size > (1 << 24))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "world size %d, must be 1..%d", world_size, 1 << 24);
  rsi_transport *tp;
  RSI_TRY(rsi_local_transport_create(&tp));
  RSI_TRY(rsi_context_assemble(RS_TRANSPORT_LOCAL, tp, RS_ALL_RANKS,
                               world_size, NULL, 0, out));
  rsi_local_transport_use_engine(tp, (*out)->engine);
  return RS_OK;
}

void rs_context_destroy(rs_context *ctx) { rsi_context_unref(ctx); }

const char *rs_context_last_error(const rs_context *ctx) {
  return ctx ? ctx->err->msg : rs_last_error();
}

rs_status rs_context_world_size(const rs_context *ctx, int *out) {
  if (out) *out = 0;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_world_size");
  API_REQUIRE(out, ctx->err, "rs_context_world_size");
  *out = ctx->world_size;
  return RS_OK;
}

rs_status rs_context_rank(const rs_context *ctx, int *out) {
  if (out) *out = 0;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_rank");
  API_REQUIRE(out, ctx->err, "rs_context_rank");
  *out = ctx->rank;
  return RS_OK;
}

rs_status rs_context_transport(const rs_context *ctx, rs_transport_kind *out) {
  if (out) *out = (rs_transport_kind)0;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_transport");
  API_REQUIRE(out, ctx->err, "rs_context_transport");
  *out = ctx->kind;
  return RS_OK;
}

rs_status rs_context_set_domain(rs_context *ctx, int rank, int domain) {
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_set_domain");
  if (rank < 0 || rank >= ctx->world_size)
    return RSI_FAIL(ctx->err, RS_ERR_UNKNOWN_RANK, "rank %d outside [0, %d)",
                    rank, ctx->world_size);
  if (domain < 0)
    return RSI_FAIL(ctx->err, RS_ERR_INVALID_ARGUMENT,
                    "domain %d for rank %d, must be >= 0", domain, rank);
  ctx->domain_of[rank] = domain;
  return RS_OK;
}

rs_status rs_context_get_domain(const rs_context *ctx, int rank, int *domain) {
  if (domain) *domain = 0;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_get_domain");
  rsi_err *err = ctx->err;
  API_REQUIRE(domain, err, "rs_context_get_domain");
  if (rank < 0 || rank >= ctx->world_size)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK, "rank %d outside [0, %d)", rank,
                    ctx->world_size);
  *domain = ctx->domain_of[rank];
  return RS_OK;
}

rs_status rs_context_set_domain_size(rs_context *ctx, int ranks_per_domain) {
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_set_domain_size");
  if (ranks_per_domain < 1)
    return RSI_FAIL(ctx->err, RS_ERR_INVALID_ARGUMENT,
                    "%d ranks per domain, must be at least 1",
                    ranks_per_domain);
  for (int r = 0; r < ctx->world_size; r++)
    ctx->domain_of[r] = r / ranks_per_domain;
  return RS_OK;
}

rs_status rs_param_bounds(rs_param param, int64_t *lo, int64_t *hi) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(lo, err, "rs_param_bounds");
  API_REQUIRE(hi, err, "rs_param_bounds");
  *lo = *hi = 0;
  return rsi_param_bounds(param, lo, hi, err);
}

rs_status rs_context_set_param(rs_context *ctx, rs_param param,
                               int64_t value) {
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_set_param");
  return rsi_session_set_param(ctx, param, value);
}

rs_status rs_context_get_param(const rs_context *ctx, rs_param param,
                               int64_t *value) {
  if (value) *value = 0;
  API_REQUIRE(ctx, rsi_thread_err(), "rs_context_get_param");
  API_REQUIRE(value, ctx->err, "rs_context_get_param");
  return rsi_context_get_param(ctx, param, value);
}
