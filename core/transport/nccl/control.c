/* SPDX-License-Identifier: Apache-2.0 */
/* The NCCL transport's control channel: the executor's small host records
 * (agreement, hello, done) and the layout allgather, between processes, on
 * a communicator of their own split from the data one and a stream of
 * their own. Records posted are sent together: at a test, the batch goes
 * through a pinned host buffer to device memory, through one NCCL group,
 * and back; the batch is done when its event is. NCCL has no tags and no
 * any-source receive: records are matched in posting order per pair of
 * ranks (the executor posts them in the same order on both ends and checks
 * what arrives), and notices do not travel. */
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "nccl_tp.h"

#define ALIGN_UP(x) (((x) + 255) / 256 * 256)

/* Where the batch in flight stands. */
enum { STAGE_IDLE = 0, STAGE_GROUP, STAGE_COPY };

static nccl_control *control_of(rsi_transport *t) {
  return &nccl_of(t)->control;
}

rs_status nccl_control_open(nccl_transport *nt, rsi_err *err) {
  nccl_control *c = &nt->control;
  nccl_lane *l = &nt->lanes[0];
  cudaSetDevice(l->device);
  cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming);
  if (e != cudaSuccess) return nccl_fail_cuda(err, e, "creating a stream");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommSplit(l->comm, 0, nt->rank, &c->comm, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, l->comm, "ncclCommSplit (control)");
  /* On a non-blocking parent the new communicator exists only once the
   * parent finished the split. */
  RSI_TRY(nccl_settle(l->comm, NULL, 60000, "ncclCommSplit (control)", err));
  return nccl_settle(c->comm, NULL, 60000, "ncclCommSplit (control)", err);
}

static void free_buffers(nccl_control *c) {
  if (c->host) cudaFreeHost(c->host);
  if (c->dev) cudaFree(c->dev);
  c->host = c->dev = NULL;
  c->cap = 0;
}

void nccl_control_close(nccl_transport *nt) {
  nccl_control *c = &nt->control;
  if (nt->lanes[0].device >= 0) cudaSetDevice(nt->lanes[0].device);
  if (c->comm && !nt->aborted) {
    ncclResult_t r = ncclCommFinalize(c->comm);
    rsi_err ignored;
    if ((r == ncclSuccess || r == ncclInProgress) &&
        nccl_settle(c->comm, NULL, 5000, "ncclCommFinalize", &ignored) == RS_OK)
      r = ncclCommDestroy(c->comm);
    else
      r = ncclInternalError;
    if (r != ncclSuccess) ncclCommAbort(c->comm);
  }
  c->comm = NULL;
  if (c->stream) {
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
  }
  if (c->done) cudaEventDestroy(c->done);
  free_buffers(c);
  free(c->posted);
  free(c->flight);
}

/* Pinned and device buffers of at least `bytes` (nothing in flight). */
static rs_status reserve(nccl_control *c, size_t bytes, rsi_err *err) {
  if (bytes <= c->cap) return RS_OK;
  free_buffers(c);
  size_t cap = ALIGN_UP(bytes < 4096 ? 4096 : bytes * 2);
  cudaError_t e = cudaMallocHost((void **)&c->host, cap);
  if (e == cudaSuccess) e = cudaMalloc((void **)&c->dev, cap);
  if (e != cudaSuccess) {
    free_buffers(c);
    return nccl_fail_cuda(err, e, "allocating control buffers");
  }
  c->cap = cap;
  return RS_OK;
}

static rs_status post(rsi_transport *t, int peer, bool is_recv, void *host,
                      size_t bytes, rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  nccl_control *c = control_of(t);
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  RSI_TRY(rsi_grow((void **)&c->posted, &c->cap_posted, c->nposted + 1,
                   sizeof *c->posted, 16, err));
  c->posted[c->nposted++] = (nccl_cop){peer, is_recv, host, bytes, 0};
  return RS_OK;
}

static rs_status control_send(rsi_transport *t, int to, uint64_t tag,
                              const void *data, size_t bytes, rsi_err *err) {
  (void)tag;
  return post(t, to, false, (void *)data, bytes, err);
}

static rs_status control_recv(rsi_transport *t, int from, uint64_t tag,
                              void *buf, size_t bytes, rsi_err *err) {
  (void)tag;
  return post(t, from, true, buf, bytes, err);
}

/* Send the posted records as one batch. */
static rs_status issue(nccl_transport *nt, rsi_err *err) {
  nccl_control *c = &nt->control;
  nccl_cop *swap = c->flight;
  int64_t cap = c->cap_flight;
  c->flight = c->posted;
  c->cap_flight = c->cap_posted;
  c->nflight = c->nposted;
  c->posted = swap;
  c->cap_posted = cap;
  c->nposted = 0;
  size_t total = 0;
  for (int64_t i = 0; i < c->nflight; i++) {
    c->flight[i].at = total;
    total += ALIGN_UP(c->flight[i].bytes);
  }
  RSI_TRY(reserve(c, total, err));
  for (int64_t i = 0; i < c->nflight; i++)
    if (!c->flight[i].is_recv)
      memcpy(c->host + c->flight[i].at, c->flight[i].host,
             c->flight[i].bytes);
  cudaError_t e =
      cudaMemcpyAsync(c->dev, c->host, total, cudaMemcpyHostToDevice,
                      c->stream);
  if (e != cudaSuccess) return nccl_fail_cuda(err, e, "cudaMemcpyAsync");
  ncclResult_t r = ncclGroupStart();
  for (int64_t i = 0; i < c->nflight && r == ncclSuccess; i++) {
    const nccl_cop *op = &c->flight[i];
    r = op->is_recv ? ncclRecv(c->dev + op->at, op->bytes, ncclUint8,
                               op->peer, c->comm, c->stream)
                    : ncclSend(c->dev + op->at, op->bytes, ncclUint8,
                               op->peer, c->comm, c->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess) r = end;
  if (r != ncclSuccess && r != ncclInProgress)
    return nccl_fail_nccl(err, r, c->comm, "ncclGroupEnd (control records)");
  c->stage = STAGE_GROUP;
  return RS_OK;
}

/* Copy the batch back once NCCL took its group. */
static rs_status copy_back(nccl_control *c, rsi_err *err) {
  size_t total = 0;
  for (int64_t i = 0; i < c->nflight; i++)
    total = c->flight[i].at + ALIGN_UP(c->flight[i].bytes);
  cudaError_t e = cudaMemcpyAsync(c->host, c->dev, total,
                                  cudaMemcpyDeviceToHost, c->stream);
  if (e == cudaSuccess) e = cudaEventRecord(c->done, c->stream);
  if (e != cudaSuccess) return nccl_fail_cuda(err, e, "cudaMemcpyAsync");
  c->stage = STAGE_COPY;
  return RS_OK;
}

static void deliver(nccl_control *c) {
  for (int64_t i = 0; i < c->nflight; i++)
    if (c->flight[i].is_recv)
      memcpy(c->flight[i].host, c->host + c->flight[i].at,
             c->flight[i].bytes);
  c->nflight = 0;
  c->stage = STAGE_IDLE;
}

/* Advance the batch in flight as far as it goes without waiting; issue
 * the next when it is done. *done once nothing is posted or in flight. */
static rs_status advance(nccl_transport *nt, bool *done, rsi_err *err) {
  nccl_control *c = &nt->control;
  for (;;) {
    ncclResult_t r = nccl_state(c->comm);
    if (r == ncclInProgress) return RS_OK; /* NCCL still takes the group */
    if (r != ncclSuccess)
      return nccl_fail_nccl(err, r, c->comm, "NCCL control channel");
    if (c->stage == STAGE_GROUP) RSI_TRY(copy_back(c, err));
    if (c->stage == STAGE_COPY) {
      cudaError_t e = cudaEventQuery(c->done);
      if (e == cudaErrorNotReady) return RS_OK;
      if (e != cudaSuccess)
        return nccl_fail_cuda(err, e, "control records (cudaEventQuery)");
      deliver(c);
    }
    if (!c->nposted) {
      *done = true;
      return RS_OK;
    }
    RSI_TRY(issue(nt, err));
  }
}

static rs_status control_test(rsi_transport *t, bool *done, rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  *done = false;
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(nt->lanes[0].device);
  rs_status st = advance(nt, done, err);
  cudaSetDevice(prev);
  return st;
}

static bool control_pending(rsi_transport *t, int *peer, bool *is_recv,
                            size_t *bytes) {
  nccl_control *c = control_of(t);
  const nccl_cop *op = c->nflight ? &c->flight[0]
                       : c->nposted ? &c->posted[0]
                                    : NULL;
  if (!op) return false;
  *peer = op->peer;
  *is_recv = op->is_recv;
  *bytes = op->bytes;
  return true;
}

/* Notices do not travel over NCCL (no any-source receive): a peer finds
 * out through its own timeout. */
static rs_status control_notify(rsi_transport *t, int to, const void *msg,
                                size_t bytes, rsi_err *err) {
  (void)t;
  (void)to;
  (void)msg;
  (void)bytes;
  (void)err;
  return RS_OK;
}

static bool control_poll_notice(rsi_transport *t, int *from, void *buf,
                                size_t cap) {
  (void)t;
  (void)from;
  (void)buf;
  (void)cap;
  return false;
}

/* NCCL calls of one blocking collective: they read in_bytes at `in` and
 * write the output at `out`, both device memory, on `stream`. */
typedef ncclResult_t (*collective_calls)(void *arg, const char *in, char *out,
                                         ncclComm_t comm,
                                         cudaStream_t stream);

/* Send and complete every batch posted before now, at most timeout_ms
 * (the peers of its records do the same, in their own test or drain). */
static rs_status drain(nccl_transport *nt, int64_t timeout_ms, rsi_err *err) {
  int64_t since = rsi_now_ms();
  for (;;) {
    bool done = false;
    RSI_TRY(advance(nt, &done, err));
    if (done) return RS_OK;
    if (rsi_transport_aborted(&nt->base))
      return RSI_FAIL(err, RS_ERR_TRANSPORT,
                      "rank %d: control records posted before a collective "
                      "were given up: the context was aborted "
                      "(rs_context_abort)",
                      nt->rank);
    if (rsi_now_ms() - since >= timeout_ms)
      return RSI_FAIL(err, RS_ERR_TIMEOUT,
                      "rank %d: control records posted before a collective "
                      "did not complete within %lld ms",
                      nt->rank, (long long)timeout_ms);
    rsi_pause();
  }
}

/* One blocking collective on the control communicator, at most
 * timeout_ms: in_bytes of host memory at `in` go to the device, `calls`
 * enqueue the NCCL calls, out_bytes come back to host memory at `out`.
 * Records posted before it (an execution's done records, which the
 * caller may leave to rs_plan_test while it makes a plan) are sent and
 * completed first: NCCL matches by issue order on the communicator, and a
 * batch issued before the collective on one rank and after it on another
 * would hang both. Buffers of its own, so that it never meets a batch;
 * after a failure that left the calls posted they are let go, not freed
 * (the device may still write them). */
static rs_status run_collective(nccl_transport *nt, const void *in,
                                size_t in_bytes, void *out, size_t out_bytes,
                                collective_calls calls, void *arg,
                                const char *what, int64_t timeout_ms,
                                rsi_err *err) {
  nccl_control *c = &nt->control;
  size_t out_at = ALIGN_UP(in_bytes), total = out_at + ALIGN_UP(out_bytes);
  if (total == 0) total = 1;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(nt->lanes[0].device);
  char *host = NULL, *dev = NULL;
  rs_status st = drain(nt, timeout_ms, err);
  if (st != RS_OK) {
    cudaSetDevice(prev);
    return st;
  }
  cudaError_t e = cudaMallocHost((void **)&host, total);
  if (e == cudaSuccess) e = cudaMalloc((void **)&dev, total);
  if (e != cudaSuccess) st = nccl_fail_cuda(err, e, "allocating buffers");
  if (st == RS_OK && in_bytes) {
    memcpy(host, in, in_bytes);
    e = cudaMemcpyAsync(dev, host, in_bytes, cudaMemcpyHostToDevice,
                        c->stream);
    if (e != cudaSuccess) st = nccl_fail_cuda(err, e, "cudaMemcpyAsync");
  }
  bool posted = false;
  if (st == RS_OK) {
    posted = true;
    ncclResult_t r = calls(arg, dev, dev + out_at, c->comm, c->stream);
    if (r != ncclSuccess && r != ncclInProgress)
      st = nccl_fail_nccl(err, r, c->comm, what);
  }
  if (st == RS_OK) st = nccl_settle(c->comm, &nt->base, timeout_ms, what, err);
  if (st == RS_OK) {
    e = out_bytes ? cudaMemcpyAsync(host + out_at, dev + out_at, out_bytes,
                                    cudaMemcpyDeviceToHost, c->stream)
                  : cudaSuccess;
    if (e == cudaSuccess) e = cudaEventRecord(c->done, c->stream);
    if (e != cudaSuccess) st = nccl_fail_cuda(err, e, "cudaMemcpyAsync");
  }
  int64_t since = rsi_now_ms();
  while (st == RS_OK) {
    e = cudaEventQuery(c->done);
    if (e == cudaSuccess) break;
    ncclResult_t r = nccl_state(c->comm);
    if (e != cudaErrorNotReady)
      st = nccl_fail_cuda(err, e, "the control collective (cudaEventQuery)");
    else if (r != ncclSuccess && r != ncclInProgress)
      st = nccl_fail_nccl(err, r, c->comm, what);
    else if (rsi_transport_aborted(&nt->base))
      st = RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "rank %d: %s was given up: the context was aborted "
                    "(rs_context_abort)",
                    nt->rank, what);
    else if (rsi_now_ms() - since >= timeout_ms)
      st = RSI_FAIL(err, RS_ERR_TIMEOUT,
                    "rank %d: %s over %d ranks did not complete within "
                    "%lld ms (a rank did not call, or is gone)",
                    nt->rank, what, nt->world, (long long)timeout_ms);
    else
      rsi_pause();
  }
  if (st == RS_OK && out_bytes) memcpy(out, host + out_at, out_bytes);
  if (st == RS_OK || !posted) {
    if (host) cudaFreeHost(host);
    if (dev) cudaFree(dev);
  }
  cudaSetDevice(prev);
  return st;
}

static ncclResult_t allgather_calls(void *arg, const char *in, char *out,
                                    ncclComm_t comm, cudaStream_t stream) {
  return ncclAllGather(in, out, *(const size_t *)arg, ncclUint8, comm,
                       stream);
}

rs_status nccl_control_allgather(nccl_transport *nt, const void *mine,
                                 size_t bytes, void *all, int64_t timeout_ms,
                                 rsi_err *err) {
  return run_collective(nt, mine, bytes, all, (size_t)nt->world * bytes,
                        allgather_calls, &bytes, "ncclAllGather", timeout_ms,
                        err);
}

static rs_status control_allgatherv(rsi_transport *t, const void *mine,
                                    size_t bytes, void **all, size_t *counts,
                                    int64_t timeout_ms, rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  *all = NULL;
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  size_t world = (size_t)nt->world;
  uint64_t len = bytes, *lens = malloc(world * sizeof *lens);
  if (!lens) return RSI_NOMEM(err);
  rs_status st =
      nccl_control_allgather(nt, &len, sizeof len, lens, timeout_ms, err);
  size_t most = 1;
  for (size_t r = 0; st == RS_OK && r < world; r++)
    if (lens[r] > most) most = (size_t)lens[r];
  char *padded = NULL, *slab = NULL, *packed = NULL;
  if (st == RS_OK) {
    padded = calloc(1, most);
    slab = malloc(world * most);
    if (!padded || !slab) st = RSI_NOMEM(err);
  }
  if (st == RS_OK) {
    memcpy(padded, mine, bytes);
    st = nccl_control_allgather(nt, padded, most, slab, timeout_ms, err);
  }
  size_t sum = 0;
  for (size_t r = 0; st == RS_OK && r < world; r++) sum += (size_t)lens[r];
  if (st == RS_OK && !(packed = malloc(sum ? sum : 1))) st = RSI_NOMEM(err);
  for (size_t r = 0, at = 0; st == RS_OK && r < world; r++) {
    memcpy(packed + at, slab + r * most, (size_t)lens[r]);
    counts[r] = (size_t)lens[r];
    at += (size_t)lens[r];
  }
  free(padded);
  free(slab);
  free(lens);
  if (st == RS_OK) *all = packed;
  return st;
}

/* Counts of an all-to-all: one uint64 for each rank, each way. */
static ncclResult_t count_calls(void *arg, const char *in, char *out,
                                ncclComm_t comm, cudaStream_t stream) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  (void)arg;
  return ncclAlltoAll(in, out, 1, ncclUint64, comm, stream);
#else
  int world = *(const int *)arg;
  ncclResult_t r = ncclGroupStart();
  for (int q = 0; q < world && r == ncclSuccess; q++) {
    r = ncclSend(in + (size_t)q * 8, 1, ncclUint64, q, comm, stream);
    if (r == ncclSuccess)
      r = ncclRecv(out + (size_t)q * 8, 1, ncclUint64, q, comm, stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return r == ncclSuccess ? end : r;
#endif
}

/* The bytes of an all-to-all between ranks other than this one, each
 * pair that has any, in one group: NCCL connects only the pairs that
 * exchange something. */
typedef struct exchange {
  int me, world;
  const size_t *send_counts, *send_at, *recv_counts, *recv_at;
} exchange;

static ncclResult_t exchange_calls(void *arg, const char *in, char *out,
                                   ncclComm_t comm, cudaStream_t stream) {
  const exchange *x = arg;
  ncclResult_t r = ncclGroupStart();
  for (int q = 0; q < x->world && r == ncclSuccess; q++) {
    if (q == x->me) continue;
    if (x->send_counts[q])
      r = ncclSend(in + x->send_at[q], x->send_counts[q], ncclUint8, q, comm,
                   stream);
    if (r == ncclSuccess && x->recv_counts[q])
      r = ncclRecv(out + x->recv_at[q], x->recv_counts[q], ncclUint8, q,
                   comm, stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return r == ncclSuccess ? end : r;
}

/* Two blocking collectives on the control communicator: the counts (an
 * all-to-all of one word each), then the bytes between the pairs that
 * have any; what a rank gives itself is copied on the host. */
static rs_status control_alltoallv(rsi_transport *t, const void *send,
                                   const size_t *send_counts, void **recv,
                                   size_t *recv_counts, int64_t timeout_ms,
                                   rsi_err *err) {
  nccl_transport *nt = nccl_of(t);
  *recv = NULL;
  if (nt->aborted)
    return RSI_FAIL(err, RS_ERR_TRANSPORT,
                    "the context's NCCL communicators were aborted");
  int world = nt->world, me = nt->rank;
  size_t n = (size_t)world;
  uint64_t *words = calloc(2 * n, sizeof *words);
  size_t *send_at = malloc(n * sizeof *send_at);
  size_t *recv_at = malloc(n * sizeof *recv_at);
  char *packed = NULL;
  rs_status st = words && send_at && recv_at ? RS_OK : RSI_NOMEM(err);
  for (size_t q = 0; st == RS_OK && q < n; q++) words[q] = send_counts[q];
  if (st == RS_OK)
    st = run_collective(nt, words, n * sizeof *words, words + n,
                        n * sizeof *words, count_calls, &world,
                        "the counts of an all-to-all (ncclAlltoAll)",
                        timeout_ms, err);
  size_t sent = 0, got = 0; /* between this rank and the others */
  for (size_t q = 0, at = 0; st == RS_OK && q < n; q++) {
    recv_counts[q] = (size_t)words[n + q];
    send_at[q] = at;
    at += send_counts[q];
    recv_at[q] = got;
    got += recv_counts[q];
  }
  if (st == RS_OK && recv_counts[me] != send_counts[me])
    st = RSI_FAIL(err, RS_ERR_TRANSPORT,
                  "rank %d: the all-to-all's counts came back altered "
                  "(%zu bytes to itself, %zu from itself)",
                  me, send_counts[me], recv_counts[me]);
  for (size_t q = 0; st == RS_OK && q < n; q++)
    if (q != (size_t)me) sent += send_counts[q];
  if (st == RS_OK && !(packed = malloc(got ? got : 1))) st = RSI_NOMEM(err);
  if (st == RS_OK && (sent || got - recv_counts[me])) {
    /* The device gets this rank's whole send buffer and lands every
     * receive in place; what it gives itself is copied after. */
    exchange x = {me, world, send_counts, send_at, recv_counts, recv_at};
    st = run_collective(nt, send, send_at[n - 1] + send_counts[n - 1],
                        packed, got, exchange_calls, &x,
                        "an all-to-all (ncclSend, ncclRecv)", timeout_ms,
                        err);
  }
  if (st == RS_OK && recv_counts[me])
    memcpy(packed + recv_at[me], (const char *)send + send_at[me],
           recv_counts[me]);
  if (st == RS_OK) {
    *recv = packed;
    packed = NULL;
  }
  free(packed);
  free(words);
  free(send_at);
  free(recv_at);
  return st;
}

const rsi_control_ops nccl_control_ops = {
    .send = control_send,
    .recv = control_recv,
    .test = control_test,
    .pending = control_pending,
    .notify = control_notify,
    .poll_notice = control_poll_notice,
    .allgatherv = control_allgatherv,
    .alltoallv = control_alltoallv,
};
