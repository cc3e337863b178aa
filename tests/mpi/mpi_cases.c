/* SPDX-License-Identifier: Apache-2.0 */
/* libreshard over MPI: integration cases that every rank runs. Each rank
 * describes only its own shards and calls rs_layout_allgather, unless a case
 * says otherwise; a case fails when it fails on any rank.
 *
 *   mpirun -np N mpi_cases [--iters K] [--seed S] [--only NAME] [--skip NAME]
 *
 * The random property test draws from seed S (RESHARD_MPI_SEED, else the
 * clock, broadcast from rank 0 and printed so a failure can be replayed). */
#include "mpi_harness.h"
#include "th_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_iters = 100;
static uint64_t g_seed;

/* ---- disjoint trainer and inference groups --------------------------- */

/* Source ranks [0, h), destination ranks [h, np): nobody is both. */
static void plan_check_disjoint(hcase *c, const rs_plan *plan,
                                const rs_context *ctx, const hmodel *m,
                                void *arg) {
  int h = *(const int *)arg;
  (void)ctx;
  (void)m;
  for (int r = 0; r < h_np; r++) {
    int64_t sent = 0, recv = 0, v = 0;
    rs_plan_stat(plan, r, RS_STAT_BYTES_SENT_INTRA, &v);
    sent += v;
    rs_plan_stat(plan, r, RS_STAT_BYTES_SENT_INTER, &v);
    sent += v;
    rs_plan_stat(plan, r, RS_STAT_BYTES_RECV_INTRA, &v);
    recv += v;
    rs_plan_stat(plan, r, RS_STAT_BYTES_RECV_INTER, &v);
    recv += v;
    rs_plan_stat(plan, r, RS_STAT_BYTES_LOCAL, &v);
    EXPECT(c, v == 0, "rank %d copies %lld bytes locally, but no rank holds "
           "both sides", r, (long long)v);
    if (r < h)
      EXPECT(c, recv == 0, "source rank %d receives %lld bytes", r,
             (long long)recv);
    else
      EXPECT(c, sent == 0, "destination rank %d sends %lld bytes", r,
             (long long)sent);
  }
}

static void case_disjoint(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int h = h_np / 2, nd = h_np - h;
  /* 2-D: Shard(0) on the trainers, Shard(1) on the inference side. */
  int t2 = h_tensor(&m, "layers.0.mlp.w", RS_DTYPE_F32, 2,
                    (int64_t[]){37, 23});
  h_dtensor_1d(&m, RS_SIDE_SRC, t2, 0, h, 0, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, t2, h, nd, 1, 0);
  /* 4-D: a 2-D trainer mesh (Shard(1) x Shard(3) where it fits) and
   * Shard(2) of a size-3 dim on the inference side (empty shards when
   * there are more than three destination ranks). */
  int t4 = h_tensor(&m, "layers.0.conv.w", RS_DTYPE_BF16, 4,
                    (int64_t[]){5, 7, 3, 11});
  if (h % 2 == 0 && h >= 2) {
    int ranks[64];
    for (int i = 0; i < h; i++) ranks[i] = i;
    h_dtensor(&m, RS_SIDE_SRC, t4, 2, (int64_t[]){2, h / 2}, ranks,
              (int[]){1, 3}, 1);
  } else {
    h_dtensor_1d(&m, RS_SIDE_SRC, t4, 0, h, 1, 1);
  }
  h_dtensor_1d(&m, RS_SIDE_DST, t4, h, nd, 2, 1);
  /* 4-D with nested sharding of one dim on the inference side. */
  int t5 = h_tensor(&m, "layers.0.attn.o", RS_DTYPE_I16, 4,
                    (int64_t[]){3, 13, 2, 9});
  h_dtensor_1d(&m, RS_SIDE_SRC, t5, 0, h, 3, 0);
  if (nd % 2 == 0) {
    int ranks[64];
    for (int i = 0; i < nd; i++) ranks[i] = h + i;
    h_dtensor(&m, RS_SIDE_DST, t5, 2, (int64_t[]){2, nd / 2}, ranks,
              (int[]){1, 1}, 0);
  } else {
    h_dtensor_1d(&m, RS_SIDE_DST, t5, h, nd, 1, 0);
  }
  /* One domain: every source reaches every destination directly. */
  hrun o = {.domain_size = h_np, .plan_check = plan_check_disjoint, .arg = &h,
            .gen = 1};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- colocated: every rank on both sides ---------------------------- */

static void case_colocated(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int a = h_tensor(&m, "embed", RS_DTYPE_I32, 2, (int64_t[]){41, 29});
  h_dtensor_1d(&m, RS_SIDE_SRC, a, 0, h_np, 0, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, a, 0, h_np, 1, 0);
  /* Shard(2) -> Replicate: every rank ends up with the whole tensor. */
  int b = h_tensor(&m, "norm", RS_DTYPE_U8, 3, (int64_t[]){7, 5, 9});
  h_dtensor_1d(&m, RS_SIDE_SRC, b, 0, h_np, 2, 1);
  h_dtensor_1d(&m, RS_SIDE_DST, b, 0, h_np, RS_REPLICATE, 1);
  /* Shard(0) -> Shard(0) shifted by one rank: nothing stays put. */
  int d = h_tensor(&m, "lm_head", RS_DTYPE_F64, 2, (int64_t[]){h_np * 3 + 1, 5});
  h_dtensor_1d(&m, RS_SIDE_SRC, d, 0, h_np, 0, 0);
  int ranks[64];
  for (int i = 0; i < h_np; i++) ranks[i] = (i + 1) % h_np;
  h_dtensor(&m, RS_SIDE_DST, d, 1, (int64_t[]){h_np}, ranks, (int[]){0}, 0);
  hrun o = {.gen = 2};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- idle ranks -------------------------------------------------------- */

/* Idle ranks take part in no move. */
static void plan_check_idle(hcase *c, const rs_plan *plan,
                            const rs_context *ctx, const hmodel *m,
                            void *arg) {
  (void)ctx;
  (void)arg;
  for (int r = 1; r < h_np; r += 2) {
    int64_t moves = -1;
    rs_plan_stat(plan, r, RS_STAT_MOVES, &moves);
    EXPECT(c, moves == 0 && !h_rank_holds(m, RS_SIDE_SRC, r) &&
                  !h_rank_holds(m, RS_SIDE_DST, r),
           "idle rank %d takes part in %lld moves", r, (long long)moves);
  }
}

/* Odd ranks hold nothing on either side and declare no tensor at all;
 * even ranks split into a source half and a destination half (one even
 * rank: it is both). */
static void case_idle(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int act[64], na = 0;
  for (int r = 0; r < h_np; r += 2) act[na++] = r;
  int ns = (na + 1) / 2;
  int nd = na - ns;
  const int *sr = act, *dr = nd ? act + ns : act;
  if (!nd) nd = na;
  int t = h_tensor(&m, "w", RS_DTYPE_F16, 3, (int64_t[]){6, 11, 5});
  h_dtensor(&m, RS_SIDE_SRC, t, 1, (int64_t[]){ns}, sr, (int[]){1}, 0);
  h_dtensor(&m, RS_SIDE_DST, t, 1, (int64_t[]){nd}, dr, (int[]){2}, 0);
  int u = h_tensor(&m, "b", RS_DTYPE_I64, 1, (int64_t[]){13});
  h_dtensor(&m, RS_SIDE_SRC, u, 1, (int64_t[]){ns}, sr, (int[]){0}, 1);
  h_dtensor(&m, RS_SIDE_DST, u, 1, (int64_t[]){nd}, dr, (int[]){RS_REPLICATE},
            1);
  hrun o = {.declare_used = true, .plan_check = plan_check_idle, .gen = 3};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- fused destination buffers (vLLM qkv_proj) ------------------------ */

static void case_fused_qkv(hcase *c) {
  enum { HIDDEN = 40, HEAD = 6, NQ = 8, NKV = 2 };
  hmodel m;
  h_model_init(&m);
  int q = h_tensor(&m, "attn.q", RS_DTYPE_BF16, 2,
                   (int64_t[]){NQ * HEAD, HIDDEN});
  int k = h_tensor(&m, "attn.k", RS_DTYPE_BF16, 2,
                   (int64_t[]){NKV * HEAD, HIDDEN});
  int v = h_tensor(&m, "attn.v", RS_DTYPE_BF16, 2,
                   (int64_t[]){NKV * HEAD, HIDDEN});
  /* Trainer: each tensor on its own, Shard(1) (hidden) over all ranks. */
  const int qkv[3] = {q, k, v};
  for (int i = 0; i < 3; i++)
    h_dtensor_1d(&m, RS_SIDE_SRC, qkv[i], 0, h_np, 1, i);
  /* Inference: one buffer per rank holding its q rows, then its k rows,
   * then its v rows (Shard(0) each), with gaps between the three. */
  int64_t gaps[3] = {16, 40, 8};
  for (int r = 0; r < h_np; r++)
    for (int i = 0; i < 3; i++) {
      int t = qkv[i];
      int64_t off[2], ext[2];
      const int64_t *shape = m.t[t].shape;
      rs_dtensor_local_box(2, shape, 1, (int64_t[]){h_np}, (int[]){0},
                           (int64_t[]){r}, off, ext);
      if (ext[0] == 0) continue;
      h_shard(&m, RS_SIDE_DST, t, r, off, ext, 0, H_APPEND, gaps[i], NULL);
    }
  hrun o = {.gen = 4};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- replicas in several domains ---------------------------------------- */

typedef struct domain_arg {
  int ds, ndom;
} domain_arg;

static void plan_check_domains(hcase *c, const rs_plan *plan,
                               const rs_context *ctx, const hmodel *m,
                               void *arg) {
  const domain_arg *d = arg;
  (void)m;
  for (int r = 0; r < h_np; r++) {
    int dom = -1;
    rs_context_get_domain(ctx, r, &dom);
    EXPECT(c, dom == r / d->ds, "rank %d is in domain %d, want %d", r, dom,
           r / d->ds);
  }
  char detail[256] = "";
  int64_t dup = h_inter_duplicates(plan, ctx, detail, sizeof detail);
  EXPECT(c, dup == 0, "%lld duplicate inter-domain deliveries: %s",
         (long long)dup, detail);
  int64_t n = 0, forwarded = 0;
  rs_plan_num_moves(plan, &n);
  for (int64_t i = 0; i < n; i++) {
    int dst, fwd;
    rs_route route;
    rs_plan_move_info(plan, i, NULL, NULL, &dst, &route, NULL, &fwd);
    forwarded += fwd;
    /* Domains 0 and 1 hold a source replica: nothing crosses into them. */
    EXPECT(c, !(route == RS_ROUTE_INTER && dst / d->ds < 2),
           "move %lld crosses into domain %d, which holds a replica", (long long)i,
           dst / d->ds);
  }
  if (d->ds >= 2 && d->ndom >= 3)
    EXPECT(c, forwarded > 0,
           "no move is forwarded inside a domain, though every rank of "
           "domains 2.. needs the whole tensor 'rep'");
}

static void case_domains(hcase *c) {
  domain_arg d;
  d.ds = h_np >= 8 ? 2 : 1;
  d.ndom = h_np / d.ds;
  hmodel m;
  h_model_init(&m);
  /* Source: replicated in domains 0 and 1, sharded inside each. */
  int ranks[64];
  for (int i = 0; i < 2 * d.ds; i++) ranks[i] = i;
  int a = h_tensor(&m, "rep", RS_DTYPE_F32, 2, (int64_t[]){27, 19});
  h_dtensor(&m, RS_SIDE_SRC, a, 2, (int64_t[]){2, d.ds}, ranks,
            (int[]){RS_REPLICATE, 0}, 0);
  int b = h_tensor(&m, "rep2", RS_DTYPE_U16, 3, (int64_t[]){5, 9, 7});
  h_dtensor(&m, RS_SIDE_SRC, b, 2, (int64_t[]){2, d.ds}, ranks,
            (int[]){RS_REPLICATE, 2}, 1);
  /* Destination: 'rep' whole on every rank; 'rep2' Shard(1) over domains
   * and Shard(0) inside them (replicated inside when ds > size). */
  h_dtensor_1d(&m, RS_SIDE_DST, a, 0, h_np, RS_REPLICATE, 0);
  for (int i = 0; i < h_np; i++) ranks[i] = i;
  h_dtensor(&m, RS_SIDE_DST, b, 2, (int64_t[]){d.ndom, d.ds}, ranks,
            (int[]){1, RS_REPLICATE}, 1);
  hrun o = {.domain_size = d.ds, .plan_check = plan_check_domains,
            .whole_plan = true, .arg = &d, .gen = 5};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* RESHARD_DOMAIN_SIZE and the host default. */
static void case_domain_env(hcase *c) {
  rs_context *ctx = NULL;
  setenv("RESHARD_DOMAIN_SIZE", "2", 1);
  h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL,
       "rs_context_create_mpi with RESHARD_DOMAIN_SIZE=2");
  unsetenv("RESHARD_DOMAIN_SIZE");
  for (int r = 0; ctx && r < h_np; r++) {
    int dom = -1;
    rs_context_get_domain(ctx, r, &dom);
    EXPECT(c, dom == r / 2, "RESHARD_DOMAIN_SIZE=2: rank %d in domain %d", r,
           dom);
  }
  rs_context_destroy(ctx);
  ctx = NULL;
  /* Default: the lowest rank sharing memory with each rank. */
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, h_rank,
                      MPI_INFO_NULL, &local);
  int leader = h_rank, *hosts = malloc((size_t)h_np * sizeof *hosts);
  MPI_Allreduce(&h_rank, &leader, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  MPI_Allgather(&leader, 1, MPI_INT, hosts, 1, MPI_INT, MPI_COMM_WORLD);
  h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL,
       "rs_context_create_mpi");
  for (int r = 0; ctx && r < h_np; r++) {
    int dom = -1, dom0 = -1;
    rs_context_get_domain(ctx, r, &dom);
    for (int q = 0; q < h_np; q++)
      if (hosts[q] == hosts[r]) {
        rs_context_get_domain(ctx, q, &dom0);
        break;
      }
    EXPECT(c, dom == dom0, "ranks %d and %d share a host but sit in domains "
           "%d and %d", r, hosts[r], dom, dom0);
  }
  free(hosts);
  rs_context_destroy(ctx);
}

/* ---- strided source ----------------------------------------------------- */

static void case_strided(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int a = h_tensor(&m, "a", RS_DTYPE_F64, 2, (int64_t[]){19, 13});
  int b = h_tensor(&m, "b", RS_DTYPE_I16, 2, (int64_t[]){11, 17});
  int d = h_tensor(&m, "d", RS_DTYPE_U8, 3, (int64_t[]){4, 5, 6});
  for (int r = 0; r < h_np; r++) {
    int64_t off[3], ext[3], str[3];
    /* a: Shard(0), rows padded to 13 + 5 elements, 24 bytes in. */
    rs_dtensor_local_box(2, m.t[a].shape, 1, (int64_t[]){h_np}, (int[]){0},
                         (int64_t[]){r}, off, ext);
    if (ext[0] > 0) {
      str[0] = 18;
      str[1] = 1;
      h_shard(&m, RS_SIDE_SRC, a, r, off, ext, 0, 24, 0, str);
    }
    /* b: Shard(1), column-major with a padded leading dimension. */
    rs_dtensor_local_box(2, m.t[b].shape, 1, (int64_t[]){h_np}, (int[]){1},
                         (int64_t[]){r}, off, ext);
    if (ext[1] > 0) {
      str[0] = 1;
      str[1] = ext[0] + 3;
      h_shard(&m, RS_SIDE_SRC, b, r, off, ext, 0, H_APPEND, 6, str);
    }
    /* d: Replicate, every element two bytes apart, dims permuted. */
    off[0] = off[1] = off[2] = 0;
    ext[0] = 4, ext[1] = 5, ext[2] = 6;
    str[2] = 2;
    str[0] = 2 * 6 + 1;
    str[1] = str[0] * 4 + 3;
    h_shard(&m, RS_SIDE_SRC, d, r, off, ext, 1, 5, 0, str);
    /* Destinations: a Shard(1) dense, b Shard(0) padded, d Shard(2). */
    rs_dtensor_local_box(2, m.t[a].shape, 1, (int64_t[]){h_np}, (int[]){1},
                         (int64_t[]){r}, off, ext);
    if (ext[1] > 0) h_shard(&m, RS_SIDE_DST, a, r, off, ext, 0, 8, 0, NULL);
    rs_dtensor_local_box(2, m.t[b].shape, 1, (int64_t[]){h_np}, (int[]){0},
                         (int64_t[]){r}, off, ext);
    if (ext[0] > 0) {
      str[0] = 17 + 2;
      str[1] = 1;
      h_shard(&m, RS_SIDE_DST, b, r, off, ext, 1, 2, 0, str);
    }
    rs_dtensor_local_box(3, m.t[d].shape, 1, (int64_t[]){h_np}, (int[]){2},
                         (int64_t[]){r}, off, ext);
    if (ext[2] > 0) h_shard(&m, RS_SIDE_DST, d, r, off, ext, 2, 3, 0, NULL);
  }
  hrun o = {.gen = 6};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- small staging: many rounds ---------------------------------------- */

static void plan_check_staging(hcase *c, const rs_plan *plan,
                               const rs_context *ctx, const hmodel *m,
                               void *arg) {
  (void)ctx;
  (void)m;
  (void)arg;
  int64_t rounds = 0, peak = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &rounds);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_STAGING_BYTES, &peak);
  if (h_rank == 0)
    printf("  small_staging: %lld rounds, at most %lld bytes of staging on a "
           "rank\n", (long long)rounds, (long long)peak);
  EXPECT(c, rounds >= 4, "only %lld rounds with 64 KiB of staging",
         (long long)rounds);
  for (int r = 0; r < h_np; r++) {
    int64_t v = -1;
    rs_plan_stat(plan, r, RS_STAT_STAGING_BYTES, &v);
    EXPECT(c, v >= 0 && v <= 64 * 1024,
           "rank %d needs %lld bytes of staging, the setting is 65536", r,
           (long long)v);
  }
}

static void case_small_staging(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int a = h_tensor(&m, "big", RS_DTYPE_F32, 2, (int64_t[]){517, 301});
  h_dtensor_1d(&m, RS_SIDE_SRC, a, 0, h_np, 0, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, a, 0, h_np, 1, 0);
  /* Held in domain 0 only, wanted whole everywhere: crossings, relays and
   * forwards, each cut to fit. */
  int b = h_tensor(&m, "big2", RS_DTYPE_BF16, 2, (int64_t[]){129, 77});
  h_dtensor_1d(&m, RS_SIDE_SRC, b, 0, h_np < 2 ? 1 : 2, 1, 1);
  h_dtensor_1d(&m, RS_SIDE_DST, b, 0, h_np, RS_REPLICATE, 1);
  hrun o = {.staging = 64 * 1024, .domain_size = 2,
            .plan_check = plan_check_staging, .gen = 7};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- asynchronous: started, then tested until done --------------------- */

static void case_async_polled(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int a = h_tensor(&m, "big", RS_DTYPE_F32, 2, (int64_t[]){517, 301});
  h_dtensor_1d(&m, RS_SIDE_SRC, a, 0, h_np, 0, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, a, 0, h_np, 1, 0);
  hrun o = {.staging = 64 * 1024, .domain_size = 2, .reuse = true,
            .polled = true, .gen = 11};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- plan reuse -------------------------------------------------------- */

static void case_reuse(hcase *c) {
  hmodel m;
  h_model_init(&m);
  int a = h_tensor(&m, "w", RS_DTYPE_F32, 2, (int64_t[]){23, 31});
  h_dtensor_1d(&m, RS_SIDE_SRC, a, 0, h_np, 1, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, a, 0, h_np, 0, 0);
  int b = h_tensor(&m, "u", RS_DTYPE_U64, 1, (int64_t[]){57});
  h_dtensor_1d(&m, RS_SIDE_SRC, b, 0, h_np, 0, 0);
  h_dtensor_1d(&m, RS_SIDE_DST, b, 0, h_np, RS_REPLICATE, 1);
  hrun o = {.reuse = true, .gen = 8};
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- a context on a sub-communicator --------------------------------- */

static void case_subcomm(hcase *c) {
  /* Even and odd world ranks each form a communicator and reshard at the
   * same time, on their own contexts: ranks are communicator ranks. */
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, h_rank % 2, h_rank, &sub);
  int me, n;
  MPI_Comm_rank(sub, &me);
  MPI_Comm_size(sub, &n);
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  h_ok(c, h_context(sub, 20000, &ctx), NULL, "rs_context_create_mpi(sub)");
  int w = -1, r = -2;
  rs_transport_kind kind = 0;
  if (ctx) {
    rs_context_world_size(ctx, &w);
    rs_context_rank(ctx, &r);
    rs_context_transport(ctx, &kind);
  }
  EXPECT(c, w == n && r == me && kind == RS_TRANSPORT_MPI,
         "sub-communicator context: world %d rank %d kind %d, want %d %d %d",
         w, r, (int)kind, n, me, (int)RS_TRANSPORT_MPI);
  enum { ROWS = 9, COLS = 7 };
  int64_t shape[2] = {ROWS, COLS}, off[2], ext[2];
  uint32_t sbuf[ROWS * COLS], dbuf[ROWS * COLS];
  if (ctx) {
    h_ok(c, rs_layout_create(ctx, &src), ctx, "layout");
    h_ok(c, rs_layout_create(ctx, &dst), ctx, "layout");
    rs_layout_add_tensor(src, "x", RS_DTYPE_U32, 2, shape);
    rs_layout_add_tensor(dst, "x", RS_DTYPE_U32, 2, shape);
    rs_dtensor_local_box(2, shape, 1, (int64_t[]){n}, (int[]){0},
                         (int64_t[]){me}, off, ext);
    if (ext[0] > 0)
      h_ok(c, rs_layout_add_shard(src, "x", me, off, ext, 0, 0, NULL), ctx,
           "add source shard");
    /* Destination: everything, on every rank. */
    h_ok(c, rs_layout_add_shard(dst, "x", me, (int64_t[]){0, 0}, shape, 0, 0,
                                NULL),
         ctx, "add destination shard");
    for (int i = 0; i < ROWS * COLS; i++) {
      sbuf[i] = 0;
      dbuf[i] = 0xA5A5A5A5u;
    }
    for (int64_t i = 0; i < ext[0] * COLS; i++)
      sbuf[i] = (uint32_t)((off[0] * COLS + i) * 2654435761u) ^
                (uint32_t)(h_rank % 2);
  }
  h_ok(c, rs_layout_allgather(src), ctx, "allgather(sub)");
  h_ok(c, rs_layout_allgather(dst), ctx, "allgather(sub)");
  if (!c->failed) {
    h_ok(c, rs_plan_create(src, dst, &plan), ctx, "plan(sub)");
    if (plan && ext[0] > 0)
      h_ok(c, rs_plan_bind(plan, RS_SIDE_SRC, me, 0, sbuf, sizeof sbuf), ctx,
           "bind");
    if (plan)
      h_ok(c, rs_plan_bind(plan, RS_SIDE_DST, me, 0, dbuf, sizeof dbuf), ctx,
           "bind");
    /* A world rank is not a context rank. */
    if (plan && n < h_np)
      h_status(c, rs_plan_bind(plan, RS_SIDE_DST, n, 0, dbuf, sizeof dbuf),
               RS_ERR_UNKNOWN_RANK, ctx, "bind rank outside the sub context");
  }
  /* Each half decides for itself whether to execute. */
  int bad = c->failed, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, sub);
  if (!any && h_ok(c, rs_plan_execute(plan), ctx, "execute(sub)"))
    for (int i = 0; i < ROWS * COLS; i++)
      if (!EXPECT(c, dbuf[i] == ((uint32_t)(i * 2654435761u) ^
                                 (uint32_t)(h_rank % 2)),
                  "element %d is %#x", i, dbuf[i]))
        break;
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  MPI_Comm_free(&sub);
}

/* ---- context basics ------------------------------------------------------ */

static void case_context_basics(hcase *c) {
  rs_context *ctx = NULL, *local = NULL;
  h_ok(c, h_context(MPI_COMM_WORLD, 0, &ctx), NULL, "rs_context_create_mpi");
  int w = -1, r = -2;
  rs_transport_kind kind = 0;
  int64_t timeout = 0;
  if (ctx) {
    rs_context_world_size(ctx, &w);
    rs_context_rank(ctx, &r);
    rs_context_transport(ctx, &kind);
    rs_context_get_param(ctx, RS_PARAM_TIMEOUT_MS, &timeout);
  }
  EXPECT(c, w == h_np && r == h_rank && kind == RS_TRANSPORT_MPI,
         "world %d rank %d kind %d", w, r, (int)kind);
  EXPECT(c, timeout == 60000, "default timeout %lld ms", (long long)timeout);
  /* MPI_COMM_NULL is refused, with no context. */
  rs_context *bad = (rs_context *)&bad;
  h_status(c, rs_context_create_mpi(MPI_COMM_NULL, &bad),
           RS_ERR_INVALID_ARGUMENT, NULL, "rs_context_create_mpi(NULL comm)");
  EXPECT(c, bad == NULL, "a failed create leaves *out = %p", (void *)bad);
  /* rs_layout_allgather needs an MPI context. */
  rs_layout *l = NULL;
  if (h_ok(c, rs_context_create_local(2, &local), NULL, "local context") &&
      h_ok(c, rs_layout_create(local, &l), local, "layout"))
    h_status(c, rs_layout_allgather(l), RS_ERR_UNSUPPORTED, local,
             "rs_layout_allgather on an in-process context");
  h_status(c, rs_layout_allgather(NULL), RS_ERR_NULL_POINTER, NULL,
           "rs_layout_allgather(NULL)");
  rs_layout_destroy(l);
  rs_context_destroy(local);
  rs_context_destroy(ctx);
}

/* ---- allgather rejects what it must ------------------------------------ */

static void case_allgather_rejects_foreign_shard(hcase *c) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL, *ok = NULL;
  int64_t shape[2] = {h_np, 4};
  int other = (h_rank + 1) % h_np;
  if (h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") &&
      h_ok(c, rs_layout_create(ctx, &l), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(l, "t", RS_DTYPE_F32, 2, shape), ctx,
           "tensor") &&
      h_ok(c, rs_layout_add_shard(l, "t", h_rank, (int64_t[]){h_rank, 0},
                                  (int64_t[]){1, 4}, 0, 0, NULL),
           ctx, "own shard") &&
      h_ok(c, rs_layout_add_shard(l, "t", other, (int64_t[]){other, 0},
                                  (int64_t[]){1, 4}, 0, 0, NULL),
           ctx, "foreign shard")) {
    /* Every rank holds a foreign shard, so every rank refuses (and says
     * so to the others) and returns its own status. */
    rs_status st = rs_layout_allgather(l);
    if (h_status(c, st, RS_ERR_INVALID_ARGUMENT, ctx,
                 "allgather with a shard of another rank")) {
      const char *msg = rs_context_last_error(ctx);
      EXPECT(c, h_mentions_rank(msg, other),
             "the message does not name rank %d: %s", other, msg);
    }
    int64_t ns = -1;
    int nt = -1;
    rs_layout_num_shards(l, &ns);
    rs_layout_num_tensors(l, &nt);
    EXPECT(c, ns == 2 && nt == 1,
           "a failed allgather changed the layout: %lld shards, %d tensors",
           (long long)ns, nt);
  }
  if (!h_all_ok(c)) goto done;
  /* The context still works. */
  if (h_ok(c, rs_layout_create(ctx, &ok), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(ok, "t", RS_DTYPE_F32, 2, shape), ctx,
           "tensor") &&
      h_ok(c, rs_layout_add_shard(ok, "t", h_rank, (int64_t[]){h_rank, 0},
                                  (int64_t[]){1, 4}, 0, 0, NULL),
           ctx, "own shard")) {
  }
  if (h_ok(c, rs_layout_allgather(ok), ctx, "allgather after the rejection")) {
    int64_t ns = -1;
    rs_layout_num_shards(ok, &ns);
    EXPECT(c, ns == h_np, "%lld shards after allgather, want %d",
           (long long)ns, h_np);
  }
done:
  rs_layout_destroy(l);
  rs_layout_destroy(ok);
  rs_context_destroy(ctx);
}

static void case_allgather_tensor_mismatch(hcase *c) {
  /* The last rank declares 't' with another shape: every rank decodes
   * every contribution, so every rank reports RS_ERR_MISMATCH. */
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  int64_t shape[2] = {h_np, 4 + (h_rank == h_np - 1)};
  if (h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") &&
      h_ok(c, rs_layout_create(ctx, &l), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(l, "t", RS_DTYPE_F32, 2, shape), ctx,
           "tensor") &&
      h_ok(c, rs_layout_add_tensor(l, "same", RS_DTYPE_I8, 1,
                                   (int64_t[]){3}), ctx, "tensor") &&
      h_ok(c, rs_layout_add_shard(l, "t", h_rank, (int64_t[]){h_rank, 0},
                                  (int64_t[]){1, 4}, 0, 0, NULL),
           ctx, "own shard")) {
  }
  if (!h_all_ok(c)) goto done;
  rs_status st = rs_layout_allgather(l);
  if (h_np > 1 &&
      h_status(c, st, RS_ERR_MISMATCH, ctx, "allgather of clashing tensors")) {
    const char *msg = rs_context_last_error(ctx);
    EXPECT(c, strstr(msg, "'t'") && h_mentions_rank(msg, h_np - 1),
           "the message names neither tensor 't' nor rank %d: %s", h_np - 1,
           msg);
    int64_t ns = -1;
    int nt = -1;
    rs_layout_num_shards(l, &ns);
    rs_layout_num_tensors(l, &nt);
    EXPECT(c, ns == 1 && nt == 2,
           "a failed allgather changed the layout: %lld shards, %d tensors",
           (long long)ns, nt);
  }
done:
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

/* Layouts of a u8[np, 3] tensor named `name`: rank r holds row r and
 * needs row r - 1 (mod np), so every rank sends one row and receives one;
 * allgathered. False when any rank failed. */
static bool ring_layouts(hcase *c, rs_context *ctx, const char *name,
                         rs_layout **src, rs_layout **dst) {
  int64_t shape[2] = {h_np, 3};
  int from = (h_rank + h_np - 1) % h_np;
  if (h_ok(c, rs_layout_create(ctx, src), ctx, "layout") &&
      h_ok(c, rs_layout_create(ctx, dst), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(*src, name, RS_DTYPE_U8, 2, shape), ctx,
           "source tensor") &&
      h_ok(c, rs_layout_add_tensor(*dst, name, RS_DTYPE_U8, 2, shape), ctx,
           "destination tensor") &&
      h_ok(c, rs_layout_add_shard(*src, name, h_rank, (int64_t[]){h_rank, 0},
                                  (int64_t[]){1, 3}, 0, 0, NULL), ctx, "shard") &&
      h_ok(c, rs_layout_add_shard(*dst, name, h_rank, (int64_t[]){from, 0},
                                  (int64_t[]){1, 3}, 0, 0, NULL), ctx, "shard")) {
  }
  if (!h_all_ok(c)) return false;
  h_ok(c, rs_layout_allgather(*src), ctx, "allgather (source)");
  h_ok(c, rs_layout_allgather(*dst), ctx, "allgather (destination)");
  return h_all_ok(c);
}

/* Bind row h_rank of the ring, execute, check the row that arrived. */
static void ring_run(hcase *c, rs_context *ctx, rs_plan *plan) {
  int from = (h_rank + h_np - 1) % h_np;
  unsigned char sbuf[3], dbuf[3] = {0xA5, 0xA5, 0xA5};
  for (int i = 0; i < 3; i++) sbuf[i] = (unsigned char)(h_rank * 3 + i + 1);
  if (h_ok(c, rs_plan_bind(plan, RS_SIDE_SRC, h_rank, 0, sbuf, 3), ctx, "bind") &&
      h_ok(c, rs_plan_bind(plan, RS_SIDE_DST, h_rank, 0, dbuf, 3), ctx, "bind")) {
  }
  if (!h_all_ok(c)) return;
  if (h_ok(c, rs_plan_execute(plan), ctx, "execute"))
    for (int i = 0; i < 3; i++)
      EXPECT(c, dbuf[i] == (unsigned char)(from * 3 + i + 1),
             "element %d is %d, want %d", i, dbuf[i], from * 3 + i + 1);
}

static void case_long_tensor_name(hcase *c) {
  /* rs_layout_add_tensor takes any non-empty name; a layout it accepted
   * must survive the exchange. */
  enum { LEN = 5000 };
  char *name = malloc(LEN + 1);
  if (!name) abort();
  for (int i = 0; i < LEN; i++) name[i] = (char)('a' + i % 26);
  name[LEN] = '\0';
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  if (h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") &&
      ring_layouts(c, ctx, name, &src, &dst)) {
    h_ok(c, rs_plan_create(src, dst, &plan), ctx, "plan");
    if (h_all_ok(c)) ring_run(c, ctx, plan);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  free(name);
}

/* RS_PARAM_PLAN_PART between processes: a rank keeps only its own part,
 * runs it with the others' parts, and is refused another rank's part or a
 * rank outside the world (rs_plan_create is no collective call, so each
 * rank is refused alone). */
static void case_plan_part(hcase *c) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL, *other = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") ||
      !ring_layouts(c, ctx, "w", &src, &dst))
    goto done;
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, h_np), ctx,
       "plan part: the world size");
  other = (rs_plan *)&other;
  h_status(c, rs_plan_create(src, dst, &other), RS_ERR_UNKNOWN_RANK, ctx,
           "the part of a rank outside the world");
  EXPECT(c, other == NULL, "a refused plan was handed out");
  if (h_np > 1) {
    h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, (h_rank + 1) % h_np),
         ctx, "plan part: the next rank");
    h_status(c, rs_plan_create(src, dst, &other), RS_ERR_INVALID_ARGUMENT, ctx,
             "another rank's part");
  }
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, h_rank), ctx,
       "plan part: this rank");
  if (!h_ok(c, rs_plan_create(src, dst, &plan), ctx, "this rank's part"))
    goto done;
  /* one row out and one in (a local copy when alone), and the figures of
   * every rank */
  int64_t n = -1, moves = -1;
  rs_plan_num_moves(plan, &n);
  EXPECT(c, n == (h_np > 1 ? 2 : 1), "rank %d's part has %lld moves",
         h_rank, (long long)n);
  for (int r = 0; r < h_np; r++) {
    rs_plan_stat(plan, r, RS_STAT_MOVES, &moves);
    EXPECT(c, moves == (h_np > 1 ? 2 : 1),
           "rank %d's part says rank %d takes part in %lld moves", h_rank, r,
           (long long)moves);
  }
  if (h_all_ok(c)) ring_run(c, ctx, plan);
done:
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

/* Per-rank planning: with rounds by domain pair and its own part asked
 * for, each rank plans what lands in its domain and learns the rest from
 * its peers (rs_plan_create is collective): its part is the whole plan's,
 * with every rank's figures, and runs, also planned again while an
 * execution of it waits for rs_plan_wait. A row no source holds fails every
 * rank's rs_plan_create alike, the ranks that could plan theirs too, and
 * so does one rank's layouts that do not fit, at once. */
static void case_per_rank_plan(hcase *c) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL, *holey = NULL, *odd = NULL;
  rs_plan *plan = NULL, *whole = NULL, *refused = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context") ||
      !ring_layouts(c, ctx, "w", &src, &dst))
    goto done;
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_ROUNDS,
                               RS_ROUNDS_BY_DOMAIN_PAIR), ctx, "rounds");
  h_ok(c, rs_plan_create(src, dst, &whole), ctx, "the whole plan");
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, h_rank), ctx,
       "plan part: this rank");
  if (!h_ok(c, rs_plan_create(src, dst, &plan), ctx, "this rank's part"))
    goto done;
  char why[256];
  EXPECT(c, th_same_moves_of(whole, plan, h_rank, why, sizeof why),
         "rank %d's part planned with its peers: %s", h_rank, why);
  uint64_t a = 0, b = 1;
  rs_plan_fingerprint(whole, &a);
  rs_plan_fingerprint(plan, &b);
  EXPECT(c, a == b, "rank %d's part has another fingerprint", h_rank);
  for (int r = -1; r < h_np; r++)
    for (int s = RS_STAT_BYTES_SENT_INTRA; s <= RS_STAT_BYTES_UNPACKED; s++) {
      int64_t x = -1, y = -2;
      rs_plan_stat(whole, r < 0 ? RS_ALL_RANKS : r, (rs_stat)s, &x);
      rs_plan_stat(plan, r < 0 ? RS_ALL_RANKS : r, (rs_stat)s, &y);
      EXPECT(c, x == y, "figure %d of rank %d: %lld in the whole plan, %lld "
             "in rank %d's part", s, r, (long long)x, (long long)y, h_rank);
    }
  if (h_all_ok(c)) ring_run(c, ctx, plan);
  /* a part planned while an execution waits for rs_plan_wait: the
   * exchange must not meet that execution's records */
  if (h_all_ok(c)) {
    int from = (h_rank + h_np - 1) % h_np;
    unsigned char sbuf[3], dbuf[3] = {0xA5, 0xA5, 0xA5};
    for (int i = 0; i < 3; i++) sbuf[i] = (unsigned char)(h_rank * 3 + i + 7);
    rs_plan *again = NULL;
    if (h_ok(c, rs_plan_bind(plan, RS_SIDE_SRC, h_rank, 0, sbuf, 3), ctx,
             "bind") &&
        h_ok(c, rs_plan_bind(plan, RS_SIDE_DST, h_rank, 0, dbuf, 3), ctx,
             "bind") &&
        h_ok(c, rs_plan_execute_async(plan, NULL), ctx, "execute_async")) {
      h_ok(c, rs_plan_create(src, dst, &again), ctx,
           "a part planned while an execution waits");
      if (h_ok(c, rs_plan_wait(plan), ctx, "wait"))
        for (int i = 0; i < 3; i++)
          EXPECT(c, dbuf[i] == (unsigned char)(from * 3 + i + 7),
                 "element %d is %d, want %d", i, dbuf[i], from * 3 + i + 7);
      EXPECT(c, again && th_same_moves_of(whole, again, h_rank, why,
                                          sizeof why),
             "rank %d's part planned during an execution: %s", h_rank,
             again ? why : "none");
    }
    rs_plan_destroy(again);
  }
  /* rank 0 holds no row: row 0 is needed by rank 1 and held by none */
  int64_t shape[2] = {h_np, 3};
  if (h_np > 1 &&
      h_ok(c, rs_layout_create(ctx, &holey), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(holey, "w", RS_DTYPE_U8, 2, shape), ctx,
           "tensor")) {
    for (int r = 1; r < h_np; r++)
      h_ok(c, rs_layout_add_shard(holey, "w", r, (int64_t[]){r, 0},
                                  (int64_t[]){1, 3}, 0, 0, NULL),
           ctx, "shard");
    refused = (rs_plan *)&refused;
    h_status(c, rs_plan_create(holey, dst, &refused), RS_ERR_NOT_COVERED, ctx,
             "a part of a plan with a row no source holds");
    EXPECT(c, refused == NULL, "a refused plan was handed out");
  }
  /* rank 0's own destination does not fit the source: it is refused
   * before it plans, and its peers learn it in the exchange instead of
   * waiting for it until the timeout */
  if (h_np > 1 &&
      h_ok(c, rs_layout_create(ctx, &odd), ctx, "layout") &&
      h_ok(c, rs_layout_add_tensor(odd, "w", RS_DTYPE_U8, 2,
                                   (int64_t[]){h_np, 4}), ctx, "tensor")) {
    double t0 = h_now();
    h_status(c, rs_plan_create(src, h_rank == 0 ? odd : dst, &refused),
             RS_ERR_INCOMPATIBLE, ctx, "a part when rank 0's layouts do not "
             "fit");
    EXPECT(c, h_now() - t0 < 10.0, "rank %d waited %.1f s for a refused "
           "peer", h_rank, h_now() - t0);
  }
done:
  rs_plan_destroy(plan);
  rs_plan_destroy(whole);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_layout_destroy(holey);
  rs_layout_destroy(odd);
  rs_context_destroy(ctx);
}

static void case_empty_layouts(hcase *c) {
  /* Nothing declared anywhere: allgather, plan and execute still agree. */
  hmodel m;
  h_model_init(&m);
  hrun o = {.gen = 10};
  h_transfer(c, &m, &o);
  /* One tensor nobody holds on either side. */
  h_tensor(&m, "unused", RS_DTYPE_F32, 1, (int64_t[]){5});
  h_transfer(c, &m, &o);
  h_model_free(&m);
}

/* ---- the random property test ------------------------------------------ */

static const rs_dtype all_dtypes[] = {
    RS_DTYPE_U8,  RS_DTYPE_I8,       RS_DTYPE_U16,      RS_DTYPE_I16,
    RS_DTYPE_U32, RS_DTYPE_I32,      RS_DTYPE_U64,      RS_DTYPE_I64,
    RS_DTYPE_F16, RS_DTYPE_BF16,     RS_DTYPE_F32,      RS_DTYPE_F64,
    RS_DTYPE_F8_E4M3, RS_DTYPE_F8_E5M2, RS_DTYPE_BOOL};

/* Strides for a box: NULL (dense) or padded, possibly with the dims in a
 * shuffled order and a step of 2 in the innermost one. */
static const int64_t *random_strides(hrng *g, int nd, const int64_t *ext,
                                     int64_t *str) {
  int style = (int)h_range(g, 0, 5);
  if (style <= 2) return NULL;
  int perm[RS_MAX_DIMS];
  for (int d = 0; d < nd; d++) perm[d] = d;
  if (style == 5)
    for (int d = nd - 1; d > 0; d--) {
      int j = (int)h_range(g, 0, d);
      int t = perm[d];
      perm[d] = perm[j];
      perm[j] = t;
    }
  int64_t cur = style == 4 ? 2 : 1;
  for (int i = nd - 1; i >= 0; i--) {
    int d = perm[i];
    str[d] = cur;
    cur = cur * ext[d] + h_range(g, 0, 3);
  }
  return str;
}

static void add_box(hrng *g, hmodel *m, int side, int t, int rank,
                    const int64_t *off, const int64_t *ext) {
  int64_t str[RS_MAX_DIMS];
  const int64_t *s = random_strides(g, m->t[t].ndim, ext, str);
  int buffer = (int)h_range(g, 0, 2);
  int64_t gap = h_range(g, 0, 3) == 0 ? h_range(g, 0, 23) : 0;
  h_shard(m, side, t, rank, off, ext, buffer, H_APPEND, gap, s);
}

/* A DTensor mesh over a random subset of ranks, random placements
 * (Replicate or Shard(d), several axes may shard one dim: nested). */
static void random_mesh(hrng *g, hmodel *m, int side, int t) {
  int ranks[64];
  for (int r = 0; r < h_np; r++) ranks[r] = r;
  for (int r = h_np - 1; r > 0; r--) {
    int j = (int)h_range(g, 0, r);
    int x = ranks[r];
    ranks[r] = ranks[j];
    ranks[j] = x;
  }
  int k = (int)h_range(g, 1, h_np);
  int mesh_ndim = (int)h_range(g, 1, 3);
  int64_t mesh[3];
  int rest = k;
  for (int a = 0; a < mesh_ndim - 1; a++) {
    int divs[64], nd = 0;
    for (int d = 1; d <= rest; d++)
      if (rest % d == 0) divs[nd++] = d;
    mesh[a] = divs[h_range(g, 0, nd - 1)];
    rest /= (int)mesh[a];
  }
  mesh[mesh_ndim - 1] = rest;
  int place[3];
  for (int a = 0; a < mesh_ndim; a++)
    place[a] = h_range(g, 0, 2) == 0 ? RS_REPLICATE
                                     : (int)h_range(g, 0, m->t[t].ndim - 1);
  int64_t coord[3];
  for (int i = 0; i < k; i++) {
    int rest2 = i;
    for (int a = mesh_ndim - 1; a >= 0; a--) {
      coord[a] = rest2 % mesh[a];
      rest2 /= (int)mesh[a];
    }
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    if (rs_dtensor_local_box(m->t[t].ndim, m->t[t].shape, mesh_ndim, mesh,
                             place, coord, off, ext) != RS_OK)
      abort();
    bool empty = false;
    for (int d = 0; d < m->t[t].ndim; d++) empty |= ext[d] == 0;
    if (!empty) add_box(g, m, side, t, ranks[i], off, ext);
  }
}

static void random_boxes(hrng *g, hmodel *m, int side, int t, int count) {
  for (int i = 0; i < count; i++) {
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    for (int d = 0; d < m->t[t].ndim; d++) {
      int64_t n = m->t[t].shape[d];
      off[d] = h_range(g, 0, n - 1);
      ext[d] = h_range(g, 1, n - off[d]);
    }
    add_box(g, m, side, t, (int)h_range(g, 0, h_np - 1), off, ext);
  }
}

/* Mostly small tensors; one pair in five has large ones (then planned
 * with 64 KiB of staging: many rounds). Returns whether it is large. */
static bool random_model(hrng *g, hmodel *m) {
  static const int64_t small_size[5] = {0, 150, 29, 11, 7};
  static const int64_t large_size[5] = {0, 20000, 300, 50, 18};
  bool large = h_range(g, 0, 4) == 0;
  const int64_t *max_size = large ? large_size : small_size;
  int nt = (int)h_range(g, 1, 3);
  for (int t = 0; t < nt; t++) {
    char name[32];
    int64_t shape[4];
    int nd = (int)h_range(g, 1, 4);
    for (int d = 0; d < nd; d++) shape[d] = h_range(g, 1, max_size[nd]);
    snprintf(name, sizeof name, "p%d.t%d", (int)h_range(g, 0, 999), t);
    h_tensor(m, name,
             all_dtypes[h_range(g, 0, sizeof all_dtypes / sizeof *all_dtypes - 1)],
             nd, shape);
    /* Source: a mesh covers every element; maybe more replicas on top. */
    random_mesh(g, m, RS_SIDE_SRC, t);
    if (h_range(g, 0, 2) == 0) random_mesh(g, m, RS_SIDE_SRC, t);
    if (h_range(g, 0, 2) == 0)
      random_boxes(g, m, RS_SIDE_SRC, t, (int)h_range(g, 1, 3));
    /* Destination: meshes and loose boxes, overlapping as they fall. */
    if (h_range(g, 0, 3) != 0) random_mesh(g, m, RS_SIDE_DST, t);
    if (h_range(g, 0, 2) == 0) random_mesh(g, m, RS_SIDE_DST, t);
    if (m->ns[RS_SIDE_DST] == 0 || h_range(g, 0, 2) == 0)
      random_boxes(g, m, RS_SIDE_DST, t, (int)h_range(g, 1, 4));
  }
  return large;
}

static void case_property(hcase *c) {
  rs_context *ctx = NULL;
  if (!h_ok(c, h_context(MPI_COMM_WORLD, 20000, &ctx), NULL, "context"))
    return;
  static const int64_t staging[3] = {64 * 1024, 256 * 1024, 256 << 20};
  int64_t elems0 = h_elems_checked, moves0 = h_moves_planned;
  h_rounds_max = 0;
  double t0 = h_now();
  int it = 0, by_pair = 0;
  for (; it < g_iters; it++) {
    hrng g = {g_seed * 1000003u + (uint64_t)it};
    hmodel m;
    h_model_init(&m);
    bool large = random_model(&g, &m);
    /* Random domains, the same on every rank. */
    int ndom = (int)h_range(&g, 1, h_np);
    for (int r = 0; r < h_np; r++)
      rs_context_set_domain(ctx, r, (int)h_range(&g, 0, ndom - 1));
    int64_t stage = staging[h_range(&g, 0, 2)];
    rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES,
                         large ? staging[0] : stage);
    /* Checksummed messages half the time. */
    h_ok(c, rs_context_set_param(ctx, RS_PARAM_INTEGRITY, h_range(&g, 0, 1)),
         ctx, "RS_PARAM_INTEGRITY");
    /* Rounds by domain pair every third pair (not drawn: the layouts stay
     * those of the seed). */
    h_ok(c, rs_context_set_param(ctx, RS_PARAM_ROUNDS,
                                 it % 3 == 1 ? RS_ROUNDS_BY_DOMAIN_PAIR
                                             : RS_ROUNDS_PACKED),
         ctx, "RS_PARAM_ROUNDS");
    by_pair += it % 3 == 1;
    hrun o = {.ctx = ctx, .gen = (uint64_t)it + 100};
    h_transfer(c, &m, &o);
    h_model_free(&m);
    if (!h_all_ok(c)) {
      if (c->failed) {
        char tail[96];
        snprintf(tail, sizeof tail, " (iteration %d, seed %llu)", it,
                 (unsigned long long)g_seed);
        size_t n = strlen(c->why);
        snprintf(c->why + n, sizeof c->why - n, "%s", tail);
      }
      break;
    }
  }
  rs_context_destroy(ctx);
  int64_t mine = h_elems_checked - elems0, all = 0;
  MPI_Reduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (h_rank == 0)
    printf("  property: %d layout pairs (%d with rounds by domain pair), "
           "%lld moves, up to %lld rounds, %lld destination elements "
           "checked, %.2f s\n",
           it, by_pair, (long long)(h_moves_planned - moves0),
           (long long)h_rounds_max, (long long)all, h_now() - t0);
}

/* ---- main -------------------------------------------------------------- */

static const hcase_def cases[] = {
    {"context_basics", case_context_basics},
    {"disjoint_groups", case_disjoint},
    {"colocated", case_colocated},
    {"idle_ranks", case_idle},
    {"fused_qkv", case_fused_qkv},
    {"replicas_in_domains", case_domains},
    {"domain_env", case_domain_env},
    {"strided_source", case_strided},
    {"small_staging", case_small_staging},
    {"plan_reuse", case_reuse},
    {"async_polled", case_async_polled},
    {"subcomm", case_subcomm},
    {"allgather_rejects_foreign_shard", case_allgather_rejects_foreign_shard},
    {"allgather_tensor_mismatch", case_allgather_tensor_mismatch},
    {"long_tensor_name", case_long_tensor_name},
    {"plan_part", case_plan_part},
    {"per_rank_plan", case_per_rank_plan},
    {"empty_layouts", case_empty_layouts},
    {"property", case_property},
};

int main(int argc, char **argv) {
  h_init(&argc, &argv);
  const char *only = NULL, *skip = NULL;
  unsigned long long seed = 0;
  const char *env = getenv("RESHARD_MPI_SEED");
  if (env && env[0]) seed = strtoull(env, NULL, 10);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iters")) g_iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!strcmp(argv[i], "--skip")) skip = argv[i + 1];
  }
  if (!seed) seed = (unsigned long long)time(NULL) ^ (unsigned long long)clock();
  g_seed = seed;
  MPI_Bcast(&g_seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (h_rank == 0)
    printf("libreshard %s, %d ranks, property seed %llu (%d iterations; "
           "RESHARD_MPI_SEED=%llu replays it)\n",
           rs_version_string(), h_np, (unsigned long long)g_seed, g_iters,
           (unsigned long long)g_seed);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if ((!only || !strcmp(only, cases[i].name)) &&
        (!skip || strcmp(skip, cases[i].name)))
      h_run_case(&cases[i]);
  return h_finish();
}
