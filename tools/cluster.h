/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster descriptions: per-GPU NVLink, network and memory bandwidth,
 * per-message latency, NVLink domain size. Presets are JSON files (tools/clusters/,
 * installed to share/reshard/clusters, and compiled into the tools); any
 * other cluster is a JSON file of the same keys, read with json-c. */
#ifndef RT_CLUSTER_H
#define RT_CLUSTER_H

#include "rt_common.h"

/* A cluster file without convert_gbps converts at this fraction of its
 * hbm_gbps: what one H200 measured (800 GB/s of bf16 input to fp8 through
 * libreshard's CUDA engine, against an HBM line rate of 4800 GB/s). */
#define RT_CONVERT_PER_HBM (800.0 / 4800.0)

typedef struct rt_cluster {
  char name[64];
  char description[256];
  int gpus_per_host;
  int gpus_per_domain;     /* GPUs sharing one NVLink fabric */
  int job_gpus_per_domain; /* GPUs of one job placed in each domain */
  double nic_per_gpu;
  double nvlink_gbps, nvlink_achieved_gbps; /* per GPU, per direction, GB/s */
  double nic_gbps, nic_achieved_gbps;       /* per NIC, per direction, GB/s */
  double nvlink_latency_us, nic_latency_us; /* per message */
  double bcast_gbps;  /* NCCL broadcast rate override; 0: derived */
  int nccl_channels;  /* rings a broadcast spreads its domain crossings over */
  double hbm_gbps, hbm_achieved_gbps; /* GPU memory, per GPU, GB/s */
  double convert_gbps; /* dtype conversion per GPU, GB/s of input read */
  /* What the cost model uses: achieved rates where the reference gives
   * them, line rates otherwise. Bytes per second, seconds. copy_bw: a copy
   * inside one GPU, which reads and writes every byte (HBM rate / 2).
   * convert_bw: a dtype conversion (cast or fp8 quantization), bytes of
   * input per second. */
  double nvl_bw, nic_bw, nvl_lat, nic_lat, copy_bw, convert_bw;
  /* What real syncs pay that the figures above leave out: the fraction of
   * the collective rate (nvlink_achieved_gbps, nic_achieved_gbps) that
   * NCCL point-to-point transfers reach, [0] low and [1] high, from the
   * keys p2p_nvlink_fraction and p2p_nic_fraction (default 1: nothing
   * left out). Collectives (the broadcast) keep coll_nvl_bw, coll_nic_bw:
   * the rates above, before any fraction is applied. */
  double p2p_nvl_frac[2], p2p_nic_frac[2];
  double coll_nvl_bw, coll_nic_bw;
  /* The fixed cost of one call (a grouped round of sends and receives, or
   * a collective), in seconds, [0] low and [1] high, from the key
   * p2p_call_us (default 0: nothing added); call_s: the one in use, the
   * low end but at the slow end of the ranges. */
  double call_range_s[2];
  double call_s;
} rt_cluster;

/* The ends of a prediction's range: RT_END_FAST, the sources' most
 * favourable figures (the lowest time); RT_END_SLOW, their least. */
enum { RT_END_FAST = 0, RT_END_SLOW = 1 };
/* c with its point-to-point rates at one end of their ranges: the same
 * model evaluated with another parameter set. */
void rt_cluster_at_end(const rt_cluster *c, int end, rt_cluster *out);

int rt_cluster_preset_count(void);
const char *rt_cluster_preset_name(int i);
/* A preset by name, or else a JSON file by path. */
int rt_cluster_load(const char *name_or_path, rt_cluster *out, rt_err *e);
/* Parse JSON text; `what` names it in messages ("cluster file x.json"). */
int rt_cluster_parse(const char *text, const char *what, rt_cluster *out,
                     rt_err *e);
int rt_cluster_read_file(const char *path, rt_cluster *out, rt_err *e);

#endif
