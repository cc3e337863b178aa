/* SPDX-License-Identifier: Apache-2.0 */
/* The language bindings' view of libreshard: the C API recast so that one
 * SWIG interface (reshard.i) serves Python, Go and Lua without per-language
 * pointer typemaps.
 *
 * - Every call that can fail takes an rsw_result first and fills it: the
 *   status, its name, the detailed message (copied in the same C call, so
 *   it is right whatever thread or goroutine runs next), and the call's
 *   output (a handle or an integer). The language layer turns a failed
 *   result into its own error.
 * - Integer arrays travel as rsw_ints, a small vector the language fills
 *   element by element (exact 64-bit integers in every language).
 * - rsw_buffer is memory allocated by C: Go may hand it to a plan (cgo
 *   forbids C keeping Go pointers), Lua reads and writes its elements.
 *   Python and torch memory is bound by address instead.
 *
 * Plain C11 over the public headers only; compiled into each language's
 * extension. Not part of libreshard's ABI. */
#ifndef RESHARD_SWIG_RSW_H
#define RESHARD_SWIG_RSW_H

#include <stddef.h>
#include <stdint.h>

#include <reshard/recipes.h>
#include <reshard/reshard.h>

typedef struct rsw_result {
  int status;         /* rs_status; 0 = RS_OK */
  int64_t value;      /* an integer output */
  double real;        /* a floating-point output */
  void *handle;       /* a handle output (context, layout, plan) */
  char name[48];      /* rs_status_name(status) */
  char message[1024]; /* the detail, "" on success */
} rsw_result;

rsw_result *rsw_result_new(void);
void rsw_result_free(rsw_result *r);
/* The handle output as its type, for every language alike (SWIG passes an
 * untyped void * on as nothing else). NULL when the call made none. */
rs_context *rsw_result_context(const rsw_result *r);
rs_layout *rsw_result_layout(const rsw_result *r);
rs_plan *rsw_result_plan(const rsw_result *r);
rs_model *rsw_result_model(const rsw_result *r);
rs_recipe *rsw_result_recipe(const rsw_result *r);

/* ---- integer vectors ---------------------------------------------------- */
typedef struct rsw_ints rsw_ints;
rsw_ints *rsw_ints_new(void);
void rsw_ints_free(rsw_ints *v);
void rsw_ints_clear(rsw_ints *v);
/* Appends x; returns 0, or -1 when out of memory. */
int rsw_ints_push(rsw_ints *v, int64_t x);
int64_t rsw_ints_len(const rsw_ints *v);
/* Element i, or 0 outside [0, len). */
int64_t rsw_ints_get(const rsw_ints *v, int64_t i);

/* ---- buffers allocated by C ---------------------------------------------- */
typedef struct rsw_buffer rsw_buffer;
/* `bytes` zeroed bytes, 64-byte aligned; NULL when out of memory. */
rsw_buffer *rsw_buffer_new(int64_t bytes);
void rsw_buffer_free(rsw_buffer *b);
/* The buffer a call made (rsw_layout_serialize), as rsw_result_context. */
rsw_buffer *rsw_result_buffer(const rsw_result *r);
int64_t rsw_buffer_size(const rsw_buffer *b);
/* The address, as an integer (for bind and for views). */
uint64_t rsw_buffer_address(const rsw_buffer *b);
void rsw_buffer_fill(rsw_buffer *b, int byte);
/* Element `index` of an array of `dtype` laid over the buffer, read as an
 * integer into value (integer and bool dtypes; u64 as its bit pattern) or
 * a double into real (f16, bf16, f32, f64, widened exactly). A wrong dtype
 * or an index out of range fails (RS_ERR_INVALID_ARGUMENT). */
void rsw_buffer_get_int(rsw_result *r, const rsw_buffer *b, int dtype,
                        int64_t index);
void rsw_buffer_get_float(rsw_result *r, const rsw_buffer *b, int dtype,
                          int64_t index);
void rsw_buffer_set_int(rsw_result *r, rsw_buffer *b, int dtype,
                        int64_t index, int64_t value);
/* Float dtypes round to nearest even (f16, bf16, f32). */
void rsw_buffer_set_float(rsw_result *r, rsw_buffer *b, int dtype,
                          int64_t index, double value);

/* ---- library ------------------------------------------------------------- */
const char *rsw_version(void);
const char *rsw_status_name(int status);
const char *rsw_dtype_name(int dtype);
int64_t rsw_dtype_size(int dtype);

/* ---- logging (rs_log_*, since 0.6): the process's level and subsystems;
 * where the lines go is each language's (Python: rsw_py_log_route) ------ */
void rsw_log_set_level(rsw_result *r, int level, int64_t subsystems);
int rsw_log_level(void);
int64_t rsw_log_subsystems(void);

/* ---- contexts (value: world size, rank, ... as noted) --------------------- */
void rsw_context_create_local(rsw_result *r, int world_size);
void rsw_context_create_mpi(rsw_result *r, int64_t fortran_comm);
/* id: RS_NCCL_UNIQUE_ID_BYTES bytes in a buffer made by rsw_nccl_unique_id */
void rsw_nccl_unique_id(rsw_result *r, rsw_buffer *id);
void rsw_context_create_nccl_id(rsw_result *r, const rsw_buffer *id,
                                int rank, int world_size, int device);
void rsw_context_create_nccl_comm(rsw_result *r, uint64_t comm);
void rsw_context_create_nccl_devices(rsw_result *r, const rsw_ints *devices);
void rsw_context_destroy(rs_context *ctx);
void rsw_context_world_size(rsw_result *r, const rs_context *ctx);
void rsw_context_rank(rsw_result *r, const rs_context *ctx);
void rsw_context_transport(rsw_result *r, const rs_context *ctx);
void rsw_context_set_domain(rsw_result *r, rs_context *ctx, int rank,
                            int domain);
void rsw_context_get_domain(rsw_result *r, const rs_context *ctx, int rank);
void rsw_context_set_domain_size(rsw_result *r, rs_context *ctx, int size);
void rsw_context_set_param(rsw_result *r, rs_context *ctx, int param,
                           int64_t value);
void rsw_context_get_param(rsw_result *r, const rs_context *ctx, int param);
void rsw_context_abort(rs_context *ctx);

/* ---- layouts -------------------------------------------------------------- */
void rsw_layout_create(rsw_result *r, rs_context *ctx);
void rsw_layout_destroy(rs_layout *layout);
void rsw_layout_add_tensor(rsw_result *r, rs_layout *layout, const char *name,
                           int dtype, const rsw_ints *shape);
/* strides: empty for a dense box */
void rsw_layout_add_shard(rsw_result *r, rs_layout *layout, const char *name,
                          int rank, const rsw_ints *offset,
                          const rsw_ints *extent, int buffer,
                          int64_t byte_offset, const rsw_ints *strides);
void rsw_layout_add_dtensor(rsw_result *r, rs_layout *layout,
                            const char *name, const rsw_ints *mesh_shape,
                            const rsw_ints *mesh_ranks,
                            const rsw_ints *placements, int buffer,
                            int64_t byte_offset);
/* offset and extent are cleared and filled */
void rsw_dtensor_local_box(rsw_result *r, const rsw_ints *shape,
                           const rsw_ints *mesh_shape,
                           const rsw_ints *placements, const rsw_ints *coord,
                           rsw_ints *offset, rsw_ints *extent);
/* rs_layout_add_dtensor_strided; split_factors: empty for all 1, else one
 * per mesh axis; order: an rs_strided_order. Since 0.6. */
void rsw_layout_add_dtensor_strided(rsw_result *r, rs_layout *layout,
                                    const char *name,
                                    const rsw_ints *mesh_shape,
                                    const rsw_ints *mesh_ranks,
                                    const rsw_ints *placements,
                                    const rsw_ints *split_factors, int order,
                                    int buffer, int64_t byte_offset);
/* rs_dtensor_local_boxes, every box at once: local_shape gets ndim
 * entries, offsets, extents and local_offsets ndim per box (all cleared
 * first, and left empty on failure); value: the number of boxes. Since
 * 0.6. */
void rsw_dtensor_local_boxes(rsw_result *r, const rsw_ints *shape,
                             const rsw_ints *mesh_shape,
                             const rsw_ints *placements,
                             const rsw_ints *split_factors, int order,
                             const rsw_ints *coord, rsw_ints *local_shape,
                             rsw_ints *offsets, rsw_ints *extents,
                             rsw_ints *local_offsets);
void rsw_layout_num_tensors(rsw_result *r, const rs_layout *layout);
void rsw_layout_num_shards(rsw_result *r, const rs_layout *layout);
/* The wire bytes in a new buffer (handle: an rsw_buffer to free). */
void rsw_layout_serialize(rsw_result *r, const rs_layout *layout);
void rsw_layout_deserialize(rsw_result *r, rs_layout *layout,
                            const rsw_buffer *bytes);
void rsw_layout_allgather(rsw_result *r, rs_layout *layout);
/* Tensor values (f8_e4m3) is quantized in blocks of block_rows x block_cols
 * with one f32 scale per block in tensor scales; rule: RS_SCALE_AMAX or
 * RS_SCALE_UE8M0 (since 0.4). */
void rsw_layout_set_block_scales(rsw_result *r, rs_layout *layout,
                                 const char *values, const char *scales,
                                 int64_t block_rows, int64_t block_cols,
                                 int rule);

/* ---- plans ---------------------------------------------------------------- */
void rsw_plan_create(rsw_result *r, const rs_layout *src,
                     const rs_layout *dst);
void rsw_plan_destroy(rs_plan *plan);
void rsw_plan_stat(rsw_result *r, const rs_plan *plan, int rank, int stat);
void rsw_plan_num_moves(rsw_result *r, const rs_plan *plan);
void rsw_plan_num_tensors(rsw_result *r, const rs_plan *plan);
/* value: the fingerprint's 64 bits as a signed integer */
void rsw_plan_fingerprint(rsw_result *r, const rs_plan *plan);
/* The JSON text (caller frees the string: SWIG does, %newobject). */
char *rsw_plan_to_json(rsw_result *r, const rs_plan *plan);
void rsw_plan_bind(rsw_result *r, rs_plan *plan, int side, int rank,
                   int buffer, uint64_t address, uint64_t bytes, int memory,
                   int device);
void rsw_plan_bind_buffer(rsw_result *r, rs_plan *plan, int side, int rank,
                          int buffer, rsw_buffer *b);
void rsw_plan_execute(rsw_result *r, rs_plan *plan);
void rsw_plan_execute_async(rsw_result *r, rs_plan *plan, uint64_t queue);
/* value: 1 once done */
void rsw_plan_test(rsw_result *r, rs_plan *plan);
void rsw_plan_wait(rsw_result *r, rs_plan *plan);

/* ---- recipes (reshard/recipes.h, since 0.6) --------------------------------
 */
int rsw_model_catalog_count(void);
/* NULL outside [0, count) */
const char *rsw_model_catalog_name(int index);
/* A model from the text of a config.json, or the catalog's (handle). */
void rsw_model_from_config(rsw_result *r, const char *json);
void rsw_model_from_catalog(rsw_result *r, const char *name);
void rsw_model_destroy(rs_model *model);
const char *rsw_model_name(const rs_model *model);
void rsw_model_num_tensors(rsw_result *r, const rs_model *model);
/* Tensor `tensor`'s Hugging Face name (NULL on failure); r->value its
 * dtype, `shape` its shape. */
const char *rsw_model_tensor_info(rsw_result *r, const rs_model *model,
                                  int tensor, rsw_ints *shape);
/* value: the fact (an rs_model_param) */
void rsw_model_get(rsw_result *r, const rs_model *model, int param);
/* The trainer and engine specs resolved against the model (handle). */
void rsw_recipe_create(rsw_result *r, const rs_model *model, const char *train,
                       const char *infer);
void rsw_recipe_destroy(rs_recipe *recipe);
void rsw_recipe_set(rsw_result *r, rs_recipe *recipe, int param, int64_t value);
/* value: a size or setting (an rs_recipe_param) */
void rsw_recipe_get(rsw_result *r, const rs_recipe *recipe, int param);
/* rank: a layout rank of the side, or RS_ALL_RANKS */
void rsw_recipe_add_train(rsw_result *r, rs_layout *layout,
                          const rs_recipe *recipe, int rank);
void rsw_recipe_add_infer(rsw_result *r, rs_layout *layout,
                          const rs_recipe *recipe, int rank);
void rsw_recipe_num_buffers(rsw_result *r, const rs_recipe *recipe, int side);
/* The framework's name of buffer `buffer` of layout rank `rank` (NULL on
 * failure; valid while the recipe lives); value: its size in bytes. */
const char *rsw_recipe_buffer(rsw_result *r, rs_recipe *recipe, int side,
                              int rank, int buffer);
/* value: the number of shards a side adds for `rank` (or RS_ALL_RANKS) */
void rsw_recipe_num_shards(rsw_result *r, rs_recipe *recipe, int side,
                           int rank);
/* Shard `index` of those: its tensor's name (NULL on failure; valid while
 * the recipe lives), and into `fields` the tensor, scales (0/1), layout
 * rank, buffer, byte offset, the dtype the side holds it in, ndim, then
 * ndim offsets, extents, strides. */
const char *rsw_recipe_shard(rsw_result *r, rs_recipe *recipe, int side,
                             int rank, int64_t index, rsw_ints *fields);

#endif
