/* SPDX-License-Identifier: Apache-2.0 */
/* The model catalog, as the CLI sees it: the library's recipes
 * (reshard/recipes.h) hold the models and every parameter tensor (Hugging
 * Face name, shape, dtype, role, fused engine buffer); this is a plain
 * copy of those facts for the cost model and the reports. */
#ifndef RT_CATALOG_H
#define RT_CATALOG_H

#include "rt_common.h"

#include <reshard/recipes.h>

/* How the frameworks shard and pack a tensor: the library's recipes say
 * (rs_tensor_role, rs_fuse in reshard/recipes.h). */
typedef rs_tensor_role rt_role;
typedef rs_fuse rt_fuse;

typedef struct rt_tensor {
  char name[RT_NAME_MAX];
  rs_dtype dtype;
  int ndim;
  int64_t shape[RT_MAXD];
  int layer;      /* decoder layer; -1 for embed_tokens, norm, lm_head */
  rt_role role;
  int kv;         /* 1: k_proj / v_proj, rows are kv heads */
  rt_fuse fuse;
  int fuse_group; /* fused inference buffer id, -1 when own buffer */
  int fuse_slot;  /* position inside the fused buffer */
} rt_tensor;

/* A model's facts, as the library's recipes read them (rs_model_get). A
 * description the tests write names a catalog model, or holds a
 * config.json text (config) the library reads. */
typedef struct rt_model_info {
  const char *name;
  const char *family;   /* qwen3_moe, qwen3_dense, llama_dense, deepseek_v3 */
  const char *config;   /* a config.json text; NULL: the catalog's `name` */
  int hidden, layers, heads, kv_heads, head_dim;
  int inter;            /* dense MLP intermediate size (0: none) */
  int moe_inter, experts, shared_experts;
  int first_moe_layer;  /* layers below are dense MLP (DeepSeek-V3: 3) */
  int vocab;
  int qk_norm;
  int mla;              /* DeepSeek MLA attention */
  int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
  double published_params;
  char name_buf[RT_NAME_MAX];
} rt_model_info;

typedef struct rt_model {
  const rt_model_info *info;
  rt_tensor *t;
  int n;
  int nfuse; /* fused buffer ids used: 0 .. nfuse-1 */
  rs_model *rs; /* the library's model */
  rt_model_info own;
} rt_model;

int rt_model_count(void);
const rt_model_info *rt_model_at(int i);
/* By name or alias, case-insensitive; NULL when unknown. */
const rt_model_info *rt_model_find(const char *name);
/* A comma-separated list of the catalog's model names (static storage). */
const char *rt_model_names(void);

/* Every tensor of the model, from the library (rs_model_from_catalog, or
 * rs_model_from_config with info->config). Returns 0, or -1 with e set. */
int rt_model_build(const rt_model_info *info, rt_model *out, rt_err *e);
void rt_model_free(rt_model *m);

int64_t rt_tensor_numel(const rt_tensor *t);
int64_t rt_tensor_bytes(const rt_tensor *t);
/* Total parameters and bytes; *ffn_share (may be NULL) gets the share of
 * parameters in MLP / expert weights. */
void rt_model_totals(const rt_model *m, double *params, double *bytes,
                     double *ffn_share);
/* Whether the model has routed experts. */
bool rt_model_is_moe(const rt_model_info *info);

#endif
