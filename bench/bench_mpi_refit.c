/* bench_mpi_refit: a weight sync between MPI processes, two ways in one run.
 *
 * Ranks 0..3 are trainers holding Qwen3-32B decoder layers as TP2 x DP2
 * (mesh [DP, TP], rank = dp*2 + tp); ranks 4..7 are inference engines, also
 * TP2 x DP2, holding vLLM-style fused buffers (q, k, v rows one after the
 * other = qkv_proj; gate then up = gate_up_proj). Column-parallel (dim 0):
 * q/k/v/gate/up; row-parallel (dim 1): o/down; norms replicated.
 *
 *  reshard:   every rank describes only its own shards, rs_layout_allgather,
 *             one plan, rs_plan_execute.
 *  baseline:  gather-and-broadcast as RL frameworks run it: per bucket of
 *             whole tensors, the first trainer TP group gathers each full
 *             tensor on rank 0, rank 0 broadcasts the bucket to every
 *             inference rank, which copies out its own shard; the two steps
 *             are not overlapped.
 *
 * Both are verified bit-exact against a hash of (tensor, global index), with
 * the destination poisoned before each; times are the slowest rank's.
 *
 * With a third argument 1, the reshard also runs under a second plan made
 * with RS_PARAM_INTEGRITY=1 (every message checksummed), alternating with
 * the plain one, and the ratio on/off is printed against its 1.15x target.
 *
 * Usage: mpirun -np 8 bench_mpi_refit [layers=2] [repetitions=3] [integrity=0] */
#include <mpi.h> /* before bench_common.h: its MPI helpers need it */

#include "bench_common.h"

#include <reshard/reshard_mpi.h>
#include <stdbool.h>

enum { TRAIN = 4, WORLD = 8, TP = 2, HIDDEN = 5120, INTER = 25600 };
enum { Q_OUT = 8192, KV_OUT = 1024, HEAD_DIM = 128, MAX_T = 256 };
#define BUCKET_BYTES ((size_t)512 << 20)

typedef struct tensor {
  char name[96];
  int ndim;
  int64_t shape[2];
  int split;        /* TP-sharded dim, -1 replicated */
  int64_t src_off;  /* byte offset in every trainer rank's buffer */
  int64_t dst_off;  /* byte offset in every inference rank's buffer */
  int64_t bytes;    /* whole tensor */
} tensor;

static tensor T[MAX_T];
static int NT;
static int64_t SRC_BYTES, DST_BYTES;
static int me;

static void add(const char *fmt, int layer, int split, int ndim, int64_t d0,
                int64_t d1) {
  tensor *t = &T[NT++];
  snprintf(t->name, sizeof t->name, fmt, layer);
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->split = split;
  t->bytes = 2 * d0 * (ndim > 1 ? d1 : 1);
  int64_t local = split < 0 ? t->bytes : t->bytes / TP;
  t->src_off = SRC_BYTES;
  t->dst_off = DST_BYTES;
  SRC_BYTES += local;
  DST_BYTES += local;
}

static void build_model(int layers) {
  for (int l = 0; l < layers; l++) {
    const char *p = "model.layers.%d.";
    char f[128];
#define T2(name, split, d0, d1) \
  snprintf(f, sizeof f, "%s%s", p, name), add(f, l, split, 2, d0, d1)
#define T1(name, d0) snprintf(f, sizeof f, "%s%s", p, name), add(f, l, -1, 1, d0, 1)
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

/* The box tensor t has on TP rank tp. */
static void local_box(const tensor *t, int tp, int64_t *off, int64_t *ext) {
  int64_t mesh[1] = {TP}, coord[1] = {tp};
  int place[1] = {t->split < 0 ? RS_REPLICATE : t->split};
  rs_dtensor_local_box(t->ndim, t->shape, 1, mesh, place, coord, off, ext);
}

static void fill_source(char *buf, int tp) {
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2] = {0, 0}, ext[2] = {1, 1};
    local_box(t, tp, off, ext);
    bench_fill_box((uint16_t *)(buf + t->src_off), i, t->ndim, t->shape, off, ext);
  }
}

static int64_t count_wrong(const char *buf, int tp) {
  int64_t wrong = 0;
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2] = {0, 0}, ext[2] = {1, 1};
    local_box(t, tp, off, ext);
    wrong += bench_wrong_in_box((const uint16_t *)(buf + t->dst_off), i,
                                t->ndim, t->shape, off, ext);
  }
  return wrong;
}

/* ---- gather-and-broadcast ---------------------------------------------- */

/* Rank 0 assembles tensor t whole at `whole` from its shard and rank 1's. */
static void gather_tensor(const tensor *t, int i, const char *src, char *whole,
                          char *scratch) {
  (void)i;
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
  MPI_Recv(scratch, (int)local, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int64_t rows = t->shape[0], half = t->shape[1] / TP * 2;
  for (int64_t r = 0; r < rows; r++) {
    memcpy(whole + r * 2 * half, src + t->src_off + r * half, (size_t)half);
    memcpy(whole + r * 2 * half + half, scratch + r * half, (size_t)half);
  }
}

/* Inference rank: copy its shard of tensor t out of the whole tensor. */
static void copy_out(const tensor *t, const char *whole, char *dst, int tp) {
  int64_t off[2] = {0, 0}, ext[2] = {1, 1};
  local_box(t, tp, off, ext);
  if (t->split <= 0) {
    int64_t row = t->ndim > 1 ? t->shape[1] * 2 : 2;
    memcpy(dst + t->dst_off, whole + off[0] * row, (size_t)(ext[0] * row));
    return;
  }
  int64_t cols = t->shape[1];
  for (int64_t r = 0; r < ext[0]; r++)
    memcpy(dst + t->dst_off + r * ext[1] * 2, whole + (r * cols + off[1]) * 2,
           (size_t)(ext[1] * 2));
}

static void gather_broadcast(MPI_Comm bcast, const char *src, char *dst,
                             char *bucket, char *scratch) {
  bool in_bcast = me == 0 || me >= TRAIN;
  for (int first = 0; first < NT;) {
    int last = first;
    size_t bytes = 0;
    while (last < NT && (last == first || bytes + (size_t)T[last].bytes <= BUCKET_BYTES))
      bytes += (size_t)T[last++].bytes;
    if (me <= 1) { /* gather on the first TP group's rank 0 */
      size_t at = 0;
      for (int i = first; i < last; i++) {
        gather_tensor(&T[i], i, src, bucket + at, scratch);
        at += (size_t)T[i].bytes;
      }
    }
    if (in_bcast) MPI_Bcast(bucket, (int)bytes, MPI_BYTE, 0, bcast);
    if (me >= TRAIN) {
      size_t at = 0;
      for (int i = first; i < last; i++) {
        copy_out(&T[i], bucket + at, dst, (me - TRAIN) % TP);
        at += (size_t)T[i].bytes;
      }
    }
    first = last;
  }
}

/* ---- main --------------------------------------------------------------- */

typedef struct job {
  rs_context *ctx;
  rs_plan *plan;
  MPI_Comm bcast;
  char *src, *dst, *bucket, *scratch;
} job;

static void run_reshard(void *arg) {
  job *j = arg;
  BENCH_CHECK(j->ctx, rs_plan_execute(j->plan));
}

static void run_baseline(void *arg) {
  job *j = arg;
  gather_broadcast(j->bcast, j->src, j->dst, j->bucket, j->scratch);
}

static int64_t wrong_in_dst(void *arg) {
  job *j = arg;
  return count_wrong(j->dst, (me - TRAIN) % TP);
}

static void poison_and_check(job *j, void (*run)(void *), const char *what,
                             double *seconds, int reps) {
  bench_mpi_poison_run_check(what, run, wrong_in_dst, j, j->dst,
                             (size_t)DST_BYTES, seconds, reps);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int layers = argc > 1 ? atoi(argv[1]) : 2;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  int integrity = argc > 3 ? atoi(argv[3]) : 0;
  if (world != WORLD || layers < 1 || layers > MAX_T / 11 || reps < 1 ||
      integrity < 0 || integrity > 1) {
    if (me == 0)
      fprintf(stderr, "usage: mpirun -np %d bench_mpi_refit [layers 1..%d] [reps] "
              "[integrity 0|1]\n",
              WORLD, MAX_T / 11);
    MPI_Finalize();
    return 2;
  }
  build_model(layers);
  bool trainer = me < TRAIN;
  int tp = (me % TRAIN) % TP;
  job j = {0};
  if (trainer) {
    j.src = bench_xmalloc((size_t)SRC_BYTES);
    fill_source(j.src, tp);
  } else {
    j.dst = bench_xmalloc((size_t)DST_BYTES);
  }
  if (me == 0 || !trainer) j.bucket = bench_xmalloc(BUCKET_BYTES);
  if (me == 0) j.scratch = bench_xmalloc(BUCKET_BYTES / 2);
  MPI_Comm_split(MPI_COMM_WORLD, me == 0 || !trainer ? 0 : MPI_UNDEFINED, me,
                 &j.bcast);

  /* The reshard: every rank describes only its own shards. */
  double t_plan = MPI_Wtime();
  rs_context *ctx = NULL;
  if (rs_context_create_mpi(MPI_COMM_WORLD, &ctx) != RS_OK) {
    fprintf(stderr, "rank %d: %s\n", me, rs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  j.ctx = ctx;
  rs_layout *src = NULL, *dst = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, &dst));
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    BENCH_CHECK(ctx, rs_layout_add_tensor(src, t->name, RS_DTYPE_BF16, t->ndim, t->shape));
    BENCH_CHECK(ctx, rs_layout_add_tensor(dst, t->name, RS_DTYPE_BF16, t->ndim, t->shape));
    int64_t off[2], ext[2];
    local_box(t, tp, off, ext);
    rs_layout *side = trainer ? src : dst;
    BENCH_CHECK(ctx, rs_layout_add_shard(side, t->name, me, off, ext, 0,
                                         trainer ? t->src_off : t->dst_off, NULL));
  }
  BENCH_CHECK(ctx, rs_layout_allgather(src));
  BENCH_CHECK(ctx, rs_layout_allgather(dst));
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &j.plan));
  t_plan = MPI_Wtime() - t_plan;
  if (trainer) BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_SRC, me, 0, j.src, (size_t)SRC_BYTES));
  else BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_DST, me, 0, j.dst, (size_t)DST_BYTES));

  double *ts = bench_xcalloc((size_t)reps, sizeof *ts);
  double *tb = bench_xcalloc((size_t)reps, sizeof *tb);
  poison_and_check(&j, run_reshard, "reshard", ts, reps);
  poison_and_check(&j, run_baseline, "gather-and-broadcast", tb, reps);

  /* Integrity off and on, alternating so that both see the same machine. */
  double *ti_off = bench_xcalloc((size_t)reps, sizeof *ti_off);
  double *ti_on = bench_xcalloc((size_t)reps, sizeof *ti_on);
  if (integrity) {
    job ji = j;
    BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_INTEGRITY, 1));
    BENCH_CHECK(ctx, rs_plan_create(src, dst, &ji.plan));
    BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_INTEGRITY, 0));
    if (trainer) BENCH_CHECK(ctx, rs_plan_bind(ji.plan, RS_SIDE_SRC, me, 0, j.src, (size_t)SRC_BYTES));
    else BENCH_CHECK(ctx, rs_plan_bind(ji.plan, RS_SIDE_DST, me, 0, j.dst, (size_t)DST_BYTES));
    for (int k = 0; k < reps; k++) {
      poison_and_check(&j, run_reshard, "reshard, integrity off", &ti_off[k], 1);
      poison_and_check(&ji, run_reshard, "reshard, integrity on", &ti_on[k], 1);
    }
    rs_plan_destroy(ji.plan);
  }

  /* memcpy of the bytes the destination ranks receive, in one process. */
  double tm = 1e30;
  int64_t moved = DST_BYTES * (WORLD - TRAIN);
  if (me == 0) {
    char *a = bench_xmalloc((size_t)DST_BYTES), *b = bench_xmalloc((size_t)DST_BYTES);
    memset(a, 1, (size_t)DST_BYTES);
    memset(b, 2, (size_t)DST_BYTES);
    for (int k = 0; k < 3; k++) {
      double t0 = bench_now();
      for (int r = 0; r < WORLD - TRAIN; r++) {
        memcpy(b, a, (size_t)DST_BYTES);
        __asm__ volatile("" : : "r"(b) : "memory"); /* keep the copy */
      }
      double s = bench_now() - t0;
      if (s < tm) tm = s;
    }
    free(a);
    free(b);
  }

  int64_t inter = bench_stat_all(ctx, j.plan, RS_STAT_BYTES_SENT_INTER);
  int64_t intra = bench_stat_all(ctx, j.plan, RS_STAT_BYTES_SENT_INTRA);
  int64_t rounds = bench_stat_all(ctx, j.plan, RS_STAT_ROUNDS);
  int64_t msgs = bench_stat_all(ctx, j.plan, RS_STAT_MESSAGES_SENT);
  if (me == 0) {
    double s_min = bench_min(ts, reps), s_med = bench_median(ts, reps);
    double b_min = bench_min(tb, reps), b_med = bench_median(tb, reps);
    int nd = 0;
    rs_context_get_domain(ctx, WORLD - 1, &nd);
    bench_print_machine("bench_mpi_refit: weight sync between MPI processes");
    printf("model   : %d Qwen3-32B decoder layers, %d bf16 tensors, %.3f GB\n",
           layers, NT, (double)(DST_BYTES * TP) / 1e9);
    printf("ranks   : %d processes; trainers 0-3 TP2 x DP2 -> inference 4-7 TP2 x DP2 "
           "(fused qkv_proj, gate_up_proj); %d domain(s)\n", WORLD, nd + 1);
    printf("plan    : %.3f s incl. layout exchange; %lld rounds, %lld messages; "
           "%.3f GB inter-domain, %.3f GB intra-domain\n",
           t_plan, (long long)rounds, (long long)msgs, (double)inter / 1e9,
           (double)intra / 1e9);
    printf("verify  : every destination element bit-exact after every run of both\n");
    printf("reshard : x %d, min %.3f s, median %.3f s\n", reps, s_min, s_med);
    printf("baseline: gather-and-broadcast (%zu MiB buckets) x %d, min %.3f s, median %.3f s\n",
           BUCKET_BYTES >> 20, reps, b_min, b_med);
    printf("memcpy  : %.3f GB (what the inference ranks hold) in one process: %.3f s\n",
           (double)moved / 1e9, tm);
    char m[64], b[64], r[64];
    bench_table_header();
    snprintf(m, sizeof m, "%.3f", s_min);
    snprintf(b, sizeof b, "%.3f (g+b)", b_min);
    snprintf(r, sizeof r, "%.2fx", b_min / s_min);
    bench_table_row("sync time min [s]", m, b, r);
    snprintf(m, sizeof m, "%.3f", s_med);
    snprintf(b, sizeof b, "%.3f (g+b)", b_med);
    snprintf(r, sizeof r, "%.2fx", b_med / s_med);
    bench_table_row("sync time median [s]", m, b, r);
    snprintf(m, sizeof m, "%.2f", (double)moved / s_min / 1e9);
    snprintf(b, sizeof b, "%.2f (memcpy)", (double)moved / tm / 1e9);
    snprintf(r, sizeof r, "%.2f", tm / s_min);
    bench_table_row("bytes landed [GB/s]", m, b, r);
    snprintf(m, sizeof m, "%.3f", (double)moved / 1e9);
    snprintf(b, sizeof b, "%.3f (g+b)", (double)moved / 1e9);
    bench_table_row("bytes landed [GB]", m, b, "1.00");
    snprintf(r, sizeof r, "%.2fx", b_min / s_min);
    bench_table_row("speedup over gather-and-broadcast", r, "3.00x (target)", "");
    if (integrity) {
      double off = bench_median(ti_off, reps), on = bench_median(ti_on, reps);
      printf("integrity: reshard x %d alternating, median off %.3f s, on %.3f s "
             "(min %.3f / %.3f): on/off %.2fx, target <= 1.15x: %s\n",
             reps, off, on, bench_min(ti_off, reps), bench_min(ti_on, reps),
             on / off, on <= 1.15 * off ? "PASS" : "FAIL");
    }
  }
  free(ti_off);
  free(ti_on);
  free(ts);
  free(tb);
  rs_plan_destroy(j.plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  if (j.bcast != MPI_COMM_NULL) MPI_Comm_free(&j.bcast);
  free(j.src);
  free(j.dst);
  free(j.bucket);
  free(j.scratch);
  MPI_Finalize();
  return 0;
}
