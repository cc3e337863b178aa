/* SPDX-License-Identifier: Apache-2.0 */
/* bench_colocated: a colocated weight sync (trainer and inference engine on
 * the same 8 MPI processes, as verl, OpenRLHF and NeMo RL run RL), two ways
 * in one run.
 *
 * Source, as FSDP2 holds it: every tensor of the Qwen3-32B decoder layers,
 * norms included, Shard(0) over all 8 ranks (torch.chunk semantics), each
 * rank's shards dense one after the other in one host buffer.
 * Destination, as vLLM holds it: TP4 x DP2 (mesh [DP, TP], rank = dp*4 + tp)
 * in a second host buffer of the same process, with the fused buffers laid
 * out by declaration order (qkv_proj = q, k, v rows one after the other;
 * gate_up_proj = gate then up). Column-parallel (dim 0): q/k/v/gate/up;
 * row-parallel (dim 1): o/down; norms replicated.
 *
 *  reshard:   every rank describes only its own shards, rs_layout_allgather,
 *             one plan, rs_plan_execute.
 *  baseline:  all-gather-then-slice, as colocated stacks do it: for each
 *             tensor, MPI_Allgatherv of the full tensor on every rank (the
 *             FSDP all-gather), then each rank copies its own slice into its
 *             fused destination buffer.
 *
 * Both are verified bit-exact against a hash of (tensor, global index), with
 * the destination poisoned before each run; times are the slowest rank's.
 *
 * Usage: mpirun -np 8 bench_colocated [layers=2] [repetitions=3] */
#include <mpi.h> /* before bench_common.h: its MPI helpers need it */

#include "bench_common.h"

#include <stdbool.h>

enum { WORLD = 8, DP = 2, TP = 4, HIDDEN = 5120, INTER = 25600 };
enum { Q_OUT = 8192, KV_OUT = 1024, HEAD_DIM = 128, MAX_T = 256 };
enum { TENSORS_PER_LAYER = 11 };

typedef struct tensor {
  char name[96];
  int ndim;
  int64_t shape[2];
  int dst_split;                 /* TP-sharded dim, -1 replicated */
  int64_t bytes;                 /* whole tensor */
  int64_t src_off[2], src_ext[2]; /* this rank's FSDP box */
  int64_t dst_off[2], dst_ext[2]; /* this rank's vLLM box */
  int64_t src_at, dst_at;        /* byte offsets in this rank's buffers */
  int64_t src_bytes, dst_bytes;  /* this rank's shard sizes */
} tensor;

static tensor T[MAX_T];
static int NT;
static int64_t SRC_BYTES, DST_BYTES; /* this rank's buffers */
static int64_t MAX_TENSOR_BYTES;
static int me;

static int64_t box_bytes(int ndim, const int64_t *ext) {
  return 2 * ext[0] * (ndim > 1 ? ext[1] : 1);
}

/* The FSDP box of tensor t on rank r: Shard(0) over the 8 ranks. */
static void src_box(const tensor *t, int r, int64_t *off, int64_t *ext) {
  int64_t mesh[1] = {WORLD}, coord[1] = {r};
  int place[1] = {0};
  rs_dtensor_local_box(t->ndim, t->shape, 1, mesh, place, coord, off, ext);
}

/* The vLLM box of tensor t on rank r: Replicate over DP, Shard over TP. */
static void dst_box(const tensor *t, int r, int64_t *off, int64_t *ext) {
  int64_t mesh[2] = {DP, TP}, coord[2] = {r / TP, r % TP};
  int place[2] = {RS_REPLICATE, t->dst_split < 0 ? RS_REPLICATE : t->dst_split};
  rs_dtensor_local_box(t->ndim, t->shape, 2, mesh, place, coord, off, ext);
}

static void add(const char *name, int split, int ndim, int64_t d0, int64_t d1) {
  tensor *t = &T[NT++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->dst_split = split;
  t->bytes = 2 * d0 * (ndim > 1 ? d1 : 1);
  if (t->bytes > MAX_TENSOR_BYTES) MAX_TENSOR_BYTES = t->bytes;
  t->src_off[1] = t->dst_off[1] = 0;
  t->src_ext[1] = t->dst_ext[1] = 1;
  src_box(t, me, t->src_off, t->src_ext);
  dst_box(t, me, t->dst_off, t->dst_ext);
  t->src_bytes = box_bytes(ndim, t->src_ext);
  t->dst_bytes = box_bytes(ndim, t->dst_ext);
  t->src_at = SRC_BYTES;
  t->dst_at = DST_BYTES;
  SRC_BYTES += t->src_bytes;
  DST_BYTES += t->dst_bytes;
}

/* In vLLM's order, so the destination buffer holds qkv_proj and
 * gate_up_proj fused. */
static void build_model(int layers) {
  for (int l = 0; l < layers; l++) {
    char f[128];
#define T2(name, split, d0, d1) \
  snprintf(f, sizeof f, "model.layers.%d.%s", l, name), add(f, split, 2, d0, d1)
#define T1(name, d0) \
  snprintf(f, sizeof f, "model.layers.%d.%s", l, name), add(f, -1, 1, d0, 1)
    T2("self_attn.q_proj.weight", 0, Q_OUT, HIDDEN);
    T2("self_attn.k_proj.weight", 0, KV_OUT, HIDDEN);
    T2("self_attn.v_proj.weight", 0, KV_OUT, HIDDEN);
    T2("self_attn.o_proj.weight", 1, HIDDEN, Q_OUT);
    T2("mlp.gate_proj.weight", 0, INTER, HIDDEN);
    T2("mlp.up_proj.weight", 0, INTER, HIDDEN);
    T2("mlp.down_proj.weight", 1, HIDDEN, INTER);
    T1("input_layernorm.weight", HIDDEN);
    T1("self_attn.q_norm.weight", HEAD_DIM);
    T1("self_attn.k_norm.weight", HEAD_DIM);
    T1("post_attention_layernorm.weight", HIDDEN);
#undef T1
#undef T2
  }
}

static void fill_source(char *buf) {
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    bench_fill_box((uint16_t *)(buf + t->src_at), i, t->ndim, t->shape,
                   t->src_off, t->src_ext);
  }
}

static int64_t count_wrong(const char *buf) {
  int64_t wrong = 0;
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    wrong += bench_wrong_in_box((const uint16_t *)(buf + t->dst_at), i,
                                t->ndim, t->shape, t->dst_off, t->dst_ext);
  }
  return wrong;
}

/* ---- all-gather-then-slice ---------------------------------------------- */

/* Byte counts and displacements of every rank's Shard(0) chunk of t. */
static void chunk_counts(const tensor *t, int *counts, int *displs) {
  int64_t row = t->bytes / t->shape[0];
  for (int r = 0; r < WORLD; r++) {
    int64_t off[2] = {0, 0}, ext[2] = {0, 1};
    src_box(t, r, off, ext);
    counts[r] = (int)(ext[0] * row);
    displs[r] = (int)(off[0] * row);
  }
}

/* Copy this rank's box of t out of the whole row-major tensor. */
static void copy_out(const tensor *t, const char *whole, char *dst) {
  int64_t cols = t->ndim > 1 ? t->shape[1] : 1;
  int64_t ecols = t->ndim > 1 ? t->dst_ext[1] : 1;
  int64_t ocol = t->ndim > 1 ? t->dst_off[1] : 0;
  if (ecols == cols) {
    memcpy(dst + t->dst_at, whole + t->dst_off[0] * cols * 2,
           (size_t)t->dst_bytes);
    return;
  }
  for (int64_t r = 0; r < t->dst_ext[0]; r++)
    memcpy(dst + t->dst_at + r * ecols * 2,
           whole + ((t->dst_off[0] + r) * cols + ocol) * 2, (size_t)(ecols * 2));
}

static void allgather_slice(const char *src, char *dst, char *whole) {
  int counts[WORLD], displs[WORLD];
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    chunk_counts(t, counts, displs);
    MPI_Allgatherv(src + t->src_at, counts[me], MPI_BYTE, whole, counts,
                   displs, MPI_BYTE, MPI_COMM_WORLD);
    copy_out(t, whole, dst);
  }
}

/* ---- main --------------------------------------------------------------- */

typedef struct job {
  rs_context *ctx;
  rs_plan *plan;
  char *src, *dst, *whole;
} job;

static void run_reshard(void *arg) {
  job *j = arg;
  BENCH_CHECK(j->ctx, rs_plan_execute(j->plan));
}

static void run_baseline(void *arg) {
  job *j = arg;
  allgather_slice(j->src, j->dst, j->whole);
}

static int64_t wrong_in_dst(void *arg) {
  job *j = arg;
  return count_wrong(j->dst);
}

static int64_t sum_over_ranks(int64_t v) {
  int64_t all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

static const char *pass(bool ok) { return ok ? "PASS" : "FAIL"; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int layers = argc > 1 ? atoi(argv[1]) : 2;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  if (world != WORLD || layers < 1 || layers > MAX_T / TENSORS_PER_LAYER ||
      reps < 1) {
    if (me == 0)
      fprintf(stderr, "usage: mpirun -np %d bench_colocated [layers 1..%d] [reps]\n",
              WORLD, MAX_T / TENSORS_PER_LAYER);
    MPI_Finalize();
    return 2;
  }
  build_model(layers);
  job j = {0};
  j.src = bench_xmalloc((size_t)SRC_BYTES);
  j.dst = bench_xmalloc((size_t)DST_BYTES);
  j.whole = bench_xmalloc((size_t)MAX_TENSOR_BYTES);
  fill_source(j.src);

  /* The reshard: every rank describes only its own shards, both sides. */
  double t_plan = MPI_Wtime();
  rs_context *ctx = bench_mpi_context();
  j.ctx = ctx;
  rs_layout *src = NULL, *dst = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, &dst));
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    BENCH_CHECK(ctx, rs_layout_add_tensor(src, t->name, RS_DTYPE_BF16, t->ndim, t->shape));
    BENCH_CHECK(ctx, rs_layout_add_tensor(dst, t->name, RS_DTYPE_BF16, t->ndim, t->shape));
    if (t->src_bytes) /* torch.chunk may leave trailing shards empty */
      BENCH_CHECK(ctx, rs_layout_add_shard(src, t->name, me, t->src_off,
                                           t->src_ext, 0, t->src_at, NULL));
    if (t->dst_bytes)
      BENCH_CHECK(ctx, rs_layout_add_shard(dst, t->name, me, t->dst_off,
                                           t->dst_ext, 0, t->dst_at, NULL));
  }
  BENCH_CHECK(ctx, rs_layout_allgather(src));
  BENCH_CHECK(ctx, rs_layout_allgather(dst));
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &j.plan));
  t_plan = MPI_Wtime() - t_plan;
  BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_SRC, me, 0, j.src, (size_t)SRC_BYTES));
  BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_DST, me, 0, j.dst, (size_t)DST_BYTES));

  double *ts = bench_xcalloc((size_t)reps, sizeof *ts);
  double *tb = bench_xcalloc((size_t)reps, sizeof *tb);
  bench_mpi_poison_run_check("reshard", run_reshard, wrong_in_dst, &j, j.dst,
                             (size_t)DST_BYTES, ts, reps);
  bench_mpi_poison_run_check("all-gather-then-slice", run_baseline,
                             wrong_in_dst, &j, j.dst, (size_t)DST_BYTES, tb,
                             reps);

  int64_t rs_between = bench_stat_all(ctx, j.plan, RS_STAT_BYTES_SENT_INTRA) +
                       bench_stat_all(ctx, j.plan, RS_STAT_BYTES_SENT_INTER);
  int64_t rs_local = bench_stat_all(ctx, j.plan, RS_STAT_BYTES_LOCAL);
  int64_t rounds = bench_stat_all(ctx, j.plan, RS_STAT_ROUNDS);
  int64_t msgs = bench_stat_all(ctx, j.plan, RS_STAT_MESSAGES_SENT);
  /* An all-gather must bring every rank the chunks it lacks: whole minus
   * own chunk, summed over ranks. Locally, MPI copies each rank's own chunk
   * into the gathered tensor and the rank copies its slice out. */
  int64_t ag_between = 0, total = 0;
  for (int i = 0; i < NT; i++) total += T[i].bytes;
  for (int i = 0; i < NT; i++) {
    int counts[WORLD], displs[WORLD];
    chunk_counts(&T[i], counts, displs);
    for (int r = 0; r < WORLD; r++) ag_between += T[i].bytes - counts[r];
  }
  int64_t ag_local = sum_over_ranks(SRC_BYTES + DST_BYTES);
  int64_t landed = sum_over_ranks(DST_BYTES);

  if (me == 0) {
    double s_min = bench_min(ts, reps), s_med = bench_median(ts, reps);
    double b_min = bench_min(tb, reps), b_med = bench_median(tb, reps);
    int nd = 0;
    rs_context_get_domain(ctx, WORLD - 1, &nd);
    bench_print_machine("bench_colocated: colocated weight sync, FSDP -> vLLM on the same ranks");
    printf("model   : %d Qwen3-32B decoder layers, %d bf16 tensors, %.3f GB\n",
           layers, NT, (double)total / 1e9);
    printf("ranks   : %d processes, each trainer and engine; FSDP Shard(0) over 8 "
           "(norms sharded too) -> vLLM TP4 x DP2 (fused qkv_proj, gate_up_proj; "
           "norms replicated); %d domain(s)\n", WORLD, nd + 1);
    printf("plan    : %.3f s incl. layout exchange; %lld rounds, %lld messages\n",
           t_plan, (long long)rounds, (long long)msgs);
    printf("verify  : every destination element bit-exact after every run of both\n");
    printf("reshard : x %d, min %.3f s, median %.3f s\n", reps, s_min, s_med);
    printf("baseline: all-gather-then-slice (MPI_Allgatherv per tensor, copy out) "
           "x %d, min %.3f s, median %.3f s\n", reps, b_min, b_med);
    printf("landed  : %.3f GB in the destination buffers of all ranks\n",
           (double)landed / 1e9);

    char m[64], b[64], r[64];
    double byte_ratio = (double)ag_between / (double)(rs_between ? rs_between : 1);
    double speedup = b_min / s_min;
    bench_table_header();
    snprintf(m, sizeof m, "%.3f", (double)rs_between / 1e9);
    snprintf(b, sizeof b, "%.3f (ag+slice)", (double)ag_between / 1e9);
    snprintf(r, sizeof r, "%.2f", (double)rs_between / (double)ag_between);
    bench_table_row("bytes between processes [GB]", m, b, r);
    snprintf(m, sizeof m, "%.3f", (double)rs_local / 1e9);
    snprintf(b, sizeof b, "%.3f (ag+slice)", (double)ag_local / 1e9);
    snprintf(r, sizeof r, "%.2f", (double)rs_local / (double)ag_local);
    bench_table_row("bytes copied locally [GB]", m, b, r);
    snprintf(m, sizeof m, "%.3f", s_min);
    snprintf(b, sizeof b, "%.3f (ag+slice)", b_min);
    snprintf(r, sizeof r, "%.2f", s_min / b_min);
    bench_table_row("sync time min [s]", m, b, r);
    snprintf(m, sizeof m, "%.3f", s_med);
    snprintf(b, sizeof b, "%.3f (ag+slice)", b_med);
    snprintf(r, sizeof r, "%.2f", s_med / b_med);
    bench_table_row("sync time median [s]", m, b, r);
    snprintf(m, sizeof m, "%.2fx", byte_ratio);
    bench_table_row("fewer bytes between processes", m, "3.00x (target)",
                    pass(byte_ratio >= 3.0));
    snprintf(m, sizeof m, "%.2fx", speedup);
    bench_table_row("speedup over ag+slice (min)", m, "2.00x (target)",
                    pass(speedup >= 2.0));
  }
  free(ts);
  free(tb);
  rs_plan_destroy(j.plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  free(j.src);
  free(j.dst);
  free(j.whole);
  MPI_Finalize();
  return 0;
}
