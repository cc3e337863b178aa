/* SPDX-License-Identifier: Apache-2.0 */
/* A job: a catalog model, a trainer layout, an inference layout, the
 * dtypes of both sides and a cluster, with every rank placed on an NVLink
 * domain. The library's recipe (reshard/recipes.h) says how each side
 * shards and packs every tensor; a job keeps copies of its meshes for the
 * cost model and builds the libreshard layouts from the recipe. */
#ifndef RT_JOB_H
#define RT_JOB_H

#include "catalog.h"
#include "cluster.h"
#include "dtypes.h"
#include "frameworks.h"

typedef enum rt_placement {
  RT_PLACE_SPLIT = 0, /* trainers from domain 0, generators from a fresh domain */
  RT_PLACE_PACKED = 1, /* one run of consecutive ranks over the domains */
  RT_PLACE_COLOCATED = 2 /* trainer rank i and inference rank i are one GPU */
} rt_placement;

typedef struct rt_job {
  rt_model model;
  rs_recipe *recipe; /* the library's layouts of both sides */
  char train_spec[256], infer_spec[256];
  rt_train train;
  rt_infer infer;
  rt_cluster cluster;
  rt_placement placement;
  int domain_gpus; /* job GPUs per domain */
  int world, ntrain, ninfer;
  int infer_first; /* rank of inference rank 0: ntrain, or 0 colocated */
  int *domain;     /* per rank */
  int ndomains;
  int *domain_ranks; /* per domain: job ranks in it */
  rt_mesh *smesh, *dmesh; /* per tensor */
  /* What our plan declares: per tensor the trainer's and the inference
   * side's dtype, and which are fp8 with scales. model.t[].dtype is what
   * a sync without conversion moves (the model's dtype; fp32 when both
   * sides are fp32): the other strategies are priced on it. */
  rt_dtype_spec dtypes;
  rt_tensor_dtype *td;
  rt_dtype_summary dsum;
} rt_job;

typedef struct rt_job_spec {
  const char *model;   /* catalog name or alias */
  const rt_model_info *info; /* or a description (wins over model) */
  const char *train, *infer;
  const rt_cluster *cluster;
  rt_placement placement;
  int domain_gpus;     /* 0: the cluster's job_gpus_per_domain */
} rt_job_spec;

/* Colocated jobs need as many trainer as inference GPUs (world = T = G);
 * otherwise the error names both counts. */
int rt_job_init(rt_job *job, const rt_job_spec *spec, rt_err *e);
void rt_job_free(rt_job *job);
/* Both sides hold the model's dtype after rt_job_init; this sets them from
 * spec (once, before the layouts are built). */
int rt_job_set_dtypes(rt_job *job, const rt_dtype_spec *spec, rt_err *e);
/* A view of job, sharing its model and meshes, whose tensors keep the
 * model's dtype on both sides (the same sync without conversion). Free
 * with rt_job_view_free, before job. */
void rt_job_without_conversion(const rt_job *job, rt_job *view);
void rt_job_view_free(rt_job *view);
bool rt_job_colocated(const rt_job *job);
/* "split", "packed", "colocated" */
const char *rt_placement_name(rt_placement placement);

/* Bytes the inference ranks hold once the sync is done: every destination
 * shard's bytes, fp8 scales included, summed over ranks (what local +
 * intra + inter deliver when nothing converts on the way). */
double rt_job_needed_bytes(const rt_job *job);

/* One shard as a rank holds it in memory. */
typedef struct rt_shard {
  int tensor, rank;
  bool scales; /* the fp8 scales of tensor, not its values */
  rt_box box;
  int buffer;
  int64_t byte_offset;
  int64_t strides[RT_MAXD]; /* elements */
} rt_shard;

typedef void (*rt_shard_fn)(const rt_shard *s, void *arg);
/* Every non-empty shard of a side, with its local memory layout, as the
 * recipe adds them (rs_recipe_shard): trainer ranks keep one contiguous
 * buffer per dtype (Megatron's parameter buffers: 0 bf16, 1 f32) in tensor
 * order; inference ranks one buffer per parameter, fused ones shared
 * (vLLM's qkv_proj, gate_up_proj, fused_qkv_a_proj, w13_weight), and, with
 * fp8, one more buffer holding all the rank's scales, tensor after tensor.
 * Returns the number of shards. */
int64_t rt_job_shards(const rt_job *job, rs_side side, rt_shard_fn fn,
                      void *arg);

/* Build a context (world ranks, domains set) and both layouts. */
int rt_job_layouts(const rt_job *job, rs_context **ctx, rs_layout **src,
                   rs_layout **dst, rt_err *e);

/* Pipeline stage of a tensor on the trainer side (its mesh's first rank
 * over the ranks of a stage). */
int rt_job_stage(const rt_job *job, int tensor);

/* "train r12 (pp0 tp0 dp12 ep12, domain 1)", "infer r140 (dp1 tp4, domain
 * 17)"; colocated: "r3 (train pp0 tp0 dp3 | infer dp0 tp3, domain 0)" */
void rt_job_rank_name(const rt_job *job, int rank, char *buf, size_t n);

/* The distinct boxes of one tensor on one side, each with its holders. */
typedef struct rt_group {
  rt_box box;
  int n;      /* holders */
  int *ranks; /* ascending */
} rt_group;

typedef struct rt_groups {
  rt_group *g;
  int n;
  int *pool;
} rt_groups;

void rt_groups_from_mesh(const rt_mesh *mesh, const rt_tensor *t,
                         rt_groups *out);
void rt_groups_free(rt_groups *g);

#endif
