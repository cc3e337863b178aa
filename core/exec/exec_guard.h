/* SPDX-License-Identifier: Apache-2.0 */
/* What makes an execution between processes trustworthy: a rank returns
 * RS_OK only when every byte it received came from its peers' execution of
 * the same plan and the same generation, and every peer finished that
 * generation's transfers. All of it travels on the transport's control
 * channel (host memory), so a transport whose data path takes device
 * memory only is guarded the same way.
 *
 * - Agreement, before a plan's first execution: every rank compares the
 *   hashes of the plan inputs with every other; the plan becomes the n-th
 *   plan agreed on its context (its serial). Plans with identical inputs
 *   are told apart by the order in which they were agreed. A rank whose
 *   own checks refused the execution (a buffer not bound, no memory for
 *   staging) still takes part and says so in its record, with its status
 *   and message: every rank fails at once, naming it, and nothing moved.
 * - Hello, before every execution: a rank tells each peer of the plan
 *   (plan fingerprint, serial, epoch = how many executions of this plan it
 *   has started) and sends no data until it has the same words from that
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
 *   corrupt data, rs_context_abort) tells the plan's peers the first cause,
 *   and its context is done (fail-stop). A rank that hears one gives up
 *   too, at once, and passes the cause on; waits poll for notices.
 * - Waits are bounded: each gives up after RS_PARAM_TIMEOUT_MS without
 *   progress and names the rank that went silent first where that can be
 *   known (a short grace listens to the rank waited for).
 * - Records carry the context's nonce: a leftover of a destroyed context
 *   that the engine delivered here is dropped. */
#ifndef RS_CORE_EXEC_GUARD_H
#define RS_CORE_EXEC_GUARD_H

#include "base/clock.h"
#include "plan/plan.h"

/* The longest a timed-out wait listens for a notice naming who went silent
 * first: a quarter of the timeout, at most this. */
#define RSI_GRACE_MS 200

/* In place of a step group: the control channel, or nothing at all. */
#define RSI_CONTROL (-1)
#define RSI_NO_GROUP (-2)


/* One look at what rank `me` posted in a step group (or RSI_CONTROL):
 * *done when it all completed. Otherwise a notice that arrived, an abort
 * of the context, or `since` lying RS_PARAM_TIMEOUT_MS in the past ends
 * the wait with that failure (recorded; the caller then calls
 * rsi_guard_fail when the plan runs between processes). */
rs_status rsi_guard_check(rs_plan *plan, int me, int group, int64_t since,
                          bool *done, rsi_err *err);

/* An exchange of records with a set of ranks, in flight. A record holds
 * at most RSI_RECORD_WORDS words (the agreement's, with room for a
 * refusal's message). */
#define RSI_RECORD_WORDS 41
typedef struct rsi_exchange {
  uint64_t tag;
  int words, n;
  const int *ranks;
  uint64_t mine[RSI_RECORD_WORDS];
  unsigned char out[RSI_RECORD_WORDS * 8];
  unsigned char *in;
  bool *open;
  uint64_t *theirs;
  int64_t since;
  bool active;
} rsi_exchange;
void rsi_exchange_free(rsi_exchange *x);

/* Before an execution on a context of one rank per process: the peers, the
 * agreement (first execution only, blocking), the epoch, pending notices.
 * On failure the context is failed unless the ranks simply disagree on the
 * plan inputs (RS_ERR_MISMATCH in the agreement). */
rs_status rsi_guard_prepare(rs_plan *plan, rsi_err *err);

/* The checks of this rank refused an execution between processes (the
 * status and message recorded in err): take part all the same so that no
 * rank waits for this one. Before the plan's first execution the refusal
 * travels in the agreement (every rank fails at once; the contexts stay
 * usable; this rank returns its own status and message). Past it, this
 * rank gives up as after a failure (rsi_guard_fail: its peers hear so at
 * once, and the context is done). Returns the status to report. */
rs_status rsi_guard_refuse(rs_plan *plan, rsi_err *err);

/* The hello (done = false) or the done record (done = true): start it, then
 * look until *finished; a peer on another plan or generation is
 * RS_ERR_MISMATCH. Non-blocking. */
rs_status rsi_guard_greet_start(rs_plan *plan, rsi_exchange *x, bool done,
                                rsi_err *err);
rs_status rsi_guard_greet_check(rs_plan *plan, rsi_exchange *x,
                                bool *finished, rsi_err *err);

/* Before returning RS_OK: a notice that arrived meanwhile still fails it. */
rs_status rsi_guard_last_look(rs_plan *plan, rsi_err *err);

/* After a failure past the agreement: abandon what is posted, tell the
 * plan's peers, and mark the context failed. Keeps the recorded message. */
void rsi_guard_fail(rs_plan *plan, rs_status status);


#endif
