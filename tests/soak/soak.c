/* SPDX-License-Identifier: Apache-2.0 */
/* Soak: one plan executed many times under MPI, the sources changed before
 * every execution and every destination element checked after it, and
 * memory watched.
 *
 *   mpirun -np 4 soak [--iterations 1000] [--integrity 1]
 *                     [--tolerance-kib 1024]
 *
 * The layouts are those of a small weight sync (any world size >= 2 works;
 * the ctest entry uses 4): a fused qkv u32 [256, 192] held TP x DP
 * (Replicate, Shard(0)) on a 2-D mesh going to Shard(1); a bf16-sized down
 * projection [128, 512] going from Shard(1) to (Shard(0), Replicate); a
 * u8 norm [300] replicated everywhere going to uneven Shard(0); an
 * embedding u32 [64, 96] going into padded rows (stride 100) of a second
 * buffer; and a u32 [512, 256] whose row split moves by a few rows, so
 * that large contiguous moves travel straight from and into user memory.
 *
 * Shards are appended to their buffers at 64-byte boundaries; values are
 * those of tests/common/th_value.h, a new generation before every
 * execution. Each rank prints its resident memory (VmRSS) after execution
 * 10 and after the last; rank 0 prints the summary. It fails when any
 * element was ever wrong, any execution failed, a byte outside every
 * destination shard changed, or VmRSS grew by more than the tolerance
 * between the two. Built on the MPI harness (tests/mpi/mpi_harness.h). */
#include "mpi_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Under AddressSanitizer freed memory waits in a quarantine (up to
 * 256 MiB), so resident memory grows without a leak: the figures are
 * printed but not judged, and LeakSanitizer judges leaks instead. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#ifndef SOAK_ASAN
#define SOAK_ASAN 0
#endif

static int ranks[64]; /* 0, 1, ..: meshes take the ranks in order */

/* DTensor placements over a mesh of the first ranks, row-major. */
static void dtensor(hmodel *m, int side, int t, int mesh_ndim,
                    const int64_t *mesh, const int *placements) {
  if (h_dtensor(m, side, t, mesh_ndim, mesh, ranks, placements, 0) != RS_OK) {
    fprintf(stderr, "rank %d: local box: %s\n", h_rank, rs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

static void model(hmodel *m) {
  int np = h_np;
  int64_t m2[2] = {2, np / 2}, mn[1] = {np};
  int rep_s0[2] = {RS_REPLICATE, 0}, s1[1] = {1}, s0[1] = {0};
  int s0_rep[2] = {0, RS_REPLICATE}, rep[1] = {RS_REPLICATE};
  h_model_init(m);
  m->align = 64;
  for (int r = 0; r < np; r++) ranks[r] = r;
  int qkv = h_tensor(m, "layers.0.attn.qkv_proj", RS_DTYPE_U32, 2,
                     (int64_t[]){256, 192});
  dtensor(m, RS_SIDE_SRC, qkv, np >= 4 ? 2 : 1, np >= 4 ? m2 : mn,
          np >= 4 ? rep_s0 : s0);
  dtensor(m, RS_SIDE_DST, qkv, 1, mn, s1);
  int down = h_tensor(m, "layers.0.mlp.down_proj", RS_DTYPE_BF16, 2,
                      (int64_t[]){128, 512});
  dtensor(m, RS_SIDE_SRC, down, 1, mn, s1);
  dtensor(m, RS_SIDE_DST, down, np >= 4 ? 2 : 1, np >= 4 ? m2 : mn,
          np >= 4 ? s0_rep : s0);
  int norm = h_tensor(m, "layers.0.input_layernorm", RS_DTYPE_U8, 1,
                      (int64_t[]){300});
  dtensor(m, RS_SIDE_SRC, norm, 1, mn, rep);
  dtensor(m, RS_SIDE_DST, norm, 1, mn, s0);
  int emb = h_tensor(m, "embed_tokens", RS_DTYPE_U32, 2, (int64_t[]){64, 96});
  dtensor(m, RS_SIDE_SRC, emb, 1, mn, s0);
  for (int r = 0; r < np; r++) { /* rows of 100, only 96 used */
    int64_t lo = 64 * r / np, hi = 64 * (r + 1) / np;
    h_shard(m, RS_SIDE_DST, emb, r, (int64_t[]){lo, 0},
            (int64_t[]){hi - lo, 96}, 1, H_APPEND, 0, (int64_t[]){100, 1});
  }
  int big = h_tensor(m, "lm_head", RS_DTYPE_U32, 2, (int64_t[]){512, 256});
  dtensor(m, RS_SIDE_SRC, big, 1, mn, s0);
  for (int r = 0; r < np; r++) { /* split moved by 3 rows */
    int64_t lo = r == 0 ? 0 : 512 * r / np + 3;
    int64_t hi = r == np - 1 ? 512 : 512 * (r + 1) / np + 3;
    h_shard(m, RS_SIDE_DST, big, r, (int64_t[]){lo, 0},
            (int64_t[]){hi - lo, 256}, 0, H_APPEND, 0, NULL);
  }
}

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  int iterations = 1000, integrity = 1;
  long tolerance_kib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iterations")) iterations = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--integrity")) integrity = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--tolerance-kib")) tolerance_kib = atol(argv[i + 1]);
  }
  if (h_np < 2 || h_np % 2 || iterations < 11) {
    if (h_rank == 0)
      fprintf(stderr, "soak: an even number of 2..64 processes and at least "
                      "11 iterations\n");
    MPI_Finalize();
    return 2;
  }
  hmodel m;
  model(&m);

  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  hbufs sb, db;
  h_bufs_alloc(&m, RS_SIDE_SRC, &sb);
  h_bufs_alloc(&m, RS_SIDE_DST, &db);
  h_poison(&db);
  rs_status st = rs_context_create_mpi(MPI_COMM_WORLD, &ctx);
  if (st == RS_OK) st = rs_context_set_param(ctx, RS_PARAM_INTEGRITY, integrity);
  if (st == RS_OK) st = h_layout(ctx, &m, RS_SIDE_SRC, H_GLOBAL, &src);
  if (st == RS_OK) st = h_layout(ctx, &m, RS_SIDE_DST, H_GLOBAL, &dst);
  if (st == RS_OK) st = rs_plan_create(src, dst, &plan);
  if (st == RS_OK) st = h_bind(plan, &m, RS_SIDE_SRC, &sb);
  if (st == RS_OK) st = h_bind(plan, &m, RS_SIDE_DST, &db);
  if (st != RS_OK) {
    fprintf(stderr, "SOAK-FAIL rank %d: setup: %s: %s\n", h_rank,
            rs_status_name(st),
            ctx ? rs_context_last_error(ctx) : rs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  int64_t bytes = 0, moves = 0, rounds = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA, &bytes);
  int64_t inter = 0, local = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER, &inter);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_MOVES, &moves);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &rounds);
  bytes += inter + local;

  long rss10 = -1, rss_end = -1;
  int64_t wrong = 0, failed = 0, first_bad = 0;
  double t0 = h_now() * 1e3, t10 = 0;
  char why[768] = "";
  for (int it = 1; it <= iterations; it++) {
    h_fill(&m, &sb, (uint64_t)it);
    st = rs_plan_execute(plan);
    if (st != RS_OK) {
      failed++;
      if (!first_bad) {
        first_bad = it;
        snprintf(why, sizeof why, "execution %d: %s: %s", it,
                 rs_status_name(st), rs_context_last_error(ctx));
      }
      break; /* the context is done after a failed execution */
    }
    int64_t right, poisoned, other;
    h_count(&m, &db, (uint64_t)it, &right, &poisoned, &other);
    int64_t bad = poisoned + other;
    if (bad && !first_bad) {
      first_bad = it;
      snprintf(why, sizeof why, "execution %d: %lld wrong elements", it,
               (long long)bad);
    }
    wrong += bad;
    if (it == 10) {
      rss10 = h_vmrss_kib();
      t10 = h_now() * 1e3;
    }
  }
  double t_end = h_now() * 1e3;
  rss_end = h_vmrss_kib();
  int64_t stray = h_stray_bytes(&m, &db);
  long growth = rss_end - rss10;
  int ok = !failed && !wrong && !stray &&
           (SOAK_ASAN || (rss10 > 0 && growth <= tolerance_kib));
  printf("SOAK rank %d: VmRSS after 10 executions %ld KiB, after %d %ld KiB "
         "(%+ld KiB); %lld wrong elements, %lld stray bytes, %lld failed "
         "executions%s%s\n",
         h_rank, rss10, iterations, rss_end, growth, (long long)wrong,
         (long long)stray, (long long)failed, why[0] ? ": " : "", why);
  fflush(stdout);

  long stats[3] = {growth, rss10, rss_end}, maxs[3];
  int all_ok = 0;
  MPI_Reduce(stats, maxs, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (h_rank == 0) {
    double per = (t_end - t10) / (iterations - 10);
    printf("SOAK %s: %d executions of one plan on %d processes (integrity "
           "%s), %lld bytes and %lld moves in %lld round(s) per execution, "
           "every element verified after every execution; %.3f ms per "
           "execution (fill and check included; %.0f ms in all); largest "
           "VmRSS after 10: %ld KiB, after %d: %ld KiB, largest growth "
           "%+ld KiB (tolerance %ld KiB%s)\n",
           all_ok ? "PASS" : "FAIL", iterations, h_np,
           integrity ? "on" : "off",
           (long long)bytes, (long long)moves, (long long)rounds, per,
           t_end - t0, maxs[1], iterations, maxs[2], maxs[0], tolerance_kib,
           SOAK_ASAN ? "; not judged under AddressSanitizer, whose "
                      "quarantine keeps freed memory" : "");
    fflush(stdout);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  h_bufs_free(&sb);
  h_bufs_free(&db);
  h_model_free(&m);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
