/* SPDX-License-Identifier: Apache-2.0 */
/* bench_convert: single-thread bandwidth of the host conversions beside a
 * memcpy of the same source bytes, in the same run. Two sets of rows:
 *
 * - the loops of core/copy/convert.h on dense memory: bf16 -> e4m3 block
 *   quantization (128 x 128 blocks; amax pass and quantize pass, both
 *   scale rules), bf16 -> f32, f32 -> bf16 and f16 -> bf16;
 * - the host engine's converting copies (rsi_host_engine()->ops->copy,
 *   one rsi_copy as the executor issues it): the same bf16 matrix as a
 *   strided box of a wider buffer (whole blocks), quantized into a dense
 *   fp8 stream and into a strided fp8 buffer, its block scales, and cast
 *   to a dense f32 stream.
 *
 * Target (the rows marked *): >= 0.5x the memcpy bandwidth, judged on the
 * medians.
 *
 * The source is a 4096 x 7168 matrix (a DeepSeek-V3 projection's shape),
 * far past the caches. Every output is checked, so a no-op cannot pass:
 * the dense rows against convert_elem.h's per-element functions at a
 * spread of points, the engine rows against rsi_quantize_blocks of the
 * same values at those points (its scales whole).
 *
 * Usage: bench_convert [repetitions]   (default 9; each repetition times
 * the memcpy, then the conversion; min and median of each) */
#include "bench_common.h"

#include <stdbool.h>

#include "copy/convert.h"
#include "copy/convert_elem.h"
#include "base/dtype.h"
#include "copy/engine.h"

enum { ROWS = 4096, COLS = 7168, BLOCK = 128 };
#define N ((int64_t)ROWS * COLS)
#define NSCALES ((ROWS / BLOCK) * (COLS / BLOCK))
/* The engine's source: the matrix as columns [BOX_COL, BOX_COL + COLS) of
 * a ROWS x WIDE one; its fp8 destination when strided alike. */
enum { BOX_COL = BLOCK, WIDE = COLS + 2 * BLOCK };

static void check_status(rs_status st, rsi_err *err, const char *what) {
  if (st != RS_OK) {
    fprintf(stderr, "%s failed: %s: %s\n", what, rs_status_name(st), err->msg);
    exit(1);
  }
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* Values like weights: normal, spread over a few binades, some blocks
 * larger than others. */
static float weight_value(int64_t i) {
  uint64_t h = mix((uint64_t)i * 0x9E3779B97F4A7C15ull + 1);
  float unit = (float)(h >> 40) / (float)(1 << 24) - 0.5f; /* [-0.5, 0.5) */
  int64_t r = i / COLS, c = i % COLS;
  float block_scale =
      (float)(1 + (mix((uint64_t)(r / BLOCK * 131 + c / BLOCK)) & 15));
  return unit * 0.02f * block_scale;
}

typedef struct bufs {
  uint16_t *bf16, *f16, *out16, *wide;
  float *f32, *out32;
  uint8_t *fp8, *wide_fp8, *ref_fp8;
  float *scales, *ref_scales;
  char *copy_dst;
} bufs;

typedef enum job {
  QUANT,
  QUANT_UE8M0,
  BF16_F32,
  F32_BF16,
  F16_BF16,
  ENGINE_QUANT,
  ENGINE_QUANT_STRIDED,
  ENGINE_SCALES,
  ENGINE_CAST
} job;

/* The rows with a target (the issue's: bf16 -> e4m3 and bf16 <-> f32)
 * are marked with a '*'. */
static const char *job_name(job j) {
  switch (j) {
    case QUANT: return "* bf16 -> e4m3 128x128 (amax/448)";
    case QUANT_UE8M0: return "* bf16 -> e4m3 128x128 (UE8M0)";
    case BF16_F32: return "* bf16 -> f32";
    case F32_BF16: return "* f32 -> bf16";
    case F16_BF16: return "  f16 -> bf16";
    case ENGINE_QUANT: return "* engine QUANTIZE -> dense";
    case ENGINE_QUANT_STRIDED: return "* engine QUANTIZE -> strided";
    case ENGINE_SCALES: return "* engine SCALES";
    case ENGINE_CAST: return "* engine CAST bf16 -> f32";
  }
  return "?";
}

static bool has_target(job j) { return j != F16_BF16; }

static size_t source_bytes(job j) {
  return (size_t)N * (j == F32_BF16 ? 4 : 2);
}

/* One engine copy of the box (the whole of it, lo 0 to hi N): QUANTIZE,
 * SCALES or CAST from the strided bf16 box. */
static rs_status engine_copy(job j, bufs *b, rsi_err *err) {
  rsi_copy c = {
      .ndim = 2, .esize = 2, .src_dtype = RS_DTYPE_BF16,
      .blocks = {ROWS, WIDE, BLOCK, BLOCK, 0, BOX_COL, false},
      .dense_dst = true, .src = (const char *)(b->wide + BOX_COL), .lo = 0,
      .hi = N, .extent = {ROWS, COLS}, .src_strides = {WIDE, 1}};
  switch (j) {
    case ENGINE_QUANT_STRIDED:
      c.dense_dst = false;
      c.dst_strides[0] = WIDE;
      c.dst_strides[1] = 1;
      c.dst = (char *)(b->wide_fp8 + BOX_COL);
      /* fallthrough */
    case ENGINE_QUANT:
      c.op = RSI_COPY_QUANTIZE;
      c.dst_dtype = RS_DTYPE_F8_E4M3;
      if (j == ENGINE_QUANT) c.dst = (char *)b->fp8;
      break;
    case ENGINE_SCALES: /* a box of the grid of blocks */
      c.op = RSI_COPY_SCALES;
      c.dst_dtype = RS_DTYPE_F32;
      c.blocks.col0 = BOX_COL / BLOCK;
      c.extent[0] = ROWS / BLOCK;
      c.extent[1] = COLS / BLOCK;
      c.hi = NSCALES;
      c.dst = (char *)b->scales;
      break;
    default:
      c.op = RSI_COPY_CAST;
      c.dst_dtype = RS_DTYPE_F32;
      c.dst = (char *)b->out32;
      break;
  }
  rsi_engine *e = rsi_host_engine();
  return e->ops->copy(e, &c, 1, NULL, err);
}

static void run_job(job j, bufs *b) {
  rsi_err err = {0};
  rs_status st = RS_OK;
  const int64_t shape[2] = {ROWS, COLS};
  switch (j) {
    case QUANT:
    case QUANT_UE8M0:
      st = rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, b->bf16, b->fp8,
                               b->scales, BLOCK, BLOCK, j == QUANT_UE8M0, &err);
      break;
    case BF16_F32:
      st = rsi_convert_cast_rows(RS_DTYPE_F32, b->out32, N, RS_DTYPE_BF16,
                                 b->bf16, N, 1, N, &err);
      break;
    case F32_BF16:
      st = rsi_convert_cast_rows(RS_DTYPE_BF16, b->out16, N, RS_DTYPE_F32,
                                 b->f32, N, 1, N, &err);
      break;
    case F16_BF16:
      st = rsi_convert_cast_rows(RS_DTYPE_BF16, b->out16, N, RS_DTYPE_F16,
                                 b->f16, N, 1, N, &err);
      break;
    default: st = engine_copy(j, b, &err); break;
  }
  check_status(st, &err, job_name(j));
}

/* Elements of the output that differ from the per-element functions (the
 * reference, for the engine's fp8), at ~4096 points spread over the
 * tensor; every scale of the engine's SCALES. */
static int64_t wrong_points(job j, const bufs *b) {
  int64_t wrong = 0;
  if (j == ENGINE_SCALES)
    return memcmp(b->scales, b->ref_scales, sizeof(float) * NSCALES) != 0;
  for (int64_t i = 0; i < N; i += N / 4093) {
    int64_t r = i / COLS, c = i % COLS;
    switch (j) {
      case QUANT:
      case QUANT_UE8M0: {
        float s = b->scales[(r / BLOCK) * (COLS / BLOCK) + c / BLOCK];
        wrong += b->fp8[i] != rsi_e4m3_quantize(rsi_bf16_to_f32(b->bf16[i]), s);
        break;
      }
      case BF16_F32:
      case ENGINE_CAST:
        wrong += rsi_f32_bits(b->out32[i]) !=
                 rsi_f32_bits(rsi_bf16_to_f32(b->bf16[i]));
        break;
      case F32_BF16: wrong += b->out16[i] != rsi_f32_to_bf16(b->f32[i]); break;
      case F16_BF16: wrong += b->out16[i] != rsi_f16_to_bf16(b->f16[i]); break;
      case ENGINE_QUANT: wrong += b->fp8[i] != b->ref_fp8[i]; break;
      case ENGINE_QUANT_STRIDED:
        wrong += b->wide_fp8[r * WIDE + BOX_COL + c] != b->ref_fp8[i];
        break;
      case ENGINE_SCALES: break;
    }
  }
  return wrong;
}

static void poison(job j, bufs *b) {
  switch (j) {
    case QUANT:
    case QUANT_UE8M0:
    case ENGINE_QUANT:
    case ENGINE_SCALES:
      memset(b->fp8, 0xA5, (size_t)N);
      memset(b->scales, 0xA5, sizeof(float) * NSCALES);
      break;
    case ENGINE_QUANT_STRIDED:
      memset(b->wide_fp8, 0xA5, (size_t)ROWS * WIDE);
      break;
    case BF16_F32:
    case ENGINE_CAST: memset(b->out32, 0xA5, (size_t)N * 4); break;
    default: memset(b->out16, 0xA5, (size_t)N * 2); break;
  }
}

typedef struct timing {
  double conv_min, conv_median, copy_min, copy_median; /* seconds */
} timing;

/* Seconds of the conversion and of the memcpy baseline, timed in turn (so
 * that both see the same machine load), after one warm-up. */
static timing time_job(job j, bufs *b, int reps) {
  double *tc = bench_xmalloc(sizeof(double) * (size_t)reps);
  double *tm = bench_xmalloc(sizeof(double) * (size_t)reps);
  const void *src = j == F32_BF16 ? (const void *)b->f32
                    : j == F16_BF16 ? (const void *)b->f16
                                    : (const void *)b->bf16;
  for (int k = -1; k < reps; k++) {
    double t0 = bench_now();
    memcpy(b->copy_dst, src, source_bytes(j));
    double t1 = bench_now();
    poison(j, b);
    double t2 = bench_now();
    run_job(j, b);
    double t3 = bench_now();
    if (k >= 0) {
      tm[k] = t1 - t0;
      tc[k] = t3 - t2;
    }
    if (wrong_points(j, b)) {
      fprintf(stderr, "%s: wrong output\n", job_name(j));
      exit(2);
    }
  }
  timing t = {bench_min(tc, reps), bench_median(tc, reps), bench_min(tm, reps),
              bench_median(tm, reps)};
  free(tc);
  free(tm);
  return t;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 9;
  if (reps < 1) reps = 1;
  bench_print_machine("bench_convert");
  if (bench_pin_to_cpu(0) != 0) printf("(could not pin to CPU 0)\n");
  printf("source  : %d x %d elements, %d repetitions, one thread; engine "
         "rows: a strided box of %d x %d\n",
         ROWS, COLS, reps, ROWS, WIDE);

  bufs b;
  b.bf16 = bench_xmalloc((size_t)N * 2);
  b.f16 = bench_xmalloc((size_t)N * 2);
  b.out16 = bench_xmalloc((size_t)N * 2);
  b.wide = bench_xmalloc((size_t)ROWS * WIDE * 2);
  b.f32 = bench_xmalloc((size_t)N * 4);
  b.out32 = bench_xmalloc((size_t)N * 4);
  b.fp8 = bench_xmalloc((size_t)N);
  b.wide_fp8 = bench_xmalloc((size_t)ROWS * WIDE);
  b.ref_fp8 = bench_xmalloc((size_t)N);
  b.scales = bench_xmalloc(sizeof(float) * NSCALES);
  b.ref_scales = bench_xmalloc(sizeof(float) * NSCALES);
  b.copy_dst = bench_xmalloc((size_t)N * 4);
  for (int64_t i = 0; i < N; i++) {
    float v = weight_value(i);
    b.f32[i] = v;
    b.bf16[i] = rsi_f32_to_bf16(v);
    b.f16[i] = rsi_f32_to_f16(v);
  }
  /* the box holds the matrix; the columns around it, other values */
  for (int64_t r = 0; r < ROWS; r++)
    for (int64_t c = 0; c < WIDE; c++)
      b.wide[r * WIDE + c] =
          c >= BOX_COL && c < BOX_COL + COLS
              ? b.bf16[r * COLS + c - BOX_COL]
              : rsi_f32_to_bf16(weight_value(r * COLS + c % COLS) * 3);
  memset(b.copy_dst, 0, (size_t)N * 4);
  memset(b.out16, 0, (size_t)N * 2);
  memset(b.out32, 0, (size_t)N * 4);
  memset(b.wide_fp8, 0, (size_t)ROWS * WIDE);
  rsi_err err = {0};
  const int64_t shape[2] = {ROWS, COLS};
  check_status(rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, b.bf16, b.ref_fp8,
                                   b.ref_scales, BLOCK, BLOCK, false, &err),
               &err, "reference quantization");

  const job jobs[] = {QUANT,        QUANT_UE8M0,          BF16_F32,
                      F32_BF16,     F16_BF16,             ENGINE_QUANT,
                      ENGINE_QUANT_STRIDED, ENGINE_SCALES, ENGINE_CAST};
  enum { NJOBS = sizeof jobs / sizeof jobs[0] };
  timing t[NJOBS];
  for (int k = 0; k < NJOBS; k++) t[k] = time_job(jobs[k], &b, reps);

  printf("\nGB/s of source bytes, min time (best) and median time; ratio: "
         "conversion / memcpy\n");
  printf("%-34s %16s %16s %14s\n", "figure", "conv best/med", "memcpy best/med",
         "ratio best/med");
  printf("%-34s %16s %16s %14s\n", "----------------------------------",
         "----------------", "----------------", "--------------");
  int failed = 0;
  double worst = 1e9;
  for (int k = 0; k < NJOBS; k++) {
    double bytes = (double)source_bytes(jobs[k]) / 1e9;
    double cb = bytes / t[k].conv_min, cm = bytes / t[k].conv_median;
    double mb = bytes / t[k].copy_min, mm = bytes / t[k].copy_median;
    char conv[32], copy[32], ratio[32];
    snprintf(conv, sizeof conv, "%.2f / %.2f", cb, cm);
    snprintf(copy, sizeof copy, "%.2f / %.2f", mb, mm);
    snprintf(ratio, sizeof ratio, "%.2fx / %.2fx", cb / mb, cm / mm);
    printf("%-34s %16s %16s %14s\n", job_name(jobs[k]), conv, copy, ratio);
    if (has_target(jobs[k])) {
      failed += cm / mm < 0.5;
      worst = cm / mm < worst ? cm / mm : worst;
    }
  }
  printf("\ntarget: >= 0.5x memcpy of the source bytes (medians), rows "
         "marked *: %s (lowest %.2fx)\n",
         failed ? "FAIL" : "PASS", worst);
  free(b.bf16);
  free(b.f16);
  free(b.out16);
  free(b.wide);
  free(b.f32);
  free(b.out32);
  free(b.fp8);
  free(b.wide_fp8);
  free(b.ref_fp8);
  free(b.scales);
  free(b.ref_scales);
  free(b.copy_dst);
  return 0;
}
