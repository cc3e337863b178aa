/* The cost model, the same for every strategy: each GPU has four links
 * (NVLink out, NVLink in, NIC out, NIC in). A link's time is the bytes it
 * carries over its bandwidth plus its messages times the per-message
 * latency; the slowest link sets the time. */
#ifndef RT_COST_H
#define RT_COST_H

#include "cluster.h"

enum { RT_NVL_OUT = 0, RT_NVL_IN = 1, RT_NIC_OUT = 2, RT_NIC_IN = 3, RT_NLINK = 4 };

/* "NVLink out", "NVLink in", "NIC out", "NIC in" */
const char *rt_link_name(int link);
/* "nvlink_out", ... (JSON keys) */
const char *rt_link_key(int link);

typedef struct rt_load {
  int world;
  double *bytes[RT_NLINK]; /* per rank */
  double *msgs[RT_NLINK];
  double inter, intra;     /* bytes between domains, inside domains */
} rt_load;

void rt_load_init(rt_load *l, int world);
void rt_load_clear(rt_load *l);
void rt_load_free(rt_load *l);
/* bytes and messages from rank src to rank dst: NIC out of src and NIC in
 * of dst when their domains differ, NVLink otherwise; nothing when
 * src == dst. */
void rt_load_add(rt_load *l, const int *domain, int src, int dst,
                 double bytes, double msgs);
/* l += k * other */
void rt_load_accumulate(rt_load *l, const rt_load *other, double k);

double rt_link_bw(const rt_cluster *c, int link);
double rt_link_lat(const rt_cluster *c, int link);
/* Time of one link: bytes / bandwidth + messages * latency. */
double rt_link_time(const rt_cluster *c, int link, double bytes, double msgs);

/* The slowest link, and how loaded it is. */
typedef struct rt_hot {
  int rank;      /* -1: no traffic */
  int link;
  double bytes, msgs, time;
  double mean_time; /* mean over the links of that kind that carry traffic */
} rt_hot;

/* Time of the slowest link over all ranks and links. */
double rt_load_time(const rt_load *l, const rt_cluster *c, rt_hot *hot);

#endif
