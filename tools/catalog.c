/* SPDX-License-Identifier: Apache-2.0 */
/* The model catalog, as a copy of what the library's recipes say
 * (reshard/recipes.h): the facts of each model and every tensor. */
#include "catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The facts of a library model. */
static void read_info(const rs_model *m, rt_model_info *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->name_buf, sizeof info->name_buf, "%s", rs_model_name(m));
  info->name = info->name_buf;
  info->family = rs_model_family(m);
  const struct {
    rs_model_param p;
    int *v;
  } facts[] = {{RS_MODEL_HIDDEN_SIZE, &info->hidden},
               {RS_MODEL_NUM_LAYERS, &info->layers},
               {RS_MODEL_NUM_HEADS, &info->heads},
               {RS_MODEL_NUM_KV_HEADS, &info->kv_heads},
               {RS_MODEL_HEAD_DIM, &info->head_dim},
               {RS_MODEL_INTERMEDIATE_SIZE, &info->inter},
               {RS_MODEL_MOE_INTERMEDIATE_SIZE, &info->moe_inter},
               {RS_MODEL_NUM_EXPERTS, &info->experts},
               {RS_MODEL_NUM_SHARED_EXPERTS, &info->shared_experts},
               {RS_MODEL_FIRST_MOE_LAYER, &info->first_moe_layer},
               {RS_MODEL_VOCAB_SIZE, &info->vocab},
               {RS_MODEL_QK_NORM, &info->qk_norm},
               {RS_MODEL_MLA, &info->mla},
               {RS_MODEL_Q_LORA_RANK, &info->q_lora_rank},
               {RS_MODEL_KV_LORA_RANK, &info->kv_lora_rank},
               {RS_MODEL_QK_NOPE_HEAD_DIM, &info->qk_nope_dim},
               {RS_MODEL_QK_ROPE_HEAD_DIM, &info->qk_rope_dim},
               {RS_MODEL_V_HEAD_DIM, &info->v_head_dim}};
  int64_t v;
  for (size_t k = 0; k < sizeof facts / sizeof facts[0]; k++)
    if (rs_model_get(m, facts[k].p, &v) == RS_OK) *facts[k].v = (int)v;
  if (rs_model_get(m, RS_MODEL_PUBLISHED_PARAMS, &v) == RS_OK)
    info->published_params = (double)v;
}

/* The catalog's facts, read once (the program's one table). */
static rt_model_info *catalog(void) {
  static rt_model_info *infos;
  if (!infos) {
    int n = rs_model_catalog_count();
    infos = rt_xcalloc((size_t)(n ? n : 1), sizeof *infos);
    for (int i = 0; i < n; i++) {
      rs_model *m = NULL;
      if (rs_model_from_catalog(rs_model_catalog_name(i), &m) != RS_OK) {
        fprintf(stderr, "reshard: catalog model %d: %s\n", i, rs_last_error());
        exit(2);
      }
      read_info(m, &infos[i]);
      rs_model_destroy(m);
    }
  }
  return infos;
}

int rt_model_count(void) { return rs_model_catalog_count(); }

const rt_model_info *rt_model_at(int i) {
  return i >= 0 && i < rt_model_count() ? &catalog()[i] : NULL;
}

const rt_model_info *rt_model_find(const char *name) {
  rs_model *m = NULL;
  if (!name || rs_model_from_catalog(name, &m) != RS_OK) return NULL;
  const rt_model_info *found = NULL;
  for (int i = 0; i < rt_model_count(); i++)
    if (!strcmp(catalog()[i].name, rs_model_name(m))) found = &catalog()[i];
  rs_model_destroy(m);
  return found;
}

const char *rt_model_names(void) {
  static char buf[256];
  if (!buf[0]) {
    size_t at = 0;
    for (int i = 0; i < rt_model_count() && at < sizeof buf; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? ", " : "",
                             rs_model_catalog_name(i));
  }
  return buf;
}

bool rt_model_is_moe(const rt_model_info *info) {
  return info->experts > 0 && info->moe_inter > 0;
}

int64_t rt_tensor_numel(const rt_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

int64_t rt_tensor_bytes(const rt_tensor *t) {
  return rt_tensor_numel(t) * (int64_t)rs_dtype_size(t->dtype);
}

int rt_model_build(const rt_model_info *info, rt_model *out, rt_err *e) {
  memset(out, 0, sizeof *out);
  if (!info) return rt_fail(e, "no model given");
  rs_status st =
      info->config
          ? rs_model_from_config(info->config, strlen(info->config), &out->rs)
          : rs_model_from_catalog(info->name, &out->rs);
  if (st != RS_OK) return rt_fail(e, "%s", rs_last_error());
  read_info(out->rs, &out->own);
  if (info->name && info->config) out->own.name = info->name;
  out->info = &out->own;
  int64_t nfuse = 0;
  rs_model_get(out->rs, RS_MODEL_NUM_FUSED, &nfuse);
  out->nfuse = (int)nfuse;
  rs_model_num_tensors(out->rs, &out->n);
  out->t = rt_xcalloc((size_t)(out->n ? out->n : 1), sizeof *out->t);
  for (int i = 0; i < out->n; i++) {
    rt_tensor *t = &out->t[i];
    const char *name = NULL;
    int64_t shape[RS_MAX_DIMS] = {0};
    rs_model_tensor_info(out->rs, i, &name, &t->dtype, &t->ndim, shape);
    rs_model_tensor_role(out->rs, i, &t->role, &t->layer, &t->kv, &t->fuse,
                         &t->fuse_group, &t->fuse_slot);
    snprintf(t->name, sizeof t->name, "%s", name);
    for (int d = 0; d < t->ndim && d < RT_MAXD; d++) t->shape[d] = shape[d];
  }
  return 0;
}

void rt_model_free(rt_model *m) {
  if (!m) return;
  free(m->t);
  rs_model_destroy(m->rs);
  memset(m, 0, sizeof *m);
}

void rt_model_totals(const rt_model *m, double *params, double *bytes,
                     double *ffn_share) {
  double p = 0, by = 0, ffn = 0;
  for (int i = 0; i < m->n; i++) {
    const rt_tensor *t = &m->t[i];
    double n = (double)rt_tensor_numel(t);
    p += n;
    by += (double)rt_tensor_bytes(t);
    if (strstr(t->name, ".mlp.") && t->role != RS_ROLE_ROUTER &&
        t->role != RS_ROLE_BIAS)
      ffn += n;
  }
  if (params) *params = p;
  if (bytes) *bytes = by;
  if (ffn_share) *ffn_share = p > 0 ? ffn / p : 0;
}
