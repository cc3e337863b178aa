/* SPDX-License-Identifier: Apache-2.0 */
/* The main job of the MPI benches (bench_mpi_refit, bench_mpi_fp8): eight
 * processes; ranks 0..3 are trainers holding Qwen3-32B decoder layers in
 * bf16 as TP2 x DP2 (rank = dp*2 + tp), ranks 4..7 inference engines, also
 * TP2 x DP2, holding vLLM-style fused buffers (q, k, v rows one after the
 * other = qkv_proj; gate then up = gate_up_proj). Column-parallel (dim 0):
 * q/k/v/gate/up; row-parallel (dim 1): o/down; norms replicated.
 *
 * The tensors, their shards' places in every rank's buffers (bf16 source
 * and destination; fp8 values and their 128 x 128 block scales for an fp8
 * engine), and the gather that the gather-and-broadcast baselines start
 * with. Include after <mpi.h> and bench_common.h. */
#ifndef RESHARD_BENCH_MAIN_JOB_H
#define RESHARD_BENCH_MAIN_JOB_H

#include <stdbool.h>

enum { TRAIN = 4, WORLD = 8, TP = 2, HIDDEN = 5120, INTER = 25600 };
enum { Q_OUT = 8192, KV_OUT = 1024, HEAD_DIM = 128, MAX_T = 256 };
enum { BLOCK = 128 }; /* fp8 scale blocks: BLOCK x BLOCK elements */
#define BUCKET_BYTES ((size_t)512 << 20) /* the baselines' buckets */

typedef struct tensor {
  char name[96];
  char scale_name[112]; /* name + "_scale_inv" */
  bool linear;          /* a linear weight: fp8 with scales in an fp8 engine */
  int ndim;
  int64_t shape[2];
  int64_t scale_shape[2];
  int split;            /* TP-sharded dim, -1 replicated */
  int64_t elems;        /* whole tensor */
  int64_t bytes;        /* whole tensor, bf16 */
  int64_t bcast_bytes;  /* whole tensor in an fp8 engine: values + scales of
                           a linear weight, else bf16 */
  int64_t src_off;      /* trainer buffer (bf16) */
  int64_t dst_off;      /* inference buffer, bf16 */
  int64_t val_off;      /* inference values buffer of an fp8 engine */
  int64_t scale_off;    /* inference scales buffer of an fp8 engine */
} tensor;

static tensor T[MAX_T];
static int NT;
static int64_t SRC_BYTES, DST_BYTES, VAL_BYTES, SCALE_BYTES;
static int me;

static inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Bytes of tensor t's shard on an inference rank of an fp8 engine: values
 * (fp8 for a linear weight, bf16 for a norm) and scales. */
static inline int64_t shard_value_bytes(const tensor *t) {
  return (t->linear ? t->elems : t->bytes) / (t->split < 0 ? 1 : TP);
}

static inline int64_t shard_scale_bytes(const tensor *t) {
  if (!t->linear) return 0;
  return 4 * t->scale_shape[0] * t->scale_shape[1] / (t->split < 0 ? 1 : TP);
}

static inline void add_tensor(const char *name, bool linear, int split,
                              int ndim, int64_t d0, int64_t d1) {
  tensor *t = &T[NT++];
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->scale_name, sizeof t->scale_name, "%s_scale_inv", name);
  t->linear = linear;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->scale_shape[0] = div_up(d0, BLOCK);
  t->scale_shape[1] = div_up(d1, BLOCK);
  t->split = split;
  t->elems = d0 * (ndim > 1 ? d1 : 1);
  t->bytes = 2 * t->elems;
  int64_t blocks = t->scale_shape[0] * t->scale_shape[1];
  t->bcast_bytes = linear ? t->elems + 4 * blocks : t->bytes;
  int ways = split < 0 ? 1 : TP;
  t->src_off = SRC_BYTES;
  t->dst_off = DST_BYTES;
  t->val_off = VAL_BYTES;
  t->scale_off = SCALE_BYTES;
  SRC_BYTES += t->bytes / ways;
  DST_BYTES += t->bytes / ways;
  VAL_BYTES += shard_value_bytes(t);
  SCALE_BYTES += shard_scale_bytes(t);
}

static inline void build_model(int layers) {
  for (int l = 0; l < layers; l++) {
    char f[96];
#define T2(name, split, d0, d1)                                      \
  snprintf(f, sizeof f, "model.layers.%d.%s", l, name),              \
      add_tensor(f, true, split, 2, d0, d1)
#define T1(name, d0)                                                 \
  snprintf(f, sizeof f, "model.layers.%d.%s", l, name),              \
      add_tensor(f, false, -1, 1, d0, 1)
    T1("input_layernorm.weight", HIDDEN);
    T2("self_attn.q_proj.weight", 0, Q_OUT, HIDDEN);
    T2("self_attn.k_proj.weight", 0, KV_OUT, HIDDEN);
    T2("self_attn.v_proj.weight", 0, KV_OUT, HIDDEN);
    T2("self_attn.o_proj.weight", 1, HIDDEN, Q_OUT);
    T1("self_attn.q_norm.weight", HEAD_DIM);
    T1("self_attn.k_norm.weight", HEAD_DIM);
    T1("post_attention_layernorm.weight", HIDDEN);
    T2("mlp.gate_proj.weight", 0, INTER, HIDDEN);
    T2("mlp.up_proj.weight", 0, INTER, HIDDEN);
    T2("mlp.down_proj.weight", 1, HIDDEN, INTER);
#undef T1
#undef T2
  }
}

/* The box of a tensor of @p shape, sharded as @p t, on TP rank @p tp. */
static inline void tp_box(const tensor *t, const int64_t *shape, int tp,
                          int64_t *off, int64_t *ext) {
  int64_t mesh[1] = {TP}, coord[1] = {tp};
  int place[1] = {t->split < 0 ? RS_REPLICATE : t->split};
  off[0] = off[1] = 0;
  ext[0] = ext[1] = 1;
  rs_dtensor_local_box(t->ndim, shape, 1, mesh, place, coord, off, ext);
}

/* The box of tensor t on TP rank @p tp, and of its scales. */
static inline void local_box(const tensor *t, int tp, int64_t *off,
                             int64_t *ext) {
  tp_box(t, t->shape, tp, off, ext);
}

static inline void scale_box(const tensor *t, int tp, int64_t *off,
                             int64_t *ext) {
  tp_box(t, t->scale_shape, tp, off, ext);
}

/* A trainer of TP rank @p tp fills its buffer with @p value's elements. */
static inline void fill_source(bench_value_fn value, char *buf, int tp) {
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2], ext[2];
    local_box(t, tp, off, ext);
    bench_fill_box_with(value, (uint16_t *)(buf + t->src_off), i, t->ndim,
                        t->shape, off, ext);
  }
}

/* Rank 0 assembles tensor t whole (bf16) at `whole` from its shard and
 * rank 1's; rank 1 sends its shard; other ranks do nothing. */
static inline void gather_tensor(const tensor *t, const char *src,
                                 char *whole, char *scratch) {
  int64_t local = t->split < 0 ? t->bytes : t->bytes / TP;
  if (t->split < 0) {
    if (me == 0) memcpy(whole, src + t->src_off, (size_t)t->bytes);
    return;
  }
  if (me == 1) {
    MPI_Send(src + t->src_off, (int)local, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    return;
  }
  if (t->split == 0) { /* rows: the halves are the two ends */
    memcpy(whole, src + t->src_off, (size_t)local);
    MPI_Recv(whole + local, (int)local, MPI_BYTE, 1, 7, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return;
  }
  /* columns: interleave the two halves row by row */
  MPI_Recv(scratch, (int)local, MPI_BYTE, 1, 7, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  int64_t rows = t->shape[0], half = t->shape[1] / TP * 2;
  for (int64_t r = 0; r < rows; r++) {
    memcpy(whole + r * 2 * half, src + t->src_off + r * half, (size_t)half);
    memcpy(whole + r * 2 * half + half, scratch + r * half, (size_t)half);
  }
}

/* One past the last tensor of the bucket that starts at @p first: whole
 * tensors up to BUCKET_BYTES of bf16, at least one. */
static inline int bucket_end(int first) {
  int last = first;
  size_t bytes = 0;
  while (last < NT &&
         (last == first || bytes + (size_t)T[last].bytes <= BUCKET_BYTES))
    bytes += (size_t)T[last++].bytes;
  return last;
}

#endif
