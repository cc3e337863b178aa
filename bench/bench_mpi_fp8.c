/* SPDX-License-Identifier: Apache-2.0 */
/* bench_mpi_fp8: a weight sync into an fp8 engine between MPI processes,
 * three ways in one run.
 *
 * The main job of bench_mpi_refit (bench_main_job.h): Qwen3-32B layers in
 * bf16 from TP2 x DP2 trainers (ranks 0..3) into TP2 x DP2 engines with
 * fused buffers (ranks 4..7).
 *
 *  (a) libreshard bf16 -> bf16, as bench_mpi_refit.
 *  (b) libreshard bf16 -> fp8: every linear weight lands as f8_e4m3 with a
 *      `<name>_scale_inv` f32 tensor, one scale per 128 x 128 block
 *      (DeepSeek-V3 style, scale = amax / 448), sharded like its weight,
 *      in a second buffer of each inference rank; norms stay bf16.
 *  (c) gather, quantize, broadcast, as RL frameworks feed fp8 engines: per
 *      bucket of whole tensors, the first trainer TP group gathers each
 *      full bf16 tensor on rank 0, rank 0 quantizes it (core/copy/convert.h,
 *      inside the timing), broadcasts fp8 values and scales to every
 *      inference rank, which copies out its own shard.
 *
 * (a) is checked bit-exact against the source values; (b) and (c) byte
 * for byte, scale for scale, against rsi_quantize_blocks of each full
 * tensor, computed once before timing. Destinations are poisoned before
 * every run; times are the slowest rank's.
 *
 * Usage: mpirun -np 8 bench_mpi_fp8 [layers=2] [repetitions=3] */
#include <mpi.h> /* before bench_common.h: its MPI helpers need it */

#include "bench_common.h"

#include <stdbool.h>

#include "bench_main_job.h"
#include "copy/convert.h"

static void check_quantize(rs_status st, const rsi_err *err) {
  if (st != RS_OK) {
    fprintf(stderr, "rank %d: rsi_quantize_blocks: %s: %s\n", me,
            rs_status_name(st), err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

static void quantize_whole(const tensor *t, const void *bf16, uint8_t *values,
                           float *scales) {
  rsi_err err = {0};
  check_quantize(rsi_quantize_blocks(RS_DTYPE_BF16, t->ndim, t->shape, bf16,
                                     values, scales, BLOCK, BLOCK, false,
                                     &err),
                 &err);
}

/* The shard of tensor t (and of its scales) an inference rank of TP rank
 * @p tp holds, into its buffers, out of the tensor whole at @p whole as (c)
 * broadcasts it: fp8 values then scales, or bf16. */
static void copy_out_converted(const tensor *t, const char *whole, int tp,
                               char *values, char *scales) {
  int64_t off[2], ext[2];
  local_box(t, tp, off, ext);
  bench_copy_box_out(values + t->val_off, whole, t->linear ? 1 : 2, t->ndim,
                     t->shape, off, ext);
  if (!t->linear) return;
  scale_box(t, tp, off, ext);
  bench_copy_box_out(scales + t->scale_off, whole + t->elems, 4, t->ndim,
                     t->scale_shape, off, ext);
}

/* The values and scales (b) and (c) must land on each inference rank, from
 * rsi_quantize_blocks of every full tensor. Tensor i is made once, by rank
 * i % WORLD, which keeps both TP shards of it; then each inference rank
 * gets its shards, tensor by tensor in order. */
static void build_reference(char *values, char *scales) {
  int64_t most = 0;
  for (int i = me; i < NT; i += WORLD)
    if (T[i].elems > most) most = T[i].elems;
  uint16_t *bf16 = bench_xmalloc((size_t)most * 2);
  /* bf16 (a norm), or fp8 and scales: under 2 bytes an element */
  char *converted = bench_xmalloc((size_t)most * 2);
  char *mine[MAX_T][TP] = {{NULL}}; /* [tensor][tp]: values, then scales */
  int64_t zero[2] = {0, 0};
  for (int i = me; i < NT; i += WORLD) {
    const tensor *t = &T[i];
    bench_fill_box_with(bench_weight_value, bf16, i, t->ndim, t->shape, zero,
                        t->shape);
    if (t->linear)
      quantize_whole(t, bf16, (uint8_t *)converted,
                     (float *)(converted + t->elems));
    else
      memcpy(converted, bf16, (size_t)t->bytes);
    for (int k = 0; k < TP; k++) {
      /* laid out as an inference rank's buffers, at offset 0 */
      tensor at0 = *t;
      at0.val_off = 0;
      at0.scale_off = shard_value_bytes(t);
      mine[i][k] = bench_xmalloc((size_t)(at0.scale_off + shard_scale_bytes(t)));
      copy_out_converted(&at0, converted, k, mine[i][k], mine[i][k]);
    }
  }
  free(bf16);
  free(converted);
  bench_mpi_quiet_barrier();
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int owner = i % WORLD, nv = (int)shard_value_bytes(t),
        ns = (int)shard_scale_bytes(t);
    if (me == owner) {
      for (int r = TRAIN; r < WORLD; r++) {
        const char *shard = mine[i][(r - TRAIN) % TP];
        if (r == me) {
          memcpy(values + t->val_off, shard, (size_t)nv);
          memcpy(scales + t->scale_off, shard + nv, (size_t)ns);
          continue;
        }
        MPI_Send(shard, nv, MPI_BYTE, r, 8, MPI_COMM_WORLD);
        if (ns) MPI_Send(shard + nv, ns, MPI_BYTE, r, 9, MPI_COMM_WORLD);
      }
      for (int k = 0; k < TP; k++) free(mine[i][k]);
    } else if (me >= TRAIN) {
      MPI_Recv(values + t->val_off, nv, MPI_BYTE, owner, 8, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      if (ns)
        MPI_Recv(scales + t->scale_off, ns, MPI_BYTE, owner, 9,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
}

/* ---- (c): gather, quantize, broadcast ------------------------------------ */

static size_t bcast_bytes(int first, int last) {
  size_t bytes = 0;
  for (int i = first; i < last; i++) bytes += (size_t)T[i].bcast_bytes;
  return bytes;
}

static void gather_quantize_broadcast(MPI_Comm bcast, const char *src,
                                      char *values, char *scales, char *bucket,
                                      char *scratch, char *converted) {
  bool in_bcast = me == 0 || me >= TRAIN;
  for (int first = 0; first < NT;) {
    int last = bucket_end(first);
    if (me <= 1) { /* gather on the first TP group's rank 0 */
      size_t at = 0;
      for (int i = first; i < last; i++) {
        gather_tensor(&T[i], src, bucket + at, scratch);
        at += (size_t)T[i].bytes;
      }
    }
    if (me == 0) {
      size_t at = 0, to = 0;
      for (int i = first; i < last; i++) {
        const tensor *t = &T[i];
        if (t->linear)
          quantize_whole(t, bucket + at, (uint8_t *)converted + to,
                         (float *)(converted + to + t->elems));
        else
          memcpy(converted + to, bucket + at, (size_t)t->bytes);
        at += (size_t)t->bytes;
        to += (size_t)t->bcast_bytes;
      }
    }
    if (in_bcast)
      MPI_Bcast(converted, (int)bcast_bytes(first, last), MPI_BYTE, 0, bcast);
    if (me >= TRAIN) {
      size_t to = 0;
      for (int i = first; i < last; i++) {
        copy_out_converted(&T[i], converted + to, (me - TRAIN) % TP, values,
                           scales);
        to += (size_t)T[i].bcast_bytes;
      }
    }
    first = last;
  }
}

/* Bytes (c) moves between processes: each TP-split tensor's second half to
 * rank 0 (*gathered), and each broadcast to every inference rank. */
static int64_t gqb_bytes_moved(int64_t *gathered) {
  int64_t bytes = 0;
  *gathered = 0;
  for (int i = 0; i < NT; i++) {
    int64_t half = T[i].split < 0 ? 0 : T[i].bytes / TP;
    *gathered += half;
    bytes += half + (int64_t)(WORLD - TRAIN) * T[i].bcast_bytes;
  }
  return bytes;
}

/* ---- the three ways -------------------------------------------------------- */

typedef struct job {
  rs_context *ctx;
  rs_plan *plan;
  MPI_Comm bcast;
  int tp;
  char *src, *dst;             /* bf16 source; (a)'s bf16 destination */
  char *values, *scales;       /* (b), (c)'s destination */
  char *ref_values, *ref_scales;
  char *bucket, *scratch, *converted; /* (c) */
} job;

static void run_plan(void *arg) {
  job *j = arg;
  BENCH_CHECK(j->ctx, rs_plan_execute(j->plan));
}

static void run_gqb(void *arg) {
  job *j = arg;
  gather_quantize_broadcast(j->bcast, j->src, j->values, j->scales, j->bucket,
                            j->scratch, j->converted);
}

static int64_t wrong_bf16(void *arg) {
  job *j = arg;
  int64_t wrong = 0;
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2], ext[2];
    local_box(t, j->tp, off, ext);
    wrong += bench_wrong_in_box_with(bench_weight_value,
                                     (const uint16_t *)(j->dst + t->dst_off),
                                     i, t->ndim, t->shape, off, ext);
  }
  return wrong;
}

static int64_t wrong_converted(void *arg) {
  job *j = arg;
  int64_t wrong = 0;
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2], ext[2];
    local_box(t, j->tp, off, ext);
    int64_t n = ext[0] * ext[1];
    if (t->linear) {
      const uint8_t *got = (const uint8_t *)j->values + t->val_off;
      const uint8_t *want = (const uint8_t *)j->ref_values + t->val_off;
      for (int64_t e = 0; e < n; e++) wrong += got[e] != want[e];
      scale_box(t, j->tp, off, ext);
      n = ext[0] * ext[1];
      const uint32_t *sgot = (const uint32_t *)(j->scales + t->scale_off);
      const uint32_t *swant = (const uint32_t *)(j->ref_scales + t->scale_off);
      for (int64_t e = 0; e < n; e++) wrong += sgot[e] != swant[e];
    } else {
      const uint16_t *got = (const uint16_t *)(j->values + t->val_off);
      const uint16_t *want = (const uint16_t *)(j->ref_values + t->val_off);
      for (int64_t e = 0; e < n; e++) wrong += got[e] != want[e];
    }
  }
  return wrong;
}

/* One way's figures, gathered for the closing table. */
typedef struct way {
  double min, median;
  int64_t bytes, rounds, messages, converted_sending, converted_receiving;
  double plan_seconds;
} way;

static void plan_figures(job *j, way *w) {
  w->bytes = bench_stat_all(j->ctx, j->plan, RS_STAT_BYTES_SENT_INTRA) +
             bench_stat_all(j->ctx, j->plan, RS_STAT_BYTES_SENT_INTER);
  w->rounds = bench_stat_all(j->ctx, j->plan, RS_STAT_ROUNDS);
  w->messages = bench_stat_all(j->ctx, j->plan, RS_STAT_MESSAGES_SENT);
  w->converted_sending =
      bench_stat_all(j->ctx, j->plan, RS_STAT_CONVERTED_SENDING);
  w->converted_receiving =
      bench_stat_all(j->ctx, j->plan, RS_STAT_CONVERTED_RECEIVING);
}

static void times(way *w, double *seconds, int reps) {
  w->min = bench_min(seconds, reps);
  w->median = bench_median(seconds, reps);
}

/* The destination layout of (a) (@p fp8 false) or (b), with this rank's
 * shards when it is an inference rank. */
static rs_layout *destination_layout(rs_context *ctx, bool fp8, int tp) {
  rs_layout *dst = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &dst));
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    bool q = fp8 && t->linear;
    BENCH_CHECK(ctx, rs_layout_add_tensor(dst, t->name,
                                          q ? RS_DTYPE_F8_E4M3 : RS_DTYPE_BF16,
                                          t->ndim, t->shape));
    if (q) {
      BENCH_CHECK(ctx, rs_layout_add_tensor(dst, t->scale_name, RS_DTYPE_F32,
                                            t->ndim, t->scale_shape));
      BENCH_CHECK(ctx, rs_layout_set_block_scales(dst, t->name, t->scale_name,
                                                  BLOCK, BLOCK,
                                                  RS_SCALE_AMAX));
    }
    if (me < TRAIN) continue;
    int64_t off[2], ext[2];
    local_box(t, tp, off, ext);
    BENCH_CHECK(ctx, rs_layout_add_shard(dst, t->name, me, off, ext, 0,
                                         fp8 ? t->val_off : t->dst_off, NULL));
    if (q) {
      scale_box(t, tp, off, ext);
      BENCH_CHECK(ctx, rs_layout_add_shard(dst, t->scale_name, me, off, ext, 1,
                                           t->scale_off, NULL));
    }
  }
  BENCH_CHECK(ctx, rs_layout_allgather(dst));
  return dst;
}

static void print_row(const char *figure, const char *a, const char *b,
                      const char *c) {
  printf("%-26s %18s %18s %18s\n", figure, a, b, c);
}

static const char *verdict(bool pass) { return pass ? "PASS" : "FAIL"; }

static void report(int layers, int domains, const way *w,
                   double t_reference, int64_t gather_bytes) {
  bench_print_machine("bench_mpi_fp8: weight sync into an fp8 engine between "
                      "MPI processes");
  int64_t weights = 0, fp8_tensors = 0;
  for (int i = 0; i < NT; i++)
    if (T[i].linear) weights += T[i].elems, fp8_tensors++;
  printf("model   : %d Qwen3-32B decoder layers, %d bf16 tensors, %.3f GB; "
         "%lld linear weights (%.3f G elements) to f8_e4m3 + f32 scales "
         "per %dx%d block in (b), (c)\n",
         layers, NT, (double)(DST_BYTES * TP) / 1e9, (long long)fp8_tensors,
         (double)weights / 1e9, BLOCK, BLOCK);
  printf("ranks   : %d processes; trainers 0-3 TP2 x DP2 -> inference 4-7 TP2 "
         "x DP2 (fused qkv_proj, gate_up_proj; scales in buffer 1); %d "
         "domain(s)\n",
         WORLD, domains);
  for (int k = 0; k < 2; k++)
    printf("plan %s : %.3f s incl. layout exchange; %lld rounds, %lld "
           "messages; converted: %lld elements sending, %lld receiving\n",
           k ? "(b)" : "(a)", w[k].plan_seconds, (long long)w[k].rounds,
           (long long)w[k].messages, (long long)w[k].converted_sending,
           (long long)w[k].converted_receiving);
  printf("verify  : after every run, (a) bit-exact; (b), (c) every fp8 byte "
         "and scale equal to rsi_quantize_blocks of the full tensor (made in "
         "%.2f s, untimed)\n",
         t_reference);
  printf("(c)     : %zu MiB buckets of bf16; gathers move %.3f GB, "
         "broadcasts deliver %.3f GB to %d ranks\n",
         BUCKET_BYTES >> 20, (double)gather_bytes / 1e9,
         (double)(w[2].bytes - gather_bytes) / 1e9, WORLD - TRAIN);
  printf("\n");
  print_row("figure", "(a) bf16->bf16", "(b) bf16->fp8", "(c) gather+q+bcast");
  printf("%-26s %18s %18s %18s\n", "--------------------------",
         "------------------", "------------------", "------------------");
  char a[64], b[64], c[64];
  snprintf(a, sizeof a, "%.3f", (double)w[0].bytes / 1e9);
  snprintf(b, sizeof b, "%.3f", (double)w[1].bytes / 1e9);
  snprintf(c, sizeof c, "%.3f", (double)w[2].bytes / 1e9);
  print_row("bytes moved [GB]", a, b, c);
  snprintf(a, sizeof a, "%.3f", w[0].min);
  snprintf(b, sizeof b, "%.3f", w[1].min);
  snprintf(c, sizeof c, "%.3f", w[2].min);
  print_row("sync time min [s]", a, b, c);
  snprintf(a, sizeof a, "%.3f", w[0].median);
  snprintf(b, sizeof b, "%.3f", w[1].median);
  snprintf(c, sizeof c, "%.3f", w[2].median);
  print_row("sync time median [s]", a, b, c);

  double bytes_ratio = (double)w[1].bytes / (double)w[0].bytes;
  double time_ratio = w[1].min / w[0].min;
  printf("\ntargets (issue 15), (b) against (a):\n");
  printf("  bytes moved  %.3fx  <= 0.55x  %s\n", bytes_ratio,
         verdict(bytes_ratio <= 0.55));
  printf("  time (min)   %.3fx  <= 0.80x  %s\n", time_ratio,
         verdict(time_ratio <= 0.80));
  printf("(b) against (c): %.2fx fewer bytes, %.2fx faster (min), %.2fx "
         "(median)\n",
         (double)w[2].bytes / (double)w[1].bytes, w[2].min / w[1].min,
         w[2].median / w[1].median);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int layers = argc > 1 ? atoi(argv[1]) : 2;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  if (world != WORLD || layers < 1 || layers > MAX_T / 11 || reps < 1) {
    if (me == 0)
      fprintf(stderr,
              "usage: mpirun -np %d bench_mpi_fp8 [layers 1..%d] [reps]\n",
              WORLD, MAX_T / 11);
    MPI_Finalize();
    return 2;
  }
  build_model(layers);
  bool trainer = me < TRAIN;
  job j = {0};
  j.tp = (me % TRAIN) % TP;
  if (trainer) {
    j.src = bench_xmalloc((size_t)SRC_BYTES);
    fill_source(bench_weight_value, j.src, j.tp);
  }
  bench_mpi_quiet_barrier();
  MPI_Comm_split(MPI_COMM_WORLD, me == 0 || !trainer ? 0 : MPI_UNDEFINED, me,
                 &j.bcast);

  rs_context *ctx = bench_mpi_context();
  j.ctx = ctx;
  double *seconds = bench_xcalloc((size_t)reps, sizeof *seconds);
  way w[3] = {{0}};

  double t_plan = MPI_Wtime();
  rs_layout *src = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &src));
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    BENCH_CHECK(ctx, rs_layout_add_tensor(src, t->name, RS_DTYPE_BF16, t->ndim,
                                          t->shape));
    if (!trainer) continue;
    int64_t off[2], ext[2];
    local_box(t, j.tp, off, ext);
    BENCH_CHECK(ctx, rs_layout_add_shard(src, t->name, me, off, ext, 0,
                                         t->src_off, NULL));
  }
  BENCH_CHECK(ctx, rs_layout_allgather(src));
  double t_src = MPI_Wtime() - t_plan;

  /* (a) bf16 -> bf16 */
  t_plan = MPI_Wtime();
  rs_layout *dst_bf16 = destination_layout(ctx, false, j.tp);
  BENCH_CHECK(ctx, rs_plan_create(src, dst_bf16, &j.plan));
  w[0].plan_seconds = MPI_Wtime() - t_plan + t_src;
  if (trainer) {
    BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_SRC, me, 0, j.src,
                                  (size_t)SRC_BYTES));
  } else {
    j.dst = bench_xmalloc((size_t)DST_BYTES);
    BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_DST, me, 0, j.dst,
                                  (size_t)DST_BYTES));
  }
  bench_mpi_poison_run_check("(a) libreshard bf16->bf16", run_plan, wrong_bf16,
                             &j, j.dst, (size_t)DST_BYTES, seconds, reps);
  times(&w[0], seconds, reps);
  plan_figures(&j, &w[0]);
  rs_plan_destroy(j.plan);
  rs_layout_destroy(dst_bf16);
  free(j.dst);
  j.dst = NULL;

  /* The reference of (b) and (c), untimed. */
  double t_reference = MPI_Wtime();
  if (!trainer) {
    j.values = bench_xmalloc((size_t)VAL_BYTES);
    j.scales = bench_xmalloc((size_t)SCALE_BYTES);
    j.ref_values = bench_xmalloc((size_t)VAL_BYTES);
    j.ref_scales = bench_xmalloc((size_t)SCALE_BYTES);
  }
  build_reference(j.ref_values, j.ref_scales);
  MPI_Barrier(MPI_COMM_WORLD);
  t_reference = MPI_Wtime() - t_reference;
  void *dst_buffers[2] = {j.values, j.scales};
  size_t dst_sizes[2] = {(size_t)VAL_BYTES, (size_t)SCALE_BYTES};
  int ndst = trainer ? 0 : 2;

  /* (b) bf16 -> fp8 */
  t_plan = MPI_Wtime();
  rs_layout *dst_fp8 = destination_layout(ctx, true, j.tp);
  BENCH_CHECK(ctx, rs_plan_create(src, dst_fp8, &j.plan));
  w[1].plan_seconds = MPI_Wtime() - t_plan + t_src;
  if (trainer) {
    BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_SRC, me, 0, j.src,
                                  (size_t)SRC_BYTES));
  } else {
    BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_DST, me, 0, j.values,
                                  (size_t)VAL_BYTES));
    BENCH_CHECK(ctx, rs_plan_bind(j.plan, RS_SIDE_DST, me, 1, j.scales,
                                  (size_t)SCALE_BYTES));
  }
  bench_mpi_poison_run_check_buffers("(b) libreshard bf16->fp8", run_plan,
                                     wrong_converted, &j, dst_buffers,
                                     dst_sizes, ndst, seconds, reps);
  times(&w[1], seconds, reps);
  plan_figures(&j, &w[1]);
  int domains = 0;
  rs_context_get_domain(ctx, WORLD - 1, &domains);
  rs_plan_destroy(j.plan);
  rs_layout_destroy(dst_fp8);
  rs_layout_destroy(src);
  j.plan = NULL;

  /* (c) gather, quantize, broadcast */
  size_t most = 0;
  for (int first = 0; first < NT;) {
    int last = bucket_end(first);
    size_t b = bcast_bytes(first, last);
    if (b > most) most = b;
    first = last;
  }
  if (me == 0) {
    j.bucket = bench_xmalloc(BUCKET_BYTES);
    j.scratch = bench_xmalloc(BUCKET_BYTES / 2);
  }
  if (me == 0 || !trainer) j.converted = bench_xmalloc(most);
  bench_mpi_poison_run_check_buffers("(c) gather+quantize+broadcast", run_gqb,
                                     wrong_converted, &j, dst_buffers,
                                     dst_sizes, ndst, seconds, reps);
  times(&w[2], seconds, reps);
  int64_t gather_bytes = 0;
  w[2].bytes = gqb_bytes_moved(&gather_bytes);

  if (me == 0) report(layers, domains + 1, w, t_reference, gather_bytes);

  free(seconds);
  rs_context_destroy(ctx);
  if (j.bcast != MPI_COMM_NULL) MPI_Comm_free(&j.bcast);
  free(j.src);
  free(j.values);
  free(j.scales);
  free(j.ref_values);
  free(j.ref_scales);
  free(j.bucket);
  free(j.scratch);
  free(j.converted);
  MPI_Finalize();
  return 0;
}
