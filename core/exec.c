#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "copy.h"
#include "exec_guard.h"
#include "grow.h"
#include "transport/transport.h"

static const char *side_name(int side) {
  return side == RS_SIDE_SRC ? "source" : "destination";
}

rs_status rsi_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                        void *ptr, size_t bytes) {
  rsi_err *err = plan->ctx->err;
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
      if (!bd->need) continue;
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

/* ---- endpoints ------------------------------------------------------------ */

typedef struct exec_state {
  const rs_plan *plan;
  /* Relay slots: slot i at relay_area + plan->relay_at[i] (in-process),
   * or this rank's own at my_relay + its staging offset (one rank). */
  char *relay_area, *my_relay;
} exec_state;

/* Address of the move's first element at one end, and that end's strides. */
static char *endpoint(const exec_state *ex, const rsi_move *m, int kind,
                      int index, int64_t *strides) {
  const rs_plan *plan = ex->plan;
  const rsi_tensor *t = &plan->tensors[m->tensor];
  const int64_t *moff = rsi_move_offset(plan, m);
  int nd = t->ndim;
  char *base;
  const int64_t *origin;
  if (kind == RSI_EP_RELAY) {
    const rsi_relay *r = &plan->relays[index];
    origin = plan->boxes.v + r->box;
    rsi_box_dense_strides(nd, origin + nd, strides);
    base = ex->my_relay ? ex->my_relay + r->staging_offset
                        : ex->relay_area + plan->relay_at[index];
  } else {
    const rsi_side *side = &plan->side[kind == RSI_EP_SRC ? RS_SIDE_SRC
                                                          : RS_SIDE_DST];
    const rsi_shard *s = &side->shards[index];
    origin = rsi_shard_offset(&side->pool, s);
    memcpy(strides, rsi_shard_strides(&side->pool, s, nd),
           (size_t)nd * sizeof *strides);
    base = (char *)side->buffers[side->rank_first[s->rank] + s->buffer].ptr +
           s->byte_offset;
  }
  int64_t off = 0;
  for (int d = 0; d < nd; d++) off += (moff[d] - origin[d]) * strides[d];
  return base + off * t->esize;
}

/* Bytes [lo, hi) of message msg between its moves' memory and a dense
 * stream: packed into it (pack) or unpacked out of it. */
static void stream_range(const exec_state *ex, const rsi_message *msg,
                         int64_t lo, int64_t hi, char *stream, bool pack) {
  const rs_plan *plan = ex->plan;
  for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int64_t a = m->msg_offset > lo ? m->msg_offset : lo;
    int64_t b = m->msg_offset + m->bytes < hi ? m->msg_offset + m->bytes : hi;
    if (a >= b) continue;
    const rsi_tensor *t = &plan->tensors[m->tensor];
    int64_t strides[RSI_MAX_DIMS];
    char *mem = pack ? endpoint(ex, m, m->src_kind, m->src_index, strides)
                     : endpoint(ex, m, m->dst_kind, m->dst_index, strides);
    char *dense = stream + (a - lo);
    rsi_copy_range(t->ndim, rsi_move_extent(plan, m), (size_t)t->esize,
                   pack ? dense : mem, pack ? NULL : strides,
                   pack ? mem : dense, pack ? strides : NULL,
                   (a - m->msg_offset) / t->esize,
                   (b - m->msg_offset) / t->esize);
  }
}

static void copy_local(const exec_state *ex, const rsi_message *msg) {
  const rs_plan *plan = ex->plan;
  for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    const rsi_tensor *t = &plan->tensors[m->tensor];
    int64_t ss[RSI_MAX_DIMS], ds[RSI_MAX_DIMS], n;
    const char *src = endpoint(ex, m, m->src_kind, m->src_index, ss);
    char *dst = endpoint(ex, m, m->dst_kind, m->dst_index, ds);
    rsi_box_volume(t->ndim, rsi_move_extent(plan, m), &n);
    rsi_copy_range(t->ndim, rsi_move_extent(plan, m), (size_t)t->esize, dst,
                   ds, src, ss, 0, n);
  }
}

/* ---- drivers -------------------------------------------------------------- */

/* Every rank in this process: messages in plan order (round, stage, sender,
 * receiver), each moved in slices so that staging stays small and warm. */
static rs_status run_all_ranks(exec_state *ex, rsi_transport *tp,
                               int64_t slice, char *stage_buf, rsi_err *err) {
  const rs_plan *plan = ex->plan;
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *msg = &plan->msgs[i];
    if (msg->src_rank == msg->dst_rank) {
      copy_local(ex, msg);
      continue;
    }
    for (int64_t lo = 0; lo < msg->bytes; lo += slice) {
      int64_t hi = lo + slice < msg->bytes ? lo + slice : msg->bytes;
      const void *data = NULL;
      uint64_t tag = (uint64_t)i;
      stream_range(ex, msg, lo, hi, stage_buf, true);
      RSI_TRY(tp->ops->send(tp, 0, msg->src_rank, msg->dst_rank, tag,
                            stage_buf, (size_t)(hi - lo), err));
      RSI_TRY(tp->ops->recv(tp, 0, msg->dst_rank, msg->src_rank, tag,
                            stage_buf, (size_t)(hi - lo), &data, err));
      bool done = false;
      RSI_TRY(tp->ops->test(tp, 0, &done, err)); /* in process: at once */
      stream_range(ex, msg, lo, hi, (char *)data, false);
    }
  }
  return RS_OK;
}

/* One rank of many processes. The plan's messages that touch this rank are
 * cut into steps (round, stage). A step begins by posting its receives,
 * copying its rank-local moves, and packing and posting its sends; it
 * finishes by waiting and unpacking. A stage-0 step (reads only source
 * shards) begins before the previous step finishes, so packing round k+1
 * overlaps the transfers of round k; staging and relay slots alternate
 * between two halves, which is why rounds are planned at half the staging
 * setting.
 *
 * Inside a message, a move of at least DIRECT_BYTES travels as its own
 * transport message, straight from or into the caller's memory where that
 * memory is contiguous (no pack, no unpack); smaller moves are packed
 * together. Sender and receiver cut a message the same way, so their
 * transport messages match one to one. */
#define DIRECT_BYTES ((int64_t)64 * 1024)
#define ALIGN16(x) (((x) + 15) / 16 * 16)
#define ALIGN64(x) (((x) + 63) / 64 * 64)

typedef struct segment {
  int64_t first, n, bytes; /* moves [first, first+n), packed size */
  bool single;             /* one large move */
} segment;

/* The segment of msg starting at move `at`. */
static segment segment_at(const rs_plan *plan, const rsi_message *msg,
                          int64_t at) {
  segment g = {at, 0, 0, false};
  int64_t end = msg->first_move + msg->nmoves;
  if (plan->moves[at].bytes >= DIRECT_BYTES)
    return (segment){at, 1, plan->moves[at].bytes, true};
  while (at < end && plan->moves[at].bytes < DIRECT_BYTES) {
    g.bytes = ALIGN16(g.bytes) + plan->moves[at].bytes;
    g.n++;
    at++;
  }
  return g;
}

/* A box in memory is one contiguous run when its strides are row-major. */
static bool contiguous(int ndim, const int64_t *ext, const int64_t *strides) {
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ext[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= ext[d];
  }
  return true;
}

/* Where move m's bytes can go to or come from the transport directly. */
static char *direct_ptr(const exec_state *ex, const rsi_move *m, bool src) {
  int64_t strides[RSI_MAX_DIMS];
  const rsi_tensor *t = &ex->plan->tensors[m->tensor];
  char *p = src ? endpoint(ex, m, m->src_kind, m->src_index, strides)
                : endpoint(ex, m, m->dst_kind, m->dst_index, strides);
  return contiguous(t->ndim, rsi_move_extent(ex->plan, m), strides) ? p : NULL;
}

/* A segment's moves between their memory and a dense stream (each move
 * 16-aligned in it): packed into it (pack) or unpacked out of it. */
static void stream_moves(const exec_state *ex, const segment *g, char *stream,
                         bool pack) {
  int64_t at = 0;
  for (int64_t i = g->first; i < g->first + g->n; i++) {
    const rsi_move *m = &ex->plan->moves[i];
    const rsi_tensor *t = &ex->plan->tensors[m->tensor];
    int64_t strides[RSI_MAX_DIMS], n;
    char *mem = pack ? endpoint(ex, m, m->src_kind, m->src_index, strides)
                     : endpoint(ex, m, m->dst_kind, m->dst_index, strides);
    rsi_box_volume(t->ndim, rsi_move_extent(ex->plan, m), &n);
    at = ALIGN16(at);
    char *dense = stream + at;
    rsi_copy_range(t->ndim, rsi_move_extent(ex->plan, m), (size_t)t->esize,
                   pack ? dense : mem, pack ? NULL : strides,
                   pack ? mem : dense, pack ? strides : NULL, 0, n);
    at += m->bytes;
  }
}

typedef struct step {
  int32_t round, stage;
  int64_t first, n;  /* into mine[] */
  bool reads_dst;    /* sends bytes that arrived here in an earlier round */
} step;

typedef struct arrival {
  segment seg;
  const void *data; /* NULL: it landed in place */
} arrival;

typedef struct rank_run {
  exec_state *ex;
  rsi_transport *tp;
  int me;
  const int64_t *mine; /* message indices touching this rank, plan order */
  char *staging[2], *relay[2];
  arrival *arrivals[2]; /* receives to unpack, per half */
  int64_t narrivals[2], cap_arrivals[2];
} rank_run;

static uint64_t step_tag(const step *s) {
  return (uint64_t)s->round * 2 + (uint64_t)s->stage;
}

static rs_status expect_arrival(rank_run *rr, int half, arrival a,
                                rsi_err *err) {
  RSI_TRY(rsi_grow((void **)&rr->arrivals[half], &rr->cap_arrivals[half],
                   rr->narrivals[half] + 1, sizeof *rr->arrivals[half], 64,
                   err));
  rr->arrivals[half][rr->narrivals[half]++] = a;
  return RS_OK;
}

static rs_status begin_step(rank_run *rr, const step *s, int half) {
  const rs_plan *plan = rr->ex->plan;
  rsi_err *err = plan->ctx->err;
  rsi_transport *tp = rr->tp;
  uint64_t tag = step_tag(s);
  rr->ex->my_relay = rr->relay[s->round % 2];
  rr->narrivals[half] = 0;
  int64_t at = 0;
  for (int64_t k = s->first; k < s->first + s->n; k++) { /* receives first */
    const rsi_message *msg = &plan->msgs[rr->mine[k]];
    if (msg->dst_rank != rr->me || msg->src_rank == rr->me) continue;
    for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves;) {
      segment g = segment_at(plan, msg, i);
      char *into = g.single ? direct_ptr(rr->ex, &plan->moves[i], false) : NULL;
      const void *data = NULL; /* one-rank transports set it on return */
      if (into) {
        RSI_TRY(tp->ops->recv(tp, half, rr->me, msg->src_rank, tag, into,
                              (size_t)g.bytes, &data, err));
        data = NULL; /* landed in place */
      } else {
        RSI_TRY(tp->ops->recv(tp, half, rr->me, msg->src_rank, tag,
                              rr->staging[half] + at, (size_t)g.bytes, &data,
                              err));
        at += ALIGN64(g.bytes);
      }
      RSI_TRY(expect_arrival(rr, half, (arrival){g, data}, err));
      i += g.n;
    }
  }
  for (int64_t k = s->first; k < s->first + s->n; k++) {
    const rsi_message *msg = &plan->msgs[rr->mine[k]];
    if (msg->src_rank != rr->me) continue;
    if (msg->dst_rank == rr->me) {
      copy_local(rr->ex, msg);
      continue;
    }
    for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves;) {
      segment g = segment_at(plan, msg, i);
      const char *from = g.single ? direct_ptr(rr->ex, &plan->moves[i], true) : NULL;
      if (!from) {
        stream_moves(rr->ex, &g, rr->staging[half] + at, true);
        from = rr->staging[half] + at;
        at += ALIGN64(g.bytes);
      }
      RSI_TRY(tp->ops->send(tp, half, rr->me, msg->dst_rank, tag, from,
                            (size_t)g.bytes, err));
      i += g.n;
    }
  }
  return RS_OK;
}

static rs_status finish_step(rank_run *rr, const step *s, int half) {
  const rs_plan *plan = rr->ex->plan;
  RSI_TRY(rsi_guard_wait((rs_plan *)plan, half, plan->ctx->err));
  rr->ex->my_relay = rr->relay[s->round % 2];
  for (int64_t a = 0; a < rr->narrivals[half]; a++) {
    const arrival *in = &rr->arrivals[half][a];
    if (in->data) stream_moves(rr->ex, &in->seg, (char *)in->data, false);
  }
  rr->narrivals[half] = 0;
  return RS_OK;
}

/* Staging one step needs on this rank: every segment it sends or receives,
 * as if none could go direct. */
static int64_t step_staging(const rs_plan *plan, const rsi_message *msg) {
  int64_t bytes = 0;
  for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves;) {
    segment g = segment_at(plan, msg, i);
    bytes += ALIGN64(g.bytes);
    i += g.n;
  }
  return bytes;
}

static rs_status run_steps(rank_run *rr, const step *steps, int64_t nsteps) {
  if (nsteps == 0) return RS_OK;
  RSI_TRY(begin_step(rr, &steps[0], 0));
  for (int64_t i = 0; i < nsteps; i++) {
    /* Begin the next step early only when it reads nothing this one may
     * still be writing: source shards, not bytes that are arriving. */
    bool overlap = i + 1 < nsteps && steps[i + 1].stage == 0 &&
                   !steps[i + 1].reads_dst;
    if (overlap) RSI_TRY(begin_step(rr, &steps[i + 1], (int)((i + 1) % 2)));
    RSI_TRY(finish_step(rr, &steps[i], (int)(i % 2)));
    if (!overlap && i + 1 < nsteps)
      RSI_TRY(begin_step(rr, &steps[i + 1], (int)((i + 1) % 2)));
  }
  return RS_OK;
}

static rs_status run_one_rank(exec_state *ex, rs_context *ctx,
                              rsi_err *err) {
  rsi_transport *tp = ctx->transport;
  const rs_plan *plan = ex->plan;
  int me = plan->ctx->rank;
  int64_t n = 0;
  for (int64_t i = 0; i < plan->nmsgs; i++)
    n += plan->msgs[i].src_rank == me || plan->msgs[i].dst_rank == me;
  int64_t *mine = malloc((size_t)(n ? n : 1) * sizeof *mine);
  step *steps = malloc((size_t)(n ? n : 1) * sizeof *steps);
  if (!mine || !steps) {
    free(mine);
    free(steps);
    return RSI_NOMEM(err);
  }
  int64_t nsteps = 0, k = 0, staging = 0, used = 0;
  for (int64_t i = 0; i < plan->nmsgs; i++) {
    const rsi_message *m = &plan->msgs[i];
    if (m->src_rank != me && m->dst_rank != me) continue;
    step *last = nsteps ? &steps[nsteps - 1] : NULL;
    if (!last || last->round != m->round || last->stage != m->stage) {
      steps[nsteps++] = (step){m->round, m->stage, k, 0, false};
      used = 0;
    }
    if (m->src_rank == me)
      for (int64_t j = m->first_move; j < m->first_move + m->nmoves; j++)
        if (plan->moves[j].src_kind != RSI_EP_SRC)
          steps[nsteps - 1].reads_dst = true;
    steps[nsteps - 1].n++;
    mine[k++] = i;
    if (m->src_rank != m->dst_rank) used += step_staging(plan, m);
    if (used > staging) staging = used;
  }
  rank_run rr = {ex, tp, me, mine, {0}, {0}, {0}, {0}, {0}};
  int64_t relay = plan->relay_bytes[me];
  /* Staging belongs to the context: sends abandoned after a failure may
   * still read it, so it lives until the context does. */
  char *area = NULL;
  rs_status st = rsi_context_scratch(ctx, 2 * (staging + relay) + 1, &area);
  if (st == RS_OK) {
    rr.staging[0] = area;
    rr.staging[1] = area + staging;
    rr.relay[0] = area + 2 * staging;
    rr.relay[1] = area + 2 * staging + relay;
    st = run_steps(&rr, steps, nsteps);
  }
  free(mine);
  free(steps);
  free(rr.arrivals[0]);
  free(rr.arrivals[1]);
  return st;
}

static int cmp_rank_index(const void *x, const void *y) {
  const int64_t *a = x, *b = y;
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  return (a[1] > b[1]) - (a[1] < b[1]);
}

/* Where each relay slot lives in the in-process relay area, once: the
 * ranks that relay get their staging blocks one after another. */
static rs_status relay_layout(rs_plan *plan, rsi_err *err) {
  if (plan->relay_at) return RS_OK;
  int64_t n = plan->nrelays;
  int64_t *at = malloc((size_t)(n ? n : 1) * sizeof *at);
  int64_t(*by_rank)[2] = malloc((size_t)(n ? n : 1) * sizeof *by_rank);
  if (!at || !by_rank) {
    free(at);
    free(by_rank);
    return RSI_NOMEM(err);
  }
  for (int64_t i = 0; i < n; i++) {
    by_rank[i][0] = plan->relays[i].rank;
    by_rank[i][1] = i;
  }
  qsort(by_rank, (size_t)n, sizeof *by_rank, cmp_rank_index);
  int64_t total = 0, base = 0;
  for (int64_t k = 0; k < n; k++) {
    int rank = (int)by_rank[k][0];
    if (k == 0 || by_rank[k - 1][0] != rank) {
      base = total;
      total += plan->relay_bytes[rank];
    }
    at[by_rank[k][1]] = base + plan->relays[by_rank[k][1]].staging_offset;
  }
  free(by_rank);
  plan->relay_at = at;
  plan->relay_total = total;
  return RS_OK;
}

static rs_status execute_all_ranks(rs_plan *plan, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  RSI_TRY(relay_layout(plan, err));
  int64_t slice = ctx->slice_bytes / 16 * 16;
  exec_state ex = {plan, malloc((size_t)(plan->relay_total ? plan->relay_total : 1)), NULL};
  char *stage_buf = malloc((size_t)slice);
  rs_status st = ex.relay_area && stage_buf
                     ? run_all_ranks(&ex, ctx->transport, slice, stage_buf, err)
                     : RSI_NOMEM(err);
  free(stage_buf);
  free(ex.relay_area);
  return st;
}

/* One rank of many processes: the guard's hello before the steps, its
 * last check after them; any failure past the agreement ends the context
 * and tells the peers. */
static rs_status execute_one_rank(rs_plan *plan, rsi_err *err) {
  rs_context *ctx = plan->ctx;
  RSI_TRY(rsi_guard_begin(plan, err));
  if (ctx->transport->ops->set_integrity)
    ctx->transport->ops->set_integrity(ctx->transport, plan->integrity);
  exec_state ex = {plan, NULL, NULL};
  rs_status st = run_one_rank(&ex, ctx, err);
  if (st == RS_OK) return rsi_guard_end(plan, err);
  rsi_guard_fail(plan, st);
  return st;
}

rs_status rsi_plan_execute(rs_plan *plan) {
  rs_context *ctx = plan->ctx;
  rsi_err *err = ctx->err;
  RSI_TRY(rsi_context_usable(ctx));
  RSI_TRY(check_bindings(plan, err));
  return ctx->rank == RS_ALL_RANKS ? execute_all_ranks(plan, err)
                                   : execute_one_rank(plan, err);
}
