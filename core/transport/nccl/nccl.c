/* SPDX-License-Identifier: Apache-2.0 */
/* The NCCL transport module: rank-to-rank transfers of device memory on
 * non-blocking NCCL communicators, ordered on the context's own CUDA
 * streams. A step group's operations go to NCCL together, in one
 * ncclGroupStart/ncclGroupEnd, when the executor first tests the group;
 * the group is then done as soon as NCCL took it (the transfers happen in
 * stream order, and the executor's unpack is enqueued after them). Waits
 * for the device are the executor's, through the engine's query.
 * Built into libreshard-nccl.so; libreshard loads it (transport/module.c). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/grow.h"
#include "nccl_tp.h"

/* How long creating communicators may take before the ranks that did come
 * give up on those that did not. */
#define CREATE_TIMEOUT_MS 60000



rs_status nccl_fail_cuda(rsi_err *err, cudaError_t e, const char *what) {
  return RSI_FAIL(err, RS_ERR_TRANSPORT, "%s failed: %s (%s)", what,
                  cudaGetErrorString(e), cudaGetErrorName(e));
}

rs_status nccl_fail_nccl(rsi_err *err, ncclResult_t r, ncclComm_t comm,
                         const char *what) {
  const char *last = comm ? ncclGetLastError(comm) : NULL;
  return RSI_FAIL(err, RS_ERR_TRANSPORT, "%s failed: %s%s%s", what,
                  ncclGetErrorString(r), last && last[0] ? ": " : "",
                  last ? last : "");
}

ncclResult_t nccl_state(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm, &async);
  return r != ncclSuccess ? r : async;
}

rs_status nccl_settle(ncclComm_t comm, const rsi_transport *t,
                      int64_t timeout_ms, const char *what, rsi_err *err) {
  int64_t since = rsi_now_ms();
  for (;;) {
    ncclResult_t r = nccl_state(comm);
    if (r == ncclSuccess) return RS_OK;
    if (r != ncclInProgress) return nccl_fail_nccl(err, r, comm, what);
    if (t && rsi_transport_aborted(t))
      return RSI_FAIL(err, RS_ERR_TRANSPORT,
                      "%s was given up: the context was aborted "
                      "(rs_context_abort)",
                      what);
    if (rsi_now_ms() - since >= timeout_ms)
      return RSI_FAIL(err, RS_ERR_TIMEOUT,
                      "%s: not every rank took part within %lld ms", what,
                      (long long)timeout_ms);
    rsi_pause();
  }
}

nccl_lane *nccl_lane_of(nccl_transport *nt, int me) {
  return nt->rank == RS_ALL_RANKS ? &nt->lanes[me] : &nt->lanes[0];
}

/* Keeps the caller's current device across a call that switches it. */
static int current_device(void) {
  int d = 0;
  cudaGetDevice(&d);
  return d;
}

/* ---- data ---------------------------------------------------------------- */

static rs_status post(rsi_transport *t, int group, int me, int peer,
                      bool is_recv, void *buf, size_t bytes, rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  nccl_group *g = &nccl_lane_of(nt, me)->groups[group];
  RSI_TRY(rsi_grow((void **)&g->ops, &g->cap, g->n + 1, sizeof *g->ops, 64,
                   err));
  g->ops[g->n++] = (nccl_op){peer, is_recv, buf, bytes};
  return RS_OK;
}

static rs_status nccl_send(rsi_transport *t, int group, int from, int to,
                           uint64_t tag, const void *data, size_t bytes,
                           rsi_err *err) {
  (void)tag; /* NCCL matches in posting order per pair of ranks */
  return post(t, group, from, to, false, (void *)data, bytes, err);
}

static rs_status nccl_recv(rsi_transport *t, int group, int to, int from,
                           uint64_t tag, void *buf, size_t bytes,
                           const void **view, rsi_err *err) {
  (void)tag;
  if (view) *view = buf;
  return post(t, group, to, from, true, buf, bytes, err);
}

/* Hand the group's operations not yet issued to NCCL, as one group. */
static rs_status issue(nccl_lane *lane, nccl_group *g, rsi_err *err) {
  ncclResult_t r = ncclGroupStart();
  for (int64_t i = g->issued; i < g->n && r == ncclSuccess; i++) {
    const nccl_op *op = &g->ops[i];
    r = op->is_recv ? ncclRecv(op->buf, op->bytes, ncclUint8, op->peer,
                               lane->comm, lane->stream)
                    : ncclSend(op->buf, op->bytes, ncclUint8, op->peer,
                               lane->comm, lane->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess) r = end;
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, lane->comm, "ncclGroupEnd (step transfers)");
  g->issued = g->n;
  return RS_OK;
}

static rs_status nccl_test(rsi_transport *t, int me, int group, bool *done,
                           rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  nccl_lane *lane = nccl_lane_of(nt, me);
  nccl_group *g = &lane->groups[group];
  *done = false;
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  ncclResult_t r = nccl_state(lane->comm);
  if (r == ncclInProgress) return RS_OK; /* NCCL still takes the last lot */
  if (r != ncclSuccess)
    return nccl_fail_nccl(err, r, lane->comm, "NCCL (asynchronous error)");
  if (g->issued < g->n) {
    int prev = current_device();
    cudaSetDevice(lane->device);
    rs_status st = issue(lane, g, err);
    cudaSetDevice(prev);
    RSI_TRY(st);
    r = nccl_state(lane->comm);
    if (r == ncclInProgress) return RS_OK;
    if (r != ncclSuccess)
      return nccl_fail_nccl(err, r, lane->comm, "ncclGroupEnd");
  }
  g->n = g->issued = 0;
  *done = true;
  return RS_OK;
}

static bool nccl_pending(rsi_transport *t, int me, int group, int *peer,
                         bool *is_recv, size_t *bytes) {
  nccl_group *g = &nccl_lane_of(nccl_of(t), me)->groups[group];
  if (!g->n) return false;
  *peer = g->ops[0].peer;
  *is_recv = g->ops[0].is_recv;
  *bytes = g->ops[0].bytes;
  return true;
}

/* Stop everything: NCCL's kernels of an aborted communicator return, so
 * the streams drain and memory can be freed. */
static void nccl_abandon(rsi_transport *t) {
  nccl_transport *nt = nccl_of(t);
  for (int i = 0; i < nt->nlanes; i++)
    for (int g = 0; g < RSI_DATA_GROUPS; g++)
      nt->lanes[i].groups[g].n = nt->lanes[i].groups[g].issued = 0;
  if (nt->aborted) return;
  nt->aborted = true;
  for (int i = 0; i < nt->nlanes; i++)
    if (nt->lanes[i].comm) ncclCommAbort(nt->lanes[i].comm);
  if (nt->has_control && nt->control.comm) ncclCommAbort(nt->control.comm);
}

static void *nccl_queue_of(rsi_transport *t, int me) {
  return nccl_lane_of(nccl_of(t), me)->stream;
}

/* The event recorded on callers' queues of `device`, made on first use. */
static rs_status queue_event(nccl_transport *nt, int device, cudaEvent_t *ev,
                             rsi_err *err) {
  if (device >= nt->nqueue_events) {
    int n = device + 1;
    cudaEvent_t *v = realloc(nt->queue_events, (size_t)n * sizeof *v);
    if (!v) return RSI_NOMEM(err);
    for (int d = nt->nqueue_events; d < n; d++) v[d] = NULL;
    nt->queue_events = v;
    nt->nqueue_events = n;
  }
  if (!nt->queue_events[device]) {
    cudaSetDevice(device);
    cudaError_t e = cudaEventCreateWithFlags(&nt->queue_events[device],
                                             cudaEventDisableTiming);
    if (e != cudaSuccess) {
      nt->queue_events[device] = NULL;
      return nccl_fail_cuda(err, e, "cudaEventCreate");
    }
  }
  *ev = nt->queue_events[device];
  return RS_OK;
}

static rs_status nccl_join(rsi_transport *t, void *queue, bool end,
                           rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  cudaStream_t user = (cudaStream_t)queue;
  int prev = current_device(), qdev = prev;
  cudaError_t e = user ? cudaStreamGetDevice(user, &qdev) : cudaSuccess;
  if (e != cudaSuccess)
    return nccl_fail_cuda(err, e, "cudaStreamGetDevice (the stream given)");
  rs_status st = RS_OK;
  if (!end) { /* the lanes start after what is on the caller's queue */
    cudaEvent_t ev = NULL;
    st = queue_event(nt, qdev, &ev, err);
    cudaSetDevice(qdev);
    if (st == RS_OK && (e = cudaEventRecord(ev, user)) != cudaSuccess)
      st = nccl_fail_cuda(err, e, "cudaEventRecord (the stream given)");
    for (int i = 0; i < nt->nlanes && st == RS_OK; i++) {
      cudaSetDevice(nt->lanes[i].device);
      e = cudaStreamWaitEvent(nt->lanes[i].stream, ev, 0);
      if (e != cudaSuccess) st = nccl_fail_cuda(err, e, "cudaStreamWaitEvent");
    }
  } else { /* the caller's queue, and the done records, after the lanes */
    for (int i = 0; i < nt->nlanes && st == RS_OK; i++) {
      nccl_lane *l = &nt->lanes[i];
      cudaSetDevice(l->device);
      e = cudaEventRecord(l->joined, l->stream);
      if (e == cudaSuccess && nt->has_control)
        e = cudaStreamWaitEvent(nt->control.stream, l->joined, 0);
      cudaSetDevice(qdev);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(user, l->joined, 0);
      if (e != cudaSuccess)
        st = nccl_fail_cuda(err, e, "ordering the stream given after the "
                                    "transfers");
    }
  }
  cudaSetDevice(prev);
  return st;
}

/* ---- creation and destruction --------------------------------------------- */

static void lane_close(nccl_transport *nt, nccl_lane *l) {
  if (l->device < 0) return;
  cudaSetDevice(l->device);
  if (l->comm && !nt->aborted) {
    /* Ask NCCL to finish; a peer that is gone cannot stall us for long. */
    ncclResult_t r = ncclCommFinalize(l->comm);
    if (r == ncclSuccess || r == ncclInProgress) {
      rsi_err ignored;
      if (nccl_settle(l->comm, NULL, 5000, "ncclCommFinalize", &ignored) ==
          RS_OK)
        r = ncclCommDestroy(l->comm);
      else
        r = ncclInternalError;
    }
    if (r != ncclSuccess) ncclCommAbort(l->comm);
  }
  l->comm = NULL;
  if (l->stream) {
    cudaStreamSynchronize(l->stream);
    cudaStreamDestroy(l->stream);
  }
  if (l->joined) cudaEventDestroy(l->joined);
  nccl_tables_free(&l->tables);
  for (int g = 0; g < RSI_DATA_GROUPS; g++) free(l->groups[g].ops);
}

static void nccl_destroy(rsi_transport *t) {
  nccl_transport *nt = nccl_of(t);
  int prev = current_device();
  if (nt->has_control) nccl_control_close(nt);
  for (int i = 0; i < nt->nlanes; i++) lane_close(nt, &nt->lanes[i]);
  for (int d = 0; d < nt->nqueue_events; d++)
    if (nt->queue_events[d]) {
      cudaSetDevice(d);
      cudaEventDestroy(nt->queue_events[d]);
    }
  free(nt->queue_events);
  free(nt->lanes);
  free(nt);
  cudaSetDevice(prev);
}

static const rsi_transport_ops nccl_ops = {
    .name = "nccl",
    .send = nccl_send,
    .recv = nccl_recv,
    .test = nccl_test,
    .pending = nccl_pending,
    .set_integrity = NULL,
    .abandon = nccl_abandon,
    .adopt = NULL,
    .destroy = nccl_destroy,
    .queue_of = nccl_queue_of,
    .join = nccl_join,
};


static ncclConfig_t nonblocking_config(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  return c;
}

/* A driver and the device: RS_ERR_UNSUPPORTED naming what is missing. */
static rs_status cuda_ready(int device, rsi_err *err) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "NCCL context: no usable CUDA driver or GPU on this "
                    "machine (cudaGetDeviceCount: %s)",
                    cudaGetErrorString(e));
  if (device >= n)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "NCCL context: CUDA device %d does not exist (this "
                    "process sees %d)",
                    device, n);
  return RS_OK;
}

static rs_status lane_open(nccl_lane *l, int rank, int device, rsi_err *err) {
  l->rank = rank;
  l->device = device;
  cudaSetDevice(device);
  cudaError_t e = cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&l->joined, cudaEventDisableTiming);
  return e == cudaSuccess ? RS_OK : nccl_fail_cuda(err, e, "creating a stream");
}

static nccl_transport *transport_new(int nlanes, rsi_err *err) {
  if (nlanes < 1 || nlanes > 1 << 16) {
    RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "NCCL context: %d ranks here",
             nlanes);
    return NULL;
  }
  nccl_transport *nt = calloc(1, sizeof *nt);
  nccl_lane *lanes = calloc((size_t)nlanes, sizeof *lanes);
  if (!nt || !lanes) {
    free(nt);
    free(lanes);
    RSI_NOMEM(err);
    return NULL;
  }
  for (int i = 0; i < nlanes; i++) lanes[i].device = -1;
  nt->base.ops = &nccl_ops;
  nt->lanes = lanes;
  nt->nlanes = nlanes;
  nccl_engine_init(nt);
  return nt;
}

/* Small ids of the domains, from the keys of every rank (equal keys, equal
 * ids; ids in order of first appearance). */
static rs_status domains_of(const uint64_t *keys, int world, int **host_of,
                            rsi_err *err) {
  int *h = malloc((size_t)world * sizeof *h);
  if (!h) return RSI_NOMEM(err);
  for (int r = 0; r < world; r++) {
    h[r] = r;
    for (int q = 0; q < r; q++)
      if (keys[q] == keys[r]) {
        h[r] = h[q];
        break;
      }
  }
  *host_of = h;
  return RS_OK;
}

/* Every rank in this process, one device each: communicators made in one
 * group, as ncclCommInitAll does. No control channel: the ranks' records
 * are all in this process. */
static rs_status create_in_process(const rsi_module_args *a,
                                   nccl_transport **out, int **host_of,
                                   rsi_err *err) {
  for (int i = 0; i < a->ndevices; i++) RSI_TRY(cuda_ready(a->devices[i], err));
  nccl_transport *nt = transport_new(a->ndevices, err);
  if (!nt) return err->status;
  nt->rank = RS_ALL_RANKS;
  nt->world = a->ndevices;
  *out = nt;
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return nccl_fail_nccl(err, r, NULL, "ncclGetUniqueId");
  for (int i = 0; i < a->ndevices; i++)
    RSI_TRY(lane_open(&nt->lanes[i], i, a->devices[i], err));
  ncclConfig_t cfg = nonblocking_config();
  r = ncclGroupStart();
  for (int i = 0; i < a->ndevices && r == ncclSuccess; i++) {
    cudaSetDevice(a->devices[i]);
    r = ncclCommInitRankConfig(&nt->lanes[i].comm, a->ndevices, id, i, &cfg);
  }
  ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess) r = end;
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, NULL, "ncclCommInitRankConfig");
  uint64_t *keys = malloc((size_t)a->ndevices * sizeof *keys);
  if (!keys) return RSI_NOMEM(err);
  rs_status st = RS_OK;
  for (int i = 0; i < a->ndevices && st == RS_OK; i++) {
    st = nccl_settle(nt->lanes[i].comm, NULL, CREATE_TIMEOUT_MS,
                     "ncclCommInitRankConfig", err);
    keys[i] = nccl_domain_key(a->devices[i]);
  }
  if (st == RS_OK) st = domains_of(keys, a->ndevices, host_of, err);
  free(keys);
  return st;
}

/* One rank per process, on a communicator already made (lane 0's): the
 * control channel, the nonce (rank 0's), and the domains of all ranks. */
static rs_status finish_between(nccl_transport *nt, int **host_of,
                                rsi_err *err) {
  nt->has_control = true; /* closed with the transport, even half open */
  RSI_TRY(nccl_control_open(nt, err));
  nt->base.control = &nccl_control_ops;
  struct {
    uint64_t key, nonce;
  } mine = {nccl_domain_key(nt->lanes[0].device), 0};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  mine.nonce = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)(uintptr_t)nt << 17) ^ 0x9e3779b97f4a7c15u;
  size_t n = (size_t)nt->world;
  uint64_t *all = malloc(n * 2 * sizeof *all), *keys = malloc(n * sizeof *keys);
  rs_status st = all && keys ? RS_OK : RSI_NOMEM(err);
  if (st == RS_OK)
    st = nccl_control_allgather(nt, &mine, sizeof mine, all,
                                CREATE_TIMEOUT_MS, err);
  if (st == RS_OK) {
    for (size_t r = 0; r < n; r++) keys[r] = all[2 * r];
    nt->base.nonce = all[1] ? all[1] : 1;
    st = domains_of(keys, nt->world, host_of, err);
  }
  free(all);
  free(keys);
  return st;
}

static rs_status create_from_id(const rsi_module_args *a, nccl_transport **out,
                                int **host_of, rsi_err *err) {
  if (a->engine_id_bytes != sizeof(ncclUniqueId))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "an NCCL unique id is %zu bytes, %zu were given",
                    sizeof(ncclUniqueId), a->engine_id_bytes);
  if (a->world < 1 || a->rank < 0 || a->rank >= a->world || a->device < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "NCCL context: rank %d of %d on device %d", a->rank,
                    a->world, a->device);
  RSI_TRY(cuda_ready(a->device, err));
  nccl_transport *nt = transport_new(1, err);
  if (!nt) return err->status;
  *out = nt;
  nt->rank = a->rank;
  nt->world = a->world;
  RSI_TRY(lane_open(&nt->lanes[0], a->rank, a->device, err));
  ncclUniqueId id;
  memcpy(&id, a->engine_id, sizeof id);
  ncclConfig_t cfg = nonblocking_config();
  ncclResult_t r =
      ncclCommInitRankConfig(&nt->lanes[0].comm, a->world, id, a->rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, NULL, "ncclCommInitRankConfig");
  RSI_TRY(nccl_settle(nt->lanes[0].comm, NULL, CREATE_TIMEOUT_MS,
                      "ncclCommInitRankConfig", err));
  return finish_between(nt, host_of, err);
}

static rs_status create_from_comm(const rsi_module_args *a,
                                  nccl_transport **out, int **host_of,
                                  rsi_err *err) {
  ncclComm_t user = (ncclComm_t)(intptr_t)a->engine;
  int world = 0, rank = -1, device = -1;
  ncclResult_t r = ncclCommCount(user, &world);
  if (r == ncclSuccess) r = ncclCommUserRank(user, &rank);
  if (r == ncclSuccess) r = ncclCommCuDevice(user, &device);
  if (r != ncclSuccess)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "the communicator given is not usable: %s",
                    ncclGetErrorString(r));
  RSI_TRY(cuda_ready(device, err));
  nccl_transport *nt = transport_new(1, err);
  if (!nt) return err->status;
  *out = nt;
  nt->rank = rank;
  nt->world = world;
  RSI_TRY(lane_open(&nt->lanes[0], rank, device, err));
  ncclConfig_t cfg = nonblocking_config();
  r = ncclCommSplit(user, 0, rank, &nt->lanes[0].comm, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, user, "ncclCommSplit");
  /* A blocking parent returns once the split is made; a non-blocking one
   * may still be working on it. */
  RSI_TRY(nccl_settle(user, NULL, CREATE_TIMEOUT_MS, "ncclCommSplit", err));
  RSI_TRY(nccl_settle(nt->lanes[0].comm, NULL, CREATE_TIMEOUT_MS,
                      "ncclCommSplit", err));
  return finish_between(nt, host_of, err);
}

/* Creation arguments: devices (every rank here), or engine_id (an NCCL
 * unique id) with rank, world and device, or engine (an ncclComm_t). */
static rs_status nccl_create(const rsi_module_args *args, rsi_transport **out,
                             int *rank, int *world, int **host_of,
                             rsi_err *err) {
  RSI_TRY(rsi_module_args_check(args, "nccl", err));
  rsi_log_adopt(args->log);
  int prev = current_device();
  nccl_transport *nt = NULL;
  *host_of = NULL;
  rs_status st;
  if (args->devices)
    st = create_in_process(args, &nt, host_of, err);
  else if (args->engine_id)
    st = create_from_id(args, &nt, host_of, err);
  else if (args->engine)
    st = create_from_comm(args, &nt, host_of, err);
  else
    st = RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                  "NCCL context: no devices, unique id or communicator");
  cudaSetDevice(prev);
  if (st != RS_OK) {
    free(*host_of);
    *host_of = NULL;
    if (nt) {
      if (st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT) nccl_abandon(&nt->base);
      nccl_destroy(&nt->base);
    }
    return st;
  }
  *out = &nt->base;
  *rank = nt->rank;
  *world = nt->world;
  return RS_OK;
}

static rs_status nccl_make_id(void *out, size_t bytes, rsi_err *err) {
  if (bytes != sizeof(ncclUniqueId))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "an NCCL unique id is %zu bytes, %zu were asked for",
                    sizeof(ncclUniqueId), bytes);
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return nccl_fail_nccl(err, r, NULL, "ncclGetUniqueId");
  memcpy(out, &id, sizeof id);
  return RS_OK;
}

__attribute__((visibility("default"))) const rsi_module rsi_module_nccl = {
    .abi = RSI_MODULE_ABI,
    .name = "nccl",
    .create = nccl_create,
    .make_id = nccl_make_id,
};
