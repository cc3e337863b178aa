/* SPDX-License-Identifier: Apache-2.0 */
/* The MPI harness (mpi_harness.h): case bookkeeping, the layout model,
 * buffers and their values, one end-to-end transfer. */
#include "mpi_harness.h"

#include "th_util.h"
#include "th_value.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int h_rank, h_np;
int64_t h_elems_checked, h_moves_planned, h_executions, h_rounds_max;
static int passed, failed;

static void init_after_mpi(void);

void h_init(int *argc, char ***argv) {
  MPI_Init(argc, argv);
  init_after_mpi();
}

int h_init_thread(int *argc, char ***argv, int required) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, required, &provided);
  init_after_mpi();
  return provided;
}

static void init_after_mpi(void) {
  MPI_Comm_rank(MPI_COMM_WORLD, &h_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &h_np);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (h_np > 64) { /* the cases size rank lists for 64 */
    if (h_rank == 0) printf("these tests take at most 64 ranks, not %d\n", h_np);
    MPI_Finalize();
    exit(2);
  }
}

int h_finish(void) {
  if (h_rank == 0) printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  MPI_Finalize();
  return failed ? 1 : 0;
}

/* ---- case results --------------------------------------------------- */

bool h_expect(hcase *c, bool ok, const char *fmt, ...) {
  if (ok) return true;
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->failed = true;
  }
  return false;
}

bool h_status(hcase *c, rs_status st, rs_status want, const rs_context *ctx,
              const char *what) {
  return EXPECT(c, st == want, "%s: %s (want %s): %s", what,
                rs_status_name(st), rs_status_name(want),
                ctx ? rs_context_last_error(ctx) : rs_last_error());
}

bool h_ok(hcase *c, rs_status st, const rs_context *ctx, const char *what) {
  return h_status(c, st, RS_OK, ctx, what);
}

bool h_all_ok(hcase *c) {
  int mine = c->failed, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return !any;
}

bool h_run_case(const hcase_def *def) {
  hcase c = {0};
  def->fn(&c);
  int mine = c.failed ? h_rank : h_np, first = h_np;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == h_np) {
    passed++;
    if (h_rank == 0) printf("PASS %s\n", def->name);
    return true;
  }
  failed++;
  char why[sizeof c.why];
  memcpy(why, c.why, sizeof why);
  if (first != 0) {
    if (h_rank == first)
      MPI_Send(c.why, (int)sizeof c.why, MPI_CHAR, 0, 77, MPI_COMM_WORLD);
    if (h_rank == 0)
      MPI_Recv(why, (int)sizeof why, MPI_CHAR, first, 77, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  }
  why[sizeof why - 1] = '\0';
  /* Which ranks failed, for the record. */
  int *all = malloc((size_t)h_np * sizeof *all);
  int mine_failed = c.failed;
  if (!all) abort();
  MPI_Gather(&mine_failed, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (h_rank == 0) {
    char ranks[256] = "";
    int n = 0, count = 0;
    for (int r = 0; r < h_np; r++)
      if (all[r] && n < (int)sizeof ranks - 16) {
        n += snprintf(ranks + n, sizeof ranks - (size_t)n, "%s%d",
                      count ? "," : "", r);
        count++;
      }
    printf("FAIL %s: [rank %d] %s (failed on %d of %d ranks: %s)\n",
           def->name, first, why, count, h_np, ranks);
  }
  free(all);
  return false;
}

/* ---- small tools ------------------------------------------------------ */

bool h_mentions_rank(const char *text, int r) {
  char pat[32];
  int n = snprintf(pat, sizeof pat, "rank %d", r);
  for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat))
    if (p[n] < '0' || p[n] > '9') return true;
  return false;
}

double h_now(void) { return MPI_Wtime(); }

void h_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

rs_status h_context(MPI_Comm comm, int64_t timeout_ms, rs_context **out) {
  rs_status st = rs_context_create_mpi(comm, out);
  if (st == RS_OK && timeout_ms > 0)
    st = rs_context_set_param(*out, RS_PARAM_TIMEOUT_MS, timeout_ms);
  return st;
}

uint64_t h_rand(hrng *r) { return th_rand(&r->s); }

long h_vmrss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kib = strtol(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}

int64_t h_range(hrng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(h_rand(r) % (uint64_t)(hi - lo + 1));
}

/* ---- model ------------------------------------------------------------ */

void h_model_init(hmodel *m) { memset(m, 0, sizeof *m); }

void h_model_free(hmodel *m) {
  free(m->s[0]);
  free(m->s[1]);
  memset(m, 0, sizeof *m);
}

int h_tensor(hmodel *m, const char *name, rs_dtype dtype, int ndim,
             const int64_t *shape) {
  if (m->nt >= H_MAXT) abort();
  htensor *t = &m->t[m->nt];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  return m->nt++;
}

static int64_t shard_end(const hmodel *m, const hshard *s) {
  const htensor *t = &m->t[s->tensor];
  int64_t reach = 0, dense = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t st = s->strided ? s->str[d] : dense;
    reach += (s->ext[d] - 1) * st;
    dense *= s->ext[d];
  }
  return s->byte_offset + (reach + 1) * (int64_t)rs_dtype_size(t->dtype);
}

int64_t h_buffer_end(const hmodel *m, int side, int rank, int buffer) {
  int64_t end = 0;
  for (int i = 0; i < m->ns[side]; i++) {
    const hshard *s = &m->s[side][i];
    if (s->rank != rank || s->buffer != buffer) continue;
    int64_t e = shard_end(m, s);
    if (e > end) end = e;
  }
  return end;
}

void h_shard(hmodel *m, int side, int tensor, int rank, const int64_t *off,
             const int64_t *ext, int buffer, int64_t byte_offset, int64_t gap,
             const int64_t *strides) {
  if (buffer < 0 || buffer >= H_MAXB) abort();
  if (m->ns[side] == m->cap[side]) {
    int cap = m->cap[side] ? 2 * m->cap[side] : 32;
    hshard *s = realloc(m->s[side], (size_t)cap * sizeof *s);
    if (!s) abort();
    m->s[side] = s;
    m->cap[side] = cap;
  }
  hshard *s = &m->s[side][m->ns[side]];
  memset(s, 0, sizeof *s);
  int nd = m->t[tensor].ndim;
  s->tensor = tensor;
  s->rank = rank;
  s->buffer = buffer;
  memcpy(s->off, off, (size_t)nd * sizeof *off);
  memcpy(s->ext, ext, (size_t)nd * sizeof *ext);
  s->strided = strides != NULL;
  if (strides) memcpy(s->str, strides, (size_t)nd * sizeof *strides);
  if (byte_offset == H_APPEND) {
    int64_t end = h_buffer_end(m, side, rank, buffer), al = m->align;
    byte_offset = (al > 1 ? (end + al - 1) / al * al : end) + gap;
  }
  s->byte_offset = byte_offset;
  m->ns[side]++;
}

rs_status h_dtensor(hmodel *m, int side, int tensor, int mesh_ndim,
                    const int64_t *mesh_shape, const int *mesh_ranks,
                    const int *placements, int buffer) {
  const htensor *t = &m->t[tensor];
  int64_t n = 1, coord[RS_MAX_DIMS] = {0};
  for (int a = 0; a < mesh_ndim; a++) n *= mesh_shape[a];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i;
    for (int a = mesh_ndim - 1; a >= 0; a--) {
      coord[a] = rest % mesh_shape[a];
      rest /= mesh_shape[a];
    }
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    rs_status st = rs_dtensor_local_box(t->ndim, t->shape, mesh_ndim,
                                        mesh_shape, placements, coord, off, ext);
    if (st != RS_OK) return st;
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) empty |= ext[d] == 0;
    if (!empty)
      h_shard(m, side, tensor, mesh_ranks[i], off, ext, buffer, H_APPEND, 0,
              NULL);
  }
  return RS_OK;
}

rs_status h_dtensor_1d(hmodel *m, int side, int tensor, int first, int n,
                       int placement, int buffer) {
  int ranks[64];
  if (n > 64) abort();
  for (int i = 0; i < n; i++) ranks[i] = first + i;
  int64_t shape = n;
  return h_dtensor(m, side, tensor, 1, &shape, ranks, &placement, buffer);
}

int h_a2a(hmodel *m, const char *name, rs_dtype dtype, int block,
          int shift) {
  int64_t n = (int64_t)block * h_np;
  int t = h_tensor(m, name, dtype, 2, (int64_t[]){n, n});
  for (int r = 0; r < h_np; r++) {
    int64_t lo = (int64_t)block * r + (r >= 1 ? shift : 0);
    int64_t hi = (int64_t)block * (r + 1) + (r == 0 ? shift : 0);
    h_shard(m, RS_SIDE_SRC, t, r, (int64_t[]){(int64_t)block * r, 0},
            (int64_t[]){block, n}, 0, 0, 0, NULL);
    h_shard(m, RS_SIDE_DST, t, r, (int64_t[]){0, lo}, (int64_t[]){n, hi - lo},
            0, 0, 0, NULL);
  }
  return t;
}

bool h_rank_holds(const hmodel *m, int side, int rank) {
  for (int i = 0; i < m->ns[side]; i++)
    if (m->s[side][i].rank == rank) return true;
  return false;
}

rs_status h_layout(rs_context *ctx, const hmodel *m, int side, int flags,
                   rs_layout **out) {
  rs_layout *l = NULL;
  rs_status st = rs_layout_create(ctx, &l);
  for (int t = 0; st == RS_OK && t < m->nt; t++) {
    if (flags & H_DECLARE_USED) {
      bool used = false;
      for (int i = 0; i < m->ns[side]; i++)
        used |= m->s[side][i].tensor == t && m->s[side][i].rank == h_rank;
      if (!used) continue;
    }
    st = rs_layout_add_tensor(l, m->t[t].name, m->t[t].dtype, m->t[t].ndim,
                              m->t[t].shape);
  }
  /* In rank order, as rs_layout_allgather merges. */
  for (int r = 0; st == RS_OK && r < h_np; r++) {
    if ((flags & H_OWN) && r != h_rank) continue;
    for (int i = 0; st == RS_OK && i < m->ns[side]; i++) {
      const hshard *s = &m->s[side][i];
      if (s->rank != r) continue;
      st = rs_layout_add_shard(l, m->t[s->tensor].name, s->rank, s->off,
                               s->ext, s->buffer, s->byte_offset,
                               s->strided ? s->str : NULL);
    }
  }
  if (st != RS_OK) {
    rs_layout_destroy(l);
    l = NULL;
  }
  *out = l;
  return st;
}

/* ---- buffers ------------------------------------------------------------ */

void h_bufs_alloc(const hmodel *m, int side, hbufs *b) {
  memset(b, 0, sizeof *b);
  for (int k = 0; k < H_MAXB; k++) {
    int64_t n = h_buffer_end(m, side, h_rank, k);
    if (n == 0) continue;
    b->p[k] = malloc((size_t)n);
    if (!b->p[k]) abort();
    b->n[k] = (size_t)n;
    memset(b->p[k], 0, (size_t)n);
  }
}

void h_bufs_free(hbufs *b) {
  for (int k = 0; k < H_MAXB; k++) free(b->p[k]);
  memset(b, 0, sizeof *b);
}

rs_status h_bind(rs_plan *plan, const hmodel *m, int side, const hbufs *b) {
  (void)m;
  for (int k = 0; k < H_MAXB; k++) {
    if (!b->p[k]) continue;
    rs_status st = rs_plan_bind(plan, (rs_side)side, h_rank, k, b->p[k], b->n[k]);
    if (st != RS_OK) return st;
  }
  return RS_OK;
}

/* Walk every element of a shard: its global row-major index and its byte
 * offset in the buffer. */
typedef void (*elem_fn)(void *arg, int64_t lin, int64_t at,
                        const int64_t *gidx);

static void walk(const hmodel *m, const hshard *s, elem_fn fn, void *arg) {
  const htensor *t = &m->t[s->tensor];
  int nd = t->ndim;
  int64_t esize = (int64_t)rs_dtype_size(t->dtype);
  int64_t str[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0}, g[RS_MAX_DIMS];
  int64_t dense = 1;
  for (int d = nd - 1; d >= 0; d--) {
    str[d] = s->strided ? s->str[d] : dense;
    dense *= s->ext[d];
  }
  for (;;) {
    int64_t lin = 0, at = 0;
    for (int d = 0; d < nd; d++) {
      g[d] = s->off[d] + idx[d];
      lin = lin * t->shape[d] + g[d];
      at += idx[d] * str[d];
    }
    fn(arg, lin, s->byte_offset + at * esize, g);
    int d = nd - 1;
    for (; d >= 0; d--) {
      if (++idx[d] < s->ext[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

/* What a visitor of one shard's elements works on. */
typedef struct elem_arg {
  hcase *c;
  const hmodel *m;
  const hshard *s;
  unsigned char *buf;
  uint64_t gen;
  size_t esize;
  int64_t bad, right, poisoned; /* counts */
} elem_arg;

/* Visit every shard of this rank on one side. */
static void each_shard(const hmodel *m, const hbufs *b, int side,
                       uint64_t gen, hcase *c, elem_fn fn, elem_arg *total) {
  for (int i = 0; i < m->ns[side]; i++) {
    const hshard *s = &m->s[side][i];
    if (s->rank != h_rank) continue;
    elem_arg a = {c, m, s, b->p[s->buffer], gen,
                  rs_dtype_size(m->t[s->tensor].dtype), 0, 0, 0};
    walk(m, s, fn, &a);
    total->bad += a.bad;
    total->right += a.right;
    total->poisoned += a.poisoned;
  }
}

static uint64_t want_of(const elem_arg *a, int64_t lin) {
  return th_value(a->gen, (uint64_t)a->s->tensor, lin, a->esize);
}

static void fill_one(void *arg, int64_t lin, int64_t at, const int64_t *g) {
  elem_arg *a = arg;
  (void)g;
  th_store(a->buf + at, a->esize, want_of(a, lin));
}

void h_fill(const hmodel *m, const hbufs *b, uint64_t gen) {
  elem_arg total = {0};
  each_shard(m, b, RS_SIDE_SRC, gen, NULL, fill_one, &total);
}

void h_poison(const hbufs *b) {
  for (int k = 0; k < H_MAXB; k++)
    if (b->p[k]) memset(b->p[k], TH_POISON, b->n[k]);
}

static void check_one(void *arg, int64_t lin, int64_t at, const int64_t *g) {
  elem_arg *a = arg;
  uint64_t w = want_of(a, lin), got = th_load(a->buf + at, a->esize);
  h_elems_checked++;
  if (got == w) return;
  if (a->bad++ > 0) return;
  const htensor *t = &a->m->t[a->s->tensor];
  char where[160];
  int n = 0;
  for (int d = 0; d < t->ndim; d++)
    n += snprintf(where + n, sizeof where - (size_t)n, "%s%lld", d ? "," : "",
                  (long long)g[d]);
  EXPECT(a->c, false,
         "tensor '%s' element [%s] (buffer %d byte %lld) is %#llx, want "
         "%#llx%s",
         t->name, where, a->s->buffer, (long long)at,
         (unsigned long long)got, (unsigned long long)w,
         got == th_poisoned(a->esize) ? " (never written)" : "");
}

static void count_one(void *arg, int64_t lin, int64_t at, const int64_t *g) {
  elem_arg *a = arg;
  uint64_t got = th_load(a->buf + at, a->esize);
  (void)g;
  if (got == want_of(a, lin))
    a->right++;
  else if (got == th_poisoned(a->esize))
    a->poisoned++;
  else
    a->bad++;
}

void h_count(const hmodel *m, const hbufs *b, uint64_t gen, int64_t *right,
             int64_t *poisoned, int64_t *wrong) {
  elem_arg total = {0};
  each_shard(m, b, RS_SIDE_DST, gen, NULL, count_one, &total);
  *right = total.right;
  *poisoned = total.poisoned;
  *wrong = total.bad;
}

static void mark_one(void *arg, int64_t lin, int64_t at, const int64_t *g) {
  elem_arg *a = arg;
  (void)lin;
  (void)g;
  memset(a->buf + at, 1, a->esize);
}

/* Bytes of the destination buffers that no shard of this rank uses and
 * that are not the poison; the first of them in *first_k, *first_i. */
static int64_t strays(const hmodel *m, const hbufs *b, int *first_k,
                      size_t *first_i) {
  hbufs used;
  memset(&used, 0, sizeof used);
  for (int k = 0; k < H_MAXB; k++)
    if (b->p[k] && !(used.p[k] = calloc(b->n[k], 1))) abort();
  elem_arg total = {0};
  each_shard(m, &used, RS_SIDE_DST, 0, NULL, mark_one, &total);
  int64_t n = 0;
  for (int k = 0; k < H_MAXB; k++)
    for (size_t i = 0; b->p[k] && i < b->n[k]; i++)
      if (!used.p[k][i] && b->p[k][i] != TH_POISON && n++ == 0) {
        *first_k = k;
        *first_i = i;
      }
  for (int k = 0; k < H_MAXB; k++) free(used.p[k]);
  return n;
}

int64_t h_stray_bytes(const hmodel *m, const hbufs *b) {
  int k;
  size_t i;
  return strays(m, b, &k, &i);
}

bool h_check(hcase *c, const hmodel *m, const hbufs *b, uint64_t gen) {
  elem_arg total = {0};
  each_shard(m, b, RS_SIDE_DST, gen, c, check_one, &total);
  if (total.bad) {
    if (c->failed) {
      size_t n = strlen(c->why);
      snprintf(c->why + n, sizeof c->why - n, " [%lld bad elements on rank %d]",
               (long long)total.bad, h_rank);
    }
    return false;
  }
  int k = 0;
  size_t i = 0;
  if (strays(m, b, &k, &i) == 0) return true;
  return EXPECT(c, false,
                "destination buffer %d byte %zu belongs to no shard but was "
                "written (%#x)",
                k, i, b->p[k][i]);
}

/* ---- one transfer ------------------------------------------------------ */

int64_t h_inter_duplicates(const rs_plan *plan, const rs_context *ctx,
                           char *detail, size_t cap) {
  int64_t n = 0, dup = 0;
  rs_plan_num_moves(plan, &n);
  typedef struct inter {
    int tensor, domain, ndim;
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
  } inter;
  inter *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v) abort();
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int tensor, dst;
    rs_route route;
    rs_plan_move_info(plan, i, &tensor, NULL, &dst, &route, NULL, NULL);
    if (route != RS_ROUTE_INTER) continue;
    inter *x = &v[k++];
    x->tensor = tensor;
    rs_context_get_domain(ctx, dst, &x->domain);
    rs_plan_tensor_info(plan, tensor, NULL, &x->ndim);
    rs_plan_move_box(plan, i, x->off, x->ext);
  }
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = i + 1; j < k; j++) {
      const inter *a = &v[i], *b = &v[j];
      if (a->tensor != b->tensor || a->domain != b->domain) continue;
      bool meet = true;
      for (int d = 0; d < a->ndim && meet; d++)
        meet = a->off[d] < b->off[d] + b->ext[d] &&
               b->off[d] < a->off[d] + a->ext[d];
      if (meet && dup++ == 0 && detail) {
        const char *name = "?";
        rs_plan_tensor_info(plan, a->tensor, &name, NULL);
        snprintf(detail, cap,
                 "tensor '%s': two inter-domain moves into domain %d overlap "
                 "(offsets start %lld and %lld)",
                 name, a->domain, (long long)a->off[0], (long long)b->off[0]);
      }
    }
  free(v);
  return dup;
}

static bool same_fingerprint_everywhere(hcase *c, const rs_plan *plan,
                                        const char *what) {
  uint64_t mine = 0;
  if (plan) rs_plan_fingerprint(plan, &mine);
  uint64_t *all = malloc((size_t)h_np * sizeof *all);
  if (!all) abort();
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  bool ok = true;
  for (int r = 1; r < h_np && ok; r++)
    ok = EXPECT(c, all[r] == all[0],
                "%s: rank %d has plan fingerprint %016llx, rank 0 %016llx", what,
                r, (unsigned long long)all[r], (unsigned long long)all[0]);
  free(all);
  return ok;
}

/* rs_plan_execute_async, then rs_plan_test until done: the execution must
 * advance inside the tests and take several of them. */
static rs_status execute_polled(hcase *c, rs_plan *plan) {
  rs_status st = rs_plan_execute_async(plan, NULL);
  int done = 0;
  int64_t tests = 0;
  while (st == RS_OK && !done) {
    st = rs_plan_test(plan, &done);
    tests++;
  }
  EXPECT(c, st != RS_OK || tests > 1,
         "an execution between processes ended in the first rs_plan_test");
  return st;
}

static void execute_and_check(hcase *c, rs_plan *plan, rs_context *ctx,
                              const hmodel *m, const hbufs *dst, uint64_t gen,
                              bool polled, const char *what) {
  char label[96];
  snprintf(label, sizeof label, "rs_plan_execute%s (%s)",
           polled ? "_async + rs_plan_test" : "", what);
  rs_status st = polled ? execute_polled(c, plan) : rs_plan_execute(plan);
  h_executions++;
  h_ok(c, st, ctx, label);
  if (st == RS_OK) h_check(c, m, dst, gen);
}

void h_transfer(hcase *c, const hmodel *m, const hrun *o) {
  rs_context *ctx = o->ctx;
  rs_layout *src = NULL, *dst = NULL, *gsrc = NULL, *gdst = NULL;
  rs_plan *plan = NULL, *gplan = NULL;
  hbufs sb = {0}, db = {0}, db2 = {0};
  int own = H_OWN | (o->declare_used ? H_DECLARE_USED : 0);
  if (!ctx) {
    h_ok(c, h_context(MPI_COMM_WORLD, o->timeout_ms ? o->timeout_ms : 20000,
                      &ctx),
         NULL, "rs_context_create_mpi");
  }
  if (ctx && o->staging)
    h_ok(c, rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, o->staging), ctx,
         "set staging");
  if (ctx && o->domain_size)
    h_ok(c, rs_context_set_domain_size(ctx, o->domain_size), ctx,
         "rs_context_set_domain_size");
  if (ctx) {
    h_ok(c, h_layout(ctx, m, RS_SIDE_SRC, own, &src), ctx, "source layout");
    h_ok(c, h_layout(ctx, m, RS_SIDE_DST, own, &dst), ctx, "destination layout");
  }
  if (!h_all_ok(c)) goto done;

  h_ok(c, rs_layout_allgather(src), ctx, "rs_layout_allgather(source)");
  if (!h_all_ok(c)) goto done;
  h_ok(c, rs_layout_allgather(dst), ctx, "rs_layout_allgather(destination)");
  if (!h_all_ok(c)) goto done;

  int64_t want[2] = {m->ns[0], m->ns[1]}, got = -1;
  rs_layout_num_shards(src, &got);
  EXPECT(c, got == want[0], "source layout holds %lld shards after "
         "allgather, the model %lld", (long long)got, (long long)want[0]);
  rs_layout_num_shards(dst, &got);
  EXPECT(c, got == want[1], "destination layout holds %lld shards after "
         "allgather, the model %lld", (long long)got, (long long)want[1]);

  int64_t part_before = -1;
  rs_context_get_param(ctx, RS_PARAM_PLAN_PART, &part_before);
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART,
                               o->whole_plan ? -1 : h_rank),
       ctx, "which part of plans to keep");
  rs_status made = rs_plan_create(src, dst, &plan);
  /* the global plan below is the whole one; the caller's setting after */
  h_ok(c, rs_context_set_param(ctx, RS_PARAM_PLAN_PART, -1), ctx,
       "keep whole plans");
  if (h_ok(c, made, ctx, "rs_plan_create")) {
    int64_t nm = 0;
    rs_plan_num_moves(plan, &nm);
    h_moves_planned += nm;
    rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &nm);
    if (nm > h_rounds_max) h_rounds_max = nm;
  }
  same_fingerprint_everywhere(c, plan, "after rs_layout_allgather");
  if (plan && !o->no_global && !o->declare_used) {
    /* The allgathered layouts are the global layouts, in rank order. */
    uint64_t a = 0, b = 0;
    if (h_ok(c, h_layout(ctx, m, RS_SIDE_SRC, H_GLOBAL, &gsrc), ctx,
             "global source layout") &&
        h_ok(c, h_layout(ctx, m, RS_SIDE_DST, H_GLOBAL, &gdst), ctx,
             "global destination layout") &&
        h_ok(c, rs_plan_create(gsrc, gdst, &gplan), ctx, "global plan")) {
      rs_plan_fingerprint(plan, &a);
      rs_plan_fingerprint(gplan, &b);
      EXPECT(c, a == b,
             "the plan of the allgathered layouts (%016llx) differs from the "
             "plan of the same layouts built whole (%016llx)",
             (unsigned long long)a, (unsigned long long)b);
      char why[256];
      EXPECT(c, th_same_moves_of(gplan, plan, o->whole_plan ? -1 : h_rank,
                                 why, sizeof why),
             "rank %d's %s and the whole plan of the same layouts: %s",
             h_rank, o->whole_plan ? "plan" : "part", why);
      /* every rank's figures and the rounds are the whole plan's, also
       * where the rank planned only its part with its peers */
      for (int r = -1; r < h_np && !c->failed; r++)
        for (int s = RS_STAT_BYTES_SENT_INTRA; s <= RS_STAT_BYTES_UNPACKED;
             s++) {
          int64_t x = -1, y = -2;
          rs_plan_stat(gplan, r < 0 ? RS_ALL_RANKS : r, (rs_stat)s, &x);
          rs_plan_stat(plan, r < 0 ? RS_ALL_RANKS : r, (rs_stat)s, &y);
          EXPECT(c, x == y, "figure %d of rank %d: %lld in the whole plan, "
                 "%lld in rank %d's %s", s, r, (long long)x, (long long)y,
                 h_rank, o->whole_plan ? "plan" : "part");
        }
    }
  }
  rs_context_set_param(ctx, RS_PARAM_PLAN_PART, part_before);
  if (plan && o->plan_check) o->plan_check(c, plan, ctx, m, o->arg);
  if (!h_all_ok(c)) goto done;

  h_bufs_alloc(m, RS_SIDE_SRC, &sb);
  h_bufs_alloc(m, RS_SIDE_DST, &db);
  h_fill(m, &sb, o->gen);
  h_poison(&db);
  h_ok(c, h_bind(plan, m, RS_SIDE_SRC, &sb), ctx, "bind source");
  h_ok(c, h_bind(plan, m, RS_SIDE_DST, &db), ctx, "bind destination");
  if (!h_all_ok(c)) goto done;

  execute_and_check(c, plan, ctx, m, &db, o->gen, o->polled, "first");
  if (!o->reuse || !h_all_ok(c)) goto done;

  /* Every source value changes; the same plan runs again. */
  h_fill(m, &sb, o->gen + 1);
  execute_and_check(c, plan, ctx, m, &db, o->gen + 1, o->polled,
                    "again, new values");
  if (!h_all_ok(c)) goto done;
  /* New destination memory: a later bind replaces the earlier one. */
  h_bufs_alloc(m, RS_SIDE_DST, &db2);
  h_poison(&db2);
  h_ok(c, h_bind(plan, m, RS_SIDE_DST, &db2), ctx, "rebind destination");
  if (!h_all_ok(c)) goto done;
  execute_and_check(c, plan, ctx, m, &db2, o->gen + 1, o->polled, "rebound");
  /* The first destination buffers were left alone. */
  h_check(c, m, &db, o->gen + 1);

done:
  rs_plan_destroy(plan);
  rs_plan_destroy(gplan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_layout_destroy(gsrc);
  rs_layout_destroy(gdst);
  if (!o->ctx) rs_context_destroy(ctx);
  h_bufs_free(&sb);
  h_bufs_free(&db);
  h_bufs_free(&db2);
}
