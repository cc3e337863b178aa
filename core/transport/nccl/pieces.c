/* SPDX-License-Identifier: Apache-2.0 */
/* Building the piece table of the CUDA copy engine from a batch of copies,
 * and the kernel's CPU emulation (pieces.h says how a copy becomes
 * pieces and items). */
#include "pieces.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "convert_pieces.h"

/* A copy as a box of bytes: ext[n-1] is the contiguous row (stride 1 on
 * both sides), strides in bytes, bases as addresses. */
typedef struct byte_box {
  int n;
  int64_t ext[RS_MAX_DIMS + 1];
  int64_t ds[RS_MAX_DIMS + 1], ss[RS_MAX_DIMS + 1];
  uint64_t dst, src;
} byte_box;

static void add_dim(byte_box *b, int64_t ext, int64_t ds, int64_t ss) {
  if (b->n > 0) {
    int k = b->n - 1;
    if (b->ds[k] == ds * ext && b->ss[k] == ss * ext) {
      b->ext[k] *= ext;
      b->ds[k] = ds;
      b->ss[k] = ss;
      return;
    }
  }
  b->ext[b->n] = ext;
  b->ds[b->n] = ds;
  b->ss[b->n] = ss;
  b->n++;
}

/* Dims of extent 1 are dropped, the element's bytes become the innermost
 * dim (kept even for one byte: it is what makes rows contiguous), and a
 * dense side takes the box's dense strides. */
static void to_byte_box(const rsi_copy *c, const rsi_piece_space *sp,
                        byte_box *b) {
  int64_t esize = sp->esize;
  int64_t dense[RS_MAX_DIMS];
  int64_t s = esize;
  for (int d = c->ndim - 1; d >= 0; d--) {
    dense[d] = s;
    s *= c->extent[d];
  }
  b->n = 0;
  for (int d = 0; d < c->ndim; d++) {
    if (c->extent[d] == 1) continue;
    add_dim(b, c->extent[d],
            c->dense_dst ? dense[d] : c->dst_strides[d] * esize,
            c->dense_src ? dense[d] : c->src_strides[d] * esize);
  }
  add_dim(b, esize, 1, 1);
  uint64_t lo_bytes = (uint64_t)c->lo * (uint64_t)esize;
  b->dst = sp->dst - (c->dense_dst ? lo_bytes : 0);
  b->src = sp->src - (c->dense_src ? lo_bytes : 0);
}

/* The largest unit in {max_unit, ..., 2, 1} dividing every value a unit
 * address is made of. */
static int32_t pick_unit(const byte_box *b, uint64_t lo_bytes,
                         uint64_t hi_bytes, const rsi_piece_space *sp) {
  uint64_t all = (uint64_t)b->ext[b->n - 1] | lo_bytes | hi_bytes | b->dst |
                 b->src;
  for (int d = 0; d + 1 < b->n; d++)
    all |= (uint64_t)b->ds[d] | (uint64_t)b->ss[d];
  int32_t w = sp->max_unit;
  while (w > 1 && (all & (uint64_t)(w - 1))) w /= 2;
  return sp->only_max && w < sp->max_unit ? 1 : w;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Rows x cols into items of at most RSI_PIECE_ITEM_UNITS units, balanced
 * so that the last item is not a sliver. */
static void cut_items(rsi_piece *p) {
  const int64_t cap = RSI_PIECE_ITEM_UNITS;
  if (p->ncols >= cap) {
    int64_t chunks = ceil_div(p->ncols, cap);
    p->chunk_cols = ceil_div(p->ncols, chunks);
    p->chunks = ceil_div(p->ncols, p->chunk_cols);
    p->rows_per_item = 1;
    p->items = p->nrows * p->chunks;
  } else {
    int64_t groups = ceil_div(p->nrows, cap / p->ncols);
    p->rows_per_item = ceil_div(p->nrows, groups);
    p->chunks = 1;
    p->chunk_cols = p->ncols;
    p->items = ceil_div(p->nrows, p->rows_per_item);
  }
}

static rs_status add_piece(rsi_pieces *out, const rsi_piece *shape,
                           int64_t row_lo, int64_t nrows, int64_t col_lo,
                           int64_t ncols, rsi_err *err) {
  if (nrows <= 0 || ncols <= 0) return RS_OK;
  RSI_TRY(rsi_grow((void **)&out->v, &out->cap, out->n + 1, sizeof(rsi_piece),
                   64, err));
  rsi_piece *p = &out->v[out->n++];
  *p = *shape;
  p->row_lo = row_lo;
  p->nrows = nrows;
  p->col_lo = col_lo;
  p->ncols = ncols;
  cut_items(p);
  p->first_item = out->items;
  out->items += p->items;
  return RS_OK;
}

rs_status rsi_pieces_add(rsi_pieces *out, const rsi_copy *c,
                         const rsi_piece_space *sp, rsi_err *err) {
  if (c->hi <= c->lo) return RS_OK;
  byte_box b;
  to_byte_box(c, sp, &b);
  uint64_t lo_bytes = (uint64_t)c->lo * (uint64_t)sp->esize;
  uint64_t hi_bytes = (uint64_t)c->hi * (uint64_t)sp->esize;
  int32_t w = pick_unit(&b, lo_bytes, hi_bytes, sp);

  rsi_piece shape;
  memset(&shape, 0, sizeof shape); /* unused dims zero: a stable table */
  shape.dst = b.dst;
  shape.src = b.src;
  shape.unit = w;
  shape.nouter = b.n - 1;
  shape.cast = sp->cast;
  for (int d = 0; d + 1 < b.n; d++) {
    shape.ext[d] = b.ext[d];
    shape.dst_stride[d] = b.ds[d];
    shape.src_stride[d] = b.ss[d];
  }
  int64_t cols = b.ext[b.n - 1] / w;
  int64_t lo = (int64_t)(lo_bytes / (uint64_t)w);
  int64_t hi = (int64_t)(hi_bytes / (uint64_t)w);
  int64_t row_lo = lo / cols, col_lo = lo % cols;
  int64_t row_hi = hi / cols, col_hi = hi % cols; /* row_hi: partial tail */
  if (row_lo == row_hi) /* inside one row */
    return add_piece(out, &shape, row_lo, 1, col_lo, col_hi - col_lo, err);
  int64_t full_lo = row_lo;
  if (col_lo) {
    RSI_TRY(add_piece(out, &shape, row_lo, 1, col_lo, cols - col_lo, err));
    full_lo++;
  }
  RSI_TRY(add_piece(out, &shape, full_lo, row_hi - full_lo, 0, cols, err));
  return add_piece(out, &shape, row_hi, 1, 0, col_hi, err);
}

rs_status rsi_pieces_build(const rsi_copy *copies, int64_t n,
                           rsi_pieces *out, rsi_err *err) {
  out->n = 0;
  out->items = 0;
  for (int64_t i = 0; i < n; i++) {
    const rsi_copy *c = &copies[i];
    rsi_piece_space sp = {c->esize, (uint64_t)(uintptr_t)c->dst,
                          (uint64_t)(uintptr_t)c->src, 16, 0, false};
    if (c->op == RSI_COPY_CAST && c->src_dtype == c->dst_dtype &&
        rsi_conv_float(c->src_dtype))
      sp.esize = rsi_conv_size(c->src_dtype);
    else if (c->op != RSI_COPY_PLAIN)
      continue;
    rs_status st = rsi_pieces_add(out, c, &sp, err);
    if (st != RS_OK) {
      out->n = 0;
      out->items = 0;
      return st;
    }
  }
  return RS_OK;
}

void rsi_pieces_free(rsi_pieces *p) {
  if (!p) return;
  free(p->v);
  p->v = NULL;
  p->n = p->cap = p->items = 0;
  if (p->conv) {
    free(p->conv->cast.v);
    free(p->conv->blk);
    free(p->conv->pair);
    free(p->conv->origins);
    free(p->conv);
    p->conv = NULL;
  }
}

void rsi_rect_walk_host(const rsi_rect *r, uint32_t threads, rsi_unit_fn unit,
                        const void *ctx) {
  for (uint32_t thread = 0; thread < threads && thread < r->units;
       thread++) {
    rsi_walk w;
    rsi_walk_start(r, thread, threads, &w);
    for (uint32_t k = thread; k < r->units; k += threads) {
      unit(ctx, w.dst, w.src);
      rsi_walk_next(r, &w);
    }
  }
}

/* `stride` threads walk a straight item. */
static void run_straight(const rsi_piece *p, const rsi_item *it,
                         uint32_t stride, rsi_unit_fn unit) {
  rsi_rect r;
  rsi_item_rect(it, &r);
  rsi_rect_walk_host(&r, stride, unit, p);
}

/* As the kernel does it: a straight item by walks; another by straight
 * segments, or unit by unit. */
void rsi_pieces_walk_host(const rsi_piece *t, int64_t n, int64_t items,
                          int threads_per_item, rsi_unit_fn unit) {
  uint32_t stride = (uint32_t)threads_per_item;
  for (int64_t item = 0; item < items; item++) {
    const rsi_piece *p = &t[rsi_piece_find(t, n, item)];
    rsi_item it;
    rsi_piece_item(p, item, &it);
    if (it.straight_rows == it.rows) {
      run_straight(p, &it, stride, unit);
    } else if (rsi_item_by_segments(p, &it, stride)) {
      for (uint32_t from = 0; from < it.rows;) {
        rsi_item seg;
        rsi_item_segment(p, &it, from, &seg);
        run_straight(p, &seg, stride, unit);
        from += seg.rows;
      }
    } else {
      for (uint32_t thread = 0; thread < stride; thread++) {
        uint64_t dst, src;
        for (uint32_t k = thread; rsi_item_unit(p, &it, k, &dst, &src);
             k += stride)
          unit(p, dst, src);
      }
    }
  }
}

static void copy_unit(const void *piece, uint64_t dst, uint64_t src) {
  const rsi_piece *p = piece;
  memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
         (size_t)p->unit);
}

void rsi_pieces_run_host(const rsi_piece *t, int64_t n, int64_t items,
                         int threads_per_item) {
  rsi_pieces_walk_host(t, n, items, threads_per_item, copy_unit);
}
