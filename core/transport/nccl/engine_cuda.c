/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA copy engine of the NCCL transport: staging in device memory,
 * and every batch of copies as one kernel launch (pack.cu) over a table of
 * pieces (pieces.h) that travels to the device ahead of the launch on the
 * same stream; a batch with conversions adds the launches of
 * convert_pack.cu over its conversion tables (convert_pieces.h), uploaded
 * with the plain one. Nothing here waits for the device, except to reuse a
 * region of the pinned table ring whose upload has not completed yet. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "convert_pieces.h"
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

/* Where the parts of a batch's tables lie in its one upload: plain
 * pieces, cast pieces, block pieces, and the zeroed keys of split blocks
 * (the scratch of the block kernels: it lives as long as the tables, in
 * stream order). */
typedef struct batch_layout {
  size_t cast, blk, keys, bytes;
} batch_layout;

static void layout_batch(const rsi_pieces *p, batch_layout *l) {
  const rsi_conv_tables *c = p->conv;
  size_t at = TABLE_ALIGN((size_t)p->n * sizeof(rsi_piece));
  l->cast = at;
  if (c) at += TABLE_ALIGN((size_t)c->cast.n * sizeof(rsi_piece));
  l->blk = at;
  if (c) at += TABLE_ALIGN((size_t)c->nblk * sizeof(rsi_bpiece));
  l->keys = at;
  if (c) at += (size_t)c->keys * sizeof(uint32_t);
  l->bytes = at;
}

static void write_batch(const rsi_pieces *p, const batch_layout *l,
                        char *host) {
  const rsi_conv_tables *c = p->conv;
  if (p->n) memcpy(host, p->v, (size_t)p->n * sizeof(rsi_piece));
  if (!c) return;
  if (c->cast.n)
    memcpy(host + l->cast, c->cast.v, (size_t)c->cast.n * sizeof(rsi_piece));
  if (c->nblk)
    memcpy(host + l->blk, c->blk, (size_t)c->nblk * sizeof(rsi_bpiece));
  if (c->keys) memset(host + l->keys, 0, (size_t)c->keys * sizeof(uint32_t));
}

/* Every kernel of the batch whose tables are at dev, in stream order
 * after their upload; a cudaError_t and what failed. */
static cudaError_t launch_batch(const rsi_pieces *p, const batch_layout *l,
                                char *dev, cudaStream_t stream,
                                const char **what) {
  const rsi_conv_tables *c = p->conv;
  *what = "pack kernel launch";
  cudaError_t e = (cudaError_t)rsi_cuda_copy_launch(
      (const rsi_piece *)dev, p->n, p->items, stream);
  if (e != cudaSuccess || !c) return e;
  *what = "cast kernel launch";
  e = (cudaError_t)rsi_cuda_cast_launch((const rsi_piece *)(dev + l->cast),
                                        c->cast.n, c->cast.items, stream);
  if (e != cudaSuccess) return e;
  *what = "block quantize kernel launch";
  return (cudaError_t)rsi_cuda_blocks_launch(
      (const rsi_bpiece *)(dev + l->blk), c->nblk, c->jobs, c->nsplit,
      c->split_jobs, c->keys ? (uint32_t *)(dev + l->keys) : NULL, stream);
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
  RSI_TRY(rsi_convert_build(copies, n, &t->pieces, err));
  const rsi_conv_tables *conv = t->pieces.conv;
  if (!t->pieces.items && (!conv || (!conv->cast.items && !conv->jobs)))
    return RS_OK;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(lane->device);
  batch_layout l;
  layout_batch(&t->pieces, &l);
  size_t at = 0;
  int slot = 0;
  rs_status st = table_room(t, lane->stream, l.bytes, &at, &slot, err);
  if (st == RS_OK) {
    write_batch(&t->pieces, &l, t->host + at);
    const char *what = "piece table upload";
    cudaError_t c = cudaMemcpyAsync(t->dev + at, t->host + at, l.bytes,
                                    cudaMemcpyHostToDevice, lane->stream);
    if (c == cudaSuccess) c = cudaEventRecord(t->slot[slot].done, lane->stream);
    if (c == cudaSuccess) {
      t->slot[slot].live = true;
      c = launch_batch(&t->pieces, &l, t->dev + at, lane->stream, &what);
    }
    if (c != cudaSuccess) st = nccl_fail_cuda(err, c, what);
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
