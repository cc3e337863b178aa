/* Helpers shared by the libreshard benchmarks: the machine line, clocks,
 * peak memory, status checks, an aligned result table. Header-only (every
 * function static) so each bench stays one translation unit. */
#ifndef RS_BENCH_COMMON_H
#define RS_BENCH_COMMON_H

#include <reshard/reshard.h>

#include <sched.h>
#include <stdarg.h>
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

static inline void bench_table_row(const char *figure, const char *measured,
                            const char *baseline, const char *ratio) {
  printf("%-34s %18s %18s %12s\n", figure, measured, baseline, ratio);
}

#endif
