/* SPDX-License-Identifier: Apache-2.0 */
/* bench_hostile_input: input built to stall a process must not, on one core.
 *
 * Two figures, each beside a baseline measured in the same run and the 2 s
 * target:
 *   - names: a layout of 80,000 tensors whose names collide in the low 18
 *     bits of FNV-1a 32 (the slot the old name index gave them; see
 *     tests/common/th_hostile.h), built with rs_layout_add_tensor.
 *     Baseline: 80,000 ordinary names ("model.layers.L.mlp.experts.E.w<k>").
 *     Generating the colliding names is timed apart and not counted.
 *   - pieces: 1,024 serialized pieces (piece r: 64 tensor declarations and
 *     rank r's 64 shards), deserialized into one layout one call at a time.
 *     Baseline: the same layout serialized whole and deserialized in one
 *     call. The two results are compared byte for byte (exit 2 if they
 *     differ).
 * The process is pinned to CPU 0; each figure is the best of `reps` runs.
 *
 * Usage: bench_hostile_input [repetitions] (default 3). */
#include "bench_common.h"
#include "th_hostile.h"

#include <stdbool.h>

enum {
  N_NAMES = 80000,
  COLLIDE_BITS = 18,
  N_PIECES = 1024,
  PIECE_TENSORS = 64
};

static rs_context *ctx;

/* Seconds to declare n tensors named names[0..n) in a fresh layout. */
static double time_declare(char (*names)[RH_NAME_BYTES], int n) {
  const int64_t shape[1] = {16};
  rs_layout *l = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &l));
  double t0 = bench_now();
  for (int i = 0; i < n; i++)
    BENCH_CHECK(ctx, rs_layout_add_tensor(l, names[i], RS_DTYPE_F32, 1, shape));
  double t = bench_now() - t0;
  int got = 0;
  BENCH_CHECK(ctx, rs_layout_num_tensors(l, &got));
  if (got != n) {
    printf("WRONG   : %d tensors declared, %d in the layout\n", n, got);
    exit(2);
  }
  rs_layout_destroy(l);
  return t;
}

/* Seconds to deserialize pieces[0..n) into a fresh layout, one call each;
 * its serialization is returned through *bytes / *len. */
static double time_deserialize(void **pieces, const size_t *lens, int n,
                               void **bytes, size_t *len) {
  rs_layout *l = NULL;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &l));
  double t0 = bench_now();
  for (int i = 0; i < n; i++)
    BENCH_CHECK(ctx, rs_layout_deserialize(l, pieces[i], lens[i]));
  double t = bench_now() - t0;
  BENCH_CHECK(ctx, rs_layout_serialize(l, bytes, len));
  rs_layout_destroy(l);
  return t;
}

static double best_declare(char (*names)[RH_NAME_BYTES], int n, int reps) {
  double best = 0;
  for (int i = 0; i < reps; i++) {
    double t = time_declare(names, n);
    if (i == 0 || t < best) best = t;
  }
  return best;
}

/* Best of reps; the result of the last run stays in *bytes / *len. */
static double best_deserialize(void **pieces, const size_t *lens, int n,
                               int reps, void **bytes, size_t *len) {
  double best = 0;
  for (int i = 0; i < reps; i++) {
    rs_free(*bytes);
    *bytes = NULL;
    double t = time_deserialize(pieces, lens, n, bytes, len);
    if (i == 0 || t < best) best = t;
  }
  return best;
}

static void row(const char *figure, double measured, double baseline) {
  char a[64], b[64], c[64];
  snprintf(a, sizeof a, "%.4f", measured);
  snprintf(b, sizeof b, "%.4f", baseline);
  snprintf(c, sizeof c, "%.2f", measured / baseline);
  bench_table_row(figure, a, b, c);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (reps < 1) reps = 1;
  bench_print_machine("bench_hostile_input");
  int pinned = bench_pin_to_cpu(0) == 0;
  printf("cores   : %s\n", pinned ? "pinned to CPU 0 (one core)"
                                  : "NOT pinned (sched_setaffinity failed)");
  BENCH_CHECK(NULL, rs_context_create_local(N_PIECES, &ctx));

  /* names */
  char(*bad)[RH_NAME_BYTES] = bench_xcalloc(N_NAMES, RH_NAME_BYTES);
  char(*plain)[RH_NAME_BYTES] = bench_xcalloc(N_NAMES, RH_NAME_BYTES);
  double t0 = bench_now();
  size_t made = rh_colliding_names(bad, N_NAMES, "model.layers.7.mlp.experts.",
                                   COLLIDE_BITS);
  double t_gen = bench_now() - t0;
  if (made != N_NAMES) {
    fprintf(stderr, "only %zu colliding names\n", made);
    return 1;
  }
  for (int i = 0; i < N_NAMES; i++)
    snprintf(plain[i], RH_NAME_BYTES, "model.layers.%d.mlp.experts.%d.w%d",
             i / 768, (i / 3) % 256, 1 + i % 3);
  printf("names   : %d names whose FNV-1a 32 agrees in the low %d bits, "
         "generated in %.3f s (not counted); e.g. '%s', '%s'\n",
         N_NAMES, COLLIDE_BITS, t_gen, bad[0], bad[1]);
  double t_bad = best_declare(bad, N_NAMES, reps);
  double t_plain = best_declare(plain, N_NAMES, reps);
  printf("names   : build, best of %d: colliding %.4f s, ordinary %.4f s "
         "(target < 2 s): %s\n",
         reps, t_bad, t_plain, t_bad < 2.0 ? "met" : "MISSED");

  /* pieces */
  void **pieces = bench_xcalloc(N_PIECES, sizeof *pieces);
  size_t *lens = bench_xcalloc(N_PIECES, sizeof *lens);
  BENCH_CHECK(ctx, rh_pieces(ctx, PIECE_TENSORS, N_PIECES, pieces, lens));
  size_t total = 0;
  for (int i = 0; i < N_PIECES; i++) total += lens[i];
  rs_layout *whole = NULL;
  void *whole_bytes = NULL;
  size_t whole_len = 0;
  BENCH_CHECK(ctx, rs_layout_create(ctx, &whole));
  BENCH_CHECK(ctx, rh_whole(whole, PIECE_TENSORS, N_PIECES));
  BENCH_CHECK(ctx, rs_layout_serialize(whole, &whole_bytes, &whole_len));
  rs_layout_destroy(whole);
  printf("pieces  : %d pieces of %d declarations + %d shards, %zu bytes "
         "each, %.2f MiB in all; the whole layout %.2f MiB\n",
         N_PIECES, PIECE_TENSORS, PIECE_TENSORS, lens[0],
         (double)total / BENCH_MIB, (double)whole_len / BENCH_MIB);
  void *one_by_one = NULL, *at_once = NULL;
  size_t one_len = 0, once_len = 0;
  double t_pieces =
      best_deserialize(pieces, lens, N_PIECES, reps, &one_by_one, &one_len);
  double t_once =
      best_deserialize(&whole_bytes, &whole_len, 1, reps, &at_once, &once_len);
  bool same = one_len == once_len && memcmp(one_by_one, at_once, one_len) == 0;
  printf("pieces  : deserialize, best of %d: one call per piece %.4f s, the "
         "whole in one call %.4f s (target < 2 s): %s; results %s\n",
         reps, t_pieces, t_once, t_pieces < 2.0 ? "met" : "MISSED",
         same ? "identical" : "DIFFER");

  bench_table_header();
  row("80k colliding names, build [s]", t_bad, t_plain);
  row("1024 pieces one by one [s]", t_pieces, t_once);
  printf("(baselines: 80k ordinary names; the same layout in one call. "
         "Target for both measured figures: < 2 s on one core.)\n");

  for (int i = 0; i < N_PIECES; i++) rs_free(pieces[i]);
  rs_free(whole_bytes);
  rs_free(one_by_one);
  rs_free(at_once);
  free(pieces);
  free(lens);
  free(bad);
  free(plain);
  rs_context_destroy(ctx);
  return same ? 0 : 2;
}
