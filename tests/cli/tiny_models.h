/* SPDX-License-Identifier: Apache-2.0 */
/* Tiny model descriptions for the tests of the `reshard` program: the same
 * families as the catalog, sizes small enough to execute a whole reshard in
 * process; and the bytes a TP2 rank of a job holds. */
#ifndef RESHARD_TESTS_TINY_MODELS_H
#define RESHARD_TESTS_TINY_MODELS_H

#include "job.h"

/* config.json texts, as the library's recipes read them */
#define TINY_DENSE_CONFIG                                                    \
  "{\"model_type\": \"llama\", \"hidden_size\": 32, "                        \
  "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, "                   \
  "\"num_key_value_heads\": 4, \"head_dim\": 4, \"intermediate_size\": 48, " \
  "\"vocab_size\": 50}"

static const rt_model_info tiny_dense = {.name = "tiny-dense",
                                         .config = TINY_DENSE_CONFIG};

static const rt_model_info tiny_moe = {
    .name = "tiny-moe",
    .config =
        "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 32, "
        "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
        "\"num_key_value_heads\": 2, \"head_dim\": 4, "
        "\"moe_intermediate_size\": 12, \"num_experts\": 8, "
        "\"vocab_size\": 50}"};

static const rt_model_info tiny_mla = {
    .name = "tiny-mla",
    .config =
        "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 32, "
        "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 4, \"intermediate_size\": 48, "
        "\"moe_intermediate_size\": 8, \"n_routed_experts\": 8, "
        "\"n_shared_experts\": 1, \"first_k_dense_replace\": 1, "
        "\"vocab_size\": 40, \"q_lora_rank\": 16, "
        "\"kv_lora_rank\": 8, \"qk_nope_head_dim\": 4, "
        "\"qk_rope_head_dim\": 2, \"v_head_dim\": 4}"};

/* Bytes of the norms (replicated), and half of every sharded tensor. */
static inline double norm_bytes(const rt_job *job) {
  double b = 0;
  for (int t = 0; t < job->model.n; t++)
    if (job->model.t[t].role == RS_ROLE_NORM)
      b += (double)rt_tensor_bytes(&job->model.t[t]);
  return b;
}

static inline double sharded_half(const rt_job *job) {
  double b = 0;
  for (int t = 0; t < job->model.n; t++)
    if (job->model.t[t].role != RS_ROLE_NORM)
      b += (double)rt_tensor_bytes(&job->model.t[t]) / 2;
  return b;
}

/* bytes one TP rank holds: half of every sharded tensor, all of a norm */
static inline double half_model(const rt_job *job) {
  return sharded_half(job) + norm_bytes(job);
}

#endif
