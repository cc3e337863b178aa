/* SPDX-License-Identifier: Apache-2.0 */
/* Logging (reshard.h, "Logging"): levels, subsystems, the callback, the
 * environment and the file. Criterion runs each test in a process of its
 * own, so each starts from the environment it sets. */
#include <criterion/criterion.h>
#include <reshard/reshard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEEN 64

typedef struct seen {
  int n;
  rs_log_level level[MAX_SEEN];
  unsigned subsys[MAX_SEEN];
  int rank[MAX_SEEN];
  char text[MAX_SEEN][512];
} seen;

static void keep(void *user, rs_log_level level, unsigned subsys, int rank,
                 const char *message) {
  seen *s = user;
  if (s->n == MAX_SEEN) return;
  s->level[s->n] = level;
  s->subsys[s->n] = subsys;
  s->rank[s->n] = rank;
  snprintf(s->text[s->n], sizeof s->text[0], "%s", message);
  s->n++;
}

/* The index of the first message of `level` and `subsys` holding `part`,
 * or -1. */
static int find(const seen *s, rs_log_level level, unsigned subsys,
                const char *part) {
  for (int i = 0; i < s->n; i++)
    if (s->level[i] == level && s->subsys[i] == subsys &&
        strstr(s->text[i], part))
      return i;
  return -1;
}

/* A sync of one tensor between 2 ranks of a local context. */
static void one_sync(void) {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &src), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &dst), RS_OK);
  int64_t shape[1] = {4}, off[1] = {0};
  cr_assert_eq(rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 1, shape), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 1, shape), RS_OK);
  cr_assert_eq(rs_layout_add_shard(src, "w", 0, off, shape, 0, 0, NULL), RS_OK);
  cr_assert_eq(rs_layout_add_shard(dst, "w", 1, off, shape, 0, 0, NULL), RS_OK);
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_SRC, 0, 0, a, sizeof a), RS_OK);
  cr_assert_eq(rs_plan_bind(plan, RS_SIDE_DST, 1, 0, b, sizeof b), RS_OK);
  cr_assert_eq(rs_plan_execute(plan), RS_OK);
  cr_assert_eq(memcmp(a, b, sizeof a), 0);
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
}

Test(log, off_by_default) {
  unsetenv("RESHARD_DEBUG");
  seen s = {0};
  rs_log_level level = RS_LOG_TRACE;
  unsigned bits = 0;
  cr_assert_eq(rs_log_get_level(&level, &bits), RS_OK);
  cr_assert_eq(level, RS_LOG_NONE);
  cr_assert_eq(bits, RS_LOG_ALL);
  cr_assert_eq(rs_log_set_callback(keep, &s), RS_OK);
  one_sync();
  int64_t shape[1] = {0};
  rs_context *ctx;
  rs_layout *l;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 1, shape),
               RS_ERR_BAD_SHAPE);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  cr_assert_eq(s.n, 0, "%d messages with logging off, first: %s", s.n,
               s.text[0]);
}

Test(log, info_tells_the_life_of_a_sync) {
  seen s = {0};
  cr_assert_eq(rs_log_set_callback(keep, &s), RS_OK);
  cr_assert_eq(rs_log_set_level(RS_LOG_INFO, RS_LOG_ALL), RS_OK);
  one_sync();
  int c = find(&s, RS_LOG_INFO, RS_LOG_CONTEXT, "local transport");
  int p = find(&s, RS_LOG_INFO, RS_LOG_PLAN, "1 moves in 1 rounds");
  int e = find(&s, RS_LOG_INFO, RS_LOG_EXEC, "execution ended RS_OK");
  cr_assert(c >= 0 && p > c && e > p, "context %d, plan %d, execution %d", c, p,
            e);
  cr_assert_eq(s.rank[c], RS_ALL_RANKS);
  cr_assert_eq(find(&s, RS_LOG_TRACE, RS_LOG_EXEC, "step"), -1,
               "TRACE lines at INFO");
}

Test(log, trace_names_each_step_and_its_rank) {
  seen s = {0};
  rs_log_set_callback(keep, &s);
  cr_assert_eq(rs_log_set_level(RS_LOG_TRACE, RS_LOG_EXEC), RS_OK);
  one_sync();
  int b = find(&s, RS_LOG_TRACE, RS_LOG_EXEC, "step 0 of 1 begins");
  cr_assert(b >= 0);
  cr_assert(s.rank[b] == 0 || s.rank[b] == 1, "rank %d", s.rank[b]);
  cr_assert(find(&s, RS_LOG_TRACE, RS_LOG_EXEC, "step 0 ended") >= 0);
  for (int i = 0; i < s.n; i++) /* EXEC only */
    cr_assert_eq(s.subsys[i], RS_LOG_EXEC, "%s", s.text[i]);
}

Test(log, warn_names_each_failure_where_it_is_recorded) {
  seen s = {0};
  rs_log_set_callback(keep, &s);
  cr_assert_eq(rs_log_set_level(RS_LOG_WARN, RS_LOG_ALL), RS_OK);
  rs_context *ctx;
  rs_layout *l;
  cr_assert_eq(rs_context_create_local(1, &ctx), RS_OK);
  cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
  int64_t shape[1] = {0};
  cr_assert_eq(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 1, shape),
               RS_ERR_BAD_SHAPE);
  cr_assert_eq(s.n, 1, "%d messages", s.n);
  cr_assert_eq(s.level[0], RS_LOG_WARN);
  cr_assert_eq(s.subsys[0], RS_LOG_LAYOUT);
  cr_assert(strstr(s.text[0], "RS_ERR_BAD_SHAPE"), "%s", s.text[0]);
  cr_assert(strstr(s.text[0], rs_context_last_error(ctx)), "%s vs %s",
            s.text[0], rs_context_last_error(ctx));
  /* a subsystem left out says nothing */
  cr_assert_eq(rs_log_set_level(RS_LOG_WARN, RS_LOG_ALL & ~RS_LOG_LAYOUT),
               RS_OK);
  cr_assert_eq(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 1, shape),
               RS_ERR_BAD_SHAPE);
  cr_assert_eq(s.n, 1);
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

Test(log, a_bad_level_changes_nothing) {
  cr_assert_eq(rs_log_set_level(RS_LOG_INFO, RS_LOG_PLAN), RS_OK);
  cr_assert_eq(rs_log_set_level((rs_log_level)4, RS_LOG_ALL),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(rs_last_error(), "log level 4"), "%s", rs_last_error());
  cr_assert_eq(rs_log_set_level((rs_log_level)-1, RS_LOG_ALL),
               RS_ERR_INVALID_ARGUMENT);
  rs_log_level level;
  unsigned bits;
  cr_assert_eq(rs_log_get_level(&level, &bits), RS_OK);
  cr_assert_eq(level, RS_LOG_INFO);
  cr_assert_eq(bits, RS_LOG_PLAN);
  cr_assert_eq(rs_log_get_level(NULL, NULL), RS_OK);
}

Test(log, environment_and_file) {
  char pattern[] = "/tmp/reshard_log_XXXXXX";
  cr_assert_not_null(mkdtemp(pattern));
  char file_env[512], path[600];
  snprintf(file_env, sizeof file_env, "%s/log.%%h.%%p.txt", pattern);
  setenv("RESHARD_DEBUG", "info", 1);
  setenv("RESHARD_DEBUG_SUBSYS", "^exec,context", 1);
  setenv("RESHARD_DEBUG_FILE", file_env, 1);
  rs_log_level level;
  unsigned bits;
  cr_assert_eq(rs_log_get_level(&level, &bits), RS_OK);
  cr_assert_eq(level, RS_LOG_INFO);
  cr_assert_eq(bits, RS_LOG_ALL & ~(RS_LOG_EXEC | RS_LOG_CONTEXT));
  one_sync();
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  snprintf(path, sizeof path, "%s/log.%s.%ld.txt", pattern, host,
           (long)getpid());
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no log file %s", path);
  char line[1024];
  int plan_lines = 0, other = 0;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "] RESHARD INFO PLAN: plan "))
      plan_lines++;
    else
      other++;
  }
  fclose(f);
  unlink(path);
  rmdir(pattern);
  cr_assert_eq(plan_lines, 1);
  cr_assert_eq(other, 0, "EXEC and CONTEXT were left out");
}
