/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a context on what it runs on: a transport (in-process, or a
 * module's between processes) and the copy engine that comes with it, or
 * the context's own host engine; and closing them at the context's end. */
#ifndef RS_CORE_SESSION_OPEN_H
#define RS_CORE_SESSION_OPEN_H

#include "base/context.h"

/* A context with default settings, every rank in a domain of its own, on
 * `transport` (which the context destroys with itself; NULL: none). Fails
 * only for memory (recorded in this thread's record). */
rs_status rsi_context_create(int world_size, int rank, rs_transport_kind kind,
                             struct rsi_transport *transport,
                             rs_context **out);

/* A context of `world` ranks, this process being `rank` (RS_ALL_RANKS: all
 * of them), on the created transport `tp`, which it takes over: on failure
 * tp is destroyed. Rank r's domain is r / domain_block when domain_block
 * > 0, else host_of[r] when host_of (world entries) is given, else r.
 * Fails only for memory (recorded in this thread's record, as
 * rsi_context_create does). */
rs_status rsi_context_assemble(rs_transport_kind kind,
                               struct rsi_transport *tp, int rank, int world,
                               const int *host_of, int domain_block,
                               rs_context **out);

/* A context on transport module `module` (rsi_module_load), created on
 * *args: the module's world and rank, every rank's domain its host, or
 * consecutive blocks of n ranks when the environment variable
 * RESHARD_DOMAIN_SIZE=n is set (checked first, before anything loads). */
struct rsi_module_args;
rs_status rsi_context_create_module(const char *module,
                                    rs_transport_kind kind,
                                    const struct rsi_module_args *args,
                                    rs_context **out, rsi_err *err);

/* rs_context_set_param: rsi_context_set_param, and RS_ERR_UNSUPPORTED
 * for RS_PARAM_INTEGRITY on a transport that cannot checksum what it
 * moves between processes or on device queues. */
rs_status rsi_session_set_param(rs_context *ctx, rs_param param,
                                int64_t value);

#endif
