/* SPDX-License-Identifier: Apache-2.0 */
/* Recipes inside the core: models (the catalog, config.json), the trainer
 * and engine parallelisms, their meshes, the dtypes of each side, and the
 * shards each rank holds in which buffer (reshard/recipes.h is the ABI
 * over this). */
#ifndef RS_CORE_RECIPES_H
#define RS_CORE_RECIPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <reshard/recipes.h>

#include "base/error.h"

#define RSI_RMAXD 3  /* tensor dims in a recipe (stacked experts: 3) */
#define RSI_MAX_AX 6 /* axes of a device mesh */
#define RSI_RNAME 96

/* What a model is made of (a catalog entry, or read from config.json). */
typedef struct rsi_model_info {
  char name[RSI_RNAME];
  const char *family; /* qwen3_moe, qwen3_dense, llama_dense, deepseek_v3 */
  const char *aliases;
  int hidden, layers, heads, kv_heads, head_dim;
  int inter;
  int moe_inter, experts, shared_experts;
  int first_moe_layer;
  int vocab;
  int qk_norm, mla, tied;
  int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
  rs_dtype dtype;
  double published_params;
} rsi_model_info;

typedef struct rsi_rtensor {
  char name[RSI_RNAME];
  rs_dtype dtype;
  int ndim;
  int64_t shape[RSI_RMAXD];
  int layer;
  rs_tensor_role role;
  int kv;
  rs_fuse fuse;
  int fuse_group, fuse_slot;
  /* the engine's name of its buffer: the fused buffer's, or its own */
  char engine[RSI_RNAME];
} rsi_rtensor;

struct rs_model {
  rsi_model_info info;
  rsi_rtensor *t;
  int n;
  int nfuse;
};

bool rsi_model_is_moe(const rsi_model_info *info);
const rsi_model_info *rsi_catalog_find(const char *name);
int rsi_catalog_count(void);
const rsi_model_info *rsi_catalog_at(int i);
/* Check info and build every tensor into a new model. */
rs_status rsi_model_build(const rsi_model_info *info, rs_model **out,
                          rsi_err *err);
rs_status rsi_model_from_config(const char *json, size_t len, rs_model **out,
                                rsi_err *err);
rs_status rsi_model_clone(const rs_model *m, rs_model **out, rsi_err *err);
void rsi_model_free(rs_model *m);

/* Trainer (Megatron) and engine (vLLM) parallelism. */
typedef struct rsi_train {
  int tp, cp, ep, etp, pp, dp, edp, fsdp, world;
  int vocab_pad; /* Megatron's make_vocab_size_divisible_by; 1: none */
  int given_gpus, given_dp, given_edp;
} rsi_train;

typedef struct rsi_infer {
  int tp, dp, ep, world, given_gpus;
  int vocab_pad; /* vLLM's and SGLang's vocabulary padding */
} rsi_infer;

rs_status rsi_train_parse(const char *spec, rsi_train *out, rsi_err *err);
rs_status rsi_infer_parse(const char *spec, rsi_infer *out, rsi_err *err);
rs_status rsi_train_resolve(const rsi_model_info *m, rsi_train *t,
                            rsi_err *err);
rs_status rsi_infer_resolve(const rsi_model_info *m, rsi_infer *t,
                            rsi_err *err);

typedef struct rsi_mesh {
  int nax;
  int size[RSI_MAX_AX];
  int place[RSI_MAX_AX];
  int stride[RSI_MAX_AX];
  const char *axis[RSI_MAX_AX];
  int rank0;
  /* The rows of dim 0 the ranks hold between them, padding included (a
   * padded vocabulary); 0: the tensor's own. */
  int64_t rows;
} rsi_mesh;

void rsi_train_mesh(const rs_model *m, const rsi_train *t, int tensor,
                    rsi_mesh *out);
void rsi_infer_mesh(const rs_model *m, const rsi_infer *t, int tensor,
                    int rank0, rsi_mesh *out);
int rsi_mesh_size(const rsi_mesh *mesh);
/* The box of mesh index idx (row-major coordinates) within the tensor;
 * 0 when empty. held (NULL, or ndim values): the extent the rank holds,
 * padding rows included, of which the box is the start. */
int rsi_mesh_box(const rsi_mesh *mesh, const rsi_rtensor *t, int idx,
                 int64_t *off, int64_t *ext, int64_t *held, int *rank);
/* Vocabulary rows padded as a trainer (multiple of pad x tp) or an engine
 * (multiple of pad) pads them. */
int64_t rsi_train_vocab_rows(const rsi_model_info *m, const rsi_train *t);
int64_t rsi_infer_vocab_rows(const rsi_model_info *m, const rsi_infer *t);

typedef struct rsi_tdtype {
  rs_dtype src, dst;
  bool scaled;
  rs_fp8_kept kept;
  int64_t cut[3];
} rsi_tdtype;

/* One shard as a rank holds it. */
typedef struct rsi_rshard {
  int tensor, rank, buffer;
  bool scales;
  int64_t off[RSI_RMAXD], ext[RSI_RMAXD], strides[RSI_RMAXD];
  int64_t byte_offset;
  int64_t held_end; /* where the rank's rows end, padding included */
} rsi_rshard;

typedef struct rsi_shard_cache {
  rsi_rshard *s; /* every shard, in add order */
  int64_t n;
  int64_t *first; /* per layout rank + 1: start into by_rank */
  int64_t *by_rank;
  int nranks;
  int64_t *nbytes; /* per rank x buffer */
  int nbuffers;
} rsi_shard_cache;

struct rs_recipe {
  rs_model *model;
  rsi_train train;
  rsi_infer infer;
  rs_dtype train_dtype, infer_dtype;
  int64_t block_rows, block_cols;
  rs_scale_rule rule;
  int infer_first;
  rsi_mesh *smesh, *dmesh;
  rsi_tdtype *td;
  char *group_cut;    /* scratch of rsi_recipe_decide: per fused group */
  int ninfer_buffers; /* engine buffers: values (fused or own), scales */
  int nvalue_buffers; /* the values' buffers; buffer b's scales: b + this */
  int *buf_of;        /* engine buffer of each tensor */
  char **buf_name;    /* engine buffer names */
  rsi_shard_cache cache[2];
  pthread_mutex_t cache_lock; /* queries from several threads fill it once */
};

rs_status rsi_recipe_create(const rs_model *m, const char *train,
                            const char *infer, rs_recipe **out, rsi_err *err);
void rsi_recipe_free(rs_recipe *r);
/* Decide the dtypes after a setting changed; drops the shard caches. */
void rsi_recipe_decide(rs_recipe *r);

typedef rs_status (*rsi_shard_fn)(const rsi_rshard *s, void *arg);
/* Every shard of a side (rank: one layout rank, or -1), in add order. */
rs_status rsi_recipe_shards(const rs_recipe *r, rs_side side, int rank,
                            rsi_shard_fn fn, void *arg, rsi_err *err);
rs_status rsi_recipe_cache(rs_recipe *r, rs_side side, rsi_err *err);
/* "x.weight" -> "x.weight_scale_inv"; the scales box of a values box. */
void rsi_scale_name(const char *values, char *out, size_t n);
void rsi_scale_box(int ndim, const int64_t *off, const int64_t *ext,
                   int64_t rows, int64_t cols, int64_t *soff, int64_t *sext);

#endif
