/* SPDX-License-Identifier: Apache-2.0 */
/* Sorting many records by a two-word key in linear time: the planner's
 * schedule sorts every unit and every move of a plan (tens of millions at
 * thousands of ranks), where a comparison sort was a fifth of the time. */
#ifndef RS_CORE_RADIX_SORT_H
#define RS_CORE_RADIX_SORT_H

#include <stdint.h>

/* A record: its key (hi, then lo) and what it stands for. */
typedef struct rsi_keyed {
  uint64_t hi, lo, value;
} rsi_keyed;

/* Sort v[0..n) by (hi, lo), stably (equal keys keep their order), by
 * least-significant-digit radix passes of up to 9 bits over the key bits
 * that differ between records only: a key whose varying fields are packed
 * side by side in one word costs the fewest passes.
 * scratch: n records that do not overlap v; the
 * caller owns it, so that a caller short of fresh memory can lend a part
 * of a block it will use next (rounds.c). */
void rsi_radix_sort(rsi_keyed *v, rsi_keyed *scratch, int64_t n);

/* Sort the words v[0..n) by their bits from bit `low_bits` up, stably;
 * the low bits are left out of the order, and free to say what a word
 * stands for. 8 bytes a record where rsi_radix_sort takes 24. scratch:
 * n words that do not overlap v. */
void rsi_radix_sort_words(uint64_t *v, uint64_t *scratch, int64_t n,
                          int low_bits);

/* The bits x takes (0 for 0): the width of a key field that holds 0..x. */
static inline int rsi_bits_for(uint64_t x) {
  return x ? 64 - __builtin_clzll(x) : 0;
}

#endif
