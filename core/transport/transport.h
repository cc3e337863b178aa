/* The one internal transport interface. The executor packs a message (or a
 * slice of one) into staging, hands it to the transport, and unpacks what
 * arrives; a transport only moves bytes between ranks.
 *
 * send/recv post non-blocking operations matched by (sender, receiver, tag)
 * into a group; test(group) says when everything posted in that group has
 * completed, so an executor can post the next round's messages (other
 * group) before it waits for this round's. A transport that can show the
 * receiver the sender's bytes in place (the in-process one) sets *data to them;
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

/* Groups: the executor alternates its steps between the two step groups
 * (posting step k+1 before it waits for step k); control messages (the
 * agreement, the hello before each execution) have a group of their own. */
enum { RSI_GROUP_STEP0 = 0, RSI_GROUP_STEP1 = 1, RSI_GROUP_CONTROL = 2 };
#define RSI_GROUPS 3

/* Tags at or above RSI_TAG_CONTROL are the executor's control messages;
 * below it, (round, stage) steps. */
#define RSI_TAG_CONTROL ((uint64_t)1 << 62)
#define RSI_TAG_AGREE RSI_TAG_CONTROL
#define RSI_TAG_HELLO (RSI_TAG_CONTROL + 1)
#define RSI_TAG_DONE (RSI_TAG_CONTROL + 2)

/* A notice is at most this long (see notify below). */
#define RSI_NOTICE_BYTES 128

/* Abandoning what is posted takes at most this long, whatever is pending. */
#define RSI_ABANDON_MS 50

typedef struct rsi_transport_ops {
  const char *name;
  rs_status (*send)(rsi_transport *t, int group, int from, int to,
                    uint64_t tag, const void *data, size_t bytes,
                    rsi_err *err);
  rs_status (*recv)(rsi_transport *t, int group, int to, int from,
                    uint64_t tag, void *buf, size_t bytes, const void **data,
                    rsi_err *err);
  /* Never blocks: *done says whether everything posted in the group has
   * completed. Once it has, received checksums were verified (a mismatch
   * is RS_ERR_CORRUPT) and the group is empty again. The executor owns
   * the clock: it calls test until done, a deadline, or a notice. */
  rs_status (*test)(rsi_transport *t, int group, bool *done, rsi_err *err);
  /* The first operation of the group still pending: its peer, whether it
   * is a receive, its size. False when none is. */
  bool (*pending)(rsi_transport *t, int group, int *peer, bool *is_recv,
                  size_t *bytes);
  /* Checksum every message from now on (NULL: this transport cannot). */
  void (*set_integrity)(rsi_transport *t, bool on);
  /* Drop everything posted (after a failure), within RSI_ABANDON_MS:
   * receives are cancelled; what cannot be is let go. */
  void (*abandon)(rsi_transport *t);
  /* Take memory that abandoned operations may still read or write, and
   * keep it for as long as they might (NULL: nothing is ever abandoned). */
  void (*adopt)(rsi_transport *t, void *p);
  /* Notices: records of at most RSI_NOTICE_BYTES by which a rank that gave
   * up tells its peers, outside every group and tag. notify never blocks
   * and needs no completion; poll_notice hands over one notice that
   * arrived from any rank (true), or returns false. NULL on transports
   * whose ranks all live in one call. */
  rs_status (*notify)(rsi_transport *t, int to, const void *msg,
                      size_t bytes, rsi_err *err);
  bool (*poll_notice)(rsi_transport *t, int *from, void *buf, size_t cap);
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
  /* The same on every rank of one context and (with near certainty)
   * different for every other: control records carry it, so a record
   * left over from a destroyed context whose engine reuses identifiers
   * (MPI communicator ids) is told apart. 0 for in-process transports. */
  uint64_t nonce;
};

/* What a transport module exports. */
#define RSI_MODULE_ABI 2u
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
