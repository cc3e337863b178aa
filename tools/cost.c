/* SPDX-License-Identifier: Apache-2.0 */
/* Link loads and their times. */
#include "cost.h"

#include <stdlib.h>
#include <string.h>

static const char *names[RT_NLINK] = {"NVLink out", "NVLink in", "NIC out",
                                      "NIC in", "GPU memory copy"};
static const char *keys[RT_NLINK] = {"nvlink_out", "nvlink_in", "nic_out",
                                     "nic_in", "gpu_copy"};

const char *rt_link_name(int link) {
  return link >= 0 && link < RT_NLINK ? names[link] : "?";
}

const char *rt_link_key(int link) {
  return link >= 0 && link < RT_NLINK ? keys[link] : "?";
}

void rt_load_init(rt_load *l, int world) {
  memset(l, 0, sizeof *l);
  l->world = world;
  for (int k = 0; k < RT_NLINK; k++) {
    l->bytes[k] = rt_xcalloc((size_t)world, sizeof(double));
    l->msgs[k] = rt_xcalloc((size_t)world, sizeof(double));
  }
  l->convert = rt_xcalloc((size_t)world, sizeof(double));
  l->calls = rt_xcalloc((size_t)world, sizeof(double));
}

void rt_load_clear(rt_load *l) {
  for (int k = 0; k < RT_NLINK; k++) {
    memset(l->bytes[k], 0, sizeof(double) * (size_t)l->world);
    memset(l->msgs[k], 0, sizeof(double) * (size_t)l->world);
  }
  memset(l->convert, 0, sizeof(double) * (size_t)l->world);
  memset(l->calls, 0, sizeof(double) * (size_t)l->world);
  l->inter = l->intra = l->local = 0;
}

void rt_load_free(rt_load *l) {
  if (!l) return;
  for (int k = 0; k < RT_NLINK; k++) {
    free(l->bytes[k]);
    free(l->msgs[k]);
  }
  free(l->convert);
  free(l->calls);
  memset(l, 0, sizeof *l);
}

void rt_load_add(rt_load *l, const int *domain, int src, int dst,
                 double bytes, double msgs) {
  if (src == dst) {
    l->bytes[RT_COPY][src] += bytes;
    l->msgs[RT_COPY][src] += msgs;
    l->local += bytes;
  } else if (domain[src] != domain[dst]) {
    l->bytes[RT_NIC_OUT][src] += bytes;
    l->bytes[RT_NIC_IN][dst] += bytes;
    l->msgs[RT_NIC_OUT][src] += msgs;
    l->msgs[RT_NIC_IN][dst] += msgs;
    l->inter += bytes;
  } else {
    l->bytes[RT_NVL_OUT][src] += bytes;
    l->bytes[RT_NVL_IN][dst] += bytes;
    l->msgs[RT_NVL_OUT][src] += msgs;
    l->msgs[RT_NVL_IN][dst] += msgs;
    l->intra += bytes;
  }
}

void rt_load_add_convert(rt_load *l, int rank, double bytes) {
  l->convert[rank] += bytes;
}

void rt_load_add_calls(rt_load *l, int rank, double n) {
  l->calls[rank] += n;
}

void rt_load_accumulate(rt_load *l, const rt_load *o, double k) {
  for (int x = 0; x < RT_NLINK; x++)
    for (int r = 0; r < l->world; r++) {
      l->bytes[x][r] += k * o->bytes[x][r];
      l->msgs[x][r] += o->msgs[x][r];
    }
  for (int r = 0; r < l->world; r++) {
    l->convert[r] += k * o->convert[r];
    l->calls[r] += o->calls[r];
  }
  l->inter += k * o->inter;
  l->intra += k * o->intra;
  l->local += k * o->local;
}

double rt_link_bw(const rt_cluster *c, int link) {
  if (link == RT_COPY) return c->copy_bw;
  return link == RT_NIC_OUT || link == RT_NIC_IN ? c->nic_bw : c->nvl_bw;
}

double rt_link_lat(const rt_cluster *c, int link) {
  if (link == RT_COPY) return 0;
  return link == RT_NIC_OUT || link == RT_NIC_IN ? c->nic_lat : c->nvl_lat;
}

double rt_link_time(const rt_cluster *c, int link, double bytes,
                    double msgs) {
  return bytes / rt_link_bw(c, link) + msgs * rt_link_lat(c, link);
}

double rt_convert_time(const rt_cluster *c, double bytes) {
  return bytes > 0 ? bytes / c->convert_bw : 0;
}

double rt_load_time(const rt_load *l, const rt_cluster *c, rt_hot *hot) {
  rt_hot h = {-1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  double worst = 0;
  for (int r = 0; r < l->world; r++) {
    int link = -1;
    double slowest = 0;
    for (int k = 0; k < RT_NLINK; k++) {
      double b = l->bytes[k][r], m = l->msgs[k][r];
      if (b <= 0 && m <= 0) continue;
      double t = rt_link_time(c, k, b, m);
      if (t > slowest) {
        slowest = t;
        link = k;
      }
    }
    double conv = rt_convert_time(c, l->convert[r]);
    double calls = l->calls[r] * c->call_s, total = slowest + conv + calls;
    /* between equal ranks, the first link in the order NVLink out,
     * NVLink in, NIC out, NIC in, copy; then the lowest rank */
    bool tie = total == worst && h.rank >= 0 && link >= 0 &&
               (h.link < 0 || link < h.link);
    if (total > worst || tie) {
      worst = total;
      h.rank = r;
      h.link = link;
      h.bytes = link >= 0 ? l->bytes[link][r] : 0;
      h.msgs = link >= 0 ? l->msgs[link][r] : 0;
      h.time = slowest;
      h.convert_bytes = l->convert[r];
      h.convert_time = conv;
      h.calls = l->calls[r];
      h.calls_time = calls;
    }
  }
  if (h.link >= 0) {
    double sum = 0;
    int n = 0;
    for (int r = 0; r < l->world; r++) {
      double b = l->bytes[h.link][r], m = l->msgs[h.link][r];
      if (b <= 0 && m <= 0) continue;
      sum += rt_link_time(c, h.link, b, m);
      n++;
    }
    h.mean_time = n ? sum / n : 0;
  }
  if (hot) *hot = h;
  return worst;
}

void rt_load_time_ends(const rt_load *l, const rt_load *extra,
                       const rt_cluster *c, double *low, double *high) {
  double t[2];
  for (int end = 0; end < 2; end++) {
    rt_cluster at;
    rt_cluster_at_end(c, end, &at);
    t[end] = rt_load_time(l, &at, NULL) +
             (extra ? rt_load_time(extra, &at, NULL) : 0);
  }
  *low = t[RT_END_FAST];
  *high = t[RT_END_SLOW];
}
