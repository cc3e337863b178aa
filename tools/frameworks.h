/* SPDX-License-Identifier: Apache-2.0 */
/* Framework layouts: how a Megatron-style trainer and a vLLM-style
 * inference engine shard every tensor of a catalog model, as device meshes
 * with DTensor placements and explicit rank strides (the launchers' rank
 * orders). */
#ifndef RT_FRAMEWORKS_H
#define RT_FRAMEWORKS_H

#include "catalog.h"

/* Trainer parallelism, Megatron-Core conventions: dense weights over
 * TP x CP x DP per pipeline stage (rank order tp, cp, dp: tp fastest),
 * experts over ETP x EP x EDP (order etp, ep, edp), stages outermost. */
typedef struct rt_train {
  int tp, cp, ep, etp, pp;
  int dp;    /* dense data parallel = stage ranks / (tp*cp) */
  int edp;   /* expert data parallel = stage ranks / (etp*ep) */
  int fsdp;  /* 1: the data-parallel axes shard dim 0 (FSDP / ZeRO-3) */
  int world;
  int given_gpus, given_dp, given_edp; /* what the spec said (0: nothing) */
} rt_train;

/* Inference parallelism, vLLM conventions: rank = dp*tp + tp_rank; with
 * expert parallelism the experts spread over all tp*dp ranks. */
typedef struct rt_infer {
  int tp, dp, ep;
  int world;
  int given_gpus;
} rt_infer;

/* "tp=2,cp=2,ep=16,pp=4" (keys tp cp ep etp pp dp edp gpus fsdp). */
int rt_train_parse(const char *spec, rt_train *out, rt_err *e);
/* "tp=8,dp=16[,ep=128]" (keys tp dp ep gpus). */
int rt_infer_parse(const char *spec, rt_infer *out, rt_err *e);
/* Derive the sizes not given and check them against the model. */
int rt_train_resolve(const rt_model_info *m, rt_train *t, rt_err *e);
int rt_infer_resolve(const rt_model_info *m, rt_infer *t, rt_err *e);
/* "TP1 CP1 EP16 PP4 (DP32, expert-DP2)" */
void rt_train_describe(const rt_train *t, bool moe, char *buf, size_t n);
void rt_infer_describe(const rt_infer *t, bool moe, char *buf, size_t n);

/* A device mesh: axes in nesting order (DTensor: several axes sharding one
 * dim nest left to right), each with a size, a placement (RS_REPLICATE or a
 * tensor dim) and a rank stride; rank = rank0 + sum coord[i]*stride[i]. */
typedef struct rt_mesh {
  int nax;
  int size[RT_MAX_AX];
  int place[RT_MAX_AX];
  int stride[RT_MAX_AX];
  char axis[RT_MAX_AX][8];
  int rank0;
} rt_mesh;

int rt_train_stage_size(const rt_train *t);
/* Pipeline stage of a tensor: layer L on stage L*pp/layers, embed_tokens
 * on the first stage, the other non-layer tensors on the last. */
int rt_train_stage(const rt_model *m, const rt_train *t, int tensor);
void rt_train_mesh(const rt_model *m, const rt_train *t, int tensor,
                   rt_mesh *out);
void rt_infer_mesh(const rt_model *m, const rt_infer *t, int tensor,
                   int rank0, rt_mesh *out);

int rt_mesh_size(const rt_mesh *mesh);
/* Coordinates of mesh index idx (row-major over the axes). */
void rt_mesh_coord(const rt_mesh *mesh, int idx, int coord[RT_MAX_AX]);
int rt_mesh_rank(const rt_mesh *mesh, const int coord[RT_MAX_AX]);
/* The box of coordinate coord; returns 0 when the shard is empty. */
int rt_mesh_box(const rt_mesh *mesh, const rt_tensor *t,
                const int coord[RT_MAX_AX], rt_box *out);
/* Number of axes that shard some dim, and whether every shard is even. */
/* Whether axis a cuts the tensor: it shards a dim over more than one
 * coordinate (a shard's box depends on the coordinates of these alone). */
bool rt_mesh_axis_sharded(const rt_mesh *mesh, int a);
int rt_mesh_shard_axes(const rt_mesh *mesh);
bool rt_mesh_even(const rt_mesh *mesh, const rt_tensor *t);

#endif
