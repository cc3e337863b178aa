/* SPDX-License-Identifier: Apache-2.0 */
/* Jobs: placement, shards in memory, layouts, holder groups. */
#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failure of the library's recipes, in the words of the command line:
 * its "train: " and "infer: " are the options --train and --infer, and the
 * source place it names (" [parallel.c:105]") is left out. */
static int fail_recipe(rt_err *e) {
  const char *msg = rs_last_error();
  const char *opt = "";
  if (!strncmp(msg, "train: ", 7) || !strncmp(msg, "infer: ", 7)) opt = "--";
  size_t n = strlen(msg);
  const char *open = strrchr(msg, '[');
  if (open && open > msg && open[-1] == ' ' && msg[n - 1] == ']')
    n = (size_t)(open - 1 - msg);
  return rt_fail(e, "%s%.*s", opt, (int)n, msg);
}

int rt_job_init(rt_job *job, const rt_job_spec *spec, rt_err *e) {
  memset(job, 0, sizeof *job);
  const rt_model_info *info = spec->info;
  if (!info) {
    info = rt_model_find(spec->model);
    if (!info)
      return rt_fail(e, "--model: unknown model '%s' (known: %s)",
                     spec->model ? spec->model : "", rt_model_names());
  }
  if (!spec->cluster) return rt_fail(e, "--cluster: no cluster given");
  if (rt_model_build(info, &job->model, e)) return -1;
  snprintf(job->train_spec, sizeof job->train_spec, "%s",
           spec->train ? spec->train : "");
  snprintf(job->infer_spec, sizeof job->infer_spec, "%s",
           spec->infer ? spec->infer : "");
  if (rs_recipe_create(job->model.rs, job->train_spec, job->infer_spec,
                       &job->recipe) != RS_OK) {
    fail_recipe(e);
    rt_job_free(job);
    return -1;
  }
  rt_train_read(job->recipe, &job->train);
  rt_infer_read(job->recipe, &job->infer);
  job->cluster = *spec->cluster;
  job->placement = spec->placement;
  job->domain_gpus =
      spec->domain_gpus ? spec->domain_gpus : job->cluster.job_gpus_per_domain;
  if (job->domain_gpus < 1 || job->domain_gpus > job->cluster.gpus_per_domain) {
    rt_fail(e, "--domain-gpus: %d is outside [1, %d] (the %s domain size)",
            job->domain_gpus, job->cluster.gpus_per_domain, job->cluster.name);
    rt_job_free(job);
    return -1;
  }
  bool colocated = job->placement == RT_PLACE_COLOCATED;
  if (colocated && job->train.world != job->infer.world) {
    bool moe = rt_model_is_moe(job->model.info);
    char tr[160], in[96];
    rt_train_describe(&job->train, moe, tr, sizeof tr);
    rt_infer_describe(&job->infer, moe, in, sizeof in);
    rt_fail(e,
            "--colocate: the trainer uses %d GPUs (%s) and the "
            "inference engine %d (%s); colocation puts trainer "
            "rank i and inference rank i on GPU i, so both sides "
            "must use the same number of GPUs",
            job->train.world, tr, job->infer.world, in);
    rt_job_free(job);
    return -1;
  }
  job->ntrain = job->train.world;
  job->ninfer = job->infer.world;
  job->infer_first = colocated ? 0 : job->ntrain;
  job->world = colocated ? job->ntrain : job->ntrain + job->ninfer;
  if (job->world > 1 << 20) {
    rt_job_free(job);
    return rt_fail(e, "%d ranks in all: too many", job->world);
  }
  rs_recipe_set(job->recipe, RS_RECIPE_INFER_FIRST_RANK, job->infer_first);

  /* Domains: consecutive ranks fill a domain; with the split placement the
   * generators start on a fresh one. */
  job->domain = rt_xmalloc(sizeof *job->domain * (size_t)job->world);
  int g = job->domain_gpus;
  int train_domains = (job->ntrain + g - 1) / g;
  for (int r = 0; r < job->world; r++) {
    if (job->placement != RT_PLACE_SPLIT || r < job->ntrain)
      job->domain[r] = r / g;
    else
      job->domain[r] = train_domains + (r - job->ntrain) / g;
  }
  job->ndomains = job->domain[job->world - 1] + 1;
  job->domain_ranks = rt_xcalloc((size_t)job->ndomains, sizeof(int));
  for (int r = 0; r < job->world; r++) job->domain_ranks[job->domain[r]]++;

  job->smesh = rt_xmalloc(sizeof *job->smesh * (size_t)job->model.n);
  job->dmesh = rt_xmalloc(sizeof *job->dmesh * (size_t)job->model.n);
  for (int t = 0; t < job->model.n; t++) {
    rt_recipe_mesh(job->recipe, RS_SIDE_SRC, t, &job->smesh[t]);
    rt_recipe_mesh(job->recipe, RS_SIDE_DST, t, &job->dmesh[t]);
  }
  job->td = rt_xmalloc(sizeof *job->td * (size_t)job->model.n);
  rt_dtype_spec_default(&job->dtypes);
  rt_dtypes_read(job->recipe, job->model.n, job->td, &job->dsum);
  return 0;
}

/* The recipe's dtype settings from a spec. */
static void set_dtypes(rs_recipe *r, const rt_dtype_spec *spec) {
  rs_recipe_set(r, RS_RECIPE_TRAIN_DTYPE, spec->train);
  rs_recipe_set(r, RS_RECIPE_INFER_DTYPE, spec->infer);
  rs_recipe_set(r, RS_RECIPE_FP8_BLOCK_ROWS, spec->block_rows);
  rs_recipe_set(r, RS_RECIPE_FP8_BLOCK_COLS, spec->block_cols);
  rs_recipe_set(r, RS_RECIPE_FP8_SCALE_RULE, spec->rule);
}

int rt_job_set_dtypes(rt_job *job, const rt_dtype_spec *spec, rt_err *e) {
  if (spec->block_rows < 1 || spec->block_cols < 1)
    return rt_fail(e, "--fp8-block: %lld,%lld: blocks need at least one row "
                      "and one column",
                   (long long)spec->block_rows, (long long)spec->block_cols);
  job->dtypes = *spec;
  set_dtypes(job->recipe, spec);
  rt_dtypes_read(job->recipe, job->model.n, job->td, &job->dsum);
  /* without conversion (fp32 on both sides) every strategy moves that */
  if (!job->dsum.converts)
    for (int t = 0; t < job->model.n; t++)
      job->model.t[t].dtype = job->td[t].src;
  return 0;
}

void rt_job_without_conversion(const rt_job *job, rt_job *view) {
  *view = *job;
  view->td = rt_xmalloc(sizeof *view->td * (size_t)job->model.n);
  rt_dtype_spec_default(&view->dtypes);
  /* the same recipe with the default dtypes */
  if (rs_recipe_create(job->model.rs, job->train_spec, job->infer_spec,
                       &view->recipe) != RS_OK) {
    fprintf(stderr, "reshard: %s\n", rs_last_error());
    exit(2);
  }
  rs_recipe_set(view->recipe, RS_RECIPE_INFER_FIRST_RANK, job->infer_first);
  rt_dtypes_read(view->recipe, job->model.n, view->td, &view->dsum);
}

void rt_job_view_free(rt_job *view) {
  if (!view) return;
  free(view->td);
  rs_recipe_destroy(view->recipe);
  memset(view, 0, sizeof *view);
}

int rt_job_stage(const rt_job *job, int tensor) {
  return job->smesh[tensor].rank0 / rt_train_stage_size(&job->train);
}

bool rt_job_colocated(const rt_job *job) {
  return job->placement == RT_PLACE_COLOCATED;
}

const char *rt_placement_name(rt_placement placement) {
  switch (placement) {
  case RT_PLACE_SPLIT: return "split";
  case RT_PLACE_PACKED: return "packed";
  case RT_PLACE_COLOCATED: return "colocated";
  }
  return "?";
}

typedef struct sum_ctx {
  const rt_job *job;
  double bytes;
} sum_ctx;

static void add_bytes(const rt_shard *s, void *arg) {
  sum_ctx *c = arg;
  rs_dtype dt = s->scales ? RS_DTYPE_F32 : c->job->td[s->tensor].dst;
  c->bytes += (double)rt_box_volume(&s->box) * (double)rs_dtype_size(dt);
}

double rt_job_needed_bytes(const rt_job *job) {
  sum_ctx c = {job, 0};
  rt_job_shards(job, RS_SIDE_DST, add_bytes, &c);
  return c.bytes;
}

void rt_job_free(rt_job *job) {
  if (!job) return;
  rs_recipe_destroy(job->recipe);
  rt_model_free(&job->model);
  free(job->domain);
  free(job->domain_ranks);
  free(job->smesh);
  free(job->dmesh);
  free(job->td);
  memset(job, 0, sizeof *job);
}

int64_t rt_job_shards(const rt_job *job, rs_side side, rt_shard_fn fn,
                      void *arg) {
  int64_t n = 0;
  if (rs_recipe_num_shards(job->recipe, side, RS_ALL_RANKS, &n) != RS_OK) {
    fprintf(stderr, "reshard: %s\n", rs_last_error());
    exit(2);
  }
  for (int64_t i = 0; i < n; i++) {
    rt_shard s;
    int scales = 0;
    memset(&s, 0, sizeof s);
    rs_recipe_shard(job->recipe, side, RS_ALL_RANKS, i, &s.tensor, &scales,
                    &s.rank, s.box.off, s.box.ext, &s.buffer, &s.byte_offset,
                    s.strides);
    s.scales = scales;
    s.box.ndim = job->model.t[s.tensor].ndim;
    fn(&s, arg);
  }
  return n;
}

int rt_job_layouts(const rt_job *job, rs_context **ctx_out,
                   rs_layout **src_out, rs_layout **dst_out, rt_err *e) {
  *ctx_out = NULL;
  *src_out = *dst_out = NULL;
  rs_context *ctx = NULL;
  rs_status st = rs_context_create_local(job->world, &ctx);
  if (st != RS_OK)
    return rt_fail(e, "rs_context_create_local(%d): %s: %s", job->world,
                   rs_status_name(st), rs_last_error());
  for (int r = 0; r < job->world && st == RS_OK; r++)
    st = rs_context_set_domain(ctx, r, job->domain[r]);
  rs_layout *l[2] = {NULL, NULL};
  if (st == RS_OK) st = rs_layout_create(ctx, &l[0]);
  if (st == RS_OK) st = rs_layout_create(ctx, &l[1]);
  const char *side = "trainer";
  if (st == RS_OK) st = rs_recipe_add_train(l[0], job->recipe, RS_ALL_RANKS);
  if (st == RS_OK) {
    side = "inference";
    st = rs_recipe_add_infer(l[1], job->recipe, RS_ALL_RANKS);
  }
  if (st != RS_OK) {
    rt_fail(e, "building the %s layout: %s: %s", side, rs_status_name(st),
            rs_context_last_error(ctx));
    rs_layout_destroy(l[0]);
    rs_layout_destroy(l[1]);
    rs_context_destroy(ctx);
    return -1;
  }
  *ctx_out = ctx;
  *src_out = l[0];
  *dst_out = l[1];
  return 0;
}

void rt_job_rank_name(const rt_job *job, int rank, char *buf, size_t n) {
  if (rank < 0 || rank >= job->world) {
    snprintf(buf, n, "-");
    return;
  }
  char tr[192] = "", in[48] = "";
  if (rank < job->ntrain) {
    const rt_train *t = &job->train;
    int ss = rt_train_stage_size(t);
    int s = rank / ss, i = rank % ss;
    int tp = i % t->tp, cp = i / t->tp % t->cp, dp = i / (t->tp * t->cp);
    char x[64] = "", c[16] = "";
    if (rt_model_is_moe(job->model.info)) {
      int etp = i % t->etp, ep = i / t->etp % t->ep, edp = i / (t->etp * t->ep);
      if (t->etp > 1)
        snprintf(x, sizeof x, " ep%d etp%d edp%d", ep, etp, edp);
      else
        snprintf(x, sizeof x, " ep%d edp%d", ep, edp);
    }
    if (t->cp > 1) snprintf(c, sizeof c, " cp%d", cp);
    snprintf(tr, sizeof tr, "pp%d tp%d%s dp%d%s", s, tp, c, dp, x);
  }
  int i = rank - job->infer_first;
  if (i >= 0 && i < job->ninfer)
    snprintf(in, sizeof in, "dp%d tp%d", i / job->infer.tp, i % job->infer.tp);
  if (rt_job_colocated(job))
    snprintf(buf, n, "r%d (train %s | infer %s, domain %d)", rank, tr, in,
             job->domain[rank]);
  else if (tr[0])
    snprintf(buf, n, "train r%d (%s, domain %d)", rank, tr, job->domain[rank]);
  else
    snprintf(buf, n, "infer r%d (%s, domain %d)", rank, in, job->domain[rank]);
}

/* ---- groups --------------------------------------------------------------- */

/* A bucket of holders whose coordinates on the sharded axes are one key. */
typedef struct bucket {
  rt_box box;
  int key;
} bucket;

static int cmp_bucket(const void *x, const void *y) {
  return rt_box_cmp(&((const bucket *)x)->box, &((const bucket *)y)->box);
}

static int cmp_int(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  return (a > b) - (a < b);
}

/* A holder's box follows from its coordinates on the sharded axes
 * (rt_mesh_axis_sharded) alone, so the holders are bucketed by those
 * coordinates (a counting sort), each bucket's box is worked out once, and
 * only the buckets are sorted by box; buckets of one box are merged and their ranks
 * sorted. The groups come out as a sort of every holder by (box, rank)
 * gives them, at a fraction of the cost: the CLI makes them for every
 * tensor and strategy (the sort was about 7% of `reshard plan`'s samples
 * at 2048 GPUs a side). */
void rt_groups_from_mesh(const rt_mesh *mesh, const rt_tensor *t,
                         rt_groups *out) {
  int n = rt_mesh_size(mesh), nkeys = 1;
  for (int a = 0; a < mesh->nax; a++)
    if (rt_mesh_axis_sharded(mesh, a)) nkeys *= mesh->size[a];
  int *first = rt_xcalloc((size_t)nkeys + 1, sizeof *first);
  int *key_of = rt_xmalloc(sizeof *key_of * (size_t)n);
  int *rank_of = rt_xmalloc(sizeof *rank_of * (size_t)n);
  int coord[RT_MAX_AX] = {0};
  for (int i = 0; i < n; i++) { /* coordinates in rt_mesh_coord's order */
    int key = 0;
    for (int a = 0; a < mesh->nax; a++)
      if (rt_mesh_axis_sharded(mesh, a)) key = key * mesh->size[a] + coord[a];
    key_of[i] = key;
    rank_of[i] = rt_mesh_rank(mesh, coord);
    first[key + 1]++;
    for (int a = mesh->nax - 1; a >= 0 && ++coord[a] == mesh->size[a]; a--)
      coord[a] = 0;
  }
  for (int k = 0; k < nkeys; k++) first[k + 1] += first[k];
  int *by_key = rt_xmalloc(sizeof *by_key * (size_t)(n ? n : 1));
  int *fill = rt_xmalloc(sizeof *fill * (size_t)nkeys);
  memcpy(fill, first, sizeof *fill * (size_t)nkeys);
  for (int i = 0; i < n; i++) by_key[fill[key_of[i]]++] = rank_of[i];
  free(fill);
  free(rank_of);
  free(key_of);

  bucket *b = rt_xmalloc(sizeof *b * (size_t)nkeys);
  int nb = 0;
  for (int k = 0; k < nkeys; k++) {
    if (first[k] == first[k + 1]) continue;
    for (int a = mesh->nax - 1, rest = k; a >= 0; a--) {
      coord[a] = 0;
      if (!rt_mesh_axis_sharded(mesh, a)) continue;
      coord[a] = rest % mesh->size[a];
      rest /= mesh->size[a];
    }
    if (!rt_mesh_box(mesh, t, coord, &b[nb].box)) continue; /* empty shard */
    b[nb++].key = k;
  }
  qsort(b, (size_t)nb, sizeof *b, cmp_bucket);
  out->g = rt_xmalloc(sizeof *out->g * (size_t)(nb ? nb : 1));
  out->pool = rt_xmalloc(sizeof *out->pool * (size_t)(n ? n : 1));
  out->n = 0;
  int used = 0;
  for (int i = 0; i < nb; i++) {
    if (i == 0 || !rt_box_equal(&b[i].box, &b[i - 1].box)) {
      rt_group *g = &out->g[out->n++];
      g->box = b[i].box;
      g->n = 0;
      g->ranks = out->pool + used;
    }
    rt_group *g = &out->g[out->n - 1];
    int k = b[i].key, m = first[k + 1] - first[k];
    memcpy(g->ranks + g->n, by_key + first[k], sizeof *by_key * (size_t)m);
    g->n += m;
    used += m;
  }
  for (int i = 0; i < out->n; i++) {
    rt_group *g = &out->g[i];
    int j = 1;
    while (j < g->n && g->ranks[j - 1] < g->ranks[j]) j++;
    if (j < g->n) qsort(g->ranks, (size_t)g->n, sizeof *g->ranks, cmp_int);
  }
  free(b);
  free(by_key);
  free(first);
}

void rt_groups_free(rt_groups *g) {
  if (!g) return;
  free(g->g);
  free(g->pool);
  memset(g, 0, sizeof *g);
}
