/* SPDX-License-Identifier: Apache-2.0 */
/* Holding SIGPIPE while a call talks to peers.
 *
 * When a peer process dies, a write to the socket that led to it fails
 * with EPIPE, and the kernel also raises SIGPIPE in the writing thread;
 * the default action of SIGPIPE ends the process without a word. Open
 * MPI's TCP transport writes with writev, so a survivor of a dead peer
 * could vanish instead of returning RS_ERR_TIMEOUT or RS_ERR_TRANSPORT
 * (found by CI: fault.tcp.dies_first_send lost a survivor). Every core
 * entry point that can reach a transport holds SIGPIPE blocked on the
 * calling thread for its duration and discards one raised meanwhile: the
 * failed write already said what happened. The thread's mask is restored
 * before the call returns, so everywhere else the application's own
 * disposition of SIGPIPE applies. Holds nest: an inner hold of a thread
 * that already blocks SIGPIPE (its caller's, or an outer hold) changes
 * nothing, and a SIGPIPE the caller left pending stays pending. Threads
 * that a transport starts inside a hold (NCCL's, at context creation)
 * inherit the block, which for them only means that such a write fails
 * with EPIPE. */
#ifndef RS_CORE_SIGPIPE_H
#define RS_CORE_SIGPIPE_H

#include <signal.h>
#include <stdbool.h>

typedef struct rsi_sigpipe_hold {
  sigset_t saved; /* the thread's mask before */
  bool holding;   /* false: SIGPIPE was blocked already, left alone */
} rsi_sigpipe_hold;

void rsi_sigpipe_hold_begin(rsi_sigpipe_hold *h);
void rsi_sigpipe_hold_end(rsi_sigpipe_hold *h);

#endif
