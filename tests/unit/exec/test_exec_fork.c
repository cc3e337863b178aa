/* SPDX-License-Identifier: Apache-2.0 */
/* A process may fork while another of its threads executes a plan
 * (Python's multiprocessing forks a trainer that syncs weights on another
 * thread). The child gets a usable in-process context: an execution that
 * was in flight in the parent is reported once, by the child's next wait,
 * as RS_ERR_TRANSPORT saying so; the child's own executions then deliver
 * every element. Every child checks this with RS_PARAM_COPY_THREADS from
 * 1 to 16; the parent's thread keeps executing and checking throughout.
 *
 * Plain C, not Criterion: Criterion's own threads use the allocator while
 * a test forks (see ../copy/test_copy_pool_fork.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <reshard/reshard.h>

#define N 1024 /* a N x N float32 tensor: 4 MiB, several rounds */
#define FORKS 48
#define RANKS 2
#define IN_FLIGHT 10 /* a child's exit code: it found the parent's execution */

typedef struct fork_case {
  rs_context *ctx;
  rs_plan *plan;
  float *src[RANKS], *dst[RANKS];
} fork_case;

static int fail(const char *what, rs_status st, const rs_context *ctx) {
  fprintf(stderr, "test_exec_fork: %s: %s: %s\n", what, rs_status_name(st),
          ctx ? rs_context_last_error(ctx) : "");
  return 1;
}

/* Rows split over the ranks at the source, columns at the destination. */
static int make(fork_case *s, int64_t threads) {
  rs_layout *src = NULL, *dst = NULL;
  int64_t shape[2] = {N, N};
  rs_status st = rs_context_create_local(RANKS, &s->ctx);
  if (st == RS_OK)
    st = rs_context_set_param(s->ctx, RS_PARAM_COPY_THREADS, threads);
  if (st == RS_OK)
    st = rs_context_set_param(s->ctx, RS_PARAM_STAGING_BYTES, 1 << 20);
  if (st == RS_OK) st = rs_layout_create(s->ctx, &src);
  if (st == RS_OK) st = rs_layout_create(s->ctx, &dst);
  if (st == RS_OK)
    st = rs_layout_add_tensor(src, "w", RS_DTYPE_F32, 2, shape);
  if (st == RS_OK)
    st = rs_layout_add_tensor(dst, "w", RS_DTYPE_F32, 2, shape);
  for (int r = 0; st == RS_OK && r < RANKS; r++) {
    int64_t roff[2] = {r * N / RANKS, 0}, rext[2] = {N / RANKS, N};
    int64_t coff[2] = {0, r * N / RANKS}, cext[2] = {N, N / RANKS};
    st = rs_layout_add_shard(src, "w", r, roff, rext, 0, 0, NULL);
    if (st == RS_OK)
      st = rs_layout_add_shard(dst, "w", r, coff, cext, 0, 0, NULL);
  }
  if (st == RS_OK) st = rs_plan_create(src, dst, &s->plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  size_t bytes = (size_t)N * N / RANKS * sizeof(float);
  for (int r = 0; st == RS_OK && r < RANKS; r++) {
    s->src[r] = malloc(bytes);
    s->dst[r] = malloc(bytes);
    for (int i = 0; i < N / RANKS; i++)
      for (int j = 0; j < N; j++)
        s->src[r][(size_t)i * N + j] = (float)((r * N / RANKS + i) * N + j);
    st = rs_plan_bind(s->plan, RS_SIDE_SRC, r, 0, s->src[r], bytes);
    if (st == RS_OK)
      st = rs_plan_bind(s->plan, RS_SIDE_DST, r, 0, s->dst[r], bytes);
  }
  return st == RS_OK ? 0 : fail("setup", st, s->ctx);
}

/* Every destination element holds its value. */
static int delivered(const fork_case *s) {
  for (int r = 0; r < RANKS; r++)
    for (int i = 0; i < N; i++)
      for (int j = 0; j < N / RANKS; j++) {
        float want = (float)(i * N + r * N / RANKS + j);
        if (s->dst[r][(size_t)i * (N / RANKS) + j] != want) {
          fprintf(stderr, "test_exec_fork: rank %d element (%d, %d) is %g, "
                  "want %g\n", r, i, j, s->dst[r][(size_t)i * (N / RANKS) + j],
                  want);
          return 0;
        }
      }
  return 1;
}

static void clear(fork_case *s) {
  for (int r = 0; r < RANKS; r++)
    memset(s->dst[r], 0xFF, (size_t)N * N / RANKS * sizeof(float));
}

static atomic_bool stop;
static atomic_long executions, wrong;

static void *keep_executing(void *arg) {
  fork_case *s = arg;
  while (!atomic_load(&stop)) {
    rs_status st = rs_plan_execute_async(s->plan, NULL);
    if (st == RS_OK) st = rs_plan_wait(s->plan);
    if (st != RS_OK || !delivered(s)) {
      fail("the parent's execution", st, s->ctx);
      atomic_fetch_add(&wrong, 1);
      return NULL;
    }
    atomic_fetch_add(&executions, 1);
  }
  return NULL;
}

/* In the child: wait (the parent's execution, if one was in flight, is
 * reported once), then execute twice and check. Exit code 0 on success. */
static int child(fork_case *s) {
  rs_status st = rs_plan_wait(s->plan);
  bool was_in_flight = st == RS_ERR_TRANSPORT &&
                       strstr(rs_context_last_error(s->ctx), "forked");
  if (st != RS_OK && !was_in_flight)
    return fail("the child's first wait", st, s->ctx);
  for (int k = 0; k < 2; k++) {
    clear(s);
    st = rs_plan_execute(s->plan);
    if (st != RS_OK) return fail("the child's execution", st, s->ctx);
    if (!delivered(s)) return 1;
  }
  rs_plan_destroy(s->plan);
  rs_context_destroy(s->ctx);
  return was_in_flight ? IN_FLIGHT : 0;
}

int main(void) {
  int failed = 0, reported = 0, in_flight = 0;
  const int64_t threads[] = {1, 2, 4, 16};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    fork_case s = {0};
    if (make(&s, threads[t])) return 1;
    atomic_store(&stop, false);
    pthread_t th;
    if (pthread_create(&th, NULL, keep_executing, &s) != 0) return 1;
    for (int k = 0; k < FORKS / 4; k++) {
      for (long seen = atomic_load(&executions);
           atomic_load(&executions) == seen && !atomic_load(&wrong);)
        usleep(200);
      usleep((useconds_t)(k * 137 % 2000)); /* land at various points */
      pid_t pid = fork();
      if (pid == 0) _exit(child(&s));
      int status = 0;
      bool ended = pid > 0 && waitpid(pid, &status, 0) == pid &&
                   WIFEXITED(status);
      if (ended && WEXITSTATUS(status) == IN_FLIGHT) in_flight++;
      if (!ended ||
          (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != IN_FLIGHT)) {
        fprintf(stderr, "test_exec_fork: child %d (%lld copy threads) "
                "failed (status %d)\n", k, (long long)threads[t], status);
        failed++;
      }
      reported++;
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    if (atomic_load(&wrong)) failed++;
    rs_plan_destroy(s.plan);
    rs_context_destroy(s.ctx);
    for (int r = 0; r < RANKS; r++) {
      free(s.src[r]);
      free(s.dst[r]);
    }
  }
  printf("test_exec_fork: %d forks while a thread executed (%d with an "
         "execution in flight), %d failed; the parent executed %ld times\n",
         reported, in_flight, failed, atomic_load(&executions));
  return failed ? 1 : 0;
}
