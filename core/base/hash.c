/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a 64 and SipHash-2-4 (see hash.h for which serves what), and the
 * random keys of SipHash. SipHash follows the paper: 64-bit words read
 * little-endian, two compression rounds per word, four finalization
 * rounds; test_hostile_input checks it against the paper's vectors. */
#include "base/hash.h"

#if defined(__has_include)
#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define RSI_HAVE_GETRANDOM 1
#endif
#endif
#include <string.h>
#include <time.h>

uint64_t rsi_fnv1a64_update(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t rsi_fnv1a64(const void *data, size_t n) {
  return rsi_fnv1a64_update(RSI_FNV1A64_BASIS, data, n);
}

static inline uint64_t words_mix(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9E3779B97F4A7C15ull;
  return h ^ h >> 32;
}

uint64_t rsi_words_hash_update(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  size_t i = 0;
  if (n >= 64) {
    /* Four lanes, word i into lane i % 4, folded together after: a lane's
     * multiply does not wait for the others', so the sum runs at the
     * speed of the loads, not of one multiply after another. */
    uint64_t lane[4] = {h, h ^ 0x243F6A8885A308D3ull,
                        h ^ 0x13198A2E03707344ull, h ^ 0xA4093822299F31D0ull};
    for (; i + 32 <= n; i += 32) {
      uint64_t w[4];
      memcpy(w, b + i, sizeof w);
      for (int k = 0; k < 4; k++) lane[k] = words_mix(lane[k], w[k]);
    }
    /* Each lane avalanched before the fold (MurmurHash3's finalizer): a
     * flip in a lane's last word has had one multiply, which carries it
     * only upwards, and two lanes' alike flips would cancel in the fold. */
    h = 0;
    for (int k = 0; k < 4; k++) {
      uint64_t x = lane[k];
      x = (x ^ x >> 33) * 0xFF51AFD7ED558CCDull;
      x = (x ^ x >> 33) * 0xC4CEB9FE1A85EC53ull;
      h = words_mix(h, x ^ x >> 33);
    }
  }
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, sizeof w);
    h = words_mix(h, w);
  }
  if (i == n) return h; /* no tail (data may be NULL when n is 0) */
  return rsi_fnv1a64_update(h, b + i, n - i);
}

/* ---- SipHash-2-4 ---------------------------------------------------------- */

static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline void sip_round(uint64_t v[4]) {
  v[0] += v[1];
  v[1] = rotl(v[1], 13) ^ v[0];
  v[0] = rotl(v[0], 32);
  v[2] += v[3];
  v[3] = rotl(v[3], 16) ^ v[2];
  v[0] += v[3];
  v[3] = rotl(v[3], 21) ^ v[0];
  v[2] += v[1];
  v[1] = rotl(v[1], 17) ^ v[2];
  v[2] = rotl(v[2], 32);
}

/* Mix one message word into the state: two compression rounds. */
static inline void sip_absorb(uint64_t v[4], uint64_t m) {
  v[3] ^= m;
  sip_round(v);
  sip_round(v);
  v[0] ^= m;
}

/* Up to 8 bytes as a little-endian word. */
static uint64_t load_le(const unsigned char *b, size_t n) {
  uint64_t w = 0;
  for (size_t i = 0; i < n; i++) w |= (uint64_t)b[i] << (8 * i);
  return w;
}

uint64_t rsi_siphash(const rsi_hash_key *key, const void *data, size_t n) {
  const unsigned char *b = data;
  uint64_t v[4] = {key->k0 ^ 0x736f6d6570736575ull,
                   key->k1 ^ 0x646f72616e646f6dull,
                   key->k0 ^ 0x6c7967656e657261ull,
                   key->k1 ^ 0x7465646279746573ull};
  size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) sip_absorb(v, load_le(b + i, 8));
  sip_absorb(v, load_le(b + whole, n - whole) | (uint64_t)n << 56);
  v[2] ^= 0xff;
  for (int r = 0; r < 4; r++) sip_round(v);
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* ---- keys ------------------------------------------------------------------ */

void rsi_hash_key_random(rsi_hash_key *key) {
#ifdef RSI_HAVE_GETRANDOM
  if (getrandom(key, sizeof *key, GRND_NONBLOCK) == (ssize_t)sizeof *key)
    return;
#endif
  /* No random source (or it is not ready yet): clocks and addresses, which
   * an outsider cannot read, mixed through SipHash itself. */
  struct timespec mono = {0, 0}, real = {0, 0};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  uint64_t seed[4] = {(uint64_t)mono.tv_sec * 1000000000ull +
                          (uint64_t)mono.tv_nsec,
                      (uint64_t)real.tv_sec * 1000000000ull +
                          (uint64_t)real.tv_nsec,
                      (uint64_t)(uintptr_t)key, (uint64_t)(uintptr_t)&mono};
  rsi_hash_key mix = {seed[0] ^ seed[2], seed[1] ^ seed[3]};
  key->k0 = rsi_siphash(&mix, seed, sizeof seed);
  mix.k0 = ~mix.k0;
  key->k1 = rsi_siphash(&mix, seed, sizeof seed);
}
