/* SPDX-License-Identifier: Apache-2.0 */
/* Executing a plan: binding memory, the checks made before any byte
 * moves, and the life of an execution (start, test, wait, abort), on the
 * caller's thread or handed to the context's progress thread. The
 * driver (exec_run.c) moves the bytes; exec_guard.c makes an execution
 * between processes trustworthy.
 *
 * An execution handed to the progress thread (RS_PARAM_PROGRESS_THREAD)
 * is the thread's from rs_plan_execute_async's return until the caller's
 * thread sees it end (rsi_progress_ended or _wait, which order what the
 * thread wrote before what the caller reads next). Meanwhile the caller's
 * calls read only ctx->handed, which only the caller's thread writes:
 * test and wait look at the thread, destroy waits for it, and bind,
 * execute and set_param refuse; the execution records its failure in
 * its own record, never in the context's, which the caller may read. */
#include "exec/exec.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy/engine.h"
#include "exec/exec_guard.h"
#include "exec/exec_run.h"
#include "exec/exec_state.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/sigpipe.h"
#include "base/status.h"
#include "transport/transport.h"

static const char *side_name(int side) {
  return side == RS_SIDE_SRC ? "source" : "destination";
}

static const char *memory_name(int memory) {
  return memory == RSI_MEMORY_HOST ? "host" : "CUDA device";
}

static rs_status settle_fork(rs_plan *plan);
static rs_status collect(rs_plan *plan);

rs_status rsi_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                        void *ptr, size_t bytes, int memory, int device) {
  rsi_err *err = plan->ctx->err;
  int want = plan->ctx->engine->ops->memory;
  RSI_TRY(settle_fork(plan));
  if (rsi_exec_in_flight(plan))
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "an execution of this plan is in flight: its buffers "
                    "stay bound until it ended (rs_plan_wait, or "
                    "rs_plan_test saying done); nothing was changed");
  if (memory != RSI_MEMORY_HOST && memory != RSI_MEMORY_CUDA)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "memory kind %d is neither RS_MEMORY_HOST nor "
                    "RS_MEMORY_CUDA",
                    memory);
  if (memory == RSI_MEMORY_CUDA && device < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "CUDA device %d: a device number is >= 0", device);
  if (memory != want)
    return RSI_FAIL(err, RS_ERR_WRONG_MEMORY,
                    "%s memory cannot be bound to a plan of this context, "
                    "which moves %s memory (transport %s)",
                    memory_name(memory), memory_name(want),
                    plan->ctx->transport->ops->name);
  if (side != RS_SIDE_SRC && side != RS_SIDE_DST)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "side %d is neither RS_SIDE_SRC nor RS_SIDE_DST",
                    (int)side);
  if (rank < 0 || rank >= plan->world_size)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK, "rank %d outside [0, %d)", rank,
                    plan->world_size);
  if (!rsi_context_drives(plan->ctx, rank))
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                    "rank %d is not driven by this process (rank %d)", rank,
                    plan->ctx->rank);
  if (plan->part >= 0 && rank != plan->part)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_RANK,
                    "this plan holds only rank %d's part "
                    "(RS_PARAM_PLAN_PART), not rank %d's buffers",
                    plan->part, rank);
  rsi_side *s = &plan->side[side];
  int64_t nbuf = s->rank_first[rank + 1] - s->rank_first[rank];
  struct rsi_binding *b =
      buffer >= 0 && buffer < nbuf ? &s->buffers[s->rank_first[rank] + buffer]
                                   : NULL;
  if (!b || b->need == 0)
    return RSI_FAIL(err, RS_ERR_UNKNOWN_BUFFER,
                    "no %s shard of rank %d uses buffer %d", side_name(side),
                    rank, buffer);
  if ((uint64_t)bytes < (uint64_t)b->need) {
    /* The caller meant to replace the binding: keeping the old pointer,
     * which may be freed by now, would let a later execution write it. */
    b->ptr = NULL;
    b->bytes = 0;
    return RSI_FAIL(err, RS_ERR_BUFFER_TOO_SMALL,
                    "%s buffer %d of rank %d: %zu bytes bound, its shards "
                    "reach byte %lld; the buffer is now unbound",
                    side_name(side), buffer, rank, bytes, (long long)b->need);
  }
  b->ptr = ptr;
  b->bytes = bytes;
  b->device = memory == RSI_MEMORY_CUDA ? device : -1;
  return RS_OK;
}

/* ---- checks before any byte moves ---------------------------------------- */

typedef struct bound_range {
  uintptr_t lo, hi;
  int side, rank, buffer;
} bound_range;

static int cmp_range(const void *x, const void *y) {
  const bound_range *a = x, *b = y;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return (a->hi > b->hi) - (a->hi < b->hi);
}

/* The ranks whose buffers this process binds: [*lo, *hi). */
static void driven_ranks(const rs_plan *plan, int *lo, int *hi) {
  int me = plan->ctx->rank;
  *lo = me == RS_ALL_RANKS ? 0 : me;
  *hi = me == RS_ALL_RANKS ? plan->world_size : me + 1;
}

/* The rank owning buffer slot b of a side (rank_first is ascending). */
static int slot_rank(const rsi_side *side, int lo, int hi, int64_t b) {
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (side->rank_first[mid] <= b)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Visits the buffer slots of the driven ranks: their count is bounded by
 * the shards, not by the world size. */
static rs_status check_bindings(const rs_plan *plan, rsi_err *err) {
  int lo, hi;
  driven_ranks(plan, &lo, &hi);
  int64_t n = 0;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    for (int64_t b = side->rank_first[lo]; b < side->rank_first[hi]; b++) {
      if (!side->buffers[b].need) continue;
      if (!side->buffers[b].ptr && !side->buffers[b].used) continue;
      if (!side->buffers[b].ptr) {
        int r = slot_rank(side, lo, hi, b);
        return RSI_FAIL(err, RS_ERR_UNKNOWN_BUFFER,
                        "%s buffer %lld of rank %d is not bound (its "
                        "shards need %lld bytes); call rs_plan_bind",
                        side_name(s), (long long)(b - side->rank_first[r]), r,
                        (long long)side->buffers[b].need);
      }
      n++;
    }
  }
  /* No destination byte may be any other bound byte. */
  bound_range *ranges = malloc((size_t)(n ? n : 1) * sizeof *ranges);
  if (!ranges) return RSI_NOMEM(err);
  n = 0;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    for (int64_t b = side->rank_first[lo]; b < side->rank_first[hi]; b++) {
      const struct rsi_binding *bd = &side->buffers[b];
      if (!bd->need || !bd->ptr) continue; /* unbound: the plan needs none */
      int r = slot_rank(side, lo, hi, b);
      uintptr_t at = (uintptr_t)bd->ptr;
      ranges[n++] = (bound_range){at, at + (uintptr_t)bd->need, s, r,
                                  (int)(b - side->rank_first[r])};
    }
  }
  qsort(ranges, (size_t)n, sizeof *ranges, cmp_range);
  rs_status st = RS_OK;
  const bound_range *far_any = NULL, *far_dst = NULL;
  for (int64_t i = 0; i < n && st == RS_OK; i++) {
    const bound_range *c = &ranges[i];
    const bound_range *hit = NULL;
    if (c->side == RS_SIDE_DST && far_any && c->lo < far_any->hi) hit = far_any;
    if (c->side == RS_SIDE_SRC && far_dst && c->lo < far_dst->hi) hit = far_dst;
    if (hit)
      st = RSI_FAIL(err, RS_ERR_OVERLAP,
                    "%s buffer %d of rank %d overlaps %s buffer %d of rank "
                    "%d: a reshard cannot write into memory it reads or "
                    "writes elsewhere",
                    side_name(hit->side), hit->buffer, hit->rank,
                    side_name(c->side), c->buffer, c->rank);
    if (!far_any || c->hi > far_any->hi) far_any = c;
    if (c->side == RS_SIDE_DST && (!far_dst || c->hi > far_dst->hi))
      far_dst = c;
  }
  free(ranges);
  return st;
}

/* ---- the life of an execution --------------------------------------------- */

static bool between_processes(const rs_plan *plan) {
  return plan->ctx->rank != RS_ALL_RANKS;
}

/* A transport that orders its work on device queues: an execution is
 * enqueued by rs_plan_execute_async and done when its queue gets there. */
static bool queued(const rs_plan *plan) {
  return plan->ctx->transport->ops->join != NULL;
}

int64_t rsi_exec_staging(const rs_plan *plan, int rank) {
  return plan->exec ? rsi_driver_staging(plan->exec->driver, rank) : -1;
}

/* The first call on a plan in a child of fork(): an in-process context
 * serves the child from now on, and the execution that was in flight in
 * the parent (on a thread the child does not have) is over here, reported
 * once by the next test or wait. A context between processes belongs to
 * the parent: every call refuses (rsi_context_usable). */
static rs_status settle_fork(rs_plan *plan) {
  rs_context *ctx = plan->ctx;
  if (ctx->pid == getpid()) return RS_OK;
  if (between_processes(plan)) return rsi_context_usable(ctx);
  ctx->pid = getpid();
  /* The parent's progress thread is not here: what it ended before the
   * fork is collected, what it ran is orphaned below. */
  if (ctx->progress && rsi_progress_forked(ctx->progress))
    ctx->progress = NULL; /* the parent's record, left alone */
  rs_plan *h = ctx->handed;
  if (h && h->exec->phase == PHASE_IDLE) collect(h);
  if (h) h->exec->err = NULL;
  ctx->handed = NULL;
  rs_plan *r = ctx->running;
  if (r && r->exec) {
    r->exec->phase = PHASE_IDLE;
    r->exec->undrained = false;
    r->exec->orphaned = true;
    ctx->transport->ops->abandon(ctx->transport); /* its posted messages */
  }
  ctx->running = NULL;
  return RS_OK;
}

/* A test or wait on an execution that the fork left behind. */
static rs_status orphan_ended(rs_plan *plan) {
  plan->exec->orphaned = false;
  return RSI_FAIL(plan->ctx->err, RS_ERR_TRANSPORT,
                  "this plan's execution was in flight in the parent when "
                  "this process forked, and does not go on in this child: "
                  "its destination buffers here may hold part of it; "
                  "execute the plan again");
}

bool rsi_exec_in_flight(const rs_plan *plan) {
  if (plan->ctx->handed == plan) return true; /* the thread's: not read */
  const struct rsi_exec *x = plan->exec;
  return x && (x->phase != PHASE_IDLE || x->undrained);
}

static rs_status wait_execution(rs_plan *plan);

void rsi_exec_release(rs_plan *plan) {
  struct rsi_exec *x = plan->exec;
  if (!x) return;
  rs_context *ctx = plan->ctx;
  settle_fork(plan);
  /* Another plan's execution on the progress thread uses the context's
   * engine and failure record: it ends first (its caller collects it). */
  if (ctx->handed && ctx->handed != plan) rsi_progress_wait(ctx->progress);
  if (rsi_exec_in_flight(plan) && !rsi_context_inherited(ctx)) {
    /* Destroyed in flight: the execution is waited for, within the
     * timeout as every wait is; if it fails, the context is done (its
     * peers were told) and the caller's next call on it says why. */
    rsi_sigpipe_hold h;
    rsi_sigpipe_hold_begin(&h);
    wait_execution(plan);
    rsi_sigpipe_hold_end(&h);
    if (ctx->running == plan) { /* never left behind for a freed plan */
      RSI_FAIL(ctx->err, RS_ERR_INTERNAL,
               "a plan was destroyed while its execution could not end");
      rsi_context_fail(ctx);
      ctx->running = NULL;
    }
  }
  rsi_driver_destroy(x->driver, ctx);
  free(x->peers);
  rsi_transport *tp = ctx->transport;
  if ((ctx->failed || rsi_context_inherited(ctx)) && tp && tp->ops->adopt) {
    /* Abandoned records may still be read (x's own words) or written
     * (what it receives into): the transport keeps their memory. */
    tp->ops->adopt(tp, x->greeting.in);
    x->greeting.in = NULL;
    rsi_exchange_free(&x->greeting);
    tp->ops->adopt(tp, x);
  } else {
    rsi_exchange_free(&x->greeting);
    free(x);
  }
  plan->exec = NULL;
}

/* The execution ends: how, and the context is free for the next. */
static rs_status end_execution(rs_plan *plan, rs_status st) {
  struct rsi_exec *x = plan->exec;
  if (st != RS_OK && between_processes(plan))
    rsi_guard_fail(plan, st);
  else if (st != RS_OK && st != RS_ERR_NO_MEMORY) { /* partly written */
    if (queued(plan)) plan->ctx->transport->ops->abandon(plan->ctx->transport);
    rsi_context_fail_why(plan->ctx, rsi_exec_err(plan));
  }
  x->phase = PHASE_IDLE;
  x->last = st;
  x->undrained = st == RS_OK && queued(plan);
  plan->ctx->running = NULL;
  if (x->started_ns)
    RSI_LOG(RS_LOG_INFO, RS_LOG_EXEC, plan->ctx->rank,
            "plan %p: execution ended %s in %.3f ms%s", (void *)plan,
            rsi_status_name(st), (double)(rsi_now_ns() - x->started_ns) / 1e6,
            x->undrained ? " (its queue still runs)" : "");
  return st;
}

/* Until the queue of the last execution reached its end (block), or one
 * look (!block; RS_OK while it has not). A queue that does not get there
 * within the timeout, or an abort, abandons the transfer: the transport
 * stops its device work, and the context is done. */
static rs_status drain(rs_plan *plan, bool block) {
  struct rsi_exec *x = plan->exec;
  rs_context *ctx = plan->ctx;
  rsi_engine *eng = ctx->engine;
  int64_t since = rsi_now_ms();
  while (x->undrained) {
    bool done = false;
    rs_status st = eng->ops->query(eng, x->queue, &done, ctx->err);
    if (st == RS_OK && done) {
      x->undrained = false;
      break;
    }
    if (st == RS_OK &&
        atomic_load_explicit(&ctx->aborted, memory_order_acquire))
      st = RSI_FAIL(ctx->err, RS_ERR_TRANSPORT,
                    "the context was aborted (rs_context_abort) before the "
                    "queue reached the end of the execution; destroy it");
    if (st == RS_OK && rsi_now_ms() - since >= ctx->timeout_ms)
      st = RSI_FAIL(ctx->err, RS_ERR_TIMEOUT,
                    "the queue did not reach the end of the execution "
                    "within %lld ms (a peer may be dead or silent); the "
                    "transfer is abandoned",
                    (long long)ctx->timeout_ms);
    if (st != RS_OK) {
      x->undrained = false;
      x->last = st;
      ctx->transport->ops->abandon(ctx->transport);
      rsi_context_fail(ctx);
      return st;
    }
    if (!block) return RS_OK;
    rsi_pause();
  }
  return x->last;
}

static rs_status step_once(rs_plan *plan, bool *done, bool *progress);

/* A queued execution runs on the calling thread until all of it is
 * enqueued (between processes: until the done records are posted, which
 * the transport orders after the data). */
static rs_status enqueue(rs_plan *plan) {
  for (;;) {
    bool done, progress;
    rs_status st = step_once(plan, &done, &progress);
    if (done || plan->exec->phase == PHASE_DONE) return st;
    if (!progress) rsi_pause();
  }
}

/* What this rank checks and builds before it takes part: the queue, the
 * bindings, and at the first execution the driver and its staging. */
/* Whether rs_plan_execute_async hands the execution to the progress
 * thread (a queued transport's work is asynchronous already). */
static bool hands_off(const rs_plan *plan) {
  return plan->ctx->progress_thread && !queued(plan);
}

static rs_status ready_locally(rs_plan *plan, void *queue, bool async,
                               rsi_err *err) {
  rs_context *ctx = plan->ctx;
  if (queue && ctx->engine->ops->memory == RSI_MEMORY_HOST)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "this context moves host memory and takes no queue: "
                    "pass NULL");
  if (plan->part >= 0 && ctx->rank == RS_ALL_RANKS)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "this plan holds only rank %d's part "
                    "(RS_PARAM_PLAN_PART) and this context drives every "
                    "rank: a part is for inspection here",
                    plan->part);
  if (plan->domain_part)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "this plan holds only what lands in domain %d, "
                    "scheduled on its own: it is for inspection",
                    plan->part_domain);
  RSI_TRY(rsi_plan_require_boxes(plan, err));
  RSI_TRY(check_bindings(plan, err));
  if (!plan->exec->driver)
    RSI_TRY(rsi_driver_create(plan, &plan->exec->driver, err));
  if (async && hands_off(plan) && !ctx->progress)
    RSI_TRY(rsi_progress_create(&ctx->progress, err));
  return RS_OK;
}

static rs_status start_execution(rs_plan *plan, void *queue, bool async) {
  rs_context *ctx = plan->ctx;
  rsi_err *err = ctx->err;
  /* ctx->running is the thread's while an execution is handed to it */
  rs_plan *busy = ctx->handed ? ctx->handed : ctx->running;
  if (busy)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "an execution of %s plan is still in flight on this "
                    "context: wait for it (rs_plan_wait) first",
                    busy == plan ? "this" : "another");
  RSI_TRY(rsi_context_usable(ctx));
  /* Without memory for its own state a rank cannot tell its peers it
   * refused: they time out. */
  if (!plan->exec && !(plan->exec = calloc(1, sizeof *plan->exec)))
    return RSI_NOMEM(err);
  rs_status st = ready_locally(plan, queue, async, err);
  /* Between processes the other ranks wait for this one: a refusal is
   * told to them, not just returned. */
  if (st != RS_OK)
    return between_processes(plan) ? rsi_guard_refuse(plan, err) : st;
  struct rsi_exec *x = plan->exec;
  x->err = NULL;
  if (between_processes(plan)) RSI_TRY(rsi_guard_prepare(plan, err));
  if (ctx->transport->ops->set_integrity)
    ctx->transport->ops->set_integrity(ctx->transport, plan->integrity);
  ctx->running = plan;
  x->started_ns = rsi_log_on(RS_LOG_INFO, RS_LOG_EXEC) ? rsi_now_ns() : 0;
  x->queue = queue;
  x->undrained = false;
  rsi_driver_begin(x->driver);
  x->phase = PHASE_STEPS;
  if (between_processes(plan)) {
    x->phase = PHASE_HELLO;
    st = rsi_guard_greet_start(plan, &x->greeting, false, err);
  }
  if (st == RS_OK && queued(plan))
    st = ctx->transport->ops->join(ctx->transport, queue, false, err);
  if (st != RS_OK) return end_execution(plan, st);
  return queued(plan) ? enqueue(plan) : RS_OK;
}

/* Advance the execution in flight without waiting: *done once it ended
 * (its status returned), *progress when anything moved. */
static rs_status step_once(rs_plan *plan, bool *done, bool *progress) {
  struct rsi_exec *x = plan->exec;
  rsi_err *err = rsi_exec_err(plan);
  *done = false;
  *progress = false;
  rs_status st = RS_OK;
  bool finished = false;
  switch (x->phase) {
    case PHASE_HELLO:
      st = rsi_guard_greet_check(plan, &x->greeting, &finished, err);
      if (st == RS_OK && finished) x->phase = PHASE_STEPS;
      *progress = finished;
      break;
    case PHASE_STEPS:
      st = rsi_driver_pass(plan, x->driver, x->queue, &finished, progress,
                           err);
      if (st != RS_OK || !finished) break;
      *progress = true;
      if (queued(plan))
        st = plan->ctx->transport->ops->join(plan->ctx->transport, x->queue,
                                             true, err);
      if (st != RS_OK) break;
      if (!between_processes(plan)) {
        *done = true;
        return end_execution(plan, RS_OK);
      }
      x->phase = PHASE_DONE;
      st = rsi_guard_greet_start(plan, &x->greeting, true, err);
      break;
    case PHASE_DONE:
      st = rsi_guard_greet_check(plan, &x->greeting, &finished, err);
      if (st == RS_OK && finished) st = rsi_guard_last_look(plan, err);
      if (st == RS_OK && finished) {
        *done = true;
        return end_execution(plan, RS_OK);
      }
      break;
    default:
      *done = true;
      return x->last;
  }
  if (st == RS_OK && !*progress && !between_processes(plan) &&
      !queued(plan) && x->phase == PHASE_STEPS)
    st = RSI_FAIL(err, RS_ERR_INTERNAL,
                  "an in-process execution stopped making progress");
  if (st != RS_OK) {
    *done = true;
    return end_execution(plan, st);
  }
  return RS_OK;
}

/* Until the execution in flight ended, advancing it on this thread; its
 * status (queued work may still be on its queue: drain). */
static rs_status run_steps(rs_plan *plan) {
  while (plan->exec->phase != PHASE_IDLE) {
    bool finished, progress;
    rs_status st = step_once(plan, &finished, &progress);
    if (finished && st != RS_OK) return st;
    if (!finished && !progress) rsi_pause();
  }
  return RS_OK;
}

/* The progress thread's job: the handed execution, to its end. Its
 * status is x->last; its failure is recorded in x->thread_err. */
static void run_handed(void *arg) { run_steps(arg); }

static void hand_off(rs_plan *plan) {
  struct rsi_exec *x = plan->exec;
  x->thread_err.status = RS_OK;
  x->thread_err.msg[0] = '\0';
  x->err = &x->thread_err;
  plan->ctx->handed = plan;
  rsi_progress_post(plan->ctx->progress, run_handed, plan);
}

/* On the caller's thread, once the progress thread ended the handed
 * execution: the plan is the caller's again, and a failure reaches the
 * context's record as if the caller had driven the execution. */
static rs_status collect(rs_plan *plan) {
  struct rsi_exec *x = plan->exec;
  plan->ctx->handed = NULL;
  x->err = NULL;
  if (x->last != RS_OK) *plan->ctx->err = x->thread_err;
  return x->last;
}

static rs_status test_execution(rs_plan *plan, int *done) {
  *done = 1;
  if (!plan->exec) return RS_OK;
  if (plan->ctx->handed == plan) {
    *done = rsi_progress_ended(plan->ctx->progress);
    return *done ? collect(plan) : RS_OK;
  }
  if (plan->exec->orphaned) return orphan_ended(plan);
  if (plan->exec->phase == PHASE_IDLE) {
    rs_status st = drain(plan, false);
    *done = !plan->exec->undrained;
    return st;
  }
  bool finished, progress;
  rs_status st = step_once(plan, &finished, &progress);
  *done = finished;
  return st;
}

static rs_status wait_execution(rs_plan *plan) {
  if (!plan->exec) return RS_OK;
  if (plan->ctx->handed == plan) {
    rsi_progress_wait(plan->ctx->progress);
    return collect(plan);
  }
  if (plan->exec->orphaned) return orphan_ended(plan);
  RSI_TRY(run_steps(plan));
  return drain(plan, true);
}

/* The entry points hold SIGPIPE while they may write to peers
 * (sigpipe.h): each is one of these calls, made inside one hold. */
typedef enum { CALL_START, CALL_TEST, CALL_WAIT, CALL_RUN } exec_call;

static rs_status held(exec_call call, rs_plan *plan, void *queue, int *done) {
  rs_status st = settle_fork(plan);
  if (st != RS_OK) return st;
  rsi_sigpipe_hold h;
  rsi_sigpipe_hold_begin(&h);
  switch (call) {
    case CALL_START:
      st = start_execution(plan, queue, true);
      if (st == RS_OK && hands_off(plan) && plan->exec->phase != PHASE_IDLE)
        hand_off(plan);
      break;
    case CALL_TEST: st = test_execution(plan, done); break;
    case CALL_WAIT: st = wait_execution(plan); break;
    case CALL_RUN:
      st = start_execution(plan, NULL, false);
      if (st == RS_OK) st = wait_execution(plan);
      break;
  }
  rsi_sigpipe_hold_end(&h);
  return st;
}

rs_status rsi_plan_execute_async(rs_plan *plan, void *queue) {
  return held(CALL_START, plan, queue, NULL);
}

rs_status rsi_plan_test(rs_plan *plan, int *done) {
  return held(CALL_TEST, plan, NULL, done);
}

rs_status rsi_plan_wait(rs_plan *plan) {
  return held(CALL_WAIT, plan, NULL, NULL);
}

rs_status rsi_plan_execute(rs_plan *plan) {
  return held(CALL_RUN, plan, NULL, NULL);
}

void rsi_context_abort(rs_context *ctx) {
  atomic_store_explicit(&ctx->aborted, true, memory_order_release);
}
