/* SPDX-License-Identifier: Apache-2.0 */
/* The conformance suite's runner and the helpers its cases share
 * (tcase.h): the table of cases, a transport checked against what its
 * driver declares, failures recorded without stopping a case, buffers
 * that outlive an abandoned transport, payloads (in device memory, staged
 * through the host, for a transport whose engine keeps it there),
 * messages posted at the ends this process drives, and bounded waits over
 * those ends (a queued transport's device queues among them). */
#include "tcase.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy/engine.h"
#include "base/status.h"

#define TC_ENTRY(name, needs) {#name, tc_case_##name, needs},
const tc_case tc_cases[TC_NCASES] = {TC_CASES(TC_ENTRY)};
#undef TC_ENTRY

/* ---- recording ---------------------------------------------------------- */

bool tc_expect(tc_set *s, bool ok, const char *fmt, ...) {
  if (ok || s->failed) return ok;
  s->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, sizeof s->why, fmt, ap);
  va_end(ap);
  return false;
}

bool tc_ok(tc_set *s, rs_status st, const rsi_err *err, const char *what) {
  return tc_expect(s, st == RS_OK, "%s: %s (%s)", what, rsi_status_name(st),
                   err->msg);
}

bool tc_drives(const tc_set *s, int rank) {
  for (int k = 0; k < s->d->nranks; k++)
    if (s->d->ranks[k] == rank) return true;
  return false;
}

void tc_sync(tc_set *s) {
  if (s->d->all) s->d->all(s->d->arg, true);
}

int64_t tc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tc_pause(void) {
  struct timespec ts = {0, 20000}; /* 20 us, as the executor waits */
  nanosleep(&ts, NULL);
}

/* A test that cannot allocate has nothing to say. */
static void *must_realloc(void *p, size_t bytes) {
  p = realloc(p, bytes);
  if (!p) {
    fprintf(stderr, "transport suite: out of memory\n");
    exit(2);
  }
  return p;
}

static void keep(tc_set *s, void *p, bool engine) {
  if (s->nbufs == s->capbufs) {
    s->capbufs = s->capbufs ? 2 * s->capbufs : 32;
    s->bufs = must_realloc(s->bufs, s->capbufs * sizeof *s->bufs);
  }
  s->bufs[s->nbufs++] = (struct tc_buf){p, engine};
}

void *tc_alloc(tc_set *s, size_t bytes) {
  void *p = must_realloc(NULL, bytes ? bytes : 1);
  memset(p, TC_POISON, bytes ? bytes : 1);
  keep(s, p, false);
  return p;
}

bool tc_on_device(const tc_set *s) {
  const rsi_engine *e = s->t ? s->t->engine : NULL;
  return e && e->ops && e->ops->memory != RSI_MEMORY_HOST;
}

static bool queued(const tc_set *s) { return s->t->ops->queue_of != NULL; }

bool tc_drain(tc_set *s, int me, const char *what) {
  if (!queued(s)) return true;
  void *queue = s->t->ops->queue_of(s->t, me);
  rsi_err err = {0};
  char text[256];
  snprintf(text, sizeof text,
           "%s: draining rank %d's queue (a transfer without its peer?)",
           what, me);
  return tc_ok(s, s->d->drain(s->d->arg, queue, s->d->wait_ms, &err), &err,
               text);
}

/* A payload buffer of the data channel for rank me, every byte TC_POISON:
 * host memory, or the engine's (device) memory poisoned from the host.
 * NULL after a failure, recorded. */
static void *data_alloc(tc_set *s, int me, size_t bytes, const char *what) {
  if (!tc_on_device(s)) return tc_alloc(s, bytes);
  rsi_engine *e = s->t->engine;
  size_t n = bytes ? bytes : 1;
  void *p = NULL;
  rsi_err err = {0};
  char text[256];
  snprintf(text, sizeof text, "%s: allocating through the engine", what);
  if (!tc_ok(s, e->ops->alloc(e, me, n, &p, &err), &err, text)) return NULL;
  keep(s, p, true);
  void *poison = must_realloc(NULL, n);
  memset(poison, TC_POISON, n);
  snprintf(text, sizeof text, "%s: poisoning on the device", what);
  rs_status st = s->d->to_device(s->d->arg, me, p, poison, n, &err);
  free(poison);
  return tc_ok(s, st, &err, text) ? p : NULL;
}

/* n bytes of the payload with this seed into dst, a buffer of the data
 * channel of rank me. */
static bool data_fill(tc_set *s, int me, void *dst, size_t n, uint64_t seed,
                      const char *what) {
  if (!tc_on_device(s)) {
    tc_fill(dst, n, seed);
    return true;
  }
  if (n == 0) return true;
  void *host = must_realloc(NULL, n);
  tc_fill(host, n, seed);
  rsi_err err = {0};
  rs_status st = s->d->to_device(s->d->arg, me, dst, host, n, &err);
  free(host);
  char text[256];
  snprintf(text, sizeof text, "%s: staging the payload to the device", what);
  return tc_ok(s, st, &err, text);
}

/* n bytes at src, a buffer of the data channel of rank me, as host bytes:
 * src itself, or a malloc'd copy (*copy, to free); NULL after a failure,
 * recorded. */
static const void *data_read(tc_set *s, int me, const void *src, size_t n,
                             void **copy, const char *what) {
  *copy = NULL;
  if (!tc_on_device(s)) return src;
  *copy = must_realloc(NULL, n ? n : 1);
  rsi_err err = {0};
  char text[256];
  snprintf(text, sizeof text, "%s: staging the bytes to the host", what);
  if (n && !tc_ok(s, s->d->to_host(s->d->arg, me, *copy, src, n, &err), &err,
                  text)) {
    free(*copy);
    *copy = NULL;
    return NULL;
  }
  return *copy;
}

/* ---- payloads ----------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

unsigned char tc_byte(uint64_t seed, size_t j) {
  return (unsigned char)(mix(seed ^ ((uint64_t)(j / 8) << 8)) >> (8 * (j % 8)));
}

void tc_fill(void *buf, size_t bytes, uint64_t seed) {
  unsigned char *b = buf;
  for (size_t j = 0; j < bytes; j++) b[j] = tc_byte(seed, j);
}

bool tc_check_payload(tc_set *s, const void *got, size_t bytes, uint64_t seed,
                      const char *what) {
  const unsigned char *b = got;
  for (size_t j = 0; j < bytes; j++)
    if (b[j] != tc_byte(seed, j))
      return tc_expect(s, false, "%s: byte %zu of %zu is 0x%02x, want 0x%02x",
                       what, j, bytes, b[j], tc_byte(seed, j));
  return true;
}

/* ---- messages ----------------------------------------------------------- */

void tc_add(tc_set *s, tc_msgs *l, int group, int from, int to, uint64_t tag,
            size_t bytes) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->m = must_realloc(l->m, (size_t)l->cap * sizeof *l->m);
  }
  uint64_t seed = mix(++s->made ^ mix((uint64_t)s->world));
  l->m[l->n++] = (tc_msg){group, from, to, tag, bytes, seed, NULL, NULL};
}

void tc_add_ring(tc_set *s, tc_msgs *l, int group, int step, uint64_t tag,
                 size_t bytes) {
  for (int r = 0; r < s->world; r++)
    tc_add(s, l, group, r, ((r + step) % s->world + s->world) % s->world, tag,
           bytes);
}

void tc_msgs_free(tc_msgs *l) {
  free(l->m);
  memset(l, 0, sizeof *l);
}

static const char *group_name(int group) {
  return group == TC_CONTROL      ? "control"
         : group == RSI_GROUP_STEP0 ? "group 0"
                                    : "group 1";
}

/* "message 3 -> 1 tag 7 (group 0, 64 bytes)" */
static void describe(const tc_msg *m, char *out, size_t cap) {
  snprintf(out, cap, "message %d -> %d tag %llu (%s, %zu bytes)", m->from,
           m->to, (unsigned long long)m->tag, group_name(m->group), m->bytes);
}

void tc_post_recvs(tc_set *s, tc_msgs *l) {
  rsi_transport *t = s->t;
  for (int i = 0; i < l->n; i++) {
    tc_msg *m = &l->m[i];
    if (!tc_drives(s, m->to)) continue;
    char what[128];
    describe(m, what, sizeof what);
    m->in = m->group == TC_CONTROL ? tc_alloc(s, m->bytes)
                                   : data_alloc(s, m->to, m->bytes, what);
    m->view = NULL;
    if (!m->in) continue;
    rsi_err err = {0};
    rs_status st =
        m->group == TC_CONTROL
            ? t->control->recv(t, m->from, m->tag, m->in, m->bytes, &err)
            : t->ops->recv(t, m->group, m->to, m->from, m->tag, m->in,
                           m->bytes, &m->view, &err);
    if (m->group == TC_CONTROL) m->view = m->in;
    tc_ok(s, st, &err, what);
  }
}

void tc_post_sends(tc_set *s, const tc_msgs *l) {
  rsi_transport *t = s->t;
  for (int i = 0; i < l->n; i++) {
    const tc_msg *m = &l->m[i];
    if (!tc_drives(s, m->from)) continue;
    char what[128];
    describe(m, what, sizeof what);
    void *out;
    if (m->group == TC_CONTROL) {
      out = tc_alloc(s, m->bytes);
      tc_fill(out, m->bytes, m->seed);
    } else {
      out = data_alloc(s, m->from, m->bytes, what);
      if (out && !data_fill(s, m->from, out, m->bytes, m->seed, what))
        out = NULL;
    }
    if (!out) continue;
    rsi_err err = {0};
    rs_status st =
        m->group == TC_CONTROL
            ? t->control->send(t, m->to, m->tag, out, m->bytes, &err)
            : t->ops->send(t, m->group, m->from, m->to, m->tag, out,
                           m->bytes, &err);
    tc_ok(s, st, &err, what);
  }
}

void tc_check_arrived(tc_set *s, const tc_msgs *l) {
  /* a queued transport's groups are done once enqueued: wait for the
   * device before reading (the control channel completes on the host) */
  bool drained = true;
  for (int k = 0; k < s->d->nranks; k++)
    drained &= tc_drain(s, s->d->ranks[k], "before reading arrived bytes");
  for (int i = 0; i < l->n && drained; i++) {
    const tc_msg *m = &l->m[i];
    if (!tc_drives(s, m->to) || !m->in) continue;
    char what[128];
    describe(m, what, sizeof what);
    if (!tc_expect(s, m->view != NULL, "%s: no view was set", what)) continue;
    bool host = m->group == TC_CONTROL;
    void *copy = NULL;
    const void *got =
        host ? m->view : data_read(s, m->to, m->view, m->bytes, &copy, what);
    if (got) tc_check_payload(s, got, m->bytes, m->seed, what);
    free(copy);
    if (m->bytes == 0 && m->view == m->in) {
      got = host ? m->in : data_read(s, m->to, m->in, 1, &copy, what);
      if (got)
        tc_expect(s, *(const unsigned char *)got == TC_POISON,
                  "%s: a zero-byte receive wrote its buffer", what);
      free(copy);
    }
  }
}

/* ---- progress ----------------------------------------------------------- */

bool tc_test(tc_set *s, int me, int group, bool *done) {
  rsi_transport *t = s->t;
  rsi_err err = {0};
  *done = false;
  rs_status st = group == TC_CONTROL
                     ? t->control->test(t, done, &err)
                     : t->ops->test(t, me, group, done, &err);
  char what[64];
  snprintf(what, sizeof what, "test of rank %d's %s", me, group_name(group));
  return tc_ok(s, st, &err, what);
}

/* What pending says of one group of one rank. */
typedef struct seen {
  bool any, is_recv;
  int peer;
  size_t bytes;
} seen;

static seen pending(tc_set *s, int me, int group) {
  rsi_transport *t = s->t;
  seen p = {false, false, -1, 0};
  p.any = group == TC_CONTROL
              ? t->control->pending(t, &p.peer, &p.is_recv, &p.bytes)
              : t->ops->pending(t, me, group, &p.peer, &p.is_recv, &p.bytes);
  return p;
}

static bool same(seen a, seen b) {
  return a.any == b.any && (!a.any || (a.peer == b.peer &&
                                       a.is_recv == b.is_recv &&
                                       a.bytes == b.bytes));
}

/* "a receive from rank 2 of 300 bytes", or "nothing" */
static const char *say(seen p, char *out, size_t cap) {
  if (!p.any) return "nothing";
  snprintf(out, cap, "a %s rank %d of %zu bytes",
           p.is_recv ? "receive from" : "send to", p.peer, p.bytes);
  return out;
}

/* The control channel has no `me`: one look serves the process. */
static int ends(const tc_set *s, int group) {
  return group == TC_CONTROL ? 1 : s->d->nranks;
}

/* A wait that ran out: name the first rank not done and what it waits on. */
static bool wait_failed(tc_set *s, int me, int group, const char *what) {
  char text[96];
  return tc_expect(s, false, "%s: rank %d's %s not done within %lld ms "
                   "(pending: %s)",
                   what, me, group_name(group), (long long)s->d->wait_ms,
                   say(pending(s, me, group), text, sizeof text));
}

bool tc_wait(tc_set *s, int group, const char *what) {
  int n = ends(s, group), left = n;
  bool *done = must_realloc(NULL, (size_t)n * sizeof *done);
  memset(done, 0, (size_t)n * sizeof *done);
  int64_t until = tc_now_ms() + s->d->wait_ms;
  bool ok = true;
  while (ok && left > 0) {
    for (int k = 0; k < n && ok; k++)
      if (!done[k]) {
        ok = tc_test(s, s->d->ranks[k], group, &done[k]);
        left -= done[k];
      }
    if (ok && left > 0 && tc_now_ms() >= until) break;
    if (left > 0) tc_pause();
  }
  for (int k = 0; k < n && ok && left > 0; k++)
    if (!done[k]) ok = wait_failed(s, s->d->ranks[k], group, what);
  free(done);
  return ok && left == 0;
}

void tc_watch_silence(tc_set *s, int group, int64_t ms, const char *what) {
  int64_t until = tc_now_ms() + ms, slowest = 0;
  long calls = 0;
  while (tc_now_ms() < until) {
    for (int k = 0; k < ends(s, group); k++) {
      int64_t t0 = tc_now_ms();
      bool done;
      bool ok = tc_test(s, s->d->ranks[k], group, &done);
      int64_t dt = tc_now_ms() - t0;
      slowest = dt > slowest ? dt : slowest;
      calls++;
      if (!ok || !tc_expect(s, !done, "%s: rank %d's %s was found done",
                            what, s->d->ranks[k], group_name(group)))
        return;
    }
    tc_pause();
  }
  tc_expect(s, slowest <= TC_TEST_CALL_MAX_MS,
            "%s: a test call took %lld ms (%ld calls in %lld ms): test must "
            "never block",
            what, (long long)slowest, calls, (long long)ms);
}

void tc_expect_open(tc_set *s, int me, int group, const char *what) {
  if (group != TC_CONTROL && queued(s)) return; /* see tcase.h */
  bool done = true;
  if (tc_test(s, me, group, &done))
    tc_expect(s, !done, "%s: rank %d's %s was done already", what, me,
              group_name(group));
}

void tc_expect_pending(tc_set *s, int me, int group, int peer, bool is_recv,
                       size_t bytes, const char *what) {
  seen want = {peer >= 0, is_recv, peer, bytes}, got = pending(s, me, group);
  char a[96], b[96];
  tc_expect(s, same(got, want), "%s: rank %d's %s: pending says %s, want %s",
            what, me, group_name(group), say(got, a, sizeof a),
            say(want, b, sizeof b));
}

void tc_await_pending(tc_set *s, int me, int group, int peer, size_t bytes,
                      const char *what) {
  seen want = {true, true, peer, bytes};
  int64_t until = tc_now_ms() + s->d->wait_ms;
  for (;;) {
    bool done;
    if (!tc_test(s, me, group, &done)) return;
    seen got = pending(s, me, group);
    if (same(got, want)) return;
    if (done || tc_now_ms() >= until) {
      char a[96], b[96];
      tc_expect(s, false,
                "%s: rank %d's %s: pending never said %s within %lld ms "
                "(%s; it says %s)",
                what, me, group_name(group), say(want, b, sizeof b),
                (long long)s->d->wait_ms,
                done ? "the group completed" : "still open",
                say(got, a, sizeof a));
      return;
    }
    tc_pause();
  }
}

/* ---- the runner --------------------------------------------------------- */

/* The transport against what the driver declares; SKIP (with its reason in
 * why) when the case needs what the transport, as declared, lacks. */
static tc_verdict check_shape(tc_set *s, const tc_case *c, char *why,
                              size_t cap) {
  const tc_driver *d = s->d;
  const rsi_transport_ops *o = s->t->ops;
  const rsi_control_ops *k = s->t->control;
  if (!tc_expect(s,
                 o && o->name && o->send && o->recv && o->test &&
                     o->pending && o->abandon && o->destroy,
                 "the transport lacks a data operation (every one but "
                 "set_integrity and adopt is required)"))
    return TC_FAIL;
  tc_expect(s, strcmp(o->name, d->transport) == 0,
            "the transport calls itself '%s', its driver '%s'", o->name,
            d->transport);
  if (d->has_control)
    tc_expect(s,
              k && k->send && k->recv && k->test && k->pending && k->notify &&
                  k->poll_notice && k->allgatherv && k->alltoallv,
              "%s declares a control channel; control %s", d->transport,
              k ? "lacks an operation" : "is NULL");
  else
    tc_expect(s, !k, "%s declares no control channel, yet control is set",
              d->transport);
  tc_expect(s, d->has_integrity == (o->set_integrity != NULL),
            "%s declares %s checksums, yet set_integrity is %s",
            d->transport, d->has_integrity ? "" : "no",
            o->set_integrity ? "set" : "NULL");
  tc_expect(s, !d->has_notices || d->has_control,
            "%s declares notices but no control channel", d->transport);
  bool q = o->queue_of != NULL, j = o->join != NULL;
  tc_expect(s, d->queued ? q && j : !q && !j,
            "%s declares itself %squeued, yet queue_of is %s and join %s",
            d->transport, d->queued ? "" : "not ", q ? "set" : "NULL",
            j ? "set" : "NULL");
  const rsi_engine *e = s->t->engine;
  if (e)
    tc_expect(s, e->ops && e->ops->alloc && e->ops->release && e->ops->query,
              "%s has an engine that lacks alloc, release or query",
              d->transport);
  if (!s->failed && tc_on_device(s))
    tc_expect(s, d->to_device && d->to_host,
              "%s moves device memory (engine '%s'); its driver gives no "
              "to_device and to_host to stage payloads",
              d->transport, e->ops->name ? e->ops->name : "?");
  if (!s->failed && d->queued)
    tc_expect(s, d->drain != NULL,
              "%s is queued; its driver gives no drain to wait for its "
              "queues",
              d->transport);
  if (s->failed) return TC_FAIL;
  if ((c->needs & TC_NEEDS_CONTROL) && !d->has_control) {
    snprintf(why, cap, "%s has no control channel (control == NULL, checked)",
             d->transport);
    return TC_SKIP;
  }
  if ((c->needs & TC_NEEDS_NOTICES) && !d->has_notices) {
    snprintf(why, cap,
             "%s declares that notices do not travel (notify does nothing, "
             "poll_notice finds none): a peer learns of a failure through "
             "its own timeout",
             d->transport);
    return TC_SKIP;
  }
  if ((c->needs & TC_NEEDS_TAGS) && d->ordered_only) {
    snprintf(why, cap,
             "%s declares matching in posting order only (no tags): the "
             "case posts receives in another order than their sends",
             d->transport);
    return TC_SKIP;
  }
  if ((c->needs & TC_NEEDS_OPEN_WAIT) && d->queued) {
    snprintf(why, cap,
             "%s is queued (queue_of set, checked): its test says a group "
             "done once enqueued, so no group can be watched open while its "
             "peer is silent",
             d->transport);
    return TC_SKIP;
  }
  if ((c->needs & TC_NEEDS_INTEGRITY) && !d->has_integrity) {
    snprintf(why, cap,
             "%s cannot checksum messages (set_integrity == NULL, checked)",
             d->transport);
    return TC_SKIP;
  }
  return TC_PASS;
}

/* A passing case leaves nothing posted anywhere. */
static void expect_quiet(tc_set *s) {
  for (int k = 0; k < s->d->nranks; k++)
    for (int g = 0; g < RSI_DATA_GROUPS; g++) {
      bool done;
      if (tc_test(s, s->d->ranks[k], g, &done))
        tc_expect(s, done, "the case left rank %d's group %d open",
                  s->d->ranks[k], g);
    }
  bool done;
  if (s->t->control && tc_test(s, s->d->ranks[0], TC_CONTROL, &done))
    tc_expect(s, done, "the case left the control channel open");
}

/* Destroy the transport; after a failure abandon first. Buffers that an
 * abandoned operation may still touch go to adopt where there is one. A
 * queued transport's queues are drained first (abandon lets what they
 * hold finish); where one does not drain, its engine's buffers are left
 * allocated rather than freed under the device. */
static void release(tc_set *s) {
  rsi_transport *t = s->t;
  if (t && s->failed && !s->abandoned) {
    t->ops->abandon(t);
    s->abandoned = true;
  }
  bool drained = true;
  if (t && t->ops->queue_of && s->d->drain)
    for (int k = 0; k < s->d->nranks; k++)
      drained &= tc_drain(s, s->d->ranks[k], "releasing the case's buffers");
  bool keep = t && s->abandoned && t->ops->adopt;
  for (size_t i = 0; i < s->nbufs; i++) {
    struct tc_buf *b = &s->bufs[i];
    if (keep)
      t->ops->adopt(t, b->p);
    else if (!b->engine)
      free(b->p);
    else if (drained)
      t->engine->ops->release(t->engine, b->p);
  }
  free(s->bufs);
  if (t) t->ops->destroy(t);
}

static bool all_ok(const tc_driver *d, bool ok) {
  return d->all ? d->all(d->arg, ok) : ok;
}

tc_verdict tc_run(const tc_driver *d, const tc_case *c, char *why,
                  size_t cap) {
  tc_set s = {.d = d, .world = d->world};
  rsi_err err = {0};
  tc_ok(&s, d->create(d->arg, &s.t, &err), &err, "creating the transport");
  tc_verdict v = s.failed ? TC_FAIL : check_shape(&s, c, why, cap);
  /* run only where every process can: a lone runner would wait alone */
  bool run = all_ok(d, v == TC_PASS);
  if (!run && v == TC_PASS)
    tc_expect(&s, false, "another process could not start the case");
  if (run) c->run(&s);
  if (run && !s.failed && !s.abandoned) expect_quiet(&s);
  release(&s);
  if (s.failed) {
    snprintf(why, cap, "%s", s.why);
    return TC_FAIL;
  }
  return v;
}
