/* SPDX-License-Identifier: Apache-2.0 */
/* Host copies over threads (RS_PARAM_COPY_THREADS): the pool runs every
 * part of a run exactly once, whatever the number of parts and however
 * often; a context's host engine cut over 2 to 7 threads (and one a CPU)
 * writes exactly the bytes the one-thread engine writes, on random
 * batches of plain copies and casts with strided and dense ends, cut
 * anywhere in their elements (the split threshold lowered to one byte so
 * that every batch is cut). The fp8 copies, which are not cut, are run
 * over threads end to end by test_exec_direct. */
#include <criterion/criterion.h>

#include <stdatomic.h>

#include "copy/copy_pool.h"
#include "base/dtype.h"
#include "copy/engine.h"
#include "th_util.h"

#define SEED 0x7E4D5C0Dull

/* ---- the pool ------------------------------------------------------------ */

static atomic_int ran[RSI_COPY_POOL_MAX];

static void mark(void *arg, int part) {
  (void)arg;
  atomic_fetch_add(&ran[part], 1);
}

Test(copy_pool, every_part_once) {
  rsi_copy_pool *p = rsi_copy_pool_create();
  cr_assert(p);
  const int sizes[] = {1, 2, 3, 8, 64, RSI_COPY_POOL_MAX, 5, 2};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    for (int rep = 0; rep < 50; rep++) {
      for (int i = 0; i < RSI_COPY_POOL_MAX; i++) atomic_store(&ran[i], 0);
      rsi_copy_pool_run(p, sizes[k], mark, NULL);
      for (int i = 0; i < RSI_COPY_POOL_MAX; i++)
        cr_assert_eq(atomic_load(&ran[i]), i < sizes[k] ? 1 : 0,
                     "%d parts, run %d: part %d ran %d times", sizes[k], rep,
                     i, atomic_load(&ran[i]));
    }
  rsi_copy_pool_destroy(p);
  rsi_copy_pool_destroy(NULL);
}

Test(copy_pool, destroyed_before_any_run) {
  rsi_copy_pool_destroy(rsi_copy_pool_create());
  cr_assert_geq(rsi_copy_pool_cpus(), 1);
}

/* ---- the engine ---------------------------------------------------------- */

static const rs_dtype FLOATS[3] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};

typedef struct side {
  char *buf;
  int64_t bytes;
} side;

/* A random copy: a 1- to 3-D box, plain (1, 2, 4 or 8 bytes an element)
 * or a cast between two float dtypes, each end strided (padded, or
 * columns first) or dense, elements [lo, hi) of it. Its source is filled
 * from seed; its destination is `dst` of dst->bytes, poisoned by the
 * caller. */
static rsi_copy random_copy(uint64_t *seed, side *src, side *dst) {
  rsi_copy c = {0};
  c.ndim = 1 + (int)(th_rand(seed) % 3);
  for (int d = 0; d < c.ndim; d++) c.extent[d] = 1 + (int64_t)(th_rand(seed) % 40);
  int64_t vol = th_volume(c.ndim, c.extent);
  c.lo = (int64_t)(th_rand(seed) % (uint64_t)vol);
  c.hi = c.lo + 1 + (int64_t)(th_rand(seed) % (uint64_t)(vol - c.lo));
  int64_t ss, ds;
  if (th_rand(seed) % 2) {
    c.op = RSI_COPY_PLAIN;
    c.esize = 1 << (th_rand(seed) % 4);
    ss = ds = c.esize;
  } else {
    c.op = RSI_COPY_CAST;
    int a = (int)(th_rand(seed) % 3), b = (a + 1 + (int)(th_rand(seed) % 2)) % 3;
    c.src_dtype = FLOATS[a];
    c.dst_dtype = FLOATS[b];
    ss = (int64_t)rsi_dtype_size(FLOATS[a]);
    ds = (int64_t)rsi_dtype_size(FLOATS[b]);
    c.esize = (int)ss;
  }
  int64_t *strides[2] = {c.src_strides, c.dst_strides};
  int64_t spans[2];
  bool dense[2];
  for (int s = 0; s < 2; s++) {
    dense[s] = th_rand(seed) % 3 == 0;
    if (dense[s]) {
      spans[s] = c.hi - c.lo;
      continue;
    }
    bool columns_first = th_rand(seed) % 4 == 0;
    int64_t step = 1 + (int64_t)(th_rand(seed) % 2), at = step;
    for (int k = 0; k < c.ndim; k++) {
      int d = columns_first ? k : c.ndim - 1 - k;
      strides[s][d] = at;
      at *= c.extent[d] + (int64_t)(th_rand(seed) % 3); /* padding */
    }
    int64_t last = 0;
    for (int d = 0; d < c.ndim; d++) last += (c.extent[d] - 1) * strides[s][d];
    spans[s] = last + 1;
  }
  c.dense_src = dense[0];
  c.dense_dst = dense[1];
  src->bytes = spans[0] * ss;
  dst->bytes = spans[1] * ds;
  src->buf = malloc((size_t)src->bytes);
  dst->buf = malloc((size_t)dst->bytes);
  cr_assert(src->buf && dst->buf);
  /* finite floats, so that every cast is defined bit for bit */
  for (int64_t i = 0; i < src->bytes; i++)
    src->buf[i] = (char)(th_rand(seed) % 0x3F);
  c.src = src->buf;
  c.dst = dst->buf;
  return c;
}

static void run_batch(rsi_engine *e, const rsi_copy *c, int64_t n) {
  rsi_err err = {0};
  rs_status st = e->ops->copy(e, c, n, NULL, &err);
  cr_assert_eq(st, RS_OK, "%s engine: %s", e->ops->name, err.msg);
}

Test(copy_threads, the_same_bytes_as_one_thread) {
  enum { BATCHES = 300, MAX_N = 12 };
  uint64_t seed = SEED;
  int64_t saved = rsi_host_split_bytes;
  rsi_host_split_bytes = 1;
  const int64_t threads[] = {2, 3, 5, 7, 0};
  for (int b = 0; b < BATCHES; b++) {
    int64_t nthreads = threads[b % 5];
    rsi_engine *cut = rsi_host_engine_create(&nthreads);
    cr_assert(cut);
    int64_t n = 1 + (int64_t)(th_rand(&seed) % MAX_N);
    rsi_copy one[MAX_N], many[MAX_N];
    side src[MAX_N], dst1[MAX_N], dstn[MAX_N];
    for (int64_t i = 0; i < n; i++) {
      one[i] = random_copy(&seed, &src[i], &dst1[i]);
      dstn[i].bytes = dst1[i].bytes;
      dstn[i].buf = malloc((size_t)dstn[i].bytes);
      cr_assert(dstn[i].buf);
      memset(dst1[i].buf, TH_POISON, (size_t)dst1[i].bytes);
      memset(dstn[i].buf, TH_POISON, (size_t)dstn[i].bytes);
      many[i] = one[i];
      many[i].dst = dstn[i].buf;
    }
    run_batch(rsi_host_engine(), one, n);
    run_batch(cut, many, n);
    for (int64_t i = 0; i < n; i++) {
      for (int64_t k = 0; k < dst1[i].bytes; k++)
        if (dst1[i].buf[k] != dstn[i].buf[k])
          cr_assert_fail("batch %d (%lld threads), copy %lld of %lld (op %d, "
                         "%d-D, elements %lld..%lld, dense src %d dst %d): "
                         "byte %lld is %02x, one thread wrote %02x",
                         b, (long long)nthreads, (long long)i, (long long)n,
                         one[i].op, one[i].ndim, (long long)one[i].lo,
                         (long long)one[i].hi, one[i].dense_src,
                         one[i].dense_dst, (long long)k,
                         (uint8_t)dstn[i].buf[k], (uint8_t)dst1[i].buf[k]);
      free(src[i].buf);
      free(dst1[i].buf);
      free(dstn[i].buf);
    }
    cut->ops->destroy(cut);
  }
  rsi_host_split_bytes = saved;
}

/* Below the threshold a batch is not cut: the same bytes all the same,
 * and no thread is started (nothing to check but the result). */
Test(copy_threads, small_batches_on_the_calling_thread) {
  uint64_t seed = SEED ^ 1;
  int64_t nthreads = 4;
  rsi_engine *cut = rsi_host_engine_create(&nthreads);
  side src, d1, dn;
  rsi_copy c = random_copy(&seed, &src, &d1);
  dn.bytes = d1.bytes;
  dn.buf = malloc((size_t)dn.bytes);
  memset(d1.buf, TH_POISON, (size_t)d1.bytes);
  memset(dn.buf, TH_POISON, (size_t)dn.bytes);
  rsi_copy k = c;
  k.dst = dn.buf;
  run_batch(rsi_host_engine(), &c, 1);
  run_batch(cut, &k, 1);
  cr_assert(!memcmp(d1.buf, dn.buf, (size_t)d1.bytes));
  free(src.buf);
  free(d1.buf);
  free(dn.buf);
  cut->ops->destroy(cut);
}
