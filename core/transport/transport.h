/* The one internal transport interface. The executor packs a message (or a
 * slice of one) into staging, hands it to the transport, and unpacks what
 * arrives; a transport only moves bytes between ranks.
 *
 * send/recv post non-blocking operations matched by (sender, receiver, tag)
 * into one of two groups; wait(group) completes everything posted in that
 * group, so an executor can post the next round's messages (other group)
 * before it waits for this round's. A transport that can show the receiver
 * the sender's bytes in place (the in-process one) sets *data to them;
 * others receive into buf and set *data = buf.
 *
 * Transports with an outside engine (MPI, NCCL) are modules: shared objects
 * exporting `rsi_module_<name>` (an rsi_module), loaded on first use. */
#ifndef RS_CORE_TRANSPORT_H
#define RS_CORE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../error.h"

typedef struct rsi_transport rsi_transport;

/* Tags at or above this are the executor's own control messages (the
 * agreement before the first run); below it, (round, stage) steps. */
#define RSI_TAG_CONTROL ((uint64_t)1 << 62)

typedef struct rsi_transport_ops {
  const char *name;
  rs_status (*send)(rsi_transport *t, int group, int from, int to,
                    uint64_t tag, const void *data, size_t bytes,
                    rsi_err *err);
  rs_status (*recv)(rsi_transport *t, int group, int to, int from,
                    uint64_t tag, void *buf, size_t bytes, const void **data,
                    rsi_err *err);
  rs_status (*wait)(rsi_transport *t, int group, int64_t timeout_ms,
                    rsi_err *err);
  /* Checksum every message from now on (NULL: this transport cannot). */
  void (*set_integrity)(rsi_transport *t, bool on);
  /* Drop what is posted (after a failure): receives are cancelled. */
  void (*abandon)(rsi_transport *t);
  /* Take memory that abandoned operations may still read or write, and
   * keep it for as long as they might (NULL: nothing is ever abandoned). */
  void (*adopt)(rsi_transport *t, void *p);
  /* Collective over all ranks (NULL for in-process): every rank gives
   * `bytes` bytes; *all (malloc'd) gets every rank's, in rank order, and
   * counts[r] (world entries, caller's) their lengths. */
  rs_status (*allgatherv)(rsi_transport *t, const void *mine, size_t bytes,
                          void **all, size_t *counts, int64_t timeout_ms,
                          rsi_err *err);
  void (*destroy)(rsi_transport *t);
} rsi_transport_ops;

struct rsi_transport {
  const rsi_transport_ops *ops;
};

/* What a transport module exports. */
#define RSI_MODULE_ABI 1u
typedef struct rsi_module {
  uint32_t abi; /* RSI_MODULE_ABI */
  const char *name;
  /* Open a transport on an engine handle (an MPI Fortran communicator):
   * this process's rank, the world size, and for every rank an id of its
   * host (host_of: world entries, malloc'd). */
  rs_status (*create)(int64_t handle, rsi_transport **out, int *rank,
                      int *world, int **host_of, rsi_err *err);
} rsi_module;

/* transport/local: every rank in this process. */
rs_status rsi_local_transport_create(rsi_transport **out);

/* transport/module.c: find and load module `name` ("mpi"). */
rs_status rsi_module_load(const char *name, const rsi_module **out,
                          rsi_err *err);

#endif
