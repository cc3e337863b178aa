/* The CUDA copy engine of the NCCL transport: staging in device memory,
 * and every batch of copies as one kernel launch (pack.cu) over a table of
 * pieces (pieces.h) that travels to the device ahead of the launch on the
 * same stream. Nothing here waits for the device, except to reuse a
 * region of the pinned table ring whose upload has not completed yet. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_tp.h"

#define TABLE_ALIGN(x) (((x) + 255) / 256 * 256)
#define TABLE_MIN_BYTES ((size_t)256 * 1024)

static nccl_transport *owner(rsi_engine *e) {
  return (nccl_transport *)((char *)e - offsetof(nccl_transport, engine));
}

static rs_status cuda_alloc(rsi_engine *e, int me, size_t bytes, void **out,
                            rsi_err *err) {
  nccl_lane *lane = nccl_lane_of(owner(e), me);
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(lane->device);
  cudaError_t c = cudaMalloc(out, bytes ? bytes : 1);
  cudaSetDevice(prev);
  if (c == cudaSuccess) return RS_OK;
  *out = NULL;
  cudaGetLastError(); /* not sticky: clear it */
  if (c == cudaErrorMemoryAllocation)
    return RSI_FAIL(err, RS_ERR_NO_MEMORY,
                    "device %d: no room for %zu bytes of staging (lower "
                    "RS_PARAM_STAGING_BYTES)",
                    lane->device, bytes);
  return nccl_fail_cuda(err, c, "cudaMalloc (staging)");
}

static void cuda_release(rsi_engine *e, void *p) {
  (void)e;
  if (p) cudaFree(p);
}

static void free_ring(char *host, char *dev) {
  if (host) cudaFreeHost(host);
  if (dev) cudaFree(dev);
}

void nccl_tables_free(nccl_tables *t) {
  for (int i = 0; i < NCCL_TABLE_SLOTS; i++)
    if (t->slot[i].done) cudaEventDestroy(t->slot[i].done);
  free_ring(t->host, t->dev);
  for (int i = 0; i < t->nold; i++) free_ring(t->old[i].host, t->old[i].dev);
  rsi_pieces_free(&t->pieces);
  memset(t, 0, sizeof *t);
}

/* Whether the upload of slot i is over (waiting for it when `wait`). */
static bool slot_free(nccl_tables *t, int i, bool wait) {
  if (!t->slot[i].live) return true;
  cudaError_t e = wait ? cudaEventSynchronize(t->slot[i].done)
                       : cudaEventQuery(t->slot[i].done);
  if (e == cudaErrorNotReady) return false;
  t->slot[i].live = false; /* done, or failed: the stream reports that */
  return true;
}

/* A new ring of at least `bytes`; the current one, whose tables may still
 * be in flight, is kept until the lane closes. */
static rs_status new_ring(nccl_tables *t, size_t bytes, rsi_err *err) {
  if (t->host) {
    t->old[t->nold].host = t->host;
    t->old[t->nold].dev = t->dev;
    t->nold++;
  }
  for (int i = 0; i < NCCL_TABLE_SLOTS; i++) t->slot[i].live = false;
  t->host = t->dev = NULL;
  t->cap = t->head = 0;
  size_t cap = bytes * 2 > TABLE_MIN_BYTES ? bytes * 2 : TABLE_MIN_BYTES;
  cudaError_t e = cudaMallocHost((void **)&t->host, cap);
  if (e == cudaSuccess) e = cudaMalloc((void **)&t->dev, cap);
  if (e != cudaSuccess) {
    free_ring(t->host, NULL);
    t->host = NULL;
    cudaGetLastError();
    return nccl_fail_cuda(err, e, "allocating piece tables");
  }
  t->cap = cap;
  return RS_OK;
}

/* Whether [lo, hi) and slot `next` of the ring are free to write; waits
 * for them when `wait`. */
static bool region_free(nccl_tables *t, size_t lo, size_t hi, bool wait) {
  for (int i = 0; i < NCCL_TABLE_SLOTS; i++)
    if (t->slot[i].live && t->slot[i].lo < hi && lo < t->slot[i].hi &&
        !slot_free(t, i, wait))
      return false;
  return slot_free(t, t->next, wait);
}

/* Room for `bytes` of table in the ring: *at is its offset in both the
 * pinned and the device ring; *slot the slot whose event marks the upload
 * done. */
static rs_status table_room(nccl_tables *t, cudaStream_t stream,
                            size_t bytes, size_t *at, int *slot,
                            rsi_err *err) {
  bytes = TABLE_ALIGN(bytes);
  if (bytes > t->cap) {
    if (t->nold == NCCL_TABLE_OLD) { /* rare: free the old rings, once
                                        nothing on the lane reads them */
      cudaStreamSynchronize(stream);
      for (int i = 0; i < t->nold; i++)
        free_ring(t->old[i].host, t->old[i].dev);
      t->nold = 0;
    }
    RSI_TRY(new_ring(t, bytes, err));
  }
  if (t->head + bytes > t->cap) t->head = 0;
  size_t lo = t->head, hi = lo + bytes;
  if (!region_free(t, lo, hi, false)) {
    if (t->nold < NCCL_TABLE_OLD && t->cap * 2 <= NCCL_TABLE_MAX_BYTES) {
      RSI_TRY(new_ring(t, t->cap, err)); /* twice as large */
      lo = 0;
      hi = bytes;
    } else {
      region_free(t, lo, hi, true);
    }
  }
  int s = t->next;
  if (!t->slot[s].done) {
    cudaError_t e =
        cudaEventCreateWithFlags(&t->slot[s].done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      t->slot[s].done = NULL;
      return nccl_fail_cuda(err, e, "cudaEventCreate");
    }
  }
  t->slot[s].lo = lo;
  t->slot[s].hi = hi;
  t->next = (s + 1) % NCCL_TABLE_SLOTS;
  t->head = hi;
  *at = lo;
  *slot = s;
  return RS_OK;
}

static nccl_lane *lane_of_stream(nccl_transport *nt, cudaStream_t s) {
  for (int i = 0; i < nt->nlanes; i++)
    if (nt->lanes[i].stream == s) return &nt->lanes[i];
  return NULL;
}

static rs_status cuda_copy(rsi_engine *e, const rsi_copy *copies, int64_t n,
                           void *queue, rsi_err *err) {
  nccl_transport *nt = owner(e);
  nccl_lane *lane = lane_of_stream(nt, (cudaStream_t)queue);
  if (!lane)
    return RSI_FAIL(err, RS_ERR_INTERNAL,
                    "CUDA engine: copies on a stream of no lane");
  nccl_tables *t = &lane->tables;
  RSI_TRY(rsi_pieces_build(copies, n, &t->pieces, err));
  if (!t->pieces.items) return RS_OK;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(lane->device);
  size_t bytes = (size_t)t->pieces.n * sizeof *t->pieces.v, at = 0;
  int slot = 0;
  rs_status st = table_room(t, lane->stream, bytes, &at, &slot, err);
  if (st == RS_OK) {
    memcpy(t->host + at, t->pieces.v, bytes);
    cudaError_t c = cudaMemcpyAsync(t->dev + at, t->host + at, bytes,
                                    cudaMemcpyHostToDevice, lane->stream);
    if (c == cudaSuccess) c = cudaEventRecord(t->slot[slot].done, lane->stream);
    if (c == cudaSuccess) {
      t->slot[slot].live = true;
      c = (cudaError_t)rsi_cuda_copy_launch((const rsi_piece *)(t->dev + at),
                                            t->pieces.n, t->pieces.items,
                                            lane->stream);
    }
    if (c != cudaSuccess) st = nccl_fail_cuda(err, c, "pack kernel launch");
  }
  cudaSetDevice(prev);
  return st;
}

static rs_status cuda_query(rsi_engine *e, void *queue, bool *done,
                            rsi_err *err) {
  nccl_transport *nt = owner(e);
  *done = false;
  for (int i = 0; i < nt->nlanes; i++) {
    ncclResult_t r = nccl_state(nt->lanes[i].comm);
    if (r != ncclSuccess && r != ncclInProgress)
      return nccl_fail_nccl(err, r, nt->lanes[i].comm,
                            "NCCL (asynchronous error)");
  }
  cudaError_t c = cudaStreamQuery((cudaStream_t)queue);
  if (c == cudaErrorNotReady) return RS_OK;
  if (c != cudaSuccess) return nccl_fail_cuda(err, c, "the stream given");
  *done = true;
  return RS_OK;
}

static void cuda_destroy(rsi_engine *e) { (void)e; /* the transport's */ }

static const rsi_engine_ops cuda_engine_ops = {
    .name = "cuda",
    .memory = RSI_MEMORY_CUDA,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .copy = cuda_copy,
    .query = cuda_query,
    .destroy = cuda_destroy,
};

void nccl_engine_init(nccl_transport *nt) {
  nt->engine.ops = &cuda_engine_ops;
  nt->base.engine = &nt->engine;
}
