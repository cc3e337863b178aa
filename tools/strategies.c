/* The strategies of the cost model. See strategies.h and docs/MODEL.md. */
#include "strategies.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void result_init(rt_result *r, const char *key, const char *label) {
  memset(r, 0, sizeof *r);
  r->key = key;
  r->label = label;
  r->hot.rank = -1;
}

/* ---- ours ----------------------------------------------------------------- */

typedef struct key_set {
  uint64_t *k;
  size_t cap, n;
} key_set;

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Insert key (!= 0); true when it was new. */
static bool set_insert(key_set *s, uint64_t key) {
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 1024;
    uint64_t *k = rt_xcalloc(cap, sizeof *k);
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->k[i]) continue;
      size_t j = mix64(s->k[i]) & (cap - 1);
      while (k[j]) j = (j + 1) & (cap - 1);
      k[j] = s->k[i];
    }
    free(s->k);
    s->k = k;
    s->cap = cap;
  }
  size_t j = mix64(key) & (s->cap - 1);
  while (s->k[j]) {
    if (s->k[j] == key) return false;
    j = (j + 1) & (s->cap - 1);
  }
  s->k[j] = key;
  s->n++;
  return true;
}

int rt_strategy_ours(const rt_job *job, const rs_plan *plan, rt_load *load,
                     double *matrix, rt_result *res, double *messages,
                     double *bytes_local, rt_err *e) {
  result_init(res, "ours", "ours (libreshard plan)");
  int nt = 0;
  int64_t nm = 0;
  if (rs_plan_num_tensors(plan, &nt) != RS_OK ||
      rs_plan_num_moves(plan, &nm) != RS_OK)
    return rt_fail(e, "reading the plan: %s", rs_last_error());
  /* Element size of every plan tensor, through its name. */
  int64_t *esize = rt_xmalloc(sizeof *esize * (size_t)(nt ? nt : 1));
  int *ndim = rt_xmalloc(sizeof *ndim * (size_t)(nt ? nt : 1));
  for (int t = 0; t < nt; t++) {
    const char *name = NULL;
    rs_plan_tensor_info(plan, t, &name, &ndim[t]);
    int c = t < job->model.n && !strcmp(job->model.t[t].name, name) ? t : -1;
    for (int i = 0; c < 0 && i < job->model.n; i++)
      if (!strcmp(job->model.t[i].name, name)) c = i;
    if (c < 0) {
      free(esize);
      free(ndim);
      return rt_fail(e, "the plan's tensor '%s' is not in the model", name);
    }
    esize[t] = (int64_t)rs_dtype_size(job->model.t[c].dtype);
  }
  key_set set = {0};
  double local = 0;
  int W = job->world;
  for (int64_t i = 0; i < nm; i++) {
    int t, src, dst, round, fwd;
    rs_route route;
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    rs_plan_move_info(plan, i, &t, &src, &dst, &route, &round, &fwd);
    rs_plan_move_box(plan, i, off, ext);
    int64_t v = 1;
    for (int d = 0; d < ndim[t]; d++) v *= ext[d];
    double bytes = (double)(v * esize[t]);
    if (route == RS_ROUTE_LOCAL) {
      local += bytes;
      continue;
    }
    uint64_t key = ((uint64_t)(round & 0xffffff) << 40) |
                   ((uint64_t)src << 20) | (uint64_t)dst;
    bool fresh = set_insert(&set, key + 1);
    rt_load_add(load, job->domain, src, dst, bytes, fresh ? 1 : 0);
    if (matrix) matrix[(size_t)src * (size_t)W + (size_t)dst] += bytes;
  }
  free(set.k);
  free(esize);
  free(ndim);
  res->time = rt_load_time(load, &job->cluster, &res->hot);
  res->bytes_inter = load->inter;
  res->bytes_intra = load->intra;
  if (messages) *messages = (double)set.n;
  if (bytes_local) *bytes_local = local;
  snprintf(res->note, sizeof res->note,
           "%zu messages (one per round, sender and receiver)", set.n);
  return 0;
}

/* ---- the reference's algorithms -------------------------------------------- */

enum { REF_MAX_SOURCES = 16 };

static int largest_shard_axis(const rt_mesh *m) {
  int best = -1;
  for (int a = 0; a < m->nax; a++)
    if (m->place[a] != RS_REPLICATE && m->size[a] > 1 &&
        (best < 0 || m->size[a] > m->size[best]))
      best = a;
  return best;
}

/* Replicate every shard axis but the largest; flags the converted axes. */
static int keep_one_shard_axis(rt_mesh *m, int *converted) {
  int keep = largest_shard_axis(m), n = 0;
  for (int a = 0; a < m->nax; a++)
    if (a != keep && m->place[a] != RS_REPLICATE && m->size[a] > 1) {
      m->place[a] = RS_REPLICATE;
      if (converted) converted[a] = 1;
      n++;
    }
  return n;
}

/* Axis a of size n becomes an outer axis of n/g shards and an inner,
 * replicated axis of g (the ranks that pre-gather a block of g shards). */
static void split_axis(rt_mesh *m, int a, int g, int *gathered) {
  for (int x = m->nax; x > a + 1; x--) {
    m->size[x] = m->size[x - 1];
    m->place[x] = m->place[x - 1];
    m->stride[x] = m->stride[x - 1];
    memcpy(m->axis[x], m->axis[x - 1], sizeof m->axis[x]);
    gathered[x] = gathered[x - 1];
  }
  m->nax++;
  int n = m->size[a], s = m->stride[a];
  m->size[a] = n / g;
  m->stride[a] = s * g;
  m->size[a + 1] = g;
  m->place[a + 1] = RS_REPLICATE;
  m->stride[a + 1] = s;
  snprintf(m->axis[a + 1], sizeof m->axis[a + 1], "blk");
  gathered[a + 1] = 1;
}

static int max_sources(const rt_groups *S, const rt_groups *D) {
  int worst = 0;
  for (int k = 0; k < D->n; k++) {
    int c = 0;
    for (int j = 0; j < S->n; j++)
      c += rt_box_intersect(&S->g[j].box, &D->g[k].box, NULL);
    if (c > worst) worst = c;
  }
  return worst;
}

static double pad_factor(const rt_mesh *m, const rt_tensor *t) {
  int a = largest_shard_axis(m);
  if (a < 0) return 1;
  int64_t size = t->shape[m->place[a]], n = m->size[a];
  if (size % n == 0) return 1;
  return (double)(((size + n - 1) / n) * n) / (double)size;
}

typedef struct pg_entry {
  int64_t key;
  int rank;
  double recv;
} pg_entry;

static int cmp_pg(const void *x, const void *y) {
  const pg_entry *a = x, *b = y;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Ring all-gather inside each group of ranks that differ only on the
 * gathered axes: each rank receives what its new box adds to its own. */
static double pregather(const rt_job *job, const rt_tensor *t,
                        const rt_mesh *orig, const rt_mesh *adapted,
                        const int *gathered, rt_load *pre) {
  int n = rt_mesh_size(adapted);
  int coord[RT_MAX_AX];
  /* own volume per rank, from the original mesh */
  int lo = job->world, hi = -1;
  for (int i = 0; i < rt_mesh_size(orig); i++) {
    rt_mesh_coord(orig, i, coord);
    int r = rt_mesh_rank(orig, coord);
    if (r < lo) lo = r;
    if (r > hi) hi = r;
  }
  if (hi < lo) return 0;
  double *own = rt_xcalloc((size_t)(hi - lo + 1), sizeof *own);
  for (int i = 0; i < rt_mesh_size(orig); i++) {
    rt_box b;
    rt_mesh_coord(orig, i, coord);
    if (rt_mesh_box(orig, t, coord, &b))
      own[rt_mesh_rank(orig, coord) - lo] = (double)rt_box_volume(&b);
  }
  double esize = (double)rs_dtype_size(t->dtype), total = 0;
  pg_entry *ent = rt_xmalloc(sizeof *ent * (size_t)n);
  for (int i = 0; i < n; i++) {
    rt_box b;
    rt_mesh_coord(adapted, i, coord);
    int64_t key = 0;
    for (int a = 0; a < adapted->nax; a++)
      if (!gathered[a]) key = key * adapted->size[a] + coord[a];
    int r = rt_mesh_rank(adapted, coord);
    double v = rt_mesh_box(adapted, t, coord, &b) ? (double)rt_box_volume(&b) : 0;
    ent[i] = (pg_entry){key, r, (v - own[r - lo]) * esize};
  }
  qsort(ent, (size_t)n, sizeof *ent, cmp_pg);
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && ent[j].key == ent[i].key) j++;
    int g = j - i;
    for (int m = i; g > 1 && m < j; m++) {
      const pg_entry *pred = &ent[m == i ? j - 1 : m - 1];
      if (ent[m].recv > 0) {
        rt_load_add(pre, job->domain, pred->rank, ent[m].rank, ent[m].recv,
                    g - 1);
        total += ent[m].recv;
      }
    }
    i = j;
  }
  free(ent);
  free(own);
  return total;
}

static int uniform_src(int r, int Rs, int Rd) {
  if (Rs > Rd) {
    int per = Rs / Rd, extra = Rs % Rd;
    if (r < extra) return r * (per + 1);
    return extra * (per + 1) + (r - extra) * per;
  }
  if (Rs == Rd) return r;
  int per = Rd / Rs, extra = Rd % Rs, threshold = extra * (per + 1);
  if (r < threshold) return r / (per + 1);
  return extra + (r - threshold) / per;
}

/* Node-aware load balance: the node offsets [*lo, *hi] source replica i
 * serves (empty when *lo > *hi). */
static void node_range(int i, int Rs, int N, int *lo, int *hi) {
  if (Rs >= N) {
    *lo = i;
    *hi = i < N ? i : i - 1;
    return;
  }
  int per = N / Rs, extra = N % Rs;
  if (i < extra) {
    *lo = i * (per + 1);
    *hi = *lo + per;
  } else {
    *lo = extra * (per + 1) + (i - extra) * per;
    *hi = *lo + per - 1;
  }
}

static int leader_index(int pos, int nsrc, int nlocal) {
  if (nlocal <= 0 || nsrc <= 0) return 0;
  int per = nsrc / nlocal, extra = nsrc % nlocal;
  int threshold = extra * (per + 1), idx;
  if (pos < threshold)
    idx = pos / (per + 1);
  else
    idx = extra + (per ? (pos - threshold) / per : 0);
  return idx < nlocal ? idx : nlocal - 1;
}

static void ref_tensor(const rt_job *job, const rt_groups *S,
                       const rt_groups *D, double esize, bool hier,
                       rt_load *load) {
  const int *dom = job->domain;
  int ns = S->n, nd = D->n;
  if (!ns || !nd) return;
  int *pos = rt_xmalloc(sizeof *pos * (size_t)ns * (size_t)nd);
  int *cnt = rt_xcalloc((size_t)nd, sizeof *cnt);
  for (int k = 0; k < nd; k++)
    for (int j = 0; j < ns; j++)
      pos[(size_t)j * nd + k] =
          rt_box_intersect(&S->g[j].box, &D->g[k].box, NULL) ? cnt[k]++ : -1;
  int Rs = S->g[0].n, Rd = D->g[0].n;
  if (!hier) {
    for (int k = 0; k < nd; k++)
      for (int r = 0; r < D->g[k].n; r++) {
        int s = uniform_src(r < Rd ? r : Rd - 1, Rs, Rd);
        for (int j = 0; j < ns; j++) {
          if (pos[(size_t)j * nd + k] < 0) continue;
          rt_box piece;
          rt_box_intersect(&S->g[j].box, &D->g[k].box, &piece);
          int h = S->g[j].ranks[s < S->g[j].n ? s : S->g[j].n - 1];
          rt_load_add(load, dom, h, D->g[k].ranks[r],
                      (double)rt_box_volume(&piece) * esize, 1);
        }
      }
    free(pos);
    free(cnt);
    return;
  }
  /* Node offset of every destination replica, from shard 0's ranks. */
  int first = dom[D->g[0].ranks[0]];
  int *noff = rt_xmalloc(sizeof *noff * (size_t)Rd);
  for (int r = 0; r < Rd; r++) noff[r] = dom[D->g[0].ranks[r]] - first;
  int N = noff[Rd - 1] + 1;
  int *seg = rt_xmalloc(sizeof *seg * (size_t)(Rd + 1));
  for (int j = 0; j < ns; j++)
    for (int i = 0; i < S->g[j].n; i++) {
      int lo, hi;
      node_range(i, Rs, N, &lo, &hi);
      if (lo > hi) continue;
      int a = 0, b;
      while (a < Rd && noff[a] < lo) a++;
      b = a;
      while (b < Rd && noff[b] <= hi) b++;
      if (a >= b) continue;
      int h = S->g[j].ranks[i];
      for (int k = 0; k < nd; k++) {
        int p = pos[(size_t)j * nd + k];
        if (p < 0) continue;
        const rt_group *G = &D->g[k];
        int bb = b < G->n ? b : G->n;
        if (a >= bb) continue;
        rt_box piece;
        rt_box_intersect(&S->g[j].box, &G->box, &piece);
        double bytes = (double)rt_box_volume(&piece) * esize;
        /* Segments of consecutive replicas in one domain, in order. */
        int nseg = 0;
        for (int r = a; r < bb; r++)
          if (r == a || dom[G->ranks[r]] != dom[G->ranks[r - 1]])
            seg[nseg++] = r;
        seg[nseg] = bb;
        int li = leader_index(p, cnt[k], seg[1] - seg[0]);
        int prev = -1;
        for (int s = 0; s < nseg; s++) {
          int L = seg[s + 1] - seg[s];
          int idx = li < L ? li : L - 1;
          int leader = G->ranks[seg[s] + idx];
          /* injection into the first domain, a ring hop into the next */
          rt_load_add(load, dom, s == 0 ? h : prev, leader, bytes, 1);
          for (int r = seg[s]; r < seg[s + 1]; r++) /* NVLink fan-out */
            if (G->ranks[r] != leader)
              rt_load_add(load, dom, leader, G->ranks[r], bytes, 1);
          prev = leader;
        }
      }
    }
  free(seg);
  free(noff);
  free(pos);
  free(cnt);
}

static double dst_volume(const rt_groups *D) {
  double v = 0;
  for (int k = 0; k < D->n; k++)
    v += (double)rt_box_volume(&D->g[k].box) * D->g[k].n;
  return v;
}

/* "model.layers.12.mlp.x" -> "model.layers.X.mlp.x" */
static void pattern_of(const char *name, char *out, size_t n) {
  size_t o = 0;
  const char *p = name;
  while (*p && o + 1 < n) {
    if (!strncmp(p, "layers.", 7)) {
      const char *q = p + 7;
      while (*q >= '0' && *q <= '9') q++;
      if (q > p + 7) {
        o += (size_t)snprintf(out + o, n - o, "layers.X");
        p = q;
        continue;
      }
    }
    out[o++] = *p++;
  }
  out[o < n ? o : n - 1] = '\0';
}

typedef struct pat_key {
  char key[RT_NAME_MAX];
  int tensor;
} pat_key;

static int cmp_pat(const void *x, const void *y) {
  const pat_key *a = x, *b = y;
  int c = strcmp(a->key, b->key);
  return c ? c : (a->tensor > b->tensor) - (a->tensor < b->tensor);
}

void rt_strategy_reference(const rt_job *job, bool hier, rt_load *load,
                           rt_result *res, rt_ref_stats *stats) {
  result_init(res, hier ? "hierarchical" : "direct",
              hier ? "reference hierarchical" : "direct point-to-point");
  rt_ref_stats st = {0};
  rt_load pre, phase;
  rt_load_init(&pre, job->world);
  rt_load_init(&phase, job->world);
  pat_key *order = rt_xmalloc(sizeof *order * (size_t)job->model.n);
  for (int t = 0; t < job->model.n; t++) {
    pattern_of(job->model.t[t].name, order[t].key, sizeof order[t].key);
    order[t].tensor = t;
  }
  qsort(order, (size_t)job->model.n, sizeof *order, cmp_pat);
  int *per_stage = rt_xcalloc((size_t)job->train.pp, sizeof *per_stage);
  for (int o = 0; o < job->model.n; o++) {
    int t = order[o].tensor;
    const rt_tensor *x = &job->model.t[t];
    rt_mesh sm = job->smesh[t], dm = job->dmesh[t];
    int gathered[RT_MAX_AX + 1] = {0};
    bool adapted = false, pregathered = false;
    if (rt_mesh_shard_axes(&sm) > 1) {
      keep_one_shard_axis(&sm, gathered);
      pregathered = true;
    }
    bool coarse = rt_mesh_shard_axes(&dm) > 1;
    if (coarse) keep_one_shard_axis(&dm, NULL);
    rt_groups S, D;
    rt_groups_from_mesh(&sm, x, &S);
    rt_groups_from_mesh(&dm, x, &D);
    /* At most 16 source shards per destination shard: gather blocks of g
     * neighbouring source shards first. */
    int a = largest_shard_axis(&sm);
    if (a >= 0 && max_sources(&S, &D) > REF_MAX_SOURCES &&
        sm.nax < RT_MAX_AX) {
      int n = sm.size[a];
      for (int g = 2; g <= n; g++) {
        if (n % g) continue;
        rt_mesh trial = sm;
        int tg[RT_MAX_AX + 1];
        memcpy(tg, gathered, sizeof tg);
        split_axis(&trial, a, g, tg);
        rt_groups S2;
        rt_groups_from_mesh(&trial, x, &S2);
        if (max_sources(&S2, &D) <= REF_MAX_SOURCES || g == n) {
          sm = trial;
          memcpy(gathered, tg, sizeof tg);
          rt_groups_free(&S);
          S = S2;
          pregathered = true;
          break;
        }
        rt_groups_free(&S2);
      }
    }
    double esize = (double)rs_dtype_size(x->dtype);
    double pad = pad_factor(&sm, x);
    double pd = pad_factor(&dm, x);
    if (pd > pad) pad = pd;
    if (pregathered) {
      double b = pregather(job, x, &job->smesh[t], &sm, gathered, &pre);
      st.extra_bytes += b;
      st.pregathered++;
      adapted = true;
    }
    if (coarse) {
      rt_groups D0;
      rt_groups_from_mesh(&job->dmesh[t], x, &D0);
      st.extra_bytes += (dst_volume(&D) - dst_volume(&D0)) * esize;
      rt_groups_free(&D0);
      st.coarsened++;
      adapted = true;
    }
    if (pad > 1) {
      st.extra_bytes += (pad - 1) * dst_volume(&D) * esize;
      st.padded++;
      adapted = true;
    }
    st.tensors_adapted += adapted;
    ref_tensor(job, &S, &D, esize * pad, hier, &phase);
    rt_groups_free(&S);
    rt_groups_free(&D);
    per_stage[rt_train_stage(&job->model, &job->train, t)]++;
    if (o + 1 == job->model.n || strcmp(order[o + 1].key, order[o].key)) {
      int most = 0;
      for (int s = 0; s < job->train.pp; s++) {
        if (per_stage[s] > most) most = per_stage[s];
        per_stage[s] = 0;
      }
      st.serial_calls += most;
      st.phased_time += rt_load_time(&phase, &job->cluster, NULL);
      st.patterns++;
      rt_load_accumulate(load, &phase, 1);
      rt_load_clear(&phase);
    }
  }
  free(order);
  free(per_stage);
  rt_load_free(&phase);
  rt_hot prehot;
  st.pregather_time = rt_load_time(&pre, &job->cluster, &prehot);
  double main_time = rt_load_time(load, &job->cluster, &res->hot);
  res->time = st.pregather_time + main_time;
  st.phased_time += st.pregather_time;
  res->bytes_inter = load->inter + pre.inter;
  res->bytes_intra = load->intra + pre.intra;
  char tail[160];
  snprintf(tail, sizeof tail,
           "; as its bench times it (%d name patterns in sequence): %.3f s",
           st.patterns, st.phased_time);
  if (st.tensors_adapted)
    snprintf(res->note, sizeof res->note,
             "%d tensors outside its rules (%d pre-gathered, %d coarsened, "
             "%d padded): %.3f s pre-gather + %.3f s transfer%s",
             st.tensors_adapted, st.pregathered, st.coarsened, st.padded,
             st.pregather_time, main_time, tail);
  else
    snprintf(res->note, sizeof res->note,
             "every tensor inside its rules (one sharded axis, even shards, "
             "<= 16 sources)%s",
             tail);
  rt_load_free(&pre);
  if (stats) *stats = st;
}

/* ---- gather and broadcast -------------------------------------------------- */

static int infer_domains(const rt_job *job) {
  int n = 0, last = -1;
  for (int r = job->ntrain; r < job->world; r++)
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
  double net = c->nic_bw * spread;
  bool one_domain = job->ndomains == 1;
  return one_domain || net > c->nvl_bw ? c->nvl_bw : net;
}

/* Latency of one pipelined ring broadcast over the inference ranks. */
static double ring_latency(const rt_job *job, int *crossings) {
  int cross = infer_domains(job);
  int hops = job->ninfer; /* root -> first, ..., -> last */
  if (cross > hops) cross = hops;
  if (crossings) *crossings = cross;
  return cross * job->cluster.nic_lat + (hops - cross) * job->cluster.nvl_lat;
}

void rt_strategy_gather_bcast(const rt_job *job, double bucket_bytes,
                              rt_result *rl, rt_result *ideal) {
  result_init(rl, "gb_rl", "gather+broadcast (RL frameworks)");
  result_init(ideal, "gb_ideal", "gather+broadcast (ideal)");
  const rt_cluster *c = &job->cluster;
  double bw = rt_bcast_bw(job);
  int cross = 0;
  double lat = ring_latency(job, &cross);
  double model = 0;
  for (int t = 0; t < job->model.n; t++)
    model += (double)rt_tensor_bytes(&job->model.t[t]);

  rt_load bucket, all;
  rt_load_init(&bucket, job->world);
  rt_load_init(&all, job->world);
  double total = 0, t_gather = 0, t_bcast = 0;
  int nbuckets = 0;
  int ss = rt_train_stage_size(&job->train);
  for (int s = 0; s < job->train.pp; s++) {
    int root = s * ss;
    double in_bucket = 0;
    for (int t = 0; t <= job->model.n; t++) {
      bool in_stage =
          t < job->model.n && rt_train_stage(&job->model, &job->train, t) == s;
      double tb = in_stage ? (double)rt_tensor_bytes(&job->model.t[t]) : 0;
      bool flush = t == job->model.n ||
                   (in_stage && in_bucket > 0 && in_bucket + tb > bucket_bytes);
      if (flush && in_bucket > 0) {
        double tg = rt_load_time(&bucket, c, NULL);
        double tbc = in_bucket / bw + lat;
        t_gather += tg;
        t_bcast += tbc;
        total += tg + tbc;
        nbuckets++;
        rt_load_accumulate(&all, &bucket, 1);
        rt_load_clear(&bucket);
        in_bucket = 0;
      }
      if (!in_stage) continue;
      in_bucket += tb;
      /* the root gathers every part it lacks, from the nearest, least
       * loaded holder */
      const rt_tensor *x = &job->model.t[t];
      rt_groups S;
      rt_groups_from_mesh(&job->smesh[t], x, &S);
      double esize = (double)rs_dtype_size(x->dtype);
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
              (near == bnear && bucket.bytes[link][r] < bucket.bytes[blink][best]))
            best = r;
        }
        if (!own && best >= 0)
          rt_load_add(&bucket, job->domain, best, root,
                      (double)rt_box_volume(&G->box) * esize, 1);
      }
      rt_groups_free(&S);
    }
  }
  rl->time = total;
  rt_hot gh;
  rt_load_time(&all, c, &gh);
  /* every inference rank receives the whole model; the ring crosses into
   * each inference domain once */
  double bc_inter = model * cross, bc_intra = model * (job->ninfer - cross);
  rl->bytes_inter = all.inter + bc_inter;
  rl->bytes_intra = all.intra + bc_intra;
  char who[128] = "-";
  if (gh.rank >= 0) rt_job_rank_name(job, gh.rank, who, sizeof who);
  snprintf(rl->note, sizeof rl->note,
           "%d buckets: gather %.3f s (busiest: %s of %s, %.1f GB in all) + "
           "broadcast %.3f s at %.0f GB/s, not overlapped",
           nbuckets, t_gather, gh.rank >= 0 ? rt_link_name(gh.link) : "-", who,
           gh.bytes / 1e9, t_bcast, bw / 1e9);
  ideal->time = model / bw + lat;
  ideal->bytes_inter = bc_inter;
  ideal->bytes_intra = bc_intra;
  snprintf(ideal->note, sizeof ideal->note,
           "whole model (%.1f GB) in one pipelined ring broadcast at %.0f "
           "GB/s, gather hidden",
           model / 1e9, bw / 1e9);
  rt_load_free(&bucket);
  rt_load_free(&all);
}

/* ---- lower bound ----------------------------------------------------------- */

/* Volume of the union of boxes[i] clipped to clip (NULL: unclipped). */
static int64_t clipped_union(const rt_box *boxes, int n, const rt_box *clip,
                             rt_box *scratch) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (!clip) {
      scratch[m++] = boxes[i];
    } else if (rt_box_intersect(&boxes[i], clip, &scratch[m])) {
      m++;
    }
  }
  return rt_union_volume(scratch, m);
}

void rt_lower_bound(const rt_job *job, rt_result *res) {
  result_init(res, "lower_bound", "lower bound");
  const rt_cluster *c = &job->cluster;
  const int W = job->world, ND = job->ndomains;
  double *need = rt_xcalloc((size_t)W, sizeof *need);
  double *sole = rt_xcalloc((size_t)W, sizeof *sole);
  double *ingress = rt_xcalloc((size_t)ND, sizeof *ingress);
  double *egress = rt_xcalloc((size_t)ND, sizeof *egress);
  int *stamp = rt_xmalloc(sizeof *stamp * (size_t)ND);
  int *sstamp = rt_xmalloc(sizeof *sstamp * (size_t)ND);
  for (int d = 0; d < ND; d++) stamp[d] = sstamp[d] = -1;
  /* per domain lists of group boxes, rebuilt per tensor */
  int *dcount = rt_xcalloc((size_t)ND, sizeof *dcount);
  int *scount = rt_xcalloc((size_t)ND, sizeof *scount);
  double inter_total = 0;
  for (int t = 0; t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    double esize = (double)rs_dtype_size(x->dtype);
    rt_groups S, D;
    rt_groups_from_mesh(&job->smesh[t], x, &S);
    rt_groups_from_mesh(&job->dmesh[t], x, &D);
    int cap = S.n + D.n + 1;
    rt_box *dbox = rt_xmalloc(sizeof *dbox * (size_t)ND * (size_t)(D.n + 1));
    rt_box *sbox = rt_xmalloc(sizeof *sbox * (size_t)ND * (size_t)(S.n + 1));
    rt_box *scratch = rt_xmalloc(sizeof *scratch * (size_t)cap * (size_t)cap);
    int *touched = rt_xmalloc(sizeof *touched * (size_t)ND);
    int ntouched = 0;
    /* (i) every destination rank receives what it needs and does not hold */
    for (int k = 0; k < D.n; k++) {
      const rt_group *G = &D.g[k];
      double v = (double)rt_box_volume(&G->box);
      for (int h = 0; h < G->n; h++) {
        int r = G->ranks[h];
        double held = 0;
        for (int j = 0; j < S.n; j++)
          for (int q = 0; q < S.g[j].n; q++)
            if (S.g[j].ranks[q] == r) {
              rt_box o;
              if (rt_box_intersect(&S.g[j].box, &G->box, &o))
                held += (double)rt_box_volume(&o);
            }
        need[r] += (v - held) * esize;
        int d = job->domain[r];
        if (stamp[d] != t) {
          stamp[d] = t;
          dcount[d] = 0;
          touched[ntouched++] = d;
        }
        /* distinct boxes only */
        if (dcount[d] == 0 ||
            !rt_box_equal(&dbox[(size_t)d * (D.n + 1) + dcount[d] - 1], &G->box))
          dbox[(size_t)d * (D.n + 1) + dcount[d]++] = G->box;
      }
    }
    for (int j = 0; j < S.n; j++)
      for (int h = 0; h < S.g[j].n; h++) {
        int d = job->domain[S.g[j].ranks[h]];
        if (sstamp[d] != t) {
          sstamp[d] = t;
          scount[d] = 0;
        }
        if (scount[d] == 0 ||
            !rt_box_equal(&sbox[(size_t)d * (S.n + 1) + scount[d] - 1],
                          &S.g[j].box))
          sbox[(size_t)d * (S.n + 1) + scount[d]++] = S.g[j].box;
      }
    /* (ii) each domain's ingress: what its ranks need that no rank in it
     * holds, once */
    for (int i = 0; i < ntouched; i++) {
      int d = touched[i];
      const rt_box *U = &dbox[(size_t)d * (D.n + 1)];
      int nu = dcount[d];
      double want = (double)clipped_union(U, nu, NULL, scratch);
      double have = 0;
      if (sstamp[d] == t) {
        int m = 0;
        const rt_box *Hs = &sbox[(size_t)d * (S.n + 1)];
        for (int u = 0; u < nu; u++)
          for (int q = 0; q < scount[d]; q++)
            if (m < cap * cap && rt_box_intersect(&U[u], &Hs[q], &scratch[m]))
              m++;
        have = (double)rt_union_volume(scratch, m);
      }
      ingress[d] += (want - have) * esize;
      inter_total += (want - have) * esize;
    }
    /* (iii) what only one domain holds must leave it at least once (other
     * domains may relay it further); (iv) what only one rank holds must
     * leave that rank at least once. Needs disjoint source boxes. */
    bool disjoint = true;
    for (int j = 0; j < S.n && disjoint; j++)
      for (int q = j + 1; q < S.n && disjoint; q++)
        disjoint = !rt_box_intersect(&S.g[j].box, &S.g[q].box, NULL);
    for (int j = 0; disjoint && j < S.n; j++) {
      const rt_group *G = &S.g[j];
      int d0 = job->domain[G->ranks[0]];
      bool one = true;
      for (int h = 1; h < G->n; h++) one &= job->domain[G->ranks[h]] == d0;
      if (one) {
        int m = 0;
        for (int k = 0; k < D.n; k++) {
          bool away = false;
          for (int h = 0; h < D.g[k].n && !away; h++)
            away = job->domain[D.g[k].ranks[h]] != d0;
          if (away && rt_box_intersect(&D.g[k].box, &G->box, &scratch[m]))
            m++;
        }
        egress[d0] += (double)rt_union_volume(scratch, m) * esize;
      }
      if (G->n == 1) {
        int hr = G->ranks[0], m = 0;
        for (int k = 0; k < D.n; k++) {
          bool other = false;
          for (int h = 0; h < D.g[k].n && !other; h++)
            other = D.g[k].ranks[h] != hr;
          if (other && rt_box_intersect(&D.g[k].box, &G->box, &scratch[m]))
            m++;
        }
        sole[hr] += (double)rt_union_volume(scratch, m) * esize;
      }
    }
    free(touched);
    free(scratch);
    free(dbox);
    free(sbox);
    rt_groups_free(&S);
    rt_groups_free(&D);
  }
  double both = c->nvl_bw + c->nic_bw, best = 0;
  char why[256] = "no traffic";
  int hot_rank = -1;
  for (int r = 0; r < W; r++) {
    if (need[r] / both > best) {
      best = need[r] / both;
      hot_rank = r;
      snprintf(why, sizeof why,
               "rank %d must receive %.2f GB over NVLink + NIC", r,
               need[r] / 1e9);
    }
    if (sole[r] / both > best) {
      best = sole[r] / both;
      hot_rank = r;
      snprintf(why, sizeof why,
               "rank %d alone holds %.2f GB others need (NVLink + NIC)", r,
               sole[r] / 1e9);
    }
  }
  for (int d = 0; d < ND; d++) {
    double nics = job->domain_ranks[d] * c->nic_bw;
    if (ingress[d] / nics > best) {
      best = ingress[d] / nics;
      hot_rank = -1;
      snprintf(why, sizeof why,
               "domain %d must take in %.2f GB over its %d NICs", d,
               ingress[d] / 1e9, job->domain_ranks[d]);
    }
    if (egress[d] / nics > best) {
      best = egress[d] / nics;
      hot_rank = -1;
      snprintf(why, sizeof why,
               "domain %d alone holds %.2f GB others need, sent over its %d "
               "NICs at least once", d,
               egress[d] / 1e9, job->domain_ranks[d]);
    }
  }
  res->time = best;
  res->bytes_inter = inter_total;
  res->hot.rank = hot_rank;
  snprintf(res->note, sizeof res->note, "%s", why);
  free(need);
  free(sole);
  free(ingress);
  free(egress);
  free(stamp);
  free(sstamp);
  free(dcount);
  free(scount);
}
