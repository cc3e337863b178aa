/* SPDX-License-Identifier: Apache-2.0 */
/* The piece table of the CUDA copy engine: a batch of rsi_copy turned into
 * flat descriptors that one kernel launch walks, and the per-thread index
 * math that both the kernel (pack.cu) and its CPU emulation
 * (rsi_pieces_run_host, what CI tests) run.
 *
 * A copy is first seen as a box of bytes: its dims, then one innermost dim
 * of esize bytes; a dense side gets the dense strides of the box and a
 * base moved back by lo elements, so both sides are strided. Dims that
 * both sides step through as one are merged; the innermost dim is then one
 * contiguous row on both sides. Bytes move in units of w in {16,8,4,2,1}:
 * the largest that divides the row, the range ends, both bases and every
 * outer stride, so every unit address is w-aligned. The range becomes up to
 * three pieces (partial head row, full rows, partial tail row), each
 * `nrows` rows x `ncols` units from (row_lo, col_lo). A piece is cut into
 * items of at most RSI_PIECE_ITEM_UNITS units: a chunk of one long row, or
 * several whole short rows. A team of threads (a warp or a block on the
 * GPU, threads_per_item in the emulation) copies an item: rows that follow
 * one another by one stride are a rect, walked with no division per unit
 * (rsi_walk_*, which the block jobs of convert_pieces.h walk too); an item
 * whose rows cross the end of the innermost outer dim is split into such
 * straight segments, or, where those would be too short, copied unit by
 * unit (rsi_item_unit).
 *
 * Conversions (rsi_copy ops other than PLAIN) reuse these pieces in
 * element space or have block pieces of their own: convert_pieces.h.
 *
 * Plain C11 that also compiles as CUDA C++: per-thread functions are
 * `static inline RSI_HD`, __host__ __device__ under nvcc. */
#ifndef RS_CORE_TRANSPORT_NCCL_PIECES_H
#define RS_CORE_TRANSPORT_NCCL_PIECES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copy/engine.h"
#include "base/error.h"
#include "base/hd.h"

/* Units one item holds at most. */
#define RSI_PIECE_ITEM_UNITS 4096
/* Outer (row) dims a piece can have: every dim of the copy at most. */
#define RSI_PIECE_MAX_OUTER RS_MAX_DIMS

/* One piece: rows [row_lo, row_lo + nrows) x units [col_lo, col_lo +
 * ncols) of a merged box whose rows are numbered row-major over `nouter`
 * outer dims. The byte address of unit c of row r on one side is
 * base + sum(idx_d(r) * stride[d]) + c * unit, computed mod 2^64 (a dense
 * side's base may lie before its pointer, so it may wrap). */
typedef struct rsi_piece {
  uint64_t dst, src;     /* base addresses */
  int64_t row_lo, nrows; /* rows, numbered over the outer dims */
  int64_t col_lo, ncols; /* units inside each row */
  /* Items: the piece's items are [first_item, first_item + items); item i
   * (counted from first_item) covers rows (i / chunks) * rows_per_item ..
   * (at most rows_per_item of them) and units (i % chunks) * chunk_cols ..
   * (at most chunk_cols) of those rows. chunks > 1 only when rows_per_item
   * is 1. */
  int64_t first_item, items;
  int64_t chunks, chunk_cols, rows_per_item;
  int32_t unit;   /* bytes per unit: 16, 8, 4, 2 or 1 */
  int32_t nouter; /* outer dims in use, 0..RSI_PIECE_MAX_OUTER */
  /* 0: the bytes as they are. Else a cast (convert_pieces.h): addresses,
   * strides and units count elements, `unit` of them a unit. */
  int32_t cast;
  int32_t reserved;
  int64_t ext[RSI_PIECE_MAX_OUTER];        /* outer extents, outermost first */
  int64_t dst_stride[RSI_PIECE_MAX_OUTER]; /* outer strides, bytes */
  int64_t src_stride[RSI_PIECE_MAX_OUTER];
} rsi_piece;

/* One item of a piece as rsi_piece_item finds it, small enough for a
 * thread's registers: `rows` x `cols` units from absolute row row0, unit
 * col0. dst / src are the addresses of its first unit; the first
 * `straight_rows` rows follow one another by dst_step / src_step bytes
 * (the stride of the innermost outer dim); later rows (past the end of
 * that dim) are found by rsi_piece_row. */
typedef struct rsi_item {
  uint64_t dst, src;
  uint64_t dst_step, src_step;
  int64_t row0, col0;
  uint32_t rows, cols, units, straight_rows;
  uint32_t unit;
} rsi_item;

/* rows x cols units; unit (r, c) of a side is at base + r * row + c *
 * unit (mod 2^64), in bytes, or in elements for conversions. */
typedef struct rsi_rect {
  uint64_t dst, src;
  int64_t dst_row, src_row, dst_unit, src_unit;
  uint32_t rows, cols, units;
} rsi_rect;

/* A reusable table: v[0..n) with room for cap; items in all. conv: the
 * batch's conversions (convert_pieces.h), made by rsi_convert_build;
 * NULL until a batch had one; freed with the table. */
typedef struct rsi_pieces {
  rsi_piece *v;
  int64_t n, cap, items;
  struct rsi_conv_tables *conv;
} rsi_pieces;

/* How a copy is cut into pieces: the bytes of its innermost dim (esize;
 * 1 in element space), the bases (addresses, or element indices), the
 * largest unit (a power of two; with only_max, a smaller one falls to 1)
 * and the stamp of its pieces (rsi_piece.cast). */
typedef struct rsi_piece_space {
  int64_t esize;
  uint64_t dst, src;
  int32_t max_unit, cast;
  bool only_max;
} rsi_piece_space;

#ifdef __cplusplus
extern "C" {
#endif

/* The table of the plain copies of copies[0..n) (RSI_COPY_PLAIN, and
 * RSI_COPY_CAST between equal dtypes of convert_pieces.h's), into out
 * (reset first; its room is kept and grown); other copies are
 * rsi_convert_build's. RS_ERR_NO_MEMORY leaves out with n = items = 0. */
rs_status rsi_pieces_build(const rsi_copy *copies, int64_t n,
                           rsi_pieces *out, rsi_err *err);
/* Appends the pieces of copy c, cut as `space` says. */
rs_status rsi_pieces_add(rsi_pieces *out, const rsi_copy *c,
                         const rsi_piece_space *space, rsi_err *err);
void rsi_pieces_free(rsi_pieces *p);

/* The CPU emulation of the kernel: every item, and in it every one of
 * threads_per_item threads running the kernel's strided loop, each unit
 * copied with memcpy. The addresses are host pointers. */
void rsi_pieces_run_host(const rsi_piece *t, int64_t n, int64_t items,
                         int threads_per_item);
/* What the emulation does to a unit at (dst, src). */
typedef void (*rsi_unit_fn)(const void *ctx, uint64_t dst, uint64_t src);
/* The same walk, each unit handed to `unit` with its piece as ctx. */
void rsi_pieces_walk_host(const rsi_piece *t, int64_t n, int64_t items,
                          int threads_per_item, rsi_unit_fn unit);
/* `threads` threads walk r as a team of the kernels does, each unit
 * handed to `unit` with ctx. */
void rsi_rect_walk_host(const rsi_rect *r, uint32_t threads, rsi_unit_fn unit,
                        const void *ctx);

/* pack.cu: enqueue on `stream` (a cudaStream_t) the one kernel that copies
 * every item of the table table_dev[0..npieces) (device memory; device
 * addresses). Nothing is launched when items is 0. Returns the launch's
 * cudaError_t (0: cudaSuccess). */
int rsi_cuda_copy_launch(const rsi_piece *table_dev, int64_t npieces,
                         int64_t items, void *stream);

#ifdef __cplusplus
}
#endif

/* The entry of a table of n entries, `size` bytes each, that holds
 * `item`: the last whose first item (the int64_t at first0 in entry 0, at
 * the same place in the others) is at most item. */
static inline RSI_HD int64_t rsi_table_find(const int64_t *first0,
                                            size_t size, int64_t n,
                                            int64_t item) {
  const char *at = (const char *)first0;
  int64_t lo = 0, hi = n - 1;
  RSI_NO_UNROLL
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (*(const int64_t *)(at + (size_t)mid * size) <= item)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The piece of t[0..n) that holds `item` (0 <= item < total items). */
static inline RSI_HD int64_t rsi_piece_find(const rsi_piece *t, int64_t n,
                                            int64_t item) {
  return rsi_table_find(&t->first_item, sizeof *t, n, item);
}

/* x / y, through a 32-bit division when both fit (far cheaper on GPUs). */
static inline RSI_HD uint64_t rsi_piece_udiv(uint64_t x, uint64_t y) {
  if ((x | y) >> 32 == 0) return (uint64_t)((uint32_t)x / (uint32_t)y);
  return x / y;
}

/* Adds to *dst and *src the offsets of flat index `index`, row-major
 * over ext[0..n), on sides of strides ds and ss (ss NULL: dst only; src
 * may then be NULL): a division a dim but the outermost, which holds what
 * is left. */
static inline RSI_HD void rsi_box_at(int n, const int64_t *ext,
                                     const int64_t *ds, const int64_t *ss,
                                     uint64_t index, uint64_t *dst,
                                     uint64_t *src) {
  uint64_t d = 0, s = 0, rest = index;
  RSI_NO_UNROLL
  for (int dim = n - 1; dim > 0; dim--) {
    uint64_t q = rsi_piece_udiv(rest, (uint64_t)ext[dim]);
    uint64_t i = rest - q * (uint64_t)ext[dim];
    d += i * (uint64_t)ds[dim];
    if (ss) s += i * (uint64_t)ss[dim];
    rest = q;
  }
  if (n > 0) {
    d += rest * (uint64_t)ds[0];
    if (ss) s += rest * (uint64_t)ss[0];
  }
  *dst += d;
  if (ss) *src += s;
}

/* The addresses of unit 0 of row `row` of p. */
static inline RSI_HD void rsi_piece_row(const rsi_piece *p, int64_t row,
                                        uint64_t *dst, uint64_t *src) {
  *dst = p->dst;
  *src = p->src;
  rsi_box_at(p->nouter, p->ext, p->dst_stride, p->src_stride, (uint64_t)row,
             dst, src);
}

/* Where item `item` (a global item number inside p) lies: once per item
 * and thread. */
static inline RSI_HD void rsi_piece_item(const rsi_piece *p, int64_t item,
                                         rsi_item *it) {
  uint64_t local = (uint64_t)(item - p->first_item);
  uint64_t group = local, chunk = 0;
  if (p->chunks > 1) {
    group = rsi_piece_udiv(local, (uint64_t)p->chunks);
    chunk = local - group * (uint64_t)p->chunks;
  }
  int64_t r = (int64_t)group * p->rows_per_item;
  int64_t c = (int64_t)chunk * p->chunk_cols;
  int64_t rows = p->nrows - r, cols = p->ncols - c;
  if (rows > p->rows_per_item) rows = p->rows_per_item;
  if (cols > p->chunk_cols) cols = p->chunk_cols;
  it->rows = (uint32_t)rows;
  it->cols = (uint32_t)cols;
  it->units = (uint32_t)(rows * cols);
  it->unit = (uint32_t)p->unit;
  it->row0 = p->row_lo + r;
  it->col0 = p->col_lo + c;
  uint64_t d, s, col = (uint64_t)it->col0 * (uint64_t)p->unit;
  rsi_piece_row(p, it->row0, &d, &s);
  it->dst = d + col;
  it->src = s + col;
  it->straight_rows = it->rows;
  it->dst_step = it->src_step = 0;
  if (p->nouter > 0 && rows > 1) {
    int last = p->nouter - 1;
    uint64_t e = (uint64_t)p->ext[last];
    uint64_t r0 = (uint64_t)it->row0;
    uint64_t left = e - (r0 - rsi_piece_udiv(r0, e) * e); /* to dim's end */
    if (left < it->rows) it->straight_rows = (uint32_t)left;
    it->dst_step = (uint64_t)p->dst_stride[last];
    it->src_step = (uint64_t)p->src_stride[last];
  }
}

/* The addresses of unit col0 of the item's row kr, the long way. */
static RSI_HD_COLD void rsi_item_far_row(const rsi_piece *p,
                                         const rsi_item *it, uint32_t kr,
                                         uint64_t *dst, uint64_t *src) {
  uint64_t col = (uint64_t)it->col0 * it->unit;
  rsi_piece_row(p, it->row0 + kr, dst, src);
  *dst += col;
  *src += col;
}

/* The straight run of an item's rows that starts at its row `from` (<
 * rows), as an item of its own: up to the end of the item or of the
 * innermost outer dim, whichever comes first. */
static inline RSI_HD void rsi_item_segment(const rsi_piece *p,
                                           const rsi_item *it, uint32_t from,
                                           rsi_item *seg) {
  *seg = *it;
  seg->row0 = it->row0 + from;
  uint64_t d, s, col = (uint64_t)it->col0 * it->unit;
  rsi_piece_row(p, seg->row0, &d, &s);
  seg->dst = d + col;
  seg->src = s + col;
  uint32_t rows = it->rows - from;
  uint64_t e = (uint64_t)p->ext[p->nouter - 1], r0 = (uint64_t)seg->row0;
  uint64_t left = e - (r0 - rsi_piece_udiv(r0, e) * e);
  if (left < rows) rows = (uint32_t)left;
  seg->rows = seg->straight_rows = rows;
  seg->units = rows * it->cols;
}

/* Whether an item that is not straight (straight_rows < rows) is copied
 * segment by segment (rsi_item_segment, each walked as a straight item by
 * `threads` threads) rather than unit by unit (rsi_item_unit): when a
 * segment spanning the whole innermost outer dim keeps every thread busy.
 * Else segments would be too short and the units' divisions are cheaper. */
static inline RSI_HD bool rsi_item_by_segments(const rsi_piece *p,
                                               const rsi_item *it,
                                               uint32_t threads) {
  return (uint64_t)p->ext[p->nouter - 1] * it->cols >= threads;
}

/* The rect of an item's first straight_rows rows (all its rows when
 * straight_rows == rows). */
static inline RSI_HD void rsi_item_rect(const rsi_item *it, rsi_rect *r) {
  r->dst = it->dst;
  r->src = it->src;
  r->dst_row = (int64_t)it->dst_step;
  r->src_row = (int64_t)it->src_step;
  r->dst_unit = r->src_unit = it->unit;
  r->rows = it->rows;
  r->cols = it->cols;
  r->units = it->units;
}

/* Unit k (< units) of r: the dst and src addresses. A 32-bit division
 * when r holds several rows, none otherwise. */
static inline RSI_HD void rsi_rect_unit(const rsi_rect *r, uint32_t k,
                                        uint64_t *dst, uint64_t *src) {
  uint32_t kr = 0, kc = k;
  if (r->rows > 1) {
    kr = k / r->cols;
    kc = k - kr * r->cols;
  }
  *dst = r->dst + (uint64_t)kr * (uint64_t)r->dst_row +
         (uint64_t)kc * (uint64_t)r->dst_unit;
  *src = r->src + (uint64_t)kr * (uint64_t)r->src_row +
         (uint64_t)kc * (uint64_t)r->src_unit;
}

/* Unit k of an item (0 <= k, one thread's index): false when k is past the
 * item's end; else the dst and src addresses of that unit. Rows past the
 * end of the innermost outer dim go through rsi_piece_row (out of line on
 * the GPU, so that the common path holds few registers). */
static inline RSI_HD bool rsi_item_unit(const rsi_piece *p,
                                        const rsi_item *it, uint32_t k,
                                        uint64_t *dst, uint64_t *src) {
  if (k >= it->units) return false;
  uint32_t kr = it->rows > 1 ? k / it->cols : 0;
  if (kr < it->straight_rows) {
    rsi_rect r;
    rsi_item_rect(it, &r);
    rsi_rect_unit(&r, k, dst, src);
  } else {
    uint64_t col = (uint64_t)(k - kr * it->cols) * it->unit;
    rsi_item_far_row(p, it, kr, dst, src);
    *dst += col;
    *src += col;
  }
  return true;
}

/* A thread's walk through a rect by a fixed stride of units, without a
 * division per unit: at unit k, (dst, src) in column col, the next unit is
 * stride units on. */
typedef struct rsi_walk {
  uint64_t dst, src;
  uint64_t dst_adv, src_adv;   /* for `stride` units, no wrap */
  uint64_t dst_wrap, src_wrap; /* and more when the column wraps */
  uint32_t col, col_adv;       /* col_adv: stride % cols */
} rsi_walk;

/* Where a walk starts: unit k (< r->units). */
static inline RSI_HD void rsi_walk_start(const rsi_rect *r, uint32_t k,
                                         uint32_t stride, rsi_walk *w) {
  uint32_t rows = stride / r->cols, cols = stride - rows * r->cols;
  rsi_rect_unit(r, k, &w->dst, &w->src);
  w->col = r->rows > 1 ? k % r->cols : k;
  w->col_adv = cols;
  w->dst_adv = (uint64_t)rows * (uint64_t)r->dst_row +
               (uint64_t)cols * (uint64_t)r->dst_unit;
  w->src_adv = (uint64_t)rows * (uint64_t)r->src_row +
               (uint64_t)cols * (uint64_t)r->src_unit;
  w->dst_wrap =
      (uint64_t)r->dst_row - (uint64_t)r->cols * (uint64_t)r->dst_unit;
  w->src_wrap =
      (uint64_t)r->src_row - (uint64_t)r->cols * (uint64_t)r->src_unit;
}

static inline RSI_HD void rsi_walk_next(const rsi_rect *r, rsi_walk *w) {
  w->dst += w->dst_adv;
  w->src += w->src_adv;
  w->col += w->col_adv;
  if (w->col >= r->cols) {
    w->col -= r->cols;
    w->dst += w->dst_wrap;
    w->src += w->src_wrap;
  }
}

#endif
