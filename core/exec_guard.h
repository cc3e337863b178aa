/* What makes an execution between processes trustworthy: a rank returns
 * RS_OK only when every byte it received came from its peers' execution of
 * the same plan and the same generation.
 *
 * - Agreement, before a plan's first execution: every rank compares the
 *   hashes of the plan inputs with every other; the plan becomes the n-th
 *   plan agreed on its context (its serial). Plans with identical inputs
 *   are told apart by the order in which they were agreed.
 * - Hello, before every execution: a rank tells each peer of the plan
 *   (plan fingerprint, serial, epoch = how many executions of this plan it
 *   has started) and sends nothing until it has the same words from that
 *   peer. So no data message exists before both ends run the same
 *   generation, and a message left over from an abandoned execution can
 *   never be taken for a later one.
 * - Done, after every execution: the same words once more, after the
 *   rank's own transfers completed. A rank returns RS_OK only when every
 *   peer finished its transfers of the same generation, so no peer that
 *   sent it bytes abandoned that generation before it returned. (A peer
 *   may still fail afterwards, waiting for another's done record; it then
 *   says so, and its own bytes arrived whole.)
 * - Notices: a rank that gives up (timeout, transport error, mismatch,
 *   corrupt data) tells the peers of the plan why, and its context is done
 *   (fail-stop). A rank that hears a notice gives up too, at once, with the
 *   reason; waits poll for notices, and before returning RS_OK a rank
 *   checks once more.
 * - Waits are bounded: each gives up after RS_PARAM_TIMEOUT_MS without
 *   progress, names the rank it was waiting for, and, when that rank gave
 *   up first (its notice arrives within a short grace), the rank it was
 *   waiting for in turn. */
#ifndef RS_CORE_EXEC_GUARD_H
#define RS_CORE_EXEC_GUARD_H

#include "plan.h"

/* The longest a timed-out wait listens for a notice naming who went silent
 * first: a quarter of the timeout, at most this. */
#define RSI_GRACE_MS 200

/* Before an execution on a context of one rank per process: the agreement
 * (first execution only), the epoch, pending notices, the hello exchange.
 * On failure the context is failed unless the status says the ranks simply
 * disagree on the plan inputs (RS_ERR_MISMATCH in the agreement). */
rs_status rsi_guard_begin(rs_plan *plan, rsi_err *err);

/* Wait for everything posted in a transport group, bounded as above. */
rs_status rsi_guard_wait(rs_plan *plan, int group, rsi_err *err);

/* After the last step: the done exchange; a notice that arrived meanwhile
 * still fails it. */
rs_status rsi_guard_end(rs_plan *plan, rsi_err *err);

/* After a failure past the agreement: abandon what is posted, tell the
 * plan's peers, and mark the context failed. Keeps the recorded message. */
void rsi_guard_fail(rs_plan *plan, rs_status status);

#endif
