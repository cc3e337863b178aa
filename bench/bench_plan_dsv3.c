/* SPDX-License-Identifier: Apache-2.0 */
/* bench_plan_dsv3: how long rs_plan_create takes, and how much memory it
 * needs, for a DeepSeek-V3-shaped refit on 512 ranks (or more: see Usage).
 *
 * Model: the recipes' catalog's DeepSeek-V3 (core/recipes/; bf16, shapes
 * from shared/reference/layer-tensors.md): 61 layers, 0-2 dense MLP, 3-60
 * MoE with the 256 routed experts stacked per layer as trainers hold them
 * ([256, 2048, 7168] gate/up, [256, 7168, 2048] down), MLA attention,
 * norms, router gate and its f32 e_score_correction_bias, shared experts,
 * embed_tokens / lm_head / model.norm. 1025 tensors.
 *
 * Source (trainer, ranks 0..255 at DP2): PP8 x EP16 x DP2, Megatron rank order
 * (EP fastest, then DP, then PP): rank = stage*32 + dp*16 + ep. Layer L on
 * stage L*8/61, embed on stage 0, model.norm and lm_head on stage 7.
 * Stacked experts: mesh [DP2, EP16], placements [Replicate, Shard(0)];
 * every other tensor replicated over the 32 ranks of its stage (TP1).
 * Local memory: one contiguous parameter buffer per dtype (Megatron style):
 * buffer 0 bf16, buffer 1 f32.
 *
 * Destination (inference, ranks 256..511 at DP2): TP8 x DP32, rank = 256 + dp*8
 * + tp; mesh [DP32, TP8], placements [Replicate, Shard(d)]: column-parallel d=0
 * (q_a, q_b, kv_a, kv_b, gate/up, shared gate/up, embed, lm_head), row-parallel
 * d=1 (o_proj, down, shared down), stacked experts d=1 for gate/up and d=2 for
 * down; norms, router and bias replicated. (vLLM holds q_a and kv_a whole on
 * every TP rank, as the catalog's RS_ROLE_REPL and the CLI's layouts say; this
 * bench has always split them on dim 0, and keeps doing so, so that its figures
 * stay comparable.) Local memory: one buffer per tensor (vLLM style, one torch
 * tensor per parameter).
 *
 * Domains of 8 consecutive ranks. Each rank's part (RS_PARAM_PLAN_PART) of
 * a trainer and of an inference rank is made too: the memory it keeps
 * beside the whole plan's. So is what lands in the last inference domain
 * (rsi_plan_create_domain), planned first, in this process, by the context
 * of one of its ranks as an MPI process would: its time and peak beside
 * the whole plan's and against the targets. And with rounds by domain
 * pair, the part of the first trainer domain and of that inference
 * domain: what a rank of an MPI context computes alone when it plans its
 * own part (per-rank planning), before its one exchange with its peers.
 *
 * Usage: bench_plan_dsv3 [repetitions] [trainer DP]. The trainer DP (2 by
 * default) scales the job: DP x 128 trainer ranks and as many inference
 * ranks (TP8 x DP*16 engines); 64 is DeepSeek-V3 on 8192 GPUs a side. */
#include "bench_common.h"

#include "base/context.h" /* a child's context driving one rank */
#include "plan/plan.h"    /* rsi_plan_create_domain: a domain's part */

#include <sys/wait.h>

#include "catalog.h"
#include "frameworks.h"

#if defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define BENCH_HAVE_MALLINFO2 1
#endif

enum { PP = 8, EP = 16, TP = 8, DOMAIN = 8 };

/* The job's size: EDP trainer data-parallel replicas (2 by default: 256
 * trainer ranks) and as many inference ranks, IDP = 16 * EDP engines of
 * TP8. Set once from the command line. */
static int EDP = 2, IDP, STAGE_RANKS, N_TRAIN, N_INFER, WORLD;

static void set_scale(int edp) {
  EDP = edp;
  STAGE_RANKS = EP * EDP;
  N_TRAIN = PP * STAGE_RANKS;
  IDP = N_TRAIN / TP;
  N_INFER = TP * IDP;
  WORLD = N_TRAIN + N_INFER;
}

/* A tensor of the catalog's model and where the bench places it. */
typedef struct tspec {
  const rt_tensor *x; /* name, dtype, shape */
  int stage;   /* pipeline stage on the trainer side */
  int expert;  /* 1: stacked experts, Shard(0) over EP */
  int dst_dim; /* TP-sharded dim on the inference side; -1: replicated */
} tspec;

typedef struct model {
  rt_model cat; /* the catalog's DeepSeek-V3 */
  tspec *t;
  int n;
} model;

/* The dim the inference side's TP axis shards (-1: none), as the
 * library's vLLM recipe places it (reshard/recipes.h), but for the MLA
 * down-projections, split on dim 0 here (see the top of the file). */
static int dst_dim_of(const rs_recipe *r, const rt_model *cat, int i) {
  if (cat->t[i].role == RS_ROLE_REPL) return 0;
  rt_mesh mesh;
  rt_recipe_mesh(r, RS_SIDE_DST, i, &mesh);
  if (strcmp(mesh.axis[0], "tp") != 0) { /* axis "tp" comes first */
    fprintf(stderr, "%s: no TP axis first in its inference mesh\n",
            cat->t[i].name);
    exit(1);
  }
  return mesh.place[0] == RS_REPLICATE ? -1 : mesh.place[0];
}

static void build_model(model *m) {
  rt_err e;
  if (rt_model_build(rt_model_find("DeepSeek-V3"), &m->cat, &e) != 0) {
    fprintf(stderr, "bench_plan_dsv3: %s\n", e.msg);
    exit(1);
  }
  /* stages as Megatron's pipeline puts them, from the library's recipe */
  char train[64], infer[64];
  snprintf(train, sizeof train, "tp=1,ep=%d,pp=%d,edp=%d", EP, PP, EDP);
  snprintf(infer, sizeof infer, "tp=%d,dp=%d", TP, IDP);
  rs_recipe *r = NULL;
  if (rs_recipe_create(m->cat.rs, train, infer, &r) != RS_OK) {
    fprintf(stderr, "bench_plan_dsv3: %s\n", rs_last_error());
    exit(1);
  }
  m->n = m->cat.n;
  m->t = bench_xcalloc((size_t)m->n, sizeof *m->t);
  for (int i = 0; i < m->n; i++) {
    tspec *t = &m->t[i];
    rt_mesh sm;
    rt_recipe_mesh(r, RS_SIDE_SRC, i, &sm);
    t->x = &m->cat.t[i];
    t->stage = sm.rank0 / STAGE_RANKS;
    t->expert =
        t->x->role == RS_ROLE_EXPERT_COL || t->x->role == RS_ROLE_EXPERT_ROW;
    t->dst_dim = dst_dim_of(r, &m->cat, i);
  }
  rs_recipe_destroy(r);
}

/* Source and destination meshes of tensor t. */
static void src_mesh(const tspec *t, int64_t mesh_shape[2], int ranks[],
                     int placements[2]) {
  mesh_shape[0] = EDP;
  mesh_shape[1] = EP;
  for (int i = 0; i < STAGE_RANKS; i++) ranks[i] = t->stage * STAGE_RANKS + i;
  placements[0] = RS_REPLICATE;
  placements[1] = t->expert ? 0 : RS_REPLICATE;
}

static void dst_mesh(const tspec *t, int64_t mesh_shape[2], int ranks[],
                     int placements[2]) {
  mesh_shape[0] = IDP;
  mesh_shape[1] = TP;
  for (int i = 0; i < N_INFER; i++) ranks[i] = N_TRAIN + i;
  placements[0] = RS_REPLICATE;
  placements[1] = t->dst_dim >= 0 ? t->dst_dim : RS_REPLICATE;
}

/* Bytes of the local shard at mesh coordinate 0 (all shards are even here,
 * which the bench checks through the volume totals below). */
static int64_t local_bytes(const tspec *t, const int64_t mesh_shape[2],
                           const int placements[2]) {
  int64_t coord[2] = {0, 0}, off[3], ext[3];
  rs_status st = rs_dtensor_local_box(t->x->ndim, t->x->shape, 2, mesh_shape,
                                      placements, coord, off, ext);
  if (st != RS_OK) {
    fprintf(stderr, "rs_dtensor_local_box(%s): %s: %s\n", t->x->name,
            rs_status_name(st), rs_last_error());
    exit(1);
  }
  int64_t n = 1;
  for (int d = 0; d < t->x->ndim; d++) n *= ext[d];
  return n * (int64_t)rs_dtype_size(t->x->dtype);
}

static void build_layouts(rs_context *ctx, const model *m, rs_layout **src,
                          rs_layout **dst) {
  int *sranks = bench_xmalloc(sizeof(int) * STAGE_RANKS);
  int *dranks = bench_xmalloc(sizeof(int) * N_INFER);
  int64_t src_off[PP][2] = {{0}};
  BENCH_CHECK(ctx, rs_layout_create(ctx, src));
  BENCH_CHECK(ctx, rs_layout_create(ctx, dst));
  for (int i = 0; i < m->n; i++) {
    const tspec *t = &m->t[i];
    int64_t ms[2];
    int pl[2];
    const rt_tensor *x = t->x;
    BENCH_CHECK(ctx, rs_layout_add_tensor(*src, x->name, x->dtype, x->ndim,
                                          x->shape));
    BENCH_CHECK(ctx, rs_layout_add_tensor(*dst, x->name, x->dtype, x->ndim,
                                          x->shape));
    src_mesh(t, ms, sranks, pl);
    int buf = x->dtype == RS_DTYPE_F32 ? 1 : 0;
    BENCH_CHECK(ctx, rs_layout_add_dtensor(*src, x->name, 2, ms, sranks, pl,
                                           buf, src_off[t->stage][buf]));
    src_off[t->stage][buf] += local_bytes(t, ms, pl);
    dst_mesh(t, ms, dranks, pl);
    BENCH_CHECK(ctx, rs_layout_add_dtensor(*dst, x->name, 2, ms, dranks, pl,
                                           i, 0));
  }
  free(sranks);
  free(dranks);
}

/* ---- naive baseline: all-pairs box intersection on the same shards ---- */

typedef struct shard_list {
  int ndim;
  int ns, nd;      /* source, destination shards (non-empty) */
  int64_t *s_off;  /* ns * ndim */
  int64_t *s_ext;
  int64_t *d_off;  /* nd * ndim */
  int64_t *d_ext;
} shard_list;

static int boxes_of(const rt_tensor *t, const int64_t ms[2], const int pl[2],
                    int64_t *off, int64_t *ext) {
  int n = 0;
  for (int64_t a = 0; a < ms[0]; a++)
    for (int64_t b = 0; b < ms[1]; b++) {
      int64_t coord[2] = {a, b};
      int64_t *o = off + (size_t)n * t->ndim, *e = ext + (size_t)n * t->ndim;
      rs_status st = rs_dtensor_local_box(t->ndim, t->shape, 2, ms, pl, coord,
                                          o, e);
      if (st != RS_OK) {
        fprintf(stderr, "rs_dtensor_local_box: %s\n", rs_last_error());
        exit(1);
      }
      int empty = 0;
      for (int d = 0; d < t->ndim; d++) empty |= e[d] == 0;
      if (!empty) n++;
    }
  return n;
}

static shard_list *build_shard_lists(const model *m, int64_t *n_src,
                                     int64_t *n_dst) {
  int *ranks = bench_xmalloc(sizeof(int) * N_INFER);
  shard_list *sl = bench_xcalloc((size_t)m->n, sizeof *sl);
  *n_src = *n_dst = 0;
  for (int i = 0; i < m->n; i++) {
    const tspec *t = &m->t[i];
    int64_t ms[2];
    int pl[2];
    shard_list *l = &sl[i];
    const int ndim = t->x->ndim;
    l->ndim = ndim;
    l->s_off = bench_xmalloc(sizeof(int64_t) * STAGE_RANKS * ndim);
    l->s_ext = bench_xmalloc(sizeof(int64_t) * STAGE_RANKS * ndim);
    l->d_off = bench_xmalloc(sizeof(int64_t) * N_INFER * ndim);
    l->d_ext = bench_xmalloc(sizeof(int64_t) * N_INFER * ndim);
    src_mesh(t, ms, ranks, pl);
    l->ns = boxes_of(t->x, ms, pl, l->s_off, l->s_ext);
    dst_mesh(t, ms, ranks, pl);
    l->nd = boxes_of(t->x, ms, pl, l->d_off, l->d_ext);
    *n_src += l->ns;
    *n_dst += l->nd;
  }
  free(ranks);
  return sl;
}

/* O(S x D) per tensor: every source box against every destination box.
 * Returns the number of non-empty intersections; *vol gets the summed
 * intersection volume (so nothing can be optimised away). */
static int64_t naive_intersect(const shard_list *sl, int n, int64_t *vol) {
  int64_t hits = 0, v = 0;
  for (int i = 0; i < n; i++) {
    const shard_list *l = &sl[i];
    const int nd = l->ndim;
    for (int s = 0; s < l->ns; s++) {
      const int64_t *so = l->s_off + (size_t)s * nd;
      const int64_t *se = l->s_ext + (size_t)s * nd;
      for (int d = 0; d < l->nd; d++) {
        const int64_t *dof = l->d_off + (size_t)d * nd;
        const int64_t *de = l->d_ext + (size_t)d * nd;
        int64_t ie[RS_MAX_DIMS];
        int empty = 0;
        for (int k = 0; k < nd; k++) {
          int64_t lo = so[k] > dof[k] ? so[k] : dof[k];
          int64_t a = so[k] + se[k], b = dof[k] + de[k];
          int64_t hi = a < b ? a : b;
          if (hi <= lo) {
            empty = 1;
            break;
          }
          ie[k] = hi - lo;
        }
        if (empty) continue;
        hits++;
        int64_t x = 1;
        for (int k = 0; k < nd; k++) x *= ie[k];
        v += x;
      }
    }
  }
  *vol = v;
  return hits;
}

static int64_t heap_in_use(void) {
#ifdef BENCH_HAVE_MALLINFO2
  struct mallinfo2 mi = mallinfo2();
  return (int64_t)(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

/* One part planned: what it keeps, how long it took, how much the
 * resident set grew while it was made (-1: unknown). */
typedef struct part_figures {
  int64_t heap, moves;
  double seconds;
  long peak_kib;
  int64_t told; /* a domain's part: moves it tells senders outside it */
  int64_t labels; /* by domain pair: the rounds (labels) of a domain's
                     part, which its first rank gives the allgather */
} part_figures;

/* Plans the part the context asks for in a child process (fork), which
 * starts its peak resident set afresh; a child that fails is reported and
 * ends the bench. */
static part_figures plan_part_in_child(rs_context *ctx, const rs_layout *src,
                                       const rs_layout *dst) {
  part_figures f = {0, 0, 0, -1, 0, 0};
  int fd[2];
  if (pipe(fd) != 0) {
    perror("bench_plan_dsv3: pipe");
    exit(1);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench_plan_dsv3: fork");
    exit(1);
  }
  if (pid == 0) {
    close(fd[0]);
    rs_plan *plan = NULL;
    long rss0 = bench_rss_kib();
    bool peak_known = bench_reset_peak_rss();
    int64_t h0 = heap_in_use();
    double t0 = bench_now();
    BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
    f.seconds = bench_now() - t0;
    if (peak_known) f.peak_kib = bench_peak_rss_kib() - rss0;
    f.heap = heap_in_use() - h0;
    BENCH_CHECK(ctx, rs_plan_num_moves(plan, &f.moves));
    bool sent = write(fd[1], &f, sizeof f) == (ssize_t)sizeof f;
    _exit(sent ? 0 : 1);
  }
  close(fd[1]);
  bool got = read(fd[0], &f, sizeof f) == (ssize_t)sizeof f;
  close(fd[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0 || !got) {
    fprintf(stderr, "bench_plan_dsv3: planning a part in a child failed\n");
    exit(1);
  }
  return f;
}

/* Plans what lands in destination domain `domain` (rsi_plan_create_domain)
 * in this process, as a rank's process plans it once its layouts are
 * built: the context driving only the domain's last rank meanwhile, as an
 * MPI or NCCL process's context drives its own (it binds and checks no
 * other rank's buffers). In a child forked for it, the part paid a copy
 * on write for each page of heap it shared with its parent. */
static part_figures plan_domain_part(rs_context *ctx, const rs_layout *src,
                                     const rs_layout *dst, int domain,
                                     rs_rounds rounds) {
  part_figures f = {0, 0, 0, -1, 0, 0};
  int driven = ctx->rank;
  ctx->rank = domain * DOMAIN + DOMAIN - 1;
  BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_ROUNDS, rounds));
  rs_plan *plan = NULL;
  long rss0 = bench_rss_kib();
  bool peak_known = bench_reset_peak_rss();
  int64_t h0 = heap_in_use();
  double t0 = bench_now();
  BENCH_CHECK(ctx, rsi_plan_create_domain(src, dst, domain, &plan));
  f.seconds = bench_now() - t0;
  if (peak_known) f.peak_kib = bench_peak_rss_kib() - rss0;
  f.heap = heap_in_use() - h0;
  BENCH_CHECK(ctx, rs_plan_num_moves(plan, &f.moves));
  for (int64_t i = 0; i < plan->nmoves; i++)
    f.told += plan->domain_of[plan->moves[i].src_rank] != domain;
  f.labels = plan->nrounds;
  rs_plan_destroy(plan);
  BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_ROUNDS,
                                        RS_ROUNDS_PACKED));
  ctx->rank = driven;
  return f;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 5;
  if (reps < 1) reps = 1;
  int edp = argc > 2 ? atoi(argv[2]) : 2;
  if (edp < 1 || edp > 1024) {
    fprintf(stderr, "usage: bench_plan_dsv3 [repetitions] [trainer DP, "
                    "1..1024: 2 is 256 GPUs a side, 64 is 8192]\n");
    return 2;
  }
  set_scale(edp);
  const double time_cap_s = 120.0; /* stop repeating after this much */

  bench_print_machine("bench_plan_dsv3: rs_plan_create, DeepSeek-V3 refit");
  int pinned = bench_pin_to_cpu(0) == 0;
  printf("pinning : %s\n", pinned ? "sched_setaffinity -> CPU 0 (one core)"
                                  : "sched_setaffinity FAILED, not pinned");

  long hwm_start = bench_peak_rss_kib();

  model m = {0};
  build_model(&m);
  int64_t params = 0, model_bytes = 0, n_expert_t = 0;
  for (int i = 0; i < m.n; i++) {
    params += rt_tensor_numel(m.t[i].x);
    model_bytes += rt_tensor_bytes(m.t[i].x);
    n_expert_t += m.t[i].expert;
  }
  printf("model   : DeepSeek-V3 shapes, %d tensors (%lld stacked-expert), "
         "%.3fe9 params (published 671.03e9), %.1f GB\n",
         m.n, (long long)n_expert_t, (double)params / 1e9,
         (double)model_bytes / 1e9);
  printf("ranks   : %d = train PP%d x EP%d x DP%d (0..%d) + infer TP%d x "
         "DP%d (%d..%d), domains of %d\n",
         WORLD, PP, EP, EDP, N_TRAIN - 1, TP, IDP, N_TRAIN, WORLD - 1,
         DOMAIN);

  rs_context *ctx = NULL;
  BENCH_CHECK(NULL, rs_context_create_local(WORLD, &ctx));
  BENCH_CHECK(ctx, rs_context_set_domain_size(ctx, DOMAIN));
  int64_t staging = 0;
  BENCH_CHECK(ctx, rs_context_get_param(ctx, RS_PARAM_STAGING_BYTES,
                                        &staging));

  long hwm_before_layouts = bench_peak_rss_kib();
  double t0 = bench_now();
  rs_layout *src = NULL, *dst = NULL;
  build_layouts(ctx, &m, &src, &dst);
  double t_layouts = bench_now() - t0;
  long hwm_after_layouts = bench_peak_rss_kib();
  int64_t src_shards = 0, dst_shards = 0;
  BENCH_CHECK(ctx, rs_layout_num_shards(src, &src_shards));
  BENCH_CHECK(ctx, rs_layout_num_shards(dst, &dst_shards));
  printf("layouts : %lld source shards, %lld destination shards, built in "
         "%.3f s; staging setting %.0f MiB/rank\n",
         (long long)src_shards, (long long)dst_shards, t_layouts,
         (double)staging / BENCH_MIB);
  fflush(stdout);

  /* What lands in one destination domain (the last engine's), planned
   * alone: every other domain only walked for what it leaves to later
   * ones (docs/PLANNING.md, "A domain's part"). First, as a rank's
   * process would plan it once its layouts are built. */
  const int part_domain = (WORLD - 1) / DOMAIN;
  part_figures dpart =
      plan_domain_part(ctx, src, dst, part_domain, RS_ROUNDS_PACKED);
  /* What a rank plans alone with rounds by domain pair (per-rank
   * planning, docs/PLANNING.md): its domain's part, an engine's and a
   * trainer's (domain 0); the exchange that completes it sends what the
   * domain's ranks were told of, a few thousand moves. */
  part_figures rpart[2] = {
      plan_domain_part(ctx, src, dst, 0, RS_ROUNDS_BY_DOMAIN_PAIR),
      plan_domain_part(ctx, src, dst, part_domain, RS_ROUNDS_BY_DOMAIN_PAIR)};
  /* the whole plan's peak growth counts from here */
  long hwm_before_plan =
      bench_reset_peak_rss() ? bench_peak_rss_kib() : hwm_after_layouts;

  /* First plan: timed, and measured for memory while it is alive. */
  double *times = bench_xcalloc((size_t)reps, sizeof *times);
  int64_t heap0 = heap_in_use();
  rs_plan *plan = NULL;
  t0 = bench_now();
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
  times[0] = bench_now() - t0;
  int64_t heap_plan = heap_in_use() - heap0;
  long hwm_after_plan = bench_peak_rss_kib();
  long rss_with_plan = bench_rss_kib();

  int64_t moves = 0;
  BENCH_CHECK(ctx, rs_plan_num_moves(plan, &moves));
  int64_t rounds = bench_stat_all(ctx, plan, RS_STAT_ROUNDS);
  int64_t sent_inter = bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTER);
  int64_t sent_intra = bench_stat_all(ctx, plan, RS_STAT_BYTES_SENT_INTRA);
  int64_t recv_inter = bench_stat_all(ctx, plan, RS_STAT_BYTES_RECV_INTER);
  int64_t recv_intra = bench_stat_all(ctx, plan, RS_STAT_BYTES_RECV_INTRA);
  int64_t local = bench_stat_all(ctx, plan, RS_STAT_BYTES_LOCAL);
  int64_t msgs = bench_stat_all(ctx, plan, RS_STAT_MESSAGES_SENT);
  int64_t stage_peak = bench_stat_all(ctx, plan, RS_STAT_STAGING_BYTES);
  /* Balance of the network load over the trainer ranks. */
  int64_t max_rank_inter = 0, sum_rank_inter = 0;
  for (int r = 0; r < N_TRAIN; r++) {
    int64_t v = 0;
    BENCH_CHECK(ctx, rs_plan_stat(plan, r, RS_STAT_BYTES_SENT_INTER, &v));
    sum_rank_inter += v;
    if (v > max_rank_inter) max_rank_inter = v;
  }
  double mean_rank_inter = (double)sum_rank_inter / N_TRAIN;
  /* Rounds if every round filled the busiest rank's staging (the plan's own
   * peak) with its sends, or with its receives. */
  int64_t max_rank_io = 0;
  for (int r = 0; r < WORLD; r++) {
    int64_t a = 0, b = 0, c = 0, d = 0;
    BENCH_CHECK(ctx, rs_plan_stat(plan, r, RS_STAT_BYTES_SENT_INTER, &a));
    BENCH_CHECK(ctx, rs_plan_stat(plan, r, RS_STAT_BYTES_SENT_INTRA, &b));
    BENCH_CHECK(ctx, rs_plan_stat(plan, r, RS_STAT_BYTES_RECV_INTER, &c));
    BENCH_CHECK(ctx, rs_plan_stat(plan, r, RS_STAT_BYTES_RECV_INTRA, &d));
    if (a + b > max_rank_io) max_rank_io = a + b;
    if (c + d > max_rank_io) max_rank_io = c + d;
  }
  int64_t rounds_bound =
      stage_peak > 0 ? (max_rank_io + stage_peak - 1) / stage_peak : 0;
  /* Balance bound: the 32 ranks of a stage must together send every byte
   * of the stage into each of the IDP destination domains. */
  int64_t stage_bytes[PP] = {0}, max_stage_bytes = 0;
  for (int i = 0; i < m.n; i++)
    stage_bytes[m.t[i].stage] += rt_tensor_bytes(m.t[i].x);
  for (int s = 0; s < PP; s++)
    if (stage_bytes[s] > max_stage_bytes) max_stage_bytes = stage_bytes[s];
  double rank_inter_bound = (double)max_stage_bytes * IDP / STAGE_RANKS;
  rs_plan_destroy(plan);
  plan = NULL;

  /* What one process keeps between processes when it asks only for its
   * own part (RS_PARAM_PLAN_PART), beside the whole plan that every
   * process kept before: a trainer rank and an inference rank. Each part
   * is planned in a child process, so that its peak is its own and not
   * memory the whole plan left behind. */
  const int part_rank[2] = {0, WORLD - 1};
  part_figures part[2];
  for (int k = 0; k < 2; k++) {
    BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_PLAN_PART,
                                          part_rank[k]));
    part[k] = plan_part_in_child(ctx, src, dst);
  }
  BENCH_CHECK(ctx, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, -1));

  /* Each destination domain is one TP8 group holding one whole copy of the
   * model, so every model byte must enter each of the IDP domains once. */
  int64_t dst_bytes = (int64_t)IDP * model_bytes;
  int64_t inter_bound = (int64_t)IDP * model_bytes;

  int done = 1;
  double spent = times[0];
  for (int r = 1; r < reps; r++) {
    if (spent > time_cap_s) break;
    t0 = bench_now();
    BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
    times[r] = bench_now() - t0;
    rs_plan_destroy(plan);
    plan = NULL;
    spent += times[r];
    done++;
  }
  double first = times[0];
  double tmin = bench_min(times, done);
  double tmed = bench_median(times, done);
  long hwm_end = bench_peak_rss_kib();

  /* Naive baseline on the same shard lists. */
  int64_t ns = 0, nd = 0;
  shard_list *sl = build_shard_lists(&m, &ns, &nd);
  if (ns != src_shards || nd != dst_shards)
    printf("WARNING : shard lists differ from the layouts' counts "
           "(%lld/%lld vs %lld/%lld)\n",
           (long long)ns, (long long)nd, (long long)src_shards,
           (long long)dst_shards);
  /* once at scale: it is quadratic in the ranks */
  int nreps = EDP > 2 ? 1 : reps;
  double *ntimes = bench_xcalloc((size_t)nreps, sizeof *ntimes);
  int64_t hits = 0, vol = 0;
  for (int r = 0; r < nreps; r++) {
    t0 = bench_now();
    hits = naive_intersect(sl, m.n, &vol);
    ntimes[r] = bench_now() - t0;
  }
  double nmin = bench_min(ntimes, nreps);
  double nmed = bench_median(ntimes, nreps);
  int64_t pairs = 0;
  for (int i = 0; i < m.n; i++) pairs += (int64_t)sl[i].ns * sl[i].nd;

  printf("\nrs_plan_create x %d: first %.3f s, min %.3f s, median %.3f s\n",
         done, first, tmin, tmed);
  printf("plan    : %lld moves, %lld rounds, %lld messages, peak staging "
         "%.1f MiB/rank; busiest rank moves %.1f GB, i.e. %lld rounds if "
         "every byte were staged and each round filled its staging\n",
         (long long)moves, (long long)rounds, (long long)msgs,
         (double)stage_peak / BENCH_MIB, (double)max_rank_io / 1e9,
         (long long)rounds_bound);
  printf("bytes   : sent inter %.3f TB, sent intra %.3f TB, local %.3f TB; "
         "received %.3f TB (destination holds %.3f TB)\n",
         (double)sent_inter / 1e12, (double)sent_intra / 1e12,
         (double)local / 1e12, (double)(recv_inter + recv_intra) / 1e12,
         (double)dst_bytes / 1e12);
  printf("          inter-domain lower bound %.3f TB (%d dst domains x model)"
         "\n          trainer-rank inter bytes: max %.1f GB, mean %.1f GB, "
         "bound %.1f GB (largest stage x %d domains / %d ranks)\n",
         (double)inter_bound / 1e12, IDP, (double)max_rank_inter / 1e9,
         mean_rank_inter / 1e9, rank_inter_bound / 1e9, IDP, STAGE_RANKS);
  if (recv_inter + recv_intra + local < dst_bytes)
    printf("WARNING : plan delivers fewer bytes than the destination "
           "holds\n");
  printf("memory  : VmHWM start %.1f MiB, before layouts %.1f MiB, after "
         "layouts %.1f MiB, after plan %.1f MiB (VmRSS with plan %.1f MiB), "
         "after all reps %.1f MiB\n",
         hwm_start / 1024.0, hwm_before_layouts / 1024.0,
         hwm_after_layouts / 1024.0, hwm_after_plan / 1024.0,
         rss_with_plan / 1024.0, hwm_end / 1024.0);
  if (heap_plan > 0)
    printf("          heap held by the plan (mallinfo2 delta) %.1f MiB; peak "
           "growth in rs_plan_create %.1f MiB\n",
           (double)heap_plan / BENCH_MIB,
           (hwm_after_plan - hwm_before_plan) / 1024.0);
  for (int k = 0; k < 2; k++)
    printf("part    : rank %d (%s) keeps %lld moves, %.2f MiB of heap "
           "(mallinfo2 delta; the whole plan %.1f MiB), made in %.3f s "
           "(the whole plan is planned first), peak growth %.1f MiB\n",
           part_rank[k], k ? "inference" : "trainer",
           (long long)part[k].moves, (double)part[k].heap / BENCH_MIB,
           (double)heap_plan / BENCH_MIB, part[k].seconds,
           part[k].peak_kib / 1024.0);
  printf("domain  : domain %d (ranks %d..%d) gets %lld moves, planned "
         "alone by rank %d's context in %.3f s (the whole plan: min %.3f "
         "s), peak growth %.1f MiB (the whole plan's %.1f MiB)\n",
         part_domain, part_domain * DOMAIN, part_domain * DOMAIN + DOMAIN - 1,
         (long long)dpart.moves, part_domain * DOMAIN + DOMAIN - 1,
         dpart.seconds, tmin,
         dpart.peak_kib / 1024.0, (hwm_after_plan - hwm_before_plan) / 1024.0);
  for (int k = 0; k < 2; k++)
    printf("by pair : %s domain %d planned alone by rank %d's context with "
           "rounds by domain pair (what per-rank planning computes before "
           "its exchange) in %.3f s, peak growth %.1f MiB; %lld moves into "
           "it, %lld of them told to senders outside; %lld rounds (labels) "
           "for the allgather\n",
           k ? "inference" : "trainer", k ? part_domain : 0,
           (k ? part_domain : 0) * DOMAIN + DOMAIN - 1, rpart[k].seconds,
           rpart[k].peak_kib / 1024.0, (long long)rpart[k].moves,
           (long long)rpart[k].told, (long long)rpart[k].labels);
  printf("naive   : all-pairs intersection, %lld src x dst box pairs, %lld "
         "non-empty (volume sum %lld), x %d: min %.3f s, median %.3f s\n",
         (long long)pairs, (long long)hits, (long long)vol, nreps, nmin, nmed);

  char a[64], b[64], c[64];
  bench_table_header();
  snprintf(a, sizeof a, "%.3f", tmin);
  snprintf(c, sizeof c, "%.2f", tmin / 1.0);
  bench_table_row("rs_plan_create min [s]", a, "1.000 (target)", c);
  snprintf(a, sizeof a, "%.3f", tmed);
  snprintf(c, sizeof c, "%.2f", tmed / 1.0);
  bench_table_row("rs_plan_create median [s]", a, "1.000 (target)", c);
  snprintf(a, sizeof a, "%.3f", tmin);
  snprintf(b, sizeof b, "%.3f (naive)", nmin);
  snprintf(c, sizeof c, "%.2f", tmin / nmin);
  bench_table_row("plan min vs all-pairs min [s]", a, b, c);
  snprintf(a, sizeof a, "%.1f", hwm_after_plan / 1024.0);
  snprintf(c, sizeof c, "%.2f", hwm_after_plan / 1024.0 / 1024.0);
  bench_table_row("peak RSS (VmHWM) after plan [MiB]", a, "1024 (target)", c);
  if (heap_plan > 0) {
    snprintf(a, sizeof a, "%.1f", (double)heap_plan / BENCH_MIB);
    snprintf(c, sizeof c, "%.2f", (double)heap_plan / BENCH_GIB);
    bench_table_row("plan heap (mallinfo2) [MiB]", a, "1024 (target)", c);
  }
  if (heap_plan > 0)
    for (int k = 0; k < 2; k++) {
      snprintf(a, sizeof a, "%.2f", (double)part[k].heap / BENCH_MIB);
      snprintf(b, sizeof b, "%.1f (whole)", (double)heap_plan / BENCH_MIB);
      snprintf(c, sizeof c, "%.4f", (double)part[k].heap / (double)heap_plan);
      bench_table_row(k ? "plan held, inference part [MiB]"
                        : "plan held, trainer part [MiB]",
                      a, b, c);
    }
  /* planning a part, against planning the whole plan (peak growth in
   * rs_plan_create, from the layouts on) */
  long whole_peak = hwm_after_plan - hwm_before_plan;
  for (int k = 0; k < 2 && whole_peak > 0; k++) {
    if (part[k].peak_kib < 0) continue;
    snprintf(a, sizeof a, "%.1f", part[k].peak_kib / 1024.0);
    snprintf(b, sizeof b, "%.1f (whole)", whole_peak / 1024.0);
    snprintf(c, sizeof c, "%.2f",
             (double)part[k].peak_kib / (double)whole_peak);
    bench_table_row(k ? "peak planning inference part [MiB]"
                      : "peak planning trainer part [MiB]",
                    a, b, c);
  }
  snprintf(a, sizeof a, "%.3f", dpart.seconds);
  snprintf(b, sizeof b, "%.3f (whole)", tmin);
  snprintf(c, sizeof c, "%.3f", dpart.seconds / tmin);
  bench_table_row("a domain's part, once [s]", a, b, c);
  snprintf(c, sizeof c, "%.3f", dpart.seconds / 1.0);
  bench_table_row("a domain's part, once [s]", a, "1.000 (target)", c);
  if (whole_peak > 0 && dpart.peak_kib >= 0) {
    snprintf(a, sizeof a, "%.1f", dpart.peak_kib / 1024.0);
    snprintf(b, sizeof b, "%.1f (whole)", whole_peak / 1024.0);
    snprintf(c, sizeof c, "%.3f", (double)dpart.peak_kib / (double)whole_peak);
    bench_table_row("peak planning domain part [MiB]", a, b, c);
    snprintf(c, sizeof c, "%.3f", dpart.peak_kib / 1024.0 / 512.0);
    bench_table_row("peak planning domain part [MiB]", a, "512 (target)", c);
  }
  for (int k = 0; k < 2; k++) {
    snprintf(a, sizeof a, "%.3f", rpart[k].seconds);
    snprintf(c, sizeof c, "%.3f", rpart[k].seconds / 1.0);
    bench_table_row(k ? "per-rank, engine domain [s]"
                      : "per-rank, trainer domain [s]",
                    a, "1.000 (target)", c);
    if (rpart[k].peak_kib < 0) continue;
    snprintf(a, sizeof a, "%.1f", rpart[k].peak_kib / 1024.0);
    snprintf(c, sizeof c, "%.3f", rpart[k].peak_kib / 1024.0 / 512.0);
    bench_table_row(k ? "per-rank, engine peak [MiB]"
                      : "per-rank, trainer peak [MiB]",
                    a, "512 (target)", c);
  }
  snprintf(a, sizeof a, "%lld", (long long)moves);
  snprintf(b, sizeof b, "%lld (pairs)", (long long)hits);
  snprintf(c, sizeof c, "%.2f", (double)moves / (double)(hits ? hits : 1));
  bench_table_row("moves vs non-empty src x dst pairs", a, b, c);
  snprintf(a, sizeof a, "%.3f", (double)sent_inter / 1e12);
  snprintf(b, sizeof b, "%.3f (bound)", (double)inter_bound / 1e12);
  snprintf(c, sizeof c, "%.3f", (double)sent_inter / (double)inter_bound);
  bench_table_row("bytes inter-domain [TB]", a, b, c);
  snprintf(a, sizeof a, "%.3f", (double)sent_intra / 1e12);
  bench_table_row("bytes intra-domain [TB]", a, "-", "-");
  snprintf(a, sizeof a, "%.1f", (double)max_rank_inter / 1e9);
  snprintf(b, sizeof b, "%.1f (bound)", rank_inter_bound / 1e9);
  snprintf(c, sizeof c, "%.3f", (double)max_rank_inter / rank_inter_bound);
  bench_table_row("max trainer-rank inter [GB]", a, b, c);
  snprintf(a, sizeof a, "%lld", (long long)rounds);
  snprintf(b, sizeof b, "%lld (staged)", (long long)rounds_bound);
  snprintf(c, sizeof c, "%.2f",
           (double)rounds / (double)(rounds_bound ? rounds_bound : 1));
  bench_table_row("rounds vs all-staged rounds", a, b, c);

  for (int i = 0; i < m.n; i++) {
    free(sl[i].s_off);
    free(sl[i].s_ext);
    free(sl[i].d_off);
    free(sl[i].d_ext);
  }
  free(sl);
  free(ntimes);
  free(times);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  free(m.t);
  rt_model_free(&m.cat);
  return 0;
}
