/* SPDX-License-Identifier: Apache-2.0 */
/* Errors, allocation and box arithmetic for the tools library. */
#include "rt_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rt_fail(rt_err *e, const char *fmt, ...) {
  if (e) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static void oom(size_t n) {
  fprintf(stderr, "reshard: out of memory (%zu bytes)\n", n);
  exit(2);
}

void *rt_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *rt_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) oom(n * size);
  return p;
}

void *rt_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}

char *rt_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = rt_xmalloc(n);
  memcpy(p, s, n);
  return p;
}

int64_t rt_box_volume(const rt_box *b) {
  int64_t v = 1;
  for (int d = 0; d < b->ndim; d++) v *= b->ext[d];
  return v;
}

bool rt_box_intersect(const rt_box *a, const rt_box *b, rt_box *out) {
  rt_box r;
  r.ndim = a->ndim;
  for (int d = 0; d < a->ndim; d++) {
    int64_t lo = a->off[d] > b->off[d] ? a->off[d] : b->off[d];
    int64_t ha = a->off[d] + a->ext[d], hb = b->off[d] + b->ext[d];
    int64_t hi = ha < hb ? ha : hb;
    if (hi <= lo) return false;
    r.off[d] = lo;
    r.ext[d] = hi - lo;
  }
  if (out) *out = r;
  return true;
}

bool rt_box_equal(const rt_box *a, const rt_box *b) {
  return rt_box_cmp(a, b) == 0;
}

int rt_box_cmp(const rt_box *a, const rt_box *b) {
  if (a->ndim != b->ndim) return a->ndim < b->ndim ? -1 : 1;
  for (int d = 0; d < a->ndim; d++) {
    if (a->off[d] != b->off[d]) return a->off[d] < b->off[d] ? -1 : 1;
    if (a->ext[d] != b->ext[d]) return a->ext[d] < b->ext[d] ? -1 : 1;
  }
  return 0;
}

bool rt_box_contains(const rt_box *outer, const rt_box *inner) {
  for (int d = 0; d < outer->ndim; d++)
    if (inner->off[d] < outer->off[d] ||
        inner->off[d] + inner->ext[d] > outer->off[d] + outer->ext[d])
      return false;
  return true;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* Sweep dim d: cut at every box bound, recurse on the boxes covering each
 * slab. idx lists the boxes still in play. */
static int64_t union_rec(const rt_box *boxes, const int *idx, int n, int d) {
  if (n <= 0) return 0;
  int ndim = boxes[idx[0]].ndim;
  if (d == ndim) return 1;
  int64_t *cuts = rt_xmalloc(sizeof *cuts * 2 * (size_t)n);
  for (int i = 0; i < n; i++) {
    cuts[2 * i] = boxes[idx[i]].off[d];
    cuts[2 * i + 1] = boxes[idx[i]].off[d] + boxes[idx[i]].ext[d];
  }
  qsort(cuts, 2 * (size_t)n, sizeof *cuts, cmp_i64);
  int *sub = rt_xmalloc(sizeof *sub * (size_t)n);
  int64_t total = 0;
  for (int c = 0; c + 1 < 2 * n; c++) {
    int64_t lo = cuts[c], hi = cuts[c + 1];
    if (hi == lo) continue;
    int m = 0;
    for (int i = 0; i < n; i++) {
      const rt_box *b = &boxes[idx[i]];
      if (b->off[d] <= lo && b->off[d] + b->ext[d] >= hi) sub[m++] = idx[i];
    }
    if (m) total += (hi - lo) * union_rec(boxes, sub, m, d + 1);
  }
  free(sub);
  free(cuts);
  return total;
}

int64_t rt_union_volume(const rt_box *boxes, int n) {
  if (n <= 0) return 0;
  /* Fast path: pairwise disjoint boxes (the common case of shard grids). */
  bool disjoint = true;
  for (int i = 0; i < n && disjoint; i++)
    for (int j = i + 1; j < n && disjoint; j++)
      disjoint = !rt_box_intersect(&boxes[i], &boxes[j], NULL);
  if (disjoint) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) v += rt_box_volume(&boxes[i]);
    return v;
  }
  int *idx = rt_xmalloc(sizeof *idx * (size_t)n);
  for (int i = 0; i < n; i++) idx[i] = i;
  int64_t v = union_rec(boxes, idx, n, 0);
  free(idx);
  return v;
}

double rt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *rt_fmt_bytes(double bytes, char *buf, size_t n) {
  static const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  double v = bytes;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, n, "%.0f B", v);
  else
    snprintf(buf, n, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s",
             v, unit[u]);
  return buf;
}
