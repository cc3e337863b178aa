/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the libreshard benchmarks: the machine line, clocks,
 * peak memory, status checks, an aligned result table, reference values to
 * fill and verify bf16 boxes, box copies, and (when <mpi.h> comes first)
 * timing and checking runs across MPI ranks. Header-only (every function
 * static) so each bench stays one translation unit. */
#ifndef RS_BENCH_COMMON_H
#define RS_BENCH_COMMON_H

#include <reshard/reshard.h>

#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef RS_BENCH_CFLAGS
#define RS_BENCH_CFLAGS "(unknown)"
#endif
#ifndef RS_BENCH_BUILD_TYPE
#define RS_BENCH_BUILD_TYPE "(unknown)"
#endif
#ifndef RS_BENCH_COMPILER
#define RS_BENCH_COMPILER "(unknown)"
#endif

#define BENCH_GIB (1024.0 * 1024.0 * 1024.0)
#define BENCH_MIB (1024.0 * 1024.0)

/* Abort the bench with the status and the context's detail message. */
#define BENCH_CHECK(ctx, call)                                               \
  do {                                                                       \
    rs_status bench_st_ = (call);                                            \
    if (bench_st_ != RS_OK) {                                                \
      fprintf(stderr, "%s:%d: %s failed: %s (%s): %s\n", __FILE__, __LINE__, \
              #call, rs_status_name(bench_st_), rs_status_string(bench_st_), \
              rs_context_last_error(ctx));                                   \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

/* A plan figure summed (or maxed) over all ranks. */
static inline int64_t bench_stat_all(rs_context *ctx, rs_plan *p, rs_stat s) {
  int64_t v = 0;
  BENCH_CHECK(ctx, rs_plan_stat(p, RS_ALL_RANKS, s, &v));
  return v;
}

static inline void *bench_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static inline void *bench_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu x %zu bytes)\n", n, size);
    exit(1);
  }
  return p;
}

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads), seconds. */
static inline double bench_cpu_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v in place; returns the median. */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double bench_min(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++)
    if (v[i] < m) m = v[i];
  return m;
}

/* A "Vm...:" line of /proc/self/status in KiB; -1 when unavailable. */
static inline long bench_proc_status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  size_t klen = strlen(key);
  long v = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = strtol(line + klen + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return v;
}

/* Peak resident set so far (VmHWM), KiB; falls back to ru_maxrss. */
static inline long bench_peak_rss_kib(void) {
  long v = bench_proc_status_kib("VmHWM");
  if (v < 0) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) v = ru.ru_maxrss;
  }
  return v;
}

/* Starts VmHWM again from the resident set now (Linux: clear_refs 5);
 * false where it cannot, and VmHWM keeps the peak so far. */
static inline bool bench_reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

static inline long bench_rss_kib(void) {
  return bench_proc_status_kib("VmRSS");
}

static inline void bench_cpu_model(char *out, size_t n) {
  snprintf(out, n, "(unknown)");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *p = strchr(line, ':');
      if (p) {
        p++;
        while (*p == ' ' || *p == '\t') p++;
        size_t l = strlen(p);
        while (l && (p[l - 1] == '\n' || p[l - 1] == ' ')) p[--l] = '\0';
        snprintf(out, n, "%s", p);
      }
      break;
    }
  }
  fclose(f);
}

static inline int bench_cpus_allowed(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  return CPU_COUNT(&set);
}

/* Pin the calling thread to CPU @p cpu. Returns 0 on success. */
static inline int bench_pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

static inline void bench_print_machine(const char *bench) {
  char model[256];
  bench_cpu_model(model, sizeof model);
  printf("== %s (libreshard %s)\n", bench, rs_version_string());
  printf("machine : %ld cores online (%d allowed), CPU \"%s\"\n",
         sysconf(_SC_NPROCESSORS_ONLN), bench_cpus_allowed(), model);
  printf("compiler: %s (__VERSION__ \"%s\")\n", RS_BENCH_COMPILER,
         __VERSION__);
  printf("build   : %s, C flags \"%s\"\n", RS_BENCH_BUILD_TYPE,
         RS_BENCH_CFLAGS);
}

/* The closing table: one row per figure, measured beside its baseline. */
static inline void bench_table_header(void) {
  printf("\n%-34s %18s %18s %12s\n", "figure", "measured", "baseline",
         "meas/base");
  printf("%-34s %18s %18s %12s\n",
         "----------------------------------", "------------------",
         "------------------", "------------");
}

/* A figure's name must fit its column: bench/figures.py reads the table
 * back by the columns the header's dashes mark, and a longer name would
 * end the table there. So a bench whose name overflows fails at once. */
static inline void bench_table_row(const char *figure, const char *measured,
                            const char *baseline, const char *ratio) {
  if (strlen(figure) > 34) {
    fprintf(stderr, "bench: figure name over 34 characters: \"%s\"\n",
            figure);
    exit(2);
  }
  printf("%-34s %18s %18s %12s\n", figure, measured, baseline, ratio);
}

/* ---- reference values of bf16 tensors ------------------------------------ */

/* The bf16 bits element @p index (row-major, over the whole tensor) of
 * tensor number @p tensor holds, so every rank can fill and check its own
 * boxes. */
typedef uint16_t (*bench_value_fn)(int tensor, int64_t index);

/* Any bit pattern, NaNs and infinities included: for byte-exact moves. */
static inline uint16_t bench_value(int tensor, int64_t index) {
  uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull +
               (uint64_t)tensor * 0xBF58476D1CE4E5B9ull;
  return (uint16_t)(x >> 48);
}

/* Finite values like weights, for benches that quantize (under
 * bench_value nearly every fp8 block would hold a NaN): |x| < 1, spread
 * over 16 binades, the magnitude drifting every 2^19 elements, and one
 * element in 65536 eight times larger, so that 128 x 128 blocks side by
 * side get scales of their own. */
static inline uint16_t bench_weight_value(int tensor, int64_t index) {
  uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull +
               (uint64_t)tensor * 0xBF58476D1CE4E5B9ull;
  uint32_t hi = (uint32_t)(x >> 32);
  uint32_t sign = hi >> 31, mantissa = (hi >> 16) & 0x7Fu;
  uint32_t spread = (((hi >> 23) & 0xFFu) * 10u) >> 8; /* 0..9 */
  uint32_t drift = (uint32_t)((uint64_t)index >> 19) & 3u;
  uint32_t spike = (hi & 0xFFFFu) == 0 ? 3u : 0u;
  uint32_t exponent = 123u - spread - drift + spike;
  return (uint16_t)(sign << 15 | exponent << 7 | mantissa);
}

/* Fill the box [off, off+ext) of a 1-D or 2-D tensor, held dense row-major
 * at @p p, with the values @p value gives. */
static inline void bench_fill_box_with(bench_value_fn value, uint16_t *p,
                                       int tensor, int ndim,
                                       const int64_t *shape,
                                       const int64_t *off,
                                       const int64_t *ext) {
  int64_t cols = ndim > 1 ? shape[1] : 1;
  int64_t ecols = ndim > 1 ? ext[1] : 1, ocol = ndim > 1 ? off[1] : 0;
  for (int64_t r = 0; r < ext[0]; r++)
    for (int64_t c = 0; c < ecols; c++)
      p[r * ecols + c] = value(tensor, (off[0] + r) * cols + ocol + c);
}

/* Elements of the box (as bench_fill_box_with) that differ from @p value. */
static inline int64_t bench_wrong_in_box_with(bench_value_fn value,
                                              const uint16_t *p, int tensor,
                                              int ndim, const int64_t *shape,
                                              const int64_t *off,
                                              const int64_t *ext) {
  int64_t cols = ndim > 1 ? shape[1] : 1;
  int64_t ecols = ndim > 1 ? ext[1] : 1, ocol = ndim > 1 ? off[1] : 0;
  int64_t wrong = 0;
  for (int64_t r = 0; r < ext[0]; r++)
    for (int64_t c = 0; c < ecols; c++)
      wrong += p[r * ecols + c] != value(tensor, (off[0] + r) * cols + ocol + c);
  return wrong;
}

/* bench_fill_box_with and bench_wrong_in_box_with of bench_value. */
static inline void bench_fill_box(uint16_t *p, int tensor, int ndim,
                                  const int64_t *shape, const int64_t *off,
                                  const int64_t *ext) {
  bench_fill_box_with(bench_value, p, tensor, ndim, shape, off, ext);
}

static inline int64_t bench_wrong_in_box(const uint16_t *p, int tensor,
                                         int ndim, const int64_t *shape,
                                         const int64_t *off,
                                         const int64_t *ext) {
  return bench_wrong_in_box_with(bench_value, p, tensor, ndim, shape, off,
                                 ext);
}

/* Copy the box [off, off+ext) of a dense row-major 1-D or 2-D tensor of
 * @p elem_bytes elements held whole at @p whole into @p box, dense. */
static inline void bench_copy_box_out(void *box, const void *whole,
                                      size_t elem_bytes, int ndim,
                                      const int64_t *shape,
                                      const int64_t *off,
                                      const int64_t *ext) {
  int64_t cols = ndim > 1 ? shape[1] : 1;
  int64_t ecols = ndim > 1 ? ext[1] : 1, ocol = ndim > 1 ? off[1] : 0;
  size_t row = (size_t)ecols * elem_bytes;
  const char *from = (const char *)whole + ((size_t)(off[0] * cols + ocol)) * elem_bytes;
  char *to = box;
  if (ecols == cols) { /* whole rows: one run */
    memcpy(to, from, row * (size_t)ext[0]);
    return;
  }
  for (int64_t r = 0; r < ext[0]; r++)
    memcpy(to + (size_t)r * row, from + (size_t)(r * cols) * elem_bytes, row);
}

/* ---- MPI benches (include <mpi.h> before this header to get these) ------- */
#ifdef MPI_VERSION
#include <reshard/reshard_mpi.h>

/* A context over MPI_COMM_WORLD; a rank that cannot make one says why and
 * aborts the job. */
static inline rs_context *bench_mpi_context(void) {
  rs_context *ctx = NULL;
  if (rs_context_create_mpi(MPI_COMM_WORLD, &ctx) != RS_OK) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: %s\n", rank, rs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return ctx;
}

/* Seconds @p run takes on the slowest rank: barriers on both sides. */
static inline double bench_mpi_timed(void (*run)(void *), void *arg) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  run(arg);
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime() - t0;
}

/* A barrier that sleeps while it waits, for untimed work that only some
 * ranks do (filling, checking): with more ranks than cores, ranks spinning
 * in MPI_Barrier would take the cores from the ranks that work. */
static inline void bench_mpi_quiet_barrier(void) {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
  }
}

/* One warm-up and @p reps timed runs of @p run, each with this rank's
 * @p ndst destination buffers (dst[b] of dst_bytes[b]; none when ndst is 0)
 * poisoned first and checked after by @p wrong (elements that differ); any
 * wrong element on any rank aborts the job with exit code 2. Times go to
 * seconds[0..reps-1]. */
static inline void bench_mpi_poison_run_check_buffers(
    const char *what, void (*run)(void *), int64_t (*wrong)(void *),
    void *arg, void *const *dst, const size_t *dst_bytes, int ndst,
    double *seconds, int reps) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  for (int k = 0; k < reps + 1; k++) {
    for (int b = 0; b < ndst; b++) memset(dst[b], 0xA5, dst_bytes[b]);
    bench_mpi_quiet_barrier();
    double s = bench_mpi_timed(run, arg);
    if (k > 0) seconds[k - 1] = s;
    int64_t mine = ndst ? wrong(arg) : 0, all = 0;
    bench_mpi_quiet_barrier();
    MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (all) {
      if (me == 0)
        fprintf(stderr, "%s: %lld wrong elements\n", what, (long long)all);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
}

/* bench_mpi_poison_run_check_buffers with one destination buffer (@p dst,
 * NULL for none). */
static inline void bench_mpi_poison_run_check(
    const char *what, void (*run)(void *), int64_t (*wrong)(void *),
    void *arg, void *dst, size_t dst_bytes, double *seconds, int reps) {
  bench_mpi_poison_run_check_buffers(what, run, wrong, arg, &dst, &dst_bytes,
                                     dst ? 1 : 0, seconds, reps);
}

#endif /* MPI_VERSION */

#endif
