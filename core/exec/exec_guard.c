/* SPDX-License-Identifier: Apache-2.0 */
/* The agreement, the hello, notices and bounded waits of an execution
 * between processes (exec_guard.h says why each exists). Control records
 * are little-endian words with a checksum word at the end, so a damaged
 * one is called corrupt, not a disagreement, whatever the integrity
 * setting. */
#include "exec/exec_guard.h"
#include "exec/exec_state.h"
#include "session/notice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdatomic.h>

#include "base/hash.h"
#include "base/status.h"
#include "transport/transport.h"



/* ---- control records --------------------------------------------------- */

/* Every record: magic, the context's nonce, its words, a checksum. */
#define AGREE_MAGIC 0x3145455247415352ull  /* "RSAGREE1" */
#define HELLO_MAGIC 0x314f4c4c45485352ull  /* "RSHELLO1" */
#define DONE_MAGIC 0x31454e4f44535352ull   /* "RSSDONE1" */

/* + fingerprint, serial, epoch (the hello and the done record alike) */
enum { HELLO_WORDS = 6 };

/* ---- peers --------------------------------------------------------------- */

/* The ranks this rank exchanges messages with in the plan, ascending. */
static rs_status find_peers(rs_plan *plan, rsi_err *err) {
  if (plan->exec->peers) return RS_OK;
  int me = plan->ctx->rank;
  int64_t n = 0;
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *m = &plan->msgs[i];
    n += (m->src_rank == me) != (m->dst_rank == me);
  }
  int *peers = malloc((size_t)(n ? n : 1) * sizeof *peers);
  if (!peers) return RSI_NOMEM(err);
  int64_t k = 0;
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *m = &plan->msgs[i];
    if ((m->src_rank == me) != (m->dst_rank == me))
      peers[k++] = m->src_rank == me ? m->dst_rank : m->src_rank;
  }
  /* sort and drop repeats: insertion into place, peers are few */
  int64_t u = 0;
  for (int64_t i = 0; i < k; i++) {
    int v = peers[i];
    int64_t j = u;
    while (j > 0 && peers[j - 1] > v) j--;
    if (j > 0 && peers[j - 1] == v) continue;
    memmove(peers + j + 1, peers + j, (size_t)(u - j) * sizeof *peers);
    peers[j] = v;
    u++;
  }
  plan->exec->peers = peers;
  plan->exec->npeers = (int)u;
  return RS_OK;
}

/* ---- notices ------------------------------------------------------------- */

/* Tell the plan's peers why this rank gives up. Sent again whenever that
 * cause improves. */
static void send_notices(rs_plan *plan) {
  if (!plan->exec || !plan->exec->peers) return;
  rsi_notice_send(plan->ctx, plan->fingerprint, plan->exec->serial,
                  plan->exec->epoch, plan->exec->peers, plan->exec->npeers);
}

/* Take a notice's cause as ours, unless it blames this very rank (two
 * ranks that timed out on each other: keep our own). */
static bool adopt(rs_context *ctx, const rsi_notice *n) {
  if (n->cause == ctx->rank) return false; /* our own, come back */
  if (n->culprit == ctx->rank && n->status == RS_ERR_TIMEOUT) return false;
  ctx->cause_rank = n->cause;
  ctx->cause_status = n->status;
  ctx->culprit = n->culprit;
  return true;
}

static int64_t grace_ms(const rs_context *ctx) {
  return ctx->timeout_ms / 4 < RSI_GRACE_MS ? ctx->timeout_ms / 4
                                             : RSI_GRACE_MS;
}

/* A timeout, ours or one we heard of, names at first the rank someone
 * waited for, which may itself have been waiting for another. For a short
 * grace, listen to `blamed`: each notice of its that names a deeper cause
 * is adopted and passed on at once, so along a chain of waiting ranks the
 * silent one's name travels at message speed. A cause other than a
 * timeout is final. */
static void settle(rs_plan *plan, int blamed) {
  rs_context *ctx = plan->ctx;
  int64_t until = rsi_now_ms() + grace_ms(ctx);
  while (rsi_now_ms() < until && ctx->cause_status == RS_ERR_TIMEOUT) {
    rsi_notice n;
    rs_status st;
    rsi_err ignored;
    bool got =
        rsi_notice_next(plan->ctx, plan->fingerprint,
                        plan->exec ? plan->exec->serial : 0, &n, &st, &ignored);
    if (got && n.from == blamed && adopt(ctx, &n)) send_notices(plan);
    if (!got) rsi_pause();
  }
}

/* The failure this rank reports, from the cause it holds. */
static rs_status report(rs_plan *plan, const rsi_notice *via, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rs_status st = ctx->cause_status == RS_ERR_TIMEOUT ? RS_ERR_TIMEOUT
                                                      : RS_ERR_TRANSPORT;
  if (ctx->cause_rank == ctx->rank) /* our own wait stands: a peer gave up
                                       on this rank while it waited too */
    return RSI_FAIL(err, st,
                    "rank %d: no answer from rank %d (rank %d gave up "
                    "waiting for this rank meanwhile); the transfer is "
                    "abandoned",
                    ctx->rank,
                    ctx->culprit >= 0 ? ctx->culprit : via ? via->from : -1,
                    via ? via->from : -1);
  char waited[64] = "", passed[48] = "";
  if (ctx->culprit == ctx->rank)
    snprintf(waited, sizeof waited, ", waiting for this rank");
  else if (ctx->culprit >= 0)
    snprintf(waited, sizeof waited, ", waiting for rank %d", ctx->culprit);
  if (via && via->from != ctx->cause_rank)
    snprintf(passed, sizeof passed, "; rank %d passed it on", via->from);
  return RSI_FAIL(err, st,
                  "rank %d: rank %d gave up (%s%s)%s, so this execution "
                  "cannot complete; the context is done: destroy it",
                  ctx->rank, ctx->cause_rank,
                  rsi_status_name(ctx->cause_status), waited, passed);
}

/* The first operation still pending in a step group of rank `me`, or on
 * the control channel (group RSI_CONTROL): its peer (-1: none). */
static int late_peer(rs_plan *plan, int me, int group, bool *is_recv,
                     size_t *bytes) {
  rsi_transport *tp = plan->ctx->transport;
  int peer = -1;
  *is_recv = true;
  *bytes = 0;
  bool found = false;
  if (group == RSI_CONTROL)
    found = tp->control && tp->control->pending(tp, &peer, is_recv, bytes);
  else if (group >= 0)
    found = tp->ops->pending && tp->ops->pending(tp, me, group, &peer,
                                                  is_recv, bytes);
  return found ? peer : -1;
}

/* A notice arrived while this rank waited for `group` (-1: none): give up
 * with its cause, settled first when it is a timeout. A notice that blames
 * this rank (its sender waited for us) says nothing of who is silent: then
 * the rank we wait for ourselves is the lead to follow. */
static rs_status heard(rs_plan *plan, int me, int group, const rsi_notice *n,
                       rsi_err *err) {
  rs_context *ctx = plan->ctx;
  int lead = n->from;
  if (!adopt(ctx, n)) {
    bool is_recv;
    size_t bytes;
    lead = late_peer(plan, me, group, &is_recv, &bytes);
    rsi_blame_self(ctx, RS_ERR_TIMEOUT, lead);
  }
  send_notices(plan);
  if (lead >= 0) settle(plan, lead);
  return report(plan, n, err);
}

/* Our own timeout waiting for a group. */
static rs_status timed_out(rs_plan *plan, int me, int group, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  bool is_recv;
  size_t bytes;
  int peer = late_peer(plan, me, group, &is_recv, &bytes);
  rsi_blame_self(ctx, RS_ERR_TIMEOUT, peer);
  send_notices(plan);
  if (peer >= 0) settle(plan, peer);
  if (ctx->cause_rank != ctx->rank) return report(plan, NULL, err);
  if (peer < 0)
    return RSI_FAIL(err, RS_ERR_TIMEOUT,
                    "rank %d: no progress within %lld ms; the transfer is "
                    "abandoned",
                    ctx->rank, (long long)ctx->timeout_ms);
  return RSI_FAIL(err, RS_ERR_TIMEOUT,
                  "rank %d: no answer from rank %d within %lld ms (%s of %zu "
                  "bytes pending); the transfer is abandoned",
                  ctx->rank, peer, (long long)ctx->timeout_ms,
                  is_recv ? "a receive" : "a send", bytes);
}

/* RS_OK, or the failure a notice that arrived brings (while rank `me`
 * waited for `group`, or RSI_NO_GROUP). */
static rs_status check_notices(rs_plan *plan, int me, int group,
                               rsi_err *err) {
  rsi_notice n;
  rs_status st;
  if (rsi_notice_next(plan->ctx, plan->fingerprint,
                      plan->exec ? plan->exec->serial : 0, &n, &st, err))
    return heard(plan, me, group, &n, err);
  return st;
}

static rs_status check_abort(rs_context *ctx, rsi_err *err) {
  if (!atomic_load_explicit(&ctx->aborted, memory_order_acquire))
    return RS_OK;
  rsi_blame_self(ctx, RS_ERR_TRANSPORT, -1);
  return RSI_FAIL(err, RS_ERR_TRANSPORT,
                  "the context was aborted (rs_context_abort); destroy it");
}

rs_status rsi_guard_check(rs_plan *plan, int me, int group, int64_t since,
                          bool *done, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  *done = false;
  if (group == RSI_CONTROL)
    RSI_TRY(tp->control->test(tp, done, err));
  else
    RSI_TRY(tp->ops->test(tp, me, group, done, err));
  if (*done) return RS_OK;
  RSI_TRY(check_abort(ctx, err));
  /* In process nobody can be late: the ranks take turns in this call. Only
   * a queued transport may keep the executor waiting, while its engine
   * (NCCL) takes what was posted. */
  if (ctx->rank == RS_ALL_RANKS) {
    if (!tp->ops->join || rsi_now_ms() - since < ctx->timeout_ms)
      return RS_OK;
    return RSI_FAIL(err, RS_ERR_TIMEOUT,
                    "rank %d: the %s transport did not take the transfers "
                    "of a step within %lld ms",
                    me, tp->ops->name, (long long)ctx->timeout_ms);
  }
  RSI_TRY(check_notices(plan, me, group, err));
  if (rsi_now_ms() - since < ctx->timeout_ms) return RS_OK;
  /* The deadline passed: one more look, then give up. */
  if (group == RSI_CONTROL)
    RSI_TRY(tp->control->test(tp, done, err));
  else
    RSI_TRY(tp->ops->test(tp, me, group, done, err));
  return *done ? RS_OK : timed_out(plan, me, group, err);
}

/* ---- exchanging records ------------------------------------------------- */

static const char *record_name(uint64_t tag) {
  return tag == RSI_TAG_AGREE   ? "fingerprint"
         : tag == RSI_TAG_HELLO ? "hello"
                                : "done";
}

void rsi_exchange_free(rsi_exchange *x) {
  free(x->in);
  free(x->open);
  free(x->theirs);
  memset(x, 0, sizeof *x);
}

/* Post the receive of rank slot i's record. */
static rs_status post_receive(rs_plan *plan, rsi_exchange *x, int i,
                              rsi_err *err) {
  rsi_transport *tp = plan->ctx->transport;
  size_t bytes = (size_t)x->words * 8;
  x->open[i] = true;
  return tp->control->recv(tp, x->ranks[i], x->tag, x->in + (size_t)i * bytes,
                           bytes, err);
}

/* Send record `mine` (words[2..] filled; magic in words[0]) to each of
 * `ranks` and post the receives of theirs. Non-blocking. */
static rs_status exchange_start(rs_plan *plan, rsi_exchange *x,
                                const int *ranks, int n, uint64_t tag,
                                const uint64_t *mine, int words,
                                rsi_err *err) {
  rsi_transport *tp = plan->ctx->transport;
  rsi_exchange_free(x);
  size_t bytes = (size_t)words * 8;
  x->in = malloc((size_t)(n ? n : 1) * bytes);
  x->open = calloc((size_t)(n ? n : 1), sizeof *x->open);
  x->theirs = malloc((size_t)(n ? n : 1) * (size_t)words * sizeof *x->theirs);
  if (!x->in || !x->open || !x->theirs) {
    rsi_exchange_free(x);
    return RSI_NOMEM(err);
  }
  x->tag = tag;
  x->words = words;
  x->n = n;
  x->ranks = ranks;
  memcpy(x->mine, mine, (size_t)words * sizeof *mine);
  x->mine[1] = tp->nonce;
  rsi_words_seal(x->mine, words);
  rsi_words_to_wire(x->mine, words, x->out);
  x->since = rsi_now_ms();
  x->active = true;
  for (int i = 0; i < n; i++) {
    RSI_TRY(post_receive(plan, x, i, err));
    RSI_TRY(tp->control->send(tp, ranks[i], tag, x->out, bytes, err));
  }
  return RS_OK;
}

/* One look at an exchange: *done once every record arrived and passed its
 * checksum. A record of another context (a leftover its engine delivered
 * here) is dropped and received again. */
static rs_status exchange_check(rs_plan *plan, rsi_exchange *x, bool *done,
                                rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  bool arrived = false;
  *done = false;
  RSI_TRY(rsi_guard_check(plan, ctx->rank, RSI_CONTROL, x->since, &arrived,
                          err));
  if (!arrived) return RS_OK;
  size_t bytes = (size_t)x->words * 8;
  bool again = false;
  for (int i = 0; i < x->n; i++) {
    if (!x->open[i]) continue;
    uint64_t *w = x->theirs + (size_t)i * (size_t)x->words;
    rsi_words_from_wire(x->in + (size_t)i * bytes, x->words, w);
    if (w[0] != x->mine[0] || !rsi_words_sealed(w, x->words)) {
      ctx->culprit = x->ranks[i];
      return RSI_FAIL(err, RS_ERR_CORRUPT,
                      "rank %d: the %s record from rank %d failed its "
                      "checksum",
                      ctx->rank, record_name(x->tag), x->ranks[i]);
    }
    if (w[1] != tp->nonce) { /* another context's: receive again */
      again = true;
      RSI_TRY(post_receive(plan, x, i, err));
    } else {
      x->open[i] = false;
    }
  }
  if (again) {
    x->since = rsi_now_ms();
    return RS_OK;
  }
  x->active = false;
  *done = true;
  return RS_OK;
}

/* Blocking: start, then look until done. */
static rs_status exchange(rs_plan *plan, rsi_exchange *x, const int *ranks,
                          int n, uint64_t tag, const uint64_t *mine,
                          int words, rsi_err *err) {
  RSI_TRY(exchange_start(plan, x, ranks, n, tag, mine, words, err));
  for (;;) {
    bool done = false;
    RSI_TRY(exchange_check(plan, x, &done, err));
    if (done) return RS_OK;
    rsi_pause();
  }
}

/* ---- the agreement ------------------------------------------------------- */

/* + section hashes, plans agreed so far on the context, then a refusal:
 * the status that made this rank refuse (0: none) and the start of its
 * message, NUL-padded. */
enum {
  AGREE_SECTIONS = 4,
  AGREE_COUNT = 2 + AGREE_SECTIONS,
  AGREE_REFUSAL = AGREE_COUNT + 1,
  REFUSAL_TEXT_WORDS = 32,
  AGREE_WORDS = AGREE_REFUSAL + 1 + REFUSAL_TEXT_WORDS + 1
};
_Static_assert(AGREE_WORDS <= RSI_RECORD_WORDS,
               "an agreement record fits an exchange");
_Static_assert(HELLO_WORDS <= RSI_RECORD_WORDS,
               "every record fits an exchange");

static void put_refusal(uint64_t *w, const rsi_err *refusal) {
  unsigned char text[REFUSAL_TEXT_WORDS * 8] = {0};
  w[0] = 0;
  if (refusal) {
    w[0] = (uint64_t)refusal->status;
    memcpy(text, refusal->msg, strnlen(refusal->msg, sizeof text - 1));
  }
  rsi_words_from_wire(text, REFUSAL_TEXT_WORDS, w + 1);
}

/* The message a refusal carries, NUL-terminated in text. */
static void refusal_text(const uint64_t *w,
                         char text[REFUSAL_TEXT_WORDS * 8]) {
  rsi_words_to_wire(w + 1, REFUSAL_TEXT_WORDS, (unsigned char *)text);
  text[REFUSAL_TEXT_WORDS * 8 - 1] = '\0';
}

/* Every rank sends its words to every other (point to point, so a rank
 * that never calls is named by the timeout); all see all and reach one
 * verdict: the first rank (in rank order) that refused, else the first
 * that differs from rank 0. A rank that refused reports its own refusal
 * (`refusal`: status and message). *exchanged: every record arrived, so
 * a failure is a verdict every rank shares. */
static rs_status agree(rs_plan *plan, const rsi_err *refusal,
                       bool *exchanged, rsi_err *err) {
  static const char *section[AGREE_SECTIONS] = {
      "tensor declarations", "source layout", "destination layout",
      "world, domains, staging or integrity setting"};
  rs_context *ctx = plan->ctx;
  int me = ctx->rank, world = ctx->world_size;
  *exchanged = false;
  int *others = calloc((size_t)world, sizeof *others);
  if (!others) return RSI_NOMEM(err);
  int n = 0;
  for (int r = 0; r < world; r++)
    if (r != me) others[n++] = r;
  uint64_t mine[AGREE_WORDS] = {AGREE_MAGIC};
  memcpy(mine + 2, plan->section_hash, sizeof plan->section_hash);
  mine[AGREE_COUNT] = ctx->agreements;
  put_refusal(mine + AGREE_REFUSAL, refusal);
  rsi_exchange x = {0};
  rs_status st = exchange(plan, &x, others, n, RSI_TAG_AGREE, mine,
                          AGREE_WORDS, err);
  *exchanged = st == RS_OK;
  if (st == RS_OK && refusal) {
    *err = *refusal;
    st = refusal->status;
  }
  /* others[i] is i below me, i + 1 above, so rank r's record is theirs[r]
   * or theirs[r - 1]. Every rank walks the ranks in order and so names
   * the same one. */
#define RECORD_OF(r)                                                      \
  ((r) == me ? x.mine                                                    \
             : x.theirs + (size_t)((r) < me ? (r) : (r) - 1) * AGREE_WORDS)
  for (int r = 0; r < world && st == RS_OK; r++) {
    const uint64_t *w = RECORD_OF(r);
    if (!w[AGREE_REFUSAL]) continue;
    char text[REFUSAL_TEXT_WORDS * 8];
    refusal_text(w + AGREE_REFUSAL, text);
    st = RSI_FAIL(err, RS_ERR_MISMATCH,
                  "rank %d: %s; it refused (%s) this plan's first "
                  "execution, so no rank runs it: nothing moved, and the "
                  "context stays usable",
                  r, text, rsi_status_name((rs_status)w[AGREE_REFUSAL]));
  }
  const uint64_t *first = RECORD_OF(0);
  for (int r = 1; r < world && st == RS_OK; r++) {
    const uint64_t *w = RECORD_OF(r);
    for (int k = 0; k < AGREE_SECTIONS && st == RS_OK; k++)
      if (w[2 + k] != first[2 + k])
        st = RSI_FAIL(err, RS_ERR_MISMATCH,
                      "rank %d and rank 0 disagree on the %s (hash %016llx "
                      "vs %016llx): every rank must build the same layouts",
                      r, section[k], (unsigned long long)w[2 + k],
                      (unsigned long long)first[2 + k]);
    if (st == RS_OK && w[AGREE_COUNT] != first[AGREE_COUNT])
      st = RSI_FAIL(err, RS_ERR_MISMATCH,
                    "rank %d has agreed %llu plans on this context and rank "
                    "0 %llu: the ranks disagree on which plan this is",
                    r, (unsigned long long)w[AGREE_COUNT],
                    (unsigned long long)first[AGREE_COUNT]);
  }
#undef RECORD_OF
  rsi_exchange_free(&x);
  free(others);
  if (st != RS_OK) return st;
  plan->exec->serial = ++ctx->agreements;
  plan->exec->agreed = true;
  return RS_OK;
}

/* ---- the hello and the done record ---------------------------------------- */

rs_status rsi_guard_greet_start(rs_plan *plan, rsi_exchange *x, bool done,
                                rsi_err *err) {
  uint64_t mine[HELLO_WORDS] = {done ? DONE_MAGIC : HELLO_MAGIC, 0,
                                plan->fingerprint, plan->exec->serial,
                                plan->exec->epoch};
  return exchange_start(plan, x, plan->exec->peers, plan->exec->npeers,
                        done ? RSI_TAG_DONE : RSI_TAG_HELLO, mine, HELLO_WORDS,
                        err);
}

rs_status rsi_guard_greet_check(rs_plan *plan, rsi_exchange *x, bool *done,
                                rsi_err *err) {
  rs_context *ctx = plan->ctx;
  RSI_TRY(exchange_check(plan, x, done, err));
  if (!*done) return RS_OK;
  const uint64_t *mine = x->mine;
  for (int i = 0; i < x->n; i++) {
    const uint64_t *w = x->theirs + (size_t)i * HELLO_WORDS;
    if (w[2] == mine[2] && w[3] == mine[3] && w[4] == mine[4]) continue;
    ctx->culprit = x->ranks[i];
    *done = false;
    return RSI_FAIL(err, RS_ERR_MISMATCH,
                    "rank %d runs execution %llu of plan %016llx (plan %llu "
                    "agreed on this context) while rank %d runs execution "
                    "%llu of plan %016llx (plan %llu): every rank must "
                    "execute the same plans in the same order",
                    x->ranks[i], (unsigned long long)w[4],
                    (unsigned long long)w[2], (unsigned long long)w[3],
                    ctx->rank, (unsigned long long)mine[4],
                    (unsigned long long)mine[2], (unsigned long long)mine[3]);
  }
  return RS_OK;
}

/* ---- the phases ---------------------------------------------------------- */

rs_status rsi_guard_prepare(rs_plan *plan, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  ctx->culprit = ctx->cause_rank = -1;
  RSI_TRY(find_peers(plan, err));
  rs_status st = RS_OK;
  if (!plan->exec->agreed) {
    bool exchanged = false;
    st = agree(plan, NULL, &exchanged, err);
    if (st != RS_OK && exchanged) return st; /* they agree to disagree */
  }
  if (st == RS_OK) {
    plan->exec->epoch++;
    st = check_notices(plan, ctx->rank, RSI_NO_GROUP, err);
  }
  if (st != RS_OK) rsi_guard_fail(plan, st);
  return st;
}

rs_status rsi_guard_refuse(rs_plan *plan, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_err refusal = *err;
  ctx->culprit = ctx->cause_rank = -1;
  if (find_peers(plan, err) != RS_OK) *err = refusal; /* then none is told */
  if (plan->exec->agreed) {
    RSI_FAIL(err, refusal.status,
             "%s; this rank gave up the execution and told the plan's "
             "peers: the context is done, destroy it",
             refusal.msg);
    rsi_guard_fail(plan, refusal.status);
    return refusal.status;
  }
  bool exchanged = false;
  rs_status st = agree(plan, &refusal, &exchanged, err);
  if (exchanged) return st;
  /* The agreement itself failed: that failure stands (and the context is
   * done), with the refusal that came first. */
  RSI_FAIL(err, st, "%s (this rank had refused the execution: %s)",
           err->msg, refusal.msg);
  rsi_guard_fail(plan, st);
  return st;
}

rs_status rsi_guard_last_look(rs_plan *plan, rsi_err *err) {
  return check_notices(plan, plan->ctx->rank, RSI_NO_GROUP, err);
}

void rsi_guard_fail(rs_plan *plan, rs_status status) {
  rs_context *ctx = plan->ctx;
  if (ctx->failed) return;
  if (ctx->cause_rank < 0) rsi_blame_self(ctx, status, ctx->culprit);
  rsi_context_fail_why(ctx, rsi_exec_err(plan));
  ctx->transport->ops->abandon(ctx->transport);
  send_notices(plan);
}
