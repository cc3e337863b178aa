/* SPDX-License-Identifier: Apache-2.0 */
/* The hashes of the core, each written once.
 *
 * FNV-1a 64 is for sums that every rank must compute alike: the layout wire
 * format's checksum, plan fingerprints, the executor's agreement. It is
 * unkeyed, so never use it to place input in a table: anyone can build
 * inputs that collide in it.
 *
 * SipHash-2-4 (Aumasson and Bernstein) is keyed: without the key nobody can
 * choose inputs that collide, so an index over names someone else picked
 * (tensor names) stays O(1) per lookup whatever they send. Each index draws
 * its own key (rsi_hash_key_random), so nothing computed from the key may
 * leave the process or decide an order that ranks must share. */
#ifndef RS_CORE_HASH_H
#define RS_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RSI_FNV1A64_BASIS 14695981039346656037ull

/* FNV-1a 64 of n bytes, continuing from h (RSI_FNV1A64_BASIS to start). */
uint64_t rsi_fnv1a64_update(uint64_t h, const void *data, size_t n);

/* FNV-1a 64 of n bytes. */
uint64_t rsi_fnv1a64(const void *data, size_t n);

/* A sum of n bytes, continuing from h, for long arrays every rank must sum
 * alike (the layouts in a plan's fingerprint): 8 bytes a step (a multiply
 * and a fold of the high half down, so that a change in any bit reaches
 * every later bit), in four interleaved lanes folded together where n is
 * 64 or more, the tail by FNV-1a. Unkeyed like FNV-1a; a sum of the same
 * bytes cut into other calls differs. */
uint64_t rsi_words_hash_update(uint64_t h, const void *data, size_t n);

typedef struct rsi_hash_key {
  uint64_t k0, k1;
} rsi_hash_key;

/* A fresh key from the system's random source (getrandom), or, where there
 * is none, from clocks and addresses. */
void rsi_hash_key_random(rsi_hash_key *key);

/* SipHash-2-4 of n bytes under key. */
uint64_t rsi_siphash(const rsi_hash_key *key, const void *data, size_t n);

#endif
