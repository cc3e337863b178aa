/* SPDX-License-Identifier: Apache-2.0 */
/* Tiny model descriptions for the tests of the `reshard` program: the same
 * families as the catalog, sizes small enough to execute a whole reshard in
 * process; and the bytes a TP2 rank of a job holds. */
#ifndef RESHARD_TESTS_TINY_MODELS_H
#define RESHARD_TESTS_TINY_MODELS_H

#include "job.h"

static const rt_model_info tiny_dense = {
    .name = "tiny-dense", .family = "llama_dense", .aliases = "",
    .hidden = 32, .layers = 4, .heads = 8, .kv_heads = 4, .head_dim = 4,
    .inter = 48, .vocab = 50, .published_params = 0};

static const rt_model_info tiny_moe = {
    .name = "tiny-moe", .family = "qwen3_moe", .aliases = "",
    .hidden = 32, .layers = 4, .heads = 8, .kv_heads = 2, .head_dim = 4,
    .moe_inter = 12, .experts = 8, .vocab = 50, .qk_norm = 1,
    .published_params = 0};

static const rt_model_info tiny_mla = {
    .name = "tiny-mla", .family = "deepseek_v3", .aliases = "",
    .hidden = 32, .layers = 3, .heads = 4, .kv_heads = 4, .inter = 48,
    .moe_inter = 8, .experts = 8, .shared_experts = 1, .first_moe_layer = 1,
    .vocab = 40, .mla = 1, .q_lora_rank = 16, .kv_lora_rank = 8,
    .qk_nope_dim = 4, .qk_rope_dim = 2, .v_head_dim = 4,
    .published_params = 0};

/* Bytes of the norms (replicated), and half of every sharded tensor. */
static inline double norm_bytes(const rt_job *job) {
  double b = 0;
  for (int t = 0; t < job->model.n; t++)
    if (job->model.t[t].role == RT_ROLE_NORM)
      b += (double)rt_tensor_bytes(&job->model.t[t]);
  return b;
}

static inline double sharded_half(const rt_job *job) {
  double b = 0;
  for (int t = 0; t < job->model.n; t++)
    if (job->model.t[t].role != RT_ROLE_NORM)
      b += (double)rt_tensor_bytes(&job->model.t[t]) / 2;
  return b;
}

/* bytes one TP rank holds: half of every sharded tensor, all of a norm */
static inline double half_model(const rt_job *job) {
  return sharded_half(job) + norm_bytes(job);
}

#endif
