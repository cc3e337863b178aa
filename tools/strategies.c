/* SPDX-License-Identifier: Apache-2.0 */
/* The strategies of the cost model but gather-and-broadcast
 * (gather_bcast.c): ours, the reference's algorithms, the lower bound.
 * See strategies.h and docs/MODEL.md. */
#include "strategies.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_result_init(rt_result *r, const char *key, const char *label) {
  memset(r, 0, sizeof *r);
  r->key = key;
  r->label = label;
  r->hot.rank = -1;
}

/* ---- ours ----------------------------------------------------------------- */

/* Model tensor index of a plan tensor's name; a scale tensor gives its
 * values' index and *scales true; -1 when the model has no such tensor. */
static int model_tensor(const rt_job *job, int hint, const char *name,
                        bool *scales) {
  *scales = false;
  if (hint < job->model.n && !strcmp(job->model.t[hint].name, name))
    return hint;
  size_t n = strlen(name), sfx = strlen("_scale_inv");
  bool scale_name = n > sfx && !strcmp(name + n - sfx, "_scale_inv");
  for (int i = 0; i < job->model.n; i++) {
    const char *x = job->model.t[i].name;
    if (!strcmp(x, name)) return i;
    if (scale_name && job->td[i].scaled && strlen(x) == n - sfx &&
        !strncmp(x, name, n - sfx)) {
      *scales = true;
      return i;
    }
  }
  return -1;
}

/* Bytes an element of plan tensor t most likely takes on the wire: the
 * narrower dtype, fp8 values as fp8, scales as f32. The plan's per-rank
 * figures are exact; this only splits a sender's bytes over receivers. */
static int64_t nominal_esize(const rt_job *job, int c, bool scales) {
  if (scales) return (int64_t)rs_dtype_size(RS_DTYPE_F32);
  size_t a = rs_dtype_size(job->td[c].src), b = rs_dtype_size(job->td[c].dst);
  return (int64_t)(a < b ? a : b);
}

int rt_strategy_ours(const rt_job *job, const rs_plan *plan, rt_load *load,
                     double *matrix, rt_result *res, double *messages,
                     double *bytes_local, rt_err *e) {
  rt_result_init(res, "ours", "ours (libreshard plan)");
  int nt = 0;
  int64_t nm = 0;
  if (rs_plan_num_tensors(plan, &nt) != RS_OK ||
      rs_plan_num_moves(plan, &nm) != RS_OK)
    return rt_fail(e, "reading the plan: %s", rs_last_error());
  int W = job->world;
  /* Bytes on each link, from the plan's per-rank figures: they count
   * what travels in the dtype it travels in. */
  const rs_stat stat[RT_NLINK] = {RS_STAT_BYTES_SENT_INTRA,
                                  RS_STAT_BYTES_RECV_INTRA,
                                  RS_STAT_BYTES_SENT_INTER,
                                  RS_STAT_BYTES_RECV_INTER,
                                  RS_STAT_BYTES_LOCAL};
  double src_esize = (double)rs_dtype_size(job->dtypes.train);
  for (int r = 0; r < W; r++) {
    for (int k = 0; k < RT_NLINK; k++) {
      int64_t v = 0;
      rs_plan_stat(plan, r, stat[k], &v);
      load->bytes[k][r] += (double)v;
    }
    load->intra += load->bytes[RT_NVL_OUT][r];
    load->inter += load->bytes[RT_NIC_OUT][r];
    load->local += load->bytes[RT_COPY][r];
    /* copies out of relay slots, into staging before a send and out of
     * it after a receive take the GPU's memory too, but are not bytes the
     * rank held */
    const rs_stat copies[] = {RS_STAT_BYTES_COPIED_FROM_RELAY,
                              RS_STAT_BYTES_PACKED, RS_STAT_BYTES_UNPACKED};
    for (size_t k = 0; k < sizeof copies / sizeof *copies; k++) {
      int64_t v = 0;
      rs_plan_stat(plan, r, copies[k], &v);
      load->bytes[RT_COPY][r] += (double)v;
    }
    /* every conversion reads the trainer's dtype */
    int64_t sending = 0, receiving = 0;
    rs_plan_stat(plan, r, RS_STAT_CONVERTED_SENDING, &sending);
    rs_plan_stat(plan, r, RS_STAT_CONVERTED_RECEIVING, &receiving);
    rt_load_add_convert(load, r, (double)(sending + receiving) * src_esize);
  }
  /* Element size of every plan tensor, through its name. */
  int64_t *esize = rt_xmalloc(sizeof *esize * (size_t)(nt ? nt : 1));
  int *ndim = rt_xmalloc(sizeof *ndim * (size_t)(nt ? nt : 1));
  for (int t = 0; t < nt; t++) {
    const char *name = NULL;
    bool scales;
    rs_plan_tensor_info(plan, t, &name, &ndim[t]);
    int c = model_tensor(job, t, name, &scales);
    if (c < 0) {
      free(esize);
      free(ndim);
      return rt_fail(e, "the plan's tensor '%s' is not in the model", name);
    }
    esize[t] = nominal_esize(job, c, scales);
  }
  size_t nmsg = 0;
  int last_src = -1, last_dst = -1, last_round = -1;
  /* A rank's calls are its steps: one group of sends and receives for
   * every (round, stage) it sends or receives in. Moves come in that
   * order, so a rank's last step tells a new one. */
  int64_t *last_step = rt_xmalloc(sizeof *last_step * (size_t)W);
  for (int r = 0; r < W; r++) last_step[r] = -1;
  for (int64_t i = 0; i < nm; i++) {
    int t, src, dst, round, stage;
    rs_route route;
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    rs_plan_move_info(plan, i, &t, &src, &dst, &route, &round, &stage);
    bool copy = route == RS_ROUTE_LOCAL;
    int64_t step = (int64_t)round * 2 + stage;
    for (int end = 0; !copy && end < 2; end++) {
      int rank = end ? dst : src;
      if (last_step[rank] == step) continue;
      last_step[rank] = step;
      rt_load_add_calls(load, rank, 1);
    }
    /* The moves of one message are consecutive (rs_plan_move_info): a
     * message per run of (round, sender, receiver), on the move's link; a
     * local move is a copy in the rank's memory (src == dst). */
    bool fresh = round != last_round || src != last_src || dst != last_dst;
    last_round = round;
    last_src = src;
    last_dst = dst;
    rt_load_add(load, job->domain, src, dst, 0, fresh ? 1 : 0);
    if (copy) continue;
    nmsg += fresh;
    if (!matrix) continue;
    rs_plan_move_box(plan, i, off, ext);
    int64_t v = 1;
    for (int d = 0; d < ndim[t]; d++) v *= ext[d];
    matrix[(size_t)src * (size_t)W + (size_t)dst] += (double)(v * esize[t]);
  }
  /* scale each sender's row to the bytes it really sends */
  for (int r = 0; matrix && r < W; r++) {
    double row = 0, sent = load->bytes[RT_NVL_OUT][r] +
                           load->bytes[RT_NIC_OUT][r];
    for (int d = 0; d < W; d++) row += matrix[(size_t)r * W + d];
    for (int d = 0; row > 0 && d < W; d++)
      matrix[(size_t)r * W + d] *= sent / row;
  }
  free(esize);
  free(ndim);
  free(last_step);
  res->time = rt_load_time(load, &job->cluster, &res->hot);
  rt_load_time_ends(load, NULL, &job->cluster, &res->time_low,
                    &res->time_high);
  res->bytes_inter = load->inter;
  res->bytes_intra = load->intra;
  if (messages) *messages = (double)nmsg;
  if (bytes_local) *bytes_local = load->local;
  snprintf(res->note, sizeof res->note,
           "%zu messages (one per round, sender and receiver)", nmsg);
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
      rt_load_add_calls(pre, ent[m].rank, 1); /* its all-gather */
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

static bool group_holds(const rt_group *g, int rank) {
  int lo = 0, hi = g->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (g->ranks[mid] < rank)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g->n && g->ranks[lo] == rank;
}

/* The calls a rank makes for one tensor of the reference: one reshard
 * call for the tensor where it sends or receives, and a second where it
 * forwards what it received (a leader of the hierarchical scheme), which
 * it can only do once that arrived. role[] is world entries of 0, left
 * so; touched[] has room for the world. */
typedef struct ref_calls {
  char *role;
  int *touched, n;
} ref_calls;

static void take_part(ref_calls *c, int rank, char role) {
  if (!c->role[rank]) c->touched[c->n++] = rank;
  if (role > c->role[rank]) c->role[rank] = role;
}

static void charge_calls(ref_calls *c, rt_load *load) {
  for (int i = 0; i < c->n; i++) {
    rt_load_add_calls(load, c->touched[i], c->role[c->touched[i]]);
    c->role[c->touched[i]] = 0;
  }
  c->n = 0;
}

static void ref_tensor(const rt_job *job, const rt_groups *S,
                       const rt_groups *D, double esize, bool hier,
                       ref_calls *calls, rt_load *load) {
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
          int to = D->g[k].ranks[r];
          int h = S->g[j].ranks[s < S->g[j].n ? s : S->g[j].n - 1];
          if (rt_job_colocated(job) && group_holds(&S->g[j], to)) h = to;
          rt_load_add(load, dom, h, to, (double)rt_box_volume(&piece) * esize,
                      1);
          take_part(calls, h, 1);
          take_part(calls, to, 1);
        }
      }
    free(pos);
    free(cnt);
    charge_calls(calls, load);
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
          take_part(calls, s == 0 ? h : prev, 1);
          take_part(calls, leader, L > 1 || s + 1 < nseg ? 2 : 1);
          for (int r = seg[s]; r < seg[s + 1]; r++) /* NVLink fan-out */
            if (G->ranks[r] != leader) {
              rt_load_add(load, dom, leader, G->ranks[r], bytes, 1);
              take_part(calls, G->ranks[r], 1);
            }
          prev = leader;
        }
      }
    }
  free(seg);
  free(noff);
  free(pos);
  free(cnt);
  charge_calls(calls, load);
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
  rt_result_init(res, hier ? "hierarchical" : "direct",
              hier ? "reference hierarchical" : "direct point-to-point");
  rt_ref_stats st = {0};
  if (hier && rt_job_colocated(job)) {
    res->not_applicable = true;
    snprintf(res->note, sizeof res->note,
             "n/a: the reference (nccl_m2n) has no colocated mode; its "
             "hierarchical scheme needs disjoint trainer and inference "
             "ranks");
    if (stats) *stats = st;
    return;
  }
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
  ref_calls calls = {rt_xcalloc((size_t)job->world, 1),
                     rt_xmalloc(sizeof(int) * (size_t)job->world), 0};
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
    ref_tensor(job, &S, &D, esize * pad, hier, &calls, &phase);
    rt_groups_free(&S);
    rt_groups_free(&D);
    per_stage[rt_job_stage(job, t)]++;
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
  free(calls.role);
  free(calls.touched);
  rt_load_free(&phase);
  rt_hot prehot;
  st.pregather_time = rt_load_time(&pre, &job->cluster, &prehot);
  double main_time = rt_load_time(load, &job->cluster, &res->hot);
  res->time = st.pregather_time + main_time;
  rt_load_time_ends(load, &pre, &job->cluster, &res->time_low,
                    &res->time_high);
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
  if (rt_job_colocated(job)) {
    size_t at = strlen(res->note);
    snprintf(res->note + at, sizeof res->note - at,
             "; colocated: modelled as its point-to-point with a local copy "
             "of what a rank holds");
  }
  rt_load_free(&pre);
  if (stats) *stats = st;
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

/* Elements of box that rank holds on the source side. */
static double held_volume(const rt_groups *S, int rank, const rt_box *box) {
  double held = 0;
  for (int j = 0; j < S->n; j++) {
    rt_box o;
    if (group_holds(&S->g[j], rank) && rt_box_intersect(&S->g[j].box, box, &o))
      held += (double)rt_box_volume(&o);
  }
  return held;
}

double rt_held_bytes(const rt_job *job) {
  double bytes = 0;
  for (int t = 0; rt_job_colocated(job) && t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    rt_groups S, D;
    rt_groups_from_mesh(&job->smesh[t], x, &S);
    rt_groups_from_mesh(&job->dmesh[t], x, &D);
    for (int k = 0; k < D.n; k++)
      for (int h = 0; h < D.g[k].n; h++)
        bytes += held_volume(&S, D.g[k].ranks[h], &D.g[k].box) *
                 (double)rs_dtype_size(job->td[t].dst);
    rt_groups_free(&S);
    rt_groups_free(&D);
  }
  return bytes;
}

void rt_lower_bound(const rt_job *job, rt_result *res) {
  rt_result_init(res, "lower_bound", "lower bound");
  const rt_cluster *c = &job->cluster;
  const int W = job->world, ND = job->ndomains;
  double *need = rt_xcalloc((size_t)W, sizeof *need);
  double *total = rt_xcalloc((size_t)W, sizeof *total);
  double *sole = rt_xcalloc((size_t)W, sizeof *sole);
  double *ingress = rt_xcalloc((size_t)ND, sizeof *ingress);
  double *egress = rt_xcalloc((size_t)ND, sizeof *egress);
  int *stamp = rt_xmalloc(sizeof *stamp * (size_t)ND);
  int *sstamp = rt_xmalloc(sizeof *sstamp * (size_t)ND);
  for (int d = 0; d < ND; d++) stamp[d] = sstamp[d] = -1;
  /* per domain lists of group boxes, rebuilt per tensor */
  int *dcount = rt_xcalloc((size_t)ND, sizeof *dcount);
  int *scount = rt_xcalloc((size_t)ND, sizeof *scount);
  double inter_total = 0, convert = 0;
  for (int t = 0; t < job->model.n; t++) {
    const rt_tensor *x = &job->model.t[t];
    /* on the wire at best in the narrower dtype (fp8: 1 byte; scales are
     * left out, which keeps it a bound) */
    const rt_tensor_dtype *td = &job->td[t];
    size_t a = rs_dtype_size(td->src), b = rs_dtype_size(td->dst);
    double esize = (double)(a < b ? a : b);
    if (td->src != td->dst) convert += (double)rt_tensor_numel(x) * (double)a;
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
        double held = held_volume(&S, r, &G->box);
        need[r] += (v - held) * esize;
        total[r] += v * esize;
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
  /* A rank's links: NVLink, and its NIC where another domain exists to
   * send to or relay through; in a job of one domain every byte moves
   * over NVLink. */
  double both = c->nvl_bw + (ND > 1 ? c->nic_bw : 0), best = 0;
  const char *links = ND > 1 ? "NVLink + NIC" : "NVLink (one domain)";
  char why[256] = "no traffic";
  int hot_rank = -1;
  for (int r = 0; r < W; r++) {
    if (need[r] / both > best) {
      best = need[r] / both;
      hot_rank = r;
      snprintf(why, sizeof why, "rank %d must receive %.2f GB over %s", r,
               need[r] / 1e9, links);
    }
    /* what it holds it gets at best by a copy beside its links: with
     * x bytes over links and y copied, x + y = total, y <= held, the time
     * is max((total - held) / links, total / (links + copy)) */
    if (total[r] / (both + c->copy_bw) > best) {
      best = total[r] / (both + c->copy_bw);
      hot_rank = r;
      snprintf(why, sizeof why,
               "rank %d must fill %.2f GB of inference buffers, at best "
               "copying the %.2f GB it holds beside %s",
               r, total[r] / 1e9, (total[r] - need[r]) / 1e9, links);
    }
    if (sole[r] / both > best) {
      best = sole[r] / both;
      hot_rank = r;
      snprintf(why, sizeof why, "rank %d alone holds %.2f GB others need (%s)",
               r, sole[r] / 1e9, links);
    }
  }
  /* every element that changes dtype is converted at least once, at best
   * spread evenly over all ranks */
  if (rt_convert_time(c, convert / W) > best) {
    best = rt_convert_time(c, convert / W);
    hot_rank = -1;
    snprintf(why, sizeof why,
             "%.2f GB to convert, spread over all %d GPUs at %.0f GB/s each",
             convert / 1e9, W, c->convert_bw / 1e9);
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
  free(total);
  free(sole);
  free(ingress);
  free(egress);
  free(stamp);
  free(sstamp);
  free(dcount);
  free(scount);
}
