/* SPDX-License-Identifier: Apache-2.0 */
/* In-process execution moves every piece between two ranks as one strided
 * copy, from the sender's memory straight into the receiver's (direct
 * messages of the local transport, transport.h), without staging. Checked
 * here on strided memory at both ends (padded rows, a transposed
 * destination), with dtype changes at the sender (f32 -> bf16), at the
 * receiver (bf16 -> f32), to block-scaled fp8 with its scales (sender and
 * receiver quantizing), and with relays (a piece crossing into a domain
 * once, into one rank's destination memory, and forwarded from there to
 * the others of the domain; the planner makes relay slots in staging so
 * rarely that random layouts of a few shards never showed one):
 * - the transport's plain send and receive are replaced by ones that fail,
 *   so the execution passes only if every segment went direct; direct
 *   sends are counted;
 * - the result equals core/copy/convert_elem.h's conversion of every element
 *   (casts), and bit for bit what the staged path makes from the same plan
 *   (the transport without its direct operations: pack, send, unpack, as
 *   between processes);
 * - on the staged path, the bytes the copy engine packs and unpacks as
 *   they are (plain copies to or from a dense stream) are the plan's
 *   RS_STAT_BYTES_PACKED and RS_STAT_BYTES_UNPACKED;
 * - with RS_PARAM_COPY_THREADS 3 and every batch cut over the threads,
 *   both paths write the same bytes again. */
#include <criterion/criterion.h>

#include <reshard/reshard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "copy/convert_elem.h"
#include "copy/engine.h"
#include "plan/plan.h"
#include "transport/transport.h"

/* ---- the transport, observed --------------------------------------------- */

static const rsi_transport_ops *real_ops;
static rsi_transport_ops watched;
static int64_t direct_sends, direct_copies, largest_send; /* bytes */
static int64_t largest_direct; /* largest_send of direct_equals_staged's */

static rs_status refuse_send(rsi_transport *t, int group, int from, int to,
                             uint64_t tag, const void *data, size_t bytes,
                             rsi_err *err) {
  (void)t, (void)group, (void)tag, (void)data;
  return RSI_FAIL(err, RS_ERR_INTERNAL,
                  "test: a plain send of %zu bytes %d -> %d in process",
                  bytes, from, to);
}

static rs_status refuse_recv(rsi_transport *t, int group, int to, int from,
                             uint64_t tag, void *buf, size_t bytes,
                             const void **view, rsi_err *err) {
  (void)t, (void)group, (void)tag, (void)buf, (void)view;
  return RSI_FAIL(err, RS_ERR_INTERNAL,
                  "test: a plain receive of %zu bytes %d -> %d in process",
                  bytes, from, to);
}

static rs_status count_send_direct(rsi_transport *t, int group, int from,
                                   int to, uint64_t tag,
                                   const struct rsi_copy *copies, int64_t n,
                                   rsi_err *err) {
  direct_sends++;
  direct_copies += n;
  int64_t bytes = 0;
  for (int64_t i = 0; i < n; i++)
    bytes += (copies[i].hi - copies[i].lo) * copies[i].esize;
  if (bytes > largest_send) largest_send = bytes;
  return real_ops->send_direct(t, group, from, to, tag, copies, n, err);
}

/* direct: plain messages refused, direct sends counted; else the staged
 * path (no direct operations). */
static void use_path(rs_context *ctx, bool direct) {
  rsi_transport *tp = ctx->transport;
  if (!real_ops) real_ops = tp->ops;
  cr_assert(real_ops->send_direct && real_ops->recv_direct,
            "the in-process transport has no direct messages");
  watched = *real_ops;
  if (direct) {
    watched.send = refuse_send;
    watched.recv = refuse_recv;
    watched.send_direct = count_send_direct;
  } else {
    watched.send_direct = NULL;
    watched.recv_direct = NULL;
  }
  tp->ops = &watched;
  direct_sends = direct_copies = largest_send = 0;
}

/* The copy engine, observed on the staged path: plain copies into a
 * dense stream are packing, out of one unpacking. */
static const rsi_engine_ops *real_engine_ops;
static rsi_engine_ops watched_engine;
static int64_t packed_seen, unpacked_seen;

static rs_status count_copy(rsi_engine *e, const rsi_copy *copies, int64_t n,
                            void *queue, rsi_err *err) {
  for (int64_t i = 0; i < n; i++) {
    const rsi_copy *c = &copies[i];
    if (c->op != RSI_COPY_PLAIN || c->dense_dst == c->dense_src) continue;
    *(c->dense_dst ? &packed_seen : &unpacked_seen) +=
        (c->hi - c->lo) * c->esize;
  }
  return real_engine_ops->copy(e, copies, n, queue, err);
}

static void watch_engine(rs_context *ctx) {
  real_engine_ops = ctx->engine->ops;
  watched_engine = *real_engine_ops;
  watched_engine.copy = count_copy;
  ctx->engine->ops = &watched_engine;
  packed_seen = unpacked_seen = 0;
}

static void restore(rs_context *ctx) {
  ctx->transport->ops = real_ops;
  if (real_engine_ops) ctx->engine->ops = real_engine_ops;
  real_engine_ops = NULL;
}

/* ---- layouts ------------------------------------------------------------- */

#define MAX_SHARDS 32

/* A 2-D shard: rows x cols from (r0, c0), in its own buffer, padded rows
 * (row stride cols + pad) or, transposed, column-major (column stride
 * rows + pad). */
typedef struct shard {
  int rank;
  int64_t r0, c0, rows, cols, pad;
  bool transposed;
} shard;

typedef struct tensor {
  const char *name;
  rs_dtype from, to;
  int64_t shape[2];
  shard src[MAX_SHARDS], dst[MAX_SHARDS];
  int nsrc, ndst;
  /* block scales of the destination (fp8): scale shards beside dst[] */
  int64_t block[2];
  shard scl[MAX_SHARDS];
  int nscl;
} tensor;

static void strides_of(const shard *s, int64_t st[2]) {
  st[0] = s->transposed ? 1 : s->cols + s->pad;
  st[1] = s->transposed ? s->rows + s->pad : 1;
}

static int64_t span(const shard *s) { /* elements its memory reaches */
  int64_t st[2];
  strides_of(s, st);
  return (s->rows - 1) * st[0] + (s->cols - 1) * st[1] + 1;
}

static int64_t esize(rs_dtype d) { return (int64_t)rs_dtype_size(d); }

typedef struct job {
  rs_context *ctx;
  rs_layout *src, *dst;
  rs_plan *plan;
  tensor *t;
  int nt;
  void *sbuf[4][MAX_SHARDS], *dbuf[4][MAX_SHARDS], *cbuf[4][MAX_SHARDS];
  size_t dbytes[4][MAX_SHARDS], cbytes[4][MAX_SHARDS];
} job;

static void add(job *j, rs_layout *l, const char *name, const shard *s,
                int buffer) {
  int64_t st[2];
  strides_of(s, st);
  int64_t off[2] = {s->r0, s->c0}, ext[2] = {s->rows, s->cols};
  rs_status r = rs_layout_add_shard(l, name, s->rank, off, ext, buffer, 0, st);
  cr_assert_eq(r, RS_OK, "add_shard %s: %s", name,
               rs_context_last_error(j->ctx));
}

static void scale_name(const tensor *t, char *out, size_t n) {
  snprintf(out, n, "%s_scale", t->name);
}

static void make_plan(job *j, int world, int domain) {
  cr_assert_eq(rs_context_create_local(world, &j->ctx), RS_OK);
  cr_assert_eq(rs_context_set_domain_size(j->ctx, domain), RS_OK);
  cr_assert_eq(rs_layout_create(j->ctx, &j->src), RS_OK);
  cr_assert_eq(rs_layout_create(j->ctx, &j->dst), RS_OK);
  for (int i = 0; i < j->nt; i++) {
    tensor *t = &j->t[i];
    char sname[64];
    scale_name(t, sname, sizeof sname);
    cr_assert_eq(rs_layout_add_tensor(j->src, t->name, t->from, 2, t->shape),
                 RS_OK);
    cr_assert_eq(rs_layout_add_tensor(j->dst, t->name, t->to, 2, t->shape),
                 RS_OK);
    if (t->block[0]) {
      int64_t ss[2] = {(t->shape[0] + t->block[0] - 1) / t->block[0],
                       (t->shape[1] + t->block[1] - 1) / t->block[1]};
      cr_assert_eq(
          rs_layout_add_tensor(j->dst, sname, RS_DTYPE_F32, 2, ss), RS_OK);
      cr_assert_eq(rs_layout_set_block_scales(j->dst, t->name, sname,
                                              t->block[0], t->block[1],
                                              RS_SCALE_AMAX),
                   RS_OK, "%s", rs_context_last_error(j->ctx));
    }
    /* buffer number: tensor i's shard k is i * MAX_SHARDS + k (scales
     * after the values) */
    for (int k = 0; k < t->nsrc; k++)
      add(j, j->src, t->name, &t->src[k], i * 2 * MAX_SHARDS + k);
    for (int k = 0; k < t->ndst; k++)
      add(j, j->dst, t->name, &t->dst[k], i * 2 * MAX_SHARDS + k);
    for (int k = 0; k < t->nscl; k++)
      add(j, j->dst, sname, &t->scl[k], i * 2 * MAX_SHARDS + MAX_SHARDS + k);
  }
  rs_status st = rs_plan_create(j->src, j->dst, &j->plan);
  cr_assert_eq(st, RS_OK, "plan: %s", rs_context_last_error(j->ctx));
}

/* Value of element (r, c) of tensor i, as f32 (exact in bf16 and f16 for
 * the casts' sake: few mantissa bits, a range of magnitudes). */
static float value_of(int i, int64_t r, int64_t c) {
  uint32_t h = (uint32_t)(r * 7919 + c * 104729 + i * 15485863);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  float m = (float)(int)(h % 255) - 127.0f;
  return m * (float)(1 << (h >> 28)) / 64.0f;
}

static void put(rs_dtype d, unsigned char *p, float f) {
  if (d == RS_DTYPE_F32) {
    memcpy(p, &f, 4);
  } else {
    uint16_t h = d == RS_DTYPE_BF16 ? rsi_f32_to_bf16(f) : rsi_f32_to_f16(f);
    memcpy(p, &h, 2);
  }
}

static float get(rs_dtype d, const unsigned char *p) {
  if (d == RS_DTYPE_F32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, p, 2);
  return d == RS_DTYPE_BF16 ? rsi_bf16_to_f32(h) : rsi_f16_to_f32(h);
}

static void bind_all(job *j) {
  for (int i = 0; i < j->nt; i++) {
    tensor *t = &j->t[i];
    for (int k = 0; k < t->nsrc; k++) {
      const shard *s = &t->src[k];
      int64_t es = esize(t->from), st[2];
      strides_of(s, st);
      size_t n = (size_t)(span(s) * es);
      unsigned char *b = malloc(n);
      memset(b, 0x5A, n);
      for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->cols; c++)
          put(t->from, b + (r * st[0] + c * st[1]) * es,
              value_of(i, s->r0 + r, s->c0 + c));
      j->sbuf[i][k] = b;
      cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_SRC, s->rank,
                                i * 2 * MAX_SHARDS + k, b, n),
                   RS_OK, "%s", rs_context_last_error(j->ctx));
    }
    for (int k = 0; k < t->ndst; k++) {
      const shard *s = &t->dst[k];
      size_t n = (size_t)(span(s) * esize(t->to));
      j->dbuf[i][k] = malloc(n);
      j->dbytes[i][k] = n;
      cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_DST, s->rank,
                                i * 2 * MAX_SHARDS + k, j->dbuf[i][k], n),
                   RS_OK, "%s", rs_context_last_error(j->ctx));
    }
    for (int k = 0; k < t->nscl; k++) {
      const shard *s = &t->scl[k];
      size_t n = (size_t)(span(s) * 4);
      j->cbuf[i][k] = malloc(n);
      j->cbytes[i][k] = n;
      cr_assert_eq(rs_plan_bind(j->plan, RS_SIDE_DST, s->rank,
                                i * 2 * MAX_SHARDS + MAX_SHARDS + k,
                                j->cbuf[i][k], n),
                   RS_OK, "%s", rs_context_last_error(j->ctx));
    }
  }
}

/* Poison every destination byte (padding too: it must stay poisoned). */
static void poison(job *j) {
  for (int i = 0; i < j->nt; i++) {
    for (int k = 0; k < j->t[i].ndst; k++)
      memset(j->dbuf[i][k], 0xA5, j->dbytes[i][k]);
    for (int k = 0; k < j->t[i].nscl; k++)
      memset(j->cbuf[i][k], 0xA5, j->cbytes[i][k]);
  }
}

/* Every destination buffer, concatenated (a snapshot of one execution). */
static unsigned char *snapshot(job *j, size_t *len) {
  size_t n = 0;
  for (int i = 0; i < j->nt; i++) {
    for (int k = 0; k < j->t[i].ndst; k++) n += j->dbytes[i][k];
    for (int k = 0; k < j->t[i].nscl; k++) n += j->cbytes[i][k];
  }
  unsigned char *s = malloc(n ? n : 1), *at = s;
  for (int i = 0; i < j->nt; i++) {
    for (int k = 0; k < j->t[i].ndst; k++) {
      memcpy(at, j->dbuf[i][k], j->dbytes[i][k]);
      at += j->dbytes[i][k];
    }
    for (int k = 0; k < j->t[i].nscl; k++) {
      memcpy(at, j->cbuf[i][k], j->cbytes[i][k]);
      at += j->cbytes[i][k];
    }
  }
  *len = n;
  return s;
}

/* Casts: every destination element is the conversion of its source value
 * (via f32: exact for these values), and padding is untouched. */
static void check_casts(job *j) {
  for (int i = 0; i < j->nt; i++) {
    tensor *t = &j->t[i];
    if (t->block[0]) continue;
    int64_t es = esize(t->to);
    for (int k = 0; k < t->ndst; k++) {
      const shard *s = &t->dst[k];
      const unsigned char *b = j->dbuf[i][k];
      int64_t st[2];
      strides_of(s, st);
      for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < s->cols; c++) {
          unsigned char want[4];
          /* value_of is exact in every dtype used: converting through
           * `from` changes nothing */
          put(t->to, want, value_of(i, s->r0 + r, s->c0 + c));
          const unsigned char *got = b + (r * st[0] + c * st[1]) * es;
          cr_assert(memcmp(got, want, (size_t)es) == 0,
                    "%s: rank %d element (%lld, %lld) is %g, want %g",
                    t->name, s->rank, (long long)(s->r0 + r),
                    (long long)(s->c0 + c), (double)get(t->to, got),
                    (double)get(t->to, want));
        }
      /* padding between rows (or columns) untouched */
      int64_t inner = s->transposed ? s->rows : s->cols;
      int64_t outer = s->transposed ? s->cols : s->rows;
      int64_t step = inner + s->pad;
      for (int64_t o = 0; o + 1 < outer; o++)
        for (int64_t p = inner; p < step; p++)
          for (int64_t x = 0; x < es; x++)
            cr_assert_eq(b[(o * step + p) * es + x], 0xA5,
                         "%s: rank %d padding written", t->name, s->rank);
    }
  }
}

static void run(job *j, bool direct) {
  use_path(j->ctx, direct);
  if (!direct) watch_engine(j->ctx);
  poison(j);
  rs_status st = rs_plan_execute(j->plan);
  restore(j->ctx);
  cr_assert_eq(st, RS_OK, "execute (%s path): %s",
               direct ? "direct" : "staged", rs_context_last_error(j->ctx));
}

static void finish(job *j) {
  rs_plan_destroy(j->plan);
  rs_layout_destroy(j->src);
  rs_layout_destroy(j->dst);
  rs_context_destroy(j->ctx);
  for (int i = 0; i < j->nt; i++) {
    for (int k = 0; k < j->t[i].nsrc; k++) free(j->sbuf[i][k]);
    for (int k = 0; k < j->t[i].ndst; k++) free(j->dbuf[i][k]);
    for (int k = 0; k < j->t[i].nscl; k++) free(j->cbuf[i][k]);
  }
}

/* Direct (twice: the driver is reused), then staged, then direct again:
 * identical bytes every time; casts checked element by element. */
static void direct_equals_staged(job *j, int world, int domain,
                                 bool want_forwards) {
  make_plan(j, world, domain);
  if (want_forwards) {
    int64_t forwards = 0;
    for (int64_t i = 0; i < j->plan->nmoves; i++)
      forwards += j->plan->moves[i].stage == 1;
    cr_assert_gt(forwards, 0, "the layouts were meant to make pieces that "
                 "cross into a domain once and are forwarded inside it");
  }
  bind_all(j);
  run(j, true);
  cr_assert_gt(direct_sends, 0, "no direct message was sent");
  int64_t sends = direct_sends;
  largest_direct = largest_send;
  check_casts(j);
  size_t n1, n2, n3;
  unsigned char *a = snapshot(j, &n1);
  run(j, true);
  cr_assert_eq(direct_sends, sends, "a second execution sent %lld direct "
               "messages, the first %lld", (long long)direct_sends,
               (long long)sends);
  unsigned char *b = snapshot(j, &n2);
  run(j, false);
  int64_t packed = -1, unpacked = -1;
  rs_plan_stat(j->plan, RS_ALL_RANKS, RS_STAT_BYTES_PACKED, &packed);
  rs_plan_stat(j->plan, RS_ALL_RANKS, RS_STAT_BYTES_UNPACKED, &unpacked);
  cr_assert_eq(packed_seen, packed, "the staged path packed %lld bytes as "
               "they are, the plan says %lld", (long long)packed_seen,
               (long long)packed);
  cr_assert_eq(unpacked_seen, unpacked, "the staged path unpacked %lld "
               "bytes as they are, the plan says %lld",
               (long long)unpacked_seen, (long long)unpacked);
  check_casts(j);
  unsigned char *c = snapshot(j, &n3);
  cr_assert(n1 == n2 && n1 == n3);
  cr_assert(memcmp(a, b, n1) == 0, "two direct executions differ");
  for (size_t x = 0; x < n1; x++)
    if (a[x] != c[x])
      cr_assert_fail("direct and staged executions differ at byte %zu of "
                     "%zu: %02x vs %02x", x, n1, a[x], c[x]);
  /* every batch cut over three threads (the fp8 copies whole, each on
   * one of them): the same bytes, both paths */
  int64_t saved = rsi_host_split_bytes;
  rsi_host_split_bytes = 1;
  cr_assert_eq(rs_context_set_param(j->ctx, RS_PARAM_COPY_THREADS, 3), RS_OK);
  for (int staged = 0; staged < 2; staged++) {
    run(j, !staged);
    size_t n4;
    unsigned char *d = snapshot(j, &n4);
    cr_assert_eq(n4, n1);
    for (size_t x = 0; x < n1; x++)
      if (a[x] != d[x])
        cr_assert_fail("%s execution over three threads differs at byte "
                       "%zu of %zu: %02x vs %02x",
                       staged ? "a staged" : "a direct", x, n1, d[x], a[x]);
    free(d);
  }
  rsi_host_split_bytes = saved;
  free(a);
  free(b);
  free(c);
  finish(j);
}

/* ---- cases --------------------------------------------------------------- */

/* Two domains of three: sources on ranks 0-1 (column halves, padded rows),
 * destinations on the other domain, overlapping on ranks 3-5 (one of them
 * transposed), and a column band on rank 2. A piece that several of ranks
 * 3-5 need crosses once and is forwarded inside the domain. */
static void casts_layout(tensor *t, const char *name, rs_dtype from,
                         rs_dtype to, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->name = name;
  t->from = from;
  t->to = to;
  t->shape[0] = rows;
  t->shape[1] = cols;
  int64_t h = cols / 2;
  t->src[t->nsrc++] = (shard){0, 0, 0, rows, h, 3, false};
  t->src[t->nsrc++] = (shard){1, 0, h, rows, cols - h, 5, false};
  int64_t third = rows / 3;
  t->dst[t->ndst++] = (shard){3, 0, 0, rows - third, cols, 7, false};
  t->dst[t->ndst++] = (shard){4, third, 0, rows - third, cols, 2, true};
  t->dst[t->ndst++] = (shard){5, 0, cols / 4, rows, cols / 2, 0, false};
  t->dst[t->ndst++] = (shard){2, 3, cols / 4, rows - 5, cols / 2, 4, true};
}

Test(exec_direct, casts_strided_with_relays, .timeout = 60) {
  static tensor t[3];
  casts_layout(&t[0], "down", RS_DTYPE_F32, RS_DTYPE_BF16, 96, 160);
  casts_layout(&t[1], "up", RS_DTYPE_BF16, RS_DTYPE_F32, 80, 96);
  casts_layout(&t[2], "same", RS_DTYPE_F16, RS_DTYPE_F16, 64, 70);
  job j = {.t = t, .nt = 3};
  direct_equals_staged(&j, 6, 3, true);
}

Test(exec_direct, large_strided_pieces, .timeout = 60) {
  /* moves above the 64 KiB segment threshold, strided at both ends, so
   * that the staged path would pack, send and unpack each on its own */
  static tensor t[2];
  casts_layout(&t[0], "big", RS_DTYPE_BF16, RS_DTYPE_BF16, 512, 384);
  casts_layout(&t[1], "bigcast", RS_DTYPE_F32, RS_DTYPE_F16, 256, 320);
  job j = {.t = t, .nt = 2};
  direct_equals_staged(&j, 6, 3, true);
}

/* Column quarters of a tensor into two replicas of its first column half
 * in the next domain (ranks 3 and 4, one with padded rows): each quarter
 * is a piece above the 64 KiB segment threshold that is not one
 * contiguous run of the replica it lands in, so it lands in a relay slot,
 * is forwarded straight from there and copied out of it once (plan/deliver.c,
 * forward_from_slot), where forwarding it from the replica's own memory
 * would pack it for every forward. The second half goes to rank 5 alone,
 * transposed. */
Test(exec_direct, large_pieces_forwarded_from_a_slot, .timeout = 60) {
  static tensor t[1];
  t->name = "w";
  t->from = t->to = RS_DTYPE_BF16;
  t->shape[0] = 1024;
  t->shape[1] = 256;
  t->src[t->nsrc++] = (shard){0, 0, 0, 1024, 64, 0, false};
  t->src[t->nsrc++] = (shard){1, 0, 64, 1024, 64, 8, false};
  t->src[t->nsrc++] = (shard){2, 0, 128, 1024, 128, 0, false};
  t->dst[t->ndst++] = (shard){3, 0, 0, 1024, 128, 0, false};
  t->dst[t->ndst++] = (shard){4, 0, 0, 1024, 128, 16, false};
  t->dst[t->ndst++] = (shard){5, 0, 128, 1024, 128, 0, true};
  job j = {.t = t, .nt = 1};
  make_plan(&j, 6, 3);
  int64_t into_slot = 0, from_slot = 0, copied_out = 0, copied_bytes = 0;
  for (int64_t i = 0; i < j.plan->nmoves; i++) {
    const rsi_move *m = &j.plan->moves[i];
    bool out = m->src_kind == RSI_EP_RELAY && m->route == RS_ROUTE_LOCAL;
    into_slot += m->dst_kind == RSI_EP_RELAY;
    from_slot += m->src_kind == RSI_EP_RELAY && !out;
    copied_out += out;
    copied_bytes += out ? m->bytes : 0;
  }
  cr_expect_eq(into_slot, 2, "each quarter crosses once, into a slot");
  cr_expect_eq(from_slot, 2, "and is forwarded from it to the other replica");
  cr_expect_eq(copied_out, 2, "and copied out of it by the rank it entered");
  /* the copies out are their own figure: bytes_local stays what ranks
   * hold, so received + local is what the destination needs */
  int64_t v = -1, recv = 0, local = 0;
  cr_assert_eq(rs_plan_stat(j.plan, RS_ALL_RANKS,
                            RS_STAT_BYTES_COPIED_FROM_RELAY, &v), RS_OK);
  cr_expect_eq(v, copied_bytes);
  cr_expect_eq(v, 2 * 1024 * 64 * 2);
  rs_plan_stat(j.plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local);
  cr_expect_eq(local, 0, "no rank holds what it needs");
  rs_plan_stat(j.plan, RS_ALL_RANKS, RS_STAT_BYTES_RECV_INTRA, &v);
  recv += v;
  rs_plan_stat(j.plan, RS_ALL_RANKS, RS_STAT_BYTES_RECV_INTER, &v);
  recv += v;
  cr_expect_eq(recv + local, (2 * 1024 * 128 + 1024 * 128) * 2,
               "every destination byte received once");
  finish(&j);
  direct_equals_staged(&j, 6, 3, true);
}

/* bf16 values to fp8 with block scales of 4 x 8, on two domains of three.
 * Sources at ranks 0-1: cut at block boundaries (the sender quantizes) or
 * through blocks (the receiver does). Destinations: whole-block pieces on
 * ranks 3-5, padded or transposed, each with its scales, and the whole
 * tensor replicated on 3 and 4 (forwarded inside the domain). */
static void fp8_layout(tensor *t, const char *name, int64_t cut) {
  memset(t, 0, sizeof *t);
  t->name = name;
  t->from = RS_DTYPE_BF16;
  t->to = RS_DTYPE_F8_E4M3;
  t->shape[0] = 48;
  t->shape[1] = 64;
  t->block[0] = 4;
  t->block[1] = 8;
  t->src[t->nsrc++] = (shard){0, 0, 0, 48, cut, 3, false};
  t->src[t->nsrc++] = (shard){1, 0, cut, 48, 64 - cut, 1, false};
  t->dst[t->ndst++] = (shard){3, 0, 0, 48, 64, 5, false};
  t->scl[t->nscl++] = (shard){3, 0, 0, 12, 8, 1, false};
  t->dst[t->ndst++] = (shard){4, 0, 0, 48, 64, 3, true};
  t->scl[t->nscl++] = (shard){4, 0, 0, 12, 8, 0, true};
  t->dst[t->ndst++] = (shard){5, 8, 16, 24, 32, 2, false};
  t->scl[t->nscl++] = (shard){5, 2, 2, 6, 4, 2, false};
}

Test(exec_direct, fp8_scales_with_relays, .timeout = 60) {
  static tensor t[2];
  fp8_layout(&t[0], "q_sender", 32); /* block-aligned: sender quantizes */
  fp8_layout(&t[1], "q_receiver", 37); /* through blocks: receiver does */
  job j = {.t = t, .nt = 2};
  direct_equals_staged(&j, 6, 3, false);
}

Test(exec_direct, eight_mib_pieces_transposed, .timeout = 60) {
  /* moves of 8 MiB, strided at both ends (one end transposed), each one
   * direct message of one copy */
  static tensor t[1];
  tensor *x = &t[0];
  *x = (tensor){.name = "huge", .from = RS_DTYPE_F32, .to = RS_DTYPE_F32,
                .shape = {2048, 4096}};
  x->src[x->nsrc++] = (shard){0, 0, 0, 2048, 2048, 16, false};
  x->src[x->nsrc++] = (shard){1, 0, 2048, 2048, 2048, 0, false};
  x->dst[x->ndst++] = (shard){3, 0, 0, 1024, 4096, 8, false};
  x->dst[x->ndst++] = (shard){4, 1024, 0, 1024, 4096, 0, true};
  job j = {.t = t, .nt = 1};
  direct_equals_staged(&j, 6, 3, false);
  cr_assert_eq(largest_direct, (int64_t)8 << 20,
               "the largest direct message holds %lld bytes, not one "
               "8 MiB piece", (long long)largest_direct);
}
