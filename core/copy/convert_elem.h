/* SPDX-License-Identifier: Apache-2.0 */
/* Per-element conversions between f32, bf16, f16 and fp8 e4m3, and the
 * scale of one block of block-scaled fp8: the math that the host loops
 * (convert.c) and the CUDA kernels share. Plain C11 that also compiles as
 * CUDA C++ (__host__ __device__).
 *
 * Narrow formats travel as their bit patterns (uint16_t, uint8_t).
 * Rounding is to nearest, ties to even, in one step from the exact value;
 * subnormals are exact both ways. A NaN stays a NaN: narrowing gives the
 * format's quiet NaN with the sign kept (bf16 0x7fc0, f16 0x7e00, e4m3
 * 0x7f, each | sign); widening keeps the payload and sets the quiet bit.
 * f32 -> bf16 and f32 -> f16 overflow to infinity as IEEE does.
 *
 * e4m3 is OCP FP8 E4M3FN: bias 7, no infinities, largest 448 (0x7e), NaN
 * S.1111.111. f32 -> e4m3 here saturates: anything beyond +-448 (infinity
 * included) becomes +-448.
 *
 * The selects below are written so that the host loops if-convert and
 * vectorize: every branch value is computed, then one is picked. The casts
 * give the same bits under flush-to-zero modes (their float ops see and
 * make normal numbers, or a subnormal whose result rounds to 0 anyway);
 * block scales below 2^-126 (blocks whose amax is below about 2^-117)
 * need subnormals kept, so a device build that is to match the host bit
 * for bit must not flush them (no --use_fast_math / -ftz=true). No float
 * product feeds an add directly, so FMA contraction changes nothing. */
#ifndef RS_CORE_CONVERT_ELEM_H
#define RS_CORE_CONVERT_ELEM_H

#include <stdint.h>
#ifndef __CUDA_ARCH__
#include <string.h>
#endif

#include "base/hd.h"

/* Largest finite e4m3 value. */
#define RSI_E4M3_MAX 448.0f

static inline RSI_HD uint32_t rsi_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

static inline RSI_HD float rsi_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

static inline RSI_HD float rsi_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  uint32_t quiet = (u & 0x7fffffffu) > 0x7f800000u ? 0x00400000u : 0u;
  return rsi_bits_f32(u | quiet);
}

static inline RSI_HD uint16_t rsi_f32_to_bf16(float f) {
  uint32_t u = rsi_f32_bits(f);
  /* Adding 0x7fff plus the kept lowest bit rounds ties to even; a carry
   * out of the mantissa steps the exponent, up to infinity. */
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

static inline RSI_HD float rsi_f16_to_f32(uint16_t h) {
  uint32_t mag = ((uint32_t)h & 0x7fffu) << 13; /* f16 fields at f32's place */
  uint32_t normal = mag + ((127u - 15u) << 23);
  uint32_t special = (mag + ((255u - 31u) << 23)) |
                     ((int32_t)mag > 0x0f800000 ? 0x00400000u : 0u);
  /* a subnormal m * 2^-24 is (2^-14 + m * 2^-24) - 2^-14, all normal and
   * exact in f32 */
  uint32_t sub =
      rsi_f32_bits(rsi_bits_f32(mag + ((127u - 14u) << 23)) - 0x1p-14f);
  uint32_t r = (int32_t)mag < 0x00800000
                   ? sub
                   : ((int32_t)mag >= 0x0f800000 ? special : normal);
  return rsi_bits_f32(r | (((uint32_t)h & 0x8000u) << 16));
}

static inline RSI_HD uint16_t rsi_f32_to_f16(float f) {
  uint32_t u = rsi_f32_bits(f);
  uint32_t a = u & 0x7fffffffu;
  /* normal results, a in [2^-14, 2^16): rebias, round the 13 dropped bits;
   * from 65520 up the carry gives infinity (0x7c00) */
  uint32_t normal = (a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  /* below 2^-14: adding 0.5f (whose ulp is 2^-24, the f16 subnormal step)
   * rounds at the right place, ties to even, in the FPU */
  uint32_t small = rsi_f32_bits(rsi_bits_f32(a) + 0.5f) - 0x3f000000u;
  uint32_t big = (int32_t)a > 0x7f800000 ? 0x7e00u : 0x7c00u;
  uint32_t r = (int32_t)a >= 0x47800000
                   ? big
                   : ((int32_t)a >= 0x38800000 ? normal : small);
  return (uint16_t)(r | ((u >> 16) & 0x8000u));
}

static inline RSI_HD uint16_t rsi_f16_to_bf16(uint16_t h) {
  return rsi_f32_to_bf16(rsi_f16_to_f32(h)); /* the widening is exact */
}

static inline RSI_HD uint16_t rsi_bf16_to_f16(uint16_t h) {
  return rsi_f32_to_f16(rsi_bf16_to_f32(h));
}

/* The e4m3 code (0..0x7f, no sign) of the magnitude a, whose sign bit is
 * clear, saturating at 448; 0x7f for a NaN. */
static inline RSI_HD uint32_t rsi_e4m3_code_of_magnitude(float a) {
  float c = RSI_E4M3_MAX < a ? RSI_E4M3_MAX : a; /* min(a, 448); NaN stays */
  uint32_t cb = rsi_f32_bits(c);
  /* For c in [2^e, 2^(e+1)), e >= -6 (below 2^-6: e = -6, the subnormal
   * range), e4m3 steps by 2^(e-3), the ulp of m = 2^(e+20): c + m rounds c
   * to a step, ties to even, in the FPU, and its bits count steps past m.
   * The e4m3 code is steps + (e + 6) * 8 (a step up to 2^(e+1) carries
   * into the exponent as it should). A NaN c makes m negative and the
   * code far above 0x7f, which the last min turns into 0x7f. */
  uint32_t e = cb & 0x7f800000u;
  e = e > 0x3c800000u ? e : 0x3c800000u; /* 2^e, at least 2^-6 */
  uint32_t m = e + (20u << 23);
  uint32_t steps = rsi_f32_bits(c + rsi_bits_f32(m)) - m;
  uint32_t code = steps + (m >> 20) - (127u + 14u) * 8u;
  return code < 0x7fu ? code : 0x7fu;
}

/* f32 -> e4m3, saturating at +-448. */
static inline RSI_HD uint8_t rsi_f32_to_e4m3_sat(float f) {
  uint32_t u = rsi_f32_bits(f);
  uint32_t code = rsi_e4m3_code_of_magnitude(rsi_bits_f32(u & 0x7fffffffu));
  return (uint8_t)(code | ((u >> 24) & 0x80u));
}

static inline RSI_HD float rsi_e4m3_to_f32(uint8_t b) {
  uint32_t sign = ((uint32_t)b & 0x80u) << 24;
  uint32_t a = (uint32_t)b & 0x7fu;
  uint32_t normal = (a << 20) + ((127u - 7u) << 23);
  uint32_t sub = rsi_f32_bits((float)(int32_t)(a & 7u) * 0x1p-9f);
  uint32_t r = a == 0x7fu ? 0x7fc00000u : (a < 8u ? sub : normal);
  return rsi_bits_f32(r | sign);
}

/* The scale of one block whose largest magnitude is amax (>= 0, or NaN):
 * amax / 448 in f32; 1 when amax is 0; the smallest positive f32 (2^-149)
 * when a positive amax is so small that the quotient underflows to 0. A
 * NaN amax gives a quiet NaN scale, an infinite one an infinite scale. */
static inline RSI_HD float rsi_e4m3_scale(float amax) {
  uint32_t a = rsi_f32_bits(amax) & 0x7fffffffu;
  if (a > 0x7f800000u) return rsi_bits_f32(0x7fc00000u);
  if (a == 0) return 1.0f;
  float s = rsi_bits_f32(a) / RSI_E4M3_MAX;
  return s == 0.0f ? rsi_bits_f32(1u) : s;
}

/* The "UE8M0" scale: the smallest power of two 2^k with 2^k * 448 >= amax,
 * exactly (no libm), and never below 2^-127, the smallest UE8M0 value
 * (kept in f32 as the subnormal 0x00400000, whose exponent byte 0 is that
 * value's UE8M0 byte). 1 when amax is 0; NaN and infinity as above. */
static inline RSI_HD float rsi_e4m3_scale_ue8m0(float amax) {
  uint32_t a = rsi_f32_bits(amax) & 0x7fffffffu;
  if (a > 0x7f800000u) return rsi_bits_f32(0x7fc00000u);
  if (a == 0x7f800000u) return rsi_bits_f32(a);
  if (a == 0) return 1.0f;
  /* amax = m * 2^e with m in [1, 2); amax / 448 = (m / 1.75) * 2^(e-8),
   * and m / 1.75 <= 1 exactly when the mantissa bits are <= 0x600000. A
   * subnormal amax (e field 0) lands far below the clamp. */
  int32_t e = (int32_t)(a >> 23) - 127;
  int32_t k = e - 8 + ((a & 0x007fffffu) > 0x00600000u ? 1 : 0);
  if (k < -126) return rsi_bits_f32(0x00400000u);
  return rsi_bits_f32((uint32_t)(k + 127) << 23);
}

/* One value of a block with scale `scale`: x / scale (a true f32
 * division), rounded and saturated to e4m3. */
static inline RSI_HD uint8_t rsi_e4m3_quantize(float x, float scale) {
  return rsi_f32_to_e4m3_sat(x / scale);
}

#endif
