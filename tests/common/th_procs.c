/* SPDX-License-Identifier: Apache-2.0 */
/* The process harness of th_procs.h: a parent that forks and watches the
 * ranks, and lock-free collectives over one anonymous shared mapping.
 * (C11 for <stdatomic.h>; the header is C99.) */
#include "th_procs.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Exit statuses of a rank that could not start rank_main. */
#define EXIT_PARENT_GONE 127
#define EXIT_NO_ENV 126

/* How often the parent looks at its ranks, and the longest a waiting rank
 * sleeps between polls. */
#define PARENT_POLL_NS 1000000L
#define RANK_MAX_SLEEP_NS 1000000L
#define RANK_FIRST_SLEEP_NS 20000L
#define RANK_YIELDS 64

enum call_kind { CALL_BARRIER = 1, CALL_BCAST, CALL_ALLREDUCE };

/* What a rank says it is calling, so that ranks calling different things
 * fail instead of mixing their data. */
typedef struct call_desc {
  int kind;
  int root;
  int op;
  size_t count;
} call_desc;

/* The flags of one rank, alone on a cache line: the others poll them. */
typedef struct rank_slot {
  _Alignas(64) _Atomic uint64_t arrived; /* seq of its latest collective */
  atomic_int gone;                       /* 1 once the parent reaped it */
  atomic_int cued;                       /* 1 once it hit its kill cue */
} rank_slot;

struct th_procs_shared {
  int nranks;
  char kill_cue[TH_CUE_MAX_CHARS + 1]; /* "" for none */
  int kill_rank;
  int kill_hit; /* 1 for the first */
  bool kill_delayed;
  atomic_int aborted_by; /* the rank whose collective timed out, or -1 */
  rank_slot slot[TH_PROCS_MAX_RANKS];
  /* Indexed by the parity of the collective's sequence number. */
  call_desc desc[2][TH_PROCS_MAX_RANKS];
  int64_t values[2][TH_PROCS_MAX_RANKS][TH_REDUCE_MAX_VALUES];
  unsigned char payload[2][TH_BCAST_MAX_BYTES];
};
typedef struct th_procs_shared shared_state;

/* --- time ----------------------------------------------------------------*/

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ns(long ns) {
  struct timespec t = {ns / 1000000000L, ns % 1000000000L};
  nanosleep(&t, NULL);
}

/* Positive and not absurd (NaN fails too). */
static bool valid_seconds(double s) { return s > 0 && s <= 1e9; }

/* A waiting rank yields a few times, then sleeps longer and longer. */
typedef struct backoff {
  int polls;
  long sleep_ns;
} backoff;

static void backoff_wait(backoff *b) {
  if (b->polls++ < RANK_YIELDS) {
    sched_yield();
    return;
  }
  sleep_ns(b->sleep_ns);
  if (b->sleep_ns < RANK_MAX_SLEEP_NS) b->sleep_ns *= 2;
}

/* --- collectives ---------------------------------------------------------*/

/* The lowest rank that has not arrived at collective seq, or -1. */
static int first_missing(shared_state *s, uint64_t seq) {
  for (int r = 0; r < s->nranks; r++) {
    if (atomic_load_explicit(&s->slot[r].arrived, memory_order_acquire) < seq)
      return r;
  }
  return -1;
}

/* The lowest rank that has ended without arriving at seq, or -1. Reads
 * gone before arrived: a rank that arrived and then exited is seen as
 * arrived once it is seen gone. */
static int first_dead_missing(shared_state *s, uint64_t seq) {
  for (int r = 0; r < s->nranks; r++) {
    if (atomic_load_explicit(&s->slot[r].gone, memory_order_acquire) &&
        atomic_load_explicit(&s->slot[r].arrived, memory_order_acquire) < seq)
      return r;
  }
  return -1;
}

/* Starts this rank's next collective: returns the parity of its buffers
 * and writes what the rank is calling there. */
static int begin_call(th_rank *me, call_desc call) {
  me->seq_++;
  me->failed_peer = -1;
  int parity = (int)(me->seq_ & 1);
  me->shared_->desc[parity][me->rank] = call;
  return parity;
}

/* Publishes this rank's arrival (after its data) and waits for the rest. */
static int arrive_and_wait(th_rank *me, double timeout_s) {
  shared_state *s = me->shared_;
  double deadline = now_s() + timeout_s;
  atomic_store_explicit(&s->slot[me->rank].arrived, me->seq_,
                        memory_order_release);
  backoff wait = {0, RANK_FIRST_SLEEP_NS};
  for (;;) {
    int aborter = atomic_load_explicit(&s->aborted_by, memory_order_acquire);
    if (aborter >= 0) {
      me->failed_peer = aborter;
      return TH_ERR_ABORTED;
    }
    if (first_missing(s, me->seq_) < 0) return TH_OK;
    int dead = first_dead_missing(s, me->seq_);
    if (dead >= 0) {
      me->failed_peer = dead;
      return TH_ERR_PEER_DIED;
    }
    if (now_s() >= deadline) {
      int none = -1;
      atomic_compare_exchange_strong(&s->aborted_by, &none, me->rank);
      return TH_ERR_TIMEOUT;
    }
    backoff_wait(&wait);
  }
}

/* TH_OK when every rank called what this one did. */
static int check_agreement(const shared_state *s, int parity,
                           const call_desc *mine) {
  for (int r = 0; r < s->nranks; r++) {
    const call_desc *theirs = &s->desc[parity][r];
    if (theirs->kind != mine->kind || theirs->root != mine->root ||
        theirs->op != mine->op || theirs->count != mine->count)
      return TH_ERR_MISMATCH;
  }
  return TH_OK;
}

/* Arrives, waits and checks agreement: the part every collective shares. */
static int complete_call(th_rank *me, int parity, const call_desc *call,
                         double timeout_s) {
  int rc = arrive_and_wait(me, timeout_s);
  if (rc == TH_OK) rc = check_agreement(me->shared_, parity, call);
  return rc;
}

int th_barrier(th_rank *me, double timeout_s) {
  if (!me || !valid_seconds(timeout_s)) return TH_ERR_INVALID;
  call_desc call = {CALL_BARRIER, 0, 0, 0};
  int parity = begin_call(me, call);
  return complete_call(me, parity, &call, timeout_s);
}

int th_bcast(th_rank *me, void *buf, size_t bytes, int root, double timeout_s) {
  if (!me || !valid_seconds(timeout_s) || root < 0 || root >= me->nranks ||
      (!buf && bytes > 0))
    return TH_ERR_INVALID;
  if (bytes > TH_BCAST_MAX_BYTES) return TH_ERR_TOO_BIG;
  call_desc call = {CALL_BCAST, root, 0, bytes};
  int parity = begin_call(me, call);
  unsigned char *payload = me->shared_->payload[parity];
  if (me->rank == root && bytes > 0) memcpy(payload, buf, bytes);
  int rc = complete_call(me, parity, &call, timeout_s);
  if (rc == TH_OK && me->rank != root && bytes > 0) memcpy(buf, payload, bytes);
  return rc;
}

static int64_t combine(th_reduce_op op, int64_t a, int64_t b) {
  switch (op) {
    case TH_SUM:
      return (int64_t)((uint64_t)a + (uint64_t)b); /* wraps, never UB */
    case TH_MIN:
      return b < a ? b : a;
    case TH_MAX:
      break;
  }
  return b > a ? b : a;
}

int th_allreduce_i64(th_rank *me, int64_t *values, int n, th_reduce_op op,
                     double timeout_s) {
  if (!me || !valid_seconds(timeout_s) || n < 0 || (!values && n > 0) ||
      (op != TH_SUM && op != TH_MIN && op != TH_MAX))
    return TH_ERR_INVALID;
  if (n > TH_REDUCE_MAX_VALUES) return TH_ERR_TOO_BIG;
  call_desc call = {CALL_ALLREDUCE, 0, (int)op, (size_t)n};
  int parity = begin_call(me, call);
  shared_state *s = me->shared_;
  if (n > 0)
    memcpy(s->values[parity][me->rank], values, (size_t)n * sizeof *values);
  int rc = complete_call(me, parity, &call, timeout_s);
  if (rc != TH_OK) return rc;
  for (int i = 0; i < n; i++) {
    int64_t acc = s->values[parity][0][i];
    for (int r = 1; r < s->nranks; r++)
      acc = combine(op, acc, s->values[parity][r][i]);
    values[i] = acc;
  }
  return TH_OK;
}

int th_cue(th_rank *me, const char *name) {
  if (!me || !name) return TH_ERR_INVALID;
  shared_state *s = me->shared_;
  if (s->kill_cue[0] == '\0' || me->rank != s->kill_rank ||
      strcmp(name, s->kill_cue) != 0)
    return TH_OK;
  if (++me->cue_hits_ != s->kill_hit) return TH_OK;
  atomic_store_explicit(&s->slot[me->rank].cued, 1, memory_order_release);
  if (s->kill_delayed) return TH_OK;
  for (;;) pause(); /* until the parent's SIGKILL */
}

/* --- the ranks -----------------------------------------------------------*/

static const char *const nccl_env[][2] = {
    {"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "Socket"},
    {"NCCL_IB_DISABLE", "1"},     {"NCCL_P2P_DISABLE", "1"},
    {"NCCL_SHM_DISABLE", "1"},    {"NCCL_NVLS_ENABLE", "0"},
    {"NCCL_MNNVL_ENABLE", "0"},
};

static int set_nccl_env(int rank, pid_t parent) {
  char host_id[64];
  snprintf(host_id, sizeof host_id, "th-%ld-%d", (long)parent, rank);
  if (setenv("NCCL_HOSTID", host_id, 1) != 0) return -1;
  for (size_t i = 0; i < sizeof nccl_env / sizeof nccl_env[0]; i++) {
    if (setenv(nccl_env[i][0], nccl_env[i][1], 1) != 0) return -1;
  }
  return 0;
}

/* The child's whole life: never returns. */
static void run_rank(shared_state *s, const th_procs_options *opts, int rank,
                     pid_t parent, th_rank_main fn, void *arg) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid() != parent) _exit(EXIT_PARENT_GONE);
  if (!opts->skip_nccl_env && set_nccl_env(rank, parent) != 0) {
    fprintf(stderr, "th_procs: rank %d: setenv: %s\n", rank, strerror(errno));
    _exit(EXIT_NO_ENV);
  }
  th_rank me = {rank, opts->nranks, -1, s, 0, 0};
  int status = fn(&me, arg);
  fflush(NULL);
  _exit(status & 0xff);
}

/* --- the parent ----------------------------------------------------------*/

typedef struct child {
  pid_t pid;
  bool running;
  bool kill_sent;
  double started;
  double cued_at; /* < 0 until the parent sees the cue */
} child;

static int check_options(const th_procs_options *o, th_rank_main fn) {
  if (!o || !fn || o->nranks < 1 || o->nranks > TH_PROCS_MAX_RANKS ||
      !valid_seconds(o->wall_limit_s))
    return TH_ERR_INVALID;
  if (!o->kill_cue) return TH_OK;
  if (strlen(o->kill_cue) > TH_CUE_MAX_CHARS || o->kill_cue[0] == '\0' ||
      o->kill_rank < 0 || o->kill_rank >= o->nranks || o->kill_hit < 0 ||
      !(o->kill_delay_s >= 0 && o->kill_delay_s <= 1e9))
    return TH_ERR_INVALID;
  return TH_OK;
}

static void init_shared(shared_state *s, const th_procs_options *o) {
  s->nranks = o->nranks;
  if (o->kill_cue) strcpy(s->kill_cue, o->kill_cue);
  s->kill_rank = o->kill_rank;
  s->kill_hit = o->kill_hit > 0 ? o->kill_hit : 1;
  s->kill_delayed = o->kill_delay_s > 0;
  atomic_init(&s->aborted_by, -1);
  for (int r = 0; r < TH_PROCS_MAX_RANKS; r++) {
    atomic_init(&s->slot[r].arrived, 0);
    atomic_init(&s->slot[r].gone, 0);
    atomic_init(&s->slot[r].cued, 0);
  }
}

/* Forks the ranks; returns how many started (all unless a fork failed,
 * with errno set). */
static int start_ranks(shared_state *s, const th_procs_options *o,
                       th_rank_main fn, void *arg, child *kids) {
  pid_t parent = getpid();
  for (int r = 0; r < o->nranks; r++) {
    kids[r].started = now_s();
    kids[r].cued_at = -1;
    pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) run_rank(s, o, r, parent, fn, arg);
    kids[r].pid = pid;
    kids[r].running = true;
  }
  return o->nranks;
}

/* Reaps rank r if it has ended (or waits for it unless WNOHANG), records
 * how, and tells the other ranks. True when reaped. */
static bool reap(shared_state *s, child *k, int r, int flags,
                 th_rank_outcome *out) {
  int status = 0;
  pid_t got;
  do {
    got = waitpid(k->pid, &status, flags);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return false;
  out->wall_s = now_s() - k->started;
  if (got < 0) {
    out->end = TH_RANK_LOST;
  } else if (WIFEXITED(status)) {
    out->end = TH_RANK_EXITED;
    out->exit_code = WEXITSTATUS(status);
  } else {
    out->end = TH_RANK_SIGNALED;
    out->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  k->running = false;
  atomic_store_explicit(&s->slot[r].gone, 1, memory_order_release);
  return true;
}

/* Kills rank r once its kill cue is kill_delay_s old. */
static void kill_if_cued(shared_state *s, const th_procs_options *o, child *k,
                         int r, double now, th_rank_outcome *out) {
  if (k->kill_sent ||
      !atomic_load_explicit(&s->slot[r].cued, memory_order_acquire))
    return;
  if (k->cued_at < 0) k->cued_at = now;
  if (now - k->cued_at < o->kill_delay_s) return;
  kill(k->pid, SIGKILL);
  k->kill_sent = true;
  out->killed_on_cue = true;
}

/* At the wall limit: kills every rank still running, waits for each. */
static void kill_the_rest(shared_state *s, child *kids, int n,
                          th_procs_report *rep) {
  for (int r = 0; r < n; r++) {
    if (kids[r].running) kill(kids[r].pid, SIGKILL);
  }
  for (int r = 0; r < n; r++) {
    if (!kids[r].running) continue;
    th_rank_outcome *out = &rep->rank[r];
    reap(s, &kids[r], r, 0, out);
    if (out->end == TH_RANK_SIGNALED && out->signal == SIGKILL &&
        !out->killed_on_cue)
      out->end = TH_RANK_TIMED_OUT;
  }
}

static void watch_ranks(shared_state *s, const th_procs_options *o, child *kids,
                        int n, double deadline, th_procs_report *rep) {
  int running = n;
  while (running > 0) {
    double now = now_s();
    for (int r = 0; r < n; r++) {
      if (!kids[r].running) continue;
      if (reap(s, &kids[r], r, WNOHANG, &rep->rank[r])) {
        running--;
        continue;
      }
      kill_if_cued(s, o, &kids[r], r, now, &rep->rank[r]);
    }
    if (running > 0 && now >= deadline) {
      kill_the_rest(s, kids, n, rep);
      return;
    }
    if (running > 0) sleep_ns(PARENT_POLL_NS);
  }
}

static bool all_exited_zero(const th_procs_report *rep) {
  for (int r = 0; r < rep->nranks; r++) {
    if (rep->rank[r].end != TH_RANK_EXITED || rep->rank[r].exit_code != 0)
      return false;
  }
  return true;
}

int th_procs_run_opts(const th_procs_options *opts, th_rank_main fn, void *arg,
                      th_procs_report *out) {
  th_procs_report rep;
  memset(&rep, 0, sizeof rep);
  int rc = check_options(opts, fn);
  if (rc != TH_OK) {
    if (out) *out = rep;
    return rc;
  }
  rep.nranks = opts->nranks;
  shared_state *s = th_shared_alloc(sizeof *s);
  if (!s) {
    if (out) *out = rep;
    return TH_ERR_SYSTEM;
  }
  init_shared(s, opts);
  fflush(NULL); /* else each rank would write the caller's buffered output */
  child kids[TH_PROCS_MAX_RANKS];
  memset(kids, 0, sizeof kids);
  double start = now_s();
  int started = start_ranks(s, opts, fn, arg, kids);
  int fork_errno = errno;
  if (started < opts->nranks) {
    for (int r = 0; r < started; r++) kill(kids[r].pid, SIGKILL);
  }
  watch_ranks(s, opts, kids, started, start + opts->wall_limit_s, &rep);
  rep.wall_s = now_s() - start;
  th_shared_free(s, sizeof *s);
  if (out) *out = rep;
  if (started < opts->nranks) {
    errno = fork_errno;
    return TH_ERR_SYSTEM;
  }
  return all_exited_zero(&rep) ? TH_OK : TH_ERR_RANK_FAILED;
}

int th_procs_run(int nranks, double wall_limit_s, th_rank_main fn, void *arg,
                 th_procs_report *out) {
  th_procs_options opts;
  memset(&opts, 0, sizeof opts);
  opts.nranks = nranks;
  opts.wall_limit_s = wall_limit_s;
  return th_procs_run_opts(&opts, fn, arg, out);
}

void *th_shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void th_shared_free(void *p, size_t bytes) {
  if (p) munmap(p, bytes);
}

/* --- names ---------------------------------------------------------------*/

const char *th_strerror(int code) {
  switch (code) {
    case TH_OK:
      return "TH_OK";
    case TH_ERR_TIMEOUT:
      return "TH_ERR_TIMEOUT";
    case TH_ERR_PEER_DIED:
      return "TH_ERR_PEER_DIED";
    case TH_ERR_ABORTED:
      return "TH_ERR_ABORTED";
    case TH_ERR_TOO_BIG:
      return "TH_ERR_TOO_BIG";
    case TH_ERR_INVALID:
      return "TH_ERR_INVALID";
    case TH_ERR_MISMATCH:
      return "TH_ERR_MISMATCH";
    case TH_ERR_SYSTEM:
      return "TH_ERR_SYSTEM";
    case TH_ERR_RANK_FAILED:
      return "TH_ERR_RANK_FAILED";
    default:
      return "unknown";
  }
}

static int describe_outcome(const th_rank_outcome *o, char *buf, size_t size) {
  switch (o->end) {
    case TH_RANK_EXITED:
      return snprintf(buf, size, "exit %d", o->exit_code);
    case TH_RANK_SIGNALED:
      return snprintf(buf, size, "signal %d%s", o->signal,
                      o->killed_on_cue ? " (killed on cue)" : "");
    case TH_RANK_TIMED_OUT:
      return snprintf(buf, size, "timed out (killed)");
    case TH_RANK_LOST:
      return snprintf(buf, size, "lost (waitpid failed)");
    case TH_RANK_NOT_STARTED:
      break;
  }
  return snprintf(buf, size, "not started");
}

const char *th_procs_describe(const th_procs_report *report, char *buf,
                              size_t size) {
  if (!buf || size == 0) return buf;
  buf[0] = '\0';
  if (!report) return buf;
  size_t used = 0;
  for (int r = 0; r < report->nranks && used < size; r++) {
    char what[64];
    describe_outcome(&report->rank[r], what, sizeof what);
    int n = snprintf(buf + used, size - used, "rank %d: %s after %.3f s\n", r,
                     what, report->rank[r].wall_s);
    if (n < 0) break;
    used += (size_t)n;
  }
  return buf;
}
