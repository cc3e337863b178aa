/* SPDX-License-Identifier: Apache-2.0 */
/* Framework layouts as the CLI sees them: the library's recipes
 * (reshard/recipes.h) parse the trainer and engine specs, derive their
 * sizes and give every tensor's device mesh (DTensor placements and rank
 * strides); these are plain copies for the cost model, and the geometry
 * of a mesh (coordinates, boxes, evenness) the cost model walks. */
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

/* The sizes a recipe resolved (rs_recipe_get). */
void rt_train_read(const rs_recipe *r, rt_train *out);
void rt_infer_read(const rs_recipe *r, rt_infer *out);
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
/* The mesh tensor has on one side of a recipe (rs_recipe_mesh). */
void rt_recipe_mesh(const rs_recipe *r, rs_side side, int tensor, rt_mesh *out);

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
