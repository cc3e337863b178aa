/* SPDX-License-Identifier: Apache-2.0 */
/* rs_plan_create between processes: the decision to plan per rank, and
 * per-rank planning's exchange (session/plan_rank.c). */
#ifndef RS_CORE_SESSION_PLAN_RANK_H
#define RS_CORE_SESSION_PLAN_RANK_H

#include "plan/plan.h"

/* Whether rs_plan_create plans only this rank's part, with its peers: a
 * context that drives one rank, with a transport that can exchange all to
 * all, asked for that rank's part (RS_PARAM_PLAN_PART) with rounds by
 * domain pair (RS_PARAM_ROUNDS). */
bool rsi_plan_per_rank(const rs_context *ctx);

/* rs_plan_create: where rsi_plan_per_rank, the rank's domain's part as
 * planned, made the rank's part of the whole plan by one exchange with
 * the other ranks (collective over the context's ranks: a rank that
 * refused takes part all the same, so that every rank fails at once);
 * else the whole plan (rsi_plan_create). */
rs_status rsi_session_plan_create(const rs_layout *src, const rs_layout *dst,
                                  rs_plan **out);

#endif
