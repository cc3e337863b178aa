/* SPDX-License-Identifier: Apache-2.0 */
/* Jobs: placement, shards in memory, layouts, holder groups. */
#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  if (rt_train_parse(spec->train, &job->train, e) ||
      rt_train_resolve(info, &job->train, e) ||
      rt_infer_parse(spec->infer, &job->infer, e) ||
      rt_infer_resolve(info, &job->infer, e))
    return -1;
  job->cluster = *spec->cluster;
  job->placement = spec->placement;
  job->domain_gpus =
      spec->domain_gpus ? spec->domain_gpus : job->cluster.job_gpus_per_domain;
  if (job->domain_gpus < 1 || job->domain_gpus > job->cluster.gpus_per_domain)
    return rt_fail(e, "--domain-gpus: %d is outside [1, %d] (the %s domain "
                      "size)",
                   job->domain_gpus, job->cluster.gpus_per_domain,
                   job->cluster.name);
  bool colocated = job->placement == RT_PLACE_COLOCATED;
  if (colocated && job->train.world != job->infer.world) {
    bool moe = rt_model_is_moe(info);
    char tr[160], in[96];
    rt_train_describe(&job->train, moe, tr, sizeof tr);
    rt_infer_describe(&job->infer, moe, in, sizeof in);
    return rt_fail(e, "--colocate: the trainer uses %d GPUs (%s) and the "
                      "inference engine %d (%s); colocation puts trainer "
                      "rank i and inference rank i on GPU i, so both sides "
                      "must use the same number of GPUs",
                   job->train.world, tr, job->infer.world, in);
  }
  if (rt_model_build(info, &job->model, e)) return -1;
  job->ntrain = job->train.world;
  job->ninfer = job->infer.world;
  job->infer_first = colocated ? 0 : job->ntrain;
  job->world = colocated ? job->ntrain : job->ntrain + job->ninfer;
  if (job->world > 1 << 20) {
    rt_job_free(job);
    return rt_fail(e, "%d ranks in all: too many", job->world);
  }

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
    rt_train_mesh(&job->model, &job->train, t, &job->smesh[t]);
    rt_infer_mesh(&job->model, &job->infer, t, job->infer_first,
                  &job->dmesh[t]);
  }
  job->td = rt_xmalloc(sizeof *job->td * (size_t)job->model.n);
  rt_dtype_spec_default(&job->dtypes);
  rt_dtypes_decide(&job->model, job->dmesh, &job->dtypes, job->td,
                   &job->dsum);
  return 0;
}

int rt_job_set_dtypes(rt_job *job, const rt_dtype_spec *spec, rt_err *e) {
  if (spec->block_rows < 1 || spec->block_cols < 1)
    return rt_fail(e, "--fp8-block: %lld,%lld: blocks need at least one row "
                      "and one column",
                   (long long)spec->block_rows, (long long)spec->block_cols);
  job->dtypes = *spec;
  rt_dtypes_decide(&job->model, job->dmesh, &job->dtypes, job->td,
                   &job->dsum);
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
  rt_dtypes_decide(&job->model, job->dmesh, &view->dtypes, view->td,
                   &view->dsum);
}

void rt_job_view_free(rt_job *view) {
  if (!view) return;
  free(view->td);
  memset(view, 0, sizeof *view);
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

double rt_job_needed_bytes(const rt_job *job) {
  double bytes = 0;
  for (int t = 0; t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    const rt_tensor_dtype *td = &job->td[t];
    rt_groups D;
    rt_groups_from_mesh(&job->dmesh[t], x, &D);
    for (int k = 0; k < D.n; k++) {
      bytes += (double)rt_box_volume(&D.g[k].box) * D.g[k].n *
               (double)rs_dtype_size(td->dst);
      if (td->scaled) {
        rt_box sb;
        rt_scale_box(&D.g[k].box, &job->dtypes, &sb);
        bytes += (double)rt_box_volume(&sb) * D.g[k].n *
                 (double)rs_dtype_size(RS_DTYPE_F32);
      }
    }
    rt_groups_free(&D);
  }
  return bytes;
}

void rt_job_free(rt_job *job) {
  if (!job) return;
  rt_model_free(&job->model);
  free(job->domain);
  free(job->domain_ranks);
  free(job->smesh);
  free(job->dmesh);
  free(job->td);
  memset(job, 0, sizeof *job);
}

static void dense_strides(const rt_box *b, int64_t *s) {
  int64_t x = 1;
  for (int d = b->ndim - 1; d >= 0; d--) {
    s[d] = x;
    x *= b->ext[d];
  }
}

static int64_t src_shards(const rt_job *job, rt_shard_fn fn, void *arg) {
  /* Offsets of each rank's two parameter buffers (bf16, f32). */
  int64_t *off = rt_xcalloc((size_t)job->ntrain * 2, sizeof *off);
  int64_t count = 0;
  int coord[RT_MAX_AX];
  for (int t = 0; t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    const rt_mesh *m = &job->smesh[t];
    rs_dtype dtype = job->td[t].src;
    int esize = (int)rs_dtype_size(dtype);
    int buf = dtype == RS_DTYPE_F32 ? 1 : 0;
    for (int i = 0, n = rt_mesh_size(m); i < n; i++) {
      rt_shard s;
      rt_mesh_coord(m, i, coord);
      if (!rt_mesh_box(m, x, coord, &s.box)) continue;
      s.tensor = t;
      s.rank = rt_mesh_rank(m, coord);
      s.scales = false;
      s.buffer = buf;
      s.byte_offset = off[2 * s.rank + buf];
      dense_strides(&s.box, s.strides);
      off[2 * s.rank + buf] += rt_box_volume(&s.box) * esize;
      fn(&s, arg);
      count++;
    }
  }
  free(off);
  return count;
}

/* fp8 scales: each placed like its values, in buffer `buffer` of the
 * rank, dense, tensor after tensor. */
static int64_t scale_shards(const rt_job *job, int buffer, rt_shard_fn fn,
                            void *arg) {
  int64_t *at = rt_xcalloc((size_t)job->ninfer, sizeof *at);
  int64_t count = 0;
  int coord[RT_MAX_AX];
  for (int t = 0; t < job->model.n; t++) {
    if (!job->td[t].scaled) continue;
    const rt_mesh *m = &job->dmesh[t];
    for (int i = 0, n = rt_mesh_size(m); i < n; i++) {
      rt_box values;
      rt_mesh_coord(m, i, coord);
      if (!rt_mesh_box(m, &job->model.t[t], coord, &values)) continue;
      rt_shard s;
      s.tensor = t;
      s.scales = true;
      s.rank = rt_mesh_rank(m, coord);
      s.buffer = buffer;
      rt_scale_box(&values, &job->dtypes, &s.box);
      dense_strides(&s.box, s.strides);
      int64_t *off = &at[s.rank - job->infer_first];
      s.byte_offset = *off;
      *off += rt_box_volume(&s.box) * (int64_t)rs_dtype_size(RS_DTYPE_F32);
      fn(&s, arg);
      count++;
    }
  }
  free(at);
  return count;
}

/* Inference side: per rank, one buffer per parameter or fused group. */
static int64_t dst_shards(const rt_job *job, rt_shard_fn fn, void *arg) {
  const rt_model *mo = &job->model;
  /* Buffer id of each tensor: fused groups first share one id. */
  int *buf_of = rt_xmalloc(sizeof *buf_of * (size_t)mo->n);
  int *group_buf = rt_xmalloc(sizeof *group_buf * (size_t)(mo->nfuse + 1));
  for (int i = 0; i <= mo->nfuse; i++) group_buf[i] = -1;
  int next = 0;
  for (int t = 0; t < mo->n; t++) {
    const rt_tensor *x = &mo->t[t];
    if (x->fuse_group >= 0) {
      if (group_buf[x->fuse_group] < 0) group_buf[x->fuse_group] = next++;
      buf_of[t] = group_buf[x->fuse_group];
    } else {
      buf_of[t] = next++;
    }
  }
  int64_t count = 0;
  int coord[RT_MAX_AX];
  /* Walk fused groups as units so each slot knows its predecessors. */
  int *members = rt_xmalloc(sizeof *members * 8);
  char *done = rt_xcalloc((size_t)mo->n, 1);
  for (int t0 = 0; t0 < mo->n; t0++) {
    if (done[t0]) continue;
    int nm = 0;
    const rt_tensor *x0 = &mo->t[t0];
    if (x0->fuse_group < 0) {
      members[nm++] = t0;
    } else {
      for (int slot = 0; slot < 8; slot++)
        for (int t = t0; t < mo->n && t < t0 + 16; t++)
          if (mo->t[t].fuse_group == x0->fuse_group &&
              mo->t[t].fuse_slot == slot)
            members[nm++] = t;
    }
    for (int k = 0; k < nm; k++) done[members[k]] = 1;
    /* Every member has the same mesh size on the inference side except
     * kv-replicated k/v; walk ranks of the first member's mesh and look up
     * the others' boxes per rank. */
    const int ninf = job->ninfer;
    rt_box *box = rt_xmalloc(sizeof *box * (size_t)ninf * (size_t)nm);
    char *has = rt_xcalloc((size_t)ninf * (size_t)nm, 1);
    for (int k = 0; k < nm; k++) {
      const rt_mesh *m = &job->dmesh[members[k]];
      const rt_tensor *x = &mo->t[members[k]];
      for (int i = 0, n = rt_mesh_size(m); i < n; i++) {
        rt_box b;
        rt_mesh_coord(m, i, coord);
        if (!rt_mesh_box(m, x, coord, &b)) continue;
        int r = rt_mesh_rank(m, coord) - job->infer_first;
        box[(size_t)r * nm + k] = b;
        has[(size_t)r * nm + k] = 1;
      }
    }
    for (int r = 0; r < ninf; r++) {
      int64_t at = 0;
      for (int k = 0; k < nm; k++) {
        if (!has[(size_t)r * nm + k]) continue;
        const rt_tensor *x = &mo->t[members[k]];
        int64_t esize = (int64_t)rs_dtype_size(job->td[members[k]].dst);
        rt_shard s;
        s.tensor = members[k];
        s.rank = job->infer_first + r;
        s.scales = false;
        s.box = box[(size_t)r * nm + k];
        s.buffer = buf_of[members[k]];
        if (x->fuse == RT_FUSE_W13) {
          /* [E_loc, sum of slot rows, H]: per expert, slot rows in order */
          int64_t rows = 0, before = 0;
          for (int j = 0; j < nm; j++) {
            if (!has[(size_t)r * nm + j]) continue;
            if (j < k) before += box[(size_t)r * nm + j].ext[1];
            rows += box[(size_t)r * nm + j].ext[1];
          }
          s.strides[2] = 1;
          s.strides[1] = s.box.ext[2];
          s.strides[0] = rows * s.box.ext[2];
          s.byte_offset = before * s.box.ext[2] * esize;
        } else {
          dense_strides(&s.box, s.strides);
          s.byte_offset = at;
          at += rt_box_volume(&s.box) * esize;
        }
        fn(&s, arg);
        count++;
      }
    }
    free(box);
    free(has);
  }
  free(done);
  free(members);
  free(group_buf);
  free(buf_of);
  return count + scale_shards(job, next, fn, arg);
}

int64_t rt_job_shards(const rt_job *job, rs_side side, rt_shard_fn fn,
                      void *arg) {
  return side == RS_SIDE_SRC ? src_shards(job, fn, arg)
                             : dst_shards(job, fn, arg);
}

typedef struct add_ctx {
  rs_layout *l;
  rs_context *ctx;
  const rt_job *job;
  rs_status st;
  char msg[512];
} add_ctx;

static void add_shard(const rt_shard *s, void *arg) {
  add_ctx *a = arg;
  if (a->st != RS_OK) return;
  const rt_tensor *x = &a->job->model.t[s->tensor];
  char scales[RT_NAME_MAX + 16];
  const char *name = x->name;
  if (s->scales) {
    rt_scale_name(x->name, scales, sizeof scales);
    name = scales;
  }
  rs_status st = rs_layout_add_shard(a->l, name, s->rank, s->box.off,
                                     s->box.ext, s->buffer, s->byte_offset,
                                     s->strides);
  if (st != RS_OK) {
    a->st = st;
    snprintf(a->msg, sizeof a->msg, "rs_layout_add_shard(%s, rank %d): %s: %s",
             name, s->rank, rs_status_name(st), rs_context_last_error(a->ctx));
  }
}

/* The f32 scale tensor of fp8 values x, in the destination layout only. */
static rs_status declare_scales(rs_layout *dst, const rt_tensor *x,
                                const rt_dtype_spec *spec) {
  char name[RT_NAME_MAX + 16];
  int64_t shape[RT_MAXD];
  rt_scale_name(x->name, name, sizeof name);
  rt_scale_shape(x, spec, shape);
  rs_status st =
      rs_layout_add_tensor(dst, name, RS_DTYPE_F32, x->ndim, shape);
  if (st == RS_OK)
    st = rs_layout_set_block_scales(dst, x->name, name, spec->block_rows,
                                    spec->block_cols, spec->rule);
  return st;
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
  for (int t = 0; st == RS_OK && t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    const rt_tensor_dtype *td = &job->td[t];
    st = rs_layout_add_tensor(l[0], x->name, td->src, x->ndim, x->shape);
    if (st == RS_OK)
      st = rs_layout_add_tensor(l[1], x->name, td->dst, x->ndim, x->shape);
    if (st == RS_OK && td->scaled)
      st = declare_scales(l[1], x, &job->dtypes);
  }
  if (st != RS_OK) {
    rt_fail(e, "building layouts: %s: %s", rs_status_name(st),
            rs_context_last_error(ctx));
    rs_layout_destroy(l[0]);
    rs_layout_destroy(l[1]);
    rs_context_destroy(ctx);
    return -1;
  }
  for (int s = 0; s < 2; s++) {
    add_ctx a = {l[s], ctx, job, RS_OK, ""};
    rt_job_shards(job, s == 0 ? RS_SIDE_SRC : RS_SIDE_DST, add_shard, &a);
    if (a.st != RS_OK) {
      rt_fail(e, "building the %s layout: %s",
              s == 0 ? "trainer" : "inference", a.msg);
      rs_layout_destroy(l[0]);
      rs_layout_destroy(l[1]);
      rs_context_destroy(ctx);
      return -1;
    }
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
