/* SPDX-License-Identifier: Apache-2.0 */
/* rs_dtensor_local_box against hand-worked torch.chunk / DTensor
 * _local_shard_size_and_offset cases, and rs_layout_add_dtensor's shard
 * count. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "th_util.h"

/* The box of coord on a 1-D mesh of n sharding dim 0 of a 1-D tensor. */
static void box1(int64_t size, int64_t n, int64_t coord, int64_t *off,
                 int64_t *ext) {
  rs_status st = rs_dtensor_local_box(1, &size, 1, &n, INTS(0), &coord, off,
                                      ext);
  cr_assert_eq(st, RS_OK, "size %lld over %lld coord %lld: %s (%s)",
               (long long)size, (long long)n, (long long)coord,
               rs_status_name(st), rs_last_error());
}

static void expect_1d(int64_t size, int64_t n, const int64_t *exts,
                      const int64_t *offs) {
  for (int64_t i = 0; i < n; i++) {
    int64_t off = -7, ext = -7;
    box1(size, n, i, &off, &ext);
    cr_assert_eq(ext, exts[i], "size %lld over %lld shard %lld: extent %lld, "
                 "want %lld", (long long)size, (long long)n, (long long)i,
                 (long long)ext, (long long)exts[i]);
    cr_assert_eq(off, offs[i], "size %lld over %lld shard %lld: offset %lld,"
                 " want %lld", (long long)size, (long long)n, (long long)i,
                 (long long)off, (long long)offs[i]);
  }
}

Test(dtensor_1d, even_split) {
  expect_1d(8, 4, I64(2, 2, 2, 2), I64(0, 2, 4, 6));
  expect_1d(6, 1, I64(6), I64(0));
  expect_1d(4, 4, I64(1, 1, 1, 1), I64(0, 1, 2, 3));
}

Test(dtensor_1d, size5_over4) {
  expect_1d(5, 4, I64(2, 2, 1, 0), I64(0, 2, 4, 5));
}

Test(dtensor_1d, size3_over4) {
  expect_1d(3, 4, I64(1, 1, 1, 0), I64(0, 1, 2, 3));
}

Test(dtensor_1d, size2_over4) {
  expect_1d(2, 4, I64(1, 1, 0, 0), I64(0, 1, 2, 2));
}

Test(dtensor_1d, size1_over3) {
  expect_1d(1, 3, I64(1, 0, 0), I64(0, 1, 1));
}

Test(dtensor_1d, size6_over4_last_empty) {
  /* chunk 2: 2,2,2,0 -- torch.chunk gives only 3 chunks */
  expect_1d(6, 4, I64(2, 2, 2, 0), I64(0, 2, 4, 6));
}

Test(dtensor_1d, size10_over4) {
  expect_1d(10, 4, I64(3, 3, 3, 1), I64(0, 3, 6, 9));
}

Test(dtensor_1d, size7_over3) {
  expect_1d(7, 3, I64(3, 3, 1), I64(0, 3, 6));
}

Test(dtensor_1d, size9_over6) {
  /* chunk 2: 2,2,2,2,1,0 */
  expect_1d(9, 6, I64(2, 2, 2, 2, 1, 0), I64(0, 2, 4, 6, 8, 9));
}

Test(dtensor_1d, size5_over8_many_empty) {
  /* chunk 1: 1,1,1,1,1,0,0,0 offsets clamp to 5 */
  expect_1d(5, 8, I64(1, 1, 1, 1, 1, 0, 0, 0), I64(0, 1, 2, 3, 4, 5, 5, 5));
}

Test(dtensor_1d, replicate) {
  int64_t off = -1, ext = -1;
  int64_t size = 5, n = 3;
  for (int64_t c = 0; c < 3; c++) {
    cr_assert_eq(rs_dtensor_local_box(1, &size, 1, &n, INTS(RS_REPLICATE),
                                      &c, &off, &ext),
                 RS_OK);
    cr_assert_eq(off, 0);
    cr_assert_eq(ext, 5);
  }
}

/* ---- 2-D tensors, 1-D and 2-D meshes */

static void box(int ndim, const int64_t *shape, int mesh_ndim,
                const int64_t *mesh_shape, const int *pl, const int64_t *coord,
                int64_t *off, int64_t *ext) {
  for (int d = 0; d < ndim; d++) off[d] = ext[d] = -99;
  rs_status st = rs_dtensor_local_box(ndim, shape, mesh_ndim, mesh_shape, pl,
                                      coord, off, ext);
  cr_assert_eq(st, RS_OK, "%s: %s", rs_status_name(st), rs_last_error());
}

static void expect_box(int ndim, const int64_t *off, const int64_t *ext,
                       const int64_t *woff, const int64_t *wext,
                       const char *what) {
  for (int d = 0; d < ndim; d++) {
    cr_assert_eq(off[d], woff[d], "%s dim %d: offset %lld want %lld", what, d,
                 (long long)off[d], (long long)woff[d]);
    cr_assert_eq(ext[d], wext[d], "%s dim %d: extent %lld want %lld", what,
                 d, (long long)ext[d], (long long)wext[d]);
  }
}

Test(dtensor_2d, shard1_over3_uneven) {
  /* [4,7] Shard(1) over 3: chunk 3 -> cols [0,3) [3,6) [6,7) */
  int64_t off[2], ext[2];
  box(2, I64(4, 7), 1, I64(3), INTS(1), I64(0), off, ext);
  expect_box(2, off, ext, I64(0, 0), I64(4, 3), "c0");
  box(2, I64(4, 7), 1, I64(3), INTS(1), I64(1), off, ext);
  expect_box(2, off, ext, I64(0, 3), I64(4, 3), "c1");
  box(2, I64(4, 7), 1, I64(3), INTS(1), I64(2), off, ext);
  expect_box(2, off, ext, I64(0, 6), I64(4, 1), "c2");
}

Test(dtensor_2d, mesh2x2_shard0_shard1) {
  /* [5,3] on mesh 2x2, placements (Shard(0), Shard(1)):
   * rows: chunk 3 -> [0,3) [3,5); cols: chunk 2 -> [0,2) [2,3) */
  int64_t off[2], ext[2];
  box(2, I64(5, 3), 2, I64(2, 2), INTS(0, 1), I64(0, 0), off, ext);
  expect_box(2, off, ext, I64(0, 0), I64(3, 2), "(0,0)");
  box(2, I64(5, 3), 2, I64(2, 2), INTS(0, 1), I64(0, 1), off, ext);
  expect_box(2, off, ext, I64(0, 2), I64(3, 1), "(0,1)");
  box(2, I64(5, 3), 2, I64(2, 2), INTS(0, 1), I64(1, 0), off, ext);
  expect_box(2, off, ext, I64(3, 0), I64(2, 2), "(1,0)");
  box(2, I64(5, 3), 2, I64(2, 2), INTS(0, 1), I64(1, 1), off, ext);
  expect_box(2, off, ext, I64(3, 2), I64(2, 1), "(1,1)");
}

Test(dtensor_2d, mesh2x3_shard1_shard0_reversed) {
  /* [6,4] on mesh 2x3, placements (Shard(1), Shard(0)): axis 0 (size 2)
   * splits cols into [0,2) [2,4); axis 1 (size 3) splits rows 2 each. */
  int64_t off[2], ext[2];
  box(2, I64(6, 4), 2, I64(2, 3), INTS(1, 0), I64(1, 2), off, ext);
  expect_box(2, off, ext, I64(4, 2), I64(2, 2), "(1,2)");
  box(2, I64(6, 4), 2, I64(2, 3), INTS(1, 0), I64(0, 1), off, ext);
  expect_box(2, off, ext, I64(2, 0), I64(2, 2), "(0,1)");
}

Test(dtensor_2d, replicate_and_shard) {
  /* FSDP x TP style: (Replicate, Shard(0)) on mesh 3x2 for [5,2] */
  int64_t off[2], ext[2];
  for (int64_t r = 0; r < 3; r++) {
    box(2, I64(5, 2), 2, I64(3, 2), INTS(RS_REPLICATE, 0), I64(r, 0), off,
        ext);
    expect_box(2, off, ext, I64(0, 0), I64(3, 2), "(r,0)");
    box(2, I64(5, 2), 2, I64(3, 2), INTS(RS_REPLICATE, 0), I64(r, 1), off,
        ext);
    expect_box(2, off, ext, I64(3, 0), I64(2, 2), "(r,1)");
  }
}

/* ---- nested: two mesh axes both Shard(0) split left to right */

Test(dtensor_nested, even_2x2_on_8) {
  /* [8] mesh 2x2 both Shard(0): axis 0 -> [0,4) [4,8); axis 1 halves it */
  int64_t off[1], ext[1];
  const int64_t want_off[4] = {0, 2, 4, 6};
  for (int64_t a = 0; a < 2; a++)
    for (int64_t b = 0; b < 2; b++) {
      int64_t coord[2] = {a, b};
      box(1, I64(8), 2, I64(2, 2), INTS(0, 0), coord, off, ext);
      cr_assert_eq(off[0], want_off[a * 2 + b], "(%lld,%lld)", (long long)a,
                   (long long)b);
      cr_assert_eq(ext[0], 2);
    }
}

Test(dtensor_nested, uneven_5_over_2x2) {
  /* size 5: axis 0 chunk 3 -> [0,3) [3,5); axis 1 splits each:
   * [0,3) chunk 2 -> [0,2) [2,3); [3,5) chunk 1 -> [3,4) [4,5) */
  const int64_t want_off[4] = {0, 2, 3, 4};
  const int64_t want_ext[4] = {2, 1, 1, 1};
  for (int64_t a = 0; a < 2; a++)
    for (int64_t b = 0; b < 2; b++) {
      int64_t coord[2] = {a, b}, off[1], ext[1];
      box(1, I64(5), 2, I64(2, 2), INTS(0, 0), coord, off, ext);
      cr_assert_eq(off[0], want_off[a * 2 + b], "(%lld,%lld): off %lld",
                   (long long)a, (long long)b, (long long)off[0]);
      cr_assert_eq(ext[0], want_ext[a * 2 + b], "(%lld,%lld): ext %lld",
                   (long long)a, (long long)b, (long long)ext[0]);
    }
}

Test(dtensor_nested, uneven_7_over_3x2_on_2d) {
  /* [7,2] mesh 3x2 (Shard(0), Shard(0)): axis 0 chunk 3 -> [0,3) [3,6)
   * [6,7); axis 1 splits: [0,3)->[0,2)[2,3); [3,6)->[3,5)[5,6);
   * [6,7)->[6,7) and empty at offset 6+1=7. */
  const int64_t want_off[6] = {0, 2, 3, 5, 6, 7};
  const int64_t want_ext[6] = {2, 1, 2, 1, 1, 0};
  for (int64_t a = 0; a < 3; a++)
    for (int64_t b = 0; b < 2; b++) {
      int64_t coord[2] = {a, b}, off[2], ext[2];
      box(2, I64(7, 2), 2, I64(3, 2), INTS(0, 0), coord, off, ext);
      int k = (int)(a * 2 + b);
      cr_assert_eq(ext[0], want_ext[k], "(%lld,%lld): ext %lld want %lld",
                   (long long)a, (long long)b, (long long)ext[0],
                   (long long)want_ext[k]);
      cr_assert_eq(off[0], want_off[k], "(%lld,%lld): off %lld want %lld",
                   (long long)a, (long long)b, (long long)off[0],
                   (long long)want_off[k]);
      cr_assert_eq(off[1], 0);
      cr_assert_eq(ext[1], 2);
    }
}

Test(dtensor_nested, nested_with_other_dim_between) {
  /* [6,5] mesh 2x2x2 placements (Shard(0), Shard(1), Shard(0)):
   * rows: axis0 [0,3)/[3,6), axis2 splits 3 -> 2,1; cols: 5 over 2 -> 3,2 */
  int64_t off[2], ext[2];
  box(2, I64(6, 5), 3, I64(2, 2, 2), INTS(0, 1, 0), I64(1, 1, 1), off, ext);
  expect_box(2, off, ext, I64(5, 3), I64(1, 2), "(1,1,1)");
  box(2, I64(6, 5), 3, I64(2, 2, 2), INTS(0, 1, 0), I64(1, 0, 0), off, ext);
  expect_box(2, off, ext, I64(3, 0), I64(2, 3), "(1,0,0)");
  box(2, I64(6, 5), 3, I64(2, 2, 2), INTS(0, 1, 0), I64(0, 1, 1), off, ext);
  expect_box(2, off, ext, I64(2, 3), I64(1, 2), "(0,1,1)");
}

/* ---- every rank of the mesh, against the reference, for 1-D .. 6-D */

static void sweep(int ndim, const int64_t *shape, int mesh_ndim,
                  const int64_t *mesh_shape, const int *pl) {
  int64_t coord[RS_MAX_DIMS] = {0};
  do {
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], wo[RS_MAX_DIMS],
        we[RS_MAX_DIMS];
    box(ndim, shape, mesh_ndim, mesh_shape, pl, coord, off, ext);
    th_ref_local_box(ndim, shape, mesh_ndim, mesh_shape, pl, coord, wo, we);
    for (int d = 0; d < ndim; d++) {
      cr_assert_eq(off[d], wo[d], "ndim %d mesh_ndim %d coord[0]=%lld dim %d"
                   ": offset %lld want %lld", ndim, mesh_ndim,
                   (long long)coord[0], d, (long long)off[d],
                   (long long)wo[d]);
      cr_assert_eq(ext[d], we[d], "ndim %d mesh_ndim %d coord[0]=%lld dim %d"
                   ": extent %lld want %lld", ndim, mesh_ndim,
                   (long long)coord[0], d, (long long)ext[d],
                   (long long)we[d]);
    }
  } while (th_next(mesh_ndim, mesh_shape, coord));
}

Test(dtensor_sweep, one_to_six_dims) {
  sweep(1, I64(11), 1, I64(4), INTS(0));
  sweep(2, I64(3, 9), 2, I64(2, 4), INTS(1, 0));
  sweep(3, I64(5, 1, 7), 2, I64(3, 2), INTS(2, 0));
  sweep(4, I64(2, 3, 5, 7), 3, I64(2, 2, 3), INTS(3, RS_REPLICATE, 3));
  sweep(5, I64(3, 4, 1, 2, 9), 3, I64(4, 2, 2), INTS(1, 4, 4));
  sweep(6, I64(2, 3, 2, 5, 3, 4), 4, I64(2, 3, 2, 2),
        INTS(0, 3, RS_REPLICATE, 5));
  sweep(6, I64(1, 1, 1, 1, 1, 13), 3, I64(3, 3, 2), INTS(5, 5, 5));
}

Test(dtensor_sweep, six_d_hand_checked) {
  /* [2,3,4,5,6,7] mesh 2x3 (Shard(5), Shard(1)) coord (1,2):
   * dim5: 7 over 2 -> chunk 4 -> [4,7); dim1: 3 over 3 -> [2,3) */
  int64_t off[6], ext[6];
  box(6, I64(2, 3, 4, 5, 6, 7), 2, I64(2, 3), INTS(5, 1), I64(1, 2), off,
      ext);
  expect_box(6, off, ext, I64(0, 2, 0, 0, 0, 4), I64(2, 1, 4, 5, 6, 3),
             "6-D");
}

/* ---- rs_layout_add_dtensor: shards == non-empty local boxes */

static int64_t count_nonempty(int ndim, const int64_t *shape, int mesh_ndim,
                              const int64_t *mesh_shape, const int *pl) {
  int64_t coord[RS_MAX_DIMS] = {0}, n = 0;
  do {
    int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
    th_ref_local_box(ndim, shape, mesh_ndim, mesh_shape, pl, coord, off, ext);
    if (th_volume(ndim, ext) > 0) n++;
  } while (th_next(mesh_ndim, mesh_shape, coord));
  return n;
}

static void expect_shards(int world, int ndim, const int64_t *shape,
                          int mesh_ndim, const int64_t *mesh_shape,
                          const int *pl, int64_t want) {
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  cr_assert_eq(rs_context_create_local(world, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, ndim, shape),
               RS_OK, "%s", rs_context_last_error(ctx));
  int ranks[64];
  int64_t nr = th_volume(mesh_ndim, mesh_shape);
  for (int i = 0; i < nr; i++) ranks[i] = (int)(nr - 1 - i); /* any order */
  rs_status st = rs_layout_add_dtensor(l, "w", mesh_ndim, mesh_shape, ranks,
                                       pl, 0, 0);
  cr_assert_eq(st, RS_OK, "%s: %s", rs_status_name(st),
               rs_context_last_error(ctx));
  int64_t n = -1;
  cr_assert_eq(rs_layout_num_shards(l, &n), RS_OK);
  cr_assert_eq(n, want, "shards %lld, want %lld", (long long)n,
               (long long)want);
  cr_assert_eq(want, count_nonempty(ndim, shape, mesh_ndim, mesh_shape, pl));
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

Test(dtensor_layout, shard_count_even) {
  expect_shards(4, 2, I64(8, 8), 1, I64(4), INTS(0), 4);
}

Test(dtensor_layout, shard_count_skips_empty) {
  /* size 5 over 4: 2,2,1,0 -> 3 shards; size 2 over 4 -> 2 shards */
  expect_shards(4, 1, I64(5), 1, I64(4), INTS(0), 3);
  expect_shards(4, 1, I64(2), 1, I64(4), INTS(0), 2);
  expect_shards(8, 1, I64(5), 1, I64(8), INTS(0), 5);
}

Test(dtensor_layout, shard_count_replicate) {
  expect_shards(6, 2, I64(3, 3), 1, I64(6), INTS(RS_REPLICATE), 6);
  /* (Replicate, Shard(0)) 3x2 over size 1: each column-1 rank is empty */
  expect_shards(6, 2, I64(1, 3), 2, I64(3, 2), INTS(RS_REPLICATE, 0), 3);
}

Test(dtensor_layout, shard_count_nested) {
  /* 7 over 3x2 nested: 2,1,2,1,1,0 -> 5 */
  expect_shards(6, 2, I64(7, 2), 2, I64(3, 2), INTS(0, 0), 5);
  /* 3 over 2x2 nested: [0,2)->1,1 ; [2,3)->1,0 -> 3 */
  expect_shards(4, 1, I64(3), 2, I64(2, 2), INTS(0, 0), 3);
}

Test(dtensor_layout, shard_count_multi_dim_mesh) {
  expect_shards(12, 3, I64(3, 5, 2), 3, I64(2, 3, 2), INTS(1, 0, 2), 12);
  /* dim 0 size 3 over 2 -> 2,1; dim 1 size 2 over 3 -> 1,1,0 -> 4 */
  expect_shards(6, 2, I64(3, 2), 2, I64(2, 3), INTS(0, 1), 4);
}

Test(dtensor_layout, boxes_match_local_box) {
  /* The shards add_dtensor declares are exactly the local boxes: a plan
   * from the dtensor layout into hand-declared shards of those boxes moves
   * everything locally (same rank, same box). */
  const int64_t shape[2] = {5, 3}, mesh[2] = {2, 2};
  const int pl[2] = {0, 1}, ranks[4] = {0, 1, 2, 3};
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(4, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(src, "t", RS_DTYPE_F32, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "t", RS_DTYPE_F32, 2, shape), RS_OK);
  cr_assert_eq(rs_layout_add_dtensor(src, "t", 2, mesh, ranks, pl, 0, 0),
               RS_OK);
  int64_t coord[2] = {0, 0};
  do {
    int64_t off[2], ext[2];
    cr_assert_eq(rs_dtensor_local_box(2, shape, 2, mesh, pl, coord, off, ext),
                 RS_OK);
    cr_assert_eq(rs_layout_add_shard(dst, "t", (int)(coord[0] * 2 + coord[1]),
                                     off, ext, 0, 0, NULL),
                 RS_OK);
  } while (th_next(2, mesh, coord));
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  int64_t sent = -1, local = -1;
  cr_assert_eq(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA,
                            &sent), RS_OK);
  cr_assert_eq(sent, 0);
  cr_assert_eq(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER,
                            &sent), RS_OK);
  cr_assert_eq(sent, 0);
  cr_assert_eq(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local),
               RS_OK);
  cr_assert_eq(local, 5 * 3 * 4);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

/* A refused coordinate leaves no half-computed box in the out arrays: they
 * are zero, as every out-parameter is on failure. */
Test(dtensor_box, failure_zeroes_the_out_arrays) {
  int64_t off[2] = {-7, -7}, ext[2] = {-7, -7};
  rs_status st = rs_dtensor_local_box(2, I64(5, 7), 2, I64(2, 3), INTS(0, 1),
                                      I64(0, 3), off, ext);
  cr_assert_eq(st, RS_ERR_INVALID_ARGUMENT, "%s", rs_status_name(st));
  for (int d = 0; d < 2; d++) {
    cr_assert_eq(off[d], 0, "offset[%d] = %lld", d, (long long)off[d]);
    cr_assert_eq(ext[d], 0, "extent[%d] = %lld", d, (long long)ext[d]);
  }
}

/* Every refusal, whichever check makes it (a NULL input, a bad mesh, a
 * shape, a placement or a coordinate found wrong after earlier axes were
 * worked out), leaves both out arrays zero. */
Test(dtensor_box, every_refusal_zeroes_the_out_arrays) {
  static const int64_t shape[2] = {5, 7}, mesh[2] = {2, 3};
  static const int64_t bad_shape[2] = {5, 0}, bad_mesh[2] = {2, 0};
  static const int place[2] = {0, 1}, bad_place[2] = {0, 5};
  static const int64_t coord[2] = {0, 1}, far_coord[2] = {0, 3};
  struct {
    const char *what;
    const int64_t *shape, *mesh;
    int mesh_ndim;
    const int *place;
    const int64_t *coord;
    rs_status want;
  } cases[] = {
      {"NULL shape", NULL, mesh, 2, place, coord, RS_ERR_NULL_POINTER},
      {"NULL mesh shape", shape, NULL, 2, place, coord, RS_ERR_NULL_POINTER},
      {"NULL placements", shape, mesh, 2, NULL, coord, RS_ERR_NULL_POINTER},
      {"NULL coordinate", shape, mesh, 2, place, NULL, RS_ERR_NULL_POINTER},
      {"mesh of 0 axes", shape, mesh, 0, place, coord,
       RS_ERR_INVALID_ARGUMENT},
      {"size 0 in dim 1", bad_shape, mesh, 2, place, coord, RS_ERR_BAD_SHAPE},
      {"mesh axis 1 of size 0", shape, bad_mesh, 2, place, coord,
       RS_ERR_INVALID_ARGUMENT},
      {"placement 5 on axis 1", shape, mesh, 2, bad_place, coord,
       RS_ERR_INVALID_ARGUMENT},
      {"coordinate 3 on axis 1", shape, mesh, 2, place, far_coord,
       RS_ERR_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t off[2] = {-7, -7}, ext[2] = {-7, -7};
    rs_status st = rs_dtensor_local_box(2, cases[i].shape, cases[i].mesh_ndim,
                                        cases[i].mesh, cases[i].place,
                                        cases[i].coord, off, ext);
    cr_assert_eq(st, cases[i].want, "%s: %s", cases[i].what,
                 rs_status_name(st));
    for (int d = 0; d < 2; d++) {
      cr_assert_eq(off[d], 0, "%s: offset[%d] = %lld", cases[i].what, d,
                   (long long)off[d]);
      cr_assert_eq(ext[d], 0, "%s: extent[%d] = %lld", cases[i].what, d,
                   (long long)ext[d]);
    }
  }
  /* One out array missing: the other is still zeroed. */
  int64_t off[2] = {-7, -7};
  cr_assert_eq(rs_dtensor_local_box(2, shape, 2, mesh, place, coord, off,
                                    NULL),
               RS_ERR_NULL_POINTER);
  cr_assert(off[0] == 0 && off[1] == 0, "offset {%lld, %lld}",
            (long long)off[0], (long long)off[1]);
}
