/* SPDX-License-Identifier: Apache-2.0 */
/* bench_exec_local: bytes per second of rs_plan_execute with the in-process
 * transport, beside a plain memcpy of the same byte count in the same run.
 *
 * Two Qwen3-32B decoder layers (bf16; shapes from shared/reference), 1.95 GB
 * (1.82 GiB) of weights, moved from a trainer-like TP2 x DP2 layout on ranks
 * 0-3 (mesh [DP2, TP2], rank = dp*2 + tp) to an inference-like TP4 layout on
 * ranks 4-7, in domains of 4: every destination byte crosses from domain 0
 * to domain 1. Column-parallel (dim 0): q/k/v/gate/up; row-parallel (dim 1):
 * o/down; norms replicated. Each rank keeps all its shards in one buffer, in
 * declaration order, so the destination holds vLLM's fused qkv_proj and
 * gate_up_proj (per TP rank: q rows then k then v; gate then up).
 *
 * In process every piece is one strided copy from the source shard into
 * the destination shard (the local transport's direct messages: no
 * staging), so the target is 0.85 x a single-threaded memcpy of the same
 * bytes.
 *
 * Every source element holds a hash of (tensor, global index); the
 * destination is checked bit-exact against the same hash after the warm-up
 * execution and again after the timed ones (the destination is poisoned in
 * between), so a no-op cannot pass.
 *
 * Usage: bench_exec_local [repetitions]. */
#include "bench_common.h"

#include <pthread.h>

enum {
  N_SRC = 4,
  N_DST = 4,
  WORLD = N_SRC + N_DST,
  DOMAIN = 4,
  N_LAYERS = 2,
  HIDDEN = 5120,
  INTER = 25600,
  Q_OUT = 8192, /* 64 heads x 128 */
  KV_OUT = 1024, /* 8 kv heads x 128 */
  HEAD_DIM = 128,
  MAX_T = 32
};

typedef struct tspec {
  char name[96];
  int ndim;
  int64_t shape[2];
  int split;          /* dim sharded by TP on both sides; -1 replicated */
  int64_t src_off;    /* byte offset in every source rank's buffer */
  int64_t src_bytes;  /* local shard bytes on a source rank */
  int64_t dst_off;
  int64_t dst_bytes;
} tspec;

static tspec T[MAX_T];
static int NT;

static void add_t(int split, int ndim, int64_t d0, int64_t d1,
                  const char *fmt, int layer) {
  if (NT == MAX_T) {
    fprintf(stderr, "too many tensors\n");
    exit(1);
  }
  tspec *t = &T[NT++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, fmt, layer);
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->split = split;
}

static void build_model(void) {
  for (int L = 0; L < N_LAYERS; L++) {
#define P "model.layers.%d."
    add_t(-1, 1, HIDDEN, 0, P "input_layernorm.weight", L);
    add_t(0, 2, Q_OUT, HIDDEN, P "self_attn.q_proj.weight", L);
    add_t(0, 2, KV_OUT, HIDDEN, P "self_attn.k_proj.weight", L);
    add_t(0, 2, KV_OUT, HIDDEN, P "self_attn.v_proj.weight", L);
    add_t(-1, 1, HEAD_DIM, 0, P "self_attn.q_norm.weight", L);
    add_t(-1, 1, HEAD_DIM, 0, P "self_attn.k_norm.weight", L);
    add_t(1, 2, HIDDEN, Q_OUT, P "self_attn.o_proj.weight", L);
    add_t(-1, 1, HIDDEN, 0, P "post_attention_layernorm.weight", L);
    add_t(0, 2, INTER, HIDDEN, P "mlp.gate_proj.weight", L);
    add_t(0, 2, INTER, HIDDEN, P "mlp.up_proj.weight", L);
    add_t(1, 2, HIDDEN, INTER, P "mlp.down_proj.weight", L);
#undef P
  }
}

/* Element (row, col) of tensor t holds rowhash(t, row) ^ (col * odd): the
 * expensive hash runs once per row and the inner loop vectorises; distinct
 * columns of a row (< 65536) always differ, distinct rows almost surely. */
static uint16_t rowhash(int t, int64_t row) {
  uint64_t x = (uint64_t)(row + 1) * 0x9E3779B97F4A7C15ull ^
               (uint64_t)(t + 1) * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (uint16_t)(x >> 24);
}

static inline uint16_t colval(int64_t col) {
  return (uint16_t)((uint32_t)col * 0x9E3Bu);
}

/* Source mesh [DP2, TP2] on ranks 0-3, destination mesh [TP4] on 4-7. */
static const int64_t SRC_MESH[2] = {2, 2};
static const int SRC_RANKS[4] = {0, 1, 2, 3};
static const int64_t DST_MESH[1] = {N_DST};
static const int DST_RANKS[4] = {4, 5, 6, 7};

static void src_placements(const tspec *t, int pl[2]) {
  pl[0] = RS_REPLICATE;
  pl[1] = t->split >= 0 ? t->split : RS_REPLICATE;
}

static void dst_placements(const tspec *t, int pl[1]) {
  pl[0] = t->split >= 0 ? t->split : RS_REPLICATE;
}

static void local_box(const tspec *t, int mesh_ndim, const int64_t *mesh,
                      const int *pl, const int64_t *coord, int64_t off[2],
                      int64_t ext[2]) {
  rs_status st = rs_dtensor_local_box(t->ndim, t->shape, mesh_ndim, mesh, pl,
                                      coord, off, ext);
  if (st != RS_OK) {
    fprintf(stderr, "rs_dtensor_local_box(%s): %s: %s\n", t->name,
            rs_status_name(st), rs_last_error());
    exit(1);
  }
}

static int64_t box_elems(const tspec *t, const int64_t ext[2]) {
  return t->ndim == 1 ? ext[0] : ext[0] * ext[1];
}

/* Visit the box row-major: fill (check = 0) or compare (check = 1) the
 * dense local shard p. Returns the number of mismatching elements. */
static int64_t walk_box(int ti, const tspec *t, const int64_t off[2],
                        const int64_t ext[2], uint16_t *p, int check,
                        int64_t *first_bad) {
  int64_t rows = t->ndim == 1 ? 1 : ext[0];
  int64_t cols = t->ndim == 1 ? ext[0] : ext[1];
  int64_t r0 = t->ndim == 1 ? 0 : off[0];
  int64_t c0 = t->ndim == 1 ? off[0] : off[1];
  int64_t width = t->ndim == 1 ? t->shape[0] : t->shape[1];
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; i++) {
    uint16_t *row = p + i * cols;
    const uint16_t h = rowhash(ti, r0 + i);
    if (!check) {
      for (int64_t j = 0; j < cols; j++) row[j] = h ^ colval(c0 + j);
    } else {
      int64_t rbad = 0;
      for (int64_t j = 0; j < cols; j++)
        rbad += row[j] != (uint16_t)(h ^ colval(c0 + j));
      if (rbad && !bad && first_bad) {
        for (int64_t j = 0; j < cols; j++)
          if (row[j] != (uint16_t)(h ^ colval(c0 + j))) {
            *first_bad = (r0 + i) * width + c0 + j;
            break;
          }
      }
      bad += rbad;
    }
  }
  return bad;
}

static int64_t verify(uint8_t **dbuf, const char *when) {
  int64_t bad_total = 0;
  for (int r = 0; r < N_DST; r++) {
    int64_t coord[1] = {r};
    for (int i = 0; i < NT; i++) {
      const tspec *t = &T[i];
      int pl[1];
      int64_t off[2], ext[2], first = -1;
      dst_placements(t, pl);
      local_box(t, 1, DST_MESH, pl, coord, off, ext);
      int64_t bad = walk_box(i, t, off, ext,
                             (uint16_t *)(dbuf[r] + t->dst_off), 1, &first);
      if (bad) {
        if (bad_total == 0)
          printf("MISMATCH (%s): rank %d tensor %s: %lld of %lld elements "
                 "wrong, first at global index %lld\n",
                 when, DST_RANKS[r], t->name, (long long)bad,
                 (long long)box_elems(t, ext), (long long)first);
        bad_total += bad;
      }
    }
  }
  return bad_total;
}

static void *xalloc_pages(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 1) != 0) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* memcpy of every destination buffer's size, from the source buffer of the
 * same index; nthreads > 1 splits each copy into contiguous parts. */
typedef struct copy_job {
  uint8_t **dst, **src;
  const size_t *bytes;
  int tid, nthreads;
} copy_job;

static void *copy_worker(void *arg) {
  copy_job *j = arg;
  for (int r = 0; r < N_DST; r++) {
    size_t n = j->bytes[r];
    size_t part = (n / (size_t)j->nthreads + 63) & ~(size_t)63;
    size_t lo = part * (size_t)j->tid;
    if (lo >= n) continue;
    size_t len = n - lo < part ? n - lo : part;
    memcpy(j->dst[r] + lo, j->src[r] + lo, len);
  }
  return NULL;
}

static double timed_memcpy(uint8_t **dst, uint8_t **src, const size_t *bytes,
                           int nthreads) {
  copy_job jobs[64];
  pthread_t th[64];
  if (nthreads > 64) nthreads = 64;
  for (int i = 0; i < nthreads; i++) {
    jobs[i].dst = dst;
    jobs[i].src = src;
    jobs[i].bytes = bytes;
    jobs[i].tid = i;
    jobs[i].nthreads = nthreads;
  }
  double t0 = bench_now();
  if (nthreads == 1) {
    copy_worker(&jobs[0]);
  } else {
    for (int i = 0; i < nthreads; i++)
      if (pthread_create(&th[i], NULL, copy_worker, &jobs[i]) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
      }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  }
  return bench_now() - t0;
}

static int64_t dst_bytes_each; /* every destination rank's buffer */

static void poison_dst(uint8_t **dbuf) {
  for (int r = 0; r < N_DST; r++)
    memset(dbuf[r], 0xA5, (size_t)dst_bytes_each);
}

/* reps executions into a poisoned destination, each timed into et[];
 * returns the CPU seconds spent per wall second. */
static double timed_executions(rs_context *ctx, rs_plan *plan,
                               uint8_t **dbuf, int reps, double *et) {
  poison_dst(dbuf);
  double cpu0 = bench_cpu_time(), wall0 = bench_now();
  for (int i = 0; i < reps; i++) {
    double t0 = bench_now();
    BENCH_CHECK(ctx, rs_plan_execute(plan));
    et[i] = bench_now() - t0;
  }
  return (bench_cpu_time() - cpu0) / (bench_now() - wall0);
}

/* A table row: a rate in GB/s beside its baseline's, and their ratio. */
static void rate_row(const char *what, double rate, double base,
                     const char *base_name) {
  char a[64], b[96], c[64];
  snprintf(a, sizeof a, "%.2f", rate / 1e9);
  snprintf(b, sizeof b, "%.2f (%s)", base / 1e9, base_name);
  snprintf(c, sizeof c, "%.2f", rate / base);
  bench_table_row(what, a, b, c);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  if (reps < 1) reps = 1;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;

  bench_print_machine("bench_exec_local: rs_plan_execute, in-process");
  build_model();

  /* Byte offsets: every rank of a side holds equal-sized shards. */
  int64_t src_total = 0, dst_total = 0, logical = 0;
  for (int i = 0; i < NT; i++) {
    tspec *t = &T[i];
    int spl[2], dpl[1];
    int64_t off[2], ext[2], c2[2] = {0, 0}, c1[1] = {0};
    src_placements(t, spl);
    dst_placements(t, dpl);
    local_box(t, 2, SRC_MESH, spl, c2, off, ext);
    t->src_bytes = 2 * box_elems(t, ext);
    local_box(t, 1, DST_MESH, dpl, c1, off, ext);
    t->dst_bytes = 2 * box_elems(t, ext);
    t->src_off = src_total;
    t->dst_off = dst_total;
    src_total += t->src_bytes;
    dst_total += t->dst_bytes;
    logical += 2 * (t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]);
  }
  int64_t dst_all = dst_total * N_DST; /* bytes the destination holds */
  dst_bytes_each = dst_total;
  printf("workload: %d Qwen3-32B layers, %d bf16 tensors, %.3f GB logical; "
         "TP2xDP2 (ranks 0-3) -> TP4 (ranks 4-7), domains of %d\n",
         N_LAYERS, NT, (double)logical / 1e9, DOMAIN);
  printf("memory  : source %.2f GiB (4 x %.3f GB), destination %.2f GiB "
         "(4 x %.3f GB)\n",
         (double)(src_total * N_SRC) / BENCH_GIB, (double)src_total / 1e9,
         (double)dst_all / BENCH_GIB, (double)dst_total / 1e9);
  fflush(stdout);

  uint8_t *sbuf[N_SRC], *dbuf[N_DST];
  size_t dbytes[N_DST];
  double t0 = bench_now();
  for (int r = 0; r < N_SRC; r++) {
    sbuf[r] = xalloc_pages((size_t)src_total);
    int64_t coord[2] = {r / 2, r % 2};
    for (int i = 0; i < NT; i++) {
      const tspec *t = &T[i];
      int pl[2];
      int64_t off[2], ext[2];
      src_placements(t, pl);
      local_box(t, 2, SRC_MESH, pl, coord, off, ext);
      walk_box(i, t, off, ext, (uint16_t *)(sbuf[r] + t->src_off), 0, NULL);
    }
  }
  for (int r = 0; r < N_DST; r++) {
    dbuf[r] = xalloc_pages((size_t)dst_total);
    dbytes[r] = (size_t)dst_total;
    memset(dbuf[r], 0xA5, (size_t)dst_total);
  }
  printf("setup   : buffers filled in %.2f s\n", bench_now() - t0);

  rs_context *ctx = NULL;
  BENCH_CHECK(NULL, rs_context_create_local(WORLD, &ctx));
  BENCH_CHECK(ctx, rs_context_set_domain_size(ctx, DOMAIN));
  int64_t staging = 0, slice = 0;
  BENCH_CHECK(ctx, rs_context_get_param(ctx, RS_PARAM_STAGING_BYTES,
                                        &staging));
  BENCH_CHECK(ctx, rs_context_get_param(ctx, RS_PARAM_SLICE_BYTES, &slice));

  rs_layout *src = NULL, *dst = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, &dst));
  for (int i = 0; i < NT; i++) {
    const tspec *t = &T[i];
    int spl[2], dpl[1];
    src_placements(t, spl);
    dst_placements(t, dpl);
    BENCH_CHECK(ctx, rs_layout_add_tensor(src, t->name, RS_DTYPE_BF16,
                                          t->ndim, t->shape));
    BENCH_CHECK(ctx, rs_layout_add_tensor(dst, t->name, RS_DTYPE_BF16,
                                          t->ndim, t->shape));
    BENCH_CHECK(ctx, rs_layout_add_dtensor(src, t->name, 2, SRC_MESH,
                                           SRC_RANKS, spl, 0, t->src_off));
    BENCH_CHECK(ctx, rs_layout_add_dtensor(dst, t->name, 1, DST_MESH,
                                           DST_RANKS, dpl, 0, t->dst_off));
  }

  rs_plan *plan = NULL;
  t0 = bench_now();
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
  double t_plan = bench_now() - t0;
  int64_t moves = 0;
  BENCH_CHECK(ctx, rs_plan_num_moves(plan, &moves));
  int64_t sent_inter = bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTER);
  int64_t sent_intra = bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTRA);
  int64_t local = bench_stat_all(ctx, plan, RS_STAT_BYTES_LOCAL);
  int64_t rounds = bench_stat_all(ctx, plan, RS_STAT_ROUNDS);
  int64_t msgs = bench_stat_all(ctx, plan, RS_STAT_MESSAGES_SENT);
  int64_t stage_peak = bench_stat_all(ctx, plan, RS_STAT_STAGING_BYTES);
  int64_t moved = sent_inter + sent_intra + local;
  printf("plan    : created in %.3f s; %lld moves, %lld rounds, %lld "
         "messages; staging %.0f MiB/rank setting, %.1f MiB peak; slice "
         "%.0f MiB\n",
         t_plan, (long long)moves, (long long)rounds, (long long)msgs,
         (double)staging / BENCH_MIB, (double)stage_peak / BENCH_MIB,
         (double)slice / BENCH_MIB);
  printf("bytes   : counted = sent inter %lld + sent intra %lld + local %lld "
         "= %lld (%.3f GiB); destination holds %lld\n",
         (long long)sent_inter, (long long)sent_intra, (long long)local,
         (long long)moved, (double)moved / BENCH_GIB, (long long)dst_all);
  if (moved != dst_all)
    printf("NOTE    : counted bytes differ from destination bytes\n");

  for (int r = 0; r < N_SRC; r++)
    BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_SRC, SRC_RANKS[r], 0, sbuf[r],
                                  (size_t)src_total));
  for (int r = 0; r < N_DST; r++)
    BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_DST, DST_RANKS[r], 0, dbuf[r],
                                  (size_t)dst_total));

  /* Warm-up, then check the result bit-exact. */
  t0 = bench_now();
  BENCH_CHECK(ctx, rs_plan_execute(plan));
  double t_warm = bench_now() - t0;
  int64_t bad1 = verify(dbuf, "after warm-up");
  printf("check   : warm-up execution %.3f s, result %s\n", t_warm,
         bad1 ? "WRONG" : "bit-exact");

  /* Baseline: memcpy of the same byte count between the same buffers. */
  double *mt = bench_xcalloc((size_t)reps + 1, sizeof *mt);
  double *mtn = bench_xcalloc((size_t)reps + 1, sizeof *mtn);
  timed_memcpy(dbuf, sbuf, dbytes, 1); /* warm */
  for (int i = 0; i < reps; i++) mt[i] = timed_memcpy(dbuf, sbuf, dbytes, 1);
  for (int i = 0; i < reps; i++)
    mtn[i] = timed_memcpy(dbuf, sbuf, dbytes, ncpu);
  double m1 = bench_min(mt, reps), mn = bench_min(mtn, reps);

  /* Timed executions into a poisoned destination, checked afterwards;
   * then the same over one copy thread a CPU (RS_PARAM_COPY_THREADS),
   * after an execution that starts the threads, checked too. */
  double *et = bench_xcalloc((size_t)reps, sizeof *et);
  double cpu_per_wall = timed_executions(ctx, plan, dbuf, reps, et);
  int64_t bad2 = verify(dbuf, "after timed runs");
  printf("check   : after %d timed executions, result %s\n", reps,
         bad2 ? "WRONG" : "bit-exact");
  BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_COPY_THREADS, ncpu));
  poison_dst(dbuf);
  BENCH_CHECK(ctx, rs_plan_execute(plan));
  int64_t bad3 = verify(dbuf, "after a threaded warm-up");
  double *etn = bench_xcalloc((size_t)reps, sizeof *etn);
  double cpu_per_wall_n = timed_executions(ctx, plan, dbuf, reps, etn);
  int64_t bad4 = verify(dbuf, "after threaded timed runs");
  printf("check   : %d threads: after the warm-up and %d timed executions, "
         "result %s\n", ncpu, reps, bad3 || bad4 ? "WRONG" : "bit-exact");
  bad2 |= bad3 | bad4;

  double emin = bench_min(et, reps);
  double emed = bench_median(et, reps);
  double enmin = bench_min(etn, reps), enmed = bench_median(etn, reps);
  double rate_n = (double)moved / enmin;
  double rate = (double)moved / emin;
  double rate_med = (double)moved / emed;
  double rate_m1 = (double)dst_all / m1;
  double rate_mn = (double)dst_all / mn;
  printf("execute : x %d, min %.3f s, median %.3f s -> %.2f GB/s best, "
         "%.2f GB/s median (counted bytes); %.2f CPU-s per wall-s\n",
         reps, emin, emed, rate / 1e9, rate_med / 1e9, cpu_per_wall);
  printf("execute : RS_PARAM_COPY_THREADS %d, x %d, min %.3f s, median %.3f "
         "s -> %.2f GB/s best, %.2f GB/s median; %.2f CPU-s per wall-s\n",
         ncpu, reps, enmin, enmed, rate_n / 1e9, (double)moved / enmed / 1e9,
         cpu_per_wall_n);
  printf("memcpy  : %.3f GiB, 1 thread best of %d %.3f s -> %.2f GB/s; %d "
         "threads best of %d %.3f s -> %.2f GB/s\n",
         (double)dst_all / BENCH_GIB, reps, m1, rate_m1 / 1e9, ncpu, reps,
         mn, rate_mn / 1e9);

  char a[64], b[64], c[64], memcpy_n[32];
  bench_table_header();
  snprintf(memcpy_n, sizeof memcpy_n, "memcpy %dT", ncpu);
  rate_row("execute best [GB/s] vs memcpy 1T", rate, rate_m1, "memcpy");
  rate_row("execute median [GB/s] vs memcpy 1T", rate_med, rate_m1, "memcpy");
  rate_row("execute best [GB/s] vs memcpy nT", rate, rate_mn, memcpy_n);
  rate_row("exec nT best [GB/s] vs memcpy nT", rate_n, rate_mn, memcpy_n);
  rate_row("exec nT best [GB/s] vs exec 1T", rate_n, rate, "execute 1T");
  snprintf(a, sizeof a, "%.2f", rate / rate_m1);
  snprintf(c, sizeof c, "%.2f", (rate / rate_m1) / 0.85);
  bench_table_row("ratio to memcpy 1T", a, "0.85 (target)", c);
  snprintf(a, sizeof a, "%.3f", (double)moved / BENCH_GIB);
  snprintf(b, sizeof b, "%.3f (dst)", (double)dst_all / BENCH_GIB);
  snprintf(c, sizeof c, "%.3f", (double)moved / (double)dst_all);
  bench_table_row("bytes per execution [GiB]", a, b, c);
  bench_table_row("result", bad1 || bad2 ? "WRONG" : "bit-exact", "-", "-");

  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  for (int r = 0; r < N_SRC; r++) free(sbuf[r]);
  for (int r = 0; r < N_DST; r++) free(dbuf[r]);
  free(mt);
  free(mtn);
  free(et);
  free(etn);
  return bad1 || bad2 ? 2 : 0;
}
