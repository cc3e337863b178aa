/* SPDX-License-Identifier: Apache-2.0 */
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
 * Payloads of the data channel live where the transport's copy engine
 * (core/copy/engine.h, rsi_transport.engine) keeps memory: host memory for a
 * transport without one; device memory, allocated through the engine and
 * staged through the host by the driver's to_device and to_host, for a
 * GPU transport (NCCL). tc_alloc and the control channel stay in host
 * memory. A queued transport (queue_of set: its test says a group done
 * once it is enqueued on the rank's device queue, not once it arrived)
 * has that queue drained (the driver's drain, within wait_ms) before
 * arrived bytes are read and before its buffers are released.
 *
 * What a transport lacks, its driver declares (and tc_run checks where it
 * can): a case that needs it is reported as skipped, with the reason. */
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
  /* Notices travel (control's notify and poll_notice do something);
   * false: notify may succeed doing nothing and poll_notice find none. */
  bool has_notices;
  /* Messages of a pair are matched in posting order only, whatever their
   * tags (NCCL has no tags). */
  bool ordered_only;
  /* Control records go out in batches, at a test: the receives and sends
   * of one exchange must all be posted before the channel is tested (as
   * the executor does); a receive tested before its peer's send was
   * posted may wait forever (NCCL: one stream, one group per batch). */
  bool batched_control;
  /* A queued transport: queue_of and join are set (false: both NULL),
   * test says done once a group is enqueued. */
  bool queued;
  int64_t wait_ms;    /* how long a wait lasts before the case fails */
  /* A fresh transport for one case (collective between processes). */
  rs_status (*create)(void *arg, rsi_transport **out, rsi_err *err);
  /* Collective over the processes: true when `ok` on every one (NULL: one
   * process, which returns ok). */
  bool (*all)(void *arg, bool ok);
  /* Staging of payloads for a transport whose engine keeps device memory
   * (required then, checked; NULL otherwise): copy n bytes from host to
   * device memory of rank me, or back, complete on return and ordered
   * after nothing on the transport's queues (the kit drains the rank's
   * queue before it reads arrived bytes). */
  rs_status (*to_device)(void *arg, int me, void *dst, const void *src,
                         size_t n, rsi_err *err);
  rs_status (*to_host)(void *arg, int me, void *dst, const void *src,
                       size_t n, rsi_err *err);
  /* A queued transport's (required then, checked): wait until everything
   * on `queue` (queue_of of a driven rank) completed, at most wait_ms
   * (then RS_ERR_TIMEOUT). It must work after abandon too. */
  rs_status (*drain)(void *arg, void *queue, int64_t wait_ms, rsi_err *err);
  void *arg;
} tc_driver;

/* ---- the cases ---------------------------------------------------------- */

/* What a case needs beyond the data channel:
 *   CONTROL    a control channel (has_control);
 *   INTEGRITY  checksums (has_integrity);
 *   NOTICES    notices that travel (has_notices);
 *   TAGS       matching by tag, not posting order alone (!ordered_only);
 *   OPEN_WAIT  a test that watches a group stay open while a receive
 *              waits for a send not yet posted (!queued: a queued
 *              transport's test enqueues the group and says done). */
enum {
  TC_NEEDS_CONTROL = 1,
  TC_NEEDS_INTEGRITY = 2,
  TC_NEEDS_NOTICES = 4,
  TC_NEEDS_TAGS = 8,
  TC_NEEDS_OPEN_WAIT = 16
};

/* X(name, needs): every case, in the order the drivers run them. */
#define TC_CASES(X)                                       \
  X(step_groups, 0)                                       \
  X(receive_before_send, 0)                               \
  X(send_before_receive, 0)                               \
  X(zero_bytes, 0)                                        \
  X(many_peers, 0)                                        \
  X(tag_matching, TC_NEEDS_TAGS)                          \
  X(pending_names_peer, TC_NEEDS_OPEN_WAIT)               \
  X(silent_peer, TC_NEEDS_OPEN_WAIT)                      \
  X(nonce, 0)                                             \
  X(control_records, TC_NEEDS_CONTROL)                    \
  X(notices, TC_NEEDS_CONTROL | TC_NEEDS_NOTICES)         \
  X(allgatherv, TC_NEEDS_CONTROL)                         \
  X(alltoallv, TC_NEEDS_CONTROL)                          \
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
  struct tc_buf {
    void *p;
    bool engine; /* from the transport's engine, else malloc'd */
  } *bufs;     /* what tc_alloc and the message helpers handed out */
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
/* A buffer of host memory of at least one byte, every byte TC_POISON,
 * released after the case (kept through adopt when the transport was
 * abandoned). Payloads of the data channel are the message helpers'. */
void *tc_alloc(tc_set *s, size_t bytes);
/* Whether the transport's data channel moves device memory (its engine's
 * memory is not the host's). */
bool tc_on_device(const tc_set *s);
/* Wait until everything enqueued on rank me's queue completed (a queued
 * transport; true at once for any other), at most wait_ms; false after a
 * failure, recorded. */
bool tc_drain(tc_set *s, int me, const char *what);
#define TC_POISON 0xA5

/* Byte j of the payload with this seed. */
unsigned char tc_byte(uint64_t seed, size_t j);
void tc_fill(void *buf, size_t bytes, uint64_t seed);
/* Whether got holds the payload; records the first wrong byte. */
bool tc_check_payload(tc_set *s, const void *got, size_t bytes, uint64_t seed,
                      const char *what);

/* ---- messages ----------------------------------------------------------- */

/* One message of the world: group (or TC_CONTROL), ends, tag, size; the
 * buffers exist at the ends this process drives (in the engine's memory
 * for a data group: device memory for a GPU transport). */
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
/* Every message that arrived here holds its payload (a queued
 * transport's queues drained first). */
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
/* expect test(me, group) to say not done, now. Nothing for a data group
 * of a queued transport: there test enqueues what is posted and says done,
 * so a group whose sends are not posted yet would wait on the device (the
 * cases' pending checks still apply). */
void tc_expect_open(tc_set *s, int me, int group, const char *what);
/* expect pending(me, group) to name this operation (peer < 0: nothing). */
void tc_expect_pending(tc_set *s, int me, int group, int peer, bool is_recv,
                       size_t bytes, const char *what);
/* Test and look at pending until it names a receive from `peer` of
 * `bytes`, or wait_ms passed. */
void tc_await_pending(tc_set *s, int me, int group, int peer, size_t bytes,
                      const char *what);

#endif
