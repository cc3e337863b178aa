/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, buffers (rs_plan_bind, rs_plan_execute): binds of
 * unknown ranks, sides and buffers, memory too small or NULL; executions
 * with buffers unbound, a destination overlapping the source or another
 * destination. Each case names its malformed input and asserts the exact
 * rs_status, a message naming the rank, buffer or size, and that no
 * destination byte changed; after a refused execution the same plan, bound
 * right, delivers every byte. The controls beside them (want RS_OK) are
 * valid inputs at the border. All start from the standard plan of
 * th_bad_input.h (world 4: rank 0's buffer 0 holds the source; ranks 1 and
 * 2 hold halves of the destination in their buffer 3). */
#include "th_bad_input.h"

#include <stdint.h>
#include <string.h>

TestSuite(bind, .init = th_fx_plan, .fini = th_fx_teardown);
TestSuite(execute, .init = th_fx_plan, .fini = th_fx_teardown);
TestSuite(buffers, .init = th_fx_plan, .fini = th_fx_teardown);

/* ---------------------------------------------------------------- bind */

typedef enum memory { MEM_NULL, MEM_S0, MEM_D1, MEM_D2 } memory;

typedef struct bind_case {
  const char *name;
  bool null_plan;
  int side, rank, buffer;
  memory mem;
  size_t size;
  rs_status want;
  const char *f1, *f2;
} bind_case;

#define DST RS_SIDE_DST
#define SRC RS_SIDE_SRC
#define TOO_SMALL RS_ERR_BUFFER_TOO_SMALL
#define UNKNOWN_BUFFER RS_ERR_UNKNOWN_BUFFER

static const bind_case bind_cases[] = {
    {"rank_unknown", false, DST, 4, 3, MEM_D1, 4 * ROWB, RS_ERR_UNKNOWN_RANK,
     "4", NULL},
    {"rank_unknown", false, DST, -1, 3, MEM_D1, 4 * ROWB, RS_ERR_UNKNOWN_RANK,
     "-1", NULL},
    {"buffer_not_used_by_any_shard", false, DST, 1, 7, MEM_D1, 4 * ROWB,
     UNKNOWN_BUFFER, "7", NULL},
    /* buffer 3 is a destination buffer; the source side has none */
    {"buffer_used_by_the_other_side_only", false, SRC, 1, 3, MEM_D1, 4 * ROWB,
     UNKNOWN_BUFFER, "3", NULL},
    /* rank 3 holds no destination shard */
    {"buffer_used_by_another_rank_only", false, DST, 3, 3, MEM_D1, 4 * ROWB,
     UNKNOWN_BUFFER, NULL, NULL},
    {"buffer_too_small", false, DST, 1, 3, MEM_D1, 4 * ROWB - 1, TOO_SMALL,
     "95", NULL},
    {"buffer_too_small", false, SRC, 0, 0, MEM_S0, 0, TOO_SMALL, NULL, NULL},
    {"buffer_too_small", false, DST, 1, 3, MEM_D1, 4 * ROWB, RS_OK, NULL,
     NULL},
    {"side_unknown", false, 2, 1, 3, MEM_D1, 4 * ROWB,
     RS_ERR_INVALID_ARGUMENT, "2", NULL},
    {"side_unknown", false, -1, 1, 3, MEM_D1, 4 * ROWB,
     RS_ERR_INVALID_ARGUMENT, NULL, NULL},
    {"null_arguments", true, DST, 1, 3, MEM_D1, 4 * ROWB, RS_ERR_NULL_POINTER,
     NULL, NULL},
    {"null_arguments", false, DST, 1, 3, MEM_NULL, 4 * ROWB,
     RS_ERR_NULL_POINTER, NULL, NULL},
    {"bind_buffer_index_negative", false, DST, 1, -1, MEM_D1, 4 * ROWB,
     UNKNOWN_BUFFER, "buffer -1", NULL},
    {"bind_buffer_index_past_max", false, DST, 1, RS_MAX_BUFFERS, MEM_D1,
     4 * ROWB, UNKNOWN_BUFFER, "65536", NULL},
    {"bind_zero_bytes", false, DST, 2, 3, MEM_D2, 0, TOO_SMALL, "0 bytes",
     "96"},
    {"bind_source_one_byte_short", false, SRC, 0, 0, MEM_S0, 8 * ROWB - 1,
     TOO_SMALL, "191", "192"},
    /* the size is what the caller promises; it only has to be enough */
    {"huge_size_is_fine", false, DST, 1, 3, MEM_D1, SIZE_MAX, RS_OK, NULL,
     NULL},
};

TH_TABLE_TEST(bind, cases, bind_cases, i) {
  const bind_case *c = &bind_cases[*i];
  void *mem = c->mem == MEM_S0   ? FX->s0
              : c->mem == MEM_D1 ? FX->d1
              : c->mem == MEM_D2 ? FX->d2
                                 : NULL;
  rs_status st = rs_plan_bind(c->null_plan ? NULL : FX->plan,
                              (rs_side)c->side, c->rank, c->buffer, mem,
                              c->size);
  th_expect_case(c->name, st, c->want, RS_OK,
                 c->null_plan ? TH_MSG_THREAD : TH_MSG_CTX, FX->ctx, c->f1,
                 c->f2);
  th_expect_poisoned(FX->d1, 4 * ROWB, "rank 1");
  th_expect_poisoned(FX->d2, 4 * ROWB, "rank 2");
}

Test(bind, strided_shard_needs_its_full_span) {
  /* rows padded to 10 floats: [3,4] box spans (2*10 + 4) * 4 = 96 bytes,
   * not its dense 48; at byte offset 8 it needs 104 */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, "t", RS_DTYPE_F32, 2, I64(3, 4)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "t", RS_DTYPE_F32, 2, I64(3, 4)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "t", 0, I64(0, 0), I64(3, 4), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", 1, I64(0, 0), I64(3, 4), 0, 8,
                                   I64(10, 1)), RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  unsigned char buf[128];
  EXPECT_FAIL(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 103),
              RS_ERR_BUFFER_TOO_SMALL, ctx, "103", NULL);
  EXPECT_FAIL(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 56),
              RS_ERR_BUFFER_TOO_SMALL, ctx, NULL, NULL);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, buf, 104), RS_OK, "%s",
               rs_context_last_error(ctx));
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

/* ------------------------------------------------------------- execute */

/* Where a case binds each of the plan's three buffers (the source of rank
 * 0, the destinations of ranks 1 and 2): nowhere, its own fixture memory,
 * or an offset into one arena (so that bindings can overlap). */
#define UNBOUND (-1)
#define OWN (-2)

typedef struct exec_case {
  const char *name;
  bool null_plan;
  int64_t at[3]; /* source 0, destination 1, destination 2 */
  size_t arena;  /* bytes; filled when the source is in it, else poisoned */
  rs_status want;
  const char *f1, *f2;
} exec_case;

#define OVERLAP RS_ERR_OVERLAP

static const exec_case exec_cases[] = {
    /* rank 2's buffer 3 is not bound */
    {"destination_buffer_unbound", false, {OWN, OWN, UNBOUND}, 0,
     UNKNOWN_BUFFER, "2", "3"},
    {"source_buffer_unbound", false, {UNBOUND, OWN, OWN}, 0, UNKNOWN_BUFFER,
     "0", NULL},
    {"nothing_bound", false, {UNBOUND, UNBOUND, UNBOUND}, 0, UNKNOWN_BUFFER,
     NULL, NULL},
    {"null_plan", true, {UNBOUND, UNBOUND, UNBOUND}, 0, RS_ERR_NULL_POINTER,
     NULL, NULL},
    {"destination_is_the_source_buffer", false, {0, 0, 4 * ROWB}, 8 * ROWB,
     OVERLAP, "overlaps", "source buffer 0"},
    /* in one process every rank's memory is one memory: rank 2's
     * destination inside rank 0's source would be read while written */
    {"destination_of_another_rank_inside_the_source", false,
     {0, OWN, 2 * ROWB}, 8 * ROWB, OVERLAP, "overlaps", "rank 2"},
    /* source [0, 192), rank 2's destination [191, 287) */
    {"destination_overlaps_source_by_one_byte", false,
     {0, OWN, 8 * ROWB - 1}, 12 * ROWB, OVERLAP, "overlaps", "rank 2"},
    /* rank 1's [0,96) and rank 2's [48,144): written twice */
    {"two_destinations_share_memory", false, {OWN, 0, 2 * ROWB}, 8 * ROWB,
     OVERLAP, "overlaps", "destination"},
    {"two_destinations_are_the_same_memory", false, {OWN, 0, 0}, 4 * ROWB,
     OVERLAP, "overlaps", "destination"},
};

/* Bind as the case says, execute: refused with the status and message,
 * no byte of the arena or of the destinations changed; then, bound to
 * their own memory, the three buffers receive the source. */
TH_TABLE_TEST(execute, cases, exec_cases, i) {
  const exec_case *c = &exec_cases[*i];
  static const rs_side side[3] = {RS_SIDE_SRC, RS_SIDE_DST, RS_SIDE_DST};
  static const int rank[3] = {0, 1, 2}, buffer[3] = {0, 3, 3};
  static const size_t size[3] = {8 * ROWB, 4 * ROWB, 4 * ROWB};
  unsigned char *own[3] = {FX->s0, FX->d1, FX->d2};
  unsigned char *arena = malloc(c->arena + 1), *snap = malloc(c->arena + 1);
  cr_assert(arena && snap);
  memset(arena, TH_POISON, c->arena);
  if (c->at[0] >= 0) th_fill_source(arena, c->arena, 3);
  memcpy(snap, arena, c->arena);
  for (int k = 0; k < 3 && !c->null_plan; k++) {
    if (c->at[k] == UNBOUND) continue;
    unsigned char *mem = c->at[k] == OWN ? own[k] : arena + c->at[k];
    cr_assert_eq(rs_plan_bind(FX->plan, side[k], rank[k], buffer[k], mem,
                              size[k]), RS_OK, "%s", c->name);
  }
  rs_status st = rs_plan_execute(c->null_plan ? NULL : FX->plan);
  th_expect_case(c->name, st, c->want, RS_OK,
                 c->null_plan ? TH_MSG_THREAD : TH_MSG_CTX, FX->ctx, c->f1,
                 c->f2);
  cr_assert(memcmp(snap, arena, c->arena) == 0,
            "%s: a refused execution changed memory", c->name);
  th_expect_poisoned(FX->d1, 4 * ROWB, "rank 1");
  th_expect_poisoned(FX->d2, 4 * ROWB, "rank 2");
  free(arena);
  free(snap);
  if (c->null_plan) return;
  for (int k = 0; k < 3; k++)
    cr_assert_eq(rs_plan_bind(FX->plan, side[k], rank[k], buffer[k], own[k],
                              size[k]), RS_OK);
  cr_assert_eq(rs_plan_execute(FX->plan), RS_OK, "%s: %s", c->name,
               rs_context_last_error(FX->ctx));
  th_expect_delivered(FX->s0, FX->d1, FX->d2);
}

/* The caller meant to replace the binding: the earlier memory may be freed
 * by now, so a refused rebind leaves the buffer unbound and the next
 * execution refuses to run instead of writing it. */
Test(buffers, failed_rebind_unbinds) {
  cr_assert_eq(rs_plan_bind(FX->plan, SRC, 0, 0, FX->s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(FX->plan, DST, 1, 3, FX->d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(FX->plan, DST, 2, 3, FX->d2, 4 * ROWB), RS_OK);
  unsigned char small[8];
  memset(small, TH_POISON, sizeof small);
  EXPECT_FAIL(rs_plan_bind(FX->plan, DST, 2, 3, small, sizeof small),
              RS_ERR_BUFFER_TOO_SMALL, FX->ctx, "8 bytes", "now unbound");
  EXPECT_FAIL(rs_plan_execute(FX->plan), RS_ERR_UNKNOWN_BUFFER, FX->ctx,
              "destination buffer 3 of rank 2", "not bound");
  th_expect_poisoned(FX->d1, 4 * ROWB, "rank 1");
  th_expect_poisoned(FX->d2, 4 * ROWB, "the earlier binding of rank 2");
  th_expect_poisoned(small, sizeof small, "the refused buffer");
  cr_assert_eq(rs_plan_bind(FX->plan, DST, 2, 3, FX->d2, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_execute(FX->plan), RS_OK, "%s",
               rs_context_last_error(FX->ctx));
  th_expect_delivered(FX->s0, FX->d1, FX->d2);
}

Test(buffers, destination_never_bound_after_a_failed_bind) {
  cr_assert_eq(rs_plan_bind(FX->plan, SRC, 0, 0, FX->s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(FX->plan, DST, 1, 3, FX->d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(FX->plan, DST, 2, 3, FX->d2, 4 * ROWB - 4),
               RS_ERR_BUFFER_TOO_SMALL);
  EXPECT_FAIL(rs_plan_execute(FX->plan), RS_ERR_UNKNOWN_BUFFER, FX->ctx,
              "destination buffer 3 of rank 2", "not bound");
  th_expect_poisoned(FX->d1, 4 * ROWB, "rank 1");
  th_expect_poisoned(FX->d2, 4 * ROWB, "rank 2");
}

/* A two-rank plan of its own: rank 0 holds the whole f32 [8,6] source in
 * buffer 0 and rows [row0, row0 + 4) of the destination in its buffer 0;
 * rank 1 (when world is 2) rows [4,8) in its buffer 0. */
static void own_plan(int world, int64_t row0, rs_context **ctx,
                     rs_layout **s, rs_layout **d, rs_plan **plan) {
  cr_assert_eq(rs_context_create_local(world, ctx), RS_OK);
  cr_assert_eq(rs_layout_create(*ctx, s), RS_OK);
  cr_assert_eq(rs_layout_create(*ctx, d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*s, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(*d, "t", RS_DTYPE_F32, 2, I64(8, 6)),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(*s, "t", 0, I64(0, 0), I64(8, 6), 0, 0,
                                   NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(*d, "t", 0, I64(row0, 0), I64(4, 6), 0,
                                   0, NULL), RS_OK);
  if (world > 1)
    cr_assert_eq(rs_layout_add_shard(*d, "t", 1, I64(4, 0), I64(4, 6), 0, 0,
                                     NULL), RS_OK);
  cr_assert_eq(rs_plan_create(*s, *d, plan), RS_OK, "%s",
               rs_context_last_error(*ctx));
}

static void own_plan_destroy(rs_context *ctx, rs_layout *s, rs_layout *d,
                             rs_plan *plan) {
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

Test(execute, destination_overlaps_source_of_same_rank) {
  /* rank 0's destination is bound inside its source buffer */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  own_plan(2, 0, &ctx, &s, &d, &plan);
  unsigned char *big = malloc(512), *snap = malloc(512), *d1 = malloc(96);
  for (int i = 0; i < 512; i++) big[i] = (unsigned char)(i * 13 + 1);
  memcpy(snap, big, 512);
  memset(d1, TH_POISON, 96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, big, 192), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, big + 100, 96), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, d1, 96), RS_OK);
  EXPECT_FAIL(rs_plan_execute(plan), RS_ERR_OVERLAP, ctx, NULL, NULL);
  cr_assert(memcmp(big, snap, 512) == 0, "memory changed by a failed run");
  th_expect_poisoned(d1, 96, "rank 1");
  /* rebinding rank 0's destination elsewhere fixes it */
  unsigned char *d0 = malloc(96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, d0, 96), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  cr_assert(memcmp(d0, big, 96) == 0);
  cr_assert(memcmp(d1, big + 96, 96) == 0);
  free(big);
  free(snap);
  free(d0);
  free(d1);
  own_plan_destroy(ctx, s, d, plan);
}

Test(execute, destination_overlaps_source_touching_is_fine) {
  /* adjacent but not overlapping: [0,192) source, [192,288) destination */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  own_plan(1, 2, &ctx, &s, &d, &plan);
  unsigned char *big = malloc(288);
  for (int i = 0; i < 192; i++) big[i] = (unsigned char)(i * 7 + 3);
  memset(big + 192, TH_POISON, 96);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, big, 192), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 0, 0, big + 192, 96), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  cr_assert(memcmp(big + 192, big + 2 * ROWB, 96) == 0);
  free(big);
  own_plan_destroy(ctx, s, d, plan);
}

Test(buffers, two_sources_sharing_memory_is_fine) {
  /* reading the same bytes twice is allowed: rank 0 and rank 3 both hold
   * the whole tensor in the same memory */
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  const char *t = TH_BAD_T;
  cr_assert_eq(rs_layout_create(FX->ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(FX->ctx, &d), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(s, t, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, t, RS_DTYPE_F32, 2, I64(8, 6)), RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, t, 0, I64(0, 0), I64(8, 6), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, t, 3, I64(0, 0), I64(8, 6), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, t, 1, I64(0, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, t, 2, I64(4, 0), I64(4, 6), 3, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, SRC, 0, 0, FX->s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, SRC, 3, 0, FX->s0, 8 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, DST, 1, 3, FX->d1, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, DST, 2, 3, FX->d2, 4 * ROWB), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(FX->ctx));
  th_expect_delivered(FX->s0, FX->d1, FX->d2);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
}
