/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a context (open.h): on a transport and its engine, or the
 * context's own host engine; assembled with domains from the module's
 * hosts or RESHARD_DOMAIN_SIZE. */
#include "session/open.h"

#include <stdlib.h>

#include "base/log.h"
#include "base/sigpipe.h"
#include "copy/copy_pool.h"
#include "copy/engine.h"
#include "session/collective.h"
#include "transport/transport.h"

/* The last reference is gone: close the transport (unless a parent
 * process owns it) and the context's own engine. */
static void close_context(rs_context *ctx) {
  if (ctx->transport && rsi_context_inherited(ctx)) {
    /* the parent's engine (an MPI communicator, NCCL's): not ours to
     * close; only this process's copy of the memory goes */
  } else if (ctx->transport) { /* which may still talk to peers */
    rsi_sigpipe_hold h;
    rsi_sigpipe_hold_begin(&h);
    ctx->transport->ops->destroy(ctx->transport);
    rsi_sigpipe_hold_end(&h);
  }
  if (ctx->own_engine) ctx->own_engine->ops->destroy(ctx->own_engine);
}

rs_status rsi_context_create(int world_size, int rank, rs_transport_kind kind,
                             struct rsi_transport *transport,
                             rs_context **out) {
  rs_context *ctx;
  RSI_TRY(rsi_context_new(world_size, rank, kind, &ctx));
  rsi_coll_fault_from_env(&ctx->fault_flip_nth, &ctx->fault_flip_bit);
  if (transport && transport->engine) {
    ctx->engine = transport->engine;
  } else {
    ctx->engine = ctx->own_engine = rsi_host_engine_create(&ctx->copy_threads);
    if (!ctx->engine) {
      rsi_context_unref(ctx);
      return RSI_NOMEM(NULL);
    }
  }
  ctx->transport = transport;
  ctx->close = close_context;
  *out = ctx;
  static const char *const kinds[] = {"?", "local", "MPI", "NCCL"};
  RSI_LOG(RS_LOG_INFO, RS_LOG_CONTEXT, rank,
          "context %p: %s transport, rank %d of %d, %d copy threads",
          (void *)ctx,
          (unsigned)kind < sizeof kinds / sizeof *kinds ? kinds[kind] : "?",
          rank, world_size, (int)ctx->copy_threads);
  return RS_OK;
}

/* RESHARD_DOMAIN_SIZE=n: consecutive blocks of n ranks; 0 when unset. */
static rs_status domain_block_from_env(int *block, rsi_err *err) {
  *block = 0;
  const char *v = getenv("RESHARD_DOMAIN_SIZE");
  if (!v || !v[0]) return RS_OK;
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || n < 1 || n > (1 << 24))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "RESHARD_DOMAIN_SIZE='%s' is not a whole number of ranks "
                    "from 1 to %d",
                    v, 1 << 24);
  *block = (int)n;
  return RS_OK;
}

rs_status rsi_context_assemble(rs_transport_kind kind,
                               struct rsi_transport *tp, int rank, int world,
                               const int *host_of, int domain_block,
                               rs_context **out) {
  *out = NULL;
  rs_context *ctx;
  rs_status st = rsi_context_create(world, rank, kind, tp, &ctx);
  if (st != RS_OK) {
    tp->ops->destroy(tp);
    return st;
  }
  tp->aborted = &ctx->aborted;
  for (int r = 0; r < world; r++)
    ctx->domain_of[r] = domain_block ? r / domain_block
                        : host_of    ? host_of[r]
                                     : r;
  *out = ctx;
  return RS_OK;
}

rs_status rsi_context_create_module(const char *module,
                                    rs_transport_kind kind,
                                    const rsi_module_args *args,
                                    rs_context **out, rsi_err *err) {
  *out = NULL;
  int block;
  RSI_TRY(domain_block_from_env(&block, err));
  const rsi_module *m;
  RSI_TRY(rsi_module_load(module, &m, err));
  rsi_transport *tp;
  int rank, world, *hosts;
  rsi_sigpipe_hold h; /* creating a context talks to the peers */
  rsi_sigpipe_hold_begin(&h);
  rs_status st = m->create(args, &tp, &rank, &world, &hosts, err);
  if (st == RS_OK) {
    st = rsi_context_assemble(kind, tp, rank, world, hosts, block, out);
    free(hosts);
  }
  rsi_sigpipe_hold_end(&h);
  return st;
}


/* RS_PARAM_PROGRESS_THREAD = 1 where the transport cannot have one. */
static rs_status check_progress_thread(rs_context *ctx) {
  rsi_transport *tp = ctx->transport;
  if (tp && tp->ops->join)
    return RSI_FAIL(ctx->err, RS_ERR_UNSUPPORTED,
                    "RS_PARAM_PROGRESS_THREAD: the %s transport's work is "
                    "already asynchronous on its stream; no progress thread "
                    "is needed",
                    tp->ops->name);
  if (tp && tp->no_progress_thread)
    return RSI_FAIL(ctx->err, RS_ERR_UNSUPPORTED,
                    "RS_PARAM_PROGRESS_THREAD: %s", tp->no_progress_thread);
  return RS_OK;
}

rs_status rsi_session_set_param(rs_context *ctx, rs_param param,
                                int64_t value) {
  rsi_transport *tp = ctx->transport;
  if (ctx->handed)
    return RSI_FAIL(ctx->err, RS_ERR_INVALID_ARGUMENT,
                    "parameter %d: an execution runs on this context's "
                    "progress thread, which reads the settings; wait for it "
                    "(rs_plan_wait) first; nothing was changed",
                    (int)param);
  if (param == RS_PARAM_PROGRESS_THREAD && value == 1)
    RSI_TRY(check_progress_thread(ctx));
  if (param == RS_PARAM_INTEGRITY && value && tp && !tp->ops->set_integrity &&
      (ctx->rank != RS_ALL_RANKS || tp->ops->join)) {
    int64_t lo, hi; /* out of bounds says so first */
    RSI_TRY(rsi_param_bounds(param, &lo, &hi, ctx->err));
    if (value >= lo && value <= hi)
      return RSI_FAIL(ctx->err, RS_ERR_UNSUPPORTED,
                      "RS_PARAM_INTEGRITY: the %s transport cannot checksum "
                      "what it moves",
                      tp->ops->name);
  }
  return rsi_context_set_param(ctx, param, value);
}
