/* Shared by the reliability MPI programs (tests/faults/fault.c,
 * tests/soak/soak.c): the clock, resident memory, element values, and the
 * all-to-all reshard every fault mode uses. Header-only, plain C + MPI (no
 * Criterion: it forks, which MPI does not survive). */
#ifndef RESHARD_TESTS_REL_MPI_H
#define RESHARD_TESTS_REL_MPI_H

#include <mpi.h>
#include <reshard/reshard_mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double rel_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void rel_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Resident set size of this process in KiB (VmRSS), -1 if unknown. */
static inline long rel_vmrss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kib = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}

static inline uint64_t rel_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The value of element lin of tensor t in generation gen (int32 tensors). */
static inline int32_t rel_value(int gen, int t, int64_t lin) {
  return (int32_t)(uint32_t)rel_mix(((uint64_t)(unsigned)gen << 40) ^
                                    ((uint64_t)(unsigned)t << 32) ^
                                    (uint64_t)lin);
}

#define REL_POISON_BYTE 0xA5
#define REL_POISON ((int32_t)0xA5A5A5A5)

/* ---- the all-to-all reshard --------------------------------------------
 * One int32 tensor "w" of n x n, n = b * np: rank r holds rows
 * [b r, b (r+1)) in the source and columns [b r, b (r+1)) in the
 * destination (dense, buffer 0 on both sides), so every rank sends a b x b
 * block to every other. `shift` moves the destination split between rank 0
 * and rank 1 (a layout other ranks do not have). */

typedef struct rel_a2a {
  int np, b, n;
  int32_t *src, *dst; /* this rank's b x n rows, n x b columns */
} rel_a2a;

static inline void rel_a2a_init(rel_a2a *a, int np, int b) {
  a->np = np;
  a->b = b;
  a->n = b * np;
  a->src = malloc((size_t)a->b * (size_t)a->n * sizeof *a->src);
  a->dst = malloc((size_t)a->n * (size_t)(a->b + np) * sizeof *a->dst);
  if (!a->src || !a->dst) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

static inline void rel_a2a_free(rel_a2a *a) {
  free(a->src);
  free(a->dst);
}

/* Destination columns of rank r: [lo, hi). */
static inline void rel_a2a_cols(const rel_a2a *a, int r, int shift,
                                int64_t *lo, int64_t *hi) {
  *lo = (int64_t)a->b * r + (r >= 1 ? shift : 0);
  *hi = (int64_t)a->b * (r + 1) + (r == 0 ? shift : 0);
}

/* Add to src/dst every rank's shards (all = true), or only rank me's. */
static inline rs_status rel_a2a_layouts(const rel_a2a *a, rs_layout *src,
                                        rs_layout *dst, int me, bool all,
                                        int shift, rs_dtype dt) {
  const int64_t shape[2] = {a->n, a->n};
  rs_status st = rs_layout_add_tensor(src, "w", dt, 2, shape);
  if (st == RS_OK) st = rs_layout_add_tensor(dst, "w", dt, 2, shape);
  for (int r = 0; r < a->np && st == RS_OK; r++) {
    if (!all && r != me) continue;
    int64_t so[2] = {(int64_t)a->b * r, 0}, se[2] = {a->b, a->n};
    int64_t lo, hi;
    rel_a2a_cols(a, r, shift, &lo, &hi);
    int64_t doff[2] = {0, lo}, dext[2] = {a->n, hi - lo};
    st = rs_layout_add_shard(src, "w", r, so, se, 0, 0, NULL);
    if (st == RS_OK) st = rs_layout_add_shard(dst, "w", r, doff, dext, 0, 0, NULL);
  }
  return st;
}

static inline size_t rel_a2a_src_bytes(const rel_a2a *a) {
  return (size_t)a->b * (size_t)a->n * sizeof(int32_t);
}
static inline size_t rel_a2a_dst_bytes(const rel_a2a *a) {
  return (size_t)a->n * (size_t)a->b * sizeof(int32_t);
}

static inline void rel_a2a_fill(rel_a2a *a, int me, int gen) {
  for (int i = 0; i < a->b; i++)
    for (int j = 0; j < a->n; j++) {
      int64_t lin = ((int64_t)a->b * me + i) * a->n + j;
      a->src[(size_t)i * (size_t)a->n + (size_t)j] = rel_value(gen, 0, lin);
    }
}

static inline void rel_a2a_poison(rel_a2a *a) {
  memset(a->dst, REL_POISON_BYTE, rel_a2a_dst_bytes(a));
}

/* Destination elements of rank me (unshifted split) that hold the value
 * of generation gen, still hold the poison, and hold anything else. */
static inline void rel_a2a_count(const rel_a2a *a, int me, int gen,
                                 int64_t *right, int64_t *poisoned,
                                 int64_t *wrong) {
  *right = *poisoned = *wrong = 0;
  for (int i = 0; i < a->n; i++)
    for (int j = 0; j < a->b; j++) {
      int64_t lin = (int64_t)i * a->n + (int64_t)a->b * me + j;
      int32_t v = a->dst[(size_t)i * (size_t)a->b + (size_t)j];
      if (v == rel_value(gen, 0, lin)) ++*right;
      else if (v == REL_POISON) ++*poisoned;
      else ++*wrong;
    }
}

#endif
