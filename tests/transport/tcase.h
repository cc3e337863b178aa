/* The transport conformance suite: cases written once, over an abstract
 * endpoint set, that run against every transport the build makes
 * (core/transport/transport.h says what a transport promises).
 *
 * An endpoint set is a fresh transport plus what a driver knows of it: the
 * world size, the ranks this process drives (every rank in process, one
 * between processes), whether it has a control channel and checksums, and
 * `all`, which brings every process to the same point (NULL when one
 * process drives every rank: then one thread takes the ranks in turn, and
 * whatever a case did for each rank before a tc_sync is done before any
 * rank goes on). A case describes the messages of the whole world; the
 * helpers post, test and check only the ends this process drives, so the
 * same code serves both drivers:
 *   test_transport_local.c  in process (Criterion), the `local` transport;
 *   transport_procs.c       between processes (plain C + MPI, under
 *                           mpirun), a module loaded by name: `mpi` now,
 *                           a GPU transport (NCCL) by a line in its table.
 *
 * A case never returns early and never branches on what it found: a
 * failed check is recorded (the first one wins) and the case goes on, and
 * every wait gives up after the driver's wait_ms, so every process passes
 * the same tc_sync calls whatever happens. A case joins the suite by a
 * line in TC_CASES and its function tc_case_<name>.
 *
 * Payloads live in host memory (tc_alloc, tc_post_*, tc_check_arrived):
 * a transport whose data channel takes device memory only (NCCL) needs
 * those three to allocate through its copy engine (core/engine.h) and to
 * stage payloads through the host; nothing else changes. */
#ifndef RESHARD_TESTS_TRANSPORT_TCASE_H
#define RESHARD_TESTS_TRANSPORT_TCASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* ---- what a driver gives ------------------------------------------------ */

typedef struct tc_driver {
  const char *transport; /* the name its ops carry */
  int world;
  const int *ranks; /* the ranks this process drives, ascending */
  int nranks;
  bool has_control;   /* false: the transport must have control == NULL */
  bool has_integrity; /* false: set_integrity must be NULL */
  int64_t wait_ms;    /* how long a wait lasts before the case fails */
  /* A fresh transport for one case (collective between processes). */
  rs_status (*create)(void *arg, rsi_transport **out, rsi_err *err);
  /* Collective over the processes: true when `ok` on every one (NULL: one
   * process, which returns ok). */
  bool (*all)(void *arg, bool ok);
  void *arg;
} tc_driver;

/* ---- the cases ---------------------------------------------------------- */

enum { TC_NEEDS_CONTROL = 1, TC_NEEDS_INTEGRITY = 2 };

/* X(name, needs): every case, in the order the drivers run them. */
#define TC_CASES(X)                    \
  X(step_groups, 0)                    \
  X(receive_before_send, 0)            \
  X(send_before_receive, 0)            \
  X(zero_bytes, 0)                     \
  X(many_peers, 0)                     \
  X(pending_names_peer, 0)             \
  X(silent_peer, 0)                    \
  X(nonce, 0)                          \
  X(control_records, TC_NEEDS_CONTROL) \
  X(notices, TC_NEEDS_CONTROL)         \
  X(allgatherv, TC_NEEDS_CONTROL)      \
  X(integrity, TC_NEEDS_INTEGRITY)

typedef struct tc_set tc_set;

typedef struct tc_case {
  const char *name;
  void (*run)(tc_set *s);
  unsigned needs;
} tc_case;

#define TC_DECLARE(name, needs) void tc_case_##name(tc_set *s);
TC_CASES(TC_DECLARE)
#undef TC_DECLARE

#define TC_INDEX(name, needs) TC_CASE_##name,
enum { TC_CASES(TC_INDEX) TC_NCASES };
#undef TC_INDEX

extern const tc_case tc_cases[TC_NCASES];

typedef enum { TC_PASS, TC_SKIP, TC_FAIL } tc_verdict;

#define TC_WHY_BYTES 1024

/* Run case c on a fresh transport of d: check the transport's shape
 * against what d declares, run the case, check that it left nothing
 * posted, then destroy the transport (abandoning first after a failure).
 * why gets the first failure, or why the case does not apply (SKIP). The
 * verdict is this process's; a driver between processes combines them. */
tc_verdict tc_run(const tc_driver *d, const tc_case *c, char *why,
                  size_t cap);

/* ---- what a case uses --------------------------------------------------- */

/* The control channel, where a helper takes a group. */
#define TC_CONTROL (-1)

/* How long a silent peer is watched; the slowest single test call allowed
 * meanwhile (a test that blocked would take the whole silence); the margin
 * over RSI_ABANDON_MS allowed to abandon. */
#define TC_SILENT_MS 400
#define TC_TEST_CALL_MAX_MS 100
#define TC_ABANDON_MARGIN_MS 100

struct tc_set {
  const tc_driver *d;
  rsi_transport *t;
  int world;
  bool failed;
  bool abandoned; /* buffers go to adopt, not free */
  uint64_t made;  /* messages made so far (their seeds) */
  char why[TC_WHY_BYTES];
  void **bufs; /* what tc_alloc handed out */
  size_t nbufs, capbufs;
};

/* Record a failure unless ok (the first one wins); returns ok. */
bool tc_expect(tc_set *s, bool ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* tc_expect(st == RS_OK), naming the status and the transport's message. */
bool tc_ok(tc_set *s, rs_status st, const rsi_err *err, const char *what);

bool tc_drives(const tc_set *s, int rank);
/* Every process reaches this point before any goes on. */
void tc_sync(tc_set *s);
int64_t tc_now_ms(void);
void tc_pause(void);
/* A buffer of at least one byte, every byte TC_POISON, released after the
 * case (kept through adopt when the transport was abandoned). */
void *tc_alloc(tc_set *s, size_t bytes);
#define TC_POISON 0xA5

/* Byte j of the payload with this seed. */
unsigned char tc_byte(uint64_t seed, size_t j);
void tc_fill(void *buf, size_t bytes, uint64_t seed);
/* Whether got holds the payload; records the first wrong byte. */
bool tc_check_payload(tc_set *s, const void *got, size_t bytes, uint64_t seed,
                      const char *what);

/* ---- messages ----------------------------------------------------------- */

/* One message of the world: group (or TC_CONTROL), ends, tag, size; the
 * buffers exist at the ends this process drives. */
typedef struct tc_msg {
  int group, from, to;
  uint64_t tag;
  size_t bytes;
  uint64_t seed;     /* of its payload */
  void *in;          /* the receive's buffer */
  const void *view;  /* where the received bytes are */
} tc_msg;

/* Messages in posting order: each rank posts its own in list order. */
typedef struct tc_msgs {
  tc_msg *m;
  int n, cap;
} tc_msgs;

/* A message at the end of l; its payload differs from every other one the
 * case made (the same on every process). */
void tc_add(tc_set *s, tc_msgs *l, int group, int from, int to, uint64_t tag,
            size_t bytes);
/* from -> from + step (mod world), for every rank. */
void tc_add_ring(tc_set *s, tc_msgs *l, int group, int step, uint64_t tag,
                 size_t bytes);
void tc_msgs_free(tc_msgs *l);

void tc_post_recvs(tc_set *s, tc_msgs *l);
void tc_post_sends(tc_set *s, const tc_msgs *l);
/* Every message that arrived here holds its payload. */
void tc_check_arrived(tc_set *s, const tc_msgs *l);

/* ---- progress ----------------------------------------------------------- */

/* One test of `group` (or TC_CONTROL) for rank me; false on an error. */
bool tc_test(tc_set *s, int me, int group, bool *done);
/* Test every driven rank until all are done or wait_ms passed (then a
 * failure naming what is pending). */
bool tc_wait(tc_set *s, int group, const char *what);
/* Test every driven rank for ms: expects none to be done, and every call
 * to return within TC_TEST_CALL_MAX_MS. */
void tc_watch_silence(tc_set *s, int group, int64_t ms, const char *what);
/* expect test(me, group) to say not done, now. */
void tc_expect_open(tc_set *s, int me, int group, const char *what);
/* expect pending(me, group) to name this operation (peer < 0: nothing). */
void tc_expect_pending(tc_set *s, int me, int group, int peer, bool is_recv,
                       size_t bytes, const char *what);
/* Test and look at pending until it names a receive from `peer` of
 * `bytes`, or wait_ms passed. */
void tc_await_pending(tc_set *s, int me, int group, int peer, size_t bytes,
                      const char *what);

#endif
