/* SPDX-License-Identifier: Apache-2.0 */
/* The one value generator of the tests: the value of every element of every
 * tensor, derived from (generation, tensor, global linear index), so that a
 * test fills sources and checks destinations without keeping a copy, and a
 * new generation gives (but for chance) every element a new value. Also
 * the byte order values are stored in, the poison byte destinations start
 * as (no value ever holds a poison byte, so an element left unwritten is
 * always caught), and the splitmix64 mixer and random stream it is built
 * on.
 *
 * Header-only, plain C11 with no Criterion and no MPI: the unit tests
 * (th_util.h), the MPI programs (tests/mpi/mpi_harness.c, tests/soak) and
 * the fuzz targets all use it. */
#ifndef RESHARD_TESTS_TH_VALUE_H
#define RESHARD_TESTS_TH_VALUE_H

#include <stddef.h>
#include <stdint.h>

/* What destination memory holds before an execution, byte by byte. */
#define TH_POISON 0xA5u
/* What a value byte that would equal TH_POISON becomes. */
#define TH_NOT_POISON 0x5Au

#define TH_GOLDEN 0x9E3779B97F4A7C15ull

/* splitmix64 finaliser: a good cheap 64-bit mix (a bijection). */
static inline uint64_t th_mix(uint64_t x) {
  x += TH_GOLDEN;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The next number of the splitmix64 stream whose state is *state. */
static inline uint64_t th_rand(uint64_t *state) {
  *state += TH_GOLDEN;
  return th_mix(*state);
}

/* The value of element lin of tensor `tensor` in generation gen, in the
 * low esize bytes (1..8), none of them TH_POISON. For a fixed element,
 * different generations give different 64-bit values (the mix is a
 * bijection); truncated to esize bytes they differ but for chance (1 in
 * 255 for a one-byte element, 1 in 65025 for two bytes). */
static inline uint64_t th_value(uint64_t gen, uint64_t tensor, int64_t lin,
                                size_t esize) {
  uint64_t h = th_mix(gen * 0xD6E8FEB86659FD93ull ^
                      tensor * 0xA0761D6478BD642Full ^ (uint64_t)lin);
  uint64_t v = 0;
  for (size_t k = 0; k < esize && k < 8; k++) {
    uint64_t b = (h >> (8 * k)) & 0xFFu;
    v |= (b == TH_POISON ? TH_NOT_POISON : b) << (8 * k);
  }
  return v;
}

/* Values are stored little-endian in esize bytes. */
static inline void th_store(unsigned char *p, size_t esize, uint64_t v) {
  for (size_t i = 0; i < esize; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t th_load(const unsigned char *p, size_t esize) {
  uint64_t v = 0;
  for (size_t i = 0; i < esize; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The value an element reads as when every one of its bytes is TH_POISON. */
static inline uint64_t th_poisoned(size_t esize) {
  uint64_t v = 0;
  for (size_t i = 0; i < esize; i++) v |= (uint64_t)TH_POISON << (8 * i);
  return v;
}

#endif
