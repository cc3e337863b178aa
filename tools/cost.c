/* Link loads and their times. */
#include "cost.h"

#include <stdlib.h>
#include <string.h>

static const char *names[RT_NLINK] = {"NVLink out", "NVLink in", "NIC out",
                                      "NIC in"};
static const char *keys[RT_NLINK] = {"nvlink_out", "nvlink_in", "nic_out",
                                     "nic_in"};

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
}

void rt_load_clear(rt_load *l) {
  for (int k = 0; k < RT_NLINK; k++) {
    memset(l->bytes[k], 0, sizeof(double) * (size_t)l->world);
    memset(l->msgs[k], 0, sizeof(double) * (size_t)l->world);
  }
  l->inter = l->intra = 0;
}

void rt_load_free(rt_load *l) {
  if (!l) return;
  for (int k = 0; k < RT_NLINK; k++) {
    free(l->bytes[k]);
    free(l->msgs[k]);
  }
  memset(l, 0, sizeof *l);
}

void rt_load_add(rt_load *l, const int *domain, int src, int dst,
                 double bytes, double msgs) {
  if (src == dst) return;
  if (domain[src] != domain[dst]) {
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

void rt_load_accumulate(rt_load *l, const rt_load *o, double k) {
  for (int x = 0; x < RT_NLINK; x++)
    for (int r = 0; r < l->world; r++) {
      l->bytes[x][r] += k * o->bytes[x][r];
      l->msgs[x][r] += o->msgs[x][r];
    }
  l->inter += k * o->inter;
  l->intra += k * o->intra;
}

double rt_link_bw(const rt_cluster *c, int link) {
  return link == RT_NIC_OUT || link == RT_NIC_IN ? c->nic_bw : c->nvl_bw;
}

double rt_link_lat(const rt_cluster *c, int link) {
  return link == RT_NIC_OUT || link == RT_NIC_IN ? c->nic_lat : c->nvl_lat;
}

double rt_link_time(const rt_cluster *c, int link, double bytes,
                    double msgs) {
  return bytes / rt_link_bw(c, link) + msgs * rt_link_lat(c, link);
}

double rt_load_time(const rt_load *l, const rt_cluster *c, rt_hot *hot) {
  rt_hot h = {-1, 0, 0, 0, 0, 0};
  double worst = 0;
  for (int k = 0; k < RT_NLINK; k++)
    for (int r = 0; r < l->world; r++) {
      double b = l->bytes[k][r], m = l->msgs[k][r];
      if (b <= 0 && m <= 0) continue;
      double t = rt_link_time(c, k, b, m);
      if (t > worst) {
        worst = t;
        h.rank = r;
        h.link = k;
        h.bytes = b;
        h.msgs = m;
        h.time = t;
      }
    }
  if (h.rank >= 0) {
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
