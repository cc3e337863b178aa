/* SPDX-License-Identifier: Apache-2.0 */
/* The one internal transport interface: how bytes travel between ranks.
 * The executor (core/exec/exec_run.c) decides what to send when; a copy engine
 * (core/copy/engine.h) packs and unpacks; a transport only moves bytes. A
 * transport whose ranks share one address space (in process) may also take
 * direct messages (send_direct, recv_direct below): instead of bytes, the
 * copies that move a piece once, straight from the sender's memory into
 * the receiver's, which it runs through the host engine when the two ends
 * meet; the executor then packs and unpacks nothing for that piece.
 *
 * Two channels:
 * - data (rsi_transport_ops): messages between memory of the context's
 *   kind (host, or device memory for a GPU transport), posted into one of
 *   two step groups so that an executor can post step k+1 before step k
 *   completes;
 * - control (rsi_control_ops): small host-memory records (the agreement,
 *   the hello and done records of each execution), notices of a rank that
 *   gave up, and the layout allgather. A transport whose data path takes
 *   device memory only still agrees and exchanges layouts through it. NULL
 *   for the in-process transport, whose ranks all live in one call.
 *
 * Operations are non-blocking and matched by (sender, receiver, tag) in
 * posting order (NCCL: by (sender, receiver) in posting order; the
 * executor posts the same order on both ends). test never blocks: the
 * executor owns the clock and decides how long to wait. A transport may
 * send control records in batches at a test (NCCL): the receives and sends
 * of one exchange are posted before the channel is tested.
 *
 * Transports with an outside engine (MPI, NCCL) are modules: shared objects
 * exporting `rsi_module_<name>` (an rsi_module), loaded on first use. */
#ifndef RS_CORE_TRANSPORT_H
#define RS_CORE_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/log.h"

typedef struct rsi_transport rsi_transport;
struct rsi_copy; /* core/copy/engine.h */

/* Step groups of the data channel. */
enum { RSI_GROUP_STEP0 = 0, RSI_GROUP_STEP1 = 1 };
#define RSI_DATA_GROUPS 2

/* Control tags (step tags are the executor's own, below these). */
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
  /* Receive into buf; when view is not NULL, *view tells where the bytes
   * will be once the group is done. Both transports of today set it to
   * buf; a transport that can show the receiver the sender's bytes in
   * place may point it there instead (valid until the receiver's next step
   * in that group begins), saving the executor's unpack a copy. */
  rs_status (*recv)(rsi_transport *t, int group, int to, int from,
                    uint64_t tag, void *buf, size_t bytes, const void **view,
                    rsi_err *err);
  /* *done: everything rank `me` posted in the group has completed. Once it
   * has, received checksums were verified (a mismatch is RS_ERR_CORRUPT)
   * and the group is empty again for `me`. A transport driving one rank
   * ignores `me`. */
  rs_status (*test)(rsi_transport *t, int me, int group, bool *done,
                    rsi_err *err);
  /* The first operation of `me` in the group still pending: its peer,
   * whether it is a receive, its size. False when none is. */
  bool (*pending)(rsi_transport *t, int me, int group, int *peer,
                  bool *is_recv, size_t *bytes);
  /* Checksum every message from now on (NULL: this transport cannot). */
  void (*set_integrity)(rsi_transport *t, bool on);
  /* Drop everything posted on both channels (after a failure), within
   * RSI_ABANDON_MS: receives are cancelled; what cannot be is let go. */
  void (*abandon)(rsi_transport *t);
  /* Take memory that abandoned operations may still read or write, and
   * keep it for as long as they might (NULL: nothing is ever abandoned). */
  void (*adopt)(rsi_transport *t, void *p);
  void (*destroy)(rsi_transport *t);
  /* Queued transports only (a GPU transport whose operations are ordered
   * on device queues; NULL otherwise). For them test says done once what
   * was posted is enqueued, not once it arrived. queue_of is the queue on
   * which rank `me`'s copies and transfers are ordered; join orders the
   * transport's queues after everything on the caller's `queue` (at the
   * start of an execution, end = false), or the caller's queue after
   * everything the transport enqueued (end = true). */
  void *(*queue_of)(rsi_transport *t, int me);
  rs_status (*join)(rsi_transport *t, void *queue, bool end, rsi_err *err);
  /* Transports whose ranks share one address space only (in process;
   * NULL otherwise): direct messages, which carry no bytes but the copies
   * (core/copy/engine.h) that move them once, straight from the sender's memory
   * into the receiver's, strided at both ends, without staging. A direct
   * send gives n copies with their source side set (src, src_strides, and
   * the op, dtypes, blocks and extent that both ends compute alike from
   * the plan); the matching direct receive gives n copies of the same
   * moves with their destination side set (dst, dst_strides). They match
   * each other, never a plain send or receive, by (sender, receiver, tag)
   * in posting order; at the match the transport performs the n copies,
   * the send's source into the receive's destination, through the host
   * engine, and both are complete. Until then both arrays, and the memory
   * they point at, stay the posters' (a send is complete only once its
   * copy ran, so the sender's step, its staging half and relay slots
   * outlive it). */
  rs_status (*send_direct)(rsi_transport *t, int group, int from, int to,
                           uint64_t tag, const struct rsi_copy *copies,
                           int64_t n, rsi_err *err);
  rs_status (*recv_direct)(rsi_transport *t, int group, int to, int from,
                           uint64_t tag, const struct rsi_copy *copies,
                           int64_t n, rsi_err *err);
} rsi_transport_ops;

/* The control channel: host memory, one group. */
typedef struct rsi_control_ops {
  rs_status (*send)(rsi_transport *t, int to, uint64_t tag, const void *data,
                    size_t bytes, rsi_err *err);
  rs_status (*recv)(rsi_transport *t, int from, uint64_t tag, void *buf,
                    size_t bytes, rsi_err *err);
  rs_status (*test)(rsi_transport *t, bool *done, rsi_err *err);
  bool (*pending)(rsi_transport *t, int *peer, bool *is_recv, size_t *bytes);
  /* Notices: records of at most RSI_NOTICE_BYTES by which a rank that gave
   * up tells its peers, outside every group and tag. notify never blocks
   * and needs no completion; poll_notice hands over one notice that
   * arrived from any rank (true), or returns false. */
  rs_status (*notify)(rsi_transport *t, int to, const void *msg,
                      size_t bytes, rsi_err *err);
  bool (*poll_notice)(rsi_transport *t, int *from, void *buf, size_t cap);
  /* Collective over all ranks: every rank gives `bytes` bytes; *all
   * (malloc'd) gets every rank's, in rank order, and counts[r] (world
   * entries, caller's) their lengths. */
  rs_status (*allgatherv)(rsi_transport *t, const void *mine, size_t bytes,
                          void **all, size_t *counts, int64_t timeout_ms,
                          rsi_err *err);
  /* Collective over all ranks: every rank gives send_counts[q] bytes for
   * each rank q (world entries), packed in rank order in `send`; *recv
   * (malloc'd) gets what every rank gave this one, packed in rank order,
   * and recv_counts[q] (world entries, caller's) their lengths. Per-rank
   * planning (core/session/plan_rank.c) tells senders their moves through it. */
  rs_status (*alltoallv)(rsi_transport *t, const void *send,
                         const size_t *send_counts, void **recv,
                         size_t *recv_counts, int64_t timeout_ms,
                         rsi_err *err);
} rsi_control_ops;

struct rsi_engine;

struct rsi_transport {
  const rsi_transport_ops *ops;
  const rsi_control_ops *control; /* NULL in process */
  /* The same on every rank of one context and (with near certainty)
   * different for every other: control records carry it, so a record
   * left over from a destroyed context whose engine reuses identifiers
   * (MPI communicator ids) is told apart. 0 for in-process transports. */
  uint64_t nonce;
  /* The copy engine of the memory this transport moves, owned by the
   * transport; NULL: host memory (rsi_host_engine). */
  struct rsi_engine *engine;
  /* Why a progress thread (RS_PARAM_PROGRESS_THREAD) may not drive this
   * transport beside the caller's own calls to its engine, as a sentence
   * in static storage; NULL: it may. */
  const char *no_progress_thread;
  /* The context's abort flag (rs_context_abort, from any thread), set by
   * the core when the transport joins its context; NULL before (while the
   * context is created nobody holds it to abort). A control collective
   * that waits on peers polls it and gives up at once, as after a timeout
   * (RS_ERR_TRANSPORT; what it posted stays posted): rsi_transport_aborted. */
  const atomic_bool *aborted;
};

/* Whether the context of t was aborted. */
static inline bool rsi_transport_aborted(const rsi_transport *t) {
  return t->aborted && atomic_load_explicit(t->aborted, memory_order_acquire);
}

/* What a transport module exports. A module `name` is a shared object
 * libreshard-<name>.so.<major> exporting `const rsi_module rsi_module_<name>`;
 * transport/module.c finds and loads it (see there for where it looks). */
/* 5: rsi_transport_ops grew send_direct and recv_direct; 6:
 * rsi_control_ops grew alltoallv; 7: rsi_transport grew
 * no_progress_thread; 8: rsi_transport grew aborted. */
#define RSI_MODULE_ABI 8u

/* What a transport is created on: a versioned struct, so that fields can
 * be added at its end without a new module ABI. The caller fills `size`
 * with sizeof(rsi_module_args) as it was built and `version` with
 * RSI_MODULE_ARGS_VERSION; a module refuses a version it does not know
 * and a size too small for that version (rsi_module_args_check). */
#define RSI_MODULE_ARGS_VERSION 3u
typedef struct rsi_module_args {
  uint32_t size;    /* sizeof(rsi_module_args) the caller built with */
  uint32_t version; /* RSI_MODULE_ARGS_VERSION */
  int64_t engine;   /* an engine handle: an MPI Fortran communicator, an
                       ncclComm_t as an integer; 0 for none */
  const void *engine_id; /* bytes of an engine id (an NCCL unique id), or
                            NULL */
  size_t engine_id_bytes;
  int rank, world; /* where the engine does not know them; -1 otherwise */
  int device;      /* CUDA device, -1 for none */
  void *queue;     /* default queue (a CUDA stream), or NULL */
  uint64_t options; /* reserved, 0 */
  /* Version 2: every rank in this process, one CUDA device each (rank i
   * on devices[i]); NULL otherwise. */
  const int *devices;
  int ndevices;
  /* Version 3: the library's log, which the module logs through
   * (rsi_log_adopt); NULL: the module logs nothing. */
  rsi_log_state *log;
} rsi_module_args;

/* Arguments of the current version with nothing set: no engine, rank,
 * world and device -1. */
static inline rsi_module_args rsi_module_args_init(void) {
  rsi_module_args a = {0};
  a.size = (uint32_t)sizeof a;
  a.version = RSI_MODULE_ARGS_VERSION;
  a.rank = a.world = a.device = -1;
  a.log = rsi_log_now;
  return a;
}

/* RS_OK when `module` can read *args: a version it knows, a size that
 * holds that version's fields, no reserved option set. Else
 * RS_ERR_INVALID_ARGUMENT, recorded in err. */
static inline rs_status rsi_module_args_check(const rsi_module_args *args,
                                              const char *module,
                                              rsi_err *err) {
  if (!args)
    return RSI_FAIL(err, RS_ERR_NULL_POINTER,
                    "transport module '%s': no creation arguments", module);
  if (args->version != RSI_MODULE_ARGS_VERSION ||
      args->size < (uint32_t)sizeof *args)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "transport module '%s' reads creation arguments of "
                    "version %u (%u bytes), was given version %u (%u bytes)",
                    module, RSI_MODULE_ARGS_VERSION,
                    (unsigned)sizeof *args, (unsigned)args->version,
                    (unsigned)args->size);
  if (args->options)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "transport module '%s': options 0x%llx, none is defined",
                    module, (unsigned long long)args->options);
  return RS_OK;
}

typedef struct rsi_module {
  uint32_t abi; /* RSI_MODULE_ABI */
  const char *name;
  /* Open a transport on *args: this process's rank, the world size, and
   * for every rank an id of its host (host_of: world entries, malloc'd;
   * ranks with equal ids share a fast fabric). Refuses args it cannot
   * read (rsi_module_args_check). On failure nothing is left to free. */
  rs_status (*create)(const rsi_module_args *args, rsi_transport **out,
                      int *rank, int *world, int **host_of, rsi_err *err);
  /* Write a fresh engine id (an NCCL unique id) of exactly `bytes` bytes;
   * NULL for an engine that has none. */
  rs_status (*make_id)(void *out, size_t bytes, rsi_err *err);
} rsi_module;

/* transport/local: every rank in this process. */
rs_status rsi_local_transport_create(rsi_transport **out);
/* The engine that runs its direct messages' copies (its context's, which
 * outlives the transport); until set, rsi_host_engine(). */
void rsi_local_transport_use_engine(rsi_transport *t,
                                    struct rsi_engine *engine);

/* transport/module.c: find and load module `name` ([a-z0-9_]+: "mpi",
 * "nccl"), once per process; *out is shared by every caller. */
rs_status rsi_module_load(const char *name, const rsi_module **out,
                          rsi_err *err);

#endif
