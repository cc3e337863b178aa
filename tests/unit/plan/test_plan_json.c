/* SPDX-License-Identifier: Apache-2.0 */
/* rs_plan_to_json parsed with json-c: only ranks that take part have an
 * entry in "ranks", "idle_ranks" counts the others, so a plan over a huge
 * world with a few active ranks is small JSON. */
#include <criterion/criterion.h>
#include <json-c/json.h>

#include <reshard/reshard.h>

#include "th_util.h"

/* A plan of one u8[64] tensor over `world` ranks: the source on each of
 * src_ranks (whole: replicas), the destination on dst_rank; only rank
 * part's part of it (RS_PARAM_PLAN_PART; -1: the whole plan); with its
 * moves' boxes or without (RS_PARAM_PLAN_BOXES). */
static rs_plan *one_tensor_plan_boxes(int world, const int *src_ranks,
                                      int nsrc, int dst_rank, int part,
                                      bool boxes, rs_context **ctx) {
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(world, ctx), RS_OK, "%s",
               rs_last_error());
  cr_assert_eq(rs_layout_create(*ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(*ctx, &dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_U8, 1, I64(64)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_U8, 1, I64(64)), RS_OK);
  for (int i = 0; i < nsrc; i++)
    cr_assert_eq(rs_layout_add_shard(src, "w", src_ranks[i], I64(0), I64(64),
                                     0, 0, NULL),
                 RS_OK);
  cr_assert_eq(rs_layout_add_shard(dst, "w", dst_rank, I64(0), I64(64), 0, 0,
                                   NULL),
               RS_OK);
  cr_assert_eq(rs_context_set_param(*ctx, RS_PARAM_PLAN_PART, part), RS_OK);
  cr_assert_eq(rs_context_set_param(*ctx, RS_PARAM_PLAN_BOXES, boxes), RS_OK);
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(*ctx));
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  return plan;
}

static rs_plan *one_tensor_plan_part(int world, const int *src_ranks,
                                     int nsrc, int dst_rank, int part,
                                     rs_context **ctx) {
  return one_tensor_plan_boxes(world, src_ranks, nsrc, dst_rank, part, true,
                               ctx);
}

static rs_plan *one_tensor_plan(int world, const int *src_ranks, int nsrc,
                                int dst_rank, rs_context **ctx) {
  return one_tensor_plan_part(world, src_ranks, nsrc, dst_rank, -1, ctx);
}

/* The plan's JSON, parsed strictly; *len gets its length. */
static json_object *parsed_json(const rs_plan *plan, size_t *len) {
  char *text = NULL;
  cr_assert_eq(rs_plan_to_json(plan, &text, len), RS_OK);
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *root = json_tokener_parse_ex(tok, text, (int)*len);
  cr_assert_not_null(root, "invalid JSON (%s): %.400s",
                     json_tokener_error_desc(json_tokener_get_error(tok)),
                     text);
  json_tokener_free(tok);
  rs_free(text);
  return root;
}

static json_object *member(json_object *o, const char *key) {
  json_object *v = NULL;
  cr_assert(json_object_object_get_ex(o, key, &v), "no \"%s\"", key);
  return v;
}

/* The ranks listed in "ranks", in order, into got (cap entries). */
static int listed_ranks(json_object *root, int *got, int cap) {
  json_object *ranks = member(root, "ranks");
  cr_assert(json_object_is_type(ranks, json_type_array));
  int n = (int)json_object_array_length(ranks);
  cr_assert_leq(n, cap);
  for (int i = 0; i < n; i++)
    got[i] = json_object_get_int(
        member(json_object_array_get_idx(ranks, (size_t)i), "rank"));
  return n;
}

Test(plan_json, huge_world_with_few_active_ranks_is_small) {
  const int world = 1 << 20, last = world - 1;
  rs_context *ctx = NULL;
  rs_plan *plan = one_tensor_plan(world, INTS(3), 1, last, &ctx);
  size_t len = 0;
  json_object *root = parsed_json(plan, &len);
  cr_assert_lt(len, 4096, "%zu bytes of JSON for 2 active ranks of %d", len,
               world);
  cr_assert_eq(json_object_get_int(member(root, "world_size")), world);
  cr_assert_eq(json_object_get_int(member(root, "idle_ranks")), world - 2);
  int got[4];
  int n = listed_ranks(root, got, 4);
  cr_assert_eq(n, 2);
  cr_assert(got[0] == 3 && got[1] == last, "ranks %d, %d", got[0], got[1]);
  json_object *r3 = json_object_array_get_idx(member(root, "ranks"), 0);
  cr_assert_eq(json_object_get_int64(member(r3, "bytes_sent_inter")), 64);
  cr_assert_eq(json_object_get_int(member(r3, "domain")), 3);
  cr_assert_eq(json_object_array_length(member(root, "moves")), 1);
  json_object_put(root);
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
}

Test(plan_json, every_rank_listed_when_all_take_part) {
  rs_context *ctx = NULL;
  rs_plan *plan = one_tensor_plan(2, INTS(0), 1, 1, &ctx);
  size_t len = 0;
  json_object *root = parsed_json(plan, &len);
  cr_assert_eq(json_object_get_int(member(root, "idle_ranks")), 0);
  int got[2];
  cr_assert_eq(listed_ranks(root, got, 2), 2);
  cr_assert(got[0] == 0 && got[1] == 1);
  json_object_put(root);
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
}

/* A replica the plan does not read is idle: counted, not listed. */
Test(plan_json, unread_replica_is_counted_idle) {
  rs_context *ctx = NULL;
  rs_plan *plan = one_tensor_plan(4, INTS(0, 1), 2, 2, &ctx);
  int from = -1;
  cr_assert_eq(rs_plan_move_info(plan, 0, NULL, &from, NULL, NULL, NULL, NULL),
               RS_OK);
  size_t len = 0;
  json_object *root = parsed_json(plan, &len);
  cr_assert_eq(json_object_get_int(member(root, "idle_ranks")), 2);
  int got[4];
  cr_assert_eq(listed_ranks(root, got, 4), 2);
  cr_assert(got[0] == from && got[1] == 2, "ranks %d, %d (reads rank %d)",
            got[0], got[1], from);
  json_object_put(root);
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
}

/* A part (RS_PARAM_PLAN_PART) lists only its rank's moves, every active
 * rank's figures, and says whose part it is; only its rank's buffers can
 * be bound, and in process it is refused execution before any byte of a
 * destination is touched. */
Test(plan_json, a_part_lists_its_moves_and_every_ranks_figures) {
  for (int part = -1; part < 4; part++) {
    rs_context *ctx = NULL;
    rs_plan *plan = one_tensor_plan_part(4, INTS(0, 1), 2, 2, part, &ctx);
    int64_t whole_from = -1;
    rs_plan_stat(plan, 0, RS_STAT_MOVES, &whole_from);
    int from = whole_from ? 0 : 1; /* the replica the plan reads */
    size_t len = 0;
    json_object *root = parsed_json(plan, &len);
    cr_assert_eq(json_object_get_int(member(root, "part")), part);
    int got[4];
    cr_assert_eq(listed_ranks(root, got, 4), 2, "part %d", part);
    cr_assert(got[0] == from && got[1] == 2, "part %d: ranks %d, %d", part,
              got[0], got[1]);
    size_t want = part < 0 || part == from || part == 2 ? 1 : 0;
    cr_assert_eq(json_object_array_length(member(root, "moves")), want,
                 "part %d", part);
    int64_t n = -1;
    cr_assert_eq(rs_plan_num_moves(plan, &n), RS_OK);
    cr_assert_eq(n, (int64_t)want, "part %d", part);
    json_object_put(root);
    if (part >= 0) {
      unsigned char in[64], out[64];
      memset(in, 7, sizeof in);
      memset(out, 0xA5, sizeof out);
      /* only the part's rank has buffers to bind */
      for (int r = 0; r < 2; r++)
        cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, r, 0, in, sizeof in),
                     r == part ? RS_OK : RS_ERR_UNKNOWN_RANK, "part %d", part);
      cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 0, out, sizeof out),
                   part == 2 ? RS_OK : RS_ERR_UNKNOWN_RANK, "part %d", part);
      cr_assert_eq(rs_plan_execute(plan), RS_ERR_UNSUPPORTED, "part %d",
                   part);
      cr_assert(strstr(rs_context_last_error(ctx), "part"), "%s",
                rs_context_last_error(ctx));
      for (int i = 0; i < 64; i++)
        cr_assert_eq(out[i], 0xA5, "part %d: byte %d written", part, i);
    }
    rs_plan_destroy(plan);
    rs_context_destroy(ctx);
  }
}

/* A plan made without boxes (RS_PARAM_PLAN_BOXES = 0) says so in its JSON,
 * whose moves have no box; it refuses to give a box and to run, before any
 * byte of a destination is touched. Whole or a part, it is otherwise the
 * plan made with boxes (th_same_plan_without_boxes, th_same_moves_of). */
Test(plan_json, a_plan_without_boxes_is_for_inspection) {
  for (int part = -1; part < 3; part += 3) {
    rs_context *ctx = NULL, *ctx2 = NULL;
    rs_plan *plan = one_tensor_plan_boxes(4, INTS(0, 1), 2, 2, part, false,
                                          &ctx);
    rs_plan *boxed = one_tensor_plan_boxes(4, INTS(0, 1), 2, 2, -1, true,
                                           &ctx2);
    int64_t v = -1;
    cr_assert_eq(rs_context_get_param(ctx, RS_PARAM_PLAN_BOXES, &v), RS_OK);
    cr_assert_eq(v, 0);
    size_t len = 0;
    json_object *root = parsed_json(plan, &len);
    cr_assert(!json_object_get_boolean(member(root, "boxes")));
    json_object *moves = member(root, "moves");
    cr_assert_eq(json_object_array_length(moves), 1, "part %d", part);
    json_object *m = json_object_array_get_idx(moves, 0);
    cr_assert(!json_object_object_get_ex(m, "offset", NULL));
    cr_assert(!json_object_object_get_ex(m, "extent", NULL));
    cr_assert_eq(json_object_get_int64(member(m, "bytes")), 64);
    json_object_put(root);
    root = parsed_json(boxed, &len);
    cr_assert(json_object_get_boolean(member(root, "boxes")));
    json_object_put(root);
    char why[256];
    cr_assert(th_same_moves_of(boxed, plan, part, why, sizeof why), "%s", why);
    if (part < 0)
      cr_assert(th_same_plan_without_boxes(boxed, plan, 4, why, sizeof why),
                "%s", why);
    int64_t off[1] = {-1}, ext[1] = {-1};
    cr_assert_eq(rs_plan_move_box(plan, 0, off, ext), RS_ERR_UNSUPPORTED);
    cr_assert(strstr(rs_context_last_error(ctx), "RS_PARAM_PLAN_BOXES"), "%s",
              rs_context_last_error(ctx));
    cr_assert_eq(rs_plan_move_box(plan, 1, off, ext), RS_ERR_INVALID_ARGUMENT,
                 "the index is checked first");
    unsigned char in[64], out[64];
    memset(in, 7, sizeof in);
    memset(out, 0xA5, sizeof out);
    for (int r = 0; r < 2; r++)
      if (part < 0 || r == part)
        cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, r, 0, in, sizeof in),
                     RS_OK);
    if (part < 0 || part == 2)
      cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 0, out, sizeof out),
                   RS_OK);
    cr_assert_eq(rs_plan_execute(plan), RS_ERR_UNSUPPORTED, "part %d", part);
    cr_assert(strstr(rs_context_last_error(ctx), "RS_PARAM_PLAN_BOXES") ||
                  strstr(rs_context_last_error(ctx), "part"),
              "%s", rs_context_last_error(ctx));
    for (int i = 0; i < 64; i++)
      cr_assert_eq(out[i], 0xA5, "part %d: byte %d written", part, i);
    rs_plan_destroy(plan);
    rs_plan_destroy(boxed);
    rs_context_destroy(ctx);
    rs_context_destroy(ctx2);
  }
}

/* A plan of one u8[1 MiB] tensor, rows [0, 512) on rank 0 and the rest on
 * rank 1, into columns [0, 512) on rank 1 and the rest on rank 0 (two
 * strided moves) and a second tensor whole from rank 0 to rank 1 (one
 * contiguous move, which needs no staging): made with or without boxes. */
static rs_plan *big_moves_plan(bool boxes, rs_context **ctx) {
  rs_layout *l[2] = {NULL, NULL};
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, ctx), RS_OK);
  cr_assert_eq(rs_context_set_param(*ctx, RS_PARAM_PLAN_BOXES, boxes), RS_OK);
  for (int s = 0; s < 2; s++) {
    cr_assert_eq(rs_layout_create(*ctx, &l[s]), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(l[s], "w", RS_DTYPE_U8, 2,
                                      I64(1024, 1024)), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(l[s], "b", RS_DTYPE_U8, 1,
                                      I64(1 << 20)), RS_OK);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(rs_layout_add_shard(l[0], "w", r, I64(512 * r, 0),
                                     I64(512, 1024), 0, 0, NULL), RS_OK);
    cr_assert_eq(rs_layout_add_shard(l[1], "w", 1 - r, I64(0, 512 * r),
                                     I64(1024, 512), 0, 0, NULL), RS_OK);
  }
  cr_assert_eq(rs_layout_add_shard(l[0], "b", 0, I64(0), I64(1 << 20), 1, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(l[1], "b", 1, I64(0), I64(1 << 20), 1, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_plan_create(l[0], l[1], &plan), RS_OK, "%s",
               rs_context_last_error(*ctx));
  rs_layout_destroy(l[0]);
  rs_layout_destroy(l[1]);
  return plan;
}

/* Without boxes the plan's figures are still those of the plan that runs,
 * the staging too, which depends on which of its large moves are one
 * contiguous run at an end (those move straight, unstaged). */
Test(plan_json, a_plan_without_boxes_has_the_same_staging) {
  rs_context *c1 = NULL, *c2 = NULL;
  rs_plan *boxed = big_moves_plan(true, &c1);
  rs_plan *bare = big_moves_plan(false, &c2);
  char why[256];
  cr_assert(th_same_plan_without_boxes(boxed, bare, 2, why, sizeof why), "%s",
            why);
  int64_t staging = -1;
  cr_assert_eq(rs_plan_stat(bare, 0, RS_STAT_STAGING_BYTES, &staging), RS_OK);
  cr_assert(staging > 0 && staging < (int64_t)3 << 20,
            "rank 0 stages %lld bytes: the strided moves, not the contiguous",
            (long long)staging);
  rs_plan_destroy(boxed);
  rs_plan_destroy(bare);
  rs_context_destroy(c1);
  rs_context_destroy(c2);
}
