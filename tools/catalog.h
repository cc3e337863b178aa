/* SPDX-License-Identifier: Apache-2.0 */
/* The model catalog: every parameter tensor of a few public models, with
 * its Hugging Face name, shape and dtype, experts stacked per layer into
 * [E, ...] tensors as trainers hold them. Architecture facts come from the
 * models' published config.json files (shared/reference/models.json). */
#ifndef RT_CATALOG_H
#define RT_CATALOG_H

#include "rt_common.h"

/* How the frameworks shard a tensor. */
typedef enum rt_role {
  RT_ROLE_EMBED,      /* vocab-parallel embedding: dim 0 */
  RT_ROLE_LM_HEAD,    /* vocab-parallel output layer: dim 0 */
  RT_ROLE_NORM,       /* norms: replicated */
  RT_ROLE_COL,        /* column-parallel Linear: dim 0 */
  RT_ROLE_ROW,        /* row-parallel Linear: dim 1 */
  RT_ROLE_REPL,       /* a Linear every TP rank holds whole (MLA down-projections) */
  RT_ROLE_ROUTER,     /* MoE router gate: replicated */
  RT_ROLE_BIAS,       /* router score bias: replicated */
  RT_ROLE_EXPERT_COL, /* stacked experts [E, inter, hidden]: E over EP, dim 1 over TP */
  RT_ROLE_EXPERT_ROW  /* stacked experts [E, hidden, inter]: E over EP, dim 2 over TP */
} rt_role;

/* How the inference side (vLLM) packs a tensor's shard with others. */
typedef enum rt_fuse {
  RT_FUSE_NONE, /* its own buffer */
  RT_FUSE_ROWS, /* local shards concatenated on dim 0 (qkv_proj, gate_up_proj) */
  RT_FUSE_W13   /* stacked experts, per expert: gate rows then up rows (w13_weight) */
} rt_fuse;

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

typedef struct rt_model_info {
  const char *name;
  const char *family;   /* qwen3_moe, qwen3_dense, llama_dense, deepseek_v3 */
  const char *aliases;  /* comma-separated, lower case */
  int hidden, layers, heads, kv_heads, head_dim;
  int inter;            /* dense MLP intermediate size (0: none) */
  int moe_inter, experts, shared_experts;
  int first_moe_layer;  /* layers below are dense MLP (DeepSeek-V3: 3) */
  int vocab;
  int qk_norm;
  int mla;              /* DeepSeek MLA attention */
  int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
  double published_params;
} rt_model_info;

typedef struct rt_model {
  const rt_model_info *info;
  rt_tensor *t;
  int n;
  int nfuse; /* fused buffer ids used: 0 .. nfuse-1 */
} rt_model;

int rt_model_count(void);
const rt_model_info *rt_model_at(int i);
/* By name or alias, case-insensitive; NULL when unknown. */
const rt_model_info *rt_model_find(const char *name);
/* A comma-separated list of the catalog's model names (static storage). */
const char *rt_model_names(void);

/* Every tensor of the model. info may be any description, not only one of
 * the catalog's (tests build tiny models). Returns 0, or -1 with e set. */
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
