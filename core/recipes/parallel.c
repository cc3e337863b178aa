/* SPDX-License-Identifier: Apache-2.0 */
/* Trainer (Megatron-Core conventions) and engine (vLLM conventions)
 * parallelism: the specs ("tp=2,cp=2,ep=16,pp=4", "tp=8,dp=16,ep=128"),
 * the sizes they leave out, the checks against the model, and each
 * tensor's device mesh with DTensor placements and the launchers' rank
 * strides. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "recipes/recipes.h"

/* ---- spec parsing ---------------------------------------------------------
 */

typedef struct kv_key {
  const char *key;
  int *slot;
  int min;
} kv_key;

static rs_status parse_kv(const char *what, const char *spec, kv_key *keys,
                          int nkeys, const char *valid, rsi_err *err) {
  if (!spec || !*spec)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: empty parallelism spec (expected e.g. %s)", what,
                    valid);
  int seen[16] = {0};
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[64];
    if (len == 0 || len >= sizeof item)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: bad item in '%s' (expected key=value pairs "
                      "separated by commas, e.g. %s)",
                      what, spec, valid);
    memcpy(item, p, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    if (!eq)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: '%s' has no '=' (expected key=value, e.g. %s)", what,
                      item, valid);
    *eq = '\0';
    const char *val = eq + 1;
    int k = 0;
    while (k < nkeys && strcmp(keys[k].key, item) != 0) k++;
    if (k == nkeys)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: unknown key '%s' (known: %s)", what, item, valid);
    if (seen[k]++)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "%s: '%s' given twice",
                      what, item);
    errno = 0;
    char *stop = NULL;
    long v = strtol(val, &stop, 10);
    if (!*val || *stop || errno || v < keys[k].min || v > 1 << 20)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: %s=%s is not an integer in [%d, %d]", what, item,
                      val, keys[k].min, 1 << 20);
    *keys[k].slot = (int)v;
    p = end ? end + 1 : p + len;
    if (end && !*p)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: trailing comma in '%s'", what, spec);
  }
  return 0;
}

rs_status rsi_train_parse(const char *spec, rsi_train *out, rsi_err *err) {
  memset(out, 0, sizeof *out);
  out->tp = out->cp = out->ep = out->etp = out->pp = 1;
  out->vocab_pad = 1;
  kv_key keys[] = {
      {"tp", &out->tp, 1},         {"cp", &out->cp, 1},
      {"ep", &out->ep, 1},         {"etp", &out->etp, 1},
      {"pp", &out->pp, 1},         {"dp", &out->given_dp, 1},
      {"edp", &out->given_edp, 1}, {"gpus", &out->given_gpus, 1},
      {"fsdp", &out->fsdp, 0},     {"vocab_pad", &out->vocab_pad, 1}};
  if (parse_kv("train", spec, keys, (int)(sizeof keys / sizeof keys[0]),
               "tp,cp,ep,etp,pp,dp,edp,gpus,fsdp,vocab_pad", err))
    return RS_ERR_INVALID_ARGUMENT;
  if (out->fsdp > 1)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "--train: fsdp=%d: use fsdp=1 to shard the data-"
                    "parallel axes on dim 0, fsdp=0 to replicate",
                    out->fsdp);
  return 0;
}

rs_status rsi_infer_parse(const char *spec, rsi_infer *out, rsi_err *err) {
  memset(out, 0, sizeof *out);
  out->tp = 1;
  out->vocab_pad = 64; /* vLLM's DEFAULT_VOCAB_PADDING_SIZE, SGLang's too */
  int dp = 0, ep = 0;
  kv_key keys[] = {{"tp", &out->tp, 1},
                   {"dp", &dp, 1},
                   {"ep", &ep, 1},
                   {"gpus", &out->given_gpus, 1},
                   {"vocab_pad", &out->vocab_pad, 1}};
  if (parse_kv("infer", spec, keys, (int)(sizeof keys / sizeof keys[0]),
               "tp,dp,ep,gpus,vocab_pad", err))
    return RS_ERR_INVALID_ARGUMENT;
  out->dp = dp;
  out->ep = ep;
  return 0;
}

static rs_status check_div(const char *side, const char *what, int64_t n,
                           const char *key, int k, rsi_err *err) {
  if (k > 0 && n % k != 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: %s=%d does not divide %s (%lld)", side, key, k, what,
                    (long long)n);
  return 0;
}

rs_status rsi_train_resolve(const rsi_model_info *m, rsi_train *t,
                            rsi_err *err) {
  const char *S = "train";
  bool moe = rsi_model_is_moe(m);
  if (!moe && (t->ep > 1 || t->etp > 1 || t->given_edp))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: %s has no routed experts, so ep/etp/edp do not "
                    "apply",
                    S, m->name);
  int dense = t->tp * t->cp, expert = t->etp * t->ep;
  int64_t world = 0;
  if (t->given_gpus) world = t->given_gpus;
  if (t->given_dp) {
    int64_t w = (int64_t)dense * t->given_dp * t->pp;
    if (world && w != world)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: tp*cp*dp*pp = %lld but gpus=%lld", S, (long long)w,
                      (long long)world);
    world = w;
  }
  if (t->given_edp) {
    int64_t w = (int64_t)expert * t->given_edp * t->pp;
    if (world && w != world)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: etp*ep*edp*pp = %lld but the dense axes give "
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
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: %lld GPUs is more than this tool handles", S,
                    (long long)world);
  if (world % t->pp)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: pp=%d does not divide the %lld trainer GPUs", S, t->pp,
                    (long long)world);
  int64_t stage = world / t->pp;
  if (stage % dense)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: tp*cp = %d does not divide the %lld GPUs of a "
                    "pipeline stage (world %lld / pp %d)",
                    S, dense, (long long)stage, (long long)world, t->pp);
  if (moe && stage % expert)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: etp*ep = %d does not divide the %lld GPUs of a "
                    "pipeline stage (world %lld / pp %d)",
                    S, expert, (long long)stage, (long long)world, t->pp);
  t->world = (int)world;
  t->dp = (int)(stage / dense);
  t->edp = moe ? (int)(stage / expert) : 0;
  if (t->pp > m->layers)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: pp=%d is more than the %d layers of %s", S, t->pp,
                    m->layers, m->name);
  if (check_div(S, "num_attention_heads", m->heads, "tp", t->tp, err))
    return RS_ERR_INVALID_ARGUMENT;
  if (!m->mla && check_div(S,
                           "num_key_value_heads (Megatron needs whole "
                           "query groups per TP rank)",
                           m->kv_heads, "tp", t->tp, err))
    return RS_ERR_INVALID_ARGUMENT;
  if (m->inter && check_div(S, "intermediate_size", m->inter, "tp", t->tp, err))
    return RS_ERR_INVALID_ARGUMENT;
  if (moe) {
    if (check_div(S, "the number of experts", m->experts, "ep", t->ep, err))
      return RS_ERR_INVALID_ARGUMENT;
    if (check_div(S, "moe_intermediate_size", m->moe_inter, "etp", t->etp, err))
      return RS_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

rs_status rsi_infer_resolve(const rsi_model_info *m, rsi_infer *t,
                            rsi_err *err) {
  const char *S = "infer";
  bool moe = rsi_model_is_moe(m);
  if (t->given_gpus) {
    if (t->given_gpus % t->tp)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: tp=%d does not divide gpus=%d", S, t->tp,
                      t->given_gpus);
    int dp = t->given_gpus / t->tp;
    if (t->dp && t->dp != dp)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "%s: tp*dp = %d but gpus=%d", S, t->tp * t->dp,
                      t->given_gpus);
    t->dp = dp;
  }
  if (!t->dp) t->dp = 1;
  if ((int64_t)t->tp * t->dp > 1 << 20)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT, "%s: too many GPUs", S);
  t->world = t->tp * t->dp;
  if (t->ep && !moe)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: %s has no routed experts, so ep does not apply", S,
                    m->name);
  if (!t->ep) t->ep = 1;
  if (t->ep != 1 && t->ep != t->world)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: ep=%d: vLLM's expert-parallel group is all "
                    "tp*dp = %d ranks, so ep must be 1 or %d",
                    S, t->ep, t->world, t->world);
  if (check_div(S, "num_attention_heads", m->heads, "tp", t->tp, err))
    return RS_ERR_INVALID_ARGUMENT;
  if (!m->mla) {
    if (t->tp > m->kv_heads) {
      if (t->tp % m->kv_heads)
        return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                        "%s: tp=%d is above num_key_value_heads (%d) and "
                        "not a multiple of it, so vLLM cannot replicate "
                        "whole kv heads",
                        S, t->tp, m->kv_heads);
    } else if (check_div(S, "num_key_value_heads", m->kv_heads, "tp", t->tp,
                         err)) {
      return RS_ERR_INVALID_ARGUMENT;
    }
  }
  if (m->inter && check_div(S, "intermediate_size", m->inter, "tp", t->tp, err))
    return RS_ERR_INVALID_ARGUMENT;
  if (rsi_infer_vocab_rows(m, t) % t->tp)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: tp=%d does not divide the vocabulary padded to a "
                    "multiple of vocab_pad=%d (%lld rows for vocab_size "
                    "%d): vLLM refuses it too",
                    S, t->tp, t->vocab_pad,
                    (long long)rsi_infer_vocab_rows(m, t), m->vocab);
  if (moe) {
    if (t->ep > 1) {
      if (check_div(S, "the number of experts", m->experts, "ep", t->ep, err))
        return RS_ERR_INVALID_ARGUMENT;
    } else if (check_div(S, "moe_intermediate_size", m->moe_inter, "tp", t->tp,
                         err)) {
      return RS_ERR_INVALID_ARGUMENT;
    }
    if (m->shared_experts &&
        check_div(S, "the shared experts' intermediate size",
                  (int64_t)m->shared_experts * m->moe_inter, "tp", t->tp, err))
      return RS_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

/* ---- meshes ---------------------------------------------------------------
 */

static int64_t round_up(int64_t n, int64_t k) { return (n + k - 1) / k * k; }

int64_t rsi_train_vocab_rows(const rsi_model_info *m, const rsi_train *t) {
  return round_up(m->vocab, (int64_t)t->vocab_pad * t->tp);
}

int64_t rsi_infer_vocab_rows(const rsi_model_info *m, const rsi_infer *t) {
  return round_up(m->vocab, t->vocab_pad);
}

static bool vocab_rows(const rsi_rtensor *x) {
  return x->role == RS_ROLE_EMBED || x->role == RS_ROLE_LM_HEAD;
}

static void axis(rsi_mesh *m, const char *name, int size, int place,
                 int stride) {
  int a = m->nax++;
  m->size[a] = size;
  m->place[a] = place;
  m->stride[a] = stride;
  m->axis[a] = name;
}

static int train_stage_size(const rsi_train *t) { return t->world / t->pp; }

static int train_stage(const rs_model *m, const rsi_train *t, int tensor) {
  const rsi_rtensor *x = &m->t[tensor];
  if (x->layer >= 0) return (int)((int64_t)x->layer * t->pp / m->info.layers);
  return x->role == RS_ROLE_EMBED ? 0 : t->pp - 1;
}

static int tp_dim(const rsi_rtensor *x) {
  switch (x->role) {
    case RS_ROLE_EMBED:
    case RS_ROLE_LM_HEAD:
    case RS_ROLE_COL:
      return 0;
    case RS_ROLE_ROW:
      return 1;
    case RS_ROLE_EXPERT_COL:
      return 1;
    case RS_ROLE_EXPERT_ROW:
      return 2;
    default:
      return RS_REPLICATE;
  }
}

static bool is_expert(const rsi_rtensor *x) {
  return x->role == RS_ROLE_EXPERT_COL || x->role == RS_ROLE_EXPERT_ROW;
}

void rsi_train_mesh(const rs_model *m, const rsi_train *t, int tensor,
                    rsi_mesh *out) {
  const rsi_rtensor *x = &m->t[tensor];
  memset(out, 0, sizeof *out);
  out->rank0 = train_stage(m, t, tensor) * train_stage_size(t);
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
  /* vocab_pad 1: no padding, the rows split as torch.chunk splits them */
  if (vocab_rows(x) && t->vocab_pad > 1)
    out->rows = rsi_train_vocab_rows(&m->info, t);
}

void rsi_infer_mesh(const rs_model *m, const rsi_infer *t, int tensor,
                    int rank0, rsi_mesh *out) {
  const rsi_rtensor *x = &m->t[tensor];
  memset(out, 0, sizeof *out);
  out->rank0 = rank0;
  if (is_expert(x) && t->ep > 1) {
    axis(out, "ep", t->ep, 0, 1);
    return;
  }
  int kvh = m->info.kv_heads;
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
  if (vocab_rows(x)) out->rows = rsi_infer_vocab_rows(&m->info, t);
}

int rsi_mesh_size(const rsi_mesh *mesh) {
  int n = 1;
  for (int a = 0; a < mesh->nax; a++) n *= mesh->size[a];
  return n;
}

int rsi_mesh_box(const rsi_mesh *mesh, const rsi_rtensor *t, int idx,
                 int64_t *off, int64_t *ext, int64_t *held, int *rank) {
  int64_t msize[RSI_MAX_AX], mcoord[RSI_MAX_AX];
  int r = mesh->rank0;
  for (int a = mesh->nax - 1; a >= 0; a--) {
    msize[a] = mesh->size[a];
    mcoord[a] = idx % mesh->size[a];
    idx /= mesh->size[a];
    r += (int)mcoord[a] * mesh->stride[a];
  }
  *rank = r;
  /* the meshes are checked against the model when the recipe is made, so
   * the box cannot fail; an empty box is a trailing torch.chunk shard */
  rsi_err scratch;
  int64_t shape[RSI_RMAXD];
  memcpy(shape, t->shape, sizeof shape);
  if (mesh->rows) shape[0] = mesh->rows;
  if (rsi_dtensor_box(t->ndim, shape, mesh->nax, msize, mesh->place, mcoord,
                      off, ext, &scratch) != RS_OK)
    return 0;
  if (held) memcpy(held, ext, sizeof *held * (size_t)t->ndim);
  /* padding rows are held, never declared: the box stops at the tensor */
  if (off[0] + ext[0] > t->shape[0])
    ext[0] = off[0] < t->shape[0] ? t->shape[0] - off[0] : 0;
  for (int d = 0; d < t->ndim; d++)
    if (ext[d] == 0) return 0;
  return 1;
}
