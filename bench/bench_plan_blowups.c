/* SPDX-License-Identifier: Apache-2.0 */
/* bench_plan_blowups: how long building layouts and rs_plan_create take on
 * four valid but adversarial layouts that once made planning quadratic,
 * each beside a benign layout of the same tensor bytes and a comparable
 * shard count, measured in the same run, and beside the 2 s target.
 *
 * 1. strided columns: f32 [1024, 2048]; destination rank 0 buffer 0 holds
 *    each column as its own shard (byte offset 4j, element strides
 *    {2048, 1}), so every shard's byte span meets every other's.
 *    Benign: the same buffer as 2048 dense half-row shards.
 * 2. column shards: f32 [4, 160000] cut into 1-column shards on both sides
 *    (source column j on rank j % 8, destination on rank 8 + j / 20000).
 *    Benign: f32 [160000, 4] cut into 1-row shards the same way.
 * 3. 16 dims of 2: f32 {2, ..., 2} (65536 elements), a shard per element on
 *    both sides. Benign: f32 {65536, 1, ..., 1} (16 dims too), a shard per
 *    element, same ranks.
 * 4. replica plus rows: f32 [40000, 16]; rank 0 holds the whole tensor and
 *    ranks 1..7 hold it again as 40000 row shards; the destination holds
 *    40000 row shards on ranks 8..15. Benign: the same without the replica.
 *
 * 16 ranks in domains of 4, one buffer per rank, the process pinned to one
 * core. Usage: bench_plan_blowups [repetitions] (default 3; min is shown).
 *
 * Then one execution of a plan of two shards (64 bytes from rank 0 to the
 * last rank) in a world of 2^24 ranks, beside the same plan in a world of
 * 2: the cost of an execution must not grow with ranks that take no part. */
#include "bench_common.h"

enum { WORLD = 16, DOMAIN = 4, NCASES = 4, MAX_NDIM = 16 };

static const double TARGET_S = 2.0;

/* Per-rank byte cursors: each rank packs its shards densely in buffer 0. */
typedef struct packer {
  rs_context *ctx;
  rs_layout *l;
  const char *name;
  int ndim;
  int64_t next[WORLD];
} packer;

static void pack_dense(packer *pk, int rank, const int64_t *off,
                       const int64_t *ext) {
  int64_t n = 4;
  for (int d = 0; d < pk->ndim; d++) n *= ext[d];
  BENCH_CHECK(pk->ctx, rs_layout_add_shard(pk->l, pk->name, rank, off, ext, 0,
                                           pk->next[rank], NULL));
  pk->next[rank] += n;
}

static void declare(rs_context *ctx, rs_layout **src, rs_layout **dst,
                    const char *name, int ndim, const int64_t *shape) {
  BENCH_CHECK(ctx, rs_layout_create(ctx, src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, dst));
  BENCH_CHECK(ctx, rs_layout_add_tensor(*src, name, RS_DTYPE_F32, ndim, shape));
  BENCH_CHECK(ctx, rs_layout_add_tensor(*dst, name, RS_DTYPE_F32, ndim, shape));
}

static packer packer_of(rs_context *ctx, rs_layout *l, const char *name,
                        int ndim) {
  packer pk;
  memset(&pk, 0, sizeof pk);
  pk.ctx = ctx;
  pk.l = l;
  pk.name = name;
  pk.ndim = ndim;
  return pk;
}

/* 1: strided column shards in one destination buffer (or half rows). */
static void build_columns_in_one_buffer(rs_context *ctx, int benign,
                                        rs_layout **src, rs_layout **dst) {
  const int64_t R = 1024, C = 2048, shape[2] = {R, C}, zero[2] = {0, 0};
  declare(ctx, src, dst, "w", 2, shape);
  BENCH_CHECK(ctx, rs_layout_add_shard(*src, "w", 8, zero, shape, 0, 0, NULL));
  const int64_t strides[2] = {C, 1};
  for (int64_t j = 0; j < C; j++) {
    if (benign) { /* row j/2, half j%2, where the row-major copy has it */
      const int64_t off[2] = {j / 2, (j % 2) * (C / 2)}, ext[2] = {1, C / 2};
      BENCH_CHECK(ctx, rs_layout_add_shard(*dst, "w", 0, off, ext, 0,
                                           j * (C / 2) * 4, NULL));
    } else {
      const int64_t off[2] = {0, j}, ext[2] = {R, 1};
      BENCH_CHECK(ctx, rs_layout_add_shard(*dst, "w", 0, off, ext, 0, j * 4,
                                           strides));
    }
  }
}

/* 2: 1-column shards of [4, N] (or 1-row shards of [N, 4]). */
static void build_thin_shards(rs_context *ctx, int benign, rs_layout **src,
                              rs_layout **dst) {
  const int64_t N = 160000, W = 4;
  const int thin = benign ? 0 : 1; /* the dim cut into 1-wide shards */
  int64_t shape[2];
  shape[thin] = N;
  shape[1 - thin] = W;
  declare(ctx, src, dst, "w", 2, shape);
  packer ps = packer_of(ctx, *src, "w", 2), pd = packer_of(ctx, *dst, "w", 2);
  for (int64_t j = 0; j < N; j++) {
    int64_t off[2], ext[2];
    off[thin] = j;
    ext[thin] = 1;
    off[1 - thin] = 0;
    ext[1 - thin] = W;
    pack_dense(&ps, (int)(j % 8), off, ext);
    pack_dense(&pd, 8 + (int)(j / (N / 8)), off, ext);
  }
}

/* 3: a shard per element of {2, ..., 2} in 16 dims (or of {65536, 1, ...}). */
static void build_per_element(rs_context *ctx, int benign, rs_layout **src,
                              rs_layout **dst) {
  const int ndim = MAX_NDIM;
  const int64_t n = (int64_t)1 << MAX_NDIM;
  int64_t shape[MAX_NDIM], ext[MAX_NDIM], off[MAX_NDIM] = {0};
  for (int d = 0; d < ndim; d++) {
    shape[d] = benign ? (d == 0 ? n : 1) : 2;
    ext[d] = 1;
  }
  declare(ctx, src, dst, "w", ndim, shape);
  packer ps = packer_of(ctx, *src, "w", ndim),
         pd = packer_of(ctx, *dst, "w", ndim);
  for (int64_t lin = 0; lin < n; lin++) {
    if (benign)
      off[0] = lin;
    else
      for (int d = 0; d < ndim; d++) off[d] = (lin >> (ndim - 1 - d)) & 1;
    pack_dense(&ps, (int)(lin % 8), off, ext);
    pack_dense(&pd, 8 + (int)((lin / 8) % 8), off, ext);
  }
}

/* 4: a whole-tensor source replica beside row shards (or rows alone). */
static void build_replica_and_rows(rs_context *ctx, int benign,
                                   rs_layout **src, rs_layout **dst) {
  const int64_t R = 40000, C = 16, shape[2] = {R, C}, zero[2] = {0, 0};
  declare(ctx, src, dst, "w", 2, shape);
  packer ps = packer_of(ctx, *src, "w", 2), pd = packer_of(ctx, *dst, "w", 2);
  if (!benign) pack_dense(&ps, 0, zero, shape);
  for (int64_t r = 0; r < R; r++) {
    const int64_t off[2] = {r, 0}, ext[2] = {1, C};
    pack_dense(&ps, 1 + (int)(r % 7), off, ext);
    pack_dense(&pd, 8 + (int)(r % 8), off, ext);
  }
}

typedef void (*builder)(rs_context *, int, rs_layout **, rs_layout **);

typedef struct bench_case {
  const char *name, *benign_name;
  builder build;
} bench_case;

static const bench_case CASES[NCASES] = {
    {"1 strided columns, one buffer", "2048 dense half rows",
     build_columns_in_one_buffer},
    {"2 160000 column shards", "160000 row shards", build_thin_shards},
    {"3 16 dims of 2, shard/element", "{65536, 1, ...}, shard/element",
     build_per_element},
    {"4 replica + 40000 rows", "40000 rows alone", build_replica_and_rows},
};

typedef struct timing {
  double layout_s, plan_s;
  int64_t src_shards, dst_shards, moves, bytes;
} timing;

/* Build the layouts and plan them `reps` times; the minimum of each. */
static timing measure(rs_context *ctx, const bench_case *c, int benign,
                      int reps) {
  timing t = {1e30, 1e30, 0, 0, 0, 0};
  for (int r = 0; r < reps; r++) {
    rs_layout *src = NULL, *dst = NULL;
    rs_plan *plan = NULL;
    double t0 = bench_now();
    c->build(ctx, benign, &src, &dst);
    double t1 = bench_now();
    BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
    double t2 = bench_now();
    if (t1 - t0 < t.layout_s) t.layout_s = t1 - t0;
    if (t2 - t1 < t.plan_s) t.plan_s = t2 - t1;
    BENCH_CHECK(ctx, rs_layout_num_shards(src, &t.src_shards));
    BENCH_CHECK(ctx, rs_layout_num_shards(dst, &t.dst_shards));
    BENCH_CHECK(ctx, rs_plan_num_moves(plan, &t.moves));
    t.bytes = bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTER) +
              bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTRA) +
              bench_stat_all(ctx, plan, RS_STAT_BYTES_LOCAL);
    rs_plan_destroy(plan);
    rs_layout_destroy(src);
    rs_layout_destroy(dst);
  }
  return t;
}

/* Mean time of one execution (after the first) of 64 bytes from rank 0 to
 * rank world-1 in process. */
static double idle_world_exec(int world) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  const int64_t shape[1] = {64}, off[1] = {0};
  unsigned char a[64], b[64];
  memset(a, 7, sizeof a);
  BENCH_CHECK(NULL, rs_context_create_local(world, &ctx));
  BENCH_CHECK(ctx, rs_layout_create(ctx, &src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, &dst));
  BENCH_CHECK(ctx, rs_layout_add_tensor(src, "w", RS_DTYPE_U8, 1, shape));
  BENCH_CHECK(ctx, rs_layout_add_tensor(dst, "w", RS_DTYPE_U8, 1, shape));
  BENCH_CHECK(ctx, rs_layout_add_shard(src, "w", 0, off, shape, 0, 0, NULL));
  BENCH_CHECK(ctx,
              rs_layout_add_shard(dst, "w", world - 1, off, shape, 0, 0, NULL));
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
  BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, a, sizeof a));
  BENCH_CHECK(ctx, rs_plan_bind(plan, RS_SIDE_DST, world - 1, 0, b, sizeof b));
  BENCH_CHECK(ctx, rs_plan_execute(plan));
  enum { N = 100 };
  double t0 = bench_now();
  for (int i = 0; i < N; i++) BENCH_CHECK(ctx, rs_plan_execute(plan));
  double per = (bench_now() - t0) / N;
  if (memcmp(a, b, sizeof a) != 0) {
    fprintf(stderr, "idle world %d: wrong bytes\n", world);
    exit(1);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  return per;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (reps < 1) reps = 1;
  bench_print_machine("bench_plan_blowups: planning adversarial layouts");
  const char *core = bench_pin_to_cpu(0) == 0
                         ? "pinned to CPU 0 (one core)"
                         : "NOT pinned (sched_setaffinity failed)";
  printf("setup   : %d ranks in domains of %d, %s; times are the min of %d "
         "(layouts built through the public API, then rs_plan_create)\n",
         WORLD, DOMAIN, core, reps);

  rs_context *ctx = NULL;
  BENCH_CHECK(NULL, rs_context_create_local(WORLD, &ctx));
  BENCH_CHECK(ctx, rs_context_set_domain_size(ctx, DOMAIN));

  timing adv[NCASES], ben[NCASES];
  for (int i = 0; i < NCASES; i++) {
    adv[i] = measure(ctx, &CASES[i], 0, reps);
    ben[i] = measure(ctx, &CASES[i], 1, reps);
    printf("\ncase %s: %lld + %lld shards, layouts %.3f s, plan %.3f s, "
           "%lld moves, %.1f MiB moved\n",
           CASES[i].name, (long long)adv[i].src_shards,
           (long long)adv[i].dst_shards, adv[i].layout_s, adv[i].plan_s,
           (long long)adv[i].moves, (double)adv[i].bytes / BENCH_MIB);
    printf("  benign %s: %lld + %lld shards, layouts %.3f s, plan %.3f s, "
           "%lld moves, %.1f MiB moved\n",
           CASES[i].benign_name, (long long)ben[i].src_shards,
           (long long)ben[i].dst_shards, ben[i].layout_s, ben[i].plan_s,
           (long long)ben[i].moves, (double)ben[i].bytes / BENCH_MIB);
    fflush(stdout);
  }

  int over = 0;
  char figure[64], a[64], b[64], c[64];
  bench_table_header();
  for (int i = 0; i < NCASES; i++) {
    double total = adv[i].layout_s + adv[i].plan_s;
    double base = ben[i].layout_s + ben[i].plan_s;
    snprintf(figure, sizeof figure, "case %d layouts+plan [s]", i + 1);
    snprintf(a, sizeof a, "%.3f", total);
    snprintf(b, sizeof b, "%.3f (benign)", base);
    snprintf(c, sizeof c, "%.2f", base > 0 ? total / base : 0.0);
    bench_table_row(figure, a, b, c);
    snprintf(figure, sizeof figure, "case %d plan [s]", i + 1);
    snprintf(a, sizeof a, "%.3f", adv[i].plan_s);
    snprintf(b, sizeof b, "%.3f (target)", TARGET_S);
    snprintf(c, sizeof c, "%.3f", adv[i].plan_s / TARGET_S);
    bench_table_row(figure, a, b, c);
    over += total > TARGET_S;
  }
  double big = idle_world_exec(1 << 24), small = idle_world_exec(2);
  snprintf(a, sizeof a, "%.2f", big * 1e6);
  snprintf(b, sizeof b, "%.2f (world 2)", small * 1e6);
  snprintf(c, sizeof c, "%.2f", small > 0 ? big / small : 0.0);
  bench_table_row("execute, world 2^24 [us]", a, b, c);
  printf("\n%s: %d of %d adversarial cases over the %.0f s target\n",
         over ? "MISSED" : "ok", over, NCASES, TARGET_S);
  rs_context_destroy(ctx);
  return over ? 2 : 0;
}
