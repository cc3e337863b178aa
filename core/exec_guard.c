/* The agreement, the hello, notices and bounded waits of an execution
 * between processes (exec_guard.h says why each exists). Control records
 * are little-endian words with a checksum word at the end, so a damaged
 * one is called corrupt, not a disagreement, whatever the integrity
 * setting. */
#include "exec_guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash.h"
#include "transport/transport.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_briefly(void) {
  struct timespec ts = {0, 20000}; /* 20 us */
  nanosleep(&ts, NULL);
}

/* ---- control records --------------------------------------------------- */

/* FNV-1a of the words as they travel (little-endian). */
static uint64_t words_sum(const uint64_t *words, int n) {
  uint64_t h = RSI_FNV1A64_BASIS;
  for (int i = 0; i < n; i++) {
    unsigned char b[8];
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)(words[i] >> (8 * k));
    h = rsi_fnv1a64_update(h, b, sizeof b);
  }
  return h;
}

/* words[0..n-2] and their checksum in words[n-1] */
static void seal(uint64_t *words, int n) {
  words[n - 1] = words_sum(words, n - 1);
}

static bool sealed(const uint64_t *words, int n) {
  return words[n - 1] == words_sum(words, n - 1);
}

/* Every record: magic, the context's nonce, its words, a checksum. */
#define AGREE_MAGIC 0x3145455247415352ull  /* "RSAGREE1" */
#define HELLO_MAGIC 0x314f4c4c45485352ull  /* "RSHELLO1" */
#define DONE_MAGIC 0x31454e4f44535352ull   /* "RSSDONE1" */
#define NOTICE_MAGIC 0x31454349544f4e52ull /* "RNOTICE1" */

/* + fingerprint, serial, epoch (the hello and the done record alike) */
enum { HELLO_WORDS = 6 };
/* + fingerprint, serial, epoch, the rank that gave up first, its status,
 * the rank it was waiting for + 1 */
enum { NOTICE_WORDS = 9 };
enum { MAX_RECORD_WORDS = 9 };

/* ---- peers --------------------------------------------------------------- */

/* The ranks this rank exchanges messages with in the plan, ascending. */
static rs_status find_peers(rs_plan *plan, rsi_err *err) {
  if (plan->peers) return RS_OK;
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
  plan->peers = peers;
  plan->npeers = (int)u;
  return RS_OK;
}

/* ---- notices ------------------------------------------------------------- */

static uint64_t load_u64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

static void store_u64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* Words travel little-endian whatever the host. */
static void to_wire(const uint64_t *words, int n, unsigned char *out) {
  for (int i = 0; i < n; i++) store_u64(out + 8 * i, words[i]);
}

static void from_wire(const unsigned char *in, int n, uint64_t *words) {
  for (int i = 0; i < n; i++) words[i] = load_u64(in + 8 * i);
}

/* A notice as it arrived: who sent it, and the cause it carries (the rank
 * that gave up first, its status, the rank it waited for or -1), which a
 * rank passes on instead of its own. */
typedef struct notice {
  int from, cause, culprit;
  rs_status status;
  uint64_t epoch;
  bool same_plan;
} notice;

/* One notice of this context, if one arrived. A damaged one is a failure
 * of its own (RS_ERR_CORRUPT in *st). */
static bool next_notice(rs_plan *plan, notice *n, rs_status *st,
                        rsi_err *err) {
  rsi_transport *tp = plan->ctx->transport;
  *st = RS_OK;
  if (!tp->ops->poll_notice) return false;
  unsigned char buf[RSI_NOTICE_BYTES];
  uint64_t w[NOTICE_WORDS];
  int from;
  for (;;) {
    if (!tp->ops->poll_notice(tp, &from, buf, sizeof buf)) return false;
    from_wire(buf, NOTICE_WORDS, w);
    if (w[0] != NOTICE_MAGIC || !sealed(w, NOTICE_WORDS)) {
      *st = RSI_FAIL(err, RS_ERR_CORRUPT,
                     "rank %d: a notice from rank %d failed its checksum",
                     plan->ctx->rank, from);
      return false;
    }
    if (w[1] == tp->nonce) break; /* else meant for a destroyed context */
  }
  *n = (notice){from, (int)w[5], (int)w[7] - 1, (rs_status)w[6], w[4],
                w[2] == plan->fingerprint && w[3] == plan->serial};
  return true;
}

/* Tell the plan's peers why this rank gives up: the cause it holds, its
 * own or one a notice brought. Sent again whenever that cause improves. */
static void send_notices(rs_plan *plan) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  if (!tp->ops->notify || !plan->peers) return;
  uint64_t w[NOTICE_WORDS] = {NOTICE_MAGIC,
                              tp->nonce,
                              plan->fingerprint,
                              plan->serial,
                              plan->epoch,
                              (uint64_t)ctx->cause_rank,
                              (uint64_t)ctx->cause_status,
                              (uint64_t)(ctx->culprit + 1),
                              0};
  seal(w, NOTICE_WORDS);
  unsigned char buf[NOTICE_WORDS * 8];
  to_wire(w, NOTICE_WORDS, buf);
  rsi_err ignored; /* best effort: the peer may be gone */
  for (int i = 0; i < plan->npeers; i++)
    tp->ops->notify(tp, plan->peers[i], buf, sizeof buf, &ignored);
}

/* This rank gives up for its own reason. */
static void blame_self(rs_context *ctx, rs_status status, int culprit) {
  ctx->cause_rank = ctx->rank;
  ctx->cause_status = status;
  ctx->culprit = culprit;
}

/* Take a notice's cause as ours, unless it blames this very rank (two
 * ranks that timed out on each other: keep our own). */
static bool adopt(rs_context *ctx, const notice *n) {
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
  int64_t until = now_ms() + grace_ms(ctx);
  while (now_ms() < until && ctx->cause_status == RS_ERR_TIMEOUT) {
    notice n;
    rs_status st;
    rsi_err ignored;
    bool got = next_notice(plan, &n, &st, &ignored);
    if (got && n.from == blamed && adopt(ctx, &n)) send_notices(plan);
    if (!got) pause_briefly();
  }
}

/* The failure this rank reports, from the cause it holds. */
static rs_status report(rs_plan *plan, const notice *via, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rs_status st = ctx->cause_status == RS_ERR_TIMEOUT ? RS_ERR_TIMEOUT
                                                      : RS_ERR_TRANSPORT;
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
                  rs_status_name(ctx->cause_status), waited, passed);
}

/* The first operation of a group still pending: its peer (-1: none). */
static int late_peer(rs_plan *plan, int group, bool *is_recv, size_t *bytes) {
  rsi_transport *tp = plan->ctx->transport;
  int peer = -1;
  *is_recv = true;
  *bytes = 0;
  if (group < 0 || !tp->ops->pending ||
      !tp->ops->pending(tp, group, &peer, is_recv, bytes))
    return -1;
  return peer;
}

/* A notice arrived while this rank waited for `group` (-1: none): give up
 * with its cause, settled first when it is a timeout. A notice that blames
 * this rank (its sender waited for us) says nothing of who is silent: then
 * the rank we wait for ourselves is the lead to follow. */
static rs_status heard(rs_plan *plan, int group, const notice *n,
                       rsi_err *err) {
  rs_context *ctx = plan->ctx;
  int lead = n->from;
  if (!adopt(ctx, n)) {
    bool is_recv;
    size_t bytes;
    lead = late_peer(plan, group, &is_recv, &bytes);
    blame_self(ctx, RS_ERR_TIMEOUT, lead);
  }
  send_notices(plan);
  if (lead >= 0) settle(plan, lead);
  return report(plan, n, err);
}

/* Our own timeout waiting for a group. */
static rs_status timed_out(rs_plan *plan, int group, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  bool is_recv;
  size_t bytes;
  int peer = late_peer(plan, group, &is_recv, &bytes);
  blame_self(ctx, RS_ERR_TIMEOUT, peer);
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

/* RS_OK, or the failure a notice that arrived brings (while waiting for
 * `group`, or -1). */
static rs_status check_notices(rs_plan *plan, int group, rsi_err *err) {
  notice n;
  rs_status st;
  if (next_notice(plan, &n, &st, err)) return heard(plan, group, &n, err);
  return st;
}

rs_status rsi_guard_wait(rs_plan *plan, int group, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  int64_t deadline = now_ms() + ctx->timeout_ms;
  for (;;) {
    bool done = false;
    RSI_TRY(tp->ops->test(tp, group, &done, err));
    if (done) return RS_OK;
    RSI_TRY(check_notices(plan, group, err));
    if (now_ms() >= deadline) return timed_out(plan, group, err);
    pause_briefly();
  }
}

/* ---- exchanging records ------------------------------------------------- */

/* Send record `mine` (`words` words, sealed here) to each of `ranks` and
 * receive theirs into theirs[i * words ...]. A record of another context
 * (a leftover its engine delivered here) is dropped and received again. */
static rs_status exchange(rs_plan *plan, const int *ranks, int n, uint64_t tag,
                          uint64_t *mine, int words, uint64_t *theirs,
                          rsi_err *err) {
  rs_context *ctx = plan->ctx;
  rsi_transport *tp = ctx->transport;
  size_t bytes = (size_t)words * 8;
  unsigned char out[MAX_RECORD_WORDS * 8];
  unsigned char *in = malloc((size_t)(n ? n : 1) * bytes);
  bool *open = calloc((size_t)(n ? n : 1), sizeof *open);
  if (!in || !open) {
    free(in);
    free(open);
    return RSI_NOMEM(err);
  }
  mine[1] = tp->nonce;
  seal(mine, words);
  to_wire(mine, words, out);
  rs_status st = RS_OK;
  const void *data;
  for (int i = 0; i < n && st == RS_OK; i++) {
    open[i] = true;
    st = tp->ops->recv(tp, RSI_GROUP_CONTROL, ctx->rank, ranks[i], tag,
                       in + (size_t)i * bytes, bytes, &data, err);
    if (st == RS_OK)
      st = tp->ops->send(tp, RSI_GROUP_CONTROL, ctx->rank, ranks[i], tag, out,
                         bytes, err);
  }
  for (bool again = true; again && st == RS_OK;) {
    again = false;
    st = rsi_guard_wait(plan, RSI_GROUP_CONTROL, err);
    for (int i = 0; i < n && st == RS_OK; i++) {
      if (!open[i]) continue;
      uint64_t *w = theirs + (size_t)i * (size_t)words;
      from_wire(in + (size_t)i * bytes, words, w);
      if (w[0] != mine[0] || !sealed(w, words)) {
        ctx->culprit = ranks[i];
        st = RSI_FAIL(err, RS_ERR_CORRUPT,
                      "rank %d: the %s record from rank %d failed its "
                      "checksum",
                      ctx->rank,
                      tag == RSI_TAG_AGREE   ? "fingerprint"
                      : tag == RSI_TAG_HELLO ? "hello"
                                             : "done",
                      ranks[i]);
      } else if (w[1] != tp->nonce) { /* another context's: receive again */
        again = true;
        st = tp->ops->recv(tp, RSI_GROUP_CONTROL, ctx->rank, ranks[i], tag,
                           in + (size_t)i * bytes, bytes, &data, err);
      } else {
        open[i] = false;
      }
    }
  }
  free(in);
  free(open);
  return st;
}

/* ---- the agreement ------------------------------------------------------- */

/* + section hashes, plans agreed so far on the context */
enum { AGREE_SECTIONS = 4, AGREE_WORDS = AGREE_SECTIONS + 4 };

/* Every rank sends its words to every other (point to point, so a rank
 * that never calls is named by the timeout); all see all and reach one
 * verdict. */
static rs_status agree(rs_plan *plan, rsi_err *err) {
  static const char *section[AGREE_SECTIONS] = {
      "tensor declarations", "source layout", "destination layout",
      "world, domains, staging or integrity setting"};
  rs_context *ctx = plan->ctx;
  int me = ctx->rank, world = ctx->world_size;
  int *others = calloc((size_t)world, sizeof *others);
  uint64_t *all = malloc((size_t)world * AGREE_WORDS * sizeof *all);
  if (!others || !all) {
    free(others);
    free(all);
    return RSI_NOMEM(err);
  }
  int n = 0;
  for (int r = 0; r < world; r++)
    if (r != me) others[n++] = r;
  uint64_t mine[AGREE_WORDS] = {AGREE_MAGIC};
  memcpy(mine + 2, plan->section_hash, sizeof plan->section_hash);
  mine[2 + AGREE_SECTIONS] = ctx->agreements;
  rs_status st = exchange(plan, others, n, RSI_TAG_AGREE, mine, AGREE_WORDS,
                          all + AGREE_WORDS, err);
  /* Rank r's record goes to all[r]: those below me move down one place
   * (ascending, so nothing is overwritten before it moved). */
  for (int i = 0; st == RS_OK && i < me; i++)
    memmove(all + (size_t)i * AGREE_WORDS, all + (size_t)(i + 1) * AGREE_WORDS,
            AGREE_WORDS * sizeof *all);
  if (st == RS_OK) memcpy(all + (size_t)me * AGREE_WORDS, mine, sizeof mine);
  const uint64_t *first = all;
  for (int r = 1; r < world && st == RS_OK; r++) {
    const uint64_t *w = all + (size_t)r * AGREE_WORDS;
    for (int k = 0; k < AGREE_SECTIONS && st == RS_OK; k++)
      if (w[2 + k] != first[2 + k])
        st = RSI_FAIL(err, RS_ERR_MISMATCH,
                      "rank %d and rank 0 disagree on the %s (hash %016llx "
                      "vs %016llx): every rank must build the same layouts",
                      r, section[k], (unsigned long long)w[2 + k],
                      (unsigned long long)first[2 + k]);
    if (st == RS_OK && w[2 + AGREE_SECTIONS] != first[2 + AGREE_SECTIONS])
      st = RSI_FAIL(err, RS_ERR_MISMATCH,
                    "rank %d has agreed %llu plans on this context and rank "
                    "0 %llu: the ranks disagree on which plan this is",
                    r, (unsigned long long)w[2 + AGREE_SECTIONS],
                    (unsigned long long)first[2 + AGREE_SECTIONS]);
  }
  free(others);
  free(all);
  if (st != RS_OK) return st;
  plan->serial = ++ctx->agreements;
  plan->agreed = true;
  return RS_OK;
}

/* ---- the hello and the done record ---------------------------------------- */

/* Exchange (plan, serial, epoch) with every peer of the plan: before the
 * data (hello, RSI_TAG_HELLO) and after it (done, RSI_TAG_DONE). */
static rs_status greet(rs_plan *plan, uint64_t magic, uint64_t tag,
                       rsi_err *err) {
  rs_context *ctx = plan->ctx;
  uint64_t mine[HELLO_WORDS] = {magic, 0, plan->fingerprint, plan->serial,
                                plan->epoch};
  uint64_t *in = malloc((size_t)(plan->npeers ? plan->npeers : 1) *
                        HELLO_WORDS * sizeof *in);
  if (!in) return RSI_NOMEM(err);
  rs_status st = exchange(plan, plan->peers, plan->npeers, tag, mine,
                          HELLO_WORDS, in, err);
  for (int i = 0; i < plan->npeers && st == RS_OK; i++) {
    const uint64_t *w = in + (size_t)i * HELLO_WORDS;
    if (w[2] == mine[2] && w[3] == mine[3] && w[4] == mine[4]) continue;
    ctx->culprit = plan->peers[i];
    st = RSI_FAIL(err, RS_ERR_MISMATCH,
                  "rank %d runs execution %llu of plan %016llx (plan %llu "
                  "agreed on this context) while rank %d runs execution "
                  "%llu of plan %016llx (plan %llu): every rank must execute "
                  "the same plans in the same order",
                  plan->peers[i], (unsigned long long)w[4],
                  (unsigned long long)w[2], (unsigned long long)w[3],
                  ctx->rank, (unsigned long long)mine[4],
                  (unsigned long long)mine[2], (unsigned long long)mine[3]);
  }
  free(in);
  return st;
}

/* ---- the phases ---------------------------------------------------------- */

rs_status rsi_guard_begin(rs_plan *plan, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  ctx->culprit = ctx->cause_rank = -1;
  RSI_TRY(find_peers(plan, err));
  rs_status st = RS_OK;
  if (!plan->agreed) {
    st = agree(plan, err);
    if (st == RS_ERR_MISMATCH) return st; /* the ranks agree to disagree */
  }
  if (st == RS_OK) {
    plan->epoch++;
    st = check_notices(plan, -1, err);
  }
  if (st == RS_OK) st = greet(plan, HELLO_MAGIC, RSI_TAG_HELLO, err);
  if (st != RS_OK) rsi_guard_fail(plan, st);
  return st;
}

rs_status rsi_guard_end(rs_plan *plan, rsi_err *err) {
  rs_status st = check_notices(plan, -1, err);
  if (st == RS_OK) st = greet(plan, DONE_MAGIC, RSI_TAG_DONE, err);
  if (st == RS_OK) st = check_notices(plan, -1, err);
  if (st != RS_OK) rsi_guard_fail(plan, st);
  return st;
}

void rsi_guard_fail(rs_plan *plan, rs_status status) {
  rs_context *ctx = plan->ctx;
  if (ctx->failed) return;
  if (ctx->cause_rank < 0) blame_self(ctx, status, ctx->culprit);
  rsi_context_fail(ctx);
  ctx->transport->ops->abandon(ctx->transport);
  send_notices(plan);
}
