/* SPDX-License-Identifier: Apache-2.0 */
/* Writes the hand-made seeds of the fuzz corpus:
 *
 *   fuzz_make_corpus tests/fuzz
 *
 * fuzz_wire/seed-*: a mode byte (0: as is, 1: length and checksum fixed up
 * by the target) and layouts serialized by rs_layout_serialize, plus a few
 * hand-written encodings with one bad field each. fuzz_layout/seed-* and
 * fuzz_plan/seed-*: operation streams in the targets' input language that
 * build valid layouts (so that mutations start from deep states). The rest
 * of each corpus folder is what libFuzzer found and `-merge=1` kept
 * (scripts/fuzz.sh --merge). Inputs that once crashed go to
 * regress/<target>/ instead: ctest replays them, and scripts/fuzz.sh runs
 * them before it fuzzes (they are kept out of the fuzzing corpus so that a
 * regression not yet fixed does not stop the fuzzer at its first input). */
#include <reshard/reshard.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "th_wire.h"

static const char *root;

static void put(const char *target, const char *name, const void *b,
                size_t n) {
  bool regress = strncmp(name, "regress-", 8) == 0;
  const char *kind = regress ? "regress" : "corpus";
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, kind);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s", root, kind, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s/%s%s", root, kind, target,
           regress ? "" : "seed-", regress ? name + 8 : name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

#define CHECK(x)                                                      \
  do {                                                                \
    if ((x) != RS_OK) {                                               \
      fprintf(stderr, "%s: %s\n", #x, rs_context_last_error(ctx));    \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

static void put_layout(const char *name, rs_context *ctx, rs_layout *l) {
  void *bytes = NULL;
  size_t n = 0;
  CHECK(rs_layout_serialize(l, &bytes, &n));
  unsigned char *b = malloc(n + 1);
  b[0] = 0;
  memcpy(b + 1, bytes, n);
  put("fuzz_wire", name, b, n + 1);
  rs_free(bytes);
  free(b);
  rs_layout_destroy(l);
}

static void put_wire(const char *name, rw_buf *w) {
  unsigned char *b = malloc(w->n + 1);
  b[0] = 1; /* the target reseals */
  memcpy(b + 1, w->b, w->n);
  put("fuzz_wire", name, b, w->n + 1);
  free(b);
  rw_free(w);
}

static void wire_seeds(void) {
  rs_context *ctx = NULL;
  rs_layout *l;
  if (rs_context_create_local(8, &ctx) != RS_OK) exit(1);
  const int64_t s69[2] = {6, 9}, m2[1] = {2}, m3[1] = {3}, m24[2] = {2, 4};
  const int r01[2] = {0, 1}, r234[3] = {2, 3, 4};
  const int r8[8] = {7, 6, 5, 4, 3, 2, 1, 0};
  const int p0[1] = {0}, p1[1] = {1}, p01[2] = {0, 1}, pr1[2] = {-1, 1};

  CHECK(rs_layout_create(ctx, &l));
  put_layout("empty", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  CHECK(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 2, s69));
  CHECK(rs_layout_add_dtensor(l, "w", 1, m2, r01, p0, 0, 0));
  put_layout("rows-2", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  CHECK(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 2, s69));
  CHECK(rs_layout_add_dtensor(l, "w", 1, m3, r234, p1, 0, 0));
  put_layout("cols-3", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  const int64_t s107[2] = {10, 7}, off[2] = {0, 0}, st[2] = {9, 1};
  CHECK(rs_layout_add_tensor(l, "a.weight", RS_DTYPE_BF16, 2, s107));
  CHECK(rs_layout_add_tensor(l, "b.weight", RS_DTYPE_BF16, 2, s107));
  CHECK(rs_layout_add_dtensor(l, "a.weight", 1, m2, r01, p0, 0, 0));
  CHECK(rs_layout_add_dtensor(l, "b.weight", 1, m2, r01, p0, 1, 64));
  CHECK(rs_layout_add_shard(l, "a.weight", 5, off, s107, 3, 8, st));
  put_layout("strided-two-tensors", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  int64_t s16[16], o16[16] = {0}, e16[16];
  for (int d = 0; d < 16; d++) s16[d] = e16[d] = 2;
  e16[0] = 1;
  o16[0] = 1;
  CHECK(rs_layout_add_tensor(l, "deep", RS_DTYPE_U8, 16, s16));
  CHECK(rs_layout_add_shard(l, "deep", 7, o16, e16, 65535, 1, NULL));
  put_layout("sixteen-dims", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  char longname[301];
  memset(longname, 'n', 300);
  longname[300] = '\0';
  const int64_t s4[1] = {4}, o0[1] = {0};
  CHECK(rs_layout_add_tensor(l, longname, RS_DTYPE_I64, 1, s4));
  CHECK(rs_layout_add_shard(l, longname, 0, o0, s4, 0, 0, NULL));
  put_layout("long-name", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  const int64_t s816[2] = {8, 16};
  CHECK(rs_layout_add_tensor(l, "mesh", RS_DTYPE_F16, 2, s816));
  CHECK(rs_layout_add_dtensor(l, "mesh", 2, m24, r8, p01, 0, 0));
  CHECK(rs_layout_add_tensor(l, "rep", RS_DTYPE_F16, 2, s816));
  CHECK(rs_layout_add_dtensor(l, "rep", 2, m24, r8, pr1, 0, 4096));
  put_layout("mesh-2x4", ctx, l);

  CHECK(rs_layout_create(ctx, &l)); /* a fused qkv: three in one buffer */
  const int64_t q[2] = {16, 8}, kv[2] = {4, 8};
  CHECK(rs_layout_add_tensor(l, "q", RS_DTYPE_BF16, 2, q));
  CHECK(rs_layout_add_tensor(l, "k", RS_DTYPE_BF16, 2, kv));
  CHECK(rs_layout_add_tensor(l, "v", RS_DTYPE_BF16, 2, kv));
  CHECK(rs_layout_add_shard(l, "q", 2, off, q, 0, 0, NULL));
  CHECK(rs_layout_add_shard(l, "k", 2, off, kv, 0, 256, NULL));
  CHECK(rs_layout_add_shard(l, "v", 2, off, kv, 0, 320, NULL));
  put_layout("fused-qkv", ctx, l);

  CHECK(rs_layout_create(ctx, &l));
  for (int dt = 1; dt <= 15; dt++) {
    char name[16];
    snprintf(name, sizeof name, "d%d", dt);
    CHECK(rs_layout_add_tensor(l, name, (rs_dtype)dt, 1, s4));
    CHECK(rs_layout_add_shard(l, name, dt % 8, o0, s4, dt, 0, NULL));
  }
  put_layout("every-dtype", ctx, l);
  rs_context_destroy(ctx);

  /* hand-written, one odd field each (the target fixes up the framing) */
  const uint64_t shape[2] = {8, 6}, geom[6] = {2, 0, 4, 6, 6, 1};
  rw_buf w;
  memset(&w, 0, sizeof w);
  rw_header(&w, 1, 3);
  rw_u32(&w, 1);
  rw_tensor(&w, "w", RS_DTYPE_F32, 2, shape);
  rw_u64(&w, 1);
  rw_shard(&w, 0, 1, 0, 0, 2, geom);
  rw_finish(&w);
  put_wire("hand-ok", &w);

  memset(&w, 0, sizeof w);
  rw_header(&w, 1, 0);
  rw_u32(&w, 1);
  rw_tensor(&w, "w", RS_DTYPE_F32, 2, shape);
  rw_u64(&w, 2);
  rw_shard(&w, 0, 1, 0, 0, 2, geom);
  rw_shard(&w, 0, 99, 0, 0, 2, geom);
  rw_finish(&w);
  put_wire("hand-bad-rank", &w);

  const uint64_t strided[6] = {0, 0, 8, 6, 3, 1};
  memset(&w, 0, sizeof w);
  rw_header(&w, 1, 0);
  rw_u32(&w, 1);
  rw_tensor(&w, "w", RS_DTYPE_F32, 2, shape);
  rw_u64(&w, 1);
  rw_shard(&w, 0, 1, 0, 0, 2, strided);
  rw_finish(&w);
  put_wire("hand-self-overlap", &w);

  memset(&w, 0, sizeof w);
  rw_header(&w, 1, 0);
  rw_u32(&w, 2);
  rw_tensor(&w, "dup", RS_DTYPE_F32, 2, shape);
  rw_tensor(&w, "dup", RS_DTYPE_F32, 2, shape);
  rw_u64(&w, 0);
  rw_finish(&w);
  put_wire("hand-duplicate-name", &w);
}

/* fz_i64 of a small value v (-1..14) is the byte v + 1. */
#define V(v) ((unsigned char)((v) + 1))

static void layout_seeds(void) {
  /* world 4; add_tensor "w" f32 [8,6]; add_shard dense rows [0,4) rank 1;
   * add_shard strided; add_dtensor Shard(0) over 4 ranks; local_box;
   * set_param; set_domain; round trip */
  unsigned char s[1024];
  size_t n = 0;
  s[n++] = 3; /* world 4 */
  /* op 0: add_tensor name 0, dtype 11 (f32), ndim 2, shape 8, 6, rest 1 */
  s[n++] = 0; s[n++] = 0; s[n++] = V(11); s[n++] = V(2);
  s[n++] = V(8); s[n++] = V(6);
  for (int d = 2; d < 16; d++) s[n++] = V(1);
  /* op 1: add_shard name 0, rank 1, (off, ext) x16, dense, buffer 0, 0 */
  s[n++] = 1; s[n++] = 0; s[n++] = V(1);
  s[n++] = V(0); s[n++] = V(4); s[n++] = V(0); s[n++] = V(6);
  for (int d = 2; d < 16; d++) { s[n++] = V(0); s[n++] = V(1); }
  s[n++] = 0; s[n++] = V(0); s[n++] = V(0);
  /* op 2: add_shard strided rows [4,8), strides 8, 1 */
  s[n++] = 2; s[n++] = 0; s[n++] = V(2);
  s[n++] = V(4); s[n++] = V(4); s[n++] = V(0); s[n++] = V(6);
  for (int d = 2; d < 16; d++) { s[n++] = V(0); s[n++] = V(1); }
  s[n++] = 1; s[n++] = V(8); s[n++] = V(1);
  for (int d = 2; d < 16; d++) s[n++] = V(1);
  s[n++] = V(1); s[n++] = V(0);
  /* op 3: add_dtensor name 0, mesh_ndim 1, (mesh, placement) x16: 4, 0,
   * ranks: permutation (flag 0) with 3 swaps, buffer 2, offset 0 */
  s[n++] = 3; s[n++] = 0; s[n++] = V(1);
  s[n++] = V(4); s[n++] = V(0);
  for (int a = 1; a < 16; a++) { s[n++] = V(1); s[n++] = V(-1); }
  s[n++] = 0; s[n++] = 1; s[n++] = 0; s[n++] = 1;
  s[n++] = V(2); s[n++] = V(0);
  /* op 4: local_box ndim 2, mesh_ndim 2, shape 8,6,..., (mesh, place,
   * coord) x16 */
  s[n++] = 4; s[n++] = V(2); s[n++] = V(2);
  s[n++] = V(8); s[n++] = V(6);
  for (int d = 2; d < 16; d++) s[n++] = V(1);
  s[n++] = V(3); s[n++] = V(0); s[n++] = V(2);
  s[n++] = V(4); s[n++] = V(1); s[n++] = V(3);
  for (int a = 2; a < 16; a++) { s[n++] = V(1); s[n++] = V(-1); s[n++] = V(0); }
  /* op 5: set_param timeout 7; op 6: set_domain rank 2 -> 1; op 7 */
  s[n++] = 5; s[n++] = 2; s[n++] = V(7);
  s[n++] = 6; s[n++] = V(2); s[n++] = V(1); s[n++] = 0;
  s[n++] = 7;
  put("fuzz_layout", "ops-all", s, n);
}

/* fz_i64 of any value: 0xE0, then the 8 bytes. */
static size_t raw64(unsigned char *s, int64_t v) {
  s[0] = 0xE0;
  for (int i = 0; i < 8; i++) s[1 + i] = (unsigned char)((uint64_t)v >> (8 * i));
  return 9;
}

static void layout_regressions(void) {
  /* rs_dtensor_local_box(ndim 1, shape [INT64_MAX], mesh [2^62 + 1],
   * Shard(0), coord 2^62): chunk * coord overflowed int64 (found while
   * writing the fuzz targets; see docs/RELIABILITY.md) */
  unsigned char s[512];
  size_t n = 0;
  s[n++] = 0;      /* world 1 */
  s[n++] = 4;      /* local_box */
  s[n++] = V(1);   /* ndim */
  s[n++] = V(1);   /* mesh_ndim */
  n += raw64(s + n, INT64_MAX);
  for (int d = 1; d < 16; d++) s[n++] = V(1);
  n += raw64(s + n, ((int64_t)1 << 62) + 1);
  s[n++] = V(0);
  n += raw64(s + n, (int64_t)1 << 62);
  for (int a = 1; a < 16; a++) { s[n++] = V(1); s[n++] = V(-1); s[n++] = V(0); }
  put("fuzz_layout", "regress-dtensor-chunk-overflow", s, n);
}

/* rows-to-cols (below) with the destination's f32 [8,6] quantized to fp8:
 * `decl` 0xF4 (amax scales) or 0xF5 (UE8M0), blocks of 1 + b0 % 3 rows
 * and 1 + b1 % 3 columns, and the destination a DTensor over 4 ranks
 * sharding dim `dim`. */
static void plan_fp8_seed(const char *name, unsigned char decl,
                          unsigned char b0, unsigned char b1,
                          unsigned char dim) {
  unsigned char placement = (unsigned char)(dim + 1); /* -1: replicate */
  const unsigned char s[] = {
      3, 1, 2, 0, 0, 10, 20, 1, 7, 5, /* world 4, one f32 [8,6] */
      decl, b0, b1,                   /* destination: fp8, its blocks */
      0, 0, 0, 0, 1, 0, 0, 0, 1, 0,   /* source: dtensor mesh [2], Shard(0) */
      0, 0, 0, 0, 3, 0, 0, 0, placement, 1, /* destination: mesh [4] */
  };
  put("fuzz_plan", name, s, sizeof s);
}

static void plan_seeds(void) {
  /* world 4, domains of 2, staging 256 MiB, slice 4 KiB; one f32 [8,6];
   * source Shard(0) over 2 ranks, destination Shard(1) over 4 */
  const unsigned char rows_to_cols[] = {
      3, 1, 2, 0,           /* world, domains, staging, slice */
      0, 10, 20, 1, 7, 5,   /* 1 tensor: f32, ndim 2, 8 x 6 */
      0,                    /* destination declared the same */
      0, 0, 0, 0, 1, 0, 0, 0, 1, 0, /* source: dtensor mesh [2], Shard(0) */
      0, 0, 0, 0, 3, 0, 0, 0, 2, 1, /* destination: mesh [4], Shard(1) */
  };
  put("fuzz_plan", "rows-to-cols", rows_to_cols, sizeof rows_to_cols);
  /* world 8, three tensors, boxes and strided boxes on both sides */
  const unsigned char mixed[] = {
      7, 3, 1, 1,                   /* world 8, domains of 4 */
      2, 2, 20, 2, 3, 4, 5,         /* 3 tensors: u16 3-D 4x5x6 */
      11, 20, 0, 8,                 /* f64 1-D 9 */
      14, 20, 1, 2, 2,              /* bool 2-D 3x3 */
      0, 0, 0,                      /* destination declared the same */
      5,                            /* source: 6 ops */
      0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0,
      0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0,
      3, 0, 0, 1, 0, 0, 0, 9, 9, 9,
      5, 2, 3, 0, 0, 0, 0, 1, 0, 1, 0,
      7, 1, 2, 3, 4, 5, 6, 7, 8, 9,
      3,                            /* destination: 4 ops */
      0, 0, 0, 1, 1, 2, 0, 0, 0, 0, 0, 0, 3, 1,
      0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2,
      0, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0,
      6, 0, 3, 2, 0, 0, 0, 0, 0, 0, 1, 0, 1, 2, 0, 0,
  };
  put("fuzz_plan", "mixed", mixed, sizeof mixed);
  /* rows-to-cols into block-scaled fp8: blocks of 2 x 2, amax scales,
   * beside each destination Shard(1) of two columns; then UE8M0 scales,
   * blocks of 2 x 3, the destination Shard(0) over 4 (a rank's rows hold
   * whole blocks) */
  plan_fp8_seed("fp8-rows-to-cols", 0xF4, 1, 1, 1);
  plan_fp8_seed("fp8-ue8m0-rows", 0xF5, 1, 2, 0);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s tests/fuzz\n", argv[0]);
    return 2;
  }
  root = argv[1];
  wire_seeds();
  layout_seeds();
  layout_regressions();
  plan_seeds();
  return 0;
}
