#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "copy.h"
#include "transport/transport.h"

static const char *side_name(int side) {
  return side == RS_SIDE_SRC ? "source" : "destination";
}

rs_status rsi_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                        void *ptr, size_t bytes) {
  rsi_err *err = &plan->ctx->err;
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
  if ((uint64_t)bytes < (uint64_t)b->need)
    return RSI_FAIL(err, RS_ERR_BUFFER_TOO_SMALL,
                    "%s buffer %d of rank %d: %zu bytes bound, its shards "
                    "reach byte %lld",
                    side_name(side), buffer, rank, bytes, (long long)b->need);
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

static rs_status check_bindings(const rs_plan *plan, rsi_err *err) {
  int64_t n = 0;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    for (int r = 0; r < plan->world_size; r++) {
      if (!rsi_context_drives(plan->ctx, r)) continue;
      for (int64_t b = side->rank_first[r]; b < side->rank_first[r + 1]; b++) {
        if (!side->buffers[b].need) continue;
        if (!side->buffers[b].ptr)
          return RSI_FAIL(err, RS_ERR_UNKNOWN_BUFFER,
                          "%s buffer %lld of rank %d is not bound (its "
                          "shards need %lld bytes); call rs_plan_bind",
                          side_name(s), (long long)(b - side->rank_first[r]),
                          r, (long long)side->buffers[b].need);
        n++;
      }
    }
  }
  /* No destination byte may be any other bound byte. */
  bound_range *ranges = malloc((size_t)(n ? n : 1) * sizeof *ranges);
  if (!ranges) return RSI_NOMEM(err);
  n = 0;
  for (int s = 0; s < 2; s++) {
    const rsi_side *side = &plan->side[s];
    for (int r = 0; r < plan->world_size; r++) {
      if (!rsi_context_drives(plan->ctx, r)) continue;
      for (int64_t b = side->rank_first[r]; b < side->rank_first[r + 1]; b++) {
        const struct rsi_binding *bd = &side->buffers[b];
        if (!bd->need) continue;
        uintptr_t lo = (uintptr_t)bd->ptr;
        ranges[n++] = (bound_range){lo, lo + (uintptr_t)bd->need, s, r,
                                    (int)(b - side->rank_first[r])};
      }
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
  char **relay_base; /* per rank */
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
    base = ex->relay_base[r->rank] + r->staging_offset;
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

/* Pack bytes [lo, hi) of message msg into out. */
static void pack_range(const exec_state *ex, const rsi_message *msg,
                       int64_t lo, int64_t hi, char *out) {
  const rs_plan *plan = ex->plan;
  for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int64_t a = m->msg_offset > lo ? m->msg_offset : lo;
    int64_t b = m->msg_offset + m->bytes < hi ? m->msg_offset + m->bytes : hi;
    if (a >= b) continue;
    const rsi_tensor *t = &plan->tensors[m->tensor];
    int64_t strides[RSI_MAX_DIMS];
    const char *src = endpoint(ex, m, m->src_kind, m->src_index, strides);
    rsi_copy_range(t->ndim, rsi_move_extent(plan, m), (size_t)t->esize,
                   out + (a - lo), NULL, src, strides,
                   (a - m->msg_offset) / t->esize,
                   (b - m->msg_offset) / t->esize);
  }
}

static void unpack_range(const exec_state *ex, const rsi_message *msg,
                         int64_t lo, int64_t hi, const char *in) {
  const rs_plan *plan = ex->plan;
  for (int64_t i = msg->first_move; i < msg->first_move + msg->nmoves; i++) {
    const rsi_move *m = &plan->moves[i];
    int64_t a = m->msg_offset > lo ? m->msg_offset : lo;
    int64_t b = m->msg_offset + m->bytes < hi ? m->msg_offset + m->bytes : hi;
    if (a >= b) continue;
    const rsi_tensor *t = &plan->tensors[m->tensor];
    int64_t strides[RSI_MAX_DIMS];
    char *dst = endpoint(ex, m, m->dst_kind, m->dst_index, strides);
    rsi_copy_range(t->ndim, rsi_move_extent(plan, m), (size_t)t->esize, dst,
                   strides, in + (a - lo), NULL,
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
      pack_range(ex, msg, lo, hi, stage_buf);
      RSI_TRY(tp->ops->send(tp, msg->src_rank, msg->dst_rank, tag, stage_buf,
                            (size_t)(hi - lo), err));
      RSI_TRY(tp->ops->recv(tp, msg->dst_rank, msg->src_rank, tag, stage_buf,
                            (size_t)(hi - lo), &data, err));
      RSI_TRY(tp->ops->wait_all(tp, plan->ctx->timeout_ms, err));
      unpack_range(ex, msg, lo, hi, data);
    }
  }
  return RS_OK;
}

rs_status rsi_plan_execute(rs_plan *plan) {
  rs_context *ctx = plan->ctx;
  rsi_err *err = &ctx->err;
  RSI_TRY(check_bindings(plan, err));
  if (ctx->rank != RS_ALL_RANKS || !ctx->transport)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "this context's transport cannot execute plans yet");

  int64_t slice = ctx->slice_bytes / 16 * 16;
  int64_t relay_total = 0;
  for (int r = 0; r < plan->world_size; r++) relay_total += plan->relay_bytes[r];
  exec_state ex = {plan, calloc((size_t)plan->world_size, sizeof(char *))};
  char *relay = malloc((size_t)(relay_total ? relay_total : 1));
  char *stage_buf = malloc((size_t)slice);
  rs_status st = RS_OK;
  if (!ex.relay_base || !relay || !stage_buf) {
    st = RSI_NOMEM(err);
  } else {
    int64_t at = 0;
    for (int r = 0; r < plan->world_size; r++) {
      ex.relay_base[r] = relay + at;
      at += plan->relay_bytes[r];
    }
    st = run_all_ranks(&ex, ctx->transport, slice, stage_buf, err);
  }
  free(stage_buf);
  free(relay);
  free(ex.relay_base);
  return st;
}
