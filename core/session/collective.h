/* SPDX-License-Identifier: Apache-2.0 */
/* The control channel's collectives as the core uses them outside an
 * execution (rs_layout_allgather, per-rank planning). Nothing received is
 * read before it is checked, and a collective call ends alike on every
 * rank:
 * - Sealed payloads: each rank's contribution travels with its length and
 *   a digest over its bytes keyed by the context's nonce, the collective's
 *   sequence number on this context, its sender and its receiver (-1: all).
 *   A payload damaged, cut, stale or misdelivered fails its seal:
 *   RS_ERR_CORRUPT naming the sender. Always on: the payloads are planning
 *   records (megabytes at most), not data.
 * - The verdict: after the exchange and what the caller does with it, every
 *   rank tells every rank its status (and message); a rank returns RS_OK
 *   only when every rank did. A rank that cannot read the verdict itself
 *   (damaged in transit) fails, tells every peer by notice and makes its
 *   context fail-stop, so that a peer's next execution or collective on
 *   the context fails at once instead of at its timeout.
 * - Faults for the reliability tests: RESHARD_FAULT_FLIP_COLLECTIVE=n[:b]
 *   flips bit b (default 0; taken modulo the bits received) of what this
 *   process receives in its n-th sealed collective on a context (the
 *   verdicts count too), after the transport delivered it and before its
 *   seal is checked. Read when the context is created. */
#ifndef RS_CORE_COLLECTIVE_H
#define RS_CORE_COLLECTIVE_H

#include <stddef.h>

#include "base/context.h"

/* Every rank gives `bytes` at `mine`; *all (malloc'd; free it) holds every
 * rank's contribution in rank order, counts[r] bytes from rank r (counts
 * has world_size entries). On failure *all is NULL. */
rs_status rsi_coll_allgatherv(rs_context *ctx, const void *mine, size_t bytes,
                              void **all, size_t *counts, rsi_err *err);

/* Every rank gives send_counts[q] bytes for rank q, packed in rank order at
 * `send`; *recv (malloc'd) holds recv_counts[q] bytes from each rank q, in
 * rank order. On failure *recv is NULL. */
rs_status rsi_coll_alltoallv(rs_context *ctx, const void *send,
                             const size_t *send_counts, void **recv,
                             size_t *recv_counts, rsi_err *err);

/* The verdict of a collective call: `mine` is this rank's status so far
 * (its message in err when it failed). Returns RS_OK on every rank when
 * every rank gave RS_OK. Otherwise a rank that failed keeps its own status
 * and message; the others fail with the status of the lowest rank that
 * failed, naming it and quoting its message. `what` names the call for
 * messages ("rs_plan_create", ...). A transport failure or timeout of the
 * verdict makes the context fail-stop. */
rs_status rsi_coll_verdict(rs_context *ctx, rs_status mine, const char *what,
                           rsi_err *err);

/* The fault setting above, parsed (for rsi_context_assemble): *nth 0 when
 * unset. */
void rsi_coll_fault_from_env(int64_t *nth, int64_t *bit);

#endif
