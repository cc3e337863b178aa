/* SPDX-License-Identifier: Apache-2.0 */
/* Trainer (Megatron-style) and inference (vLLM-style) layouts. */
#include "frameworks.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- spec parsing --------------------------------------------------------- */

typedef struct kv_key {
  const char *key;
  int *slot;
  int min;
} kv_key;

static int parse_kv(const char *what, const char *spec, kv_key *keys,
                    int nkeys, const char *valid, rt_err *e) {
  if (!spec || !*spec)
    return rt_fail(e, "%s: empty parallelism spec (expected e.g. %s)", what,
                   valid);
  int seen[16] = {0};
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[64];
    if (len == 0 || len >= sizeof item)
      return rt_fail(e, "%s: bad item in '%s' (expected key=value pairs "
                        "separated by commas, e.g. %s)",
                     what, spec, valid);
    memcpy(item, p, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    if (!eq)
      return rt_fail(e, "%s: '%s' has no '=' (expected key=value, e.g. %s)",
                     what, item, valid);
    *eq = '\0';
    const char *val = eq + 1;
    int k = 0;
    while (k < nkeys && strcmp(keys[k].key, item) != 0) k++;
    if (k == nkeys)
      return rt_fail(e, "%s: unknown key '%s' (known: %s)", what, item,
                     valid);
    if (seen[k]++)
      return rt_fail(e, "%s: '%s' given twice", what, item);
    errno = 0;
    char *stop = NULL;
    long v = strtol(val, &stop, 10);
    if (!*val || *stop || errno || v < keys[k].min || v > 1 << 20)
      return rt_fail(e, "%s: %s=%s is not an integer in [%d, %d]", what,
                     item, val, keys[k].min, 1 << 20);
    *keys[k].slot = (int)v;
    p = end ? end + 1 : p + len;
    if (end && !*p)
      return rt_fail(e, "%s: trailing comma in '%s'", what, spec);
  }
  return 0;
}

int rt_train_parse(const char *spec, rt_train *out, rt_err *e) {
  memset(out, 0, sizeof *out);
  out->tp = out->cp = out->ep = out->etp = out->pp = 1;
  kv_key keys[] = {{"tp", &out->tp, 1},          {"cp", &out->cp, 1},
                   {"ep", &out->ep, 1},          {"etp", &out->etp, 1},
                   {"pp", &out->pp, 1},          {"dp", &out->given_dp, 1},
                   {"edp", &out->given_edp, 1},  {"gpus", &out->given_gpus, 1},
                   {"fsdp", &out->fsdp, 0}};
  if (parse_kv("--train", spec, keys, (int)(sizeof keys / sizeof keys[0]),
               "tp,cp,ep,etp,pp,dp,edp,gpus,fsdp", e))
    return -1;
  if (out->fsdp > 1)
    return rt_fail(e, "--train: fsdp=%d: use fsdp=1 to shard the data-"
                      "parallel axes on dim 0, fsdp=0 to replicate",
                   out->fsdp);
  return 0;
}

int rt_infer_parse(const char *spec, rt_infer *out, rt_err *e) {
  memset(out, 0, sizeof *out);
  out->tp = 1;
  int dp = 0, ep = 0;
  kv_key keys[] = {{"tp", &out->tp, 1},
                   {"dp", &dp, 1},
                   {"ep", &ep, 1},
                   {"gpus", &out->given_gpus, 1}};
  if (parse_kv("--infer", spec, keys, (int)(sizeof keys / sizeof keys[0]),
               "tp,dp,ep,gpus", e))
    return -1;
  out->dp = dp;
  out->ep = ep;
  return 0;
}

static int check_div(const char *side, const char *what, int64_t n,
                     const char *key, int k, rt_err *e) {
  if (k > 0 && n % k != 0)
    return rt_fail(e, "%s: %s=%d does not divide %s (%lld)", side, key, k,
                   what, (long long)n);
  return 0;
}

int rt_train_resolve(const rt_model_info *m, rt_train *t, rt_err *e) {
  const char *S = "--train";
  bool moe = rt_model_is_moe(m);
  if (!moe && (t->ep > 1 || t->etp > 1 || t->given_edp))
    return rt_fail(e, "%s: %s has no routed experts, so ep/etp/edp do not "
                      "apply",
                   S, m->name);
  int dense = t->tp * t->cp, expert = t->etp * t->ep;
  int64_t world = 0;
  if (t->given_gpus) world = t->given_gpus;
  if (t->given_dp) {
    int64_t w = (int64_t)dense * t->given_dp * t->pp;
    if (world && w != world)
      return rt_fail(e, "%s: tp*cp*dp*pp = %lld but gpus=%lld", S,
                     (long long)w, (long long)world);
    world = w;
  }
  if (t->given_edp) {
    int64_t w = (int64_t)expert * t->given_edp * t->pp;
    if (world && w != world)
      return rt_fail(e, "%s: etp*ep*edp*pp = %lld but the dense axes give "
                        "%lld GPUs",
                     S, (long long)w, (long long)world);
    world = w;
  }
  if (!world) {
    int64_t a = dense, b = moe ? expert : 1;
    int64_t l = a, x = a, y = b;
    while (y) {
      int64_t r = x % y;
      x = y;
      y = r;
    }
    l = a / x * b; /* smallest stage both the dense and expert axes fill */
    world = l * t->pp;
  }
  if (world > 1 << 20)
    return rt_fail(e, "%s: %lld GPUs is more than this tool handles", S,
                   (long long)world);
  if (world % t->pp)
    return rt_fail(e, "%s: pp=%d does not divide the %lld trainer GPUs", S,
                   t->pp, (long long)world);
  int64_t stage = world / t->pp;
  if (stage % dense)
    return rt_fail(e, "%s: tp*cp = %d does not divide the %lld GPUs of a "
                      "pipeline stage (world %lld / pp %d)",
                   S, dense, (long long)stage, (long long)world, t->pp);
  if (moe && stage % expert)
    return rt_fail(e, "%s: etp*ep = %d does not divide the %lld GPUs of a "
                      "pipeline stage (world %lld / pp %d)",
                   S, expert, (long long)stage, (long long)world, t->pp);
  t->world = (int)world;
  t->dp = (int)(stage / dense);
  t->edp = moe ? (int)(stage / expert) : 0;
  if (t->pp > m->layers)
    return rt_fail(e, "%s: pp=%d is more than the %d layers of %s", S, t->pp,
                   m->layers, m->name);
  if (check_div(S, "num_attention_heads", m->heads, "tp", t->tp, e)) return -1;
  if (!m->mla && check_div(S, "num_key_value_heads (Megatron needs whole "
                              "query groups per TP rank)",
                           m->kv_heads, "tp", t->tp, e))
    return -1;
  if (m->inter && check_div(S, "intermediate_size", m->inter, "tp", t->tp, e))
    return -1;
  if (moe) {
    if (check_div(S, "the number of experts", m->experts, "ep", t->ep, e))
      return -1;
    if (check_div(S, "moe_intermediate_size", m->moe_inter, "etp", t->etp, e))
      return -1;
  }
  return 0;
}

int rt_infer_resolve(const rt_model_info *m, rt_infer *t, rt_err *e) {
  const char *S = "--infer";
  bool moe = rt_model_is_moe(m);
  if (t->given_gpus) {
    if (t->given_gpus % t->tp)
      return rt_fail(e, "%s: tp=%d does not divide gpus=%d", S, t->tp,
                     t->given_gpus);
    int dp = t->given_gpus / t->tp;
    if (t->dp && t->dp != dp)
      return rt_fail(e, "%s: tp*dp = %d but gpus=%d", S, t->tp * t->dp,
                     t->given_gpus);
    t->dp = dp;
  }
  if (!t->dp) t->dp = 1;
  if ((int64_t)t->tp * t->dp > 1 << 20)
    return rt_fail(e, "%s: too many GPUs", S);
  t->world = t->tp * t->dp;
  if (t->ep && !moe)
    return rt_fail(e, "%s: %s has no routed experts, so ep does not apply", S,
                   m->name);
  if (!t->ep) t->ep = 1;
  if (t->ep != 1 && t->ep != t->world)
    return rt_fail(e, "%s: ep=%d: vLLM's expert-parallel group is all "
                      "tp*dp = %d ranks, so ep must be 1 or %d",
                   S, t->ep, t->world, t->world);
  if (check_div(S, "num_attention_heads", m->heads, "tp", t->tp, e)) return -1;
  if (!m->mla) {
    if (t->tp > m->kv_heads) {
      if (t->tp % m->kv_heads)
        return rt_fail(e, "%s: tp=%d is above num_key_value_heads (%d) and "
                          "not a multiple of it, so vLLM cannot replicate "
                          "whole kv heads",
                       S, t->tp, m->kv_heads);
    } else if (check_div(S, "num_key_value_heads", m->kv_heads, "tp", t->tp,
                         e)) {
      return -1;
    }
  }
  if (m->inter && check_div(S, "intermediate_size", m->inter, "tp", t->tp, e))
    return -1;
  if (moe) {
    if (t->ep > 1) {
      if (check_div(S, "the number of experts", m->experts, "ep", t->ep, e))
        return -1;
    } else if (check_div(S, "moe_intermediate_size", m->moe_inter, "tp",
                         t->tp, e)) {
      return -1;
    }
    if (m->shared_experts &&
        check_div(S, "the shared experts' intermediate size",
                  (int64_t)m->shared_experts * m->moe_inter, "tp", t->tp, e))
      return -1;
  }
  return 0;
}

void rt_train_describe(const rt_train *t, bool moe, char *buf, size_t n) {
  if (moe)
    snprintf(buf, n, "TP%d CP%d EP%d PP%d (DP%d, expert-DP%d%s)", t->tp,
             t->cp, t->ep, t->pp, t->dp, t->edp,
             t->fsdp ? ", FSDP dim-0 sharding" : "");
  else
    snprintf(buf, n, "TP%d CP%d PP%d (DP%d%s)", t->tp, t->cp, t->pp, t->dp,
             t->fsdp ? ", FSDP dim-0 sharding" : "");
  if (moe && t->etp > 1) {
    size_t l = strlen(buf);
    snprintf(buf + l, n > l ? n - l : 0, ", expert-TP%d", t->etp);
  }
}

void rt_infer_describe(const rt_infer *t, bool moe, char *buf, size_t n) {
  if (moe && t->ep > 1)
    snprintf(buf, n, "TP%d DP%d EP%d", t->tp, t->dp, t->ep);
  else
    snprintf(buf, n, "TP%d DP%d", t->tp, t->dp);
}

/* ---- meshes --------------------------------------------------------------- */

static void axis(rt_mesh *m, const char *name, int size, int place,
                 int stride) {
  int a = m->nax++;
  m->size[a] = size;
  m->place[a] = place;
  m->stride[a] = stride;
  snprintf(m->axis[a], sizeof m->axis[a], "%s", name);
}

int rt_train_stage_size(const rt_train *t) { return t->world / t->pp; }

int rt_train_stage(const rt_model *m, const rt_train *t, int tensor) {
  const rt_tensor *x = &m->t[tensor];
  if (x->layer >= 0)
    return (int)((int64_t)x->layer * t->pp / m->info->layers);
  return x->role == RT_ROLE_EMBED ? 0 : t->pp - 1;
}

static int tp_dim(const rt_tensor *x) {
  switch (x->role) {
  case RT_ROLE_EMBED:
  case RT_ROLE_LM_HEAD:
  case RT_ROLE_COL:
    return 0;
  case RT_ROLE_ROW:
    return 1;
  case RT_ROLE_EXPERT_COL:
    return 1;
  case RT_ROLE_EXPERT_ROW:
    return 2;
  default:
    return RS_REPLICATE;
  }
}

static bool is_expert(const rt_tensor *x) {
  return x->role == RT_ROLE_EXPERT_COL || x->role == RT_ROLE_EXPERT_ROW;
}

void rt_train_mesh(const rt_model *m, const rt_train *t, int tensor,
                   rt_mesh *out) {
  const rt_tensor *x = &m->t[tensor];
  memset(out, 0, sizeof *out);
  out->rank0 = rt_train_stage(m, t, tensor) * rt_train_stage_size(t);
  int dp_place = t->fsdp ? 0 : RS_REPLICATE;
  if (is_expert(x)) {
    /* order etp, ep, edp (etp fastest); EP splits the experts, expert-TP
     * the inter dim, FSDP the local experts further on dim 0. */
    axis(out, "ep", t->ep, 0, t->etp);
    axis(out, "etp", t->etp, tp_dim(x), 1);
    axis(out, "edp", t->edp, dp_place, t->etp * t->ep);
  } else {
    /* order tp, cp, dp (tp fastest); FSDP splits the TP-local shard. */
    axis(out, "tp", t->tp, tp_dim(x), 1);
    axis(out, "dp", t->dp, dp_place, t->tp * t->cp);
    axis(out, "cp", t->cp, RS_REPLICATE, t->tp);
  }
}

void rt_infer_mesh(const rt_model *m, const rt_infer *t, int tensor,
                   int rank0, rt_mesh *out) {
  const rt_tensor *x = &m->t[tensor];
  memset(out, 0, sizeof *out);
  out->rank0 = rank0;
  if (is_expert(x) && t->ep > 1) {
    axis(out, "ep", t->ep, 0, 1);
    return;
  }
  int kvh = m->info->kv_heads;
  if (x->kv && t->tp > kvh) {
    /* vLLM replicates kv heads: tp rank r holds head r / (tp / kvh). */
    int rep = t->tp / kvh;
    axis(out, "kvh", kvh, 0, rep);
    axis(out, "kvr", rep, RS_REPLICATE, 1);
    axis(out, "dp", t->dp, RS_REPLICATE, t->tp);
    return;
  }
  axis(out, "tp", t->tp, tp_dim(x), 1);
  axis(out, "dp", t->dp, RS_REPLICATE, t->tp);
}

int rt_mesh_size(const rt_mesh *mesh) {
  int n = 1;
  for (int a = 0; a < mesh->nax; a++) n *= mesh->size[a];
  return n;
}

void rt_mesh_coord(const rt_mesh *mesh, int idx, int coord[RT_MAX_AX]) {
  for (int a = mesh->nax - 1; a >= 0; a--) {
    coord[a] = idx % mesh->size[a];
    idx /= mesh->size[a];
  }
}

int rt_mesh_rank(const rt_mesh *mesh, const int coord[RT_MAX_AX]) {
  int r = mesh->rank0;
  for (int a = 0; a < mesh->nax; a++) r += coord[a] * mesh->stride[a];
  return r;
}

bool rt_mesh_axis_sharded(const rt_mesh *mesh, int a) {
  return mesh->place[a] != RS_REPLICATE && mesh->size[a] > 1;
}

int rt_mesh_box(const rt_mesh *mesh, const rt_tensor *t,
                const int coord[RT_MAX_AX], rt_box *out) {
  /* libreshard's own DTensor box (torch.chunk: chunk = ceil(size / n),
   * trailing shards short or empty), the one rs_layout_add_dtensor uses. */
  int64_t msize[RT_MAX_AX], mcoord[RT_MAX_AX];
  for (int a = 0; a < mesh->nax; a++) {
    msize[a] = mesh->size[a];
    mcoord[a] = coord[a];
  }
  out->ndim = t->ndim;
  if (rs_dtensor_local_box(t->ndim, t->shape, mesh->nax, msize, mesh->place,
                           mcoord, out->off, out->ext) != RS_OK) {
    /* the meshes and models are checked when built: a bug if it happens */
    fprintf(stderr, "reshard: box of %s: %s\n", t->name, rs_last_error());
    abort();
  }
  for (int d = 0; d < t->ndim; d++)
    if (out->ext[d] == 0) return 0;
  return 1;
}

int rt_mesh_shard_axes(const rt_mesh *mesh) {
  int n = 0;
  for (int a = 0; a < mesh->nax; a++)
    n += rt_mesh_axis_sharded(mesh, a);
  return n;
}

bool rt_mesh_even(const rt_mesh *mesh, const rt_tensor *t) {
  int64_t ext[RT_MAXD];
  for (int d = 0; d < t->ndim; d++) ext[d] = t->shape[d];
  for (int a = 0; a < mesh->nax; a++) {
    if (!rt_mesh_axis_sharded(mesh, a)) continue;
    int d = mesh->place[a];
    if (ext[d] % mesh->size[a]) return false;
    ext[d] /= mesh->size[a];
  }
  return true;
}
