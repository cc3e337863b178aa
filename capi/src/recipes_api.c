/* SPDX-License-Identifier: Apache-2.0 */
/* The recipe calls of the public API (reshard/recipes.h): argument checks,
 * then core/recipes (models, parallelisms, shards) and core/layout (adding
 * a side's tensors and shards to a layout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reshard/recipes.h>

#include "api.h"
#include "layout/layout.h"
#include "recipes/recipes.h"

int rs_model_catalog_count(void) { return rsi_catalog_count(); }

const char *rs_model_catalog_name(int index) {
  const rsi_model_info *i = rsi_catalog_at(index);
  return i ? i->name : NULL;
}

rs_status rs_model_from_catalog(const char *name, rs_model **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_model_from_catalog");
  *out = NULL;
  API_REQUIRE(name, err, "rs_model_from_catalog");
  const rsi_model_info *info = rsi_catalog_find(name);
  if (!info) {
    char known[512] = "";
    size_t at = 0;
    for (int i = 0; i < rsi_catalog_count() && at < sizeof known; i++)
      at += (size_t)snprintf(known + at, sizeof known - at, "%s%s",
                             i ? ", " : "", rsi_catalog_at(i)->name);
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "unknown model '%s' (known: %s)", name, known);
  }
  return rsi_model_build(info, out, err);
}

rs_status rs_model_from_config(const char *json, size_t len, rs_model **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_model_from_config");
  *out = NULL;
  API_REQUIRE(json, err, "rs_model_from_config");
  return rsi_model_from_config(json, len, out, err);
}

void rs_model_destroy(rs_model *model) { rsi_model_free(model); }

const char *rs_model_name(const rs_model *model) {
  return model ? model->info.name : "";
}

const char *rs_model_family(const rs_model *model) {
  return model && model->info.family ? model->info.family : "";
}

rs_status rs_model_get(const rs_model *model, rs_model_param param,
                       int64_t *out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_model_get");
  *out = 0;
  API_REQUIRE(model, err, "rs_model_get");
  const rsi_model_info *i = &model->info;
  switch (param) {
    case RS_MODEL_HIDDEN_SIZE:
      *out = i->hidden;
      break;
    case RS_MODEL_NUM_LAYERS:
      *out = i->layers;
      break;
    case RS_MODEL_NUM_HEADS:
      *out = i->heads;
      break;
    case RS_MODEL_NUM_KV_HEADS:
      *out = i->kv_heads;
      break;
    case RS_MODEL_HEAD_DIM:
      *out = i->head_dim;
      break;
    case RS_MODEL_INTERMEDIATE_SIZE:
      *out = i->inter;
      break;
    case RS_MODEL_MOE_INTERMEDIATE_SIZE:
      *out = i->moe_inter;
      break;
    case RS_MODEL_NUM_EXPERTS:
      *out = i->experts;
      break;
    case RS_MODEL_NUM_SHARED_EXPERTS:
      *out = i->shared_experts;
      break;
    case RS_MODEL_FIRST_MOE_LAYER:
      *out = i->first_moe_layer;
      break;
    case RS_MODEL_VOCAB_SIZE:
      *out = i->vocab;
      break;
    case RS_MODEL_QK_NORM:
      *out = i->qk_norm;
      break;
    case RS_MODEL_MLA:
      *out = i->mla;
      break;
    case RS_MODEL_Q_LORA_RANK:
      *out = i->q_lora_rank;
      break;
    case RS_MODEL_KV_LORA_RANK:
      *out = i->kv_lora_rank;
      break;
    case RS_MODEL_QK_NOPE_HEAD_DIM:
      *out = i->qk_nope_dim;
      break;
    case RS_MODEL_QK_ROPE_HEAD_DIM:
      *out = i->qk_rope_dim;
      break;
    case RS_MODEL_V_HEAD_DIM:
      *out = i->v_head_dim;
      break;
    case RS_MODEL_PUBLISHED_PARAMS:
      *out = (int64_t)i->published_params;
      break;
    case RS_MODEL_TIED_EMBEDDINGS:
      *out = i->tied;
      break;
    case RS_MODEL_NUM_FUSED:
      *out = model->nfuse;
      break;
    default:
      return RSI_FAIL(err, RS_ERR_BAD_PARAM,
                      "rs_model_get: unknown parameter %d", (int)param);
  }
  return RS_OK;
}

rs_status rs_model_num_tensors(const rs_model *model, int *out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_model_num_tensors");
  *out = 0;
  API_REQUIRE(model, err, "rs_model_num_tensors");
  *out = model->n;
  return RS_OK;
}

static rs_status tensor_index(const rs_model *model, int tensor, const char *fn,
                              rsi_err *err) {
  if (tensor < 0 || tensor >= model->n)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: tensor %d outside [0, %d)", fn, tensor, model->n);
  return RS_OK;
}

rs_status rs_model_tensor_info(const rs_model *model, int tensor,
                               const char **name, rs_dtype *dtype, int *ndim,
                               int64_t *shape) {
  rsi_err *err = rsi_thread_err();
  if (name) *name = NULL;
  if (dtype) *dtype = (rs_dtype)0;
  if (ndim) *ndim = 0;
  API_REQUIRE(model, err, "rs_model_tensor_info");
  RSI_TRY(tensor_index(model, tensor, "rs_model_tensor_info", err));
  const rsi_rtensor *t = &model->t[tensor];
  if (name) *name = t->name;
  if (dtype) *dtype = t->dtype;
  if (ndim) *ndim = t->ndim;
  if (shape)
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  return RS_OK;
}

rs_status rs_model_tensor_role(const rs_model *model, int tensor,
                               rs_tensor_role *role, int *layer, int *kv,
                               rs_fuse *fuse, int *fuse_group, int *fuse_slot) {
  rsi_err *err = rsi_thread_err();
  if (role) *role = RS_ROLE_EMBED;
  if (layer) *layer = 0;
  if (kv) *kv = 0;
  if (fuse) *fuse = RS_FUSE_NONE;
  if (fuse_group) *fuse_group = 0;
  if (fuse_slot) *fuse_slot = 0;
  API_REQUIRE(model, err, "rs_model_tensor_role");
  RSI_TRY(tensor_index(model, tensor, "rs_model_tensor_role", err));
  const rsi_rtensor *t = &model->t[tensor];
  if (role) *role = t->role;
  if (layer) *layer = t->layer;
  if (kv) *kv = t->kv;
  if (fuse) *fuse = t->fuse;
  if (fuse_group) *fuse_group = t->fuse_group;
  if (fuse_slot) *fuse_slot = t->fuse_slot;
  return RS_OK;
}

/* ---- recipes
 * ------------------------------------------------------------------- */

rs_status rs_recipe_create(const rs_model *model, const char *train,
                           const char *infer, rs_recipe **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_recipe_create");
  *out = NULL;
  API_REQUIRE(model, err, "rs_recipe_create");
  API_REQUIRE(train, err, "rs_recipe_create");
  API_REQUIRE(infer, err, "rs_recipe_create");
  return rsi_recipe_create(model, train, infer, out, err);
}

void rs_recipe_destroy(rs_recipe *recipe) { rsi_recipe_free(recipe); }

rs_status rs_recipe_set(rs_recipe *recipe, rs_recipe_param param,
                        int64_t value) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(recipe, err, "rs_recipe_set");
  bool ok;
  switch (param) {
    case RS_RECIPE_TRAIN_DTYPE:
      ok = value == RS_DTYPE_BF16 || value == RS_DTYPE_F32;
      if (ok) recipe->train_dtype = (rs_dtype)value;
      break;
    case RS_RECIPE_INFER_DTYPE:
      ok = value == RS_DTYPE_BF16 || value == RS_DTYPE_F32 ||
           value == RS_DTYPE_F8_E4M3;
      if (ok) recipe->infer_dtype = (rs_dtype)value;
      break;
    case RS_RECIPE_FP8_BLOCK_ROWS:
    case RS_RECIPE_FP8_BLOCK_COLS:
      ok = value >= 1 && value <= 65536;
      if (ok && param == RS_RECIPE_FP8_BLOCK_ROWS) recipe->block_rows = value;
      if (ok && param == RS_RECIPE_FP8_BLOCK_COLS) recipe->block_cols = value;
      break;
    case RS_RECIPE_FP8_SCALE_RULE:
      ok = value == RS_SCALE_AMAX || value == RS_SCALE_UE8M0;
      if (ok) recipe->rule = (rs_scale_rule)value;
      break;
    case RS_RECIPE_INFER_FIRST_RANK:
      ok = value >= 0 && value <= (1 << 24);
      if (ok) recipe->infer_first = (int)value;
      break;
    case RS_RECIPE_TRAIN_VOCAB_PAD:
      ok = value >= 1 && value <= 65536;
      if (ok) recipe->train.vocab_pad = (int)value;
      break;
    case RS_RECIPE_INFER_VOCAB_PAD: {
      ok = value >= 1 && value <= 65536;
      rsi_infer padded = recipe->infer;
      padded.vocab_pad = (int)value;
      if (ok && rsi_infer_vocab_rows(&recipe->model->info, &padded) % padded.tp)
        return RSI_FAIL(
            err, RS_ERR_BAD_PARAM,
            "rs_recipe_set: infer vocab_pad=%lld leaves %lld "
            "vocabulary rows, which infer tp=%d does not divide "
            "(vLLM refuses it too)",
            (long long)value,
            (long long)rsi_infer_vocab_rows(&recipe->model->info, &padded),
            padded.tp);
      if (ok) recipe->infer = padded;
      break;
    }
    default:
      return RSI_FAIL(err, RS_ERR_BAD_PARAM,
                      "rs_recipe_set: parameter %d is unknown or read-only",
                      (int)param);
  }
  if (!ok)
    return RSI_FAIL(err, RS_ERR_BAD_PARAM,
                    "rs_recipe_set: %lld is not a value parameter %d takes",
                    (long long)value, (int)param);
  for (int t = 0; t < recipe->model->n; t++) {
    rsi_train_mesh(recipe->model, &recipe->train, t, &recipe->smesh[t]);
    rsi_infer_mesh(recipe->model, &recipe->infer, t, recipe->infer_first,
                   &recipe->dmesh[t]);
  }
  rsi_recipe_decide(recipe);
  return RS_OK;
}

rs_status rs_recipe_get(const rs_recipe *recipe, rs_recipe_param param,
                        int64_t *out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_recipe_get");
  *out = 0;
  API_REQUIRE(recipe, err, "rs_recipe_get");
  const rsi_train *t = &recipe->train;
  const rsi_infer *i = &recipe->infer;
  switch (param) {
    case RS_RECIPE_TRAIN_TP:
      *out = t->tp;
      break;
    case RS_RECIPE_TRAIN_CP:
      *out = t->cp;
      break;
    case RS_RECIPE_TRAIN_EP:
      *out = t->ep;
      break;
    case RS_RECIPE_TRAIN_ETP:
      *out = t->etp;
      break;
    case RS_RECIPE_TRAIN_PP:
      *out = t->pp;
      break;
    case RS_RECIPE_TRAIN_DP:
      *out = t->dp;
      break;
    case RS_RECIPE_TRAIN_EDP:
      *out = t->edp;
      break;
    case RS_RECIPE_TRAIN_FSDP:
      *out = t->fsdp;
      break;
    case RS_RECIPE_TRAIN_WORLD:
      *out = t->world;
      break;
    case RS_RECIPE_INFER_TP:
      *out = i->tp;
      break;
    case RS_RECIPE_INFER_DP:
      *out = i->dp;
      break;
    case RS_RECIPE_INFER_EP:
      *out = i->ep;
      break;
    case RS_RECIPE_INFER_WORLD:
      *out = i->world;
      break;
    case RS_RECIPE_TRAIN_DTYPE:
      *out = recipe->train_dtype;
      break;
    case RS_RECIPE_INFER_DTYPE:
      *out = recipe->infer_dtype;
      break;
    case RS_RECIPE_FP8_BLOCK_ROWS:
      *out = recipe->block_rows;
      break;
    case RS_RECIPE_FP8_BLOCK_COLS:
      *out = recipe->block_cols;
      break;
    case RS_RECIPE_FP8_SCALE_RULE:
      *out = recipe->rule;
      break;
    case RS_RECIPE_INFER_FIRST_RANK:
      *out = recipe->infer_first;
      break;
    case RS_RECIPE_TRAIN_VOCAB_PAD:
      *out = t->vocab_pad;
      break;
    case RS_RECIPE_INFER_VOCAB_PAD:
      *out = i->vocab_pad;
      break;
    default:
      return RSI_FAIL(err, RS_ERR_BAD_PARAM,
                      "rs_recipe_get: unknown parameter %d", (int)param);
  }
  return RS_OK;
}

rs_status rs_recipe_model(const rs_recipe *recipe, const rs_model **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_recipe_model");
  *out = NULL;
  API_REQUIRE(recipe, err, "rs_recipe_model");
  *out = recipe->model;
  return RS_OK;
}

rs_status rs_recipe_tensor_dtypes(const rs_recipe *recipe, int tensor,
                                  rs_dtype *src, rs_dtype *dst, int *scaled,
                                  rs_fp8_kept *kept, int64_t *cut) {
  rsi_err *err = rsi_thread_err();
  if (src) *src = (rs_dtype)0;
  if (dst) *dst = (rs_dtype)0;
  if (scaled) *scaled = 0;
  if (kept) *kept = RS_FP8_QUANTIZED_OR_PLAIN;
  if (cut) cut[0] = cut[1] = cut[2] = 0;
  API_REQUIRE(recipe, err, "rs_recipe_tensor_dtypes");
  RSI_TRY(tensor_index(recipe->model, tensor, "rs_recipe_tensor_dtypes", err));
  const rsi_tdtype *td = &recipe->td[tensor];
  if (src) *src = td->src;
  if (dst) *dst = td->dst;
  if (scaled) *scaled = td->scaled;
  if (kept) *kept = td->kept;
  if (cut) memcpy(cut, td->cut, sizeof td->cut);
  return RS_OK;
}

static rs_status mesh_of(const rs_recipe *recipe, rs_side side, int tensor,
                         const char *fn, const rsi_mesh **out, rsi_err *err) {
  *out = NULL;
  if (side != RS_SIDE_SRC && side != RS_SIDE_DST)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: side %d is not "
                    "RS_SIDE_SRC or RS_SIDE_DST",
                    fn, (int)side);
  RSI_TRY(tensor_index(recipe->model, tensor, fn, err));
  *out = side == RS_SIDE_SRC ? &recipe->smesh[tensor] : &recipe->dmesh[tensor];
  return RS_OK;
}

rs_status rs_recipe_mesh(const rs_recipe *recipe, rs_side side, int tensor,
                         int *naxes, int64_t *first_rank) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(naxes, err, "rs_recipe_mesh");
  API_REQUIRE(first_rank, err, "rs_recipe_mesh");
  *naxes = 0;
  *first_rank = 0;
  API_REQUIRE(recipe, err, "rs_recipe_mesh");
  const rsi_mesh *m;
  RSI_TRY(mesh_of(recipe, side, tensor, "rs_recipe_mesh", &m, err));
  *naxes = m->nax;
  *first_rank = m->rank0;
  return RS_OK;
}

rs_status rs_recipe_mesh_axis(const rs_recipe *recipe, rs_side side, int tensor,
                              int axis, const char **name, int64_t *size,
                              int *placement, int64_t *stride) {
  rsi_err *err = rsi_thread_err();
  if (name) *name = NULL;
  if (size) *size = 0;
  if (placement) *placement = 0;
  if (stride) *stride = 0;
  API_REQUIRE(recipe, err, "rs_recipe_mesh_axis");
  const rsi_mesh *m;
  RSI_TRY(mesh_of(recipe, side, tensor, "rs_recipe_mesh_axis", &m, err));
  if (axis < 0 || axis >= m->nax)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_recipe_mesh_axis: axis %d outside [0, %d)", axis,
                    m->nax);
  if (name) *name = m->axis[axis];
  if (size) *size = m->size[axis];
  if (placement) *placement = m->place[axis];
  if (stride) *stride = m->stride[axis];
  return RS_OK;
}

/* ---- adding to a layout
 * -------------------------------------------------------- */

typedef struct add_ctx {
  rs_layout *layout;
  const rs_recipe *r;
  int *index_of;  /* layout index of each tensor */
  int *scales_of; /* layout index of each tensor's scales, or -1 */
} add_ctx;

static rs_status add_one(const rsi_rshard *s, void *arg) {
  add_ctx *a = arg;
  int idx = s->scales ? a->scales_of[s->tensor] : a->index_of[s->tensor];
  return rsi_layout_add_shard_to(a->layout, idx, s->rank, s->off, s->ext,
                                 s->buffer, s->byte_offset, s->strides);
}

static rs_status add_side(rs_layout *layout, const rs_recipe *r, int rank,
                          rs_side side, const char *fn) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(layout, err, fn);
  err = layout->ctx->err;
  API_REQUIRE(r, err, fn);
  if (rank != RS_ALL_RANKS && (rank < 0 || rank >= (1 << 24)))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: rank %d is neither RS_ALL_RANKS nor a rank", fn, rank);
  const rs_model *m = r->model;
  add_ctx a = {layout, r, NULL, NULL};
  a.index_of = malloc(sizeof *a.index_of * 2 * (size_t)(m->n ? m->n : 1));
  if (!a.index_of) return RSI_NOMEM(err);
  a.scales_of = a.index_of + m->n;
  rsi_layout_mark mark = rsi_layout_mark_now(layout);
  rs_status st = RS_OK;
  /* each tensor, and right after it the fp8 scales of its values */
  for (int t = 0; st == RS_OK && t < m->n; t++) {
    const rsi_rtensor *x = &m->t[t];
    const rsi_tdtype *td = &r->td[t];
    a.index_of[t] = layout->ntensors;
    a.scales_of[t] = -1;
    st = rsi_layout_add_tensor(layout, x->name,
                               side == RS_SIDE_SRC ? td->src : td->dst, x->ndim,
                               x->shape);
    if (st != RS_OK || side == RS_SIDE_SRC || !td->scaled) continue;
    char name[RSI_RNAME + 16];
    int64_t zero[RSI_RMAXD] = {0}, shape[RSI_RMAXD], soff[RSI_RMAXD];
    rsi_scale_name(x->name, name, sizeof name);
    rsi_scale_box(x->ndim, zero, x->shape, r->block_rows, r->block_cols, soff,
                  shape);
    a.scales_of[t] = layout->ntensors;
    st = rsi_layout_add_tensor(layout, name, RS_DTYPE_F32, x->ndim, shape);
    if (st == RS_OK)
      st = rsi_layout_set_block_scales(layout, a.index_of[t], a.scales_of[t],
                                       r->block_rows, r->block_cols, r->rule);
  }
  if (st == RS_OK) st = rsi_recipe_shards(r, side, rank, add_one, &a, err);
  free(a.index_of);
  if (st != RS_OK) rsi_layout_roll_back(layout, &mark);
  return st;
}

rs_status rs_recipe_add_train(rs_layout *layout, const rs_recipe *recipe,
                              int rank) {
  return add_side(layout, recipe, rank, RS_SIDE_SRC, "rs_recipe_add_train");
}

rs_status rs_recipe_add_infer(rs_layout *layout, const rs_recipe *recipe,
                              int rank) {
  return add_side(layout, recipe, rank, RS_SIDE_DST, "rs_recipe_add_infer");
}

/* ---- shards and buffers
 * ---------------------------------------------------------- */

static rs_status cached(rs_recipe *r, rs_side side, int rank, const char *fn,
                        const rsi_shard_cache **out, rsi_err *err) {
  *out = NULL;
  if (side != RS_SIDE_SRC && side != RS_SIDE_DST)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: side %d is not "
                    "RS_SIDE_SRC or RS_SIDE_DST",
                    fn, (int)side);
  RSI_TRY(rsi_recipe_cache(r, side, err));
  const rsi_shard_cache *c = &r->cache[side == RS_SIDE_SRC ? 0 : 1];
  if (rank != RS_ALL_RANKS && (rank < 0 || rank >= c->nranks))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: rank %d outside "
                    "[0, %d)",
                    fn, rank, c->nranks);
  *out = c;
  return RS_OK;
}

rs_status rs_recipe_num_shards(rs_recipe *recipe, rs_side side, int rank,
                               int64_t *out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_recipe_num_shards");
  *out = 0;
  API_REQUIRE(recipe, err, "rs_recipe_num_shards");
  const rsi_shard_cache *c;
  RSI_TRY(cached(recipe, side, rank, "rs_recipe_num_shards", &c, err));
  *out = rank == RS_ALL_RANKS ? c->n : c->first[rank + 1] - c->first[rank];
  return RS_OK;
}

rs_status rs_recipe_shard(rs_recipe *recipe, rs_side side, int rank,
                          int64_t index, int *tensor, int *scales,
                          int *shard_rank, int64_t *offset, int64_t *extent,
                          int *buffer, int64_t *byte_offset, int64_t *strides) {
  rsi_err *err = rsi_thread_err();
  if (tensor) *tensor = 0;
  if (scales) *scales = 0;
  if (shard_rank) *shard_rank = 0;
  if (buffer) *buffer = 0;
  if (byte_offset) *byte_offset = 0;
  API_REQUIRE(recipe, err, "rs_recipe_shard");
  const rsi_shard_cache *c;
  RSI_TRY(cached(recipe, side, rank, "rs_recipe_shard", &c, err));
  int64_t n = rank == RS_ALL_RANKS ? c->n : c->first[rank + 1] - c->first[rank];
  if (index < 0 || index >= n)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_recipe_shard: index %lld outside [0, %lld)",
                    (long long)index, (long long)n);
  const rsi_rshard *s =
      &c->s[rank == RS_ALL_RANKS ? index : c->by_rank[c->first[rank] + index]];
  int ndim = recipe->model->t[s->tensor].ndim;
  if (tensor) *tensor = s->tensor;
  if (scales) *scales = s->scales;
  if (shard_rank) *shard_rank = s->rank;
  if (buffer) *buffer = s->buffer;
  if (byte_offset) *byte_offset = s->byte_offset;
  for (int d = 0; d < ndim; d++) {
    if (offset) offset[d] = s->off[d];
    if (extent) extent[d] = s->ext[d];
    if (strides) strides[d] = s->strides[d];
  }
  return RS_OK;
}

rs_status rs_recipe_num_buffers(const rs_recipe *recipe, rs_side side,
                                int *out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_recipe_num_buffers");
  *out = 0;
  API_REQUIRE(recipe, err, "rs_recipe_num_buffers");
  *out = side == RS_SIDE_SRC ? 2 : recipe->ninfer_buffers;
  return RS_OK;
}

rs_status rs_recipe_buffer(rs_recipe *recipe, rs_side side, int rank,
                           int buffer, const char **name, int64_t *nbytes) {
  rsi_err *err = rsi_thread_err();
  if (name) *name = NULL;
  if (nbytes) *nbytes = 0;
  API_REQUIRE(recipe, err, "rs_recipe_buffer");
  if (rank == RS_ALL_RANKS)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_recipe_buffer: give one rank, not RS_ALL_RANKS");
  const rsi_shard_cache *c;
  RSI_TRY(cached(recipe, side, rank, "rs_recipe_buffer", &c, err));
  if (buffer < 0 || buffer >= c->nbuffers)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_recipe_buffer: buffer %d outside [0, %d)", buffer,
                    c->nbuffers);
  static const char *const train_names[] = {"param_buffer.bf16",
                                            "param_buffer.f32"};
  if (name)
    *name =
        side == RS_SIDE_SRC ? train_names[buffer] : recipe->buf_name[buffer];
  if (nbytes)
    *nbytes = c->nbytes[(size_t)rank * (size_t)c->nbuffers + (size_t)buffer];
  return RS_OK;
}
