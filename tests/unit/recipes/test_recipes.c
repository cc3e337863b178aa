/* SPDX-License-Identifier: Apache-2.0 */
/* Recipes through the public API (reshard/recipes.h): every catalog model
 * against the figures the CLI had before the recipes moved into the
 * library, the shipped config.json files against the catalog, refusals
 * that name the key, engine buffers with the engine's names and sizes,
 * and one rank's layout against every rank's. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reshard/recipes.h>

#ifndef RECIPES_CONFIG_DIR
#error "RECIPES_CONFIG_DIR names tests/unit/recipes/configs"
#endif

/* Parameters, bytes and tensors of each catalog model, as the CLI's own
 * catalog (tools/catalog.c before 0.6) built them. */
static const struct {
  const char *name;
  double params, bytes;
  int tensors;
} before[] = {
    {"Qwen3-235B-A22B", 235093634560, 470187269120, 1131},
    {"DeepSeek-V3", 671026419200, 1342052868096, 1025},
    {"Qwen3-30B-A3B", 30532122624, 61064245248, 579},
    {"Qwen3-32B", 32762123264, 65524246528, 707},
    {"Llama-3.1-70B", 70553706496, 141107412992, 723},
    {"Llama-3.1-8B", 8030261248, 16060522496, 291},
};

static void totals(const rs_model *m, double *params, double *bytes) {
  int n = 0;
  *params = *bytes = 0;
  cr_assert_eq(rs_model_num_tensors(m, &n), RS_OK);
  for (int t = 0; t < n; t++) {
    rs_dtype dt;
    int ndim;
    int64_t shape[RS_MAX_DIMS];
    cr_assert_eq(rs_model_tensor_info(m, t, NULL, &dt, &ndim, shape), RS_OK);
    double e = 1;
    for (int d = 0; d < ndim; d++) e *= (double)shape[d];
    *params += e;
    *bytes += e * (double)rs_dtype_size(dt);
  }
}

Test(recipes, catalog_models_as_the_cli_had_them) {
  cr_assert_eq(rs_model_catalog_count(), 6);
  cr_expect_null(rs_model_catalog_name(6));
  cr_expect_null(rs_model_catalog_name(-1));
  for (int i = 0; i < 6; i++) {
    rs_model *m = NULL;
    cr_assert_str_eq(rs_model_catalog_name(i), before[i].name);
    cr_assert_eq(rs_model_from_catalog(before[i].name, &m), RS_OK, "%s",
                 rs_last_error());
    double p, b;
    int n;
    totals(m, &p, &b);
    rs_model_num_tensors(m, &n);
    cr_expect_eq(p, before[i].params, "%s: %.0f params", before[i].name, p);
    cr_expect_eq(b, before[i].bytes, "%s: %.0f bytes", before[i].name, b);
    cr_expect_eq(n, before[i].tensors, "%s: %d tensors", before[i].name, n);
    rs_model_destroy(m);
  }
  rs_model *m = (rs_model *)1;
  cr_expect_eq(rs_model_from_catalog("GPT-5", &m), RS_ERR_INVALID_ARGUMENT);
  cr_expect_null(m);
  cr_expect(strstr(rs_last_error(), "DeepSeek-V3") != NULL, "%s",
            rs_last_error());
  cr_expect_eq(rs_model_from_catalog("dsv3", &m), RS_OK);
  cr_expect_str_eq(rs_model_name(m), "DeepSeek-V3");
  cr_expect_str_eq(rs_model_family(m), "deepseek_v3");
  rs_model_destroy(m);
}

static char *slurp(const char *file, size_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", RECIPES_CONFIG_DIR, file);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, 1 << 16, f);
  fclose(f);
  return buf;
}

static rs_model *from_file(const char *file) {
  size_t len;
  char *text = slurp(file, &len);
  rs_model *m = NULL;
  cr_assert_eq(rs_model_from_config(text, len, &m), RS_OK, "%s: %s", file,
               rs_last_error());
  free(text);
  return m;
}

/* The same tensors, in the same order, with the same shapes and roles. */
static void expect_same_model(const rs_model *a, const rs_model *b) {
  int na, nb;
  rs_model_num_tensors(a, &na);
  rs_model_num_tensors(b, &nb);
  cr_assert_eq(na, nb, "%s: %d tensors, %s: %d", rs_model_name(a), na,
               rs_model_name(b), nb);
  for (int t = 0; t < na; t++) {
    const char *xa, *xb;
    rs_dtype da, db;
    int ka, kb;
    int64_t sa[RS_MAX_DIMS], sb[RS_MAX_DIMS];
    rs_tensor_role ra, rb;
    int ga, gb;
    rs_model_tensor_info(a, t, &xa, &da, &ka, sa);
    rs_model_tensor_info(b, t, &xb, &db, &kb, sb);
    rs_model_tensor_role(a, t, &ra, NULL, NULL, NULL, &ga, NULL);
    rs_model_tensor_role(b, t, &rb, NULL, NULL, NULL, &gb, NULL);
    cr_assert_str_eq(xa, xb);
    cr_expect_eq(da, db, "%s", xa);
    cr_assert_eq(ka, kb, "%s", xa);
    for (int d = 0; d < ka; d++) cr_expect_eq(sa[d], sb[d], "%s", xa);
    cr_expect_eq(ra, rb, "%s", xa);
    cr_expect_eq(ga, gb, "%s", xa);
  }
  cr_expect_str_eq(rs_model_family(a), rs_model_family(b));
}

Test(recipes, shipped_configs_give_the_catalog_models) {
  const char *pairs[][2] = {{"qwen3-32b.json", "Qwen3-32B"},
                            {"qwen3-30b-a3b.json", "Qwen3-30B-A3B"},
                            {"llama-3.1-8b.json", "Llama-3.1-8B"},
                            {"deepseek-v3.json", "DeepSeek-V3"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    rs_model *c = from_file(pairs[i][0]), *m = NULL;
    cr_assert_eq(rs_model_from_catalog(pairs[i][1], &m), RS_OK);
    expect_same_model(c, m);
    int64_t v;
    cr_expect_eq(rs_model_get(c, RS_MODEL_PUBLISHED_PARAMS, &v), RS_OK);
    cr_expect_eq(v, 0, "a config publishes no count");
    rs_model_destroy(c);
    rs_model_destroy(m);
  }
}

/* A config the recipes refuse: its status and a needle of the message. */
static void refused(const char *json, rs_status want, const char *needle) {
  rs_model *m = (rs_model *)1;
  rs_status st = rs_model_from_config(json, strlen(json), &m);
  cr_expect_eq(st, want, "%s: %s (%s)", json, rs_status_name(st),
               rs_last_error());
  cr_expect_null(m);
  cr_expect(strstr(rs_last_error(), needle) != NULL, "'%s' not in: %s", needle,
            rs_last_error());
}

#define DENSE                                       \
  "\"hidden_size\": 32, \"num_hidden_layers\": 2, " \
  "\"num_attention_heads\": 4, \"intermediate_size\": 64, \"vocab_size\": 50"

Test(recipes, refusals_name_the_key) {
  refused("{\"model_type\": \"gpt2\", " DENSE "}", RS_ERR_UNSUPPORTED,
          "model_type \"gpt2\"");
  refused("{" DENSE "}", RS_ERR_INVALID_ARGUMENT, "\"model_type\" is missing");
  refused(
      "{\"model_type\": \"llama\", \"architectures\": "
      "[\"MistralForCausalLM\"], " DENSE "}",
      RS_ERR_UNSUPPORTED, "MistralForCausalLM");
  refused("{\"model_type\": \"llama\", \"hidden_size\": \"32\"}",
          RS_ERR_INVALID_ARGUMENT, "\"hidden_size\" must be a whole number");
  refused("{\"model_type\": \"llama\", \"hidden_size\": 32.5}",
          RS_ERR_INVALID_ARGUMENT, "\"hidden_size\" must be a whole number");
  refused("{\"model_type\": \"llama\", \"hidden_size\": -1}",
          RS_ERR_INVALID_ARGUMENT, "\"hidden_size\" is -1");
  refused(
      "{\"model_type\": \"llama\", \"hidden_size\": 32, "
      "\"hidden_size\": 64}",
      RS_ERR_INVALID_ARGUMENT, "\"hidden_size\" is given more than once");
  refused("{\"model_type\": \"llama\", \"hidden_size\": 32}",
          RS_ERR_INVALID_ARGUMENT, "\"num_hidden_layers\" is missing");
  refused("{\"model_type\": \"llama\", \"attention_bias\": true, " DENSE "}",
          RS_ERR_UNSUPPORTED, "attention_bias");
  refused("{\"model_type\": \"llama\", \"tie_word_embeddings\": 1, " DENSE "}",
          RS_ERR_INVALID_ARGUMENT, "\"tie_word_embeddings\" must be true");
  refused(
      "{\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": [0], "
      "\"moe_intermediate_size\": 8, \"num_experts\": 4, " DENSE "}",
      RS_ERR_UNSUPPORTED, "mlp_only_layers");
  refused(
      "{\"model_type\": \"qwen3_moe\", \"decoder_sparse_step\": 2, "
      "\"moe_intermediate_size\": 8, \"num_experts\": 4, " DENSE "}",
      RS_ERR_UNSUPPORTED, "decoder_sparse_step");
  refused("{\"model_type\": \"llama\", \"torch_dtype\": \"int8\", " DENSE "}",
          RS_ERR_UNSUPPORTED, "torch_dtype");
  refused("{\"model_type\": \"llama\", " DENSE, RS_ERR_INVALID_ARGUMENT,
          "ends inside an object");
  refused("[1, 2]", RS_ERR_INVALID_ARGUMENT, "not an object");
  refused(
      "{\"model_type\": \"llama\", \"hidden_size\": 16777216, "
      "\"num_hidden_layers\": 1, \"num_attention_heads\": 65536, "
      "\"head_dim\": 16777216, \"intermediate_size\": 1, "
      "\"vocab_size\": 1}",
      RS_ERR_OVERFLOW, "q_proj.weight is too large");
  rs_model *m = (rs_model *)1;
  cr_expect_eq(rs_model_from_config(NULL, 0, &m), RS_ERR_NULL_POINTER);
  cr_expect_null(m);
}

Test(recipes, tied_embeddings_have_no_lm_head) {
  const char *json =
      "{\"model_type\": \"llama\", \"tie_word_embeddings\": "
      "true, " DENSE "}";
  rs_model *m = NULL;
  cr_assert_eq(rs_model_from_config(json, strlen(json), &m), RS_OK, "%s",
               rs_last_error());
  int n;
  rs_model_num_tensors(m, &n);
  const char *last;
  rs_model_tensor_info(m, n - 1, &last, NULL, NULL, NULL);
  cr_expect_str_eq(last, "model.norm.weight");
  cr_expect_eq(n, 2 + 2 * 9);
  rs_model_destroy(m);
}

/* A model from config JSON, and a recipe of a model; both asserted. */
static rs_model *model_of(const char *json) {
  rs_model *m = NULL;
  cr_assert_eq(rs_model_from_config(json, strlen(json), &m), RS_OK, "%s",
               rs_last_error());
  return m;
}

static rs_recipe *recipe_of(const rs_model *m, const char *train,
                            const char *infer) {
  rs_recipe *r = NULL;
  cr_assert_eq(rs_recipe_create(m, train, infer, &r), RS_OK, "%s",
               rs_last_error());
  return r;
}

#define TINY_MOE                                           \
  "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 32, "  \
  "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, " \
  "\"num_key_value_heads\": 2, \"head_dim\": 4, "          \
  "\"moe_intermediate_size\": 12, \"num_experts\": 8, \"vocab_size\": 50}"

Test(recipes, engine_buffers_have_the_engines_names_and_sizes) {
  rs_model *m = model_of(TINY_MOE);
  rs_recipe *r = recipe_of(m, "tp=2,ep=2", "tp=2,dp=2");
  rs_model_destroy(m); /* the recipe keeps its own copy */
  int64_t tw, first;
  rs_recipe_get(r, RS_RECIPE_TRAIN_WORLD, &tw);
  rs_recipe_get(r, RS_RECIPE_INFER_FIRST_RANK, &first);
  cr_expect_eq(tw, 2);
  cr_expect_eq(first, 2);
  int nbuf;
  cr_assert_eq(rs_recipe_num_buffers(r, RS_SIDE_DST, &nbuf), RS_OK);
  bool qkv = false, w13 = false, w2 = false;
  for (int b = 0; b < nbuf; b++) {
    const char *name;
    int64_t bytes;
    cr_assert_eq(rs_recipe_buffer(r, RS_SIDE_DST, 2, b, &name, &bytes), RS_OK,
                 "%s", rs_last_error());
    if (!strcmp(name, "model.layers.0.self_attn.qkv_proj.weight")) {
      qkv = true; /* TP2: q 16 rows, k 4, v 4, of 32 columns, bf16 */
      cr_expect_eq(bytes, (16 + 4 + 4) * 32 * 2);
    }
    if (!strcmp(name, "model.layers.1.mlp.experts.w13_weight")) {
      w13 = true; /* all 8 experts, gate and up of 6 rows each, 32 columns */
      cr_expect_eq(bytes, 8 * 12 * 32 * 2);
    }
    if (!strcmp(name, "model.layers.1.mlp.experts.w2_weight")) w2 = true;
  }
  cr_expect(qkv && w13 && w2);
  const char *name;
  cr_expect_eq(rs_recipe_buffer(r, RS_SIDE_SRC, 0, 0, &name, NULL), RS_OK);
  cr_expect_str_eq(name, "param_buffer.bf16");
  cr_expect_eq(rs_recipe_buffer(r, RS_SIDE_DST, 2, nbuf, &name, NULL),
               RS_ERR_INVALID_ARGUMENT);
  cr_expect_null(name);
  rs_recipe_destroy(r);
}

Test(recipes, one_ranks_layout_is_its_part_of_all) {
  rs_model *m = NULL;
  rs_recipe *r = NULL;
  cr_assert_eq(rs_model_from_catalog("Qwen3-30B-A3B", &m), RS_OK);
  cr_assert_eq(rs_recipe_create(m, "tp=2,ep=4,pp=2", "tp=2,dp=4", &r), RS_OK,
               "%s", rs_last_error());
  int64_t tw, iw;
  rs_recipe_get(r, RS_RECIPE_TRAIN_WORLD, &tw);
  rs_recipe_get(r, RS_RECIPE_INFER_WORLD, &iw);
  rs_context *ctx = NULL;
  cr_assert_eq(rs_context_create_local((int)(tw + iw), &ctx), RS_OK);
  for (int side = 0; side < 2; side++) {
    rs_layout *all = NULL;
    cr_assert_eq(rs_layout_create(ctx, &all), RS_OK);
    rs_status st = side ? rs_recipe_add_infer(all, r, RS_ALL_RANKS)
                        : rs_recipe_add_train(all, r, RS_ALL_RANKS);
    cr_assert_eq(st, RS_OK, "%s", rs_context_last_error(ctx));
    int64_t nall = 0, sum = 0;
    rs_layout_num_shards(all, &nall);
    int lo = side ? (int)tw : 0, hi = side ? (int)(tw + iw) : (int)tw;
    for (int rank = lo; rank < hi; rank++) {
      rs_layout *one = NULL;
      cr_assert_eq(rs_layout_create(ctx, &one), RS_OK);
      st = side ? rs_recipe_add_infer(one, r, rank)
                : rs_recipe_add_train(one, r, rank);
      cr_assert_eq(st, RS_OK, "%s", rs_context_last_error(ctx));
      int64_t n = 0, q = 0;
      rs_layout_num_shards(one, &n);
      rs_recipe_num_shards(r, side ? RS_SIDE_DST : RS_SIDE_SRC, rank, &q);
      cr_expect_eq(n, q);
      sum += n;
      rs_layout_destroy(one);
    }
    cr_expect_eq(sum, nall);
    /* a rank of the other side declares the tensors and adds nothing */
    rs_layout *other = NULL;
    rs_layout_create(ctx, &other);
    st = side ? rs_recipe_add_infer(other, r, 0)
              : rs_recipe_add_train(other, r, (int)tw);
    cr_expect_eq(st, RS_OK, "%s", rs_context_last_error(ctx));
    int nt = -1, nall_t = -2;
    int64_t ns = -1;
    rs_layout_num_tensors(other, &nt);
    rs_layout_num_tensors(all, &nall_t);
    rs_layout_num_shards(other, &ns);
    cr_expect_eq(nt, nall_t);
    cr_expect_eq(ns, 0);
    rs_layout_destroy(other);
    /* a negative rank is refused, and the layout left as it was */
    rs_layout *bad = NULL;
    rs_layout_create(ctx, &bad);
    st = side ? rs_recipe_add_infer(bad, r, -2)
              : rs_recipe_add_train(bad, r, -2);
    cr_expect_eq(st, RS_ERR_INVALID_ARGUMENT);
    rs_layout_num_tensors(bad, &nt);
    cr_expect_eq(nt, 0);
    rs_layout_destroy(bad);
    rs_layout_destroy(all);
  }
  rs_context_destroy(ctx);
  rs_recipe_destroy(r);
  rs_model_destroy(m);
}

Test(recipes, bad_specs_and_settings) {
  rs_model *m = NULL;
  rs_recipe *r = (rs_recipe *)1;
  cr_assert_eq(rs_model_from_catalog("Qwen3-32B", &m), RS_OK);
  cr_expect_eq(rs_recipe_create(m, "tp=3", "tp=8", &r),
               RS_ERR_INVALID_ARGUMENT);
  cr_expect_null(r);
  cr_expect(strstr(rs_last_error(), "tp=3 does not divide") != NULL, "%s",
            rs_last_error());
  cr_expect_eq(rs_recipe_create(m, "tp=2,ep=2", "tp=8", &r),
               RS_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(rs_last_error(), "no routed experts") != NULL, "%s",
            rs_last_error());
  cr_assert_eq(rs_recipe_create(m, "tp=2", "tp=4", &r), RS_OK);
  cr_expect_eq(rs_recipe_set(r, RS_RECIPE_TRAIN_TP, 4), RS_ERR_BAD_PARAM);
  cr_expect_eq(rs_recipe_set(r, RS_RECIPE_INFER_DTYPE, RS_DTYPE_I8),
               RS_ERR_BAD_PARAM);
  cr_expect_eq(rs_recipe_set(r, RS_RECIPE_INFER_DTYPE, RS_DTYPE_F8_E4M3),
               RS_OK);
  rs_dtype src, dst;
  int scaled;
  /* layer 0's q_proj: TP4 rows of 2048, whole 128 x 128 blocks */
  cr_expect_eq(rs_recipe_tensor_dtypes(r, 2, &src, &dst, &scaled, NULL, NULL),
               RS_OK);
  cr_expect_eq(src, RS_DTYPE_BF16);
  cr_expect_eq(dst, RS_DTYPE_F8_E4M3);
  cr_expect(scaled);
  int64_t v;
  cr_expect_eq(rs_recipe_get(r, (rs_recipe_param)999, &v), RS_ERR_BAD_PARAM);
  rs_recipe_destroy(r);
  rs_model_destroy(m);
}

/* Rows [first, first + rows) of tensor `tensor` on layout rank `rank`, in
 * a buffer of `bytes` bytes (-1: the rank holds none of it). */
static void vocab_shard(rs_recipe *r, rs_side side, int rank, int tensor,
                        int64_t *first, int64_t *rows, int64_t *bytes) {
  int64_t n = 0;
  *first = *rows = *bytes = -1;
  cr_assert_eq(rs_recipe_num_shards(r, side, rank, &n), RS_OK);
  for (int64_t i = 0; i < n; i++) {
    int t, scales, buffer;
    int64_t off[3], ext[3];
    cr_assert_eq(rs_recipe_shard(r, side, rank, i, &t, &scales, NULL, off, ext,
                                 &buffer, NULL, NULL),
                 RS_OK);
    if (t != tensor || scales) continue;
    *first = off[0];
    *rows = ext[0];
    if (side == RS_SIDE_DST)
      rs_recipe_buffer(r, side, rank, buffer, NULL, bytes);
    return;
  }
}

/* GPT-2's vocabulary: 50257 rows, a multiple of neither 64 nor 8. */
#define ODD_VOCAB                                                           \
  "{\"model_type\": \"llama\", \"hidden_size\": 64, "                       \
  "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, "                  \
  "\"num_key_value_heads\": 8, \"head_dim\": 8, \"intermediate_size\": 64," \
  " \"vocab_size\": 50257}"

Test(recipes, vocabulary_rows_as_the_frameworks_pad_them) {
  rs_model *m = model_of(ODD_VOCAB);
  rs_recipe *r = recipe_of(m, "tp=2", "tp=8");
  int64_t pad, first, rows, bytes;
  rs_recipe_get(r, RS_RECIPE_INFER_VOCAB_PAD, &pad);
  cr_expect_eq(pad, 64);
  rs_recipe_get(r, RS_RECIPE_TRAIN_VOCAB_PAD, &pad);
  cr_expect_eq(pad, 1);
  /* vLLM: 50257 rows padded to 50304, 6288 per TP rank; the last rank
   * holds 6241 rows of the model and 47 of padding */
  for (int t = 0; t < 8; t++) {
    vocab_shard(r, RS_SIDE_DST, 2 + t, 0, &first, &rows, &bytes);
    cr_expect_eq(first, t * 6288, "engine rank %d", t);
    cr_expect_eq(rows, t < 7 ? 6288 : 50257 - 7 * 6288, "engine rank %d", t);
    cr_expect_eq(bytes, 6288 * 64 * 2, "engine rank %d", t);
  }
  /* the trainer, unpadded: rows split as torch.chunk splits them */
  vocab_shard(r, RS_SIDE_SRC, 1, 0, &first, &rows, &bytes);
  cr_expect_eq(first, 25129);
  cr_expect_eq(rows, 25128);
  /* Megatron's make_vocab_size_divisible_by=128: padded to 50432 (a
   * multiple of 128 x tp 2), 25216 per TP rank */
  cr_assert_eq(rs_recipe_set(r, RS_RECIPE_TRAIN_VOCAB_PAD, 128), RS_OK);
  vocab_shard(r, RS_SIDE_SRC, 1, 0, &first, &rows, &bytes);
  cr_expect_eq(first, 25216);
  cr_expect_eq(rows, 50257 - 25216);
  int64_t held;
  cr_assert_eq(rs_recipe_buffer(r, RS_SIDE_SRC, 1, 0, NULL, &held), RS_OK);
  cr_expect_geq(held, 25216 * 64 * 2, "the padding rows are held");
  /* an engine padding no tp=8 divides is refused, the recipe unchanged */
  cr_expect_eq(rs_recipe_set(r, RS_RECIPE_INFER_VOCAB_PAD, 1),
               RS_ERR_BAD_PARAM);
  cr_expect(strstr(rs_last_error(), "does not divide") != NULL, "%s",
            rs_last_error());
  rs_recipe_get(r, RS_RECIPE_INFER_VOCAB_PAD, &pad);
  cr_expect_eq(pad, 64);
  rs_recipe_destroy(r);
  /* the spec says it too; 50257 rows padded to a multiple of 4 do not
   * split over 8 ranks */
  cr_expect_eq(
      rs_recipe_create(m, "tp=2,vocab_pad=128", "tp=8,vocab_pad=4", &r),
      RS_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(rs_last_error(), "vocab_pad=4 (50260 rows") != NULL, "%s",
            rs_last_error());
  r = recipe_of(m, "tp=2,vocab_pad=128", "tp=1,vocab_pad=1");
  vocab_shard(r, RS_SIDE_DST, 2, 0, &first, &rows, &bytes);
  cr_expect_eq(rows, 50257);
  cr_expect_eq(bytes, 50257 * 64 * 2);
  rs_recipe_destroy(r);
  rs_model_destroy(m);
}

/* The bytes of the engine buffer called `name` on layout rank `rank`
 * (-1: none of that name). */
static int64_t engine_bytes(rs_recipe *r, int rank, const char *name) {
  int nbuf = 0;
  rs_recipe_num_buffers(r, RS_SIDE_DST, &nbuf);
  for (int b = 0; b < nbuf; b++) {
    const char *n;
    int64_t bytes;
    cr_assert_eq(rs_recipe_buffer(r, RS_SIDE_DST, rank, b, &n, &bytes), RS_OK);
    if (!strcmp(n, name)) return bytes;
  }
  return -1;
}

/* fp8 with 128 x 128 blocks: each quantized parameter's scales in its own
 * weight_scale_inv buffer, fused as vLLM fuses them (qkv_proj: q's block
 * rows, then k's, then v's; w13: per expert, gate's then up's). */
Test(recipes, fp8_scales_per_parameter_as_vllm_keeps_them) {
  rs_model *m = NULL;
  cr_assert_eq(rs_model_from_catalog("Qwen3-32B", &m), RS_OK);
  rs_recipe *r = recipe_of(m, "tp=2", "tp=4");
  cr_assert_eq(rs_recipe_set(r, RS_RECIPE_INFER_DTYPE, RS_DTYPE_F8_E4M3),
               RS_OK);
  /* TP4 of hidden 5120: q 2048 rows (16 blocks), k and v 256 (2 each) */
  const char *qkv = "model.layers.0.self_attn.qkv_proj.weight";
  cr_expect_eq(engine_bytes(r, 2, qkv), (2048 + 256 + 256) * 5120);
  cr_expect_eq(engine_bytes(r, 2,
                            "model.layers.0.self_attn.qkv_proj."
                            "weight_scale_inv"),
               (16 + 2 + 2) * 40 * 4);
  cr_expect_eq(engine_bytes(r, 2,
                            "model.layers.0.input_layernorm."
                            "weight_scale_inv"),
               0, "norms stay bf16: no scales");
  /* k_proj's scales start after q's 16 block rows */
  int64_t n = 0;
  bool seen = false;
  cr_assert_eq(rs_recipe_num_shards(r, RS_SIDE_DST, 2, &n), RS_OK);
  for (int64_t i = 0; i < n; i++) {
    int t, scales, buffer;
    int64_t off[3], ext[3], at, strides[3];
    rs_recipe_shard(r, RS_SIDE_DST, 2, i, &t, &scales, NULL, off, ext, &buffer,
                    &at, strides);
    const char *name;
    rs_model_tensor_info(m, t, &name, NULL, NULL, NULL);
    if (!scales || strcmp(name, "model.layers.0.self_attn.k_proj.weight"))
      continue;
    const char *bname;
    rs_recipe_buffer(r, RS_SIDE_DST, 2, buffer, &bname, NULL);
    cr_expect_str_eq(bname,
                     "model.layers.0.self_attn.qkv_proj."
                     "weight_scale_inv");
    cr_expect_eq(at, 16 * 40 * 4);
    cr_expect_eq(ext[0], 2);
    cr_expect_eq(ext[1], 40);
    seen = true;
  }
  cr_expect(seen, "k_proj's scales on engine rank 0");
  rs_recipe_destroy(r);
  rs_model_destroy(m);
  /* experts: Qwen3-30B-A3B, inter 768, TP2: 384 rows, 3 blocks of gate
   * and 3 of up per expert, 16 blocks of hidden 2048, 128 experts */
  cr_assert_eq(rs_model_from_catalog("Qwen3-30B-A3B", &m), RS_OK);
  r = recipe_of(m, "tp=2,ep=2", "tp=2");
  cr_assert_eq(rs_recipe_set(r, RS_RECIPE_INFER_DTYPE, RS_DTYPE_F8_E4M3),
               RS_OK);
  cr_expect_eq(engine_bytes(r, 2,
                            "model.layers.0.mlp.experts."
                            "w13_weight_scale_inv"),
               128 * (3 + 3) * 16 * 4);
  cr_expect_eq(engine_bytes(r, 2,
                            "model.layers.0.mlp.experts."
                            "w2_weight_scale_inv"),
               128 * 16 * 3 * 4);
  rs_recipe_destroy(r);
  rs_model_destroy(m);
}

/* Queries from several threads at once on a fresh recipe: the shard cache
 * is filled once, and every thread reads the same figures. */
typedef struct query_arg {
  rs_recipe *r;
  int64_t shards, bytes;
} query_arg;

static void *query(void *p) {
  query_arg *a = p;
  rs_recipe_num_shards(a->r, RS_SIDE_DST, RS_ALL_RANKS, &a->shards);
  rs_recipe_buffer(a->r, RS_SIDE_DST, 2, 0, NULL, &a->bytes);
  return NULL;
}

Test(recipes, queries_from_several_threads) {
  rs_model *m = NULL;
  cr_assert_eq(rs_model_from_catalog("Qwen3-30B-A3B", &m), RS_OK);
  for (int round = 0; round < 20; round++) {
    rs_recipe *r = recipe_of(m, "tp=2,ep=2", "tp=2");
    pthread_t th[4];
    query_arg a[4];
    for (int i = 0; i < 4; i++) {
      a[i] = (query_arg){r, -1, -1};
      cr_assert_eq(pthread_create(&th[i], NULL, query, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
      cr_expect_gt(a[i].shards, 0);
      cr_expect_eq(a[i].shards, a[0].shards);
      cr_expect_eq(a[i].bytes, a[0].bytes);
    }
    rs_recipe_destroy(r);
  }
  rs_model_destroy(m);
}
