/* SPDX-License-Identifier: Apache-2.0 */
/* torch's _StridedShard in the C API: rs_dtensor_local_boxes and
 * rs_layout_add_dtensor_strided against cases worked out with the Python
 * layer (bindings/python/reshard/mesh.py, itself checked against torch):
 * the issue's example, uneven sizes in both orders, RS_STRIDED_AUTO's
 * refusal, coordinates holding several boxes, the shards a layout gets,
 * and every status of bad input, which leaves the outputs and the layout
 * as they were. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <reshard/reshard.h>

#include "th_util.h"

#define MAXB 8

typedef struct got {
  rs_status st;
  int n;
  int64_t shape[RS_MAX_DIMS];
  int64_t off[MAXB * 4], ext[MAXB * 4], loc[MAXB * 4];
} got;

/* rs_dtensor_local_boxes into g, every output first set to -7. */
static got boxes(int ndim, const int64_t *shape, int mesh_ndim,
                 const int64_t *mesh, const int *place, const int *split,
                 rs_strided_order order, const int64_t *coord, int max) {
  got g;
  for (size_t i = 0; i < RS_MAX_DIMS; i++) g.shape[i] = -7;
  for (size_t i = 0; i < MAXB * 4; i++) g.off[i] = g.ext[i] = g.loc[i] = -7;
  g.n = -7;
  g.st =
      rs_dtensor_local_boxes(ndim, shape, mesh_ndim, mesh, place, split, order,
                             coord, g.shape, max, &g.n, g.off, g.ext, g.loc);
  return g;
}

static void expect_untouched(const got *g, const char *what) {
  for (size_t i = 0; i < RS_MAX_DIMS; i++)
    cr_assert_eq(g->shape[i], -7, "%s: local_shape[%zu] written", what, i);
  for (size_t i = 0; i < MAXB * 4; i++)
    cr_assert(g->off[i] == -7 && g->ext[i] == -7 && g->loc[i] == -7,
              "%s: a box array was written at %zu", what, i);
}

/* Box b of g (ndim entries each) is off/ext/loc. */
static void expect_box(const got *g, int ndim, int b, const int64_t *off,
                       const int64_t *ext, const int64_t *loc,
                       const char *what) {
  for (int d = 0; d < ndim; d++) {
    int i = b * ndim + d;
    cr_assert(g->off[i] == off[d] && g->ext[i] == ext[d] && g->loc[i] == loc[d],
              "%s box %d dim %d: offset %lld extent %lld local %lld, want "
              "%lld %lld %lld",
              what, b, d, (long long)g->off[i], (long long)g->ext[i],
              (long long)g->loc[i], (long long)off[d], (long long)ext[d],
              (long long)loc[d]);
  }
}

static void expect_status(const got *g, rs_status want, const char *frag,
                          const char *what) {
  cr_assert_eq(g->st, want, "%s: %s, want %s (%s)", what, rs_status_name(g->st),
               rs_status_name(want), rs_last_error());
  if (frag)
    cr_assert(strstr(rs_last_error(), frag), "%s: '%s' lacks '%s'", what,
              rs_last_error(), frag);
}

/* ---- the issue's example ------------------------------------------------- */

/* mesh (dp=2, tp=2), [StridedShard(0, 2), Shard(0)], shape [8, 3]: torch
 * puts rows 4-5 on (0, 1) and rows 2-3 on (1, 0); even, so every order
 * agrees. */
Test(strided_boxes, issue_example) {
  const int64_t want_row[4] = {0, 4, 2, 6};
  rs_strided_order orders[3] = {RS_STRIDED_DISTRIBUTE, RS_STRIDED_FSDP2,
                                RS_STRIDED_AUTO};
  for (int o = 0; o < 3; o++)
    for (int64_t i = 0; i < 4; i++) {
      int64_t coord[2] = {i / 2, i % 2};
      got g = boxes(2, I64(8, 3), 2, I64(2, 2), INTS(0, 0), INTS(2, 1),
                    orders[o], coord, MAXB);
      expect_status(&g, RS_OK, NULL, "issue example");
      cr_assert_eq(g.n, 1);
      cr_assert(g.shape[0] == 2 && g.shape[1] == 3);
      expect_box(&g, 2, 0, I64(want_row[i], 0), I64(2, 3), I64(0, 0),
                 "issue example");
    }
}

/* ---- uneven: the two orders differ --------------------------------------- */

/* mesh (3, 2), [StridedShard(0, 2), Shard(0)], shape [7, 2]: row 6 sits on
 * (2, 0) in distribute_tensor's order and on (2, 1) in FSDP2's. */
Test(strided_boxes, uneven_both_orders) {
  const int64_t *shape = I64(7, 2), *mesh = I64(3, 2);
  const int *place = INTS(0, 0), *split = INTS(2, 1);
  got d0 = boxes(2, shape, 2, mesh, place, split, RS_STRIDED_DISTRIBUTE,
                 I64(2, 0), MAXB);
  got d1 = boxes(2, shape, 2, mesh, place, split, RS_STRIDED_DISTRIBUTE,
                 I64(2, 1), MAXB);
  got f0 =
      boxes(2, shape, 2, mesh, place, split, RS_STRIDED_FSDP2, I64(2, 0), MAXB);
  got f1 =
      boxes(2, shape, 2, mesh, place, split, RS_STRIDED_FSDP2, I64(2, 1), MAXB);
  expect_status(&d0, RS_OK, NULL, "distribute (2, 0)");
  cr_assert_eq(d0.n, 1);
  expect_box(&d0, 2, 0, I64(6, 0), I64(1, 2), I64(0, 0), "distribute (2,0)");
  expect_status(&d1, RS_OK, NULL, "distribute (2, 1)");
  cr_assert_eq(d1.n, 0);
  cr_assert(d1.shape[0] == 0 && d1.shape[1] == 2, "empty local shape");
  cr_assert_eq(d1.off[0], -7, "no box written for an empty shard");
  expect_status(&f0, RS_OK, NULL, "fsdp2 (2, 0)");
  cr_assert_eq(f0.n, 0);
  expect_status(&f1, RS_OK, NULL, "fsdp2 (2, 1)");
  cr_assert_eq(f1.n, 1);
  expect_box(&f1, 2, 0, I64(6, 0), I64(1, 2), I64(0, 0), "fsdp2 (2, 1)");
  /* where they agree, the same answer */
  got a = boxes(2, shape, 2, mesh, place, split, RS_STRIDED_DISTRIBUTE,
                I64(1, 1), MAXB);
  got b =
      boxes(2, shape, 2, mesh, place, split, RS_STRIDED_FSDP2, I64(1, 1), MAXB);
  expect_box(&a, 2, 0, I64(5, 0), I64(1, 2), I64(0, 0), "distribute (1,1)");
  expect_box(&b, 2, 0, I64(5, 0), I64(1, 2), I64(0, 0), "fsdp2 (1,1)");
}

Test(strided_boxes, auto_refuses_where_the_orders_differ) {
  /* every coordinate is refused, also those where the two agree */
  for (int64_t i = 0; i < 6; i++) {
    int64_t coord[2] = {i / 2, i % 2};
    got g = boxes(2, I64(7, 2), 2, I64(3, 2), INTS(0, 0), INTS(2, 1),
                  RS_STRIDED_AUTO, coord, MAXB);
    expect_status(&g, RS_ERR_INVALID_ARGUMENT, "RS_STRIDED_DISTRIBUTE",
                  "auto, uneven");
    cr_assert(strstr(rs_last_error(), "RS_STRIDED_FSDP2"), "%s",
              rs_last_error());
    cr_assert_eq(g.n, 0);
    expect_untouched(&g, "auto, uneven");
  }
  /* the same shape without the strided axis is plain: accepted */
  got g = boxes(2, I64(7, 2), 2, I64(3, 2), INTS(0, 0), NULL, RS_STRIDED_AUTO,
                I64(2, 1), MAXB);
  expect_status(&g, RS_OK, NULL, "auto, plain");
}

/* ---- several boxes ------------------------------------------------------- */

Test(strided_boxes, several_boxes_one_dim) {
  /* [5] over 2 with StridedShard(0, 3): pieces [0,2) [2,4) [4,5);
   * coordinate 0 holds 0, 2, 4, coordinate 1 holds 1, 3 */
  got g = boxes(1, I64(5), 1, I64(2), INTS(0), INTS(3), RS_STRIDED_DISTRIBUTE,
                I64(0), MAXB);
  expect_status(&g, RS_OK, NULL, "[5] coord 0");
  cr_assert_eq(g.n, 3);
  cr_assert_eq(g.shape[0], 3);
  for (int b = 0; b < 3; b++)
    expect_box(&g, 1, b, I64(2 * b), I64(1), I64(b), "[5] coord 0");
  g = boxes(1, I64(5), 1, I64(2), INTS(0), INTS(3), RS_STRIDED_DISTRIBUTE,
            I64(1), MAXB);
  cr_assert_eq(g.n, 2);
  for (int b = 0; b < 2; b++)
    expect_box(&g, 1, b, I64(2 * b + 1), I64(1), I64(b), "[5] coord 1");
  /* [8, 3] over 2 with StridedShard(0, 2): rows 0-1 and 4-5 */
  g = boxes(2, I64(8, 3), 1, I64(2), INTS(0), INTS(2), RS_STRIDED_DISTRIBUTE,
            I64(0), MAXB);
  expect_status(&g, RS_OK, NULL, "[8,3]");
  cr_assert_eq(g.n, 2);
  cr_assert(g.shape[0] == 4 && g.shape[1] == 3);
  expect_box(&g, 2, 0, I64(0, 0), I64(2, 3), I64(0, 0), "[8,3]");
  expect_box(&g, 2, 1, I64(4, 0), I64(2, 3), I64(2, 0), "[8,3]");
}

Test(strided_boxes, several_boxes_two_dims_row_major) {
  /* [4, 4] on (2, 2) with StridedShard(0, 2), StridedShard(1, 2): (1, 0)
   * holds rows 1, 3 and columns 0, 2: four boxes, the last dim fastest */
  got g = boxes(2, I64(4, 4), 2, I64(2, 2), INTS(0, 1), INTS(2, 2),
                RS_STRIDED_DISTRIBUTE, I64(1, 0), MAXB);
  expect_status(&g, RS_OK, NULL, "[4,4]");
  cr_assert_eq(g.n, 4);
  expect_box(&g, 2, 0, I64(1, 0), I64(1, 1), I64(0, 0), "[4,4]");
  expect_box(&g, 2, 1, I64(1, 2), I64(1, 1), I64(0, 1), "[4,4]");
  expect_box(&g, 2, 2, I64(3, 0), I64(1, 1), I64(1, 0), "[4,4]");
  expect_box(&g, 2, 3, I64(3, 2), I64(1, 1), I64(1, 1), "[4,4]");
}

Test(strided_boxes, counting_and_too_little_room) {
  const int64_t *shape = I64(4, 4), *mesh = I64(2, 2), *coord = I64(1, 0);
  const int *place = INTS(0, 1), *split = INTS(2, 2);
  /* max_boxes 0 counts, and the box arrays may be NULL */
  int64_t local[2] = {-7, -7};
  int n = -7;
  rs_status st = rs_dtensor_local_boxes(2, shape, 2, mesh, place, split,
                                        RS_STRIDED_DISTRIBUTE, coord, local, 0,
                                        &n, NULL, NULL, NULL);
  cr_assert_eq(st, RS_OK, "%s", rs_last_error());
  cr_assert_eq(n, 4);
  cr_assert(local[0] == 2 && local[1] == 2);
  /* room for 3 of 4: refused, both numbers named, nothing written */
  got g =
      boxes(2, shape, 2, mesh, place, split, RS_STRIDED_DISTRIBUTE, coord, 3);
  expect_status(&g, RS_ERR_INVALID_ARGUMENT, "4 boxes", "room for 3");
  cr_assert(strstr(rs_last_error(), "3"), "%s", rs_last_error());
  cr_assert_eq(g.n, 4, "num_boxes says how many are needed");
  expect_untouched(&g, "room for 3");
  /* exactly enough room */
  g = boxes(2, shape, 2, mesh, place, split, RS_STRIDED_DISTRIBUTE, coord, 4);
  expect_status(&g, RS_OK, NULL, "room for 4");
  /* the box arrays are needed when there is room */
  st = rs_dtensor_local_boxes(2, shape, 2, mesh, place, split,
                              RS_STRIDED_DISTRIBUTE, coord, local, 4, &n, NULL,
                              NULL, NULL);
  cr_assert_eq(st, RS_ERR_NULL_POINTER);
}

Test(strided_boxes, plain_placements_as_local_box) {
  /* split factors all 1 (or NULL) give rs_dtensor_local_box's box */
  for (int64_t c = 0; c < 4; c++) {
    int64_t off[2], ext[2];
    cr_assert_eq(
        rs_dtensor_local_box(2, I64(5, 3), 1, I64(4), INTS(0), &c, off, ext),
        RS_OK);
    got g = boxes(2, I64(5, 3), 1, I64(4), INTS(0), INTS(1), RS_STRIDED_FSDP2,
                  &c, MAXB);
    expect_status(&g, RS_OK, NULL, "plain");
    cr_assert_eq(g.n, ext[0] ? 1 : 0, "coord %lld", (long long)c);
    if (g.n) expect_box(&g, 2, 0, off, ext, I64(0, 0), "plain");
  }
}

/* ---- bad input ----------------------------------------------------------- */

typedef struct bad_case {
  const char *what;
  int ndim, mesh_ndim;
  int64_t shape[2], mesh[2];
  int place[2], split[2];
  int order;
  int64_t coord[2];
  int max;
  rs_status want;
  const char *frag;
} bad_case;

static const bad_case bad_cases[] = {
    {"split factor 0",
     1,
     1,
     {8},
     {2},
     {0},
     {0},
     1,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "split factor 0"},
    {"split factor negative",
     1,
     1,
     {8},
     {2},
     {0},
     {-3},
     1,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "-3"},
    {"split factor on Replicate",
     1,
     2,
     {8},
     {2, 2},
     {RS_REPLICATE, 0},
     {2, 1},
     1,
     {0, 0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "Replicate"},
    {"unknown order",
     1,
     1,
     {8},
     {2},
     {0},
     {2},
     7,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "7"},
    {"fsdp2 without later Shard axes",
     1,
     1,
     {8},
     {2},
     {0},
     {2},
     2,
     {0},
     MAXB,
     RS_ERR_UNSUPPORTED,
     "FSDP2 order"},
    {"fsdp2 with the wrong product",
     1,
     2,
     {8},
     {2, 2},
     {0, 0},
     {4, 1},
     2,
     {0, 0},
     MAXB,
     RS_ERR_UNSUPPORTED,
     "multiply to 4"},
    {"auto where fsdp2 does not apply",
     1,
     1,
     {8},
     {2},
     {0},
     {2},
     0,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "RS_STRIDED_FSDP2"},
    {"max_boxes negative",
     1,
     1,
     {8},
     {2},
     {0},
     {2},
     1,
     {0},
     -1,
     RS_ERR_INVALID_ARGUMENT,
     "-1"},
    {"coordinate outside the mesh",
     1,
     1,
     {8},
     {2},
     {0},
     {2},
     1,
     {2},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "outside"},
    {"placement not a dim",
     1,
     1,
     {8},
     {2},
     {1},
     {2},
     1,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "placement 1"},
    {"no dims", 0, 1, {8}, {2}, {0}, {2}, 1, {0}, MAXB, RS_ERR_BAD_SHAPE, NULL},
    {"too many dims",
     17,
     1,
     {8},
     {2},
     {0},
     {2},
     1,
     {0},
     MAXB,
     RS_ERR_TOO_MANY_DIMS,
     NULL},
    {"size 0",
     1,
     1,
     {0},
     {2},
     {0},
     {2},
     1,
     {0},
     MAXB,
     RS_ERR_BAD_SHAPE,
     "size 0"},
    {"mesh axis 0",
     1,
     1,
     {8},
     {0},
     {0},
     {2},
     1,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "mesh axis 0"},
    {"mesh of 0 axes",
     1,
     0,
     {8},
     {2},
     {0},
     {2},
     1,
     {0},
     MAXB,
     RS_ERR_INVALID_ARGUMENT,
     "mesh of 0"},
    /* bounded work: refused, not slow */
    {"too many pieces",
     1,
     1,
     {1 << 22},
     {2},
     {0},
     {1 << 21},
     1,
     {0},
     MAXB,
     RS_ERR_UNSUPPORTED,
     "pieces"},
    {"too many boxes",
     2,
     2,
     {4096, 4096},
     {2, 2},
     {0, 1},
     {2048, 2048},
     1,
     {0, 0},
     MAXB,
     RS_ERR_UNSUPPORTED,
     "boxes"},
    {"auto over too large a mesh",
     1,
     2,
     {8},
     {2048, 1024},
     {0, 0},
     {1024, 1},
     0,
     {0, 0},
     MAXB,
     RS_ERR_UNSUPPORTED,
     "mesh coordinates"},
};

Test(strided_boxes, bad_input) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const bad_case *c = &bad_cases[i];
    int64_t shape[17];
    for (int d = 0; d < 17; d++) shape[d] = d < 2 ? c->shape[d] : 1;
    got g = boxes(c->ndim, shape, c->mesh_ndim, c->mesh, c->place, c->split,
                  (rs_strided_order)c->order, c->coord, c->max);
    expect_status(&g, c->want, c->frag, c->what);
    cr_assert_eq(g.n, 0, "%s: num_boxes %d", c->what, g.n);
    expect_untouched(&g, c->what);
  }
}

Test(strided_boxes, null_pointers) {
  int64_t local[1], off[1], ext[1], loc[1];
  int n = -7;
  const int64_t *shape = I64(8), *mesh = I64(2), *coord = I64(0);
  const int *place = INTS(0);
#define NULL_CASE(...)                                                     \
  do {                                                                     \
    n = -7;                                                                \
    cr_assert_eq(rs_dtensor_local_boxes(__VA_ARGS__), RS_ERR_NULL_POINTER, \
                 "%s", #__VA_ARGS__);                                      \
  } while (0)
  NULL_CASE(1, NULL, 1, mesh, place, NULL, 1, coord, local, 1, &n, off, ext,
            loc);
  cr_assert_eq(n, 0, "num_boxes set on failure");
  NULL_CASE(1, shape, 1, NULL, place, NULL, 1, coord, local, 1, &n, off, ext,
            loc);
  NULL_CASE(1, shape, 1, mesh, NULL, NULL, 1, coord, local, 1, &n, off, ext,
            loc);
  NULL_CASE(1, shape, 1, mesh, place, NULL, 1, NULL, local, 1, &n, off, ext,
            loc);
  NULL_CASE(1, shape, 1, mesh, place, NULL, 1, coord, NULL, 1, &n, off, ext,
            loc);
  NULL_CASE(1, shape, 1, mesh, place, NULL, 1, coord, local, 1, NULL, off, ext,
            loc);
  NULL_CASE(1, shape, 1, mesh, place, NULL, 1, coord, local, 1, &n, off, ext,
            NULL);
#undef NULL_CASE
  cr_assert(strstr(rs_last_error(), "local_offsets"), "%s", rs_last_error());
}

/* ---- layouts ------------------------------------------------------------- */

typedef struct fx {
  rs_context *ctx;
  rs_layout *l;
} fx;

static fx fx_new(int world) {
  fx f;
  cr_assert_eq(rs_context_create_local(world, &f.ctx), RS_OK);
  cr_assert_eq(rs_layout_create(f.ctx, &f.l), RS_OK);
  return f;
}

static void fx_free(fx *f) {
  rs_layout_destroy(f->l);
  rs_context_destroy(f->ctx);
}

static int64_t shards_of(const rs_layout *l) {
  int64_t n = -1;
  cr_assert_eq(rs_layout_num_shards(l, &n), RS_OK);
  return n;
}

/* The wire bytes of l (to compare two layouts' shards exactly). */
static void *bytes_of(const rs_layout *l, size_t *len) {
  void *b = NULL;
  cr_assert_eq(rs_layout_serialize(l, &b, len), RS_OK, "%s",
               rs_layout_last_error(l));
  return b;
}

static void expect_same(const rs_layout *a, const rs_layout *b,
                        const char *what) {
  size_t na, nb;
  void *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
  cr_assert(na == nb && memcmp(x, y, na) == 0,
            "%s: the layouts hold different shards", what);
  rs_free(x);
  rs_free(y);
}

Test(strided_layout, several_boxes_are_shards_of_one_buffer) {
  /* [8, 3] f32 on ranks 3 and 1, StridedShard(0, 2): each rank's dense
   * [4, 3] local tensor is rows 0-1 then 4-5 (rank 3) or 2-3 then 6-7 */
  fx f = fx_new(4), w = fx_new(4);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(
        rs_layout_add_tensor(i ? w.l : f.l, "w", RS_DTYPE_F32, 2, I64(8, 3)),
        RS_OK);
  cr_assert_eq(
      rs_layout_add_dtensor_strided(f.l, "w", 1, I64(2), INTS(3, 1), INTS(0),
                                    INTS(2), RS_STRIDED_DISTRIBUTE, 2, 100),
      RS_OK, "%s", rs_layout_last_error(f.l));
  const int64_t *st = I64(3, 1);
  cr_assert_eq(
      rs_layout_add_shard(w.l, "w", 3, I64(0, 0), I64(2, 3), 2, 100, st),
      RS_OK);
  cr_assert_eq(rs_layout_add_shard(w.l, "w", 3, I64(4, 0), I64(2, 3), 2,
                                   100 + 2 * 3 * 4, st),
               RS_OK);
  cr_assert_eq(
      rs_layout_add_shard(w.l, "w", 1, I64(2, 0), I64(2, 3), 2, 100, st),
      RS_OK);
  cr_assert_eq(rs_layout_add_shard(w.l, "w", 1, I64(6, 0), I64(2, 3), 2,
                                   100 + 2 * 3 * 4, st),
               RS_OK);
  expect_same(f.l, w.l, "strided [8, 3]");
  fx_free(&f);
  fx_free(&w);
}

Test(strided_layout, one_box_is_dense) {
  /* the issue's example: one box per rank, added without strides */
  fx f = fx_new(4), w = fx_new(4);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(
        rs_layout_add_tensor(i ? w.l : f.l, "w", RS_DTYPE_BF16, 2, I64(8, 3)),
        RS_OK);
  cr_assert_eq(rs_layout_add_dtensor_strided(
                   f.l, "w", 2, I64(2, 2), INTS(0, 1, 2, 3), INTS(0, 0),
                   INTS(2, 1), RS_STRIDED_FSDP2, 0, 8),
               RS_OK, "%s", rs_layout_last_error(f.l));
  const int64_t rows[4] = {0, 4, 2, 6};
  for (int r = 0; r < 4; r++)
    cr_assert_eq(rs_layout_add_shard(w.l, "w", r, I64(rows[r], 0), I64(2, 3), 0,
                                     8, NULL),
                 RS_OK);
  expect_same(f.l, w.l, "issue example");
  fx_free(&f);
  fx_free(&w);
}

Test(strided_layout, plain_is_rs_layout_add_dtensor) {
  fx f = fx_new(6), w = fx_new(6);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(
        rs_layout_add_tensor(i ? w.l : f.l, "w", RS_DTYPE_F16, 2, I64(7, 5)),
        RS_OK);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, "w", 2, I64(3, 2),
                                             INTS(5, 4, 3, 2, 1, 0), INTS(0, 1),
                                             NULL, RS_STRIDED_FSDP2, 1, 6),
               RS_OK, "%s", rs_layout_last_error(f.l));
  cr_assert_eq(rs_layout_add_dtensor(w.l, "w", 2, I64(3, 2),
                                     INTS(5, 4, 3, 2, 1, 0), INTS(0, 1), 1, 6),
               RS_OK);
  expect_same(f.l, w.l, "plain placements");
  fx_free(&f);
  fx_free(&w);
}

Test(strided_layout, uneven_in_each_order) {
  /* [7, 2] on (3, 2): row 6 on mesh coordinate (2, 0) (rank 4) or (2, 1)
   * (rank 5); the empty shard of the other is skipped */
  for (int o = 0; o < 2; o++) {
    fx f = fx_new(6);
    cr_assert_eq(rs_layout_add_tensor(f.l, "w", RS_DTYPE_F32, 2, I64(7, 2)),
                 RS_OK);
    cr_assert_eq(
        rs_layout_add_dtensor_strided(
            f.l, "w", 2, I64(3, 2), INTS(0, 1, 2, 3, 4, 5), INTS(0, 0),
            INTS(2, 1), o ? RS_STRIDED_FSDP2 : RS_STRIDED_DISTRIBUTE, 0, 0),
        RS_OK, "%s", rs_layout_last_error(f.l));
    cr_assert_eq(shards_of(f.l), 5);
    fx w = fx_new(6);
    cr_assert_eq(rs_layout_add_tensor(w.l, "w", RS_DTYPE_F32, 2, I64(7, 2)),
                 RS_OK);
    const int64_t rows[5][2] = {{0, 2}, {4, 1}, {2, 2}, {5, 1}, {6, 1}};
    const int ranks[5] = {0, 1, 2, 3, o ? 5 : 4};
    for (int i = 0; i < 5; i++)
      cr_assert_eq(rs_layout_add_shard(w.l, "w", ranks[i], I64(rows[i][0], 0),
                                       I64(rows[i][1], 2), 0, 0, NULL),
                   RS_OK);
    expect_same(f.l, w.l, o ? "fsdp2" : "distribute");
    fx_free(&f);
    fx_free(&w);
  }
}

typedef struct layout_bad {
  const char *what;
  int64_t shape0;
  int mesh_ndim;
  int64_t mesh[2];
  int place[2], split[2];
  int order, buffer;
  int64_t byte_offset;
  rs_status want;
  const char *frag;
} layout_bad;

static const layout_bad layout_bads[] = {
    {"auto, uneven",
     7,
     2,
     {3, 2},
     {0, 0},
     {2, 1},
     0,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "RS_STRIDED_FSDP2"},
    {"fsdp2 does not apply",
     8,
     1,
     {2},
     {0},
     {2},
     2,
     0,
     0,
     RS_ERR_UNSUPPORTED,
     "FSDP2 order"},
    {"split factor on Replicate",
     8,
     2,
     {3, 2},
     {RS_REPLICATE, 0},
     {2, 1},
     1,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "split factor 2"},
    {"split factor 0",
     8,
     1,
     {2},
     {0},
     {0},
     1,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "split factor 0"},
    {"unknown order",
     8,
     1,
     {2},
     {0},
     {2},
     3,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "order 3"},
    {"placement not a dim",
     8,
     1,
     {2},
     {2},
     {2},
     1,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "placement 2"},
    {"unknown buffer",
     8,
     1,
     {2},
     {0},
     {2},
     1,
     -1,
     0,
     RS_ERR_UNKNOWN_BUFFER,
     NULL},
    /* the first box of rank 0 fits, its second does not: taken back */
    {"second box overflows",
     8,
     1,
     {2},
     {0},
     {2},
     1,
     0,
     INT64_MAX - 30,
     RS_ERR_OVERFLOW,
     NULL},
    {"mesh larger than the world",
     8,
     2,
     {3, 3},
     {0, 0},
     {2, 1},
     1,
     0,
     0,
     RS_ERR_INVALID_ARGUMENT,
     "world"},
};

Test(strided_layout, a_failed_call_leaves_the_layout_as_it_was) {
  for (size_t i = 0; i < sizeof layout_bads / sizeof *layout_bads; i++) {
    const layout_bad *c = &layout_bads[i];
    fx f = fx_new(6);
    cr_assert_eq(
        rs_layout_add_tensor(f.l, "w", RS_DTYPE_F32, 2, I64(c->shape0, 3)),
        RS_OK);
    cr_assert_eq(
        rs_layout_add_dtensor(f.l, "w", 1, I64(2), INTS(4, 5), INTS(1), 3, 0),
        RS_OK); /* something there before */
    size_t n0, n1;
    void *before = bytes_of(f.l, &n0);
    rs_status st = rs_layout_add_dtensor_strided(
        f.l, "w", c->mesh_ndim, c->mesh, INTS(0, 1, 2, 3, 4, 5), c->place,
        c->split, (rs_strided_order)c->order, c->buffer, c->byte_offset);
    const char *msg = rs_layout_last_error(f.l);
    cr_assert_eq(st, c->want, "%s: %s, want %s (%s)", c->what,
                 rs_status_name(st), rs_status_name(c->want), msg);
    cr_assert(strstr(msg, "'w'"), "%s: the message names no tensor: %s",
              c->what, msg);
    if (c->frag)
      cr_assert(strstr(msg, c->frag), "%s: '%s' lacks '%s'", c->what, msg,
                c->frag);
    void *after = bytes_of(f.l, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "%s: the layout changed", c->what);
    cr_assert_eq(shards_of(f.l), 2, "%s", c->what);
    rs_free(before);
    rs_free(after);
    fx_free(&f);
  }
}

Test(strided_layout, null_arguments) {
  fx f = fx_new(2);
  cr_assert_eq(rs_layout_add_tensor(f.l, "w", RS_DTYPE_F32, 1, I64(8)), RS_OK);
  const int64_t *mesh = I64(2);
  const int *ranks = INTS(0, 1), *place = INTS(0), *split = INTS(2);
  cr_assert_eq(rs_layout_add_dtensor_strided(NULL, "w", 1, mesh, ranks, place,
                                             split, 1, 0, 0),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, NULL, 1, mesh, ranks, place,
                                             split, 1, 0, 0),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, "w", 1, NULL, ranks, place,
                                             split, 1, 0, 0),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, "w", 1, mesh, NULL, place,
                                             split, 1, 0, 0),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, "w", 1, mesh, ranks, NULL,
                                             split, 1, 0, 0),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rs_layout_add_dtensor_strided(f.l, "ghost", 1, mesh, ranks,
                                             place, split, 1, 0, 0),
               RS_ERR_UNKNOWN_TENSOR);
  cr_assert_eq(shards_of(f.l), 0);
  fx_free(&f);
}
