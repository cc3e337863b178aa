/* SPDX-License-Identifier: Apache-2.0 */
/* Hand-made end-to-end cases through the in-process transport: build two
 * layouts, plan, bind, execute, and check every destination element and
 * every untouched destination byte. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include "th_harness.h"
#include "th_util.h"

static const int64_t NO_STAGING_LIMIT = 256LL << 20;

Test(exec, tp2_to_tp4_rows) {
  rh h;
  rh_init(&h, 4, "tp2_to_tp4_rows");
  rh_tensor_add(&h, "w", RS_DTYPE_BF16, 2, I64(16, 12));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(0), 0,
             0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_check_sources_intact(&h);
  rh_fini(&h);
}

Test(exec, tp2_cols_to_tp4_rows_2d) {
  /* column-parallel source, row-parallel destination, uneven 10 cols */
  rh h;
  rh_init(&h, 4, "tp2_cols_to_tp4_rows_2d");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(9, 10));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(2, 3), INTS(1), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(0), 0,
             0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, replicated_source_to_sharded_destination) {
  /* three replicas, one per domain {0,1},{2,3},{4,5}; each destination
   * finds its rows inside its own domain, so nothing crosses domains */
  rh h;
  rh_init(&h, 6, "replicated_source_to_sharded_destination");
  cr_assert_eq(rs_context_set_domain_size(h.ctx, 2), RS_OK);
  rh_tensor_add(&h, "emb", RS_DTYPE_F32, 2, I64(10, 9));
  rh_dtensor(&h, RS_SIDE_SRC, "emb", 1, I64(3), INTS(0, 2, 4),
             INTS(RS_REPLICATE), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "emb", 1, I64(3), INTS(1, 3, 5), INTS(1), 0, 0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER), 0,
               "a replica sits in every destination domain, yet bytes "
               "crossed domains");
  int64_t n = 0;
  rh_move *m = rh_moves(&h, &n);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(rh_domain(&h, m[i].src), rh_domain(&h, m[i].dst),
                 "move %lld %d->%d leaves its domain", (long long)i, m[i].src,
                 m[i].dst);
  free(m);
  rh_fini(&h);
}

Test(exec, replicated_source_spreads_load) {
  /* all in one domain: 2 replicas, 4 destinations; must be exact */
  rh h;
  rh_init(&h, 6, "replicated_source_spreads_load");
  cr_assert_eq(rs_context_set_domain_size(h.ctx, 6), RS_OK);
  rh_tensor_add(&h, "w", RS_DTYPE_U8, 1, I64(1001));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(RS_REPLICATE),
             0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(4), INTS(2, 3, 4, 5), INTS(0), 0,
             0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, fused_qkv_destination) {
  /* vLLM qkv_proj: q [16,8], k [4,8], v [4,8] (GQA) in one buffer per TP
   * rank: q shard at byte 0, k shard after it, v shard after a 12-byte gap
   * that must stay poisoned. Source: TP1 on rank 0, one buffer each. */
  rh h;
  rh_init(&h, 3, "fused_qkv_destination");
  rh_tensor_add(&h, "q_proj", RS_DTYPE_BF16, 2, I64(16, 8));
  rh_tensor_add(&h, "k_proj", RS_DTYPE_BF16, 2, I64(4, 8));
  rh_tensor_add(&h, "v_proj", RS_DTYPE_BF16, 2, I64(4, 8));
  rh_shard(&h, RS_SIDE_SRC, "q_proj", 0, I64(0, 0), I64(16, 8), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_SRC, "k_proj", 0, I64(0, 0), I64(4, 8), 1, 0, NULL);
  rh_shard(&h, RS_SIDE_SRC, "v_proj", 0, I64(0, 0), I64(4, 8), 2, 0, NULL);
  const int64_t qb = 8 * 8 * 2, kb = 2 * 8 * 2;
  for (int r = 1; r <= 2; r++) {
    int64_t i = r - 1;
    rh_shard(&h, RS_SIDE_DST, "q_proj", r, I64(8 * i, 0), I64(8, 8), 0, 0,
             NULL);
    rh_shard(&h, RS_SIDE_DST, "k_proj", r, I64(2 * i, 0), I64(2, 8), 0, qb,
             NULL);
    rh_shard(&h, RS_SIDE_DST, "v_proj", r, I64(2 * i, 0), I64(2, 8), 0,
             qb + kb + 12, NULL);
  }
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, fused_source_and_destination) {
  /* gate_up fused on both sides with different TP degrees */
  rh h;
  rh_init(&h, 4, "fused_source_and_destination");
  rh_tensor_add(&h, "gate", RS_DTYPE_F32, 2, I64(12, 5));
  rh_tensor_add(&h, "up", RS_DTYPE_F32, 2, I64(12, 5));
  const int64_t half = 6 * 5 * 4, quarter = 3 * 5 * 4;
  rh_dtensor(&h, RS_SIDE_SRC, "gate", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_SRC, "up", 1, I64(2), INTS(0, 1), INTS(0), 0, half);
  rh_dtensor(&h, RS_SIDE_DST, "gate", 1, I64(4), INTS(0, 1, 2, 3), INTS(0), 2,
             0);
  rh_dtensor(&h, RS_SIDE_DST, "up", 1, I64(4), INTS(0, 1, 2, 3), INTS(0), 2,
             quarter);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, strided_source_column_slice) {
  /* the tensor [6,3] f64 is columns 2..4 of a [6,8] matrix on rank 0 */
  rh h;
  rh_init(&h, 2, "strided_source_column_slice");
  rh_tensor_add(&h, "slice", RS_DTYPE_F64, 2, I64(6, 3));
  rh_shard(&h, RS_SIDE_SRC, "slice", 0, I64(0, 0), I64(6, 3), 0, 2 * 8,
           I64(8, 1));
  rh_shard(&h, RS_SIDE_DST, "slice", 1, I64(0, 0), I64(6, 3), 0, 0, NULL);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_check_sources_intact(&h);
  rh_fini(&h);
}

Test(exec, strided_destinations_keep_padding) {
  /* destination rows padded (stride 7 for 3 columns) on rank 1, and a
   * column-major destination on rank 0; padding stays poisoned */
  rh h;
  rh_init(&h, 2, "strided_destinations_keep_padding");
  rh_tensor_add(&h, "t", RS_DTYPE_I32, 2, I64(6, 3));
  rh_shard(&h, RS_SIDE_SRC, "t", 0, I64(0, 0), I64(6, 3), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "t", 1, I64(0, 0), I64(6, 3), 0, 4, I64(7, 1));
  rh_shard(&h, RS_SIDE_DST, "t", 0, I64(1, 0), I64(4, 3), 0, 0, I64(1, 4));
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, interleaved_destinations_share_no_bytes) {
  /* two shards of one rank interleave element by element in one buffer:
   * even rows' elements at even slots, odd rows' at odd slots. They share
   * no byte, so this is a valid layout. */
  rh h;
  rh_init(&h, 2, "interleaved_destinations_share_no_bytes");
  rh_tensor_add(&h, "t", RS_DTYPE_U16, 2, I64(2, 8));
  rh_shard(&h, RS_SIDE_SRC, "t", 0, I64(0, 0), I64(2, 8), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "t", 1, I64(0, 0), I64(1, 8), 0, 0, I64(16, 2));
  rh_shard(&h, RS_SIDE_DST, "t", 1, I64(1, 0), I64(1, 8), 0, 2, I64(16, 2));
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, several_boxes_per_rank) {
  /* [6,6] cut into nine 2x2 boxes dealt to 2 source ranks over 2 buffers;
   * destination: 3 ranks, each a column band in two boxes and buffers */
  rh h;
  rh_init(&h, 3, "several_boxes_per_rank");
  rh_tensor_add(&h, "grid", RS_DTYPE_I32, 2, I64(6, 6));
  for (int k = 0; k < 9; k++) {
    int rank = k % 2, buffer = (k / 2) % 2;
    int64_t at = rh_used(&h, RS_SIDE_SRC, rank, buffer) + 4 * (k % 3);
    rh_shard(&h, RS_SIDE_SRC, "grid", rank, I64(2 * (k / 3), 2 * (k % 3)),
             I64(2, 2), buffer, at, NULL);
  }
  for (int r = 0; r < 3; r++) {
    rh_shard(&h, RS_SIDE_DST, "grid", r, I64(0, 2 * r), I64(3, 2), 0, 0,
             NULL);
    rh_shard(&h, RS_SIDE_DST, "grid", r, I64(3, 2 * r), I64(3, 2), 1, 16,
             NULL);
  }
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, uneven_shards) {
  /* [7,5] u16: source rows 3,3,1 over 3 ranks; destination cols 2,2,1,0
   * over 4 ranks (rank 3's shard is empty and skipped) */
  rh h;
  rh_init(&h, 4, "uneven_shards");
  rh_tensor_add(&h, "u", RS_DTYPE_U16, 2, I64(7, 5));
  rh_dtensor(&h, RS_SIDE_SRC, "u", 1, I64(3), INTS(0, 1, 2), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "u", 1, I64(4), INTS(3, 2, 1, 0), INTS(1), 0,
             0);
  cr_assert_eq(h.nsh[RS_SIDE_DST], 3);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  /* mesh rank 0 (coord 3) holds nothing: its buffer is unknown */
  unsigned char x[64];
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_DST, 0, 0, x, sizeof x),
               RS_ERR_UNKNOWN_BUFFER);
  rh_fini(&h);
}

Test(exec, six_dim_tensor) {
  rh h;
  rh_init(&h, 6, "six_dim_tensor");
  rh_tensor_add(&h, "hex", RS_DTYPE_F32, 6, I64(2, 3, 2, 3, 2, 5));
  rh_dtensor(&h, RS_SIDE_SRC, "hex", 1, I64(3), INTS(0, 1, 2), INTS(5), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "hex", 2, I64(2, 3), INTS(0, 1, 2, 3, 4, 5),
             INTS(0, 3), 1, 12);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, world_of_one_local_copies) {
  rh h;
  rh_init(&h, 1, "world_of_one_local_copies");
  rh_tensor_add(&h, "a", RS_DTYPE_F64, 3, I64(3, 4, 5));
  rh_shard(&h, RS_SIDE_SRC, "a", 0, I64(0, 0, 0), I64(3, 4, 5), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "a", 0, I64(0, 0, 0), I64(3, 4, 5), 0, 8,
           I64(1, 3, 12));
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  cr_assert_eq(rh_stat(&h, 0, RS_STAT_BYTES_LOCAL), 3 * 4 * 5 * 8);
  cr_assert_eq(rh_stat(&h, 0, RS_STAT_BYTES_SENT_INTRA), 0);
  rh_fini(&h);
}

Test(exec, cross_domain_once_then_forward) {
  /* rank 0 (domain 0) holds the tensor; ranks 1 and 2 (domain 1) and rank
   * 3 (domain 2) each want all of it. Domain 1 must get it across once and
   * forward it inside. */
  rh h;
  rh_init(&h, 4, "cross_domain_once_then_forward");
  cr_assert_eq(rs_context_set_domain(h.ctx, 0, 0), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 1, 1), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 2, 1), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 3, 2), RS_OK);
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(32, 16));
  rh_shard(&h, RS_SIDE_SRC, "w", 0, I64(0, 0), I64(32, 16), 0, 0, NULL);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(3), INTS(1, 2, 3),
             INTS(RS_REPLICATE), 0, 0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  int64_t n = 0;
  rh_move *m = rh_moves(&h, &n);
  int inter_d1 = 0, fw_d1 = 0, landing = -1, inter_d2 = 0;
  for (int64_t i = 0; i < n; i++) {
    bool full = m[i].off[0] == 0 && m[i].off[1] == 0 && m[i].ext[0] == 32 &&
                m[i].ext[1] == 16;
    if (m[i].route == RS_ROUTE_INTER && (m[i].dst == 1 || m[i].dst == 2)) {
      inter_d1++;
      cr_assert(full, "inter move %lld carries part of the tensor",
                (long long)i);
      cr_assert_eq(m[i].src, 0);
      landing = m[i].dst;
    }
    if (m[i].route == RS_ROUTE_INTER && m[i].dst == 3) inter_d2++;
  }
  cr_assert_eq(inter_d1, 1, "domain 1 got the tensor across %d times",
               inter_d1);
  cr_assert_eq(inter_d2, 1);
  for (int64_t i = 0; i < n; i++) {
    if (m[i].route != RS_ROUTE_INTRA) continue;
    cr_assert_eq(m[i].fw, 1, "intra move %lld not marked forwarded",
                 (long long)i);
    cr_assert_eq(m[i].src, landing, "forwarded from %d, landed on %d",
                 m[i].src, landing);
    cr_assert_eq(m[i].dst, 3 - landing);
    cr_assert(m[i].off[0] == 0 && m[i].ext[0] == 32 && m[i].ext[1] == 16);
    fw_d1++;
  }
  cr_assert_eq(fw_d1, 1, "%d forwarded moves", fw_d1);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER),
               2 * 32 * 16 * 4);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA),
               32 * 16 * 4);
  free(m);
  rh_fini(&h);
}

Test(exec, cross_domain_once_sharded_source) {
  /* TP2 source in domain 0, TP1 x 4 replicas in domain 1: every source
   * byte crosses once, in total exactly the tensor's bytes */
  rh h;
  rh_init(&h, 6, "cross_domain_once_sharded_source");
  for (int r = 0; r < 6; r++)
    cr_assert_eq(rs_context_set_domain(h.ctx, r, r < 2 ? 7 : 3), RS_OK);
  rh_tensor_add(&h, "w", RS_DTYPE_BF16, 2, I64(20, 6));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(1), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(4), INTS(2, 3, 4, 5),
             INTS(RS_REPLICATE), 0, 0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER),
               20 * 6 * 2, "the tensor should cross into domain 3 once");
  rh_fini(&h);
}

Test(exec, execute_twice_after_source_changes) {
  rh h;
  rh_init(&h, 5, "execute_twice_after_source_changes");
  cr_assert_eq(rs_context_set_domain_size(h.ctx, 2), RS_OK);
  rh_tensor_add(&h, "a", RS_DTYPE_F32, 2, I64(11, 7));
  rh_tensor_add(&h, "b", RS_DTYPE_U8, 1, I64(33));
  rh_dtensor(&h, RS_SIDE_SRC, "a", 1, I64(2), INTS(0, 1), INTS(1), 0, 0);
  rh_dtensor(&h, RS_SIDE_SRC, "b", 1, I64(1), INTS(4), INTS(RS_REPLICATE), 0,
             0);
  rh_dtensor(&h, RS_SIDE_DST, "a", 1, I64(3), INTS(2, 3, 4), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "b", 1, I64(5), INTS(0, 1, 2, 3, 4), INTS(0), 1,
             3);
  rh_run(&h);
  h.gen = 1;
  rh_fill_sources(&h);
  rh_poison_destinations(&h);
  rh_execute(&h);
  rh_check_destinations(&h);
  h.gen = 2;
  rh_fill_sources(&h);
  rh_execute(&h); /* without re-poisoning: every element is rewritten */
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(exec, rebind_to_new_memory) {
  rh h;
  rh_init(&h, 2, "rebind_to_new_memory");
  rh_tensor_add(&h, "a", RS_DTYPE_I64, 1, I64(40));
  rh_dtensor(&h, RS_SIDE_SRC, "a", 1, I64(1), INTS(0), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "a", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_run(&h);
  /* fresh buffers, bound again: the plan must use the new pointers */
  rh_alloc_bind(&h, 0);
  rh_execute(&h);
  rh_check_destinations(&h);
  rh_fini(&h);
}

Test(exec, small_staging_many_rounds, .timeout = 30) {
  /* 4 MiB tensor through 64 KiB of staging per rank: many rounds, each
   * rank's staging within the setting, still bit-exact */
  const int64_t staging = 64 << 10;
  rh h;
  rh_init(&h, 4, "small_staging_many_rounds");
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, staging),
               RS_OK);
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_SLICE_BYTES, 16 << 10),
               RS_OK);
  rh_tensor_add(&h, "big", RS_DTYPE_F32, 2, I64(1024, 1024));
  rh_dtensor(&h, RS_SIDE_SRC, "big", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "big", 1, I64(2), INTS(2, 3), INTS(1), 0, 0);
  rh_run(&h);
  rh_check_stats(&h, staging);
  int64_t rounds = rh_stat(&h, RS_ALL_RANKS, RS_STAT_ROUNDS);
  cr_assert_gt(rounds, 1, "4 MiB through 64 KiB staging in %lld round(s)",
               (long long)rounds);
  for (int r = 0; r < 4; r++) {
    int64_t s = rh_stat(&h, r, RS_STAT_STAGING_BYTES);
    cr_assert_leq(s, staging, "rank %d staging %lld", r, (long long)s);
  }
  rh_fini(&h);
}

Test(exec, small_staging_same_domain_and_mixed) {
  const int64_t staging = 64 << 10;
  rh h;
  rh_init(&h, 6, "small_staging_same_domain_and_mixed");
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, staging),
               RS_OK);
  cr_assert_eq(rs_context_set_domain_size(h.ctx, 3), RS_OK);
  rh_tensor_add(&h, "x", RS_DTYPE_BF16, 3, I64(64, 33, 65));
  rh_tensor_add(&h, "y", RS_DTYPE_F64, 1, I64(20000));
  rh_dtensor(&h, RS_SIDE_SRC, "x", 1, I64(3), INTS(0, 1, 2), INTS(2), 0, 0);
  rh_dtensor(&h, RS_SIDE_SRC, "y", 1, I64(2), INTS(4, 0), INTS(RS_REPLICATE),
             1, 0);
  rh_dtensor(&h, RS_SIDE_DST, "x", 2, I64(2, 3), INTS(0, 1, 2, 3, 4, 5),
             INTS(RS_REPLICATE, 0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "y", 1, I64(6), INTS(5, 4, 3, 2, 1, 0), INTS(0),
             0, 300000);
  rh_run(&h);
  rh_check_stats(&h, staging);
  cr_assert_gt(rh_stat(&h, RS_ALL_RANKS, RS_STAT_ROUNDS), 1);
  rh_fini(&h);
}

/* ---------------------------------------------------------------- JSON */

Test(plan_json, looks_like_json) {
  rh h;
  rh_init(&h, 4, "looks_like_json");
  rh_tensor_add(&h, "layers.0.w \"quoted\"", RS_DTYPE_BF16, 2, I64(16, 12));
  rh_dtensor(&h, RS_SIDE_SRC, "layers.0.w \"quoted\"", 1, I64(2), INTS(0, 1),
             INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "layers.0.w \"quoted\"", 1, I64(4),
             INTS(0, 1, 2, 3), INTS(1), 0, 0);
  rh_plan(&h);
  char *json = NULL;
  size_t len = 0;
  cr_assert_eq(rs_plan_to_json(h.plan, &json, &len), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  cr_assert_not_null(json);
  cr_assert_eq(len, strlen(json));
  size_t i = 0;
  while (json[i] == ' ' || json[i] == '\n') i++;
  cr_assert_eq(json[i], '{', "JSON starts with '%c'", json[i]);
  cr_assert(th_json_balanced(json), "unbalanced JSON: %s", json);
  cr_assert(th_contains(json, "\"moves\""), "no \"moves\" key");
  cr_assert(th_contains(json, "layers.0.w \\\"quoted\\\""),
            "tensor name not escaped as a JSON string");
  cr_assert(th_json_strings_valid(json), "bad JSON string: %s", json);
  for (const char *p = json; *p; p++)
    cr_assert((unsigned char)*p >= 0x20 || *p == '\n' || *p == '\t' ||
                  *p == '\r',
              "control byte 0x%02x in JSON", (unsigned char)*p);
  rs_free(json);
  rh_fini(&h);
}

/* --------------------------------------------------------- fingerprint */

static void build_fp(rh *h, const char *where) {
  rh_init(h, 4, where);
  rh_tensor_add(h, "w", RS_DTYPE_F32, 2, I64(8, 6));
  rh_tensor_add(h, "b", RS_DTYPE_F32, 1, I64(6));
  rh_dtensor(h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(h, RS_SIDE_SRC, "b", 1, I64(2), INTS(0, 1), INTS(RS_REPLICATE),
             1, 0);
  rh_dtensor(h, RS_SIDE_DST, "w", 1, I64(4), INTS(0, 1, 2, 3), INTS(1), 0, 0);
  rh_dtensor(h, RS_SIDE_DST, "b", 1, I64(4), INTS(0, 1, 2, 3),
             INTS(RS_REPLICATE), 0, 512);
}

static uint64_t fp_of(rh *h) {
  uint64_t fp = 0;
  rh_plan(h);
  cr_assert_eq(rs_plan_fingerprint(h->plan, &fp), RS_OK);
  return fp;
}

Test(plan_fingerprint, equal_for_identical_plans) {
  rh a, b;
  build_fp(&a, "fp a");
  build_fp(&b, "fp b");
  uint64_t fa = fp_of(&a), fb = fp_of(&b);
  cr_assert_eq(fa, fb, "identical inputs, fingerprints %llx vs %llx",
               (unsigned long long)fa, (unsigned long long)fb);
  /* and re-planning from the same layouts gives the same one */
  cr_assert_eq(fp_of(&a), fa);
  rh_same_moves(&a, b.plan);
  rh_fini(&a);
  rh_fini(&b);
}

Test(plan_fingerprint, differs_when_a_domain_changes) {
  rh a;
  build_fp(&a, "fp domain");
  uint64_t f0 = fp_of(&a);
  cr_assert_eq(rs_context_set_domain(a.ctx, 2, 0), RS_OK);
  uint64_t f1 = fp_of(&a);
  cr_assert_neq(f0, f1, "domain change left the fingerprint at %llx",
                (unsigned long long)f0);
  rh_fini(&a);
}

Test(plan_fingerprint, differs_when_staging_changes) {
  rh a;
  build_fp(&a, "fp staging");
  uint64_t f0 = fp_of(&a);
  cr_assert_eq(rs_context_set_param(a.ctx, RS_PARAM_STAGING_BYTES, 1 << 20),
               RS_OK);
  cr_assert_neq(fp_of(&a), f0);
  rh_fini(&a);
}

Test(plan_fingerprint, differs_when_a_shard_moves) {
  rh a, b;
  build_fp(&a, "fp shard a");
  build_fp(&b, "fp shard b");
  /* b: one more destination shard, elsewhere in memory */
  rh_shard(&b, RS_SIDE_DST, "b", 0, I64(0), I64(6), 3, 0, NULL);
  cr_assert_neq(fp_of(&a), fp_of(&b));
  rh_fini(&a);
  rh_fini(&b);
}

/* ----------------------------------------------------------- plan info */

Test(plan_info, tensors_and_moves_cover_destinations) {
  rh h;
  rh_init(&h, 4, "tensors_and_moves_cover_destinations");
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(8, 6));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(3), INTS(1, 2, 3), INTS(1), 0, 0);
  rh_plan(&h);
  int nt = 0;
  cr_assert_eq(rs_plan_num_tensors(h.plan, &nt), RS_OK);
  cr_assert_eq(nt, 1);
  /* moves delivered to each destination rank add up to its shard volume */
  int64_t n = 0;
  rh_move *m = rh_moves(&h, &n);
  int64_t got[4] = {0};
  for (int64_t i = 0; i < n; i++)
    got[m[i].dst] += th_volume(2, m[i].ext);
  cr_assert_eq(got[0], 0);
  cr_assert_eq(got[1], 8 * 2);
  cr_assert_eq(got[2], 8 * 2);
  cr_assert_eq(got[3], 8 * 2);
  int64_t moves = 0;
  for (int r = 0; r < 4; r++) moves += rh_stat(&h, r, RS_STAT_MOVES);
  cr_assert_geq(moves, n, "moves a rank takes part in, summed, < moves");
  free(m);
  rh_fini(&h);
}

/* ------------------------------------------------------ more edge cases */

Test(exec, one_dim_4mib_through_64kib_staging, .timeout = 30) {
  /* a single 1-D box far larger than the staging: it must be cut */
  const int64_t staging = 64 << 10;
  rh h;
  rh_init(&h, 2, "one_dim_4mib_through_64kib_staging");
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, staging),
               RS_OK);
  rh_tensor_add(&h, "flat", RS_DTYPE_F32, 1, I64(1 << 20));
  rh_shard(&h, RS_SIDE_SRC, "flat", 0, I64(0), I64(1 << 20), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "flat", 1, I64(0), I64(1 << 20), 0, 0, NULL);
  rh_run(&h);
  rh_check_stats(&h, staging);
  cr_assert_gt(rh_stat(&h, RS_ALL_RANKS, RS_STAT_ROUNDS), 1);
  rh_fini(&h);
}

Test(exec, row_longer_than_staging, .timeout = 30) {
  /* rows of 320 KB (f64 x 40000) through 64 KiB staging, strided source */
  const int64_t staging = 64 << 10;
  rh h;
  rh_init(&h, 3, "row_longer_than_staging");
  cr_assert_eq(rs_context_set_param(h.ctx, RS_PARAM_STAGING_BYTES, staging),
               RS_OK);
  rh_tensor_add(&h, "wide", RS_DTYPE_F64, 2, I64(3, 40000));
  rh_shard(&h, RS_SIDE_SRC, "wide", 0, I64(0, 0), I64(3, 40000), 0, 24,
           I64(40007, 1));
  rh_dtensor(&h, RS_SIDE_DST, "wide", 1, I64(2), INTS(1, 2), INTS(0), 0, 0);
  rh_run(&h);
  rh_check_stats(&h, staging);
  rh_fini(&h);
}

Test(exec, sixteen_dim_tensor) {
  /* RS_MAX_DIMS dims of size 2 (64 Ki u8), sharded on dims 0, 7 and 15 */
  rh h;
  rh_init(&h, 8, "sixteen_dim_tensor");
  int64_t shape[RS_MAX_DIMS];
  for (int d = 0; d < RS_MAX_DIMS; d++) shape[d] = 2;
  rh_tensor_add(&h, "deep", RS_DTYPE_U8, RS_MAX_DIMS, shape);
  rh_dtensor(&h, RS_SIDE_SRC, "deep", 2, I64(2, 2), INTS(0, 1, 2, 3),
             INTS(15, 0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "deep", 3, I64(2, 2, 2),
             INTS(7, 6, 5, 4, 3, 2, 1, 0), INTS(7, 15, 3), 1, 3);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, eight_dim_strided_destination) {
  rh h;
  rh_init(&h, 2, "eight_dim_strided_destination");
  const int64_t shape[8] = {2, 3, 1, 2, 3, 1, 2, 3};
  rh_tensor_add(&h, "oct", RS_DTYPE_BF16, 8, shape);
  const int64_t zero[8] = {0};
  rh_shard(&h, RS_SIDE_SRC, "oct", 0, zero, shape, 0, 0, NULL);
  /* reversed dim order with padding */
  int64_t strides[8], s = 1;
  for (int d = 0; d < 8; d++) {
    strides[d] = s;
    s *= shape[d] + 1;
  }
  rh_shard(&h, RS_SIDE_DST, "oct", 1, zero, shape, 0, 6, strides);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, innermost_stride_two) {
  /* every other element, on both sides */
  rh h;
  rh_init(&h, 2, "innermost_stride_two");
  rh_tensor_add(&h, "t", RS_DTYPE_F32, 2, I64(5, 7));
  rh_shard(&h, RS_SIDE_SRC, "t", 0, I64(0, 0), I64(5, 7), 0, 0, I64(14, 2));
  rh_shard(&h, RS_SIDE_DST, "t", 1, I64(0, 0), I64(5, 7), 0, 4, I64(15, 2));
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, tensor_without_shards_moves_nothing) {
  rh h;
  rh_init(&h, 2, "tensor_without_shards_moves_nothing");
  rh_tensor_add(&h, "unused", RS_DTYPE_F32, 1, I64(10));
  rh_tensor_add(&h, "used", RS_DTYPE_F32, 1, I64(10));
  rh_shard(&h, RS_SIDE_SRC, "used", 0, I64(0), I64(10), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "used", 1, I64(0), I64(10), 0, 0, NULL);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, empty_layouts_plan_and_execute) {
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  int64_t n = -1;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  cr_assert_eq(rs_plan_num_moves(plan, &n), RS_OK);
  cr_assert_eq(n, 0);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  char *json = NULL;
  cr_assert_eq(rs_plan_to_json(plan, &json, NULL), RS_OK);
  cr_assert(th_json_balanced(json));
  rs_free(json);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

Test(exec, plan_ignores_later_layout_changes) {
  rh h;
  rh_init(&h, 3, "plan_ignores_later_layout_changes");
  rh_tensor_add(&h, "t", RS_DTYPE_I32, 1, I64(12));
  rh_shard(&h, RS_SIDE_SRC, "t", 0, I64(0), I64(12), 0, 0, NULL);
  rh_shard(&h, RS_SIDE_DST, "t", 1, I64(0), I64(12), 0, 0, NULL);
  rh_plan(&h);
  uint64_t fp0 = 0, fp1 = 1;
  cr_assert_eq(rs_plan_fingerprint(h.plan, &fp0), RS_OK);
  /* change the layout and the domains after planning */
  cr_assert_eq(rs_layout_add_shard(h.lay[RS_SIDE_DST], "t", 2, I64(0),
                                   I64(12), 5, 0, NULL), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 1, 0), RS_OK);
  cr_assert_eq(rs_plan_fingerprint(h.plan, &fp1), RS_OK);
  cr_assert_eq(fp0, fp1, "an existing plan changed with its inputs");
  unsigned char x[64];
  cr_assert_eq(rs_plan_bind(h.plan, RS_SIDE_DST, 2, 5, x, sizeof x),
               RS_ERR_UNKNOWN_BUFFER, "the plan saw a shard added later");
  rh_alloc_bind(&h, 0);
  rh_execute(&h);
  rh_check_destinations(&h);
  /* the route it saw: rank 0 and 1 were in different domains */
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER), 48);
  rh_fini(&h);
}

Test(exec, tied_embeddings_share_source_memory) {
  /* embed_tokens and lm_head are the same memory on the source (tied
   * weights): two tensors whose source shards alias. Reading is fine. */
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  const int64_t shape[2] = {16, 8}, zero[2] = {0, 0};
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  const char *names[2] = {"embed_tokens", "lm_head"};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(rs_layout_add_tensor(s, names[i], RS_DTYPE_BF16, 2, shape),
                 RS_OK);
    cr_assert_eq(rs_layout_add_tensor(d, names[i], RS_DTYPE_BF16, 2, shape),
                 RS_OK);
    cr_assert_eq(rs_layout_add_shard(s, names[i], 0, zero, shape, 0, 0,
                                     NULL), RS_OK);
    cr_assert_eq(rs_layout_add_dtensor(d, names[i], 1, I64(2), INTS(1, 2),
                                       INTS(0), i, 0), RS_OK);
  }
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  unsigned char src[256], dst[2][2][128];
  for (int i = 0; i < 256; i++) src[i] = (unsigned char)(i * 31 + 7);
  memset(dst, TH_POISON, sizeof dst);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, src, sizeof src), RS_OK);
  for (int r = 0; r < 2; r++)
    for (int b = 0; b < 2; b++)
      cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, r + 1, b, dst[r][b], 128),
                   RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  for (int r = 0; r < 2; r++)
    for (int b = 0; b < 2; b++)
      cr_assert(memcmp(dst[r][b], src + 128 * r, 128) == 0,
                "rank %d tensor %s wrong", r + 1, names[b]);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

Test(exec, same_layout_on_both_sides) {
  /* a layout into itself: everything stays on its rank */
  rh h;
  rh_init(&h, 3, "same_layout_on_both_sides");
  rh_tensor_add(&h, "t", RS_DTYPE_F32, 2, I64(9, 4));
  rh_dtensor(&h, RS_SIDE_SRC, "t", 1, I64(3), INTS(0, 1, 2), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "t", 1, I64(3), INTS(0, 1, 2), INTS(0), 0, 0);
  rs_plan *p2 = NULL;
  cr_assert_eq(rs_plan_create(h.lay[0], h.lay[0], &p2), RS_OK, "%s",
               rs_context_last_error(h.ctx));
  int64_t sent = -1;
  cr_assert_eq(rs_plan_stat(p2, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA,
                            &sent), RS_OK);
  cr_assert_eq(sent, 0);
  rs_plan_destroy(p2);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL), 9 * 4 * 4);
  rh_fini(&h);
}

Test(exec, many_single_element_shards, .timeout = 30) {
  /* [32,32]: source one element per shard over 4 ranks (1024 shards),
   * destination the transpose-ish column bands */
  rh h;
  rh_init(&h, 4, "many_single_element_shards");
  rh_tensor_add(&h, "dots", RS_DTYPE_U16, 2, I64(32, 32));
  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 32; j++) {
      int rank = (i * 7 + j) % 4;
      rh_shard(&h, RS_SIDE_SRC, "dots", rank, I64(i, j), I64(1, 1), j % 2,
               rh_used(&h, RS_SIDE_SRC, rank, j % 2), NULL);
    }
  rh_dtensor(&h, RS_SIDE_DST, "dots", 1, I64(4), INTS(3, 2, 1, 0), INTS(1), 0,
             0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  rh_fini(&h);
}

Test(exec, huge_domain_ids) {
  /* domain ids are names, not indices: INT_MAX and 10^9 are fine */
  rh h;
  rh_init(&h, 4, "huge_domain_ids");
  cr_assert_eq(rs_context_set_domain(h.ctx, 0, 2147483647), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 1, 2147483647), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 2, 1000000000), RS_OK);
  cr_assert_eq(rs_context_set_domain(h.ctx, 3, 1000000000), RS_OK);
  rh_tensor_add(&h, "w", RS_DTYPE_F32, 2, I64(6, 6));
  rh_dtensor(&h, RS_SIDE_SRC, "w", 1, I64(2), INTS(0, 1), INTS(0), 0, 0);
  rh_dtensor(&h, RS_SIDE_DST, "w", 1, I64(2), INTS(2, 3), INTS(RS_REPLICATE),
             0, 0);
  rh_run(&h);
  rh_check_stats(&h, NO_STAGING_LIMIT);
  cr_assert_eq(rh_stat(&h, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER), 6 * 6 * 4,
               "domain 10^9 should get the tensor across once");
  rh_fini(&h);
}

Test(exec, large_world_two_active_ranks, .timeout = 30) {
  /* 100000 ranks, two of them take part */
  const int world = 100000;
  rs_context *ctx = NULL;
  rs_layout *s = NULL, *d = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(world, &ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain_size(ctx, 8), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &s), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &d), RS_OK);
  const int64_t n = 100, zero = 0;
  cr_assert_eq(rs_layout_add_tensor(s, "t", RS_DTYPE_I64, 1, &n), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(d, "t", RS_DTYPE_I64, 1, &n), RS_OK);
  cr_assert_eq(rs_layout_add_shard(s, "t", 3, &zero, &n, 0, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(d, "t", world - 1, &zero, &n, 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_plan_create(s, d, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  int64_t a[100], b[100];
  for (int i = 0; i < 100; i++) {
    a[i] = i * 1000003LL;
    b[i] = -1;
  }
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 3, 0, a, sizeof a), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, world - 1, 0, b, sizeof b),
               RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  cr_assert(memcmp(a, b, sizeof a) == 0);
  int64_t v = -1;
  cr_assert_eq(rs_plan_stat(plan, world - 1, RS_STAT_BYTES_RECV_INTER, &v),
               RS_OK);
  cr_assert_eq(v, 800);
  rs_plan_destroy(plan);
  rs_layout_destroy(s);
  rs_layout_destroy(d);
  rs_context_destroy(ctx);
}

/* Names with control bytes are refused (test_hostile_input); a quote and a
 * backslash are what a name can still hold that JSON must escape. */
Test(plan_json, escapes_quotes_backslashes_and_long_names) {
  rh h;
  rh_init(&h, 2, "escapes_quotes_backslashes_and_long_names");
  char longname[3001];
  memset(longname, 'n', 3000);
  longname[3000] = 0;
  rh_tensor_add(&h, "quote\"here\\back", RS_DTYPE_U8, 1, I64(4));
  rh_tensor_add(&h, longname, RS_DTYPE_U8, 1, I64(4));
  rh_shard(&h, RS_SIDE_SRC, "quote\"here\\back", 0, I64(0), I64(4), 0, 0,
           NULL);
  rh_shard(&h, RS_SIDE_SRC, longname, 0, I64(0), I64(4), 0, 4, NULL);
  rh_shard(&h, RS_SIDE_DST, "quote\"here\\back", 1, I64(0), I64(4), 0, 0,
           NULL);
  rh_shard(&h, RS_SIDE_DST, longname, 1, I64(0), I64(4), 0, 4, NULL);
  rh_run(&h);
  char *json = NULL;
  size_t len = 0;
  cr_assert_eq(rs_plan_to_json(h.plan, &json, &len), RS_OK);
  cr_assert_eq(len, strlen(json));
  cr_assert(th_json_balanced(json));
  cr_assert(th_contains(json, longname), "long name cut in JSON");
  for (const char *p = json; *p; p++)
    cr_assert((unsigned char)*p >= 0x20 || *p == '\n' || *p == '\t' ||
                  *p == '\r',
              "raw control byte 0x%02x in JSON", (unsigned char)*p);
  /* the quote and the backslash are escaped the JSON way */
  cr_assert(th_json_strings_valid(json), "bad JSON string: %s", json);
  cr_assert(th_contains(json, "quote\\\"here\\\\back"),
            "quote or backslash not escaped: %s", json);
  rs_free(json);
  rh_fini(&h);
}

/* Only the buffers the plan reads or writes must be bound: a source
 * replica it never reads needs no memory (3 ranks; u8[64] held by ranks 0
 * and 1; destination rank 2). */
Test(exec, unread_replica_needs_no_binding) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rs_plan *plan = NULL;
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_U8, 1, I64(64)), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_U8, 1, I64(64)), RS_OK);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(rs_layout_add_shard(src, "w", r, I64(0), I64(64), 0, 0, NULL),
                 RS_OK);
  cr_assert_eq(rs_layout_add_shard(dst, "w", 2, I64(0), I64(64), 0, 0, NULL),
               RS_OK);
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  int64_t n = 0;
  int from = -1;
  cr_assert_eq(rs_plan_num_moves(plan, &n), RS_OK);
  cr_assert_eq(n, 1);
  cr_assert_eq(rs_plan_move_info(plan, 0, NULL, &from, NULL, NULL, NULL, NULL),
               RS_OK);
  unsigned char in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = (unsigned char)(i * 3 + 1);
  memset(out, 0, sizeof out);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, from, 0, in, sizeof in), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 2, 0, out, sizeof out), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  cr_assert_arr_eq(in, out, sizeof in);
  /* the replica it reads is still required */
  rs_plan *again = NULL;
  cr_assert_eq(rs_plan_create(src, dst, &again), RS_OK);
  cr_assert_eq(rs_plan_bind(again, RS_SIDE_SRC, 1 - from, 0, in, sizeof in),
               RS_OK);
  cr_assert_eq(rs_plan_bind(again, RS_SIDE_DST, 2, 0, out, sizeof out), RS_OK);
  cr_assert_eq(rs_plan_execute(again), RS_ERR_UNKNOWN_BUFFER);
  char want[64];
  snprintf(want, sizeof want, "source buffer 0 of rank %d", from);
  cr_assert(strstr(rs_context_last_error(ctx), want), "%s",
            rs_context_last_error(ctx));
  rs_plan_destroy(again);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}
