/* SPDX-License-Identifier: Apache-2.0 */
/* The cost model, the same for every strategy: each GPU has four links
 * (NVLink out, NVLink in, NIC out, NIC in) and its own memory, which a copy
 * inside the GPU (bytes a rank already holds, colocated) uses instead of a
 * link. A link's time is the bytes it carries over its bandwidth plus its
 * messages times the per-message latency. A rank that converts dtypes
 * (casts, fp8 quantization) spends that time on top of its slowest link:
 * conversion is not overlapped with the links. So does every call a rank
 * makes (a grouped round of sends and receives, a collective): each costs
 * the cluster's fixed call time, in sequence. The slowest rank sets the
 * time. */
#ifndef RT_COST_H
#define RT_COST_H

#include "cluster.h"

/* RT_COPY: copies inside the GPU, at the cluster's copy_bw, no latency
 * (one kernel copies what a round needs). */
enum {
  RT_NVL_OUT = 0,
  RT_NVL_IN = 1,
  RT_NIC_OUT = 2,
  RT_NIC_IN = 3,
  RT_COPY = 4,
  RT_NLINK = 5
};

/* "NVLink out", "NVLink in", "NIC out", "NIC in", "GPU memory copy" */
const char *rt_link_name(int link);
/* "nvlink_out", ... (JSON keys) */
const char *rt_link_key(int link);

typedef struct rt_load {
  int world;
  double *bytes[RT_NLINK]; /* per rank */
  double *msgs[RT_NLINK];
  double inter, intra;     /* bytes between domains, inside domains */
  double local;            /* bytes copied inside a rank */
  double *convert;         /* per rank: bytes of input it converts (in the
                              source dtype), at the cluster's convert_bw */
  double *calls;           /* per rank: calls it makes, one after another,
                              at the cluster's call_s each */
} rt_load;

void rt_load_init(rt_load *l, int world);
void rt_load_clear(rt_load *l);
void rt_load_free(rt_load *l);
/* bytes and messages from rank src to rank dst: NIC out of src and NIC in
 * of dst when their domains differ, NVLink otherwise; when src == dst a
 * copy inside the GPU (RT_COPY), on no link. */
void rt_load_add(rt_load *l, const int *domain, int src, int dst,
                 double bytes, double msgs);
/* bytes of input (source dtype) rank converts to another dtype */
void rt_load_add_convert(rt_load *l, int rank, double bytes);
/* n more calls of rank */
void rt_load_add_calls(rt_load *l, int rank, double n);
/* l += k * other (bytes and conversions scaled by k, messages and calls
 * not) */
void rt_load_accumulate(rt_load *l, const rt_load *other, double k);

double rt_link_bw(const rt_cluster *c, int link);
double rt_link_lat(const rt_cluster *c, int link);
/* Time of one link: bytes / bandwidth + messages * latency. */
double rt_link_time(const rt_cluster *c, int link, double bytes, double msgs);

/* The slowest rank: its slowest link, how loaded it is, what it
 * converts, and its calls. */
typedef struct rt_hot {
  int rank;      /* -1: no traffic */
  int link;      /* -1: no link: the rank only converts or calls */
  double bytes, msgs, time; /* of the link */
  double mean_time; /* mean over the links of that kind that carry traffic */
  double convert_bytes, convert_time; /* the rank's conversion, after it */
  double calls, calls_time;           /* the rank's calls, after it */
} rt_hot;

/* Time of the conversion of `bytes` of input on one GPU. */
double rt_convert_time(const rt_cluster *c, double bytes);
/* The time of the slowest rank: its slowest link plus its conversion
 * plus its calls. */
double rt_load_time(const rt_load *l, const rt_cluster *c, rt_hot *hot);
/* rt_load_time of l + extra (NULL: none) with the cluster at the ends of
 * its ranges (rt_cluster_at_end): into *low (fast end) and *high. The
 * loads do not depend on the rates, so the ends cost no second walk over
 * a plan. */
void rt_load_time_ends(const rt_load *l, const rt_load *extra,
                       const rt_cluster *c, double *low, double *high);

#endif
