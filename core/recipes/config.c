/* SPDX-License-Identifier: Apache-2.0 */
/* A model from a Hugging Face config.json: the keys each known model_type
 * uses, read strictly (type and range, named in every message); keys no
 * recipe uses are skipped; settings a recipe cannot place are refused by
 * name. */
#include <stdio.h>
#include <string.h>

#include "recipes/json.h"
#include "recipes/recipes.h"

typedef struct family {
  const char *model_type, *family, *architecture;
  int qk_norm, mla, moe;
} family;

static const family families[] = {
    {"llama", "llama_dense", "LlamaForCausalLM", 0, 0, 0},
    {"qwen3", "qwen3_dense", "Qwen3ForCausalLM", 1, 0, 0},
    {"qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM", 1, 0, 1},
    {"deepseek_v3", "deepseek_v3", "DeepseekV3ForCausalLM", 0, 1, 1},
};

typedef struct reader {
  const rsi_json_doc *d;
  rsi_err *err;
} reader;

/* Member key of the root: its node, -1 when absent. */
static rs_status find(reader *r, const char *key, int32_t *out) {
  *out = rsi_json_member(r->d, 0, key);
  if (*out == -2)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"%s\" is given more than once", key);
  return RS_OK;
}

/* An integer key in [lo, hi]; *out keeps its default when the key is
 * absent (or null) and not required. */
static rs_status get_int(reader *r, const char *key, int required, int lo,
                         int hi, int *out) {
  int32_t at;
  RSI_TRY(find(r, key, &at));
  if (at < 0 || r->d->n[at].kind == RSI_JSON_NULL) {
    if (required)
      return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                      "config: \"%s\" is missing (a whole number is needed)",
                      key);
    return RS_OK;
  }
  const rsi_json_node *n = &r->d->n[at];
  /* In range first: then the cast is defined, and the library needs no
   * libm for floor(). */
  if (n->kind == RSI_JSON_NUMBER && (n->num < lo || n->num > hi))
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"%s\" is %.17g, outside [%d, %d]", key, n->num,
                    lo, hi);
  if (n->kind != RSI_JSON_NUMBER || n->num != (double)(int)n->num)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"%s\" must be a whole number, not %s", key,
                    n->kind == RSI_JSON_NUMBER ? "a fraction"
                                               : rsi_json_kind_name(n->kind));
  *out = (int)n->num;
  return RS_OK;
}

static rs_status get_bool(reader *r, const char *key, int *out) {
  int32_t at;
  RSI_TRY(find(r, key, &at));
  if (at < 0 || r->d->n[at].kind == RSI_JSON_NULL) return RS_OK;
  if (r->d->n[at].kind != RSI_JSON_BOOL)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"%s\" must be true or false, not %s", key,
                    rsi_json_kind_name(r->d->n[at].kind));
  *out = r->d->n[at].boolean;
  return RS_OK;
}

/* A string key; *out NULL when absent or null. */
static rs_status get_str(reader *r, const char *key, const char **out) {
  int32_t at;
  *out = NULL;
  RSI_TRY(find(r, key, &at));
  if (at < 0 || r->d->n[at].kind == RSI_JSON_NULL) return RS_OK;
  if (r->d->n[at].kind != RSI_JSON_STRING)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"%s\" must be a string, not %s", key,
                    rsi_json_kind_name(r->d->n[at].kind));
  *out = r->d->n[at].str;
  return RS_OK;
}

/* A setting the recipe cannot place unless it has its plain value. */
static rs_status refuse_unless(reader *r, const char *key, int value, int plain,
                               const char *why) {
  if (value != plain)
    return RSI_FAIL(r->err, RS_ERR_UNSUPPORTED,
                    "config: \"%s\" = %d: %s (the recipe places only %d)", key,
                    value, why, plain);
  return RS_OK;
}

static rs_status read_dtype(reader *r, rsi_model_info *info) {
  const char *s;
  RSI_TRY(get_str(r, "torch_dtype", &s));
  if (!s) RSI_TRY(get_str(r, "dtype", &s));
  info->dtype = RS_DTYPE_BF16;
  if (!s || !strcmp(s, "bfloat16")) return RS_OK;
  if (!strcmp(s, "float16")) {
    info->dtype = RS_DTYPE_F16;
  } else if (!strcmp(s, "float32")) {
    info->dtype = RS_DTYPE_F32;
  } else {
    return RSI_FAIL(r->err, RS_ERR_UNSUPPORTED,
                    "config: \"torch_dtype\" \"%s\" is not bfloat16, float16 "
                    "or float32",
                    s);
  }
  return RS_OK;
}

static rs_status read_architecture(reader *r, const family *f) {
  int32_t at;
  RSI_TRY(find(r, "architectures", &at));
  if (at < 0 || r->d->n[at].kind == RSI_JSON_NULL) return RS_OK;
  const rsi_json_node *n = &r->d->n[at];
  if (n->kind != RSI_JSON_ARRAY)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"architectures\" must be an array of strings, "
                    "not %s",
                    rsi_json_kind_name(n->kind));
  for (int32_t c = n->child; c >= 0; c = r->d->n[c].next) {
    const rsi_json_node *a = &r->d->n[c];
    if (a->kind != RSI_JSON_STRING)
      return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                      "config: \"architectures\" holds %s, not a string",
                      rsi_json_kind_name(a->kind));
    if (strcmp(a->str, f->architecture) != 0)
      return RSI_FAIL(r->err, RS_ERR_UNSUPPORTED,
                      "config: architecture \"%s\" is not one a recipe knows "
                      "for model_type \"%s\" (%s)",
                      a->str, f->model_type, f->architecture);
  }
  return RS_OK;
}

static rs_status read_moe(reader *r, const family *f, rsi_model_info *i) {
  const int BIG = 1 << 24;
  RSI_TRY(get_int(r, "moe_intermediate_size", 1, 1, BIG, &i->moe_inter));
  if (f->mla) {
    int freq = 1;
    RSI_TRY(get_int(r, "n_routed_experts", 1, 1, BIG, &i->experts));
    RSI_TRY(get_int(r, "n_shared_experts", 0, 0, 64, &i->shared_experts));
    RSI_TRY(
        get_int(r, "first_k_dense_replace", 0, 0, BIG, &i->first_moe_layer));
    RSI_TRY(get_int(r, "moe_layer_freq", 0, 1, BIG, &freq));
    RSI_TRY(refuse_unless(r, "moe_layer_freq", freq, 1,
                          "MoE layers only every few layers"));
    if (i->first_moe_layer > 0)
      RSI_TRY(get_int(r, "intermediate_size", 1, 1, BIG, &i->inter));
    return RS_OK;
  }
  int step = 1, shared = 0;
  RSI_TRY(get_int(r, "num_experts", 1, 1, BIG, &i->experts));
  RSI_TRY(get_int(r, "decoder_sparse_step", 0, 1, BIG, &step));
  RSI_TRY(refuse_unless(r, "decoder_sparse_step", step, 1,
                        "MoE layers only every few layers"));
  RSI_TRY(get_int(r, "shared_expert_intermediate_size", 0, 0, BIG, &shared));
  RSI_TRY(refuse_unless(r, "shared_expert_intermediate_size", shared, 0,
                        "a shared expert"));
  int32_t at;
  RSI_TRY(find(r, "mlp_only_layers", &at));
  if (at >= 0 && r->d->n[at].kind != RSI_JSON_NULL) {
    if (r->d->n[at].kind != RSI_JSON_ARRAY)
      return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                      "config: \"mlp_only_layers\" must be an array, not %s",
                      rsi_json_kind_name(r->d->n[at].kind));
    RSI_TRY(refuse_unless(r, "mlp_only_layers (entries)", r->d->n[at].count, 0,
                          "dense layers between MoE layers"));
  }
  return RS_OK;
}

static rs_status read_model(reader *r, rsi_model_info *i) {
  const int BIG = 1 << 24;
  if (r->d->n[0].kind != RSI_JSON_OBJECT)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: the document is %s, not an object",
                    rsi_json_kind_name(r->d->n[0].kind));
  const char *type, *path;
  RSI_TRY(get_str(r, "model_type", &type));
  if (!type)
    return RSI_FAIL(r->err, RS_ERR_INVALID_ARGUMENT,
                    "config: \"model_type\" is missing");
  const family *f = NULL;
  for (size_t k = 0; k < sizeof families / sizeof families[0]; k++)
    if (!strcmp(families[k].model_type, type)) f = &families[k];
  if (!f)
    return RSI_FAIL(r->err, RS_ERR_UNSUPPORTED,
                    "config: model_type \"%s\" is not one a recipe knows "
                    "(llama, qwen3, qwen3_moe, deepseek_v3)",
                    type);
  RSI_TRY(read_architecture(r, f));
  RSI_TRY(get_str(r, "_name_or_path", &path));
  snprintf(i->name, sizeof i->name, "%s", path && *path ? path : type);
  i->family = f->family;
  i->aliases = "";
  i->qk_norm = f->qk_norm;
  i->mla = f->mla;
  RSI_TRY(read_dtype(r, i));
  RSI_TRY(get_int(r, "hidden_size", 1, 1, BIG, &i->hidden));
  RSI_TRY(get_int(r, "num_hidden_layers", 1, 1, 1 << 16, &i->layers));
  RSI_TRY(get_int(r, "num_attention_heads", 1, 1, 1 << 16, &i->heads));
  RSI_TRY(get_int(r, "vocab_size", 1, 1, 1 << 30, &i->vocab));
  RSI_TRY(get_bool(r, "tie_word_embeddings", &i->tied));
  i->kv_heads = i->heads;
  RSI_TRY(get_int(r, "num_key_value_heads", 0, 1, 1 << 16, &i->kv_heads));
  if (f->mla) {
    RSI_TRY(get_int(r, "q_lora_rank", 1, 1, BIG, &i->q_lora_rank));
    RSI_TRY(get_int(r, "kv_lora_rank", 1, 1, BIG, &i->kv_lora_rank));
    RSI_TRY(get_int(r, "qk_nope_head_dim", 1, 1, BIG, &i->qk_nope_dim));
    RSI_TRY(get_int(r, "qk_rope_head_dim", 1, 1, BIG, &i->qk_rope_dim));
    RSI_TRY(get_int(r, "v_head_dim", 1, 1, BIG, &i->v_head_dim));
  } else {
    if (i->hidden % i->heads == 0) i->head_dim = i->hidden / i->heads;
    RSI_TRY(get_int(r, "head_dim", i->head_dim == 0, 1, BIG, &i->head_dim));
  }
  if (f->moe) {
    RSI_TRY(read_moe(r, f, i));
  } else {
    RSI_TRY(get_int(r, "intermediate_size", 1, 1, BIG, &i->inter));
  }
  int bias = 0;
  RSI_TRY(get_bool(r, "attention_bias", &bias));
  RSI_TRY(refuse_unless(r, "attention_bias", bias, 0,
                        "biases on the attention projections"));
  bias = 0;
  RSI_TRY(get_bool(r, "mlp_bias", &bias));
  return refuse_unless(r, "mlp_bias", bias, 0, "biases on the MLP");
}

rs_status rsi_model_from_config(const char *json, size_t len, rs_model **out,
                                rsi_err *err) {
  *out = NULL;
  rsi_json_doc doc;
  RSI_TRY(rsi_json_parse(json, len, &doc, err));
  rsi_model_info info;
  memset(&info, 0, sizeof info);
  reader r = {&doc, err};
  rs_status st = read_model(&r, &info);
  rsi_json_free(&doc);
  if (st != RS_OK) return st;
  return rsi_model_build(&info, out, err);
}
