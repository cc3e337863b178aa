/* SPDX-License-Identifier: Apache-2.0 */
/* The strategies the cost model compares, all on the same links:
 * - ours: the libreshard plan, from its per-rank figures and its moves;
 * - the reference's (NVIDIA nccl_m2n) hierarchical algorithm as it
 *   documents it, and its direct point-to-point algorithm;
 * - gather-and-broadcast as RL frameworks run it, and an ideal variant
 *   (gather_bcast.c); with a dtype change, gather-convert-broadcast;
 * - the lower bound. */
#ifndef RT_STRATEGIES_H
#define RT_STRATEGIES_H

#include "cost.h"
#include "job.h"

typedef struct rt_result {
  const char *key;   /* ours, hierarchical, direct, gb_rl, gb_ideal, lower_bound */
  const char *label;
  double time;       /* seconds */
  /* The same model at the ends of the cluster's ranges (rt_cluster_at_end):
   * time at the fast end, at the slow end. */
  double time_low, time_high;
  double bytes_inter, bytes_intra;
  rt_hot hot;        /* the slowest link (rank -1: not a link figure) */
  bool not_applicable; /* the strategy has no such mode (time 0) */
  char note[512];
} rt_result;

void rt_result_init(rt_result *r, const char *key, const char *label);

/* Our plan: bytes sent and received across domains load NICs, inside a
 * domain NVLink, copied inside a rank its memory (RT_COPY), as the plan's
 * per-rank figures count them (in the dtype that travels); elements a rank
 * converts (RS_STAT_CONVERTED_SENDING + _RECEIVING, read in the trainer's
 * dtype) are its conversion; one message per (round, sender, receiver) of
 * its moves, and one call per (round, stage) a rank sends or receives in
 * (a step of the executor). load must be initialised for job->world;
 * matrix (may be NULL) gets world*world bytes, [src*world + dst] (where
 * dtypes change, each sender's row split by its moves' elements). */
int rt_strategy_ours(const rt_job *job, const rs_plan *plan, rt_load *load,
                     double *matrix, rt_result *res, double *messages,
                     double *bytes_local, rt_err *e);

/* What the reference's layout rules forced for one model. */
typedef struct rt_ref_stats {
  int tensors_adapted;   /* tensors outside its rules */
  int pregathered;       /* source had to be gathered first */
  int coarsened;         /* destination got a superset */
  int padded;            /* uneven shards padded */
  double extra_bytes;    /* bytes beyond the plain algorithm's */
  double pregather_time; /* seconds of the separate pre-gather step */
  /* As the reference's model bench times it: the tensors of one name
   * pattern (layer index replaced by X) run together, patterns one after
   * another with a barrier, and the per-pattern times add up. */
  double phased_time;
  int patterns;
  /* Reshard calls on the critical path of that bench: per pattern, the
   * most tensors one pipeline stage's communicator runs one after
   * another. */
  int serial_calls;
} rt_ref_stats;

/* The reference's algorithms. Colocated, the reference has no mode:
 * hierarchical is marked not applicable, and direct is modelled as its
 * point-to-point with a local copy wherever the destination rank holds the
 * piece itself. hierarchical: node-aware load balance (whole
 * destination domains per source replica), one injection per destination
 * domain at leaders spread over the domain's replicas, a ring across the
 * domains of a replica's range, NVLink fan-out inside each. Otherwise
 * direct: every destination rank fetched from the source replica a
 * uniform load balance gives it. Layouts outside its rules (one sharded
 * mesh axis per side, even shards, at most 16 source shards per
 * destination shard) are first brought inside them: a pre-gather on the
 * source, a coarser destination, padding. Calls: one per tensor a rank
 * sends or receives, two where it forwards what it received, one per
 * pre-gather. */
void rt_strategy_reference(const rt_job *job, bool hierarchical, rt_load *load,
                           rt_result *res, rt_ref_stats *stats);

/* Gather-and-broadcast. rl: per pipeline stage, per bucket of at most
 * bucket_bytes, gather the full tensors on the stage's first rank, then
 * one NCCL broadcast to every inference rank, the two steps in sequence.
 * ideal: the whole model in one perfectly pipelined ring broadcast.
 * Colocated (verl, OpenRLHF, NeMo RL): rl: one ring all-gather of each full
 * tensor over all ranks (each receives what it does not hold), then per
 * bucket every rank copies its inference slice out of the full tensors;
 * ideal: the whole model in one pipelined all-gather, slicing hidden.
 * Calls: one gather and one broadcast a bucket, one all-gather a tensor
 * colocated, one for the ideal. */
void rt_strategy_gather_bcast(const rt_job *job, double bucket_bytes,
                              rt_result *rl, rt_result *ideal);
/* The same as RL frameworks run it with a dtype change (--infer-dtype
 * fp8: gather, then quantize, then broadcast): per bucket the gather in
 * the trainer's dtype, the conversion of the bucket on the gathering rank
 * at the cluster's conversion rate, the broadcast in the inference dtype
 * (fp8 values and their f32 scales), in sequence. Colocated: the
 * all-gather, then each rank converts its slice. These strategies and the
 * reference's price every tensor in job->model's dtype (no conversion);
 * this one and ours in job->td's. */
void rt_strategy_gather_convert_bcast(const rt_job *job, double bucket_bytes,
                                      rt_result *rl);
/* The broadcast rate both variants use, bytes/s. */
double rt_bcast_bw(const rt_job *job);

/* The lower bound: the largest over links of the bytes that must cross
 * them divided by their bandwidth (see docs/MODEL.md for the terms). Bytes
 * a destination rank already holds need no link, only a copy in its own
 * memory, which runs beside its links. With dtypes changing, every
 * element travels in the narrower dtype, and every element is converted
 * once, spread over all ranks. */
void rt_lower_bound(const rt_job *job, rt_result *res);
/* Bytes the inference ranks need that they hold already as trainer ranks
 * (colocated; 0 otherwise): the most a plan can keep on the GPU. */
double rt_held_bytes(const rt_job *job);

#endif
