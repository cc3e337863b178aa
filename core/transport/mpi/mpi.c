/* SPDX-License-Identifier: Apache-2.0 */
/* The MPI transport module: one rank per process, non-blocking
 * point-to-point messages on a duplicate of the caller's communicator,
 * waits that give up after a timeout and name the peer that did not answer.
 * Notices (a rank telling its peers it gave up) travel on a tag of their
 * own and are caught by one standing any-source receive.
 * Built into libreshard-mpi.so; libreshard loads it (transport/module.c).
 *
 * Integrity (set_integrity): a message travels as chunks of SUM_CHUNK
 * bytes, each its own MPI message, and each chunk has its XXH3-64
 * checksum, hashed a chunk at a time as the chunks complete, never in a
 * pass of its own after the transfer:
 * - the receiver hashes a chunk as soon as its receive completes (test
 *   finds it with MPI_Testsome), right after MPI wrote it, still in cache;
 * - the sender hashes a chunk of its own bytes (the truth) as soon as its
 *   send completes, after the receiver's single copy (CMA) read it (with
 *   more processes than cores, the chunk has mostly left the cache by the
 *   time the sender runs: README, "Why integrity costs more than 15%"),
 *   and once every chunk of a message is hashed sends the message's
 *   checksums, one uint64 per chunk, on a second duplicate communicator
 *   (same tag; a sender posts them in the order of its messages, so they
 *   match in order whenever they go out). The sender's bytes are its own
 *   until the group is done, so hashing them after the transfer covers
 *   exactly what was sent.
 * The group is done once every chunk and every checksum message completed;
 * then each received chunk's checksum is compared (a mismatch is
 * RS_ERR_CORRUPT naming the sender). XXH3 runs as its AVX2 build where the
 * CPU has AVX2 (xxh3_avx2.c; the same function, about 2.4x the speed of
 * the baseline SSE2 build of the system library on bytes in cache).
 *
 * Fault injection, for the reliability tests only (read at creation):
 *   RESHARD_FAULT_CORRUPT_SEND=n   the n-th message this process sends
 *                                  carries one flipped bit (its checksums
 *                                  are those of the bytes it should carry)
 *   RESHARD_FAULT_EXIT_AFTER_SENDS=n  the process exits right after posting
 *                                  its n-th send, as if it had died */
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/clock.h"
#include "base/grow.h"
#include "transport/transport.h"

#define CHUNK_BYTES ((size_t)1 << 30) /* MPI counts are int */
/* With integrity on: the bytes one checksum covers, one MPI message each.
 * Small enough that a chunk just written or read is still in a cache when
 * it is hashed, large enough that the messages it adds cost little. */
#define SUM_CHUNK ((size_t)1 << 19)
/* With integrity on, a receiver posts the chunks of its messages this many
 * at a time, in order: MPI copies a chunk when it matches it, and one
 * progress call would otherwise copy every chunk that arrived (tens of
 * MiB), which are cold again by the time they are hashed. */
#define RECV_WINDOW 2
#define MAX_TAG 30000 /* step tags wrap below it; control tags sit above */
#define NOTICE_TAG (MAX_TAG + 100)
#define GROUPS (RSI_DATA_GROUPS + 1) /* the step groups, then control */
#define CONTROL_GROUP RSI_DATA_GROUPS

static int mpi_tag(uint64_t tag) {
  return tag >= RSI_TAG_CONTROL ? MAX_TAG + (int)(tag - RSI_TAG_CONTROL)
                                : (int)(tag % MAX_TAG);
}

/* XXH3-64: the system library's, or its AVX2 build (xxh3_avx2.c). */
static uint64_t xxh3_lib(const void *p, size_t n) { return XXH3_64bits(p, n); }
#ifdef RSI_XXH3_AVX2
uint64_t rsi_xxh3_avx2(const void *p, size_t n);
#endif
static uint64_t (*xxh3)(const void *, size_t) = xxh3_lib;

static void pick_xxh3_once(void) {
#ifdef RSI_XXH3_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) xxh3 = rsi_xxh3_avx2;
#endif
}

/* A progress thread calls MPI while the caller may call it too: that
 * needs MPI_THREAD_MULTIPLE. The level MPI was initialised with, when it
 * is lower, in a sentence. */
static const char *progress_refusal(void) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level >= MPI_THREAD_MULTIPLE) return NULL;
  return level == MPI_THREAD_SERIALIZED
             ? "MPI was initialised with MPI_THREAD_SERIALIZED; a progress "
               "thread calling MPI beside the caller needs "
               "MPI_THREAD_MULTIPLE (MPI_Init_thread)"
         : level == MPI_THREAD_FUNNELED
             ? "MPI was initialised with MPI_THREAD_FUNNELED; a progress "
               "thread calling MPI beside the caller needs "
               "MPI_THREAD_MULTIPLE (MPI_Init_thread)"
             : "MPI was initialised with MPI_THREAD_SINGLE; a progress "
               "thread calling MPI beside the caller needs "
               "MPI_THREAD_MULTIPLE (MPI_Init_thread)";
}

/* Once per process, whichever thread creates a context first. */
static void pick_xxh3(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pick_xxh3_once);
}

typedef struct op_info {
  int peer, is_recv;
  size_t bytes;
  /* integrity: the message it belongs to (index into the group's msgs,
   * -1: none), and which chunk it carries (-1: the checksums) */
  int msg, chunk;
  /* a copy sent instead of the caller's bytes (fault injection) */
  void *owned;
} op_info;

/* A message under integrity. */
typedef struct msg_rec {
  int peer, tag;
  bool is_recv;
  const char *bytes; /* receiver: where they land; sender: the truth */
  size_t size;
  int nchunks, left; /* chunks, those not completed yet */
  int posted; /* receiver: chunks posted so far (RECV_WINDOW) */
  /* one checksum per chunk: the sender's (sent, or received); MPI reads
   * or writes it, so it is buried when abandoned */
  uint64_t *sums;
  uint64_t *mine; /* receiver: those of what arrived */
} msg_rec;

/* A control receive lands in memory the transport owns, and is copied to
 * the caller's buffer when its group completes: the caller's buffer may be
 * freed once a failure abandons the receive, which MPI may still fill. */
typedef struct landing {
  void *owned, *to;
  size_t bytes;
} landing;

typedef struct op_group {
  MPI_Request *reqs;
  op_info *info;
  int *done_idx; /* MPI_Testsome's indices */
  int n, cap;
  msg_rec *msgs; /* integrity only */
  int nmsgs, capmsgs;
  int next_sums; /* messages before it: checksums posted (or received) */
  /* receives under integrity: messages before next_recv have every chunk
   * posted; inflight chunks are posted and not completed */
  int next_recv, inflight;
  landing *lands;
  int64_t nlands, caplands;
} op_group;

typedef struct mpi_transport {
  rsi_transport base;
  MPI_Comm comm;
  MPI_Comm sum_comm; /* the checksums of messages under integrity */
  int rank, world;
  op_group groups[GROUPS];
  MPI_Request notice_req; /* the standing receive of notices */
  unsigned char notice_buf[RSI_NOTICE_BYTES];
  /* A notice that a collective's wait found (notice_from sent it): kept
   * for mpi_poll_notice, which hands it on before receiving another. */
  bool notice_held;
  int notice_from;
  bool integrity;
  bool broken; /* a collective was abandoned: the communicator is unusable */
  /* Operations were abandoned: peers may still send on the communicator,
   * so it is never freed (MPI would reuse its id for a later one, where
   * those messages would then arrive). */
  bool tainted;
  long sends, corrupt_send, exit_after_sends;
} mpi_transport;

static rs_status mpi_fail(rsi_err *err, int code, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  text[len] = '\0';
  return RSI_FAIL(err, RS_ERR_TRANSPORT, "%s failed: %s", what, text);
}



static rs_status push_op(op_group *g, op_info info, MPI_Request **slot,
                         rsi_err *err) {
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 64;
    MPI_Request *r = realloc(g->reqs, (size_t)cap * sizeof *r);
    if (!r) return RSI_NOMEM(err);
    g->reqs = r;
    op_info *i = realloc(g->info, (size_t)cap * sizeof *i);
    if (!i) return RSI_NOMEM(err);
    g->info = i;
    int *d = realloc(g->done_idx, (size_t)cap * sizeof *d);
    if (!d) return RSI_NOMEM(err);
    g->done_idx = d;
    g->cap = cap;
  }
  g->info[g->n] = info;
  *slot = &g->reqs[g->n++];
  return RS_OK;
}

static rs_status post(mpi_transport *mt, int group, op_info info,
                      const void *data, size_t bytes, int peer, int tag,
                      MPI_Comm comm, rsi_err *err) {
  MPI_Request *req = NULL;
  RSI_TRY(push_op(&mt->groups[group], info, &req, err));
  int rc = info.is_recv ? MPI_Irecv((void *)data, (int)bytes, MPI_BYTE, peer,
                                    tag, comm, req)
                        : MPI_Isend(data, (int)bytes, MPI_BYTE, peer, tag,
                                    comm, req);
  if (rc != MPI_SUCCESS) {
    mt->groups[group].n--;
    free(info.owned);
    return mpi_fail(err, rc, info.is_recv ? "MPI_Irecv" : "MPI_Isend");
  }
  return RS_OK;
}

/* A message under integrity: its record (*out: its index). */
static rs_status add_msg(op_group *g, msg_rec m, int *out, rsi_err *err) {
  if (g->nmsgs == g->capmsgs) {
    int cap = g->capmsgs ? g->capmsgs * 2 : 16;
    msg_rec *r = realloc(g->msgs, (size_t)cap * sizeof *r);
    if (!r) return RSI_NOMEM(err);
    g->msgs = r;
    g->capmsgs = cap;
  }
  m.sums = calloc((size_t)m.nchunks, sizeof *m.sums);
  m.mine = m.is_recv ? calloc((size_t)m.nchunks, sizeof *m.mine) : NULL;
  if (!m.sums || (m.is_recv && !m.mine)) {
    free(m.sums);
    free(m.mine);
    return RSI_NOMEM(err);
  }
  *out = g->nmsgs;
  g->msgs[g->nmsgs++] = m;
  return RS_OK;
}

/* Integrity: post the receiver's next chunks, in the order of its
 * messages, up to RECV_WINDOW in flight (all: every one left). */
static rs_status feed(mpi_transport *mt, int group, bool all, rsi_err *err) {
  op_group *g = &mt->groups[group];
  while (g->next_recv < g->nmsgs && (all || g->inflight < RECV_WINDOW)) {
    msg_rec *m = &g->msgs[g->next_recv];
    if (!m->is_recv || m->posted == m->nchunks) {
      g->next_recv++;
      continue;
    }
    size_t at = (size_t)m->posted * SUM_CHUNK;
    size_t n = m->size - at < SUM_CHUNK ? m->size - at : SUM_CHUNK;
    op_info info = {m->peer, true, n, g->next_recv, m->posted, NULL};
    RSI_TRY(post(mt, group, info, (char *)m->bytes + at, n, m->peer, m->tag,
                 mt->comm, err));
    m->posted++;
    g->inflight++;
  }
  return RS_OK;
}

/* Post a message as chunks MPI counts can hold. Under integrity, chunks of
 * SUM_CHUNK, each checksummed on completion (test_group): a sender posts
 * them all; a receiver posts the receive of the checksums, and its chunks
 * RECV_WINDOW at a time (feed). */
static rs_status post_message(mpi_transport *mt, int group, bool is_recv,
                              int peer, uint64_t tag, const void *data,
                              size_t bytes, void *owned, const void *truth,
                              rsi_err *err) {
  op_group *g = &mt->groups[group];
  int t = mpi_tag(tag), msg = -1;
  if (!mt->integrity) {
    /* chunks held back must match first, as posted */
    if (is_recv) RSI_TRY(feed(mt, group, true, err));
    size_t at = 0;
    do {
      size_t n = bytes - at < CHUNK_BYTES ? bytes - at : CHUNK_BYTES;
      op_info info = {peer, is_recv, n, -1, -1, at == 0 ? owned : NULL};
      RSI_TRY(post(mt, group, info, (const char *)data + at, n, peer, t,
                   mt->comm, err));
      at += n;
    } while (at < bytes);
    return RS_OK;
  }
  int nchunks = bytes ? (int)((bytes - 1) / SUM_CHUNK + 1) : 1;
  msg_rec rec = {peer, t, is_recv, is_recv ? data : truth, bytes,
                 nchunks, nchunks, 0, NULL, NULL};
  rs_status st = add_msg(g, rec, &msg, err);
  if (st != RS_OK) {
    free(owned);
    return st;
  }
  msg_rec *m = &g->msgs[msg];
  if (is_recv) {
    op_info info = {peer, true, (size_t)nchunks * sizeof *m->sums, msg, -1,
                    NULL};
    RSI_TRY(post(mt, group, info, m->sums, info.bytes, peer, t, mt->sum_comm,
                 err));
    return feed(mt, group, false, err);
  }
  size_t at = 0;
  int k = 0;
  do {
    size_t n = bytes - at < SUM_CHUNK ? bytes - at : SUM_CHUNK;
    op_info info = {peer, false, n, msg, k++, at == 0 ? owned : NULL};
    RSI_TRY(post(mt, group, info, (const char *)data + at, n, peer, t,
                 mt->comm, err));
    at += n;
  } while (at < bytes);
  return RS_OK; /* its checksums go out at test (post_sums) */
}

static rs_status mpi_send(rsi_transport *t, int group, int from, int to,
                          uint64_t tag, const void *data, size_t bytes,
                          rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  (void)from;
  mt->sends++;
  /* A control record (a few hundred bytes) goes out from a copy the
   * transport owns: the caller's record may live on its stack, and a send
   * abandoned after a failure (drop_groups) may still be read by MPI after
   * the caller returned; an owned copy is buried instead. */
  bool corrupt = mt->sends == mt->corrupt_send;
  void *copy = NULL;
  if ((corrupt || group == CONTROL_GROUP) && bytes > 0) {
    copy = malloc(bytes);
    if (!copy) return RSI_NOMEM(err);
    memcpy(copy, data, bytes);
    if (corrupt) ((unsigned char *)copy)[bytes / 2] ^= 0x10;
  }
  rs_status st = post_message(mt, group, false, to, tag, copy ? copy : data,
                              bytes, copy, corrupt || !copy ? data : copy,
                              err);
  if (mt->sends == mt->exit_after_sends) _exit(0);
  return st;
}

/* A control receive's landing: owned memory, listed before anything is
 * posted into it, so that release or drop_groups always finds it. */
static rs_status add_landing(op_group *g, void *to, size_t bytes,
                             void **owned, rsi_err *err) {
  RSI_TRY(rsi_grow((void **)&g->lands, &g->caplands, g->nlands + 1,
                   sizeof *g->lands, 16, err));
  *owned = malloc(bytes);
  if (!*owned) return RSI_NOMEM(err);
  g->lands[g->nlands++] = (landing){*owned, to, bytes};
  return RS_OK;
}

static rs_status mpi_recv(rsi_transport *t, int group, int to, int from,
                          uint64_t tag, void *buf, size_t bytes,
                          const void **view, rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  (void)to;
  if (view) *view = buf;
  void *into = buf;
  if (group == CONTROL_GROUP && bytes > 0)
    RSI_TRY(add_landing(&mt->groups[group], buf, bytes, &into, err));
  return post_message(mt, group, true, from, tag, into, bytes, NULL, NULL,
                      err);
}

static void mpi_set_integrity(rsi_transport *t, bool on) {
  ((mpi_transport *)t)->integrity = on;
}

/* Every operation of the group completed: what landed goes where it was
 * asked for. */
static void deliver_landings(op_group *g) {
  for (int64_t i = 0; i < g->nlands; i++)
    memcpy(g->lands[i].to, g->lands[i].owned, g->lands[i].bytes);
}

/* Free what the group's operations own. */
static void release(op_group *g) {
  for (int i = 0; i < g->n; i++) free(g->info[i].owned);
  for (int64_t i = 0; i < g->nlands; i++) free(g->lands[i].owned);
  g->nlands = 0;
  for (int i = 0; i < g->nmsgs; i++) {
    free(g->msgs[i].sums);
    free(g->msgs[i].mine);
  }
  g->n = 0;
  g->nmsgs = 0;
  g->next_sums = 0;
  g->next_recv = 0;
  g->inflight = 0;
}

/* Memory that operations abandoned after a failure may still touch: a
 * peer that comes late can still match them, even after the context is
 * gone. It is kept (reachable) for the life of the process; only failed
 * transfers add to it. */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static void **graveyard;
static size_t ngrave, capgrave;

static void bury(mpi_transport *mt, void *p) {
  (void)mt;
  if (!p) return;
  pthread_mutex_lock(&graveyard_lock);
  if (ngrave == capgrave) {
    size_t cap = capgrave ? capgrave * 2 : 16;
    void **g = realloc(graveyard, cap * sizeof *g);
    if (g) {
      graveyard = g;
      capgrave = cap;
    }
  }
  if (ngrave < capgrave) graveyard[ngrave++] = p;
  pthread_mutex_unlock(&graveyard_lock);
}

static void mpi_adopt(rsi_transport *t, void *p) { bury((mpi_transport *)t, p); }

/* Abandon groups after a failure: every receive is cancelled at once, then
 * all are given one shared, short grace to complete. One that a dying peer
 * left half-delivered may never complete; it is let go, and whatever an
 * abandoned operation may still touch is kept (bury). */
static void drop_groups(mpi_transport *mt, op_group *const *gs, int ngroups) {
  for (int k = 0; k < ngroups; k++)
    for (int i = 0; i < gs[k]->n; i++)
      if (gs[k]->reqs[i] != MPI_REQUEST_NULL && gs[k]->info[i].is_recv)
        MPI_Cancel(&gs[k]->reqs[i]);
  int64_t until = rsi_now_ms() + RSI_ABANDON_MS;
  for (bool open = true; open && rsi_now_ms() < until;) {
    open = false;
    for (int k = 0; k < ngroups; k++)
      for (int i = 0; i < gs[k]->n; i++) {
        if (gs[k]->reqs[i] == MPI_REQUEST_NULL || !gs[k]->info[i].is_recv)
          continue;
        int done = 0;
        MPI_Test(&gs[k]->reqs[i], &done, MPI_STATUS_IGNORE);
        open |= !done;
      }
    if (open) rsi_pause();
  }
  for (int k = 0; k < ngroups; k++) {
    op_group *g = gs[k];
    bool let_go = false;
    for (int i = 0; i < g->n; i++) {
      if (g->reqs[i] == MPI_REQUEST_NULL) continue;
      let_go = true;
      MPI_Request_free(&g->reqs[i]); /* let it finish in the background */
      bury(mt, g->info[i].owned);
      g->info[i].owned = NULL;
      if (g->info[i].msg >= 0) { /* its checksums may still be touched */
        bury(mt, g->msgs[g->info[i].msg].sums);
        g->msgs[g->info[i].msg].sums = NULL;
      }
    }
    /* a receive let go may still land, in any of them */
    for (int64_t i = 0; let_go && i < g->nlands; i++)
      bury(mt, g->lands[i].owned);
    if (let_go) g->nlands = 0;
    release(g);
  }
}

static void drop_group(mpi_transport *mt, op_group *g) {
  drop_groups(mt, &g, 1);
}

/* Integrity: a chunk completed; hash it while its bytes are hot (a
 * receiver's just arrived; a sender's were just read by the receiver). */
static void chunk_done(op_group *g, const op_info *in) {
  if (in->msg < 0 || in->chunk < 0) return;
  msg_rec *m = &g->msgs[in->msg];
  const char *p = m->bytes + (size_t)in->chunk * SUM_CHUNK;
  uint64_t h = xxh3(p, in->bytes);
  m->left--;
  if (m->is_recv) {
    m->mine[in->chunk] = h;
    g->inflight--;
  } else
    m->sums[in->chunk] = h;
}

/* Integrity: post the checksums of the sender's messages whose every chunk
 * completed, in the order of the messages (so that they match in order on
 * the checksum communicator). *posted: any was. */
static rs_status post_sums(mpi_transport *mt, int group, bool *posted,
                           rsi_err *err) {
  op_group *g = &mt->groups[group];
  *posted = false;
  while (g->next_sums < g->nmsgs) {
    msg_rec *m = &g->msgs[g->next_sums];
    if (m->is_recv) {
      g->next_sums++;
      continue;
    }
    if (m->left > 0) break;
    int msg = g->next_sums++;
    op_info info = {m->peer, false, (size_t)m->nchunks * sizeof *m->sums,
                    msg, -1, NULL};
    RSI_TRY(post(mt, group, info, m->sums, info.bytes, m->peer, m->tag,
                 mt->sum_comm, err));
    *posted = true;
  }
  return RS_OK;
}

static rs_status test_group(rsi_transport *t, int group, bool *done_out,
                            rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  op_group *g = &mt->groups[group];
  int done = 0;
  *done_out = false;
  if (g->nmsgs == 0) { /* no integrity: one test of everything */
    int rc = MPI_Testall(g->n, g->reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      drop_group(mt, g);
      return mpi_fail(err, rc, "MPI_Testall");
    }
    if (!done) return RS_OK;
    deliver_landings(g);
    release(g);
    *done_out = true;
    return RS_OK;
  }
  for (bool again = true; again;) {
    rs_status st = feed(mt, group, false, err);
    if (st != RS_OK) {
      drop_group(mt, g);
      return st;
    }
    int out = 0;
    int rc = MPI_Testsome(g->n, g->reqs, &out, g->done_idx,
                          MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      drop_group(mt, g);
      return mpi_fail(err, rc, "MPI_Testsome");
    }
    for (int k = 0; k < out && out != MPI_UNDEFINED; k++)
      chunk_done(g, &g->info[g->done_idx[k]]);
    st = post_sums(mt, group, &again, err);
    if (st != RS_OK) {
      drop_group(mt, g);
      return st;
    }
    /* chunks completed: their window is free for the next ones */
    again |= out != MPI_UNDEFINED && out > 0 && g->next_recv < g->nmsgs;
  }
  if (g->next_sums < g->nmsgs || g->next_recv < g->nmsgs) return RS_OK;
  for (int i = 0; i < g->n; i++)
    if (g->reqs[i] != MPI_REQUEST_NULL) return RS_OK;
  rs_status st = RS_OK;
  for (int i = 0; i < g->nmsgs && st == RS_OK; i++) {
    const msg_rec *m = &g->msgs[i];
    for (int k = 0; m->is_recv && k < m->nchunks && st == RS_OK; k++)
      if (m->mine[k] != m->sums[k])
        st = RSI_FAIL(err, RS_ERR_CORRUPT,
                      "rank %d: a message of %zu bytes from rank %d failed "
                      "its checksum (at byte %zu); the destination may hold "
                      "its wrong bytes",
                      mt->rank, m->size, m->peer, (size_t)k * SUM_CHUNK);
  }
  deliver_landings(g);
  release(g);
  *done_out = true;
  return st;
}

/* The first operation still pending (Testall leaves every request as it
 * was when not all are done). */
static bool pending_in(rsi_transport *t, int group, int *peer, bool *is_recv,
                       size_t *bytes) {
  mpi_transport *mt = (mpi_transport *)t;
  op_group *g = &mt->groups[group];
  for (int i = 0; i < g->n; i++) {
    int done = 1;
    if (g->reqs[i] != MPI_REQUEST_NULL)
      MPI_Request_get_status(g->reqs[i], &done, MPI_STATUS_IGNORE);
    if (done) continue;
    *peer = g->info[i].peer;
    *is_recv = g->info[i].is_recv;
    *bytes = g->info[i].bytes;
    return true;
  }
  for (int i = g->next_recv; i < g->nmsgs; i++) /* chunks held back */
    if (g->msgs[i].is_recv && g->msgs[i].posted < g->msgs[i].nchunks) {
      *peer = g->msgs[i].peer;
      *is_recv = true;
      *bytes = g->msgs[i].size;
      return true;
    }
  return false;
}

static rs_status mpi_notify(rsi_transport *t, int to, const void *msg,
                            size_t bytes, rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  if (bytes > RSI_NOTICE_BYTES)
    return RSI_FAIL(err, RS_ERR_INTERNAL, "a notice of %zu bytes", bytes);
  /* The send may complete long after: its copy is kept (bury), and its
   * request is let go; notices are sent only when a rank gives up. */
  void *copy = malloc(RSI_NOTICE_BYTES);
  if (!copy) return RSI_NOMEM(err);
  memset(copy, 0, RSI_NOTICE_BYTES);
  memcpy(copy, msg, bytes);
  MPI_Request req;
  int rc = MPI_Isend(copy, RSI_NOTICE_BYTES, MPI_BYTE, to, NOTICE_TAG,
                     mt->comm, &req);
  if (rc != MPI_SUCCESS) {
    free(copy);
    return mpi_fail(err, rc, "MPI_Isend of a notice");
  }
  MPI_Request_free(&req);
  bury(mt, copy);
  return RS_OK;
}

/* Whether a notice has arrived (held until mpi_poll_notice takes it). */
static bool notice_arrived(mpi_transport *mt) {
  if (mt->notice_held) return true;
  if (mt->notice_req == MPI_REQUEST_NULL) return false;
  int done = 0;
  MPI_Status status;
  if (MPI_Test(&mt->notice_req, &done, &status) != MPI_SUCCESS || !done)
    return false;
  mt->notice_held = true;
  mt->notice_from = status.MPI_SOURCE;
  return true;
}

static bool mpi_poll_notice(rsi_transport *t, int *from, void *buf,
                            size_t cap) {
  mpi_transport *mt = (mpi_transport *)t;
  if (!notice_arrived(mt)) return false;
  *from = mt->notice_from;
  memcpy(buf, mt->notice_buf, cap < RSI_NOTICE_BYTES ? cap : RSI_NOTICE_BYTES);
  mt->notice_held = false;
  if (MPI_Irecv(mt->notice_buf, RSI_NOTICE_BYTES, MPI_BYTE, MPI_ANY_SOURCE,
                NOTICE_TAG, mt->comm, &mt->notice_req) != MPI_SUCCESS)
    mt->notice_req = MPI_REQUEST_NULL;
  return true;
}

static void mpi_abandon(rsi_transport *t) {
  mpi_transport *mt = (mpi_transport *)t;
  mt->tainted = true;
  op_group *all[GROUPS];
  for (int k = 0; k < GROUPS; k++) all[k] = &mt->groups[k];
  drop_groups(mt, all, GROUPS);
}

/* Wait for one request of a collective, polling, up to the timeout. A
 * notice (a peer gave up, and will not take part) or an abort of the
 * context ends the wait at once, as a timeout would: the collective stays
 * posted. */
static rs_status wait_one(mpi_transport *mt, MPI_Request *req,
                          int64_t timeout_ms, const char *what, rsi_err *err) {
  int64_t deadline = rsi_now_ms() + timeout_ms;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, what);
    if (done) return RS_OK;
    if (notice_arrived(mt)) {
      return RSI_FAIL(err, RS_ERR_TRANSPORT,
                      "rank %d: rank %d gave up on this context (a notice "
                      "came) while %s waited for it; the context is done",
                      mt->rank, mt->notice_from, what);
    }
    if (rsi_transport_aborted(&mt->base))
      return RSI_FAIL(err, RS_ERR_TRANSPORT,
                      "rank %d: %s was given up: the context was aborted "
                      "(rs_context_abort); the context is done",
                      mt->rank, what);
    if (rsi_now_ms() >= deadline)
      return RSI_FAIL(err, RS_ERR_TIMEOUT,
                      "rank %d: %s did not complete within %lld ms: some rank "
                      "did not take part",
                      mt->rank, what, (long long)timeout_ms);
    rsi_pause();
  }
}

/* A collective that timed out, or was given up for a notice or an error,
 * may stay posted: MPI may still write into its buffers, so they are left
 * allocated (leaked, deliberately) and the transport refuses further
 * collectives. */
static rs_status collective_usable(const mpi_transport *mt, rsi_err *err) {
  if (!mt->broken) return RS_OK;
  return RSI_FAIL(err, RS_ERR_TRANSPORT,
                  "rank %d: an earlier collective did not complete; this "
                  "context cannot exchange any more",
                  mt->rank);
}

/* The n buffers of a collective that ended with st: freed, or buried with
 * the collective when it did not complete. */
static rs_status collective_end(mpi_transport *mt, rs_status st, void **bufs,
                                int n) {
  bool posted = st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT;
  if (posted) mt->broken = true;
  for (int i = 0; i < n; i++) {
    if (posted)
      bury(mt, bufs[i]);
    else
      free(bufs[i]);
  }
  return st;
}

/* Byte counts and displacements for MPI's int-counted collectives; an
 * exchange over 2 GiB in all is refused. */
static rs_status int_counts(const mpi_transport *mt, const uint64_t *c64,
                            int *icounts, int *displs, uint64_t *total,
                            rsi_err *err) {
  *total = 0;
  for (int r = 0; r < mt->world; r++) {
    if (c64[r] > (uint64_t)INT32_MAX || *total + c64[r] > (uint64_t)INT32_MAX)
      return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                      "rank %d: an exchange of %llu bytes with rank %d "
                      "passes the 2 GiB MPI's counts allow in all",
                      mt->rank, (unsigned long long)(*total + c64[r]), r);
    icounts[r] = (int)c64[r];
    displs[r] = (int)*total;
    *total += c64[r];
  }
  return RS_OK;
}

static rs_status mpi_allgatherv(rsi_transport *t, const void *mine,
                                size_t bytes, void **all, size_t *counts,
                                int64_t timeout_ms, rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  RSI_TRY(collective_usable(mt, err));
  size_t w = (size_t)mt->world;
  uint64_t *c64 = malloc((w + 1) * sizeof *c64);
  int *ints = malloc(2 * w * sizeof *ints);
  void *mine_copy = malloc(bytes ? bytes : 1);
  rs_status st = c64 && ints && mine_copy ? RS_OK : RSI_NOMEM(err);
  uint64_t total = 0;
  char *out = NULL;
  MPI_Request req;
  if (st == RS_OK) {
    memcpy(mine_copy, mine, bytes);
    c64[w] = bytes;
    int rc = MPI_Iallgather(&c64[w], 1, MPI_UINT64_T, c64, 1, MPI_UINT64_T,
                            mt->comm, &req);
    st = rc == MPI_SUCCESS ? wait_one(mt, &req, timeout_ms, "MPI_Iallgather", err)
                           : mpi_fail(err, rc, "MPI_Iallgather");
  }
  if (st == RS_OK) st = int_counts(mt, c64, ints, ints + w, &total, err);
  for (size_t r = 0; st == RS_OK && r < w; r++) counts[r] = (size_t)c64[r];
  if (st == RS_OK && !(out = malloc(total ? total : 1))) st = RSI_NOMEM(err);
  if (st == RS_OK) {
    int rc = MPI_Iallgatherv(mine_copy, (int)bytes, MPI_BYTE, out, ints,
                             ints + w, MPI_BYTE, mt->comm, &req);
    st = rc == MPI_SUCCESS
             ? wait_one(mt, &req, timeout_ms, "MPI_Iallgatherv", err)
             : mpi_fail(err, rc, "MPI_Iallgatherv");
  }
  if (st == RS_OK) *all = out;
  void *bufs[4] = {c64, ints, mine_copy, st == RS_OK ? NULL : out};
  return collective_end(mt, st, bufs, 4);
}

static rs_status mpi_alltoallv(rsi_transport *t, const void *send,
                               const size_t *send_counts, void **recv,
                               size_t *recv_counts, int64_t timeout_ms,
                               rsi_err *err) {
  mpi_transport *mt = (mpi_transport *)t;
  *recv = NULL;
  RSI_TRY(collective_usable(mt, err));
  size_t w = (size_t)mt->world;
  uint64_t *c64 = malloc(2 * w * sizeof *c64);
  int *ints = malloc(4 * w * sizeof *ints);
  rs_status st = c64 && ints ? RS_OK : RSI_NOMEM(err);
  uint64_t sent = 0, total = 0;
  char *out = NULL, *in = NULL;
  MPI_Request req;
  for (size_t r = 0; st == RS_OK && r < w; r++) c64[r] = send_counts[r];
  if (st == RS_OK) {
    int rc = MPI_Ialltoall(c64, 1, MPI_UINT64_T, c64 + w, 1, MPI_UINT64_T,
                           mt->comm, &req);
    st = rc == MPI_SUCCESS ? wait_one(mt, &req, timeout_ms, "MPI_Ialltoall", err)
                           : mpi_fail(err, rc, "MPI_Ialltoall");
  }
  if (st == RS_OK) st = int_counts(mt, c64, ints, ints + w, &sent, err);
  if (st == RS_OK)
    st = int_counts(mt, c64 + w, ints + 2 * w, ints + 3 * w, &total, err);
  /* MPI may still read and write these after a timeout: copies of ours */
  if (st == RS_OK) {
    in = malloc(sent ? sent : 1);
    out = malloc(total ? total : 1);
    if (!in || !out) st = RSI_NOMEM(err);
  }
  if (st == RS_OK) {
    memcpy(in, send, sent);
    int rc = MPI_Ialltoallv(in, ints, ints + w, MPI_BYTE, out, ints + 2 * w,
                            ints + 3 * w, MPI_BYTE, mt->comm, &req);
    st = rc == MPI_SUCCESS
             ? wait_one(mt, &req, timeout_ms, "MPI_Ialltoallv", err)
             : mpi_fail(err, rc, "MPI_Ialltoallv");
  }
  for (size_t r = 0; st == RS_OK && r < w; r++)
    recv_counts[r] = (size_t)c64[w + r];
  if (st == RS_OK) *recv = out;
  void *bufs[4] = {c64, ints, in, st == RS_OK ? NULL : out};
  return collective_end(mt, st, bufs, 4);
}

static void mpi_destroy(rsi_transport *t) {
  mpi_transport *mt = (mpi_transport *)t;
  bool tainted = mt->tainted;
  mpi_abandon(t);
  mt->tainted = tainted;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && mt->notice_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&mt->notice_req);
    int done = 0;
    int64_t until = rsi_now_ms() + RSI_ABANDON_MS;
    while (!done && rsi_now_ms() < until) {
      MPI_Test(&mt->notice_req, &done, MPI_STATUS_IGNORE);
      if (!done) rsi_pause();
    }
    if (!done) { /* it may still be written: keep what it writes into */
      MPI_Request_free(&mt->notice_req);
      mt = NULL;
    }
  }
  if (!mt) return; /* kept for the standing receive (see above) */
  if (!finalized && !mt->tainted && !mt->broken) {
    MPI_Comm_free(&mt->sum_comm);
    MPI_Comm_free(&mt->comm);
  }
  for (int g = 0; g < GROUPS; g++) {
    free(mt->groups[g].reqs);
    free(mt->groups[g].info);
    free(mt->groups[g].done_idx);
    free(mt->groups[g].msgs);
    free(mt->groups[g].lands);
  }
  free(mt);
}

/* One rank per process: `me` is always this rank. */
static rs_status mpi_test(rsi_transport *t, int me, int group, bool *done,
                          rsi_err *err) {
  (void)me;
  return test_group(t, group, done, err);
}

static bool mpi_pending(rsi_transport *t, int me, int group, int *peer,
                        bool *is_recv, size_t *bytes) {
  (void)me;
  return pending_in(t, group, peer, is_recv, bytes);
}

/* The control channel: the same communicator, a group of its own. */
static rs_status ctl_send(rsi_transport *t, int to, uint64_t tag,
                          const void *data, size_t bytes, rsi_err *err) {
  return mpi_send(t, CONTROL_GROUP, -1, to, tag, data, bytes, err);
}

static rs_status ctl_recv(rsi_transport *t, int from, uint64_t tag, void *buf,
                          size_t bytes, rsi_err *err) {
  return mpi_recv(t, CONTROL_GROUP, -1, from, tag, buf, bytes, NULL, err);
}

static rs_status ctl_test(rsi_transport *t, bool *done, rsi_err *err) {
  return test_group(t, CONTROL_GROUP, done, err);
}

static bool ctl_pending(rsi_transport *t, int *peer, bool *is_recv,
                        size_t *bytes) {
  return pending_in(t, CONTROL_GROUP, peer, is_recv, bytes);
}

static const rsi_transport_ops mpi_ops = {
    .name = "mpi",
    .send = mpi_send,
    .recv = mpi_recv,
    .test = mpi_test,
    .pending = mpi_pending,
    .set_integrity = mpi_set_integrity,
    .abandon = mpi_abandon,
    .adopt = mpi_adopt,
    .destroy = mpi_destroy,
};

static const rsi_control_ops mpi_control = {
    .send = ctl_send,
    .recv = ctl_recv,
    .test = ctl_test,
    .pending = ctl_pending,
    .notify = mpi_notify,
    .poll_notice = mpi_poll_notice,
    .allgatherv = mpi_allgatherv,
    .alltoallv = mpi_alltoallv,
};

/* How long creating a context waits for every rank to join each of its
 * collectives: RESHARD_TIMEOUT_MS when set (also the context's first
 * RS_PARAM_TIMEOUT_MS), else the default timeout, 60 s. */
static int64_t create_timeout_ms(void) {
  const char *v = getenv("RESHARD_TIMEOUT_MS");
  char *end;
  long long ms = v && v[0] ? strtoll(v, &end, 10) : 0;
  return v && v[0] && !*end && ms > 0 ? (int64_t)ms : 60000;
}

/* The context's nonce: rank 0 draws it, everyone gets it. */
static rs_status share_nonce(mpi_transport *mt, int64_t timeout_ms,
                             rsi_err *err) {
  uint64_t *nonce = malloc(sizeof *nonce); /* buried if it never completes */
  if (!nonce) return RSI_NOMEM(err);
  *nonce = 0;
  if (mt->rank == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *nonce = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^
             (uint64_t)ts.tv_sec << 20 ^ (uint64_t)getpid() << 40 ^
             (uint64_t)(uintptr_t)mt;
    static _Atomic uint64_t made; /* contexts of this process so far */
    *nonce ^= (made++ + 1) * 0xD1B54A32D192ED03ull;
    *nonce |= 1; /* never 0, the in-process value */
  }
  MPI_Request req;
  int rc = MPI_Ibcast(nonce, 1, MPI_UINT64_T, 0, mt->comm, &req);
  rs_status st = rc == MPI_SUCCESS
                     ? wait_one(mt, &req, timeout_ms, "MPI_Ibcast", err)
                     : mpi_fail(err, rc, "MPI_Ibcast");
  if (st == RS_OK) mt->base.nonce = *nonce;
  void *bufs[1] = {nonce};
  return collective_end(mt, st, bufs, 1);
}

/* Host of every rank: the lowest world rank sharing memory with it.
 * MPI_Comm_split_type has no non-blocking form: it runs only once every
 * rank has joined the duplicates (a rank gone later hangs it). */
static rs_status find_hosts(mpi_transport *mt, int *host_of,
                            int64_t timeout_ms, rsi_err *err) {
  MPI_Comm local;
  int rc = MPI_Comm_split_type(mt->comm, MPI_COMM_TYPE_SHARED, mt->rank,
                               MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Comm_split_type");
  int *leader = malloc(2 * sizeof *leader);
  if (!leader) {
    MPI_Comm_free(&local);
    return RSI_NOMEM(err);
  }
  leader[0] = mt->rank;
  MPI_Request req;
  rc = MPI_Iallreduce(&leader[0], &leader[1], 1, MPI_INT, MPI_MIN, local, &req);
  rs_status st = rc == MPI_SUCCESS
                     ? wait_one(mt, &req, timeout_ms, "MPI_Iallreduce", err)
                     : mpi_fail(err, rc, "MPI_Iallreduce");
  if (st == RS_OK) MPI_Comm_free(&local);
  int *all = st == RS_OK ? malloc((size_t)mt->world * sizeof *all) : NULL;
  if (st == RS_OK && !all) st = RSI_NOMEM(err);
  if (st == RS_OK) {
    rc = MPI_Iallgather(&leader[1], 1, MPI_INT, all, 1, MPI_INT, mt->comm,
                        &req);
    st = rc == MPI_SUCCESS
             ? wait_one(mt, &req, timeout_ms, "MPI_Iallgather", err)
             : mpi_fail(err, rc, "MPI_Iallgather");
  }
  if (st == RS_OK) memcpy(host_of, all, (size_t)mt->world * sizeof *all);
  void *bufs[2] = {leader, all};
  return collective_end(mt, st, bufs, 2);
}

/* A duplicate of `from` in *to, waiting at most timeout_ms for every rank
 * to join; on failure *to is MPI_COMM_NULL (one that never completed is
 * let go: MPI may still fill it in). */
static rs_status dup_comm(mpi_transport *mt, MPI_Comm from, MPI_Comm *to,
                          int64_t timeout_ms, rsi_err *err) {
  MPI_Comm *slot = malloc(sizeof *slot);
  if (!slot) return RSI_NOMEM(err);
  MPI_Request req;
  int rc = MPI_Comm_idup(from, slot, &req);
  rs_status st = rc == MPI_SUCCESS
                     ? wait_one(mt, &req, timeout_ms, "MPI_Comm_idup", err)
                     : mpi_fail(err, rc, "MPI_Comm_idup");
  *to = st == RS_OK ? *slot : MPI_COMM_NULL;
  if (st == RS_OK || rc != MPI_SUCCESS)
    free(slot);
  else
    bury(mt, slot);
  return st;
}

/* Creation arguments: engine is the Fortran handle of the communicator to
 * duplicate, which knows rank and world; the other fields are not read. */
static rs_status mpi_create(const rsi_module_args *args, rsi_transport **out,
                            int *rank, int *world, int **host_of,
                            rsi_err *err) {
  RSI_TRY(rsi_module_args_check(args, "mpi", err));
  rsi_log_adopt(args->log);
  int64_t handle = args->engine;
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!up || down)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "MPI is %s: call MPI_Init before creating an MPI context",
                    down ? "already finalized" : "not initialized");
  MPI_Comm user = MPI_Comm_f2c((MPI_Fint)handle);
  if (user == MPI_COMM_NULL)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "Fortran handle %lld is MPI_COMM_NULL", (long long)handle);
  mpi_transport *mt = calloc(1, sizeof *mt);
  if (!mt) return RSI_NOMEM(err);
  mt->base.ops = &mpi_ops;
  mt->base.control = &mpi_control;
  mt->base.no_progress_thread = progress_refusal();
  mt->notice_req = MPI_REQUEST_NULL;
  pick_xxh3();
  MPI_Comm_rank(user, &mt->rank);
  MPI_Comm_size(user, &mt->world);
  int64_t timeout_ms = create_timeout_ms();
  mt->comm = mt->sum_comm = MPI_COMM_NULL;
  rs_status st = dup_comm(mt, user, &mt->comm, timeout_ms, err);
  if (st == RS_OK) st = dup_comm(mt, mt->comm, &mt->sum_comm, timeout_ms, err);
  if (st != RS_OK) {
    /* a duplicate that never completed stays out of reach; one made is
     * freed only where the other ranks are known to have made it too */
    free(mt);
    return st;
  }
  MPI_Comm_set_errhandler(mt->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(mt->sum_comm, MPI_ERRORS_RETURN);
  int rc = MPI_Irecv(mt->notice_buf, RSI_NOTICE_BYTES, MPI_BYTE,
                     MPI_ANY_SOURCE, NOTICE_TAG, mt->comm, &mt->notice_req);
  if (rc != MPI_SUCCESS) {
    mpi_destroy(&mt->base);
    return mpi_fail(err, rc, "MPI_Irecv of notices");
  }
  const char *v = getenv("RESHARD_FAULT_CORRUPT_SEND");
  mt->corrupt_send = v ? strtol(v, NULL, 10) : 0;
  v = getenv("RESHARD_FAULT_EXIT_AFTER_SENDS");
  mt->exit_after_sends = v ? strtol(v, NULL, 10) : 0;
  int *hosts = malloc((size_t)mt->world * sizeof *hosts);
  st = hosts ? find_hosts(mt, hosts, timeout_ms, err) : RSI_NOMEM(err);
  if (st == RS_OK) st = share_nonce(mt, timeout_ms, err);
  if (st != RS_OK) {
    free(hosts);
    mpi_destroy(&mt->base);
    return st;
  }
  *out = &mt->base;
  *rank = mt->rank;
  *world = mt->world;
  *host_of = hosts;
  RSI_LOG(RS_LOG_INFO, RS_LOG_TRANSPORT, mt->rank,
          "MPI transport: rank %d of %d, timeout %lld ms", mt->rank, mt->world,
          (long long)timeout_ms);
  return RS_OK;
}

__attribute__((visibility("default"))) const rsi_module rsi_module_mpi = {
    .abi = RSI_MODULE_ABI,
    .name = "mpi",
    .create = mpi_create,
};
