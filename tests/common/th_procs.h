/* SPDX-License-Identifier: Apache-2.0 */
/* A process harness without MPI: th_procs_run forks N rank processes, sets
 * each one's environment, runs a function in each, and gives them a
 * barrier, a broadcast and an allreduce through shared memory, each with a
 * deadline. The parent watches the ranks: it records each one's end (exit
 * code, signal, or killed at the wall limit) and its wall time, kills a
 * rank on a cue the test chose, and marks a rank dead in shared memory the
 * moment it is reaped, so that ranks waiting in a collective for it return
 * TH_ERR_PEER_DIED at once instead of at their deadline.
 *
 * Why processes and not threads or MPI: the GPU tests between ranks run on
 * machines with one GPU and no MPI, and NCCL wants one process per rank.
 * It also refuses two ranks on one GPU ("Duplicate GPU detected") when
 * their host hash and bus id are equal; the host hash is the hash of
 * NCCL_HOSTID when that is set (else of the host name and boot id). So each
 * rank gets NCCL_HOSTID of its own, and NCCL believes the ranks are on
 * different hosts: they talk over the socket transport on the loopback
 * interface, with the intra-host transports (P2P, SHM, NVLS, MNNVL) and
 * InfiniBand off. The variables are listed below.
 *
 * The collectives poll atomics in shared memory (no locks: a rank killed
 * at any point leaves nothing held) and sleep briefly between polls. Each
 * rank writes only its own slots; a collective's data lives in one of two
 * buffers by the parity of its sequence number, which is safe because no
 * rank can start collective k+2 before every rank has arrived at k+1, that
 * is, finished reading k.
 *
 * Rules for the function each rank runs (th_rank_main):
 *   - It runs in a child forked from the caller, before any CUDA or NCCL
 *     call of its own: the caller must not have initialized CUDA (a CUDA
 *     context does not survive fork).
 *   - Return its exit status (0..255; 0 is success). Do not call exit():
 *     that would run the parent's atexit handlers (Criterion's, say) in the
 *     child. The harness flushes stdio and calls _exit with the value. (A
 *     rank that never got to run exits 126 when setenv failed, 127 when
 *     its parent was already gone.)
 *   - No Criterion assertions inside it: report failures through the return
 *     value (and stderr); the caller asserts on the report.
 *   - After a collective fails, treat the group as broken and return: the
 *     ranks no longer agree on which collective comes next.
 *
 * Under clang 14's AddressSanitizer, whose allocator has no fork handlers,
 * a fork while another thread of the caller is inside malloc can leave the
 * child stuck in its first malloc (see tests/unit/copy/test_copy_pool_fork.c);
 * the wall limit then ends it. In a
 * Criterion test, call th_procs_run before any assertion, while Criterion's
 * own thread is idle.
 *
 * This header is plain C99 and POSIX, usable from C++; th_procs.c needs
 * C11 (<stdatomic.h>). On Linux a rank is also killed when the thread that
 * called th_procs_run ends (PR_SET_PDEATHSIG), so no rank outlives a
 * killed test. Prefix th_procs_ for the run, th_ for what a rank calls. */
#ifndef RESHARD_TESTS_TH_PROCS_H
#define RESHARD_TESTS_TH_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most ranks one run may have. */
#define TH_PROCS_MAX_RANKS 64
/* The largest th_bcast payload: 64 KiB (an NCCL unique id is 128 bytes). */
#define TH_BCAST_MAX_BYTES (64 * 1024)
/* The most values one th_allreduce_i64 may reduce. */
#define TH_REDUCE_MAX_VALUES 512
/* The longest cue name, not counting its terminating zero. */
#define TH_CUE_MAX_CHARS 63

/* The environment each rank gets after its fork, unless skip_nccl_env:
 *   NCCL_HOSTID=th-<parent pid>-<rank>  (the parent is th_procs_run's caller)
 *   NCCL_SOCKET_IFNAME=lo  NCCL_NET=Socket  NCCL_IB_DISABLE=1
 *   NCCL_P2P_DISABLE=1  NCCL_SHM_DISABLE=1  NCCL_NVLS_ENABLE=0
 *   NCCL_MNNVL_ENABLE=0
 * Each is set with overwrite: a value the caller had (an NCCL_SOCKET_IFNAME
 * naming a real interface, say) would defeat the point. A rank that wants
 * another value sets it itself before its first NCCL call. */

/* Return codes. 0 is success; each failure has its own negative code. */
enum {
  TH_OK = 0,
  TH_ERR_TIMEOUT = -1,    /* the collective's deadline passed */
  TH_ERR_PEER_DIED = -2,  /* a rank the collective waits for has ended */
  TH_ERR_ABORTED = -3,    /* another rank's collective timed out */
  TH_ERR_TOO_BIG = -4,    /* payload or count above the fixed capacity */
  TH_ERR_INVALID = -5,    /* a bad argument */
  TH_ERR_MISMATCH = -6,   /* ranks called different collectives */
  TH_ERR_SYSTEM = -7,     /* mmap or fork failed (errno says why) */
  TH_ERR_RANK_FAILED = -8 /* th_procs_run: some rank did not exit 0 */
};

/* One rank's view of the run, handed to its th_rank_main. */
typedef struct th_rank {
  int rank;   /* 0 .. nranks-1 */
  int nranks; /* how many ranks the run has */
  /* After TH_ERR_PEER_DIED: the lowest rank found dead. After
   * TH_ERR_ABORTED: the rank whose timeout aborted the group. Else -1. */
  int failed_peer;
  /* The harness's own state; do not touch. */
  struct th_procs_shared *shared_;
  uint64_t seq_; /* collectives this rank has taken part in */
  int cue_hits_; /* times this rank has hit the kill cue */
} th_rank;

/* What each rank runs: returns its exit status (see the rules above). */
typedef int (*th_rank_main)(th_rank *me, void *arg);

/* How a rank ended. */
typedef enum th_rank_end {
  TH_RANK_NOT_STARTED = 0, /* fork failed before this rank */
  TH_RANK_EXITED,          /* returned: exit_code */
  TH_RANK_SIGNALED,        /* died of a signal: signal (SIGKILL on a cue) */
  TH_RANK_TIMED_OUT,       /* still running at the wall limit: killed */
  TH_RANK_LOST             /* waitpid failed: status unknown */
} th_rank_end;

typedef struct th_rank_outcome {
  th_rank_end end;
  int exit_code;      /* when TH_RANK_EXITED, else 0 */
  int signal;         /* when TH_RANK_SIGNALED or TH_RANK_TIMED_OUT, else 0 */
  bool killed_on_cue; /* the parent killed it on the kill cue */
  double wall_s;      /* from its fork until the parent reaped it */
} th_rank_outcome;

/* What th_procs_run saw; filled in whole by every call that got as far as
 * validating its arguments. */
typedef struct th_procs_report {
  int nranks;
  double wall_s; /* the whole run */
  th_rank_outcome rank[TH_PROCS_MAX_RANKS];
} th_procs_report;

/* A run's settings. Zero-initialize, then set nranks and wall_limit_s: the
 * zero values mean no kill cue and the NCCL environment on. */
typedef struct th_procs_options {
  int nranks;          /* 1 .. TH_PROCS_MAX_RANKS */
  double wall_limit_s; /* > 0: ranks still running then are killed */
  /* Kill on cue: when rank kill_rank calls th_cue with the name kill_cue
   * for the kill_hit-th time (0 means the first), the parent kills it with
   * SIGKILL, kill_delay_s after the cue. With a delay of 0 th_cue does not
   * return, so the rank dies exactly there; with a delay it returns and the
   * rank dies wherever it is by then (mid-transfer, say). kill_cue NULL:
   * no kill. The name is copied; at most TH_CUE_MAX_CHARS characters. */
  const char *kill_cue;
  int kill_rank;
  int kill_hit;
  double kill_delay_s;
  bool skip_nccl_env; /* true: leave the environment as inherited */
} th_procs_options;

/* Runs fn(me, arg) in opts->nranks forked processes and waits for all of
 * them, or until opts->wall_limit_s, when it kills the rest with SIGKILL.
 * arg is shared by address: each rank sees its own copy-on-write copy of
 * the caller's memory (th_shared_alloc gives memory whose writes all see).
 * The caller's stdio is flushed before the fork. The parent allocates
 * nothing on the heap; the shared mapping is unmapped before return. out (may
 * be NULL) receives each rank's end and wall time. Returns TH_OK when every
 * rank exited 0, TH_ERR_RANK_FAILED when one did not, TH_ERR_INVALID for bad
 * options (nothing forked, out has nranks 0), TH_ERR_SYSTEM when mmap or a fork
 * failed (ranks already forked are killed and reported; errno is that of the
 * failed call). */
int th_procs_run_opts(const th_procs_options *opts, th_rank_main fn, void *arg,
                      th_procs_report *out);

/* th_procs_run_opts with nranks and wall_limit_s set, the rest zero. */
int th_procs_run(int nranks, double wall_limit_s, th_rank_main fn, void *arg,
                 th_procs_report *out);

/* Zeroed memory that the caller and its ranks share (an anonymous
 * MAP_SHARED mapping): allocate before th_procs_run, pass it as arg, read
 * what the ranks wrote after. Returns NULL with errno set when mmap fails.
 * The caller owns it: th_shared_free with the same bytes. */
void *th_shared_alloc(size_t bytes);

/* Unmaps memory from th_shared_alloc (p may be NULL). */
void th_shared_free(void *p, size_t bytes);

/* Waits until every rank has called th_barrier, or timeout_s (> 0) has
 * passed. Returns TH_OK; TH_ERR_TIMEOUT (and aborts the group: ranks
 * waiting in this or a later collective get TH_ERR_ABORTED);
 * TH_ERR_PEER_DIED when a rank that has not arrived has ended (me's
 * failed_peer names it); TH_ERR_ABORTED; TH_ERR_MISMATCH when another rank
 * called a different collective; TH_ERR_INVALID for a NULL me or a
 * timeout that is not positive. The same codes apply to th_bcast and
 * th_allreduce_i64. */
int th_barrier(th_rank *me, double timeout_s);

/* Copies bytes bytes from buf on rank root into buf on every rank. Every
 * rank must pass the same bytes and root (else TH_ERR_MISMATCH on all).
 * bytes may be 0. Returns as th_barrier, plus TH_ERR_TOO_BIG for bytes over
 * TH_BCAST_MAX_BYTES and TH_ERR_INVALID for a root out of range or a NULL
 * buf with bytes > 0; for those the rank does not take part, so ranks
 * called with the same bad arguments all fail alike and stay in step. buf
 * stays the caller's. */
int th_bcast(th_rank *me, void *buf, size_t bytes, int root, double timeout_s);

/* How th_allreduce_i64 combines the ranks' values. */
typedef enum th_reduce_op { TH_SUM = 0, TH_MIN, TH_MAX } th_reduce_op;

/* Combines values[0..n) of every rank element-wise with op and writes the
 * result into values on every rank (all get the same values). TH_SUM wraps
 * around on overflow (two's complement). To gather one value per rank, let
 * each rank fill values[0..nranks) with zeros but its own at [rank] and
 * sum. Every rank must pass the same n and op (else TH_ERR_MISMATCH).
 * Returns as th_barrier, plus TH_ERR_TOO_BIG for n above
 * TH_REDUCE_MAX_VALUES and TH_ERR_INVALID for n < 0, a bad op or NULL
 * values with n > 0 (the rank does not take part, as in th_bcast). */
int th_allreduce_i64(th_rank *me, int64_t *values, int n, th_reduce_op op,
                     double timeout_s);

/* Marks a point in the rank's code that a run may kill it at (see
 * th_procs_options.kill_cue). When name is not the run's kill cue for this
 * rank, or not at this hit, returns TH_OK at once. On the cue: with no kill
 * delay, does not return (the parent kills the rank); with a delay,
 * returns TH_OK and the rank is killed kill_delay_s later. TH_ERR_INVALID
 * for a NULL me or name. */
int th_cue(th_rank *me, const char *name);

/* The name of a return code above ("TH_ERR_TIMEOUT"), or "unknown". A
 * static string. */
const char *th_strerror(int code);

/* Writes one line per rank of report into buf (size bytes, always
 * terminated when size > 0; truncated if short), such as
 * "rank 2: signal 9 (killed on cue) after 0.051 s", for assertion
 * messages. Returns buf. */
const char *th_procs_describe(const th_procs_report *report, char *buf,
                              size_t size);

#ifdef __cplusplus
}
#endif

#endif /* RESHARD_TESTS_TH_PROCS_H */
