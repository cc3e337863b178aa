/* SPDX-License-Identifier: Apache-2.0 */
/* bench_mpi_refit: a weight sync between MPI processes, two ways in one run.
 *
 * Ranks 0..3 are trainers holding Qwen3-32B decoder layers as TP2 x DP2
 * (mesh [DP, TP], rank = dp*2 + tp); ranks 4..7 are inference engines, also
 * TP2 x DP2, holding vLLM-style fused buffers (q, k, v rows one after the
 * other = qkv_proj; gate then up = gate_up_proj). Column-parallel (dim 0):
 * q/k/v/gate/up; row-parallel (dim 1): o/down; norms replicated. The job
 * is bench_main_job.h's, which bench_mpi_fp8 syncs into an fp8 engine.
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
 * With a fourth argument 1, the reshard runs alternately with the log off
 * and at INFO (rs_log_set_level; each rank's lines written to a temporary
 * file of its own by an rs_log_fn), and the ratio INFO/off is printed
 * against its 1.02x target.
 *
 * Usage: mpirun -np 8 bench_mpi_refit [layers=2] [repetitions=3] [integrity=0]
 *                                     [log=0] */
#include <mpi.h> /* before bench_common.h: its MPI helpers need it */

#include "bench_common.h"

#include <stdbool.h>

#include "bench_main_job.h"

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

/* Inference rank: copy its shard of tensor t out of the whole tensor. */
static void copy_out(const tensor *t, const char *whole, char *dst, int tp) {
  int64_t off[2], ext[2];
  local_box(t, tp, off, ext);
  bench_copy_box_out(dst + t->dst_off, whole, 2, t->ndim, t->shape, off, ext);
}

static void gather_broadcast(MPI_Comm bcast, const char *src, char *dst,
                             char *bucket, char *scratch) {
  bool in_bcast = me == 0 || me >= TRAIN;
  for (int first = 0; first < NT;) {
    int last = bucket_end(first);
    size_t bytes = 0;
    for (int i = first; i < last; i++) bytes += (size_t)T[i].bytes;
    if (me <= 1) { /* gather on the first TP group's rank 0 */
      size_t at = 0;
      for (int i = first; i < last; i++) {
        gather_tensor(&T[i], src, bucket + at, scratch);
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

/* The log's lines into a file of this rank's (bench argument log=1). */
static void write_log_line(void *user, rs_log_level level, unsigned subsys,
                           int rank, const char *message) {
  fprintf(user, "%d %u %d %s\n", (int)level, subsys, rank, message);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int layers = argc > 1 ? atoi(argv[1]) : 2;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  int integrity = argc > 3 ? atoi(argv[3]) : 0;
  int logging = argc > 4 ? atoi(argv[4]) : 0;
  if (world != WORLD || layers < 1 || layers > MAX_T / 11 || reps < 1 ||
      integrity < 0 || integrity > 1 || logging < 0 || logging > 1) {
    if (me == 0)
      fprintf(stderr, "usage: mpirun -np %d bench_mpi_refit [layers 1..%d] [reps] "
              "[integrity 0|1] [log 0|1]\n",
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
    fill_source(bench_value, j.src, tp);
  } else {
    j.dst = bench_xmalloc((size_t)DST_BYTES);
  }
  if (me == 0 || !trainer) j.bucket = bench_xmalloc(BUCKET_BYTES);
  if (me == 0) j.scratch = bench_xmalloc(BUCKET_BYTES / 2);
  MPI_Comm_split(MPI_COMM_WORLD, me == 0 || !trainer ? 0 : MPI_UNDEFINED, me,
                 &j.bcast);

  /* The reshard: every rank describes only its own shards. */
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

  /* The log off and at INFO, alternating. */
  double *tl_off = bench_xcalloc((size_t)reps, sizeof *tl_off);
  double *tl_on = bench_xcalloc((size_t)reps, sizeof *tl_on);
  long log_lines = 0;
  if (logging) {
    FILE *lines = tmpfile();
    if (!lines) {
      perror("bench_mpi_refit: tmpfile");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    BENCH_CHECK(ctx, rs_log_set_callback(write_log_line, lines));
    for (int k = 0; k < reps; k++) {
      BENCH_CHECK(ctx, rs_log_set_level(RS_LOG_NONE, RS_LOG_ALL));
      poison_and_check(&j, run_reshard, "reshard, log off", &tl_off[k], 1);
      BENCH_CHECK(ctx, rs_log_set_level(RS_LOG_INFO, RS_LOG_ALL));
      poison_and_check(&j, run_reshard, "reshard, log INFO", &tl_on[k], 1);
    }
    BENCH_CHECK(ctx, rs_log_set_level(RS_LOG_NONE, RS_LOG_ALL));
    BENCH_CHECK(ctx, rs_log_set_callback(NULL, NULL));
    log_lines = ftell(lines);
    fclose(lines);
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
  if (logging && me == 0) {
    double off = bench_median(tl_off, reps), on = bench_median(tl_on, reps);
    printf("log: reshard x %d alternating, median off %.3f s, INFO %.3f s "
           "(min %.3f / %.3f; rank 0 wrote %ld bytes of log): INFO/off "
           "%.3fx, target <= 1.02x: %s\n",
           reps, off, on, bench_min(tl_off, reps), bench_min(tl_on, reps),
           log_lines, on / off, on <= 1.02 * off ? "PASS" : "FAIL");
  }
  free(tl_off);
  free(tl_on);
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
