/* SPDX-License-Identifier: Apache-2.0 */
/* Box algebra (core/layout/box.h): volume with overflow, intersect, contains,
 * equal, subtract, dense strides. Hand-worked cases plus a brute-force
 * check of subtract over small random boxes. */
#include <criterion/criterion.h>

#include "layout/box.h"
#include "th_util.h"

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- volume */

Test(box_volume, hand_worked) {
  int64_t v = -1;
  cr_assert(rsi_box_volume(3, I64(2, 3, 4), &v));
  cr_assert_eq(v, 24);
  cr_assert(rsi_box_volume(1, I64(7), &v));
  cr_assert_eq(v, 7);
  cr_assert(rsi_box_volume(6, I64(1, 1, 1, 1, 1, 1), &v));
  cr_assert_eq(v, 1);
  cr_assert(rsi_box_volume(2, I64(1000000, 1000000), &v));
  cr_assert_eq(v, 1000000000000LL);
}

Test(box_volume, empty_dims_give_zero) {
  int64_t v = -1;
  cr_assert(rsi_box_volume(3, I64(5, 0, 4), &v));
  cr_assert_eq(v, 0);
  cr_assert(rsi_box_volume(1, I64(0), &v));
  cr_assert_eq(v, 0);
}

Test(box_volume, largest_exact_values_fit) {
  int64_t v = 0;
  cr_assert(rsi_box_volume(2, I64(INT64_MAX, 1), &v));
  cr_assert_eq(v, INT64_MAX);
  cr_assert(rsi_box_volume(2, I64((int64_t)1 << 31, (int64_t)1 << 31), &v));
  cr_assert_eq(v, (int64_t)1 << 62);
  /* 2^62 * 1 * 1 stays; 3037000499^2 < 2^63 */
  cr_assert(rsi_box_volume(2, I64(3037000499LL, 3037000499LL), &v));
  cr_assert_eq(v, 3037000499LL * 3037000499LL);
}

Test(box_volume, overflow_returns_false) {
  int64_t v = 0;
  cr_assert_not(rsi_box_volume(2, I64(INT64_MAX, 2), &v));
  cr_assert_not(rsi_box_volume(2, I64((int64_t)1 << 32, (int64_t)1 << 31), &v),
                "2^63 does not fit int64");
  cr_assert_not(rsi_box_volume(2, I64(3037000500LL, 3037000500LL), &v));
  cr_assert_not(rsi_box_volume(4, I64(65536, 65536, 65536, 65536), &v));
  /* overflow reached only after several dims */
  cr_assert_not(
      rsi_box_volume(8, I64(256, 256, 256, 256, 256, 256, 256, 256), &v));
}

Test(box_is_empty, cases) {
  cr_assert_not(rsi_box_is_empty(2, I64(1, 1)));
  cr_assert(rsi_box_is_empty(2, I64(1, 0)));
  cr_assert(rsi_box_is_empty(3, I64(0, 5, 5)));
}

/* ------------------------------------------------------------- intersect */

Test(box_intersect, overlapping_2d) {
  int64_t o[2], e[2];
  /* [0,4)x[0,6) and [2,7)x[3,10) -> [2,4)x[3,6) */
  cr_assert(rsi_box_intersect(2, I64(0, 0), I64(4, 6), I64(2, 3), I64(5, 7),
                              o, e));
  cr_assert_eq(o[0], 2);
  cr_assert_eq(o[1], 3);
  cr_assert_eq(e[0], 2);
  cr_assert_eq(e[1], 3);
  /* symmetric */
  cr_assert(rsi_box_intersect(2, I64(2, 3), I64(5, 7), I64(0, 0), I64(4, 6),
                              o, e));
  cr_assert_eq(o[0], 2);
  cr_assert_eq(o[1], 3);
  cr_assert_eq(e[0], 2);
  cr_assert_eq(e[1], 3);
}

Test(box_intersect, contained_and_identical) {
  int64_t o[3], e[3];
  cr_assert(rsi_box_intersect(3, I64(0, 0, 0), I64(10, 10, 10), I64(1, 2, 3),
                              I64(2, 2, 2), o, e));
  cr_assert(memcmp(o, I64(1, 2, 3), sizeof o) == 0);
  cr_assert(memcmp(e, I64(2, 2, 2), sizeof e) == 0);
  cr_assert(rsi_box_intersect(3, I64(4, 5, 6), I64(1, 2, 3), I64(4, 5, 6),
                              I64(1, 2, 3), o, e));
  cr_assert(memcmp(o, I64(4, 5, 6), sizeof o) == 0);
  cr_assert(memcmp(e, I64(1, 2, 3), sizeof e) == 0);
}

Test(box_intersect, touching_boxes_do_not_meet) {
  int64_t o[2], e[2];
  /* [0,4) and [4,8) share no element */
  cr_assert_not(rsi_box_intersect(1, I64(0), I64(4), I64(4), I64(4), o, e));
  cr_assert_not(rsi_box_intersect(2, I64(0, 0), I64(4, 4), I64(0, 4),
                                  I64(4, 4), o, e));
  /* apart in one dim only */
  cr_assert_not(rsi_box_intersect(2, I64(0, 0), I64(4, 4), I64(1, 9),
                                  I64(2, 2), o, e));
  /* corner-to-corner */
  cr_assert_not(rsi_box_intersect(2, I64(0, 0), I64(2, 2), I64(2, 2),
                                  I64(2, 2), o, e));
}

Test(box_intersect, one_element) {
  int64_t o[2], e[2];
  cr_assert(rsi_box_intersect(2, I64(0, 0), I64(3, 3), I64(2, 2), I64(5, 5),
                              o, e));
  cr_assert_eq(o[0], 2);
  cr_assert_eq(o[1], 2);
  cr_assert_eq(e[0], 1);
  cr_assert_eq(e[1], 1);
}

Test(box_intersect, output_may_alias_a) {
  int64_t aoff[2] = {0, 0}, aext[2] = {4, 6};
  cr_assert(rsi_box_intersect(2, aoff, aext, I64(2, 3), I64(5, 7), aoff,
                              aext));
  cr_assert_eq(aoff[0], 2);
  cr_assert_eq(aoff[1], 3);
  cr_assert_eq(aext[0], 2);
  cr_assert_eq(aext[1], 3);
}

/* -------------------------------------------------------- contains/equal */

Test(box_contains, cases) {
  const int64_t *ao = I64(0, 0), *ae = I64(4, 4);
  cr_assert(rsi_box_contains(2, ao, ae, I64(1, 1), I64(2, 2)));
  cr_assert(rsi_box_contains(2, ao, ae, I64(0, 0), I64(4, 4)), "a box "
            "contains itself");
  cr_assert(rsi_box_contains(2, ao, ae, I64(3, 3), I64(1, 1)));
  cr_assert_not(rsi_box_contains(2, ao, ae, I64(3, 3), I64(2, 1)));
  cr_assert_not(rsi_box_contains(2, ao, ae, I64(-1, 0), I64(2, 2)));
  cr_assert_not(rsi_box_contains(2, ao, ae, I64(5, 5), I64(1, 1)));
  cr_assert_not(rsi_box_contains(2, I64(1, 1), I64(2, 2), ao, ae),
                "bigger box is not inside the smaller");
  cr_assert(rsi_box_contains(3, I64(2, 0, 5), I64(3, 8, 1), I64(3, 7, 5),
                             I64(2, 1, 1)));
}

Test(box_equal, cases) {
  cr_assert(rsi_box_equal(2, I64(1, 2), I64(3, 4), I64(1, 2), I64(3, 4)));
  cr_assert_not(rsi_box_equal(2, I64(1, 2), I64(3, 4), I64(1, 2), I64(3, 5)));
  cr_assert_not(rsi_box_equal(2, I64(1, 2), I64(3, 4), I64(0, 2), I64(3, 4)));
  cr_assert(rsi_box_equal(1, I64(9), I64(1), I64(9), I64(1)));
}

/* -------------------------------------------------------------- subtract */

/* Check the subtract contract for a and b; returns the fragment count. */
static int check_subtract(int ndim, const int64_t *aoff, const int64_t *aext,
                          const int64_t *boff, const int64_t *bext) {
  int64_t fo[2 * 6 * 6], fe[2 * 6 * 6];
  int n = rsi_box_subtract(ndim, aoff, aext, boff, bext, fo, fe);
  cr_assert(n >= 0 && n <= 2 * ndim, "count %d outside [0, %d]", n, 2 * ndim);
  int64_t va = 0, vi = 0, vsum = 0, io[6], ie[6];
  cr_assert(rsi_box_volume(ndim, aext, &va));
  if (rsi_box_intersect(ndim, aoff, aext, boff, bext, io, ie))
    cr_assert(rsi_box_volume(ndim, ie, &vi));
  for (int k = 0; k < n; k++) {
    const int64_t *ko = fo + k * ndim, *ke = fe + k * ndim;
    int64_t v = 0;
    cr_assert_not(rsi_box_is_empty(ndim, ke), "fragment %d is empty", k);
    cr_assert(rsi_box_contains(ndim, aoff, aext, ko, ke),
              "fragment %d not inside a", k);
    int64_t to[6], te[6];
    cr_assert_not(rsi_box_intersect(ndim, ko, ke, boff, bext, to, te),
                  "fragment %d meets b", k);
    for (int j = 0; j < k; j++)
      cr_assert_not(rsi_box_intersect(ndim, ko, ke, fo + j * ndim,
                                      fe + j * ndim, to, te),
                    "fragments %d and %d overlap", j, k);
    cr_assert(rsi_box_volume(ndim, ke, &v));
    vsum += v;
  }
  cr_assert_eq(vsum + vi, va, "fragments %lld + intersection %lld != a %lld",
               (long long)vsum, (long long)vi, (long long)va);
  return n;
}

Test(box_subtract, b_covers_a_gives_nothing) {
  cr_assert_eq(check_subtract(2, I64(1, 1), I64(2, 2), I64(0, 0), I64(4, 4)),
               0);
  cr_assert_eq(check_subtract(2, I64(1, 1), I64(2, 2), I64(1, 1), I64(2, 2)),
               0, "a minus a is empty");
}

Test(box_subtract, disjoint_gives_a_itself) {
  int64_t fo[8], fe[8];
  int n = rsi_box_subtract(2, I64(0, 0), I64(2, 3), I64(5, 5), I64(1, 1), fo,
                           fe);
  cr_assert_eq(n, 1);
  cr_assert(rsi_box_equal(2, fo, fe, I64(0, 0), I64(2, 3)));
  /* touching is still disjoint */
  n = rsi_box_subtract(2, I64(0, 0), I64(2, 3), I64(2, 0), I64(2, 3), fo, fe);
  cr_assert_eq(n, 1);
  cr_assert(rsi_box_equal(2, fo, fe, I64(0, 0), I64(2, 3)));
}

Test(box_subtract, hole_in_the_middle_1d) {
  int64_t fo[2], fe[2];
  int n = rsi_box_subtract(1, I64(0), I64(10), I64(3), I64(4), fo, fe);
  cr_assert_eq(n, 2);
  /* [0,3) and [7,10) in some order */
  bool first_low = fo[0] == 0;
  cr_assert_eq(fo[first_low ? 0 : 1], 0);
  cr_assert_eq(fe[first_low ? 0 : 1], 3);
  cr_assert_eq(fo[first_low ? 1 : 0], 7);
  cr_assert_eq(fe[first_low ? 1 : 0], 3);
  check_subtract(1, I64(0), I64(10), I64(3), I64(4));
}

Test(box_subtract, hole_in_the_middle_2d_gives_four) {
  cr_assert_eq(check_subtract(2, I64(0, 0), I64(6, 6), I64(2, 2), I64(2, 2)),
               4);
}

Test(box_subtract, hole_in_the_middle_3d_gives_six) {
  cr_assert_eq(check_subtract(3, I64(0, 0, 0), I64(5, 5, 5), I64(1, 1, 1),
                              I64(3, 3, 3)),
               6);
}

Test(box_subtract, corner_gives_two) {
  cr_assert_eq(check_subtract(2, I64(0, 0), I64(4, 4), I64(2, 2), I64(5, 5)),
               2);
  cr_assert_eq(check_subtract(2, I64(0, 0), I64(4, 4), I64(-3, -3),
                              I64(4, 4)),
               2);
}

Test(box_subtract, edge_slab_gives_one) {
  int64_t fo[8], fe[8];
  /* b removes the first two rows of a 4x5 box: left with rows 2..3 */
  int n = rsi_box_subtract(2, I64(0, 0), I64(4, 5), I64(0, 0), I64(2, 5), fo,
                           fe);
  cr_assert_eq(n, 1);
  cr_assert(rsi_box_equal(2, fo, fe, I64(2, 0), I64(2, 5)));
}

Test(box_subtract, deterministic) {
  int64_t fo1[18], fe1[18], fo2[18], fe2[18];
  int n1 = rsi_box_subtract(3, I64(0, 0, 0), I64(5, 6, 7), I64(1, 2, 3),
                            I64(2, 2, 2), fo1, fe1);
  int n2 = rsi_box_subtract(3, I64(0, 0, 0), I64(5, 6, 7), I64(1, 2, 3),
                            I64(2, 2, 2), fo2, fe2);
  cr_assert_eq(n1, n2);
  cr_assert(memcmp(fo1, fo2, (size_t)n1 * 3 * sizeof(int64_t)) == 0);
  cr_assert(memcmp(fe1, fe2, (size_t)n1 * 3 * sizeof(int64_t)) == 0);
}

/* Brute force: every point of a lies in exactly one of the fragments or in
 * b, over small random boxes in 1..4 dims. */
static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static bool in_box(int ndim, const int64_t *p, const int64_t *o,
                   const int64_t *e) {
  for (int d = 0; d < ndim; d++)
    if (p[d] < o[d] || p[d] >= o[d] + e[d]) return false;
  return true;
}

Test(box_subtract, random_brute_force) {
  uint64_t s = 42;
  for (int iter = 0; iter < 3000; iter++) {
    int ndim = 1 + (int)(lcg(&s) % 4);
    int64_t ao[4], ae[4], bo[4], be[4];
    for (int d = 0; d < ndim; d++) {
      ao[d] = (int64_t)(lcg(&s) % 5) - 1;
      ae[d] = 1 + (int64_t)(lcg(&s) % 4);
      bo[d] = (int64_t)(lcg(&s) % 7) - 2;
      be[d] = 1 + (int64_t)(lcg(&s) % 5);
    }
    int64_t fo[32], fe[32];
    int n = rsi_box_subtract(ndim, ao, ae, bo, be, fo, fe);
    cr_assert(n >= 0 && n <= 2 * ndim, "iter %d: count %d", iter, n);
    int64_t p[4], idx[4] = {0};
    for (;;) {
      for (int d = 0; d < ndim; d++) p[d] = ao[d] + idx[d];
      int hits = in_box(ndim, p, bo, be) ? 1 : 0;
      for (int k = 0; k < n; k++)
        hits += in_box(ndim, p, fo + k * ndim, fe + k * ndim);
      if (hits != 1)
        cr_assert_fail("iter %d ndim %d: a point of a is covered %d times",
                       iter, ndim, hits);
      int d = ndim - 1;
      while (d >= 0 && ++idx[d] == ae[d]) idx[d--] = 0;
      if (d < 0) break;
    }
    for (int k = 0; k < n; k++)
      if (!rsi_box_contains(ndim, ao, ae, fo + k * ndim, fe + k * ndim))
        cr_assert_fail("iter %d: fragment %d outside a", iter, k);
    if (iter % 7 == 0) check_subtract(ndim, ao, ae, bo, be);
  }
}

/* ---------------------------------------------------------- dense strides */

Test(box_dense_strides, row_major) {
  int64_t s[4];
  rsi_box_dense_strides(3, I64(2, 3, 4), s);
  cr_assert_eq(s[0], 12);
  cr_assert_eq(s[1], 4);
  cr_assert_eq(s[2], 1);
  rsi_box_dense_strides(1, I64(5), s);
  cr_assert_eq(s[0], 1);
  rsi_box_dense_strides(4, I64(7, 1, 5, 1), s);
  cr_assert_eq(s[3], 1);
  cr_assert_eq(s[2], 1);
  cr_assert_eq(s[1], 5);
  cr_assert_eq(s[0], 5);
}
