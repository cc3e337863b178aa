/* SPDX-License-Identifier: Apache-2.0 */
/* The schedule's sort (core/base/radix_sort.h) against a comparison sort:
 * random keys with few and many distinct values in each word, keys that
 * differ only in the high word or the top byte, stability, and the
 * trivial sizes. */
#include <criterion/criterion.h>

#include "base/radix_sort.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* By (hi, lo), then by value: the value is the original position, so a
 * stable sort gives exactly this order. */
static int by_key_then_place(const void *x, const void *y) {
  const rsi_keyed *a = x, *b = y;
  if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  return (a->value > b->value) - (a->value < b->value);
}

static void check(int64_t n, uint64_t hi_mask, uint64_t lo_mask,
                  uint64_t seed) {
  rsi_keyed *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  rsi_keyed *want = malloc((size_t)(n ? n : 1) * sizeof *want);
  cr_assert(v && want);
  for (int64_t i = 0; i < n; i++) {
    v[i] = (rsi_keyed){next(&seed) & hi_mask, next(&seed) & lo_mask,
                       (uint64_t)i};
    want[i] = v[i];
  }
  qsort(want, (size_t)n, sizeof *want, by_key_then_place);
  rsi_keyed *scratch = malloc((size_t)(n ? n : 1) * sizeof *scratch);
  cr_assert(scratch);
  rsi_radix_sort(v, scratch, n);
  free(scratch);
  for (int64_t i = 0; i < n; i++)
    cr_assert(v[i].hi == want[i].hi && v[i].lo == want[i].lo &&
                  v[i].value == want[i].value,
              "n %lld masks %llx/%llx: record %lld is (%llx, %llx, #%llu), "
              "want (%llx, %llx, #%llu)",
              (long long)n, (unsigned long long)hi_mask,
              (unsigned long long)lo_mask, (long long)i,
              (unsigned long long)v[i].hi, (unsigned long long)v[i].lo,
              (unsigned long long)v[i].value, (unsigned long long)want[i].hi,
              (unsigned long long)want[i].lo,
              (unsigned long long)want[i].value);
  free(v);
  free(want);
}

Test(radix_sort, trivial_sizes) {
  check(0, ~0ull, ~0ull, 1);
  check(1, ~0ull, ~0ull, 2);
  check(2, ~0ull, ~0ull, 3);
}

Test(radix_sort, random_full_words) {
  check(5000, ~0ull, ~0ull, 4);
}

Test(radix_sort, few_distinct_values_keep_their_order) {
  check(20000, 0x3, 0x1, 5);  /* mostly ties: stability decides */
  check(20000, 0, 0x7, 6);    /* the high word never differs */
  check(20000, 0x7, 0, 7);    /* the low word never differs */
  check(20000, 0, 0, 8);      /* all equal: the input order stays */
}

Test(radix_sort, differences_in_scattered_bytes) {
  check(20000, 0xff00000000000000ull, 0x00ff0000000000ffull, 9);
  check(20000, 0x8000000000000001ull, 0x0000ffff00000000ull, 10);
  check(20000, 0xffffffffull << 1 | 1, 0xffffffffull << 32 | 0xffffffffull,
        11); /* the schedule's shapes: round << 1 | stage; src << 32 | dst */
}

Test(radix_sort, digits_wider_than_a_byte) {
  /* runs of varying bits longer than a digit, and digits that start near
   * the top of a word (they read zeros past bit 63) */
  check(20000, 0xfffffull << 20, 0x1fffffull, 12);
  check(20000, 0x7ffull << 53, 0x3ull << 62, 13);
  check(20000, 0x1ull << 63, 0xfffull << 52 | 0x1, 14);
  /* the schedule's packed keys: round, stage, src, dst side by side */
  check(50000, 0, (1ull << 42) - 1, 15);
}

/* The words' sort orders by the bits above `low_bits` only, stably: the
 * low bits (what a word stands for) keep their input order on ties. */
static void check_words(int64_t n, uint64_t mask, int low_bits,
                        uint64_t seed) {
  rsi_keyed *want = malloc((size_t)n * sizeof *want);
  uint64_t *v = malloc((size_t)n * 2 * sizeof *v);
  cr_assert(want && v);
  for (int64_t i = 0; i < n; i++) {
    uint64_t key = next(&seed) & mask & ~((1ull << low_bits) - 1);
    uint64_t low = next(&seed) & ((1ull << low_bits) - 1);
    v[i] = key | low;
    want[i] = (rsi_keyed){0, key, (uint64_t)i};
  }
  qsort(want, (size_t)n, sizeof *want, by_key_then_place);
  uint64_t *in = malloc((size_t)n * sizeof *in);
  cr_assert(in);
  memcpy(in, v, (size_t)n * sizeof *v);
  rsi_radix_sort_words(v, v + n, n, low_bits);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(v[i], in[want[i].value],
                 "n %lld mask %llx low bits %d: word %lld is %llx, want %llx",
                 (long long)n, (unsigned long long)mask, low_bits,
                 (long long)i, (unsigned long long)v[i],
                 (unsigned long long)in[want[i].value]);
  free(in);
  free(v);
  free(want);
}

Test(radix_sort, words_by_their_high_bits) {
  check_words(1, ~0ull, 8, 20);
  check_words(2, ~0ull, 8, 21);
  check_words(20000, ~0ull, 25, 22);           /* the unit sort's shape */
  check_words(20000, 0x3ull << 40 | ~0ull >> 40, 24, 23); /* mostly ties */
  check_words(20000, ~0ull, 0, 24);            /* no bits left out */
  check_words(20000, 0x1ull << 63 | 0xffffff, 24, 25); /* only the top bit */
}
