/* SPDX-License-Identifier: Apache-2.0 */
/* The NCCL transport module's shared parts: one lane per rank this
 * process drives (its device, communicator and stream), the step groups
 * posted on each lane, the control channel (between processes), and the
 * CUDA copy engine. See nccl.c for the data path, control.c for the
 * control channel, engine_cuda.c for the engine, domains.c for domains. */
#ifndef RS_NCCL_TP_H
#define RS_NCCL_TP_H

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h"
#include "copy/engine.h"
#include "transport/transport.h"
#include "pieces.h"

/* One posted data operation. */
typedef struct nccl_op {
  int peer;
  bool is_recv;
  void *buf;
  size_t bytes;
} nccl_op;

/* Operations of one step group of one lane: posted (n), of which the
 * first `issued` went to NCCL in one ncclGroupStart/End. */
typedef struct nccl_group {
  nccl_op *ops;
  int64_t n, cap, issued;
} nccl_group;

/* Piece tables on their way to the kernel: a ring of pinned host memory
 * mirrored in device memory. A region of the host ring is rewritten only
 * after the copy that read it completed (its event); the device ring is
 * rewritten in stream order, after the kernel that read it. When the
 * region wanted is still in flight, the ring is outgrown rather than
 * waited for (executions enqueued ahead of the device keep the host free),
 * up to NCCL_TABLE_MAX_BYTES and NCCL_TABLE_OLD rings kept until the
 * lane closes. */
#define NCCL_TABLE_SLOTS 64
#define NCCL_TABLE_OLD 12
#define NCCL_TABLE_MAX_BYTES ((size_t)256 << 20)
typedef struct nccl_tables {
  char *host, *dev;
  size_t cap, head;
  struct {
    char *host, *dev;
  } old[NCCL_TABLE_OLD];
  int nold;
  struct {
    size_t lo, hi;
    cudaEvent_t done;
    bool live;
  } slot[NCCL_TABLE_SLOTS];
  int next;
  rsi_pieces pieces;
} nccl_tables;

typedef struct nccl_lane {
  int rank, device;
  ncclComm_t comm; /* owned: created or split by this context */
  cudaStream_t stream;
  cudaEvent_t joined; /* recorded where an execution's work ends */
  nccl_group groups[RSI_DATA_GROUPS];
  nccl_tables tables;
} nccl_lane;

/* A control operation: host bytes, sent or received in one batch. */
typedef struct nccl_cop {
  int peer;
  bool is_recv;
  void *host; /* the caller's */
  size_t bytes, at; /* at: offset in the batch's buffers */
} nccl_cop;

typedef struct nccl_control {
  ncclComm_t comm; /* split from lane 0's */
  cudaStream_t stream;
  cudaEvent_t done;
  nccl_cop *posted, *flight; /* next batch; the batch in flight */
  int64_t nposted, cap_posted, nflight, cap_flight;
  int stage; /* of the batch in flight (control.c) */
  char *host, *dev; /* pinned and device buffers of the batch in flight */
  size_t cap;
} nccl_control;

typedef struct nccl_transport {
  rsi_transport base;
  rsi_engine engine;
  int rank, world; /* rank: RS_ALL_RANKS in process */
  nccl_lane *lanes;
  int nlanes;
  nccl_control control; /* between processes only */
  bool has_control;
  bool aborted; /* communicators aborted: nothing more is posted */
  /* Per CUDA device, an event recorded on callers' queues of that device
   * (made on first use). */
  cudaEvent_t *queue_events;
  int nqueue_events;
} nccl_transport;

static inline nccl_transport *nccl_of(rsi_transport *t) {
  return (nccl_transport *)t;
}

/* The lane driving rank `me` (in process: lane me; else lane 0). */
nccl_lane *nccl_lane_of(nccl_transport *nt, int me);

/* RS_ERR_TRANSPORT naming what failed and why. */
rs_status nccl_fail_cuda(rsi_err *err, cudaError_t e, const char *what);
rs_status nccl_fail_nccl(rsi_err *err, ncclResult_t r, ncclComm_t comm,
                         const char *what);

/* ncclSuccess once `comm` finished what was asked of it; ncclInProgress
 * while it works (non-blocking communicators); an error otherwise. */
ncclResult_t nccl_state(ncclComm_t comm);
/* Wait (polling) until `comm` is no longer in progress, at most
 * timeout_ms: RS_OK, RS_ERR_TIMEOUT or RS_ERR_TRANSPORT. With a transport
 * t (NULL: none, while creating or closing), an abort of its context ends
 * the wait too (RS_ERR_TRANSPORT). */
rs_status nccl_settle(ncclComm_t comm, const rsi_transport *t,
                      int64_t timeout_ms, const char *what, rsi_err *err);

/* control.c */
extern const rsi_control_ops nccl_control_ops;
rs_status nccl_control_open(nccl_transport *nt, rsi_err *err);
void nccl_control_close(nccl_transport *nt);
/* Blocking collective on the control communicator (creation). */
rs_status nccl_control_allgather(nccl_transport *nt, const void *mine,
                                 size_t bytes, void *all, int64_t timeout_ms,
                                 rsi_err *err);

/* engine_cuda.c */
void nccl_engine_init(nccl_transport *nt);
void nccl_tables_free(nccl_tables *t);

/* domains.c: a key of the NVLink domain of `device` (the NVML fabric
 * clique where there is one, else this host); equal keys share a domain. */
uint64_t nccl_domain_key(int device);

#endif
