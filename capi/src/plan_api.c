/* SPDX-License-Identifier: Apache-2.0 */
#include "api.h"

#include <string.h>
#include "exec/exec.h"
#include "plan/plan.h"
#include "session/plan_rank.h"

rs_status rs_plan_create(const rs_layout *src, const rs_layout *dst,
                         rs_plan **out) {
  rsi_err *err = src ? src->ctx->err : rsi_thread_err();
  API_REQUIRE(out, err, "rs_plan_create");
  *out = NULL;
  API_REQUIRE(src, err, "rs_plan_create");
  API_REQUIRE(dst, err, "rs_plan_create");
  return rsi_session_plan_create(src, dst, out);
}

void rs_plan_destroy(rs_plan *plan) {
  if (!plan) return;
  rsi_exec_release(plan); /* an execution in flight ends first */
  rsi_plan_destroy(plan);
}

rs_status rs_plan_stat(const rs_plan *plan, int rank, rs_stat stat,
                       int64_t *value) {
  if (value) *value = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_stat");
  rsi_err *err = plan->ctx->err;
  API_REQUIRE(value, err, "rs_plan_stat");
  if (rank != RS_ALL_RANKS && (rank < 0 || rank >= plan->world_size))
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK, "rank %d outside [0, %d)", rank,
                    plan->world_size);
  if (stat < RS_STAT_BYTES_SENT_INTRA ||
      stat > RS_STAT_BYTES_UNPACKED)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "unknown plan figure %d",
                    (int)stat);
  if (stat == RS_STAT_ROUNDS) {
    *value = plan->nrounds;
    return RS_OK;
  }
  int lo = rank == RS_ALL_RANKS ? 0 : rank;
  int hi = rank == RS_ALL_RANKS ? plan->world_size : rank + 1;
  int64_t v = 0;
  for (int r = lo; r < hi; r++) {
    const rsi_rank_stats *s = &plan->stats[r];
    switch (stat) {
      case RS_STAT_BYTES_SENT_INTRA: v += s->sent[0]; break;
      case RS_STAT_BYTES_SENT_INTER: v += s->sent[1]; break;
      case RS_STAT_BYTES_RECV_INTRA: v += s->recv[0]; break;
      case RS_STAT_BYTES_RECV_INTER: v += s->recv[1]; break;
      case RS_STAT_BYTES_LOCAL: v += s->local; break;
      case RS_STAT_MESSAGES_SENT: v += s->msgs_sent; break;
      case RS_STAT_MESSAGES_RECV: v += s->msgs_recv; break;
      case RS_STAT_STAGING_BYTES:
        if (s->staging > v) v = s->staging;
        break;
      case RS_STAT_MOVES: v += s->moves; break;
      case RS_STAT_CONVERTED_SENDING: v += s->converted[0]; break;
      case RS_STAT_CONVERTED_RECEIVING: v += s->converted[1]; break;
      case RS_STAT_BYTES_COPIED_FROM_RELAY: v += s->relay_copied; break;
      case RS_STAT_BYTES_PACKED: v += s->packed; break;
      case RS_STAT_BYTES_UNPACKED: v += s->unpacked; break;
      case RS_STAT_ROUNDS: break;
    }
  }
  *value = v;
  return RS_OK;
}

rs_status rs_plan_num_moves(const rs_plan *plan, int64_t *out) {
  if (out) *out = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_num_moves");
  API_REQUIRE(out, plan->ctx->err, "rs_plan_num_moves");
  *out = plan->nmoves;
  return RS_OK;
}

static rs_status check_move(const rs_plan *plan, int64_t index) {
  if (index < 0 || index >= plan->nmoves)
    return RSI_FAIL(plan->ctx->err, RS_ERR_INVALID_ARGUMENT,
                    "move %lld outside [0, %lld)", (long long)index,
                    (long long)plan->nmoves);
  return RS_OK;
}

rs_status rs_plan_move_info(const rs_plan *plan, int64_t index, int *tensor,
                            int *src_rank, int *dst_rank, rs_route *route,
                            int *round, int *forwarded) {
  if (tensor) *tensor = 0;
  if (src_rank) *src_rank = 0;
  if (dst_rank) *dst_rank = 0;
  if (route) *route = RS_ROUTE_LOCAL;
  if (round) *round = 0;
  if (forwarded) *forwarded = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_move_info");
  RSI_TRY(check_move(plan, index));
  const rsi_move *m = &plan->moves[index];
  if (tensor) *tensor = m->tensor;
  if (src_rank) *src_rank = m->src_rank;
  if (dst_rank) *dst_rank = m->dst_rank;
  if (route) *route = (rs_route)m->route;
  if (round) *round = rsi_plan_public_round(plan, m->round);
  if (forwarded) *forwarded = m->forwarded;
  return RS_OK;
}

rs_status rs_plan_move_box(const rs_plan *plan, int64_t index,
                           int64_t *offset, int64_t *extent) {
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_move_box");
  API_REQUIRE(offset, plan->ctx->err, "rs_plan_move_box");
  API_REQUIRE(extent, plan->ctx->err, "rs_plan_move_box");
  bool known = index >= 0 && index < plan->nmoves;
  int nd = known ? plan->tensors[plan->moves[index].tensor].ndim : RS_MAX_DIMS;
  for (int t = 0; !known && t < plan->ntensors; t++)
    if (plan->tensors[t].ndim < nd) nd = plan->tensors[t].ndim;
  if (!known && plan->ntensors == 0) nd = 0;
  memset(offset, 0, (size_t)nd * sizeof *offset);
  memset(extent, 0, (size_t)nd * sizeof *extent);
  RSI_TRY(check_move(plan, index));
  RSI_TRY(rsi_plan_require_boxes(plan, plan->ctx->err));
  const rsi_move *m = &plan->moves[index];
  for (int d = 0; d < nd; d++) {
    offset[d] = rsi_move_offset(plan, m)[d];
    extent[d] = rsi_move_extent(plan, m)[d];
  }
  return RS_OK;
}

rs_status rs_plan_num_tensors(const rs_plan *plan, int *out) {
  if (out) *out = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_num_tensors");
  API_REQUIRE(out, plan->ctx->err, "rs_plan_num_tensors");
  *out = plan->ntensors;
  return RS_OK;
}

rs_status rs_plan_tensor_info(const rs_plan *plan, int tensor,
                              const char **name, int *ndim) {
  if (name) *name = NULL;
  if (ndim) *ndim = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_tensor_info");
  if (tensor < 0 || tensor >= plan->ntensors)
    return RSI_FAIL(plan->ctx->err, RS_ERR_INVALID_ARGUMENT,
                    "tensor %d outside [0, %d)", tensor, plan->ntensors);
  if (name) *name = plan->tensors[tensor].name;
  if (ndim) *ndim = plan->tensors[tensor].ndim;
  return RS_OK;
}

rs_status rs_plan_fingerprint(const rs_plan *plan, uint64_t *out) {
  if (out) *out = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_fingerprint");
  API_REQUIRE(out, plan->ctx->err, "rs_plan_fingerprint");
  *out = plan->fingerprint;
  return RS_OK;
}

rs_status rs_plan_to_json(const rs_plan *plan, char **json, size_t *length) {
  if (json) *json = NULL;
  if (length) *length = 0;
  API_REQUIRE(plan, rsi_thread_err(), "rs_plan_to_json");
  API_REQUIRE(json, plan->ctx->err, "rs_plan_to_json");
  return rsi_plan_to_json(plan, json, length, plan->ctx->err);
}

const char *rs_plan_last_error(const rs_plan *plan) {
  return plan ? plan->ctx->err->msg : rs_last_error();
}
