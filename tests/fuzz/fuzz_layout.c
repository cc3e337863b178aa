/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: layout construction from fuzzed arguments.
 *
 * Input: a world size byte, then a stream of operations, each a selector
 * byte and its arguments (fz_i64: mostly small numbers, often boundary
 * values, sometimes raw bits): rs_layout_add_tensor, rs_layout_add_shard
 * (dense or strided), rs_layout_add_dtensor, rs_dtensor_local_box,
 * rs_context_set_param / set_domain / set_domain_size, and a serialize /
 * deserialize round trip. Checked after every call:
 *   - RS_OK or a status the header documents for that call, with a
 *     message;
 *   - a refused call leaves the layout byte-for-byte as it was, and a
 *     refused setting keeps its value;
 *   - an accepted setting is inside rs_param_bounds, a refused one outside
 *     (or an unknown parameter);
 *   - a DTensor local box lies inside the tensor;
 *   - the layout round-trips through its wire bytes. */
#include "fuzz_common.h"

#define MAXT 6

static const char *const names[MAXT] = {
    "w", "model.layers.0.self_attn.qkv_proj.weight", "experts.w13", "b",
    "x", ""};

static void op_add_tensor(fz_in *in, rs_context *ctx, rs_layout *l) {
  const char *name = names[fz_below(in, MAXT)];
  rs_dtype dt = (rs_dtype)fz_int(in);
  int ndim = fz_int(in);
  int64_t shape[RS_MAX_DIMS];
  for (int d = 0; d < RS_MAX_DIMS; d++) shape[d] = fz_i64(in);
  fz_snap before;
  fz_snap_take(l, &before);
  rs_status st = rs_layout_add_tensor(l, name, dt, ndim, shape);
  fz_expect("rs_layout_add_tensor", st, ctx, FZ_SET(FZ_ADD_TENSOR_ERRS));
  if (st != RS_OK) fz_snap_same(l, &before, "rs_layout_add_tensor");
  fz_snap_free(&before);
}

static void op_add_shard(fz_in *in, rs_context *ctx, rs_layout *l) {
  const char *name = names[fz_below(in, MAXT)];
  int rank = fz_int(in);
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS], strides[RS_MAX_DIMS];
  for (int d = 0; d < RS_MAX_DIMS; d++) {
    off[d] = fz_i64(in);
    ext[d] = fz_i64(in);
  }
  bool strided = fz_u8(in) & 1;
  if (strided)
    for (int d = 0; d < RS_MAX_DIMS; d++) strides[d] = fz_i64(in);
  int buffer = fz_int(in);
  int64_t byte_offset = fz_i64(in);
  fz_snap before;
  fz_snap_take(l, &before);
  rs_status st = rs_layout_add_shard(l, name, rank, off, ext, buffer,
                                     byte_offset, strided ? strides : NULL);
  fz_expect("rs_layout_add_shard", st, ctx, FZ_SET(FZ_ADD_SHARD_ERRS));
  if (st != RS_OK) fz_snap_same(l, &before, "rs_layout_add_shard");
  fz_snap_free(&before);
}

static void op_add_dtensor(fz_in *in, rs_context *ctx, rs_layout *l,
                           int world) {
  const char *name = names[fz_below(in, MAXT)];
  int mesh_ndim = fz_int(in);
  int64_t mesh_shape[RS_MAX_DIMS];
  int placements[RS_MAX_DIMS];
  int ranks[64];
  for (int a = 0; a < RS_MAX_DIMS; a++) {
    mesh_shape[a] = fz_i64(in);
    placements[a] = fz_int(in);
  }
  /* ranks: a permutation of the world most of the time, fuzzed values
   * (duplicates, outside the world) otherwise */
  bool raw = fz_u8(in) & 1;
  for (int i = 0; i < 64; i++) ranks[i] = raw ? fz_int(in) : i % world;
  if (!raw)
    for (int i = world - 1; i > 0; i--) {
      int j = fz_below(in, i + 1), t = ranks[i];
      ranks[i] = ranks[j];
      ranks[j] = t;
    }
  int buffer = fz_int(in);
  int64_t byte_offset = fz_i64(in);
  fz_snap before;
  fz_snap_take(l, &before);
  rs_status st = rs_layout_add_dtensor(l, name, mesh_ndim, mesh_shape, ranks,
                                       placements, buffer, byte_offset);
  fz_expect("rs_layout_add_dtensor", st, ctx, FZ_SET(FZ_ADD_SHARD_ERRS));
  if (st != RS_OK) fz_snap_same(l, &before, "rs_layout_add_dtensor");
  fz_snap_free(&before);
}

static void op_local_box(fz_in *in) {
  int ndim = fz_int(in), mesh_ndim = fz_int(in);
  int64_t shape[RS_MAX_DIMS], mesh_shape[RS_MAX_DIMS], coord[RS_MAX_DIMS];
  int placements[RS_MAX_DIMS];
  for (int d = 0; d < RS_MAX_DIMS; d++) shape[d] = fz_i64(in);
  for (int a = 0; a < RS_MAX_DIMS; a++) {
    mesh_shape[a] = fz_i64(in);
    placements[a] = fz_int(in);
    coord[a] = fz_i64(in);
  }
  int64_t off[RS_MAX_DIMS], ext[RS_MAX_DIMS];
  rs_status st = rs_dtensor_local_box(ndim, shape, mesh_ndim, mesh_shape,
                                      placements, coord, off, ext);
  fz_expect("rs_dtensor_local_box", st, NULL,
            FZ_SET(RS_ERR_NULL_POINTER, RS_ERR_BAD_SHAPE,
                   RS_ERR_TOO_MANY_DIMS, RS_ERR_INVALID_ARGUMENT));
  if (st != RS_OK) return;
  for (int d = 0; d < ndim; d++)
    FZ_CHECK(off[d] >= 0 && ext[d] >= 0 && off[d] <= shape[d] &&
                 ext[d] <= shape[d] - off[d],
             "local box [%lld, +%lld) in dim %d outside size %lld",
             (long long)off[d], (long long)ext[d], d, (long long)shape[d]);
}

static void op_param(fz_in *in, rs_context *ctx) {
  static const int params[] = {RS_PARAM_STAGING_BYTES, RS_PARAM_SLICE_BYTES,
                               RS_PARAM_TIMEOUT_MS, RS_PARAM_INTEGRITY,
                               RS_PARAM_PLAN_PART, 0, 103, 202, 301, -1,
                               RS_PARAM_COPY_THREADS};
  rs_param p = (rs_param)params[fz_below(in, 11)];
  int64_t v = fz_i64(in), lo = 0, hi = 0, before = 0, after = 0;
  bool known = rs_param_bounds(p, &lo, &hi) == RS_OK;
  rs_context_get_param(ctx, p, &before);
  rs_status st = rs_context_set_param(ctx, p, v);
  rs_context_get_param(ctx, p, &after);
  bool ok = known && v >= lo && v <= hi;
  FZ_CHECK(ok ? st == RS_OK : st == RS_ERR_BAD_PARAM,
           "set_param(%d, %lld) gave %s (bounds [%lld, %lld], known %d)",
           (int)p, (long long)v, rs_status_name(st), (long long)lo,
           (long long)hi, (int)known);
  FZ_CHECK(ok ? after == v : after == before,
           "set_param(%d, %lld): value now %lld", (int)p, (long long)v,
           (long long)after);
}

static void op_domain(fz_in *in, rs_context *ctx, int world) {
  int rank = fz_int(in), domain = fz_int(in);
  if (fz_u8(in) & 1) {
    rs_status st = rs_context_set_domain_size(ctx, domain);
    FZ_CHECK(domain >= 1 ? st == RS_OK : st == RS_ERR_INVALID_ARGUMENT,
             "set_domain_size(%d): %s", domain, rs_status_name(st));
    return;
  }
  rs_status st = rs_context_set_domain(ctx, rank, domain);
  rs_status want = rank < 0 || rank >= world ? RS_ERR_UNKNOWN_RANK
                   : domain < 0             ? RS_ERR_INVALID_ARGUMENT
                                            : RS_OK;
  FZ_CHECK(st == want, "set_domain(%d, %d): %s, want %s", rank, domain,
           rs_status_name(st), rs_status_name(want));
  if (st == RS_OK) {
    int got = -1;
    FZ_CHECK(rs_context_get_domain(ctx, rank, &got) == RS_OK && got == domain,
             "get_domain after set_domain");
  }
}

static void op_round_trip(rs_context *ctx, rs_layout *l) {
  void *bytes = NULL;
  size_t len = 0;
  FZ_CHECK(rs_layout_serialize(l, &bytes, &len) == RS_OK, "serialize");
  rs_layout *copy = NULL;
  FZ_CHECK(rs_layout_create(ctx, &copy) == RS_OK, "layout_create");
  rs_status st = rs_layout_deserialize(copy, bytes, len);
  FZ_CHECK(st == RS_OK, "a layout's own bytes were refused: %s (%s)",
           rs_status_name(st), rs_context_last_error(ctx));
  void *again = NULL;
  size_t len2 = 0;
  FZ_CHECK(rs_layout_serialize(copy, &again, &len2) == RS_OK, "serialize");
  FZ_CHECK(len2 == len && memcmp(bytes, again, len) == 0,
           "serialize(deserialize(bytes)) != bytes");
  rs_free(bytes);
  rs_free(again);
  rs_layout_destroy(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size, 0};
  int world = 1 + fz_below(&in, 16);
  rs_context *ctx = NULL;
  FZ_CHECK(rs_context_create_local(world, &ctx) == RS_OK, "context");
  rs_layout *l = NULL;
  FZ_CHECK(rs_layout_create(ctx, &l) == RS_OK, "layout_create");
  for (int ops = 0; fz_more(&in) && ops < 64; ops++) {
    switch (fz_u8(&in) % 8) {
      case 0: op_add_tensor(&in, ctx, l); break;
      case 1:
      case 2: op_add_shard(&in, ctx, l); break;
      case 3: op_add_dtensor(&in, ctx, l, world); break;
      case 4: op_local_box(&in); break;
      case 5: op_param(&in, ctx); break;
      case 6: op_domain(&in, ctx, world); break;
      case 7: op_round_trip(ctx, l); break;
    }
  }
  op_round_trip(ctx, l);
  if (getenv("FUZZ_VERBOSE")) {
    int nt = 0;
    int64_t ns = 0;
    rs_layout_num_tensors(l, &nt);
    rs_layout_num_shards(l, &ns);
    printf("world %d: %d tensors, %lld shards; last message: %s\n", world, nt,
           (long long)ns, rs_context_last_error(ctx));
  }
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  return 0;
}
