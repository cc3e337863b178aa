/* SPDX-License-Identifier: Apache-2.0 */
/* Framework layouts: spec parsing and checks, Megatron and vLLM meshes,
 * rank placement on domains, fused inference buffers, and a whole reshard
 * of tiny models executed in process and checked element by element. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "job.h"
#include "tiny_models.h"

static rt_cluster cluster_of(const char *name) {
  rt_cluster c;
  rt_err e;
  cr_assert_eq(rt_cluster_load(name, &c, &e), 0, "%s", e.msg);
  return c;
}

static int job_of(rt_job *job, const rt_model_info *info, const char *model,
                  const char *train, const char *infer, const char *cluster,
                  rt_placement place, int domain_gpus, rt_err *e) {
  rt_cluster c = cluster_of(cluster);
  rt_job_spec spec = {model, info, train, infer, &c, place, domain_gpus};
  return rt_job_init(job, &spec, e);
}

/* ---- specs -------------------------------------------------------------- */

/* The sizes the library's recipe resolves for a catalog model. */
static void resolve(const char *model, const char *train, const char *infer,
                    rt_train *t, rt_infer *i) {
  rs_model *m = NULL;
  rs_recipe *r = NULL;
  cr_assert_eq(rs_model_from_catalog(model, &m), RS_OK, "%s", rs_last_error());
  cr_assert_eq(rs_recipe_create(m, train, infer, &r), RS_OK, "%s",
               rs_last_error());
  rt_train_read(r, t);
  rt_infer_read(r, i);
  rs_recipe_destroy(r);
  rs_model_destroy(m);
}

Test(frameworks, parse_train_and_infer) {
  rt_train t;
  rt_infer i;
  resolve("Qwen3-235B-A22B", "tp=2,cp=2,ep=16,pp=4,gpus=64", "tp=8", &t, &i);
  cr_expect_eq(t.tp, 2);
  cr_expect_eq(t.cp, 2);
  cr_expect_eq(t.ep, 16);
  cr_expect_eq(t.pp, 4);
  cr_expect_eq(t.etp, 1);
  cr_expect_eq(t.world, 64);
  cr_expect_eq(t.dp, 4);  /* 16 per stage / (tp 2 * cp 2) */
  cr_expect_eq(t.edp, 1); /* 16 per stage / ep 16 */
  resolve("DeepSeek-V3", "tp=1", "tp=8,dp=16", &t, &i);
  cr_expect_eq(i.world, 128);
  cr_expect_eq(i.ep, 1);
  /* the reference's DeepSeek-V3 config: dp there is expert-DP */
  resolve("DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,edp=2", "tp=8", &t, &i);
  cr_expect_eq(t.world, 128);
  cr_expect_eq(t.dp, 32);
}

static void expect_error(const char *train, const char *infer,
                         const char *model, const char *needle) {
  rt_job job;
  rt_err e = {{0}};
  int rc = job_of(&job, NULL, model, train, infer, "dgx-h100", RT_PLACE_SPLIT,
                  0, &e);
  cr_expect_eq(rc, -1, "%s / %s accepted", train, infer);
  cr_expect(strstr(e.msg, needle) != NULL, "'%s' not in: %s", needle, e.msg);
  if (rc == 0) rt_job_free(&job);
}

Test(frameworks, bad_specs_name_the_problem) {
  expect_error("tp=3", "tp=8", "Qwen3-32B", "tp=3 does not divide");
  expect_error("tp=2", "tp=3", "Qwen3-32B", "tp=3 does not divide");
  expect_error("tp=2,foo=1", "tp=2", "Qwen3-32B", "unknown key 'foo'");
  expect_error("tp=0", "tp=2", "Qwen3-32B", "tp=0 is not an integer");
  expect_error("tp=x", "tp=2", "Qwen3-32B", "tp=x");
  expect_error("tp=2,", "tp=2", "Qwen3-32B", "trailing comma");
  expect_error("tp=2,tp=4", "tp=2", "Qwen3-32B", "given twice");
  expect_error("tp2", "tp=2", "Qwen3-32B", "has no '='");
  expect_error("", "tp=2", "Qwen3-32B", "empty");
  expect_error("tp=2,pp=4,gpus=10", "tp=2", "Qwen3-32B", "pp=4 does not divide");
  expect_error("tp=4,gpus=6", "tp=2", "Qwen3-32B", "tp*cp = 4 does not divide");
  expect_error("tp=2,dp=2,gpus=8", "tp=2", "Qwen3-32B", "but gpus=8");
  expect_error("ep=8", "tp=2", "Qwen3-32B", "no routed experts");
  expect_error("ep=3", "tp=4", "Qwen3-30B-A3B", "ep=3 does not divide");
  expect_error("tp=8", "tp=8", "Qwen3-30B-A3B", "num_key_value_heads");
  expect_error("tp=4", "tp=8,dp=2,ep=8", "Qwen3-30B-A3B", "ep must be 1 or 16");
  expect_error("tp=4", "tp=2,ep=4", "Qwen3-32B", "no routed experts");
  expect_error("pp=100", "tp=2", "Qwen3-32B", "more than the 64 layers");
  expect_error("tp=2", "tp=2", "NoSuchModel", "unknown model 'NoSuchModel'");
  expect_error("tp=2,fsdp=2", "tp=2", "Qwen3-32B", "fsdp=2");
  expect_error("tp=2", "tp=6", "Qwen3-235B-A22B", "tp=6 does not divide");
}

Test(frameworks, kv_heads_replicate_when_tp_exceeds_them) {
  rt_job job;
  rt_err e;
  /* Qwen3-235B has 4 kv heads; vLLM TP8 holds one head on two ranks. */
  cr_assert_eq(job_of(&job, NULL, "Qwen3-235B-A22B", "tp=2,ep=8,gpus=8",
                      "tp=8", "dgx-h100", RT_PLACE_SPLIT, 0, &e),
               0, "%s", e.msg);
  int k = -1;
  for (int t = 0; t < job.model.n; t++)
    if (!strcmp(job.model.t[t].name, "model.layers.0.self_attn.k_proj.weight"))
      k = t;
  cr_assert(k >= 0);
  const rt_mesh *m = &job.dmesh[k];
  int coord[RT_MAX_AX];
  for (int i = 0; i < rt_mesh_size(m); i++) {
    rt_box b;
    rt_mesh_coord(m, i, coord);
    cr_assert(rt_mesh_box(m, &job.model.t[k], coord, &b));
    int tp = rt_mesh_rank(m, coord) - job.ntrain;
    cr_expect_eq(b.off[0], (int64_t)(tp / 2) * 128, "tp %d", tp);
    cr_expect_eq(b.ext[0], 128);
    cr_expect_eq(b.ext[1], 4096);
  }
  rt_job_free(&job);
}

/* ---- Megatron meshes and stages ----------------------------------------- */

Test(frameworks, megatron_rank_order_and_stages) {
  rt_job job;
  rt_err e;
  cr_assert_eq(job_of(&job, &tiny_moe, NULL, "tp=2,cp=2,ep=4,pp=2,gpus=16",
                      "tp=2,dp=2", "dgx-h100", RT_PLACE_SPLIT, 0, &e),
               0, "%s", e.msg);
  /* 8 ranks per stage; dense TP2 x CP2 x DP2, experts EP4 x EDP2 */
  cr_expect_eq(job.train.dp, 2);
  cr_expect_eq(job.train.edp, 2);
  for (int t = 0; t < job.model.n; t++) {
    const rt_tensor *x = &job.model.t[t];
    int s = rt_job_stage(&job, t);
    if (x->layer >= 0)
      cr_expect_eq(s, x->layer * 2 / 4, "%s", x->name);
    else if (x->role == RS_ROLE_EMBED)
      cr_expect_eq(s, 0);
    else
      cr_expect_eq(s, 1, "%s on the last stage", x->name);
    const rt_mesh *m = &job.smesh[t];
    cr_expect_eq(m->rank0, s * 8);
    int coord[RT_MAX_AX];
    for (int i = 0; i < rt_mesh_size(m); i++) {
      rt_box b;
      rt_mesh_coord(m, i, coord);
      int r = rt_mesh_rank(m, coord) - m->rank0;
      if (!rt_mesh_box(m, x, coord, &b)) continue;
      if (x->role == RS_ROLE_EXPERT_COL) { /* ep = (r / etp) % ep */
        cr_expect_eq(b.off[0], (int64_t)(r % 4) * 2, "%s rank %d", x->name, r);
        cr_expect_eq(b.ext[0], 2);
        cr_expect_eq(b.ext[1], x->shape[1]);
      } else if (x->role == RS_ROLE_COL) { /* tp = r % tp */
        cr_expect_eq(b.off[0], (int64_t)(r % 2) * (x->shape[0] / 2), "%s", x->name);
      } else if (x->role == RS_ROLE_ROW) {
        cr_expect_eq(b.off[1], (int64_t)(r % 2) * (x->shape[1] / 2), "%s", x->name);
        cr_expect_eq(b.ext[0], x->shape[0]);
      } else if (x->role == RS_ROLE_NORM || x->role == RS_ROLE_ROUTER) {
        cr_expect_eq(rt_box_volume(&b), rt_tensor_numel(x));
      }
    }
  }
  rt_job_free(&job);
}

Test(frameworks, fsdp_and_expert_tp_shard_two_axes) {
  rt_job job;
  rt_err e;
  cr_assert_eq(job_of(&job, &tiny_moe, NULL, "tp=2,etp=2,ep=2,gpus=8,fsdp=1",
                      "tp=4", "dgx-h100", RT_PLACE_SPLIT, 0, &e),
               0, "%s", e.msg);
  for (int t = 0; t < job.model.n; t++) {
    const rt_tensor *x = &job.model.t[t];
    rt_groups g;
    rt_groups_from_mesh(&job.smesh[t], x, &g);
    /* dim-0 sharded over the data-parallel axes: replicas only where TP
     * replicates (norms, router) */
    bool tp_sharded = x->role != RS_ROLE_NORM && x->role != RS_ROLE_ROUTER &&
                      x->role != RS_ROLE_BIAS && x->role != RS_ROLE_REPL;
    int64_t vol = 0;
    for (int i = 0; i < g.n; i++) {
      cr_expect_eq(g.g[i].n, tp_sharded ? 1 : 2, "%s: box held by %d ranks",
                   x->name, g.g[i].n);
      vol += rt_box_volume(&g.g[i].box);
    }
    cr_expect_eq(vol, rt_tensor_numel(x), "%s covered once", x->name);
    if (x->role == RS_ROLE_COL)
      cr_expect_eq(rt_mesh_shard_axes(&job.smesh[t]), 2, "%s", x->name);
    if (x->role == RS_ROLE_EXPERT_COL)
      cr_expect_eq(rt_mesh_shard_axes(&job.smesh[t]), 3, "%s", x->name);
    rt_groups_free(&g);
  }
  rt_job_free(&job);
}

/* ---- placement ----------------------------------------------------------- */

Test(frameworks, ranks_placed_like_launchers) {
  rt_job job;
  rt_err e;
  /* gb200-nvl72: 64 job GPUs per NVL72 domain, trainers first */
  cr_assert_eq(job_of(&job, NULL, "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,edp=2",
                      "tp=8,dp=16", "gb200-nvl72", RT_PLACE_SPLIT, 0, &e),
               0, "%s", e.msg);
  cr_expect_eq(job.world, 256);
  cr_expect_eq(job.ndomains, 4);
  cr_expect_eq(job.domain[0], 0);
  cr_expect_eq(job.domain[63], 0);
  cr_expect_eq(job.domain[64], 1);
  cr_expect_eq(job.domain[128], 2);
  cr_expect_eq(job.domain[255], 3);
  rt_job_free(&job);
  /* split: inference starts on a fresh domain; packed: it does not */
  cr_assert_eq(job_of(&job, &tiny_dense, NULL, "tp=2,gpus=12", "tp=2,dp=6",
                      "dgx-h100", RT_PLACE_SPLIT, 0, &e), 0, "%s", e.msg);
  cr_expect_eq(job.domain[11], 1);
  cr_expect_eq(job.domain[12], 2);
  cr_expect_eq(job.domain[23], 3);
  rt_job_free(&job);
  cr_assert_eq(job_of(&job, &tiny_dense, NULL, "tp=2,gpus=12", "tp=2,dp=6",
                      "dgx-h100", RT_PLACE_PACKED, 0, &e), 0, "%s", e.msg);
  cr_expect_eq(job.domain[12], 1);
  cr_expect_eq(job.domain[16], 2);
  rt_job_free(&job);
  cr_expect_eq(job_of(&job, &tiny_dense, NULL, "tp=2", "tp=2", "dgx-h100",
                      RT_PLACE_SPLIT, 9, &e), -1);
  cr_expect(strstr(e.msg, "--domain-gpus") != NULL, "%s", e.msg);
}

/* ---- vLLM fused buffers --------------------------------------------------- */

typedef struct collect {
  rt_shard *s;
  int n, cap;
} collect;

static void keep(const rt_shard *s, void *arg) {
  collect *c = arg;
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 256;
    c->s = realloc(c->s, sizeof *c->s * (size_t)c->cap);
  }
  c->s[c->n++] = *s;
}

static const rt_shard *shard_of(const collect *c, const rt_job *job,
                                const char *name, int rank) {
  for (int i = 0; i < c->n; i++)
    if (c->s[i].rank == rank && !strcmp(job->model.t[c->s[i].tensor].name, name))
      return &c->s[i];
  return NULL;
}

Test(frameworks, fused_buffers_as_vllm_lays_them_out) {
  rt_job job;
  rt_err e;
  cr_assert_eq(job_of(&job, &tiny_moe, NULL, "tp=1,ep=2,gpus=2", "tp=2",
                      "dgx-h100", RT_PLACE_SPLIT, 0, &e), 0, "%s", e.msg);
  collect c = {0};
  rt_job_shards(&job, RS_SIDE_DST, keep, &c);
  const int H = 32, I = 12, E = 8, kv = 2 * 4, q = 8 * 4;
  for (int tp = 0; tp < 2; tp++) {
    int r = job.ntrain + tp;
    const rt_shard *sq = shard_of(&c, &job, "model.layers.2.self_attn.q_proj.weight", r);
    const rt_shard *sk = shard_of(&c, &job, "model.layers.2.self_attn.k_proj.weight", r);
    const rt_shard *sv = shard_of(&c, &job, "model.layers.2.self_attn.v_proj.weight", r);
    cr_assert(sq && sk && sv);
    /* qkv_proj: this rank's q rows, then its k rows, then its v rows */
    cr_expect_eq(sq->buffer, sk->buffer);
    cr_expect_eq(sq->buffer, sv->buffer);
    cr_expect_eq(sq->byte_offset, 0);
    cr_expect_eq(sk->byte_offset, (int64_t)(q / 2) * H * 2);
    cr_expect_eq(sv->byte_offset, (int64_t)(q / 2 + kv / 2) * H * 2);
    cr_expect_eq(sq->box.off[0], tp * q / 2);
    cr_expect_eq(sk->box.off[0], tp * kv / 2);
    /* w13_weight [E, 2*I/tp, H]: per expert gate rows then up rows */
    const rt_shard *g = shard_of(&c, &job, "model.layers.2.mlp.experts.gate_proj.weight", r);
    const rt_shard *u = shard_of(&c, &job, "model.layers.2.mlp.experts.up_proj.weight", r);
    const rt_shard *d = shard_of(&c, &job, "model.layers.2.mlp.experts.down_proj.weight", r);
    cr_assert(g && u && d);
    cr_expect_eq(g->buffer, u->buffer);
    cr_expect_neq(g->buffer, d->buffer);
    cr_expect_eq(g->box.ext[0], E);
    cr_expect_eq(g->box.off[1], tp * I / 2);
    cr_expect_eq(g->byte_offset, 0);
    cr_expect_eq(u->byte_offset, (int64_t)(I / 2) * H * 2);
    cr_expect_eq(g->strides[0], (int64_t)I * H); /* 2 * I/tp rows per expert */
    cr_expect_eq(g->strides[1], H);
    cr_expect_eq(u->strides[0], (int64_t)I * H);
    /* w2_weight [E, H, I/tp], dense */
    cr_expect_eq(d->box.off[2], tp * I / 2);
    cr_expect_eq(d->strides[0], (int64_t)H * (I / 2));
    /* router replicated, own buffer */
    const rt_shard *rg = shard_of(&c, &job, "model.layers.2.mlp.gate.weight", r);
    cr_assert(rg);
    cr_expect_eq(rt_box_volume(&rg->box), (int64_t)E * H);
  }
  free(c.s);
  rt_job_free(&job);
}

Test(frameworks, every_destination_element_covered) {
  const char *configs[][4] = {
      {"DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,edp=2", "tp=8,dp=16", "gb200-nvl72"},
      {"Qwen3-235B-A22B", "tp=2,cp=2,ep=16,pp=4,gpus=64", "tp=8,dp=8", "dgx-h100"},
      {"Qwen3-30B-A3B", "tp=1,ep=8,gpus=16", "tp=1,dp=16,ep=16", "dgx-h100"},
      {"Llama-3.1-70B", "tp=4,dp=4,fsdp=1", "tp=8,dp=2", "dgx-h100"}};
  for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
    rt_job job;
    rt_err e;
    cr_assert_eq(job_of(&job, NULL, configs[k][0], configs[k][1], configs[k][2],
                        configs[k][3], RT_PLACE_SPLIT, 0, &e), 0, "%s", e.msg);
    /* every inference DP replica (tp ranks) holds each tensor whole */
    for (int t = 0; t < job.model.n; t++) {
      const rt_tensor *x = &job.model.t[t];
      rt_groups g;
      rt_groups_from_mesh(&job.dmesh[t], x, &g);
      int reps = job.infer.ep > 1 ? 1 : job.infer.dp;
      rt_box *boxes = malloc(sizeof *boxes * (size_t)(g.n + 1));
      for (int dp = 0; dp < reps; dp++) {
        int nb = 0;
        for (int i = 0; i < g.n; i++)
          for (int h = 0; h < g.g[i].n; h++) {
            int r = g.g[i].ranks[h] - job.ntrain;
            if (job.infer.ep > 1 || r / job.infer.tp == dp) {
              boxes[nb++] = g.g[i].box;
              break;
            }
          }
        cr_expect_eq(rt_union_volume(boxes, nb), rt_tensor_numel(x),
                     "%s: %s not covered on replica %d", configs[k][0], x->name, dp);
      }
      free(boxes);
      rt_groups_free(&g);
    }
    rs_context *ctx;
    rs_layout *src, *dst;
    cr_assert_eq(rt_job_layouts(&job, &ctx, &src, &dst, &e), 0, "%s", e.msg);
    rs_plan *plan = NULL;
    rs_status st = rs_plan_create(src, dst, &plan);
    cr_expect_eq(st, RS_OK, "%s: %s", configs[k][0], rs_context_last_error(ctx));
    rs_plan_destroy(plan);
    rs_layout_destroy(src);
    rs_layout_destroy(dst);
    rs_context_destroy(ctx);
    rt_job_free(&job);
  }
}

/* ---- a whole reshard, executed ------------------------------------------- */

typedef struct bufs {
  const rt_job *job;
  size_t *size;   /* per (rank, buffer) */
  uint8_t **mem;
  int nbuf;       /* buffers per rank (max id + 1) */
} bufs;

static void measure(const rt_shard *s, void *arg) {
  bufs *b = arg;
  const rt_tensor *x = &b->job->model.t[s->tensor];
  int64_t end = 0;
  for (int d = 0; d < s->box.ndim; d++) end += (s->box.ext[d] - 1) * s->strides[d];
  size_t bytes = (size_t)(s->byte_offset + (end + 1) * (int64_t)rs_dtype_size(x->dtype));
  size_t *slot = &b->size[(size_t)s->rank * b->nbuf + s->buffer];
  if (bytes > *slot) *slot = bytes;
}

static uint32_t value_of(int tensor, int64_t index) {
  uint32_t h = (uint32_t)tensor * 2654435761u ^ (uint32_t)(index * 40503u + 7);
  return h ^ (h >> 15);
}

typedef struct visit {
  bufs *b;
  int write;
  int64_t bad, checked;
} visit;

static void walk(const rt_shard *s, void *arg) {
  visit *v = arg;
  const rt_tensor *x = &v->b->job->model.t[s->tensor];
  size_t es = rs_dtype_size(x->dtype);
  uint8_t *base = v->b->mem[(size_t)s->rank * v->b->nbuf + s->buffer];
  int64_t e0 = s->box.ext[0], e1 = s->box.ndim > 1 ? s->box.ext[1] : 1,
          e2 = s->box.ndim > 2 ? s->box.ext[2] : 1;
  int64_t g1 = x->ndim > 1 ? x->shape[1] : 1, g2 = x->ndim > 2 ? x->shape[2] : 1;
  for (int64_t i = 0; i < e0; i++)
    for (int64_t j = 0; j < e1; j++)
      for (int64_t k = 0; k < e2; k++) {
        int64_t loc = i * s->strides[0] + (s->box.ndim > 1 ? j * s->strides[1] : 0) +
                      (s->box.ndim > 2 ? k * s->strides[2] : 0);
        int64_t gi = ((s->box.off[0] + i) * g1 + (x->ndim > 1 ? s->box.off[1] + j : 0)) * g2 +
                     (x->ndim > 2 ? s->box.off[2] + k : 0);
        uint8_t *p = base + s->byte_offset + loc * (int64_t)es;
        uint32_t want = value_of(s->tensor, gi);
        if (v->write) {
          memcpy(p, &want, es);
        } else {
          uint32_t got = 0, w = 0;
          memcpy(&got, p, es);
          memcpy(&w, &want, es);
          v->bad += got != w;
          v->checked++;
        }
      }
}

static void execute_and_check(const rt_model_info *info, const char *train,
                              const char *infer) {
  rt_job job;
  rt_err e;
  cr_assert_eq(job_of(&job, info, NULL, train, infer, "dgx-h100",
                      RT_PLACE_SPLIT, 4, &e), 0, "%s", e.msg);
  rs_context *ctx;
  rs_layout *src, *dst;
  cr_assert_eq(rt_job_layouts(&job, &ctx, &src, &dst, &e), 0, "%s", e.msg);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  bufs side[2];
  for (int s = 0; s < 2; s++) {
    side[s].job = &job;
    side[s].nbuf = job.model.n + 2;
    side[s].size = calloc((size_t)job.world * side[s].nbuf, sizeof(size_t));
    side[s].mem = calloc((size_t)job.world * side[s].nbuf, sizeof(uint8_t *));
    rt_job_shards(&job, s ? RS_SIDE_DST : RS_SIDE_SRC, measure, &side[s]);
    for (int r = 0; r < job.world; r++)
      for (int b = 0; b < side[s].nbuf; b++) {
        size_t n = side[s].size[(size_t)r * side[s].nbuf + b];
        if (!n) continue;
        uint8_t *m = malloc(n);
        memset(m, 0xee, n);
        side[s].mem[(size_t)r * side[s].nbuf + b] = m;
        cr_assert_eq(rs_plan_bind(plan, s ? RS_SIDE_DST : RS_SIDE_SRC, r, b, m, n),
                     RS_OK, "%s", rs_context_last_error(ctx));
      }
  }
  visit w = {&side[0], 1, 0, 0};
  rt_job_shards(&job, RS_SIDE_SRC, walk, &w);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  visit c = {&side[1], 0, 0, 0};
  rt_job_shards(&job, RS_SIDE_DST, walk, &c);
  cr_expect_gt(c.checked, 0);
  cr_expect_eq(c.bad, 0, "%s %s -> %s: %lld of %lld elements wrong", info->name,
               train, infer, (long long)c.bad, (long long)c.checked);
  for (int s = 0; s < 2; s++) {
    for (size_t i = 0; i < (size_t)job.world * side[s].nbuf; i++) free(side[s].mem[i]);
    free(side[s].mem);
    free(side[s].size);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  rt_job_free(&job);
}

Test(frameworks, reshard_executes_bit_exact) {
  execute_and_check(&tiny_dense, "tp=2,pp=2,dp=2", "tp=4,dp=2");
  execute_and_check(&tiny_dense, "tp=1,dp=4,fsdp=1", "tp=2,dp=2");
  execute_and_check(&tiny_moe, "tp=2,cp=2,ep=4,pp=2,gpus=8", "tp=4,dp=2");
  execute_and_check(&tiny_moe, "tp=2,etp=2,ep=2,gpus=4,fsdp=1", "tp=4");
  execute_and_check(&tiny_moe, "tp=1,ep=8,gpus=8", "tp=2,dp=4,ep=8");
  execute_and_check(&tiny_mla, "tp=2,ep=4,pp=3,gpus=12", "tp=4,dp=2");
}
