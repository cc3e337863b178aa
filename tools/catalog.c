/* SPDX-License-Identifier: Apache-2.0 */
/* The model catalog. Facts from each model's config.json (see
 * shared/reference/models.json and layer-tensors.md). */
#include "catalog.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const rt_model_info models[] = {
    {.name = "Qwen3-235B-A22B", .family = "qwen3_moe",
     .aliases = "qwen3-235b,qwen235b,qwen3-235b-a22b",
     .hidden = 4096, .layers = 94, .heads = 64, .kv_heads = 4, .head_dim = 128,
     .moe_inter = 1536, .experts = 128, .vocab = 151936, .qk_norm = 1,
     .published_params = 235.09e9},
    {.name = "DeepSeek-V3", .family = "deepseek_v3",
     .aliases = "dsv3,deepseek-v3,deepseek-v3-671b",
     .hidden = 7168, .layers = 61, .heads = 128, .kv_heads = 128,
     .inter = 18432, .moe_inter = 2048, .experts = 256, .shared_experts = 1,
     .first_moe_layer = 3, .vocab = 129280, .mla = 1, .q_lora_rank = 1536,
     .kv_lora_rank = 512, .qk_nope_dim = 128, .qk_rope_dim = 64,
     .v_head_dim = 128, .published_params = 671.03e9},
    {.name = "Qwen3-30B-A3B", .family = "qwen3_moe",
     .aliases = "qwen3-30b,qwen30b,qwen3-30b-a3b",
     .hidden = 2048, .layers = 48, .heads = 32, .kv_heads = 4, .head_dim = 128,
     .moe_inter = 768, .experts = 128, .vocab = 151936, .qk_norm = 1,
     .published_params = 30.53e9},
    {.name = "Qwen3-32B", .family = "qwen3_dense", .aliases = "qwen32b,qwen3-32b",
     .hidden = 5120, .layers = 64, .heads = 64, .kv_heads = 8, .head_dim = 128,
     .inter = 25600, .vocab = 151936, .qk_norm = 1,
     .published_params = 32.76e9},
    {.name = "Llama-3.1-70B", .family = "llama_dense",
     .aliases = "llama70b,llama-70b,llama-3.1-70b,llama3.1-70b",
     .hidden = 8192, .layers = 80, .heads = 64, .kv_heads = 8, .head_dim = 128,
     .inter = 28672, .vocab = 128256, .published_params = 70.55e9},
    {.name = "Llama-3.1-8B", .family = "llama_dense",
     .aliases = "llama8b,llama-8b,llama-3.1-8b,llama3.1-8b",
     .hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 8, .head_dim = 128,
     .inter = 14336, .vocab = 128256, .published_params = 8.03e9},
};

enum { NMODELS = (int)(sizeof models / sizeof models[0]) };

int rt_model_count(void) { return NMODELS; }

const rt_model_info *rt_model_at(int i) {
  return i >= 0 && i < NMODELS ? &models[i] : NULL;
}

const rt_model_info *rt_model_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < NMODELS; i++) {
    if (strcasecmp(models[i].name, name) == 0) return &models[i];
    const char *a = models[i].aliases;
    while (a && *a) {
      const char *end = strchr(a, ',');
      size_t len = end ? (size_t)(end - a) : strlen(a);
      if (strlen(name) == len && strncasecmp(a, name, len) == 0)
        return &models[i];
      a = end ? end + 1 : NULL;
    }
  }
  return NULL;
}

const char *rt_model_names(void) {
  static char buf[256];
  if (!buf[0]) {
    size_t at = 0;
    for (int i = 0; i < NMODELS; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? ", " : "",
                             models[i].name);
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

typedef struct builder {
  rt_model *m;
  int cap;
} builder;

static rt_tensor *add(builder *b, rs_dtype dtype, int layer, rt_role role,
                      int ndim, int64_t d0, int64_t d1, int64_t d2,
                      const char *fmt, ...) RT_PRINTF(9, 10);

static rt_tensor *add(builder *b, rs_dtype dtype, int layer, rt_role role,
                      int ndim, int64_t d0, int64_t d1, int64_t d2,
                      const char *fmt, ...) {
  rt_model *m = b->m;
  if (m->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 256;
    m->t = rt_xrealloc(m->t, (size_t)b->cap * sizeof *m->t);
  }
  rt_tensor *t = &m->t[m->n++];
  memset(t, 0, sizeof *t);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->name, sizeof t->name, fmt, ap);
  va_end(ap);
  t->dtype = dtype;
  t->layer = layer;
  t->role = role;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->shape[2] = d2;
  t->fuse = RT_FUSE_NONE;
  t->fuse_group = -1;
  return t;
}

static void fuse(rt_tensor *t, rt_fuse kind, int group, int slot) {
  t->fuse = kind;
  t->fuse_group = group;
  t->fuse_slot = slot;
}

static int positive(const rt_model_info *i, rt_err *e) {
  const struct {
    const char *what;
    int v;
  } need[] = {{"hidden_size", i->hidden},
              {"num_hidden_layers", i->layers},
              {"num_attention_heads", i->heads},
              {"vocab_size", i->vocab}};
  for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
    if (need[k].v < 1)
      return rt_fail(e, "model '%s': %s must be >= 1, not %d",
                     i->name ? i->name : "?", need[k].what, need[k].v);
  if (!i->mla && (i->kv_heads < 1 || i->head_dim < 1))
    return rt_fail(e, "model '%s': num_key_value_heads and head_dim must be "
                      ">= 1", i->name ? i->name : "?");
  if (i->mla && (i->q_lora_rank < 1 || i->kv_lora_rank < 1 ||
                 i->qk_nope_dim < 1 || i->qk_rope_dim < 1 ||
                 i->v_head_dim < 1))
    return rt_fail(e, "model '%s': MLA ranks and head dims must be >= 1",
                   i->name ? i->name : "?");
  bool moe = rt_model_is_moe(i);
  bool has_dense = !moe || i->first_moe_layer > 0;
  if (has_dense && i->inter < 1)
    return rt_fail(e, "model '%s': intermediate_size must be >= 1 for dense "
                      "MLP layers", i->name ? i->name : "?");
  if (moe && i->first_moe_layer > i->layers)
    return rt_fail(e, "model '%s': first MoE layer %d beyond %d layers",
                   i->name ? i->name : "?", i->first_moe_layer, i->layers);
  return 0;
}

int rt_model_build(const rt_model_info *info, rt_model *out, rt_err *e) {
  memset(out, 0, sizeof *out);
  if (!info) return rt_fail(e, "no model given");
  if (positive(info, e)) return -1;
  out->info = info;
  builder b = {out, 0};
  const rs_dtype B = RS_DTYPE_BF16;
  const int64_t H = info->hidden;
  bool moe = rt_model_is_moe(info);
  int group = 0;

  add(&b, B, -1, RT_ROLE_EMBED, 2, info->vocab, H, 0,
      "model.embed_tokens.weight");
  for (int L = 0; L < info->layers; L++) {
#define P "model.layers.%d."
    add(&b, B, L, RT_ROLE_NORM, 1, H, 0, 0, P "input_layernorm.weight", L);
    if (info->mla) {
      int64_t qk = info->qk_nope_dim + info->qk_rope_dim;
      int qa = group++;
      rt_tensor *t = add(&b, B, L, RT_ROLE_REPL, 2, info->q_lora_rank, H, 0,
                         P "self_attn.q_a_proj.weight", L);
      fuse(t, RT_FUSE_ROWS, qa, 0); /* vLLM fused_qkv_a_proj */
      add(&b, B, L, RT_ROLE_NORM, 1, info->q_lora_rank, 0, 0,
          P "self_attn.q_a_layernorm.weight", L);
      add(&b, B, L, RT_ROLE_COL, 2, (int64_t)info->heads * qk,
          info->q_lora_rank, 0, P "self_attn.q_b_proj.weight", L);
      t = add(&b, B, L, RT_ROLE_REPL, 2,
              (int64_t)info->kv_lora_rank + info->qk_rope_dim, H, 0,
              P "self_attn.kv_a_proj_with_mqa.weight", L);
      fuse(t, RT_FUSE_ROWS, qa, 1);
      add(&b, B, L, RT_ROLE_NORM, 1, info->kv_lora_rank, 0, 0,
          P "self_attn.kv_a_layernorm.weight", L);
      add(&b, B, L, RT_ROLE_COL, 2,
          (int64_t)info->heads * (info->qk_nope_dim + info->v_head_dim),
          info->kv_lora_rank, 0, P "self_attn.kv_b_proj.weight", L);
      add(&b, B, L, RT_ROLE_ROW, 2, H, (int64_t)info->heads * info->v_head_dim,
          0, P "self_attn.o_proj.weight", L);
    } else {
      int64_t q = (int64_t)info->heads * info->head_dim;
      int64_t kv = (int64_t)info->kv_heads * info->head_dim;
      int qkv = group++;
      rt_tensor *t = add(&b, B, L, RT_ROLE_COL, 2, q, H, 0,
                         P "self_attn.q_proj.weight", L);
      fuse(t, RT_FUSE_ROWS, qkv, 0);
      t = add(&b, B, L, RT_ROLE_COL, 2, kv, H, 0, P "self_attn.k_proj.weight",
              L);
      t->kv = 1;
      fuse(t, RT_FUSE_ROWS, qkv, 1);
      t = add(&b, B, L, RT_ROLE_COL, 2, kv, H, 0, P "self_attn.v_proj.weight",
              L);
      t->kv = 1;
      fuse(t, RT_FUSE_ROWS, qkv, 2);
      add(&b, B, L, RT_ROLE_ROW, 2, H, q, 0, P "self_attn.o_proj.weight", L);
      if (info->qk_norm) {
        add(&b, B, L, RT_ROLE_NORM, 1, info->head_dim, 0, 0,
            P "self_attn.q_norm.weight", L);
        add(&b, B, L, RT_ROLE_NORM, 1, info->head_dim, 0, 0,
            P "self_attn.k_norm.weight", L);
      }
    }
    add(&b, B, L, RT_ROLE_NORM, 1, H, 0, 0, P "post_attention_layernorm.weight",
        L);
    if (!moe || L < info->first_moe_layer) {
      int gu = group++;
      rt_tensor *t = add(&b, B, L, RT_ROLE_COL, 2, info->inter, H, 0,
                         P "mlp.gate_proj.weight", L);
      fuse(t, RT_FUSE_ROWS, gu, 0);
      t = add(&b, B, L, RT_ROLE_COL, 2, info->inter, H, 0,
              P "mlp.up_proj.weight", L);
      fuse(t, RT_FUSE_ROWS, gu, 1);
      add(&b, B, L, RT_ROLE_ROW, 2, H, info->inter, 0,
          P "mlp.down_proj.weight", L);
    } else {
      const int64_t E = info->experts, I = info->moe_inter;
      add(&b, B, L, RT_ROLE_ROUTER, 2, E, H, 0, P "mlp.gate.weight", L);
      if (info->mla) /* DeepSeek's noaux_tc router bias, kept in f32 */
        add(&b, RS_DTYPE_F32, L, RT_ROLE_BIAS, 1, E, 0, 0,
            P "mlp.gate.e_score_correction_bias", L);
      int w13 = group++;
      rt_tensor *t = add(&b, B, L, RT_ROLE_EXPERT_COL, 3, E, I, H,
                         P "mlp.experts.gate_proj.weight", L);
      fuse(t, RT_FUSE_W13, w13, 0);
      t = add(&b, B, L, RT_ROLE_EXPERT_COL, 3, E, I, H,
              P "mlp.experts.up_proj.weight", L);
      fuse(t, RT_FUSE_W13, w13, 1);
      add(&b, B, L, RT_ROLE_EXPERT_ROW, 3, E, H, I,
          P "mlp.experts.down_proj.weight", L);
      if (info->shared_experts > 0) {
        int64_t SI = (int64_t)info->shared_experts * I;
        int gu = group++;
        t = add(&b, B, L, RT_ROLE_COL, 2, SI, H, 0,
                P "mlp.shared_experts.gate_proj.weight", L);
        fuse(t, RT_FUSE_ROWS, gu, 0);
        t = add(&b, B, L, RT_ROLE_COL, 2, SI, H, 0,
                P "mlp.shared_experts.up_proj.weight", L);
        fuse(t, RT_FUSE_ROWS, gu, 1);
        add(&b, B, L, RT_ROLE_ROW, 2, H, SI, 0,
            P "mlp.shared_experts.down_proj.weight", L);
      }
    }
#undef P
  }
  add(&b, B, -1, RT_ROLE_NORM, 1, H, 0, 0, "model.norm.weight");
  add(&b, B, -1, RT_ROLE_LM_HEAD, 2, info->vocab, H, 0, "lm_head.weight");
  out->nfuse = group;
  return 0;
}

void rt_model_free(rt_model *m) {
  if (!m) return;
  free(m->t);
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
    if (strstr(t->name, ".mlp.") && t->role != RT_ROLE_ROUTER &&
        t->role != RT_ROLE_BIAS)
      ffn += n;
  }
  if (params) *params = p;
  if (bytes) *bytes = by;
  if (ffn_share) *ffn_share = p > 0 ? ffn / p : 0;
}
