/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming copies (core/copy/copy.c, rsi_copy_range_to with streaming): the
 * same bytes as the cached copy, for random 2-D and 3-D boxes whose rows
 * are from 1 byte to 20 KB, contiguous or strided, at every alignment of
 * both sides, over random sub-ranges, into poisoned buffers whose slack
 * must stay untouched, with the CPU's widest stores and with SSE2's; and
 * the host engine's batches, which stream once they write more than 4 MiB
 * into user memory and never stream into a dense stream (staging).
 *
 * Replay: RESHARD_SEED=<seed> (default fixed); a failure names the seed
 * and the case. */
#include <criterion/criterion.h>

#include "copy/copy.h"
#include "copy/engine.h"
#include "th_util.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x57AEA3ull
#define SLACK 64

static uint64_t test_seed(void) {
  const char *v = getenv("RESHARD_SEED");
  return v && *v ? strtoull(v, NULL, 0) : DEFAULT_SEED;
}

static int64_t rrange(uint64_t *s, int64_t lo, int64_t hi) {
  return lo + (int64_t)(th_rand(s) % (uint64_t)(hi - lo + 1));
}

/* A buffer of `bytes` starting `misalign` (< 64) bytes past a 64-byte
 * boundary, filled with `fill`, with SLACK poisoned bytes on both sides. */
typedef struct buf {
  unsigned char *mem, *base;
  size_t total, bytes;
} buf;

/* The same bytes in both, slack included. */
static bool same(const buf *a, const buf *b) {
  return a->bytes == b->bytes &&
         !memcmp(a->base - SLACK, b->base - SLACK, a->bytes + 2 * SLACK);
}

static buf buf_make(size_t bytes, int misalign, int fill) {
  buf b;
  b.total = bytes + 2 * SLACK + 128; /* room to align and misalign */
  b.bytes = bytes;
  b.mem = malloc(b.total);
  cr_assert_not_null(b.mem);
  memset(b.mem, fill, b.total);
  b.base = (unsigned char *)(((uintptr_t)b.mem + SLACK + 63) / 64 * 64) +
           misalign;
  return b;
}

/* A random box of ndim dims with element size esize, its strides on each
 * side (rows padded or not, so runs merge or not), and a sub-range. */
typedef struct box_case {
  int ndim;
  size_t esize;
  int64_t ext[3], ss[3], ds[3], lo, hi, sspan, dspan;
} box_case;

static int64_t span(int ndim, const int64_t *ext, const int64_t *st) {
  int64_t end = 0;
  for (int d = 0; d < ndim; d++) end += (ext[d] - 1) * st[d];
  return end + 1;
}

static void pad_strides(uint64_t *s, int ndim, const int64_t *ext,
                        int64_t *st) {
  int64_t at = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    st[d] = at;
    at *= ext[d] + (rrange(s, 0, 2) == 0 ? rrange(s, 1, 40) : 0);
  }
}

static box_case random_box(uint64_t *s) {
  static const size_t sizes[] = {1, 2, 4, 8};
  box_case b;
  memset(&b, 0, sizeof b);
  b.ndim = (int)rrange(s, 2, 3);
  b.esize = sizes[rrange(s, 0, 3)];
  int64_t row_bytes = rrange(s, 0, 3) == 0 ? rrange(s, 1, 300)
                                           : rrange(s, 200, 20000);
  b.ext[b.ndim - 1] = row_bytes / (int64_t)b.esize + 1;
  for (int d = 0; d < b.ndim - 1; d++) b.ext[d] = rrange(s, 1, 12);
  pad_strides(s, b.ndim, b.ext, b.ss);
  pad_strides(s, b.ndim, b.ext, b.ds);
  int64_t vol = th_volume(b.ndim, b.ext);
  b.lo = rrange(s, 0, 3) == 0 ? rrange(s, 0, vol) : 0;
  b.hi = rrange(s, 0, 3) == 0 ? rrange(s, b.lo, vol) : vol;
  b.sspan = span(b.ndim, b.ext, b.ss) * (int64_t)b.esize;
  b.dspan = span(b.ndim, b.ext, b.ds) * (int64_t)b.esize;
  return b;
}

Test(copy_streaming, same_bytes_as_the_cached_copy) {
  uint64_t seed = test_seed(), s = seed;
  for (int k = 0; k < 3000; k++) {
    rsi_copy_stream_sse2_only = k % 2; /* both widths of store */
    box_case b = random_box(&s);
    int sm = (int)rrange(&s, 0, 63), dm = (int)rrange(&s, 0, 63);
    buf src = buf_make((size_t)b.sspan, sm, 0);
    for (int64_t i = 0; i < b.sspan; i++)
      src.base[i] = (unsigned char)th_rand(&s);
    buf ref = buf_make((size_t)b.dspan, dm, 0xA5);
    buf got = buf_make((size_t)b.dspan, dm, 0xA5);
    rsi_copy_range(b.ndim, b.ext, b.esize, (char *)ref.base, b.ds,
                   (const char *)src.base, b.ss, b.lo, b.hi);
    rsi_copy_range_to(b.ndim, b.ext, b.esize, (char *)got.base, b.ds,
                      (const char *)src.base, b.ss, b.lo, b.hi, true);
    rsi_copy_fence();
    cr_assert(same(&ref, &got),
              "seed 0x%" PRIx64 " case %d (%s stores): %d-D box, esize %zu, "
              "row of %" PRId64 " elements, range [%" PRId64 ", %" PRId64
              "), misaligned %d/%d: the streaming copy differs from the "
              "cached one",
              seed, k, k % 2 ? "16-byte" : "widest", b.ndim, b.esize, b.ext[b.ndim - 1], b.lo, b.hi, sm, dm);
    free(src.mem);
    free(ref.mem);
    free(got.mem);
  }
}

/* One plain copy of a whole 2-D box, rows x cols bytes, strided on both
 * sides (or, with dense_dst, packed into a dense stream). */
static rsi_copy plain_copy(char *dst, const char *src, int64_t rows,
                           int64_t cols, int64_t sstride, int64_t dstride,
                           bool dense_dst) {
  rsi_copy c;
  memset(&c, 0, sizeof c);
  c.ndim = 2;
  c.esize = 1;
  c.op = RSI_COPY_PLAIN;
  c.dst = dst;
  c.src = src;
  c.lo = 0;
  c.hi = rows * cols;
  c.extent[0] = rows;
  c.extent[1] = cols;
  c.src_strides[0] = sstride;
  c.src_strides[1] = 1;
  c.dst_strides[0] = dstride;
  c.dst_strides[1] = 1;
  c.dense_dst = dense_dst;
  return c;
}

/* Batches below and above the engine's 4 MiB: a strided unpack into a
 * shard, a contiguous piece and a pack into a dense stream; every byte as
 * the cached copies write it. */
Test(copy_streaming, host_engine_batches) {
  uint64_t s = test_seed();
  for (int scale = 1; scale <= 4; scale *= 4) {
    int64_t rows = 256 * scale, cols = 4000, sstride = 8192, dstride = 4096;
    int64_t big = (int64_t)1 << 20 << (scale == 4 ? 1 : 0);
    buf src = buf_make((size_t)(rows * sstride + big), 3, 0);
    for (size_t i = 0; i < src.bytes; i++)
      src.base[i] = (unsigned char)th_rand(&s);
    size_t dbytes = (size_t)(rows * dstride + big + rows * cols);
    buf ref = buf_make(dbytes, 5, 0x5A), got = buf_make(dbytes, 5, 0x5A);
    rsi_copy batch[3];
    char *g = (char *)got.base;
    const char *from = (const char *)src.base;
    batch[0] = plain_copy(g, from, rows, cols, sstride, dstride, false);
    batch[1] = plain_copy(g + rows * dstride, from + rows * sstride, 1, big,
                          big, big, false);
    batch[2] = plain_copy(g + rows * dstride + big, from, rows, cols,
                          sstride, 0, true);
    rsi_engine *e = rsi_host_engine();
    rsi_err err = {0};
    cr_assert_eq(e->ops->copy(e, batch, 3, NULL, &err), RS_OK, "%s",
                 err.msg);
    for (int i = 0; i < 3; i++) {
      const rsi_copy *c = &batch[i];
      rsi_copy_range(c->ndim, c->extent, 1,
                     (char *)ref.base + (c->dst - g),
                     c->dense_dst ? NULL : c->dst_strides, c->src,
                     c->src_strides, c->lo, c->hi);
    }
    cr_assert(same(&ref, &got),
              "a batch of %" PRId64 " rows: the host engine's bytes differ",
              rows);
    free(src.mem);
    free(ref.mem);
    free(got.mem);
  }
}
