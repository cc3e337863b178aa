/* SPDX-License-Identifier: Apache-2.0 */
/* bench_async_overlap: what RS_PARAM_PROGRESS_THREAD buys a caller on a
 * host context. One run times, with the setting off (the baseline: the
 * execution advances only inside rs_plan_wait) and on (a progress thread
 * runs it), the sequence
 *
 *   rs_plan_execute_async; N ms of the caller's own work; rs_plan_wait
 *
 * on the in-process transport, one bf16 tensor of 16384 x 8192 (256 MiB)
 * moved from rows on ranks 0-1 to columns on ranks 2-3 (each destination
 * piece a strided copy). The caller's work is a CPU-bound loop of N ms
 * (default: the time of one execution alone, where overlap matters most).
 * Off, the sequence costs N + copy; on, max(N, copy) on a machine with a
 * core to spare. The destination is checked bit-exact after every mode.
 *
 * Usage: bench_async_overlap [repetitions (5)] [work ms (copy time)]. */
#include "bench_common.h"

enum { ROWS = 16384, COLS = 8192, WORLD = 4 };

static uint16_t *src[2], *dst[2];
static const int64_t shape[2] = {ROWS, COLS};

static void src_box(int s, int64_t *off, int64_t *ext) {
  off[0] = (int64_t)s * (ROWS / 2), off[1] = 0;
  ext[0] = ROWS / 2, ext[1] = COLS;
}
static void dst_box(int d, int64_t *off, int64_t *ext) {
  off[0] = 0, off[1] = (int64_t)d * (COLS / 2);
  ext[0] = ROWS, ext[1] = COLS / 2;
}

/* The caller's work: spin on the clock for ms milliseconds. */
static void work(double ms) {
  double until = bench_now() + ms / 1e3;
  volatile uint64_t x = 1;
  while (bench_now() < until)
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ull + 1;
}

static int64_t wrong(void) {
  int64_t n = 0, off[2], ext[2];
  for (int d = 0; d < 2; d++) {
    dst_box(d, off, ext);
    n += bench_wrong_in_box(dst[d], 0, 2, shape, off, ext);
  }
  return n;
}

/* One mode: reps runs of async + work + wait; min and median in ms. */
static void run_mode(rs_context *ctx, rs_plan *plan, int thread, int reps,
                     double work_ms, double *min_ms, double *med_ms,
                     int64_t *bad) {
  BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_PROGRESS_THREAD, thread));
  double *t = bench_xcalloc((size_t)reps, sizeof *t);
  *bad = 0;
  for (int r = 0; r < reps; r++) {
    memset(dst[0], 0xA5, (size_t)ROWS * COLS); /* poison: 2 halves */
    memset(dst[1], 0xA5, (size_t)ROWS * COLS);
    double t0 = bench_now();
    BENCH_CHECK(ctx, rs_plan_execute_async(plan, NULL));
    work(work_ms);
    BENCH_CHECK(ctx, rs_plan_wait(plan));
    t[r] = (bench_now() - t0) * 1e3;
    *bad += wrong();
  }
  *min_ms = bench_min(t, reps);
  *med_ms = bench_median(t, reps);
  free(t);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  double work_ms = argc > 2 ? atof(argv[2]) : -1;
  if (reps < 1) reps = 1;
  bench_print_machine("bench_async_overlap");
  size_t half = (size_t)ROWS * COLS / 2 * sizeof(uint16_t);
  printf(
      "workload: bf16 %d x %d (%.0f MiB), rows on ranks 0-1 -> columns "
      "on ranks 2-3, in process\n",
      ROWS, COLS, 2.0 * (double)half / BENCH_MIB);
  int64_t off[2], ext[2];
  for (int i = 0; i < 2; i++) {
    src[i] = bench_xmalloc(half);
    dst[i] = bench_xmalloc(half);
    src_box(i, off, ext);
    bench_fill_box(src[i], 0, 2, shape, off, ext);
  }
  rs_context *ctx = NULL;
  BENCH_CHECK(NULL, rs_context_create_local(WORLD, &ctx));
  rs_layout *lay[2];
  for (int side = 0; side < 2; side++) {
    BENCH_CHECK(ctx, rs_layout_create(ctx, &lay[side]));
    BENCH_CHECK(ctx,
                rs_layout_add_tensor(lay[side], "w", RS_DTYPE_BF16, 2, shape));
    for (int i = 0; i < 2; i++) {
      if (side == 0)
        src_box(i, off, ext);
      else
        dst_box(i, off, ext);
      BENCH_CHECK(ctx, rs_layout_add_shard(lay[side], "w", side * 2 + i, off,
                                           ext, 0, 0, NULL));
    }
  }
  rs_plan *plan = NULL;
  BENCH_CHECK(ctx, rs_plan_create(lay[0], lay[1], &plan));
  for (int i = 0; i < 2; i++) {
    BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_SRC, i, 0, src[i], half));
    BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_DST, 2 + i, 0, dst[i], half));
  }
  /* The copy alone, on the caller's thread (warm-up first). */
  BENCH_CHECK(ctx, rs_plan_execute(plan));
  int64_t bad_copy = wrong();
  double *t = bench_xcalloc((size_t)reps, sizeof *t);
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    BENCH_CHECK(ctx, rs_plan_execute(plan));
    t[r] = (bench_now() - t0) * 1e3;
  }
  double copy_ms = bench_median(t, reps);
  printf(
      "copy    : rs_plan_execute alone x %d, min %.1f ms, median %.1f "
      "ms\n",
      reps, bench_min(t, reps), copy_ms);
  free(t);
  if (work_ms < 0) work_ms = copy_ms;
  printf(
      "work    : %.1f ms of CPU-bound caller work between "
      "rs_plan_execute_async and rs_plan_wait\n",
      work_ms);
  double off_min, off_med, on_min, on_med;
  int64_t bad_off, bad_on;
  run_mode(ctx, plan, 0, reps, work_ms, &off_min, &off_med, &bad_off);
  run_mode(ctx, plan, 1, reps, work_ms, &on_min, &on_med, &bad_on);
  printf(
      "off     : async + work + wait x %d, min %.1f ms, median %.1f ms "
      "(work + copy = %.1f ms)\n",
      reps, off_min, off_med, work_ms + copy_ms);
  printf(
      "on      : async + work + wait x %d, min %.1f ms, median %.1f ms "
      "(max(work, copy) = %.1f ms)\n",
      reps, on_min, on_med, work_ms > copy_ms ? work_ms : copy_ms);
  char a[32], b[32], c[32];
  bench_table_header();
  snprintf(a, sizeof a, "%.1f", on_med);
  snprintf(b, sizeof b, "%.1f (thread off)", off_med);
  snprintf(c, sizeof c, "%.2f", on_med / off_med);
  bench_table_row("async+work+wait median [ms]", a, b, c);
  snprintf(a, sizeof a, "%.1f", on_min);
  snprintf(b, sizeof b, "%.1f (thread off)", off_min);
  snprintf(c, sizeof c, "%.2f", on_min / off_min);
  bench_table_row("async+work+wait min [ms]", a, b, c);
  snprintf(a, sizeof a, "%.1f", on_med - work_ms);
  snprintf(b, sizeof b, "%.1f (copy alone)", copy_ms);
  snprintf(c, sizeof c, "%.2f", (on_med - work_ms) / copy_ms);
  bench_table_row("cost beyond the work [ms]", a, b, c);
  bench_table_row("result",
                  bad_copy || bad_off || bad_on ? "WRONG" : "bit-exact", "-",
                  "-");
  rs_plan_destroy(plan);
  rs_layout_destroy(lay[0]);
  rs_layout_destroy(lay[1]);
  rs_context_destroy(ctx);
  for (int i = 0; i < 2; i++) {
    free(src[i]);
    free(dst[i]);
  }
  return bad_copy || bad_off || bad_on ? 1 : 0;
}
