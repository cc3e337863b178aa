/* SPDX-License-Identifier: Apache-2.0 */
/* Gather-and-broadcast as RL frameworks run it, its ideal variant, and the
 * same with a dtype conversion (gather, quantize or cast, broadcast).
 * Colocated, the all-gather-and-slice that colocated frameworks run. See
 * strategies.h and docs/MODEL.md. */
#include "strategies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one tensor costs: bytes an element while gathering (what the
 * trainer holds), bytes an element once converted (what the inference
 * ranks hold), bytes of its fp8 scales, and whether it converts. */
typedef struct gb_tensor {
  double gather_esize, dst_esize, scale_bytes;
  bool converts;
} gb_tensor;

/* Plain: every tensor in the dtype a sync without conversion moves. With
 * conversion: as our plan declares them. */
static gb_tensor *tensor_sizes(const rt_job *job, bool convert) {
  gb_tensor *g = rt_xcalloc((size_t)job->model.n, sizeof *g);
  for (int t = 0; t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    const rt_tensor_dtype *td = &job->td[t];
    if (!convert) {
      g[t].gather_esize = g[t].dst_esize = (double)rs_dtype_size(x->dtype);
      continue;
    }
    g[t].gather_esize = (double)rs_dtype_size(td->src);
    g[t].dst_esize = (double)rs_dtype_size(td->dst);
    g[t].converts = td->src != td->dst;
    g[t].scale_bytes =
        rt_tensor_dst_bytes(x, td, &job->dtypes) -
        (double)rt_tensor_numel(x) * g[t].dst_esize;
  }
  return g;
}

static int infer_domains(const rt_job *job) {
  int n = 0, last = -1;
  for (int r = job->infer_first; r < job->infer_first + job->ninfer; r++)
    if (job->domain[r] != last) {
      n++;
      last = job->domain[r];
    }
  return n;
}

double rt_bcast_bw(const rt_job *job) {
  const rt_cluster *c = &job->cluster;
  if (c->bcast_gbps > 0) return c->bcast_gbps * 1e9;
  /* The ring enters every inference domain once per channel; channels
   * spread the crossings over up to nccl_channels NICs of a domain. */
  int spread = job->domain_gpus < c->nccl_channels ? job->domain_gpus
                                                    : c->nccl_channels;
  /* a collective: the collective rates, whatever point-to-point reaches */
  double net = c->coll_nic_bw * spread;
  bool one_domain = job->ndomains == 1;
  return one_domain || net > c->coll_nvl_bw ? c->coll_nvl_bw : net;
}

/* Latency of one pipelined ring broadcast over the inference ranks. */
static double ring_latency(const rt_job *job, int *crossings) {
  int cross = infer_domains(job);
  int hops = job->ninfer; /* root -> first, ..., -> last */
  if (cross > hops) cross = hops;
  if (crossings) *crossings = cross;
  return cross * job->cluster.nic_lat + (hops - cross) * job->cluster.nvl_lat;
}

/* Elements of tensor x each rank holds on one side, times esize (per
 * rank, added to). */
static void add_held(const rt_mesh *mesh, const rt_tensor *x, double esize,
                     double *held) {
  rt_groups G;
  rt_groups_from_mesh(mesh, x, &G);
  for (int k = 0; k < G.n; k++)
    for (int h = 0; h < G.g[k].n; h++)
      held[G.g[k].ranks[h]] += (double)rt_box_volume(&G.g[k].box) * esize;
  rt_groups_free(&G);
}

static double max_of(const double *v, int n, int *at) {
  double m = 0;
  if (at) *at = -1;
  for (int i = 0; i < n; i++)
    if (v[i] > m) {
      m = v[i];
      if (at) *at = i;
    }
  return m;
}

/* Colocated: an NCCL ring all-gather of each full tensor over all ranks in
 * rank order (rank r receives from r-1 what it does not hold), then each
 * rank copies its inference slice out of the full tensors, per bucket,
 * converting it (at the conversion rate) where the dtype changes. */
static void allgather_and_slice(const rt_job *job, const gb_tensor *sz,
                                double bucket_bytes, rt_result *rl,
                                rt_result *ideal) {
  const rt_cluster *c = &job->cluster;
  const int W = job->world;
  double bw = rt_bcast_bw(job);
  int cross = 0;
  for (int r = 0; W > 1 && r < W; r++)
    cross += job->domain[r] != job->domain[(r + W - 1) % W];
  double lat = W > 1 ? cross * c->nic_lat + (W - 1 - cross) * c->nvl_lat : 0;
  double *held = rt_xcalloc((size_t)W, sizeof *held);
  double *slice = rt_xcalloc((size_t)W, sizeof *slice); /* seconds */
  double *recv = rt_xcalloc((size_t)W, sizeof *recv);
  double *recv_all = rt_xcalloc((size_t)W, sizeof *recv_all);
  double t_gather = 0, t_slice = 0, in_bucket = 0, model = 0;
  double inter = 0, intra = 0, converted = 0;
  int nbuckets = 0, gathered = 0;
  for (int t = 0; t <= job->model.n; t++) {
    double tb = t < job->model.n
                    ? (double)rt_tensor_numel(&job->model.t[t]) *
                          sz[t].gather_esize
                    : 0;
    if (in_bucket > 0 && (t == job->model.n || in_bucket + tb > bucket_bytes)) {
      t_slice += max_of(slice, W, NULL);
      memset(slice, 0, sizeof *slice * (size_t)W);
      nbuckets++;
      in_bucket = 0;
    }
    if (t == job->model.n) break;
    const rt_tensor *x = &job->model.t[t];
    model += tb;
    in_bucket += tb;
    memset(held, 0, sizeof *held * (size_t)W);
    add_held(&job->smesh[t], x, sz[t].gather_esize, held);
    /* the slice: a copy, or a conversion reading the gathered dtype */
    memset(recv, 0, sizeof *recv * (size_t)W);
    add_held(&job->dmesh[t], x, sz[t].gather_esize, recv);
    for (int r = 0; r < W; r++) {
      slice[r] += sz[t].converts ? rt_convert_time(c, recv[r])
                                 : recv[r] / c->copy_bw;
      if (sz[t].converts) converted += recv[r];
    }
    for (int r = 0; r < W; r++) {
      recv[r] = tb - held[r] > 0 ? tb - held[r] : 0;
      recv_all[r] += recv[r];
      if (job->domain[r] != job->domain[(r + W - 1) % W])
        inter += recv[r];
      else
        intra += recv[r];
    }
    double most = max_of(recv, W, NULL);
    if (most > 0) {
      t_gather += most / bw + lat + c->call_s; /* one all-gather call */
      gathered++;
    }
  }
  int busiest = -1;
  double most = max_of(recv_all, W, &busiest);
  char who[128] = "-";
  if (busiest >= 0) rt_job_rank_name(job, busiest, who, sizeof who);
  rl->time = t_gather + t_slice;
  rl->bytes_inter = inter;
  rl->bytes_intra = intra;
  if (converted > 0)
    snprintf(rl->note, sizeof rl->note,
             "colocated: %d tensors all-gathered over %d ranks, one ring "
             "each: %.3f s at %.0f GB/s (busiest: %s receives %.1f GB) + "
             "slicing and converting (%.1f GB of input in all at %.0f GB/s "
             "a GPU) %.3f s in %d buckets, not overlapped",
             gathered, W, t_gather, bw / 1e9, who, most / 1e9,
             converted / 1e9, c->convert_bw / 1e9, t_slice, nbuckets);
  else
    snprintf(rl->note, sizeof rl->note,
             "colocated: %d tensors all-gathered over %d ranks, one ring "
             "each: %.3f s at %.0f GB/s (busiest: %s receives %.1f GB) + "
             "slicing %.3f s in %d buckets at %.0f GB/s, not overlapped",
             gathered, W, t_gather, bw / 1e9, who, most / 1e9, t_slice,
             nbuckets, c->copy_bw / 1e9);
  if (ideal) {
    ideal->bytes_inter = inter;
    ideal->bytes_intra = intra;
    ideal->time = most > 0 ? most / bw + lat + c->call_s : 0;
    snprintf(ideal->note, sizeof ideal->note,
             "colocated: whole model (%.1f GB) in one pipelined ring "
             "all-gather at %.0f GB/s, slicing hidden",
             model / 1e9, bw / 1e9);
  }
  free(held);
  free(slice);
  free(recv);
  free(recv_all);
}

/* The root of the stage gathers every part of x it lacks, from the
 * nearest, least loaded holder, into bucket. */
static void gather_tensor(const rt_job *job, int t, double esize, int root,
                          rt_load *bucket) {
  const rt_tensor *x = &job->model.t[t];
  rt_groups S;
  rt_groups_from_mesh(&job->smesh[t], x, &S);
  for (int j = 0; j < S.n; j++) {
    const rt_group *G = &S.g[j];
    int best = -1;
    bool own = false;
    for (int h = 0; h < G->n && !own; h++) {
      int r = G->ranks[h];
      if (r == root) {
        own = true;
        break;
      }
      bool near = job->domain[r] == job->domain[root];
      int link = near ? RT_NVL_OUT : RT_NIC_OUT;
      if (best < 0) {
        best = r;
        continue;
      }
      bool bnear = job->domain[best] == job->domain[root];
      int blink = bnear ? RT_NVL_OUT : RT_NIC_OUT;
      if ((near && !bnear) ||
          (near == bnear && bucket->bytes[link][r] < bucket->bytes[blink][best]))
        best = r;
    }
    if (!own && best >= 0)
      rt_load_add(bucket, job->domain, best, root,
                  (double)rt_box_volume(&G->box) * esize, 1);
  }
  rt_groups_free(&S);
}

/* Per pipeline stage, per bucket: gather on the stage's first rank, then
 * (with conversion) convert the bucket there, then broadcast it; the steps
 * in sequence. */
static void gather_then_bcast(const rt_job *job, const gb_tensor *sz,
                              double bucket_bytes, rt_result *rl,
                              rt_result *ideal) {
  const rt_cluster *c = &job->cluster;
  double bw = rt_bcast_bw(job);
  int cross = 0;
  double lat = ring_latency(job, &cross);
  double sent = 0; /* bytes every inference rank receives */
  for (int t = 0; t < job->model.n; t++)
    sent += (double)rt_tensor_numel(&job->model.t[t]) * sz[t].dst_esize +
            sz[t].scale_bytes;

  rt_load bucket, all;
  rt_load_init(&bucket, job->world);
  rt_load_init(&all, job->world);
  double total = 0, t_gather = 0, t_convert = 0, t_bcast = 0, converted = 0;
  int nbuckets = 0;
  int ss = rt_train_stage_size(&job->train);
  for (int s = 0; s < job->train.pp; s++) {
    int root = s * ss;
    double in_bucket = 0, to_send = 0, to_convert = 0;
    for (int t = 0; t <= job->model.n; t++) {
      bool in_stage = t < job->model.n && rt_job_stage(job, t) == s;
      double numel = in_stage ? (double)rt_tensor_numel(&job->model.t[t]) : 0;
      double tb = in_stage ? numel * sz[t].gather_esize : 0;
      bool flush = t == job->model.n ||
                   (in_stage && in_bucket > 0 && in_bucket + tb > bucket_bytes);
      if (flush && in_bucket > 0) {
        /* a call to gather the bucket, and one to broadcast it */
        double tg = rt_load_time(&bucket, c, NULL) + c->call_s;
        double tq = rt_convert_time(c, to_convert);
        double tbc = to_send / bw + lat + c->call_s;
        t_gather += tg;
        t_convert += tq;
        t_bcast += tbc;
        total += tg + tq + tbc;
        converted += to_convert;
        nbuckets++;
        rt_load_accumulate(&all, &bucket, 1);
        rt_load_clear(&bucket);
        in_bucket = to_send = to_convert = 0;
      }
      if (!in_stage) continue;
      in_bucket += tb;
      to_send += numel * sz[t].dst_esize + sz[t].scale_bytes;
      if (sz[t].converts) to_convert += tb;
      gather_tensor(job, t, sz[t].gather_esize, root, &bucket);
    }
  }
  rl->time = total;
  rt_hot gh;
  rt_load_time(&all, c, &gh);
  /* every inference rank receives the whole model; the ring crosses into
   * each inference domain once */
  double bc_inter = sent * cross, bc_intra = sent * (job->ninfer - cross);
  rl->bytes_inter = all.inter + bc_inter;
  rl->bytes_intra = all.intra + bc_intra;
  char who[128] = "-";
  if (gh.rank >= 0) rt_job_rank_name(job, gh.rank, who, sizeof who);
  const char *busiest = gh.link >= 0 ? rt_link_name(gh.link) : "-";
  if (converted > 0)
    snprintf(rl->note, sizeof rl->note,
             "%d buckets: gather %.3f s (busiest: %s of %s, %.1f GB in all) "
             "+ convert %.3f s (%.1f GB of input on the gathering ranks at "
             "%.0f GB/s) + broadcast %.3f s (%.1f GB, %s) at %.0f GB/s, not "
             "overlapped",
             nbuckets, t_gather, busiest, who, gh.bytes / 1e9, t_convert,
             converted / 1e9, c->convert_bw / 1e9, t_bcast, sent / 1e9,
             job->dtypes.infer == RS_DTYPE_F8_E4M3 ? "fp8 values and scales"
                                                   : "converted",
             bw / 1e9);
  else
    snprintf(rl->note, sizeof rl->note,
             "%d buckets: gather %.3f s (busiest: %s of %s, %.1f GB in all) "
             "+ broadcast %.3f s at %.0f GB/s, not overlapped",
             nbuckets, t_gather, busiest, who, gh.bytes / 1e9, t_bcast,
             bw / 1e9);
  if (ideal) {
    ideal->time = sent / bw + lat + c->call_s;
    ideal->bytes_inter = bc_inter;
    ideal->bytes_intra = bc_intra;
    snprintf(ideal->note, sizeof ideal->note,
             "whole model (%.1f GB) in one pipelined ring broadcast at %.0f "
             "GB/s, gather hidden",
             sent / 1e9, bw / 1e9);
  }
  rt_load_free(&bucket);
  rt_load_free(&all);
}

void rt_strategy_gather_bcast(const rt_job *job, double bucket_bytes,
                              rt_result *rl, rt_result *ideal) {
  rt_result_init(rl, "gb_rl", "gather+broadcast (RL frameworks)");
  rt_result_init(ideal, "gb_ideal", "gather+broadcast (ideal)");
  gb_tensor *sz = tensor_sizes(job, false);
  if (rt_job_colocated(job))
    allgather_and_slice(job, sz, bucket_bytes, rl, ideal);
  else
    gather_then_bcast(job, sz, bucket_bytes, rl, ideal);
  free(sz);
}

void rt_strategy_gather_convert_bcast(const rt_job *job, double bucket_bytes,
                                      rt_result *rl) {
  bool fp8 = job->dsum.quantized > 0;
  rt_result_init(rl, "gb_convert",
                 fp8 ? "gather, quantize, broadcast (RL)"
                     : "gather, cast, broadcast (RL)");
  gb_tensor *sz = tensor_sizes(job, true);
  if (rt_job_colocated(job))
    allgather_and_slice(job, sz, bucket_bytes, rl, NULL);
  else
    gather_then_bcast(job, sz, bucket_bytes, rl, NULL);
  free(sz);
}
