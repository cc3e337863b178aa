/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile layout inputs, shared by tests/unit/api/test_hostile_input.c and
 * bench/bench_hostile_input.c: tensor names built to collide in the name
 * index libreshard used to have (FNV-1a 32, open addressing, slot = low
 * bits of the hash), and a layout cut into many small serialized pieces,
 * one per rank, to deserialize one call at a time.
 *
 * Why the names are cheap to make: FNV-1a 32 is h = (h ^ byte) * p mod 2^32,
 * so the low k bits of h depend only on the low k bits before the step. A
 * name whose hash must end in the bits T is found by walking stems (a fixed
 * prefix and five letters) and asking whether the last byte can close the
 * gap: (h ^ last) must equal U = T * p^-1 in its low k bits, which fixes the
 * last byte once bits 8..k-1 of h already agree (one stem in 2^(k-8)); the
 * byte must also be printable ASCII. Header-only, public API only; no
 * Criterion, so the bench uses it too. */
#ifndef RESHARD_TESTS_TH_HOSTILE_H
#define RESHARD_TESTS_TH_HOSTILE_H

#include <reshard/reshard.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RH_NAME_BYTES 64
#define RH_FNV32_PRIME 16777619u
#define RH_FNV32_BASIS 2166136261u
/* The low bits every colliding name's FNV-1a 32 hash ends in. */
#define RH_TARGET 0x2f00du

static const char rh_alphabet[64 + 1] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._";
#define RH_STEM 5 /* letters after the prefix, before the closing byte */

static inline uint32_t rh_fnv32_step(uint32_t h, unsigned char c) {
  return (h ^ c) * RH_FNV32_PRIME;
}

/* FNV-1a 32 of a string, as the old index hashed names. */
static inline uint32_t rh_fnv32(const char *s) {
  uint32_t h = RH_FNV32_BASIS;
  for (; *s; s++) h = rh_fnv32_step(h, (unsigned char)*s);
  return h;
}

/* The inverse of the FNV prime modulo 2^32 (Newton's iteration). */
static inline uint32_t rh_prime_inverse(void) {
  uint32_t inv = RH_FNV32_PRIME;
  for (int i = 0; i < 5; i++) inv *= 2u - RH_FNV32_PRIME * inv;
  return inv;
}

/* Fill names[0..n) with distinct names, each `prefix` (at most
 * RH_NAME_BYTES - 8 bytes) then RH_STEM letters then one printable byte,
 * whose FNV-1a 32 hashes all end in the low `bits` (8..24) bits of
 * RH_TARGET. Returns how many it made (n unless the stems run out). */
static inline size_t rh_colliding_names(char (*names)[RH_NAME_BYTES],
                                        size_t n, const char *prefix,
                                        int bits) {
  const uint32_t mask = (1u << bits) - 1;
  const uint32_t want = (RH_TARGET * rh_prime_inverse()) & mask;
  const size_t plen = strlen(prefix);
  int idx[RH_STEM] = {0};
  uint32_t h[RH_STEM] = {0}; /* h[k]: hash of the prefix and letters < k */
  h[0] = rh_fnv32(prefix);
  for (int k = 1; k < RH_STEM; k++)
    h[k] = rh_fnv32_step(h[k - 1], (unsigned char)rh_alphabet[0]);
  size_t got = 0;
  while (got < n) {
    for (int c = 0; c < 64 && got < n; c++) {
      uint32_t gap = (rh_fnv32_step(h[RH_STEM - 1],
                                    (unsigned char)rh_alphabet[c]) ^ want) &
                     mask;
      if (gap < 0x21 || gap > 0x7e) continue; /* not one printable byte */
      char *s = names[got++];
      memcpy(s, prefix, plen);
      for (int k = 0; k < RH_STEM - 1; k++) s[plen + k] = rh_alphabet[idx[k]];
      s[plen + RH_STEM - 1] = rh_alphabet[c];
      s[plen + RH_STEM] = (char)gap;
      s[plen + RH_STEM + 1] = '\0';
    }
    int k = RH_STEM - 2; /* the next stem, odometer style */
    while (k >= 0 && ++idx[k] == 64) idx[k--] = 0;
    if (k < 0) break;
    for (int j = k; j < RH_STEM - 1; j++)
      h[j + 1] = rh_fnv32_step(h[j], (unsigned char)rh_alphabet[idx[j]]);
  }
  return got;
}

/* ---- a layout in pieces ------------------------------------------------- */

/* `ntensors` bf16 tensors of shape [4 * world, 64]; rank r holds rows
 * [4r, 4r + 4) of each, in buffer 0, one block after another. */
#define RH_ROWS 4
#define RH_COLS 64

static inline void rh_piece_name(char *out, size_t n, int t) {
  snprintf(out, n, "model.layers.%d.mlp.experts.%d.down_proj.weight", t / 8,
           t % 8);
}

static inline rs_status rh_declare(rs_layout *l, int ntensors, int world) {
  char name[RH_NAME_BYTES];
  const int64_t shape[2] = {(int64_t)RH_ROWS * world, RH_COLS};
  for (int t = 0; t < ntensors; t++) {
    rh_piece_name(name, sizeof name, t);
    rs_status st = rs_layout_add_tensor(l, name, RS_DTYPE_BF16, 2, shape);
    if (st != RS_OK) return st;
  }
  return RS_OK;
}

static inline rs_status rh_add_rank(rs_layout *l, int ntensors, int rank) {
  char name[RH_NAME_BYTES];
  const int64_t off[2] = {(int64_t)RH_ROWS * rank, 0};
  const int64_t ext[2] = {RH_ROWS, RH_COLS};
  for (int t = 0; t < ntensors; t++) {
    rh_piece_name(name, sizeof name, t);
    rs_status st = rs_layout_add_shard(l, name, rank, off, ext, 0,
                                       (int64_t)t * RH_ROWS * RH_COLS * 2,
                                       NULL);
    if (st != RS_OK) return st;
  }
  return RS_OK;
}

/* The whole layout, every rank in order (what the pieces add up to). */
static inline rs_status rh_whole(rs_layout *l, int ntensors, int world) {
  rs_status st = rh_declare(l, ntensors, world);
  for (int r = 0; st == RS_OK && r < world; r++)
    st = rh_add_rank(l, ntensors, r);
  return st;
}

/* Piece r: every declaration and rank r's shards, serialized; pieces[r]
 * and lens[r] are freed with rs_free by the caller. */
static inline rs_status rh_pieces(rs_context *ctx, int ntensors, int world,
                                  void **pieces, size_t *lens) {
  rs_status st = RS_OK;
  for (int r = 0; st == RS_OK && r < world; r++) {
    rs_layout *l = NULL;
    st = rs_layout_create(ctx, &l);
    if (st == RS_OK) st = rh_declare(l, ntensors, world);
    if (st == RS_OK) st = rh_add_rank(l, ntensors, r);
    if (st == RS_OK) st = rs_layout_serialize(l, &pieces[r], &lens[r]);
    rs_layout_destroy(l);
  }
  return st;
}

#endif
