/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the `reshard` tools library: error text, boxes,
 * allocation. The tools use libreshard only through its public C API. */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <reshard/reshard.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RT_MAXD 3     /* tensor dims in the catalog (stacked experts: 3) */
#define RT_MAX_AX 6   /* axes of a device mesh */
#define RT_NAME_MAX 96

#if defined(__GNUC__)
#define RT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RT_PRINTF(a, b)
#endif

/* A failure's text: what was wrong, with the offending values. */
typedef struct rt_err {
  char msg[768];
} rt_err;

/* Record a message in e (may be NULL) and return -1. */
int rt_fail(rt_err *e, const char *fmt, ...) RT_PRINTF(2, 3);

/* Allocation that prints "out of memory" and exits(2) on failure: the tools
 * have no way to go on without the memory. */
void *rt_xmalloc(size_t n);
void *rt_xcalloc(size_t n, size_t size);
void *rt_xrealloc(void *p, size_t n);
char *rt_xstrdup(const char *s);

/* A box of a tensor: offset and extent per dim. */
typedef struct rt_box {
  int ndim;
  int64_t off[RT_MAXD], ext[RT_MAXD];
} rt_box;

int64_t rt_box_volume(const rt_box *b);
/* Whether a and b meet; if so, *out (may be NULL) gets the intersection. */
bool rt_box_intersect(const rt_box *a, const rt_box *b, rt_box *out);
bool rt_box_equal(const rt_box *a, const rt_box *b);
int rt_box_cmp(const rt_box *a, const rt_box *b);
bool rt_box_contains(const rt_box *outer, const rt_box *inner);
/* Exact volume of the union of n boxes (all of one ndim). */
int64_t rt_union_volume(const rt_box *boxes, int n);

/* Seconds on a monotonic clock. */
double rt_now(void);

/* "1.34 TB", "21.3 GB", "512 MB", "12 KB", "7 B" (decimal units). */
const char *rt_fmt_bytes(double bytes, char *buf, size_t n);

#endif
