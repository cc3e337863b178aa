/* The context: world, domains, settings, transport, and the error record
 * that every handle made from it reports into. Reference counted: layouts
 * and plans hold a reference, so any destroy order is safe. */
#ifndef RS_CORE_CONTEXT_H
#define RS_CORE_CONTEXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct rsi_transport;

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
  struct rsi_transport *transport;
  bool failed; /* a transfer failed part-way: the context is done */
  char failure[384]; /* why, as first recorded */
  uint64_t agreements; /* plans agreed on so far (exec_guard.c) */
  /* Of the last failure: the rank that gave up first (-1: none yet), its
   * status, and the rank it was waiting for (-1: none). */
  int cause_rank, culprit;
  rs_status cause_status;
  char *scratch; /* executor staging, reused and kept until destroy */
  int64_t scratch_bytes;
  /* The detail of the last failure. Out of line, so that calls taking a
   * const context can still record why they refused. */
  rsi_err *err;
};

rs_status rsi_context_create(int world_size, int rank, rs_transport_kind kind,
                             struct rsi_transport *transport,
                             rs_context **out);
void rsi_context_ref(rs_context *ctx);
void rsi_context_unref(rs_context *ctx);

rs_status rsi_param_bounds(rs_param param, int64_t *lo, int64_t *hi);

/* RS_ERR_TRANSPORT, with the reason, once a transfer or exchange failed
 * part-way on this context (fail-stop). */
rs_status rsi_context_usable(rs_context *ctx);

/* The context is done: keep the message recorded last as the reason. */
void rsi_context_fail(rs_context *ctx);

/* At least `bytes` of staging owned by the context, in *out. */
rs_status rsi_context_scratch(rs_context *ctx, int64_t bytes, char **out);

/* True when this process drives rank r. */
static inline int rsi_context_drives(const rs_context *ctx, int r) {
  return ctx->rank == RS_ALL_RANKS || ctx->rank == r;
}

#endif
