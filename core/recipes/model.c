/* SPDX-License-Identifier: Apache-2.0 */
/* Models: the built-in catalog (facts from each model's published
 * config.json, shared/reference/models.json), the checks a description
 * must pass, and every parameter tensor of a model with its Hugging Face
 * name, shape, dtype, role, and the engine buffer it lands in (experts
 * stacked per layer into [E, ...] tensors as trainers hold them). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recipes/recipes.h"

static const rsi_model_info catalog[] = {
    {.name = "Qwen3-235B-A22B",
     .family = "qwen3_moe",
     .aliases = "qwen3-235b,qwen235b,qwen3-235b-a22b",
     .hidden = 4096,
     .layers = 94,
     .heads = 64,
     .kv_heads = 4,
     .head_dim = 128,
     .moe_inter = 1536,
     .experts = 128,
     .vocab = 151936,
     .qk_norm = 1,
     .dtype = RS_DTYPE_BF16,
     .published_params = 235.09e9},
    {.name = "DeepSeek-V3",
     .family = "deepseek_v3",
     .aliases = "dsv3,deepseek-v3,deepseek-v3-671b",
     .hidden = 7168,
     .layers = 61,
     .heads = 128,
     .kv_heads = 128,
     .inter = 18432,
     .moe_inter = 2048,
     .experts = 256,
     .shared_experts = 1,
     .first_moe_layer = 3,
     .vocab = 129280,
     .mla = 1,
     .q_lora_rank = 1536,
     .kv_lora_rank = 512,
     .qk_nope_dim = 128,
     .qk_rope_dim = 64,
     .v_head_dim = 128,
     .dtype = RS_DTYPE_BF16,
     .published_params = 671.03e9},
    {.name = "Qwen3-30B-A3B",
     .family = "qwen3_moe",
     .aliases = "qwen3-30b,qwen30b,qwen3-30b-a3b",
     .hidden = 2048,
     .layers = 48,
     .heads = 32,
     .kv_heads = 4,
     .head_dim = 128,
     .moe_inter = 768,
     .experts = 128,
     .vocab = 151936,
     .qk_norm = 1,
     .dtype = RS_DTYPE_BF16,
     .published_params = 30.53e9},
    {.name = "Qwen3-32B",
     .family = "qwen3_dense",
     .aliases = "qwen32b,qwen3-32b",
     .hidden = 5120,
     .layers = 64,
     .heads = 64,
     .kv_heads = 8,
     .head_dim = 128,
     .inter = 25600,
     .vocab = 151936,
     .qk_norm = 1,
     .dtype = RS_DTYPE_BF16,
     .published_params = 32.76e9},
    {.name = "Llama-3.1-70B",
     .family = "llama_dense",
     .aliases = "llama70b,llama-70b,llama-3.1-70b,llama3.1-70b",
     .hidden = 8192,
     .layers = 80,
     .heads = 64,
     .kv_heads = 8,
     .head_dim = 128,
     .inter = 28672,
     .vocab = 128256,
     .dtype = RS_DTYPE_BF16,
     .published_params = 70.55e9},
    {.name = "Llama-3.1-8B",
     .family = "llama_dense",
     .aliases = "llama8b,llama-8b,llama-3.1-8b,llama3.1-8b",
     .hidden = 4096,
     .layers = 32,
     .heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .inter = 14336,
     .vocab = 128256,
     .dtype = RS_DTYPE_BF16,
     .published_params = 8.03e9},
};

enum { NCATALOG = (int)(sizeof catalog / sizeof catalog[0]) };

int rsi_catalog_count(void) { return NCATALOG; }

const rsi_model_info *rsi_catalog_at(int i) {
  return i >= 0 && i < NCATALOG ? &catalog[i] : NULL;
}

const rsi_model_info *rsi_catalog_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < NCATALOG; i++) {
    if (strcasecmp(catalog[i].name, name) == 0) return &catalog[i];
    const char *a = catalog[i].aliases;
    while (a && *a) {
      const char *end = strchr(a, ',');
      size_t len = end ? (size_t)(end - a) : strlen(a);
      if (strlen(name) == len && strncasecmp(a, name, len) == 0)
        return &catalog[i];
      a = end ? end + 1 : NULL;
    }
  }
  return NULL;
}

bool rsi_model_is_moe(const rsi_model_info *info) {
  return info->experts > 0 && info->moe_inter > 0;
}

typedef struct builder {
  rs_model *m;
  int cap;
  rsi_err *err;
} builder;

#if defined(__GNUC__)
#define RSI_FMT(a, b) __attribute__((format(printf, a, b)))
#else
#define RSI_FMT(a, b)
#endif

static rsi_rtensor *add(builder *b, rs_dtype dtype, int layer,
                        rs_tensor_role role, int ndim, int64_t d0, int64_t d1,
                        int64_t d2, const char *fmt, ...) RSI_FMT(9, 10);

static rsi_rtensor *add(builder *b, rs_dtype dtype, int layer,
                        rs_tensor_role role, int ndim, int64_t d0, int64_t d1,
                        int64_t d2, const char *fmt, ...) {
  rs_model *m = b->m;
  if (!m->t) return NULL; /* an earlier allocation failed */
  if (m->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 256;
    rsi_rtensor *t = realloc(m->t, (size_t)cap * sizeof *t);
    if (!t) {
      free(m->t);
      m->t = NULL;
      return NULL;
    }
    m->t = t;
    b->cap = cap;
  }
  rsi_rtensor *t = &m->t[m->n++];
  memset(t, 0, sizeof *t);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->name, sizeof t->name, fmt, ap);
  va_end(ap);
  snprintf(t->engine, sizeof t->engine, "%s", t->name);
  t->dtype = dtype;
  t->layer = layer;
  t->role = role;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->shape[2] = d2;
  t->fuse = RS_FUSE_NONE;
  t->fuse_group = -1;
  return t;
}

/* t joins fused engine buffer `group` at `slot`; the buffer's engine name
 * is the layer's prefix and `what` ("self_attn.qkv_proj.weight"). */
static void fuse(rsi_rtensor *t, rs_fuse kind, int group, int slot,
                 const char *what) {
  if (!t) return;
  t->fuse = kind;
  t->fuse_group = group;
  t->fuse_slot = slot;
  snprintf(t->engine, sizeof t->engine, "model.layers.%d.%s", t->layer, what);
}

static rs_status check(const rsi_model_info *i, rsi_err *err) {
  const char *n = i->name[0] ? i->name : "?";
  const struct {
    const char *what;
    int v;
  } need[] = {{"hidden_size", i->hidden},
              {"num_hidden_layers", i->layers},
              {"num_attention_heads", i->heads},
              {"vocab_size", i->vocab}};
  for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
    if (need[k].v < 1)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "model '%s': %s must be >= 1, not %d", n, need[k].what,
                      need[k].v);
  if (!i->mla && (i->kv_heads < 1 || i->head_dim < 1))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "model '%s': num_key_value_heads and head_dim must be "
                    ">= 1",
                    n);
  if (i->mla && (i->q_lora_rank < 1 || i->kv_lora_rank < 1 ||
                 i->qk_nope_dim < 1 || i->qk_rope_dim < 1 || i->v_head_dim < 1))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "model '%s': MLA ranks and head dims must be >= 1", n);
  bool moe = rsi_model_is_moe(i);
  bool has_dense = !moe || i->first_moe_layer > 0;
  if (has_dense && i->inter < 1)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "model '%s': intermediate_size must be >= 1 for dense "
                    "MLP layers",
                    n);
  if (moe && i->first_moe_layer > i->layers)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "model '%s': first MoE layer %d beyond %d layers", n,
                    i->first_moe_layer, i->layers);
  return RS_OK;
}

rs_status rsi_model_build(const rsi_model_info *info, rs_model **out,
                          rsi_err *err) {
  *out = NULL;
  RSI_TRY(check(info, err));
  rs_model *m = calloc(1, sizeof *m);
  if (!m) return RSI_NOMEM(err);
  m->info = *info;
  m->t = malloc(sizeof *m->t); /* grown by add */
  builder b = {m, 1, err};
  const rs_dtype B = info->dtype ? info->dtype : RS_DTYPE_BF16;
  const int64_t H = info->hidden;
  bool moe = rsi_model_is_moe(info);
  int group = 0;
  rsi_rtensor *t;

  add(&b, B, -1, RS_ROLE_EMBED, 2, info->vocab, H, 0,
      "model.embed_tokens.weight");
  for (int L = 0; L < info->layers && m->t; L++) {
#define P "model.layers.%d."
    add(&b, B, L, RS_ROLE_NORM, 1, H, 0, 0, P "input_layernorm.weight", L);
    if (info->mla) {
      int64_t qk = info->qk_nope_dim + info->qk_rope_dim;
      int qa = group++;
      t = add(&b, B, L, RS_ROLE_REPL, 2, info->q_lora_rank, H, 0,
              P "self_attn.q_a_proj.weight", L);
      fuse(t, RS_FUSE_ROWS, qa, 0, "self_attn.fused_qkv_a_proj.weight");
      add(&b, B, L, RS_ROLE_NORM, 1, info->q_lora_rank, 0, 0,
          P "self_attn.q_a_layernorm.weight", L);
      add(&b, B, L, RS_ROLE_COL, 2, (int64_t)info->heads * qk,
          info->q_lora_rank, 0, P "self_attn.q_b_proj.weight", L);
      t = add(&b, B, L, RS_ROLE_REPL, 2,
              (int64_t)info->kv_lora_rank + info->qk_rope_dim, H, 0,
              P "self_attn.kv_a_proj_with_mqa.weight", L);
      fuse(t, RS_FUSE_ROWS, qa, 1, "self_attn.fused_qkv_a_proj.weight");
      add(&b, B, L, RS_ROLE_NORM, 1, info->kv_lora_rank, 0, 0,
          P "self_attn.kv_a_layernorm.weight", L);
      add(&b, B, L, RS_ROLE_COL, 2,
          (int64_t)info->heads * (info->qk_nope_dim + info->v_head_dim),
          info->kv_lora_rank, 0, P "self_attn.kv_b_proj.weight", L);
      add(&b, B, L, RS_ROLE_ROW, 2, H, (int64_t)info->heads * info->v_head_dim,
          0, P "self_attn.o_proj.weight", L);
    } else {
      int64_t q = (int64_t)info->heads * info->head_dim;
      int64_t kv = (int64_t)info->kv_heads * info->head_dim;
      int qkv = group++;
      t = add(&b, B, L, RS_ROLE_COL, 2, q, H, 0, P "self_attn.q_proj.weight",
              L);
      fuse(t, RS_FUSE_ROWS, qkv, 0, "self_attn.qkv_proj.weight");
      t = add(&b, B, L, RS_ROLE_COL, 2, kv, H, 0, P "self_attn.k_proj.weight",
              L);
      if (t) t->kv = 1;
      fuse(t, RS_FUSE_ROWS, qkv, 1, "self_attn.qkv_proj.weight");
      t = add(&b, B, L, RS_ROLE_COL, 2, kv, H, 0, P "self_attn.v_proj.weight",
              L);
      if (t) t->kv = 1;
      fuse(t, RS_FUSE_ROWS, qkv, 2, "self_attn.qkv_proj.weight");
      add(&b, B, L, RS_ROLE_ROW, 2, H, q, 0, P "self_attn.o_proj.weight", L);
      if (info->qk_norm) {
        add(&b, B, L, RS_ROLE_NORM, 1, info->head_dim, 0, 0,
            P "self_attn.q_norm.weight", L);
        add(&b, B, L, RS_ROLE_NORM, 1, info->head_dim, 0, 0,
            P "self_attn.k_norm.weight", L);
      }
    }
    add(&b, B, L, RS_ROLE_NORM, 1, H, 0, 0, P "post_attention_layernorm.weight",
        L);
    if (!moe || L < info->first_moe_layer) {
      int gu = group++;
      t = add(&b, B, L, RS_ROLE_COL, 2, info->inter, H, 0,
              P "mlp.gate_proj.weight", L);
      fuse(t, RS_FUSE_ROWS, gu, 0, "mlp.gate_up_proj.weight");
      t = add(&b, B, L, RS_ROLE_COL, 2, info->inter, H, 0,
              P "mlp.up_proj.weight", L);
      fuse(t, RS_FUSE_ROWS, gu, 1, "mlp.gate_up_proj.weight");
      add(&b, B, L, RS_ROLE_ROW, 2, H, info->inter, 0, P "mlp.down_proj.weight",
          L);
    } else {
      const int64_t E = info->experts, I = info->moe_inter;
      add(&b, B, L, RS_ROLE_ROUTER, 2, E, H, 0, P "mlp.gate.weight", L);
      if (info->mla) /* DeepSeek's noaux_tc router bias, kept in f32 */
        add(&b, RS_DTYPE_F32, L, RS_ROLE_BIAS, 1, E, 0, 0,
            P "mlp.gate.e_score_correction_bias", L);
      int w13 = group++;
      t = add(&b, B, L, RS_ROLE_EXPERT_COL, 3, E, I, H,
              P "mlp.experts.gate_proj.weight", L);
      fuse(t, RS_FUSE_W13, w13, 0, "mlp.experts.w13_weight");
      t = add(&b, B, L, RS_ROLE_EXPERT_COL, 3, E, I, H,
              P "mlp.experts.up_proj.weight", L);
      fuse(t, RS_FUSE_W13, w13, 1, "mlp.experts.w13_weight");
      t = add(&b, B, L, RS_ROLE_EXPERT_ROW, 3, E, H, I,
              P "mlp.experts.down_proj.weight", L);
      if (t)
        snprintf(t->engine, sizeof t->engine, P "mlp.experts.w2_weight", L);
      if (info->shared_experts > 0) {
        int64_t SI = (int64_t)info->shared_experts * I;
        int gu = group++;
        t = add(&b, B, L, RS_ROLE_COL, 2, SI, H, 0,
                P "mlp.shared_experts.gate_proj.weight", L);
        fuse(t, RS_FUSE_ROWS, gu, 0, "mlp.shared_experts.gate_up_proj.weight");
        t = add(&b, B, L, RS_ROLE_COL, 2, SI, H, 0,
                P "mlp.shared_experts.up_proj.weight", L);
        fuse(t, RS_FUSE_ROWS, gu, 1, "mlp.shared_experts.gate_up_proj.weight");
        add(&b, B, L, RS_ROLE_ROW, 2, H, SI, 0,
            P "mlp.shared_experts.down_proj.weight", L);
      }
    }
#undef P
  }
  add(&b, B, -1, RS_ROLE_NORM, 1, H, 0, 0, "model.norm.weight");
  if (!info->tied)
    add(&b, B, -1, RS_ROLE_LM_HEAD, 2, info->vocab, H, 0, "lm_head.weight");
  if (!m->t) {
    free(m);
    return RSI_NOMEM(err);
  }
  /* Every size a recipe computes from here (shards, byte offsets, buffer
   * sizes, the model's total in f32) must fit int64. */
  int64_t total = 0;
  for (int i = 0; i < m->n; i++) {
    const rsi_rtensor *x = &m->t[i];
    int64_t bytes = 8; /* room for f32 scales and conversions */
    for (int d = 0; d < x->ndim; d++)
      if (__builtin_mul_overflow(bytes, x->shape[d], &bytes)) bytes = -1;
    if (bytes < 0 || __builtin_add_overflow(total, bytes, &total)) {
      rs_status st = RSI_FAIL(err, RS_ERR_OVERFLOW,
                              "model '%s': tensor %s is too large (its bytes, "
                              "or the model's, overflow int64)",
                              info->name, x->name);
      rsi_model_free(m);
      return st;
    }
  }
  m->nfuse = group;
  *out = m;
  return RS_OK;
}

rs_status rsi_model_clone(const rs_model *m, rs_model **out, rsi_err *err) {
  *out = NULL;
  rs_model *c = malloc(sizeof *c);
  if (!c) return RSI_NOMEM(err);
  *c = *m;
  c->t = malloc(sizeof *c->t * (size_t)(m->n ? m->n : 1));
  if (!c->t) {
    free(c);
    return RSI_NOMEM(err);
  }
  memcpy(c->t, m->t, sizeof *c->t * (size_t)m->n);
  *out = c;
  return RS_OK;
}

void rsi_model_free(rs_model *m) {
  if (!m) return;
  free(m->t);
  free(m);
}
