/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libreshard recipes: the layouts of real frameworks, from a model config.
 *
 * A recipe knows how a Megatron-style trainer (TP, CP, EP, expert-TP, PP,
 * DP, FSDP) and a vLLM-style inference engine (TP, DP, EP) shard every
 * parameter of a model, and in which local buffers each rank holds its
 * shards: the trainer one contiguous buffer per dtype, in tensor order
 * (Megatron's parameter buffers: 0 bf16, 1 f32); the engine one buffer per
 * parameter, under the engine's own name, fused buffers holding several
 * logical tensors at byte offsets (qkv_proj, gate_up_proj,
 * fused_qkv_a_proj, experts.w13_weight), and, with fp8, one more buffer of
 * all the rank's block scales. Both layouts name tensors the Hugging Face
 * way ("model.layers.0.self_attn.q_proj.weight"), so a plan between them
 * matches every tensor.
 *
 * The flow:
 *   rs_model_from_config(json, len, &model)    -- or rs_model_from_catalog
 *   rs_recipe_create(model, "tp=2,pp=2", "tp=4,dp=2", &recipe)
 *   rs_recipe_add_train(src, recipe, rank)     -- rank: RS_ALL_RANKS or one
 *   rs_recipe_add_infer(dst, recipe, rank)
 *   rs_recipe_buffer(recipe, RS_SIDE_DST, rank, buffer, &name, &nbytes)
 *     -- bind vLLM's own tensors by name
 *
 * Trainer ranks are 0 .. train world - 1; engine ranks follow them
 * (RS_RECIPE_INFER_FIRST_RANK, which a colocated job sets to 0).
 * Errors are recorded in the per-thread buffer (rs_last_error); the calls
 * that add to a layout record theirs on the layout's context
 * (rs_layout_last_error).
 *
 * Threads: a model, and a recipe between rs_recipe_set calls, may be read
 * from several threads at once (every call but rs_recipe_set and the
 * destroy calls); rs_recipe_set must not run beside another call on the
 * same recipe.
 */
#ifndef RESHARD_RECIPES_H
#define RESHARD_RECIPES_H

#include <reshard/reshard.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A model: its parameter tensors, in a fixed order. @since 0.6 */
typedef struct rs_model rs_model;
/** A model with a trainer and an engine parallelism. @since 0.6 */
typedef struct rs_recipe rs_recipe;

/** How the frameworks shard a tensor. Pinned values. @since 0.6 */
typedef enum rs_tensor_role {
  RS_ROLE_EMBED = 0,      /**< vocab-parallel embedding: dim 0 */
  RS_ROLE_LM_HEAD = 1,    /**< vocab-parallel output layer: dim 0 */
  RS_ROLE_NORM = 2,       /**< norms: replicated */
  RS_ROLE_COL = 3,        /**< column-parallel Linear: dim 0 */
  RS_ROLE_ROW = 4,        /**< row-parallel Linear: dim 1 */
  RS_ROLE_REPL = 5,       /**< a Linear every TP rank holds whole */
  RS_ROLE_ROUTER = 6,     /**< MoE router gate: replicated */
  RS_ROLE_BIAS = 7,       /**< router score bias: replicated */
  RS_ROLE_EXPERT_COL = 8, /**< stacked experts [E, inter, hidden] */
  RS_ROLE_EXPERT_ROW = 9  /**< stacked experts [E, hidden, inter] */
} rs_tensor_role;

/** How the engine packs a tensor's shard with others. Pinned values.
 *  @since 0.6 */
typedef enum rs_fuse {
  RS_FUSE_NONE = 0, /**< its own buffer */
  RS_FUSE_ROWS = 1, /**< shards concatenated on dim 0 (qkv_proj) */
  RS_FUSE_W13 = 2   /**< per expert: gate rows then up rows (w13_weight) */
} rs_fuse;

/** Facts of a model, read with rs_model_get. Pinned values. @since 0.6 */
typedef enum rs_model_param {
  RS_MODEL_HIDDEN_SIZE = 0,
  RS_MODEL_NUM_LAYERS = 1,
  RS_MODEL_NUM_HEADS = 2,
  RS_MODEL_NUM_KV_HEADS = 3,
  RS_MODEL_HEAD_DIM = 4,
  RS_MODEL_INTERMEDIATE_SIZE = 5, /**< dense MLP; 0: none */
  RS_MODEL_MOE_INTERMEDIATE_SIZE = 6,
  RS_MODEL_NUM_EXPERTS = 7, /**< routed experts; 0: dense */
  RS_MODEL_NUM_SHARED_EXPERTS = 8,
  RS_MODEL_FIRST_MOE_LAYER = 9, /**< layers below are dense */
  RS_MODEL_VOCAB_SIZE = 10,
  RS_MODEL_QK_NORM = 11, /**< 1: q_norm and k_norm */
  RS_MODEL_MLA = 12,     /**< 1: DeepSeek MLA attention */
  RS_MODEL_Q_LORA_RANK = 13,
  RS_MODEL_KV_LORA_RANK = 14,
  RS_MODEL_QK_NOPE_HEAD_DIM = 15,
  RS_MODEL_QK_ROPE_HEAD_DIM = 16,
  RS_MODEL_V_HEAD_DIM = 17,
  RS_MODEL_PUBLISHED_PARAMS = 18, /**< the published count; 0: none */
  RS_MODEL_TIED_EMBEDDINGS = 19,  /**< 1: no lm_head of its own */
  RS_MODEL_NUM_FUSED = 20         /**< fused engine buffers per rank */
} rs_model_param;

/** Number of models in the built-in catalog. @since 0.6 */
RS_API int rs_model_catalog_count(void);
/** Name of catalog model @p index ("DeepSeek-V3"); NULL outside
 *  [0, rs_model_catalog_count()). Static storage. @since 0.6 */
RS_API const char *rs_model_catalog_name(int index);

/**
 * A model of the built-in catalog, by name or alias ("dsv3",
 * "qwen3-235b"), case-insensitive. The caller owns *out
 * (rs_model_destroy). Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT
 * (an unknown name; the message lists the catalog), RS_ERR_NO_MEMORY.
 * @since 0.6
 */
RS_API rs_status rs_model_from_catalog(const char *name, rs_model **out);

/**
 * A model from the @p len bytes of a Hugging Face config.json at @p json
 * (no NUL needed). Known model_type values: "llama", "qwen3", "qwen3_moe",
 * "deepseek_v3" (and "architectures", when given, must fit them). Keys the
 * recipe does not use are skipped. The caller owns *out.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (not JSON: the
 * message gives line, column and byte; input over 16 MiB or nested deeper
 * than 64 levels; a key of the wrong type or out of range, named),
 * RS_ERR_UNSUPPORTED (an unknown model_type or architecture, or a setting
 * the recipe cannot place, such as mlp_only_layers, named),
 * RS_ERR_OVERFLOW (a tensor or the model too large for int64 bytes),
 * RS_ERR_NO_MEMORY. @since 0.6
 */
RS_API rs_status rs_model_from_config(const char *json, size_t len,
                                      rs_model **out);

/** Free a model. NULL does nothing. @since 0.6 */
RS_API void rs_model_destroy(rs_model *model);

/** The model's name (the catalog's, or the config's "_name_or_path", or
 *  its model_type); "" for NULL. Valid while the model lives. @since 0.6 */
RS_API const char *rs_model_name(const rs_model *model);
/** The recipe family: "llama_dense", "qwen3_dense", "qwen3_moe",
 *  "deepseek_v3"; "" for NULL. Static storage. @since 0.6 */
RS_API const char *rs_model_family(const rs_model *model);

/** Read a fact of the model. Errors: RS_ERR_NULL_POINTER, RS_ERR_BAD_PARAM
 *  (an unknown parameter; *out is 0). @since 0.6 */
RS_API rs_status rs_model_get(const rs_model *model, rs_model_param param,
                              int64_t *out);

/** Number of parameter tensors. Errors: RS_ERR_NULL_POINTER. @since 0.6 */
RS_API rs_status rs_model_num_tensors(const rs_model *model, int *out);

/**
 * Tensor @p tensor: its Hugging Face name (valid while the model lives),
 * dtype, number of dims and shape (@p shape: room for RS_MAX_DIMS; may be
 * NULL, as may every out-parameter). Errors: RS_ERR_NULL_POINTER,
 * RS_ERR_INVALID_ARGUMENT (tensor outside [0, count)). @since 0.6
 */
RS_API rs_status rs_model_tensor_info(const rs_model *model, int tensor,
                                      const char **name, rs_dtype *dtype,
                                      int *ndim, int64_t *shape);

/**
 * How tensor @p tensor is sharded and packed: its role, its decoder layer
 * (-1 for embed_tokens, norm, lm_head), whether its rows are kv heads
 * (k_proj, v_proj), and the engine buffer it is fused into (@p fuse_group
 * -1 when none) at which slot. Any out-parameter may be NULL.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT. @since 0.6
 */
RS_API rs_status rs_model_tensor_role(const rs_model *model, int tensor,
                                      rs_tensor_role *role, int *layer, int *kv,
                                      rs_fuse *fuse, int *fuse_group,
                                      int *fuse_slot);

/**
 * A recipe: @p model sharded by a trainer spec ("tp=2,cp=2,ep=16,pp=4":
 * keys tp cp ep etp pp dp edp gpus fsdp vocab_pad; fsdp=1 shards the
 * data-parallel axes on dim 0) and an engine spec ("tp=8,dp=16[,ep=128]":
 * keys tp dp ep gpus vocab_pad; see RS_RECIPE_*_VOCAB_PAD). Sizes not given are
 * derived; every size is checked against the model. The recipe keeps its own
 * copy of the model; the caller owns *out (rs_recipe_destroy). Errors:
 * RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (a bad spec or a size that does
 * not fit the model: the message names the key and the model's figure),
 * RS_ERR_NO_MEMORY. @since 0.6
 */
RS_API rs_status rs_recipe_create(const rs_model *model, const char *train,
                                  const char *infer, rs_recipe **out);
/** Free a recipe. NULL does nothing. @since 0.6 */
RS_API void rs_recipe_destroy(rs_recipe *recipe);

/** The recipe's settings (set and get) and resolved sizes (get only).
 *  Pinned values. @since 0.6 */
typedef enum rs_recipe_param {
  RS_RECIPE_TRAIN_TP = 0,
  RS_RECIPE_TRAIN_CP = 1,
  RS_RECIPE_TRAIN_EP = 2,
  RS_RECIPE_TRAIN_ETP = 3,
  RS_RECIPE_TRAIN_PP = 4,
  RS_RECIPE_TRAIN_DP = 5,  /**< dense data parallel, derived */
  RS_RECIPE_TRAIN_EDP = 6, /**< expert data parallel; 0: dense */
  RS_RECIPE_TRAIN_FSDP = 7,
  RS_RECIPE_TRAIN_WORLD = 8,
  RS_RECIPE_INFER_TP = 100,
  RS_RECIPE_INFER_DP = 101,
  RS_RECIPE_INFER_EP = 102,
  RS_RECIPE_INFER_WORLD = 103,
  /* settings (default in brackets) */
  RS_RECIPE_TRAIN_DTYPE = 200,      /**< RS_DTYPE_BF16 (model's) or F32 */
  RS_RECIPE_INFER_DTYPE = 201,      /**< BF16 [model's], F32, F8_E4M3 */
  RS_RECIPE_FP8_BLOCK_ROWS = 202,   /**< [128], 1 .. 65536 */
  RS_RECIPE_FP8_BLOCK_COLS = 203,   /**< [128], 1 .. 65536 */
  RS_RECIPE_FP8_SCALE_RULE = 204,   /**< an rs_scale_rule [RS_SCALE_AMAX] */
  RS_RECIPE_INFER_FIRST_RANK = 205, /**< [train world]; 0: colocated */
  /** [1] Megatron's make_vocab_size_divisible_by: embed_tokens and
   *  lm_head rows padded to a multiple of it x train tp, split evenly;
   *  1: no padding, rows split as torch.chunk splits them (Hugging Face
   *  models under FSDP, Megatron-Bridge's should_pad_vocab=False).
   *  1 .. 65536; spec key "vocab_pad". @since 0.6 */
  RS_RECIPE_TRAIN_VOCAB_PAD = 206,
  /** [64] the engine's vocabulary padding (vLLM's and SGLang's
   *  DEFAULT_VOCAB_PADDING_SIZE): rows padded to a multiple of it, split
   *  evenly over infer tp, which must divide them. 1 .. 65536; spec key
   *  "vocab_pad". @since 0.6 */
  RS_RECIPE_INFER_VOCAB_PAD = 207
} rs_recipe_param;

/** Change a setting (RS_RECIPE_TRAIN_DTYPE and after). Errors:
 *  RS_ERR_NULL_POINTER, RS_ERR_BAD_PARAM (unknown or read-only parameter,
 *  or a value outside its range). @since 0.6 */
RS_API rs_status rs_recipe_set(rs_recipe *recipe, rs_recipe_param param,
                               int64_t value);
/** Read a size or setting. Errors: RS_ERR_NULL_POINTER, RS_ERR_BAD_PARAM.
 *  @since 0.6 */
RS_API rs_status rs_recipe_get(const rs_recipe *recipe, rs_recipe_param param,
                               int64_t *out);
/** The recipe's model (owned by the recipe, valid while it lives).
 *  Errors: RS_ERR_NULL_POINTER. @since 0.6 */
RS_API rs_status rs_recipe_model(const rs_recipe *recipe, const rs_model **out);

/** Why a linear weight stays unquantized with an fp8 engine. Pinned
 *  values. @since 0.6 */
typedef enum rs_fp8_kept {
  RS_FP8_QUANTIZED_OR_PLAIN = 0, /**< quantized, or not a linear weight */
  RS_FP8_KEPT_BLOCKS_CUT = 1,    /**< an engine shard cuts a block */
  RS_FP8_KEPT_FUSED = 2          /**< fused with such a tensor */
} rs_fp8_kept;

/**
 * The dtypes tensor @p tensor has on each side, and whether the engine
 * holds it in fp8 with block scales (a tensor "<name>_scale_inv" of f32).
 * With an fp8 engine, @p kept says why a linear weight stays unquantized,
 * and @p cut (3 values: dim, offset, extent) the first engine shard that
 * cuts a block. Any out-parameter may be NULL. Errors:
 * RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT. @since 0.6
 */
RS_API rs_status rs_recipe_tensor_dtypes(const rs_recipe *recipe, int tensor,
                                         rs_dtype *src, rs_dtype *dst,
                                         int *scaled, rs_fp8_kept *kept,
                                         int64_t *cut);

/**
 * The device mesh tensor @p tensor has on one side: its number of axes
 * and its first rank (rank = first + sum of coordinate x stride). Axes
 * nest left to right (DTensor order). Errors: RS_ERR_NULL_POINTER,
 * RS_ERR_INVALID_ARGUMENT. @since 0.6
 */
RS_API rs_status rs_recipe_mesh(const rs_recipe *recipe, rs_side side,
                                int tensor, int *naxes, int64_t *first_rank);
/**
 * Axis @p axis of that mesh: its name ("tp", "ep", "dp"...; static
 * storage), size, placement (a tensor dim, or RS_REPLICATE) and rank
 * stride. Any out-parameter may be NULL. Errors: RS_ERR_NULL_POINTER,
 * RS_ERR_INVALID_ARGUMENT. @since 0.6
 */
RS_API rs_status rs_recipe_mesh_axis(const rs_recipe *recipe, rs_side side,
                                     int tensor, int axis, const char **name,
                                     int64_t *size, int *placement,
                                     int64_t *stride);

/**
 * Declare every tensor of the recipe in @p layout with the trainer's
 * dtypes, and add the trainer's shards: every rank's (@p rank
 * RS_ALL_RANKS) or only rank @p rank's (a rank that holds nothing on this
 * side, such as an engine rank, adds the declarations alone: what each
 * process adds before rs_layout_allgather). The layout's context must
 * have room for the ranks. On failure the layout is left as it was.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (a negative rank
 * other than RS_ALL_RANKS), those of rs_layout_add_tensor and
 * rs_layout_add_shard (a rank outside the context's).
 * @since 0.6
 */
RS_API rs_status rs_recipe_add_train(rs_layout *layout, const rs_recipe *recipe,
                                     int rank);
/**
 * The same for the engine: every tensor with the engine's dtypes (fp8
 * values with their block-scale tensors and declarations), and the
 * engine's shards with their fused byte offsets; @p rank is a layout rank
 * (RS_RECIPE_INFER_FIRST_RANK + engine rank) or RS_ALL_RANKS.
 * Errors: as rs_recipe_add_train, and those of rs_layout_set_block_scales.
 * @since 0.6
 */
RS_API rs_status rs_recipe_add_infer(rs_layout *layout, const rs_recipe *recipe,
                                     int rank);

/** Number of shards a side adds for @p rank (RS_ALL_RANKS: all ranks).
 *  Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT, RS_ERR_NO_MEMORY.
 *  @since 0.6 */
RS_API rs_status rs_recipe_num_shards(rs_recipe *recipe, rs_side side, int rank,
                                      int64_t *out);
/**
 * Shard @p index of those (in the order the add calls add them): its
 * tensor (when @p scales is 1, the block scales of that tensor), layout
 * rank, box (@p offset, @p extent: ndim values), buffer, byte offset and
 * element strides (ndim values). Any out-parameter may be NULL.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT, RS_ERR_NO_MEMORY.
 * @since 0.6
 */
RS_API rs_status rs_recipe_shard(rs_recipe *recipe, rs_side side, int rank,
                                 int64_t index, int *tensor, int *scales,
                                 int *shard_rank, int64_t *offset,
                                 int64_t *extent, int *buffer,
                                 int64_t *byte_offset, int64_t *strides);

/** Number of buffer ids a side uses (a rank uses some of them).
 *  Errors: RS_ERR_NULL_POINTER. @since 0.6 */
RS_API rs_status rs_recipe_num_buffers(const rs_recipe *recipe, rs_side side,
                                       int *out);
/**
 * Buffer @p buffer of layout rank @p rank: the name the framework gives
 * it (the engine's parameter, e.g. "model.layers.0.self_attn.qkv_proj.weight",
 * "model.layers.3.mlp.experts.w13_weight", and with an fp8 engine the
 * block scales of each, "model.layers.0.self_attn.qkv_proj.weight_scale_inv",
 * packed as vLLM packs them; the trainer's
 * "param_buffer.bf16", "param_buffer.f32"; valid while the recipe lives)
 * and its size in bytes (0 when the rank holds nothing in it).
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (buffer or rank
 * out of range), RS_ERR_NO_MEMORY. @since 0.6
 */
RS_API rs_status rs_recipe_buffer(rs_recipe *recipe, rs_side side, int rank,
                                  int buffer, const char **name,
                                  int64_t *nbytes);

#ifdef __cplusplus
}
#endif

#endif
