/* Soak: one plan executed many times under MPI, the sources changed before
 * every execution and every destination element checked after it, and
 * memory watched.
 *
 *   mpirun -np 4 soak [--iterations 1000] [--integrity 1]
 *                     [--tolerance-kib 1024]
 *
 * The layouts are those of a small weight sync (any world size >= 2 works;
 * the ctest entry uses 4): a fused qkv u32 [256, 192] held TP x DP
 * (Replicate, Shard(0)) on a 2-D mesh going to Shard(1); a bf16-sized down
 * projection [128, 512] going from Shard(1) to (Shard(0), Replicate); a
 * u8 norm [300] replicated everywhere going to uneven Shard(0); an
 * embedding u32 [64, 96] going into padded rows (stride 100) of a second
 * buffer; and a u32 [512, 256] whose row split moves by a few rows, so
 * that large contiguous moves travel straight from and into user memory.
 *
 * Each rank prints its resident memory (VmRSS) after execution 10 and
 * after the last; rank 0 prints the summary. It fails when any element was
 * ever wrong, any execution failed, a byte outside every destination shard
 * changed, or VmRSS grew by more than the tolerance between the two. */
#include "rel_mpi.h"

/* Under AddressSanitizer freed memory waits in a quarantine (up to
 * 256 MiB), so resident memory grows without a leak: the figures are
 * printed but not judged, and LeakSanitizer judges leaks instead. */
#if defined(__SANITIZE_ADDRESS__)
#define REL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REL_ASAN 1
#endif
#endif
#ifndef REL_ASAN
#define REL_ASAN 0
#endif

#define MAXT 8
#define MAXSH 256
#define NBUF 2

typedef struct tens {
  const char *name;
  rs_dtype dt;
  int esize, ndim;
  int64_t shape[2];
} tens;

typedef struct shard {
  int t, side, rank, buffer;
  int64_t byte_offset;
  int64_t off[2], ext[2], strides[2];
} shard;

static int me, np;
static tens T[MAXT];
static int nt;
static shard S[MAXSH];
static int ns;
static int64_t used[2][64][NBUF]; /* side, rank, buffer */

static int tensor(const char *name, rs_dtype dt, int ndim, int64_t a,
                  int64_t b) {
  T[nt] = (tens){name, dt, (int)rs_dtype_size(dt), ndim, {a, b}};
  return nt++;
}

static void box(int side, int t, int rank, const int64_t *off,
                const int64_t *ext, int buffer, const int64_t *strides) {
  shard *s = &S[ns++];
  memset(s, 0, sizeof *s);
  s->t = t;
  s->side = side;
  s->rank = rank;
  s->buffer = buffer;
  int nd = T[t].ndim;
  for (int d = 0; d < nd; d++) {
    s->off[d] = off[d];
    s->ext[d] = ext[d];
  }
  if (strides) {
    for (int d = 0; d < nd; d++) s->strides[d] = strides[d];
  } else if (nd == 2) {
    s->strides[0] = ext[1];
    s->strides[1] = 1;
  } else {
    s->strides[0] = 1;
  }
  int64_t last = 0;
  for (int d = 0; d < nd; d++) last += (ext[d] - 1) * s->strides[d];
  int64_t at = (used[side][rank][buffer] + 63) / 64 * 64;
  s->byte_offset = at;
  used[side][rank][buffer] = at + (last + 1) * T[t].esize;
}

/* DTensor placements over a mesh of mesh[0] x mesh[1] ranks 0.. in
 * row-major order, through the library's own local-box rule. */
static void dtensor(int side, int t, int mesh_ndim, const int64_t *mesh,
                    const int *placements, int buffer) {
  int n = (int)(mesh[0] * (mesh_ndim > 1 ? mesh[1] : 1));
  for (int i = 0; i < n; i++) {
    int64_t coord[2] = {mesh_ndim > 1 ? i / mesh[1] : i,
                        mesh_ndim > 1 ? i % mesh[1] : 0};
    int64_t off[2], ext[2];
    if (rs_dtensor_local_box(T[t].ndim, T[t].shape, mesh_ndim, mesh,
                             placements, coord, off, ext) != RS_OK) {
      fprintf(stderr, "rank %d: local box: %s\n", me, rs_last_error());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    bool empty = false;
    for (int d = 0; d < T[t].ndim; d++) empty |= ext[d] == 0;
    if (!empty) box(side, t, i, off, ext, buffer, NULL);
  }
}

static void model(void) {
  int64_t m2[2] = {2, np / 2}, mn[1] = {np};
  int rep_s0[2] = {RS_REPLICATE, 0}, s1[1] = {1}, s0[1] = {0};
  int s0_rep[2] = {0, RS_REPLICATE}, rep[1] = {RS_REPLICATE};
  int qkv = tensor("layers.0.attn.qkv_proj", RS_DTYPE_U32, 2, 256, 192);
  dtensor(RS_SIDE_SRC, qkv, np >= 4 ? 2 : 1, np >= 4 ? m2 : mn,
          np >= 4 ? rep_s0 : s0, 0);
  dtensor(RS_SIDE_DST, qkv, 1, mn, s1, 0);
  int down = tensor("layers.0.mlp.down_proj", RS_DTYPE_BF16, 2, 128, 512);
  dtensor(RS_SIDE_SRC, down, 1, mn, s1, 0);
  dtensor(RS_SIDE_DST, down, np >= 4 ? 2 : 1, np >= 4 ? m2 : mn,
          np >= 4 ? s0_rep : s0, 0);
  int norm = tensor("layers.0.input_layernorm", RS_DTYPE_U8, 1, 300, 1);
  dtensor(RS_SIDE_SRC, norm, 1, mn, rep, 0);
  dtensor(RS_SIDE_DST, norm, 1, mn, s0, 0);
  int emb = tensor("embed_tokens", RS_DTYPE_U32, 2, 64, 96);
  dtensor(RS_SIDE_SRC, emb, 1, mn, s0, 0);
  for (int r = 0; r < np; r++) { /* rows of 100, only 96 used */
    int64_t lo = 64 * r / np, hi = 64 * (r + 1) / np;
    const int64_t off[2] = {lo, 0}, ext[2] = {hi - lo, 96}, st[2] = {100, 1};
    box(RS_SIDE_DST, emb, r, off, ext, 1, st);
  }
  int big = tensor("lm_head", RS_DTYPE_U32, 2, 512, 256);
  dtensor(RS_SIDE_SRC, big, 1, mn, s0, 0);
  for (int r = 0; r < np; r++) { /* split moved by 3 rows */
    int64_t lo = r == 0 ? 0 : 512 * r / np + 3;
    int64_t hi = r == np - 1 ? 512 : 512 * (r + 1) / np + 3;
    const int64_t off[2] = {lo, 0}, ext[2] = {hi - lo, 256};
    box(RS_SIDE_DST, big, r, off, ext, 0, NULL);
  }
}

/* Values: every element of every tensor changes at every generation. */
static uint64_t value(int gen, int t, int64_t lin, int esize) {
  uint64_t v = ((uint64_t)lin * 2654435761u) ^ ((uint64_t)gen * 0x9E3779B9u) ^
               ((uint64_t)t << 24);
  if (esize < 8) v &= ((uint64_t)1 << (8 * esize)) - 1;
  return v;
}

static unsigned char *buf[2][NBUF];

/* Fill (src) or check (dst) every element of every shard of this rank;
 * returns the number of wrong elements. */
static int64_t each_element(int side, int gen, bool fill,
                            unsigned char *covered) {
  int64_t bad = 0;
  for (int i = 0; i < ns; i++) {
    const shard *s = &S[i];
    if (s->side != side || s->rank != me) continue;
    const tens *t = &T[s->t];
    int64_t cols = t->ndim == 2 ? s->ext[1] : 1;
    int64_t cstride = t->ndim == 2 ? s->strides[1] : 0;
    for (int64_t a = 0; a < s->ext[0]; a++)
      for (int64_t b = 0; b < cols; b++) {
        int64_t lin = t->ndim == 2 ? (s->off[0] + a) * t->shape[1] + s->off[1] + b
                                   : s->off[0] + a;
        int64_t el = a * s->strides[0] + b * cstride;
        unsigned char *p = buf[side][s->buffer] + s->byte_offset + el * t->esize;
        uint64_t want = value(gen, s->t, lin, t->esize);
        if (fill) {
          for (int k = 0; k < t->esize; k++) p[k] = (unsigned char)(want >> (8 * k));
          continue;
        }
        uint64_t got = 0;
        for (int k = 0; k < t->esize; k++) got |= (uint64_t)p[k] << (8 * k);
        if (got != want) bad++;
        if (covered && s->side == RS_SIDE_DST)
          memset(covered + (p - buf[side][s->buffer]) +
                     (s->buffer ? used[1][me][0] : 0),
                 1, (size_t)t->esize);
      }
  }
  return bad;
}

/* Bytes of this rank's destination buffers that no shard covers and that
 * are not the poison any more. */
static int64_t stray_writes(void) {
  int64_t n0 = used[1][me][0], n1 = used[1][me][1];
  unsigned char *covered = calloc((size_t)(n0 + n1 + 1), 1);
  each_element(RS_SIDE_DST, 0, false, covered);
  int64_t stray = 0;
  for (int b = 0; b < NBUF; b++)
    for (int64_t i = 0; i < used[1][me][b]; i++)
      if (!covered[(b ? n0 : 0) + i] && buf[1][b][i] != REL_POISON_BYTE) stray++;
  free(covered);
  return stray;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int iterations = 1000, integrity = 1;
  long tolerance_kib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--iterations")) iterations = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--integrity")) integrity = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--tolerance-kib")) tolerance_kib = atol(argv[i + 1]);
  }
  if (np < 2 || np > 64 || np % 2 || iterations < 11) {
    if (me == 0)
      fprintf(stderr, "soak: an even number of 2..64 processes and at least "
                      "11 iterations\n");
    MPI_Finalize();
    return 2;
  }
  model();

  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  rs_status st = rs_context_create_mpi(MPI_COMM_WORLD, &ctx);
  if (st == RS_OK) st = rs_context_set_param(ctx, RS_PARAM_INTEGRITY, integrity);
  if (st == RS_OK) st = rs_layout_create(ctx, &src);
  if (st == RS_OK) st = rs_layout_create(ctx, &dst);
  for (int t = 0; t < nt && st == RS_OK; t++) {
    st = rs_layout_add_tensor(src, T[t].name, T[t].dt, T[t].ndim, T[t].shape);
    if (st == RS_OK)
      st = rs_layout_add_tensor(dst, T[t].name, T[t].dt, T[t].ndim, T[t].shape);
  }
  for (int i = 0; i < ns && st == RS_OK; i++)
    st = rs_layout_add_shard(S[i].side == RS_SIDE_SRC ? src : dst,
                             T[S[i].t].name, S[i].rank, S[i].off, S[i].ext,
                             S[i].buffer, S[i].byte_offset, S[i].strides);
  if (st == RS_OK) st = rs_plan_create(src, dst, &plan);
  for (int s = 0; s < 2 && st == RS_OK; s++)
    for (int b = 0; b < NBUF && st == RS_OK; b++) {
      if (!used[s][me][b]) continue;
      buf[s][b] = malloc((size_t)used[s][me][b]);
      memset(buf[s][b], REL_POISON_BYTE, (size_t)used[s][me][b]);
      st = rs_plan_bind(plan, (rs_side)s, me, b, buf[s][b],
                        (size_t)used[s][me][b]);
    }
  if (st != RS_OK) {
    fprintf(stderr, "SOAK-FAIL rank %d: setup: %s: %s\n", me,
            rs_status_name(st), rs_context_last_error(ctx));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int64_t bytes = 0, moves = 0, rounds = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA, &bytes);
  int64_t inter = 0, local = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER, &inter);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_MOVES, &moves);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &rounds);
  bytes += inter + local;

  long rss10 = -1, rss_end = -1;
  int64_t wrong = 0, failed = 0, first_bad = 0;
  double t0 = rel_now_ms(), t10 = 0;
  char why[768] = "";
  for (int it = 1; it <= iterations; it++) {
    each_element(RS_SIDE_SRC, it, true, NULL);
    st = rs_plan_execute(plan);
    if (st != RS_OK) {
      failed++;
      if (!first_bad) {
        first_bad = it;
        snprintf(why, sizeof why, "execution %d: %s: %s", it,
                 rs_status_name(st), rs_context_last_error(ctx));
      }
      break; /* the context is done after a failed execution */
    }
    int64_t bad = each_element(RS_SIDE_DST, it, false, NULL);
    if (bad && !first_bad) {
      first_bad = it;
      snprintf(why, sizeof why, "execution %d: %lld wrong elements", it,
               (long long)bad);
    }
    wrong += bad;
    if (it == 10) {
      rss10 = rel_vmrss_kib();
      t10 = rel_now_ms();
    }
  }
  double t_end = rel_now_ms();
  rss_end = rel_vmrss_kib();
  int64_t stray = stray_writes();
  long growth = rss_end - rss10;
  int ok = !failed && !wrong && !stray &&
           (REL_ASAN || (rss10 > 0 && growth <= tolerance_kib));
  printf("SOAK rank %d: VmRSS after 10 executions %ld KiB, after %d %ld KiB "
         "(%+ld KiB); %lld wrong elements, %lld stray bytes, %lld failed "
         "executions%s%s\n",
         me, rss10, iterations, rss_end, growth, (long long)wrong,
         (long long)stray, (long long)failed, why[0] ? ": " : "", why);
  fflush(stdout);

  long stats[3] = {growth, rss10, rss_end}, maxs[3];
  int all_ok = 0;
  MPI_Reduce(stats, maxs, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (me == 0) {
    double per = (t_end - t10) / (iterations - 10);
    printf("SOAK %s: %d executions of one plan on %d processes (integrity "
           "%s), %lld bytes and %lld moves in %lld round(s) per execution, "
           "every element verified after every execution; %.3f ms per "
           "execution (fill and check included; %.0f ms in all); largest "
           "VmRSS after 10: %ld KiB, after %d: %ld KiB, largest growth "
           "%+ld KiB (tolerance %ld KiB%s)\n",
           all_ok ? "PASS" : "FAIL", iterations, np, integrity ? "on" : "off",
           (long long)bytes, (long long)moves, (long long)rounds, per,
           t_end - t0, maxs[1], iterations, maxs[2], maxs[0], tolerance_kib,
           REL_ASAN ? "; not judged under AddressSanitizer, whose "
                      "quarantine keeps freed memory" : "");
    fflush(stdout);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  for (int s = 0; s < 2; s++)
    for (int b = 0; b < NBUF; b++) free(buf[s][b]);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
