/* SPDX-License-Identifier: Apache-2.0 */
/* Start a reshard without waiting, do other work while it runs, then wait:
 * the asynchronous calls of libreshard 0.2, here in one process (between
 * processes and on GPUs they are used the same way). Also shows a buffer
 * of the wrong memory kind being refused, and rs_context_abort. */
#include <reshard/reshard.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                  \
  do {                                                               \
    rs_status st_ = (call);                                          \
    if (st_ != RS_OK) {                                              \
      fprintf(stderr, "%s: %s\n", #call, rs_context_last_error(ctx)); \
      return 1;                                                      \
    }                                                                \
  } while (0)

enum { ROWS = 256, COLS = 256 };
static float in[2][ROWS / 2][COLS], out[4][ROWS][COLS / 4];

int main(void) {
  rs_context *ctx = NULL;
  if (rs_context_create_local(6, &ctx) != RS_OK) return 1;
  /* 64 KiB of staging per rank: the sync takes several rounds */
  CHECK(rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES, 64 << 10));
  const int64_t shape[2] = {ROWS, COLS}, m2[1] = {2}, m4[1] = {4};
  const int train[2] = {0, 1}, infer[4] = {2, 3, 4, 5};
  const int rows[1] = {0}, cols[1] = {1};
  rs_layout *src = NULL, *dst = NULL;
  CHECK(rs_layout_create(ctx, &src));
  CHECK(rs_layout_create(ctx, &dst));
  CHECK(rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 2, shape));
  CHECK(rs_layout_add_dtensor(src, "w", 1, m2, train, rows, 0, 0));
  CHECK(rs_layout_add_dtensor(dst, "w", 1, m4, infer, cols, 0, 0));
  rs_plan *plan = NULL;
  CHECK(rs_plan_create(src, dst, &plan));
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < ROWS / 2; i++)
      for (int j = 0; j < COLS; j++) in[r][i][j] = (float)((r * 128 + i) * 1000 + j);
    CHECK(rs_plan_bind(plan, RS_SIDE_SRC, train[r], 0, in[r], sizeof in[r]));
  }
  for (int r = 0; r < 4; r++)
    CHECK(rs_plan_bind_memory(plan, RS_SIDE_DST, infer[r], 0, out[r],
                              sizeof out[r], RS_MEMORY_HOST, -1));

  /* A CUDA pointer cannot be bound to a context that moves host memory. */
  if (rs_plan_bind_memory(plan, RS_SIDE_DST, 2, 0, out[0], sizeof out[0],
                          RS_MEMORY_CUDA, 0) != RS_ERR_WRONG_MEMORY)
    return 1;
  printf("refused: %s\n", rs_context_last_error(ctx));

  /* Start, then test between other work until done. */
  CHECK(rs_plan_execute_async(plan, NULL)); /* NULL: host memory, no queue */
  int done = 0, tests = 0;
  while (!done) {
    CHECK(rs_plan_test(plan, &done)); /* advances without waiting */
    tests++;                          /* ... the caller's other work ... */
  }
  int bad = 0;
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < ROWS; i++)
      for (int j = 0; j < COLS / 4; j++)
        bad += out[r][i][j] != (float)(i * 1000 + r * (COLS / 4) + j);
  printf("async: done after %d tests, %s\n", tests, bad ? "WRONG" : "bit-exact");

  /* Start again and wait; then abort (from any thread, e.g. a watchdog
   * that learned a peer died): the context is done after it. */
  CHECK(rs_plan_execute_async(plan, NULL));
  CHECK(rs_plan_wait(plan));
  rs_context_abort(ctx);
  rs_status st = rs_plan_execute(plan);
  printf("after rs_context_abort: %s\n", rs_status_name(st));
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
  return bad != 0 || st != RS_ERR_TRANSPORT;
}
