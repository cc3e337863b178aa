/* SPDX-License-Identifier: Apache-2.0 */
/* The model catalog: totals against the published counts, names and shapes
 * of the tensors, stacked experts. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "catalog.h"
#include "tiny_models.h"

static const rt_tensor *find(const rt_model *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->t[i].name, name)) return &m->t[i];
  return NULL;
}

static void expect_shape(const rt_model *m, const char *name, rs_dtype dtype,
                         int ndim, int64_t d0, int64_t d1, int64_t d2) {
  const rt_tensor *t = find(m, name);
  cr_assert_not_null(t, "%s: no tensor %s", m->info->name, name);
  cr_expect_eq(t->dtype, dtype, "%s dtype", name);
  cr_assert_eq(t->ndim, ndim, "%s ndim %d", name, t->ndim);
  int64_t want[3] = {d0, d1, d2};
  for (int d = 0; d < ndim; d++)
    cr_expect_eq(t->shape[d], want[d], "%s dim %d: %lld, want %lld", name, d,
                 (long long)t->shape[d], (long long)want[d]);
}

Test(catalog, totals_within_one_percent_of_published) {
  const char *five[] = {"Qwen3-235B-A22B", "DeepSeek-V3", "Qwen3-30B-A3B",
                        "Qwen3-32B", "Llama-3.1-70B"};
  for (int i = 0; i < 5; i++) {
    const rt_model_info *info = rt_model_find(five[i]);
    cr_assert_not_null(info, "%s not in the catalog", five[i]);
    rt_model m;
    rt_err e;
    cr_assert_eq(rt_model_build(info, &m, &e), 0, "%s", e.msg);
    double p, b;
    rt_model_totals(&m, &p, &b, NULL);
    double dev = fabs(p - info->published_params) / info->published_params;
    cr_expect(dev < 0.01, "%s: %.4fe9 params, published %.4fe9", five[i],
              p / 1e9, info->published_params / 1e9);
    cr_expect(fabs(b - 2 * p) / b < 1e-3, "%s: bf16 bytes", five[i]);
    rt_model_free(&m);
  }
  cr_expect_eq(rt_model_count(), 6); /* the five and Llama-3.1-8B */
}

Test(catalog, deepseek_v3_tensors) {
  rt_model m;
  rt_err e;
  cr_assert_eq(rt_model_build(rt_model_find("DeepSeek-V3"), &m, &e), 0, "%s",
               e.msg);
  const rs_dtype B = RS_DTYPE_BF16;
  expect_shape(&m, "model.embed_tokens.weight", B, 2, 129280, 7168, 0);
  expect_shape(&m, "lm_head.weight", B, 2, 129280, 7168, 0);
  expect_shape(&m, "model.norm.weight", B, 1, 7168, 0, 0);
  expect_shape(&m, "model.layers.0.self_attn.q_a_proj.weight", B, 2, 1536, 7168, 0);
  expect_shape(&m, "model.layers.0.self_attn.q_a_layernorm.weight", B, 1, 1536, 0, 0);
  expect_shape(&m, "model.layers.0.self_attn.q_b_proj.weight", B, 2, 24576, 1536, 0);
  expect_shape(&m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", B, 2, 576, 7168, 0);
  expect_shape(&m, "model.layers.0.self_attn.kv_a_layernorm.weight", B, 1, 512, 0, 0);
  expect_shape(&m, "model.layers.0.self_attn.kv_b_proj.weight", B, 2, 32768, 512, 0);
  expect_shape(&m, "model.layers.0.self_attn.o_proj.weight", B, 2, 7168, 16384, 0);
  /* layers 0-2 dense, 3-60 MoE */
  expect_shape(&m, "model.layers.2.mlp.gate_proj.weight", B, 2, 18432, 7168, 0);
  expect_shape(&m, "model.layers.2.mlp.down_proj.weight", B, 2, 7168, 18432, 0);
  cr_expect_null(find(&m, "model.layers.3.mlp.gate_proj.weight"));
  cr_expect_null(find(&m, "model.layers.2.mlp.experts.gate_proj.weight"));
  expect_shape(&m, "model.layers.3.mlp.gate.weight", B, 2, 256, 7168, 0);
  expect_shape(&m, "model.layers.3.mlp.gate.e_score_correction_bias",
               RS_DTYPE_F32, 1, 256, 0, 0);
  expect_shape(&m, "model.layers.60.mlp.experts.gate_proj.weight", B, 3, 256, 2048, 7168);
  expect_shape(&m, "model.layers.60.mlp.experts.up_proj.weight", B, 3, 256, 2048, 7168);
  expect_shape(&m, "model.layers.60.mlp.experts.down_proj.weight", B, 3, 256, 7168, 2048);
  expect_shape(&m, "model.layers.60.mlp.shared_experts.gate_proj.weight", B, 2, 2048, 7168, 0);
  expect_shape(&m, "model.layers.60.mlp.shared_experts.down_proj.weight", B, 2, 7168, 2048, 0);
  cr_expect_null(find(&m, "model.layers.61.input_layernorm.weight"),
                 "the MTP layer is not synced");
  cr_expect_eq(m.n, 1025);
  double p, b, ffn;
  rt_model_totals(&m, &p, &b, &ffn);
  cr_expect(fabs(ffn - 0.980) < 0.005, "FFN share %.3f, reference 0.980", ffn);
  rt_model_free(&m);
}

Test(catalog, qwen3_and_llama_tensors) {
  rt_model m;
  rt_err e;
  const rs_dtype B = RS_DTYPE_BF16;
  cr_assert_eq(rt_model_build(rt_model_find("qwen3-235b"), &m, &e), 0);
  cr_expect_str_eq(m.info->name, "Qwen3-235B-A22B");
  expect_shape(&m, "model.layers.93.self_attn.q_proj.weight", B, 2, 8192, 4096, 0);
  expect_shape(&m, "model.layers.93.self_attn.k_proj.weight", B, 2, 512, 4096, 0);
  expect_shape(&m, "model.layers.93.self_attn.o_proj.weight", B, 2, 4096, 8192, 0);
  expect_shape(&m, "model.layers.93.self_attn.q_norm.weight", B, 1, 128, 0, 0);
  expect_shape(&m, "model.layers.93.mlp.gate.weight", B, 2, 128, 4096, 0);
  expect_shape(&m, "model.layers.0.mlp.experts.down_proj.weight", B, 3, 128, 4096, 1536);
  cr_expect_null(find(&m, "model.layers.0.mlp.shared_experts.gate_proj.weight"));
  cr_expect_null(find(&m, "model.layers.0.mlp.gate.e_score_correction_bias"));
  rt_model_free(&m);

  cr_assert_eq(rt_model_build(rt_model_find("Qwen3-30B-A3B"), &m, &e), 0);
  expect_shape(&m, "model.layers.47.mlp.experts.gate_proj.weight", B, 3, 128, 768, 2048);
  expect_shape(&m, "model.layers.47.self_attn.o_proj.weight", B, 2, 2048, 4096, 0);
  rt_model_free(&m);

  cr_assert_eq(rt_model_build(rt_model_find("Qwen3-32B"), &m, &e), 0);
  expect_shape(&m, "model.layers.63.mlp.up_proj.weight", B, 2, 25600, 5120, 0);
  expect_shape(&m, "model.layers.63.self_attn.v_proj.weight", B, 2, 1024, 5120, 0);
  expect_shape(&m, "model.layers.63.self_attn.k_norm.weight", B, 1, 128, 0, 0);
  expect_shape(&m, "model.embed_tokens.weight", B, 2, 151936, 5120, 0);
  rt_model_free(&m);

  cr_assert_eq(rt_model_build(rt_model_find("llama70b"), &m, &e), 0);
  expect_shape(&m, "model.layers.79.mlp.down_proj.weight", B, 2, 8192, 28672, 0);
  expect_shape(&m, "model.layers.79.self_attn.k_proj.weight", B, 2, 1024, 8192, 0);
  cr_expect_null(find(&m, "model.layers.0.self_attn.q_norm.weight"),
                 "Llama has no q_norm");
  expect_shape(&m, "lm_head.weight", B, 2, 128256, 8192, 0);
  cr_expect_eq(m.n, 3 + 80 * 9);
  rt_model_free(&m);
}

Test(catalog, roles_and_fusion) {
  rt_model m;
  rt_err e;
  cr_assert_eq(rt_model_build(&tiny_moe, &m, &e), 0, "%s", e.msg);
  const rt_tensor *q = find(&m, "model.layers.1.self_attn.q_proj.weight");
  const rt_tensor *k = find(&m, "model.layers.1.self_attn.k_proj.weight");
  const rt_tensor *v = find(&m, "model.layers.1.self_attn.v_proj.weight");
  const rt_tensor *o = find(&m, "model.layers.1.self_attn.o_proj.weight");
  cr_assert(q && k && v && o);
  cr_expect_eq(q->role, RS_ROLE_COL);
  cr_expect_eq(o->role, RS_ROLE_ROW);
  cr_expect(k->kv && v->kv && !q->kv);
  cr_expect_eq(q->fuse_group, k->fuse_group);
  cr_expect_eq(q->fuse_group, v->fuse_group);
  cr_expect_eq(q->fuse_slot, 0);
  cr_expect_eq(k->fuse_slot, 1);
  cr_expect_eq(v->fuse_slot, 2);
  cr_expect_eq(o->fuse_group, -1);
  const rt_tensor *g = find(&m, "model.layers.1.mlp.experts.gate_proj.weight");
  const rt_tensor *u = find(&m, "model.layers.1.mlp.experts.up_proj.weight");
  cr_assert(g && u);
  cr_expect_eq(g->fuse, RS_FUSE_W13);
  cr_expect_eq(g->fuse_group, u->fuse_group);
  cr_expect_neq(g->fuse_group, q->fuse_group);
  cr_expect_eq(find(&m, "model.layers.1.mlp.gate.weight")->role,
               RS_ROLE_ROUTER);
  cr_expect_eq(find(&m, "model.norm.weight")->layer, -1);
  rt_model_free(&m);
}

Test(catalog, lookup_and_bad_descriptions) {
  cr_expect_null(rt_model_find("GPT-5"));
  cr_expect_null(rt_model_find(NULL));
  cr_expect_not_null(rt_model_find("DSV3"));
  cr_expect_not_null(rt_model_find("deepseek-v3"));
  cr_expect(strstr(rt_model_names(), "Llama-3.1-70B") != NULL);
  rt_model_info bad = tiny_dense;
  bad.config = "{\"model_type\": \"llama\", \"hidden_size\": 0}";
  rt_model m;
  rt_err e;
  cr_expect_eq(rt_model_build(&bad, &m, &e), -1);
  cr_expect(strstr(e.msg, "hidden_size") != NULL, "%s", e.msg);
  bad.config =
      "{\"model_type\": \"llama\", \"hidden_size\": 32, "
      "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
      "\"vocab_size\": 50, \"intermediate_size\": 0}";
  cr_expect_eq(rt_model_build(&bad, &m, &e), -1);
  cr_expect(strstr(e.msg, "intermediate_size") != NULL, "%s", e.msg);
  cr_expect_eq(rt_model_build(NULL, &m, &e), -1);
}
