/* SPDX-License-Identifier: Apache-2.0 */
/* The one harness of the libreshard programs that run under mpiexec
 * (mpi_cases.c, mpi_fault.c, mpi_victim.c, mpi_interleave.c here, and
 * tests/soak/soak.c): named cases that every rank runs and whose results
 * are combined over MPI_COMM_WORLD, a model of a global layout (tensors and
 * every rank's shards, computed identically on every rank; the all-to-all
 * reshard the fault programs use is one), layouts built from it (own
 * shards plus rs_layout_allgather, or the whole thing locally), buffers
 * filled with the values of tests/common/th_value.h and checked or counted
 * element by element, one end-to-end transfer, and the clock and resident
 * memory.
 *
 * Plain C + MPI: no Criterion (it forks, which MPI does not survive). */
#ifndef RESHARD_TESTS_MPI_HARNESS_H
#define RESHARD_TESTS_MPI_HARNESS_H

#include <mpi.h>
#include <reshard/reshard_mpi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* This process's rank and the size of MPI_COMM_WORLD (set by h_init). */
extern int h_rank, h_np;

void h_init(int *argc, char ***argv);
/* h_init with MPI_Init_thread at the `required` level; the level MPI
 * provides. */
int h_init_thread(int *argc, char ***argv, int required);
/* Print the summary, finalize MPI; returns the exit code (0: all passed). */
int h_finish(void);

/* ---- case results --------------------------------------------------- */

typedef struct hcase {
  bool failed;
  char why[1536]; /* the first failure on this rank */
} hcase;

/* Record a failure (the first one wins) unless ok; returns ok. */
bool h_expect(hcase *c, bool ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
#define EXPECT(c, cond, ...) h_expect((c), (cond), __VA_ARGS__)

/* EXPECT st == RS_OK, with the status name and the context's message. */
bool h_ok(hcase *c, rs_status st, const rs_context *ctx, const char *what);
/* EXPECT st == want. */
bool h_status(hcase *c, rs_status st, rs_status want, const rs_context *ctx,
              const char *what);

/* Collective over MPI_COMM_WORLD: true when no rank has failed so far. A
 * case calls it between phases so that a failure on one rank stops every
 * rank before the next collective instead of leaving the others waiting. */
bool h_all_ok(hcase *c);

typedef struct hcase_def {
  const char *name;
  void (*fn)(hcase *c);
} hcase_def;

/* Run one case on every rank and combine: rank 0 prints "PASS name" or
 * "FAIL name: [rank r] detail" (the lowest failing rank's first failure).
 * Returns true when it passed everywhere. */
bool h_run_case(const hcase_def *def);

/* ---- small tools ------------------------------------------------------ */

/* True when text names rank r as "rank r" (not followed by a digit). */
bool h_mentions_rank(const char *text, int r);
double h_now(void); /* MPI_Wtime */
void h_sleep_ms(int ms);
/* Resident set size of this process in KiB (VmRSS), -1 if unknown. */
long h_vmrss_kib(void);
/* A context over comm, with RS_PARAM_TIMEOUT_MS set (timeout_ms > 0). */
rs_status h_context(MPI_Comm comm, int64_t timeout_ms, rs_context **out);

typedef struct hrng {
  uint64_t s;
} hrng;
uint64_t h_rand(hrng *r);
int64_t h_range(hrng *r, int64_t lo, int64_t hi); /* inclusive */

/* ---- the model of a global layout ------------------------------------ */

#define H_MAXT 16   /* tensors */
#define H_MAXB 8    /* buffers per rank and side */

typedef struct htensor {
  char name[48];
  rs_dtype dtype;
  int ndim;
  int64_t shape[RS_MAX_DIMS];
} htensor;

typedef struct hshard {
  int tensor, rank, buffer;
  int64_t byte_offset;
  bool strided; /* false: dense row-major (NULL strides) */
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], str[RS_MAX_DIMS];
} hshard;

typedef struct hmodel {
  htensor t[H_MAXT];
  int nt;
  hshard *s[2]; /* [RS_SIDE_SRC], [RS_SIDE_DST] */
  int ns[2], cap[2];
  int64_t align; /* H_APPEND rounds up to a multiple of it (0: does not) */
} hmodel;

void h_model_init(hmodel *m);
void h_model_free(hmodel *m);
int h_tensor(hmodel *m, const char *name, rs_dtype dtype, int ndim,
             const int64_t *shape);
/* One past the last byte the shards of (side, rank, buffer) touch. */
int64_t h_buffer_end(const hmodel *m, int side, int rank, int buffer);
/* Add a shard; strides NULL means dense row-major. byte_offset H_APPEND
 * puts it at the end of the buffer (rounded up to m->align, plus gap
 * bytes). */
#define H_APPEND (-1)
void h_shard(hmodel *m, int side, int tensor, int rank, const int64_t *off,
             const int64_t *ext, int buffer, int64_t byte_offset, int64_t gap,
             const int64_t *strides);
/* Add the non-empty local boxes of a DTensor placement (computed with
 * rs_dtensor_local_box), each dense, appended to buffer `buffer` of its
 * rank. Returns the status of rs_dtensor_local_box. */
rs_status h_dtensor(hmodel *m, int side, int tensor, int mesh_ndim,
                    const int64_t *mesh_shape, const int *mesh_ranks,
                    const int *placements, int buffer);
/* As h_dtensor over ranks first..first+n-1 with a 1-D mesh. */
rs_status h_dtensor_1d(hmodel *m, int side, int tensor, int first, int n,
                       int placement, int buffer);
bool h_rank_holds(const hmodel *m, int side, int rank);
/* The all-to-all reshard: one tensor `name` of n x n, n = block np; rank r
 * holds rows [block r, block (r+1)) in the source and columns
 * [block r, block (r+1)) in the destination (dense, buffer 0 on both
 * sides), so every rank sends a block x block block to every other.
 * `shift` moves the destination split: rank 0 gets `shift` more columns,
 * every other rank starts `shift` columns later (a layout other ranks do
 * not have). Returns the tensor. */
int h_a2a(hmodel *m, const char *name, rs_dtype dtype, int block, int shift);

/* How to turn the model into a layout on this rank. */
enum {
  H_OWN = 1,          /* only this rank's shards */
  H_GLOBAL = 2,       /* every rank's shards, in rank order */
  H_DECLARE_USED = 4  /* declare only tensors this rank has shards of */
};
rs_status h_layout(rs_context *ctx, const hmodel *m, int side, int flags,
                   rs_layout **out);

/* ---- this rank's buffers ---------------------------------------------- */

typedef struct hbufs {
  unsigned char *p[H_MAXB];
  size_t n[H_MAXB];
} hbufs;

void h_bufs_alloc(const hmodel *m, int side, hbufs *b);
void h_bufs_free(hbufs *b);
rs_status h_bind(rs_plan *plan, const hmodel *m, int side, const hbufs *b);
void h_fill(const hmodel *m, const hbufs *b, uint64_t gen);  /* src shards */
void h_poison(const hbufs *b);                         /* TH_POISON */
/* Every destination element of this rank holds its value; every byte of a
 * destination buffer that no shard uses is still TH_POISON. */
bool h_check(hcase *c, const hmodel *m, const hbufs *b, uint64_t gen);
/* This rank's destination elements that hold their value of generation
 * gen, that still hold the poison, and that hold anything else. */
void h_count(const hmodel *m, const hbufs *b, uint64_t gen, int64_t *right,
             int64_t *poisoned, int64_t *wrong);
/* Bytes of this rank's destination buffers that no shard uses and that do
 * not hold the poison any more. */
int64_t h_stray_bytes(const hmodel *m, const hbufs *b);

/* ---- one transfer, end to end ---------------------------------------- */

typedef struct hrun {
  rs_context *ctx;     /* NULL: a fresh context over MPI_COMM_WORLD */
  int64_t staging;     /* 0: default */
  int domain_size;     /* 0: default (hosts) */
  int64_t timeout_ms;  /* 0: 20000 */
  bool reuse;          /* execute again with new source values, rebind */
  bool declare_used;   /* ranks declare only the tensors they hold */
  bool no_global;      /* skip the comparison with a locally built layout */
  bool polled;         /* rs_plan_execute_async, then rs_plan_test */
  /* Keep every rank's moves in the plan (plan_check reads them); by
   * default each rank keeps only its own part (RS_PARAM_PLAN_PART), which
   * is checked against the whole plan of the same layouts. */
  bool whole_plan;
  /* Extra checks on the plan (identical on every rank). */
  void (*plan_check)(hcase *c, const rs_plan *plan, const rs_context *ctx,
                     const hmodel *m, void *arg);
  void *arg;
  uint64_t gen;        /* value generation (0 is fine) */
} hrun;

/* Own shards, rs_layout_allgather on both sides, the same fingerprint on
 * every rank and the same as a layout built whole locally, plan, bind,
 * fill, poison, execute, check (and, with reuse: new values, execute,
 * check; new destination buffers, execute, check). Collective. */
void h_transfer(hcase *c, const hmodel *m, const hrun *o);

/* Running totals on this rank: destination elements checked, moves of the
 * plans it held (its part, or the whole plan), executions. */
extern int64_t h_elems_checked, h_moves_planned, h_executions, h_rounds_max;

/* Number of moves of the plan that carry any element twice into one
 * destination domain across domains (INTER moves with overlapping boxes of
 * one tensor into one domain); 0 is right. */
int64_t h_inter_duplicates(const rs_plan *plan, const rs_context *ctx,
                           char *detail, size_t cap);

#endif
