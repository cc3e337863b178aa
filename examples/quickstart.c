/* SPDX-License-Identifier: Apache-2.0 */
/* Reshard one 2-D tensor from 2 ranks (rows split) to 3 ranks (columns
 * split), all in this process, and check the result. */
#include <reshard/reshard.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                  \
  do {                                                               \
    rs_status st_ = (call);                                          \
    if (st_ != RS_OK) {                                              \
      fprintf(stderr, "%s: %s\n", #call, rs_context_last_error(ctx)); \
      return 1;                                                      \
    }                                                                \
  } while (0)

int main(void) {
  enum { ROWS = 6, COLS = 9 };
  rs_context *ctx = NULL;
  if (rs_context_create_local(5, &ctx) != RS_OK) return 1;
  rs_context_set_domain_size(ctx, 2); /* ranks {0,1} {2,3} {4} */

  const int64_t shape[2] = {ROWS, COLS};
  const int64_t mesh2[1] = {2}, mesh3[1] = {3};
  const int train[2] = {0, 1}, infer[3] = {2, 3, 4};
  const int rows[1] = {0}, cols[1] = {1}; /* Shard(0), Shard(1) */

  rs_layout *src = NULL, *dst = NULL;
  CHECK(rs_layout_create(ctx, &src));
  CHECK(rs_layout_create(ctx, &dst));
  CHECK(rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_dtensor(src, "w", 1, mesh2, train, rows, 0, 0));
  CHECK(rs_layout_add_dtensor(dst, "w", 1, mesh3, infer, cols, 0, 0));

  rs_plan *plan = NULL;
  CHECK(rs_plan_create(src, dst, &plan));
  rs_layout_destroy(src); /* the plan keeps what it needs */
  rs_layout_destroy(dst);

  float in[2][ROWS / 2][COLS], out[3][ROWS][COLS / 3];
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < ROWS / 2; i++)
      for (int j = 0; j < COLS; j++) in[r][i][j] = (float)((r * 3 + i) * 100 + j);
    CHECK(rs_plan_bind(plan, RS_SIDE_SRC, train[r], 0, in[r], sizeof in[r]));
  }
  for (int r = 0; r < 3; r++)
    CHECK(rs_plan_bind(plan, RS_SIDE_DST, infer[r], 0, out[r], sizeof out[r]));
  CHECK(rs_plan_execute(plan));

  int64_t inter = 0, rounds = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER, &inter);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &rounds);
  int bad = 0;
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < ROWS; i++)
      for (int j = 0; j < COLS / 3; j++)
        bad += out[r][i][j] != (float)(i * 100 + r * 3 + j);
  printf("libreshard %s: %lld bytes across domains, %lld round(s), %s\n",
         rs_version_string(), (long long)inter, (long long)rounds,
         bad ? "WRONG" : "bit-exact");
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
  return bad != 0;
}
