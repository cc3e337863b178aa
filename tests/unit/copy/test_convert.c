/* SPDX-License-Identifier: Apache-2.0 */
/* Element conversions (core/copy/convert_elem.h) and the host conversion loops
 * (core/copy/convert.h): every bf16, f16 and e4m3 bit pattern widened and
 * narrowed back; every rounding midpoint of each narrow format and its
 * two f32 neighbours; a million random f32 against a reference rounding
 * written here in double arithmetic; the boundary cases by name; both
 * block-scale rules against exact references; strided rows, amax,
 * quantization and whole tensors against per-element loops; bad
 * arguments; and (suite convert_ref) every result bit for bit against
 * ml_dtypes / numpy, through tests/unit/copy/convert_ref.py, which this test
 * runs (a missing python3, numpy or ml_dtypes fails it).
 *
 * NaN rules checked here: narrowing gives the canonical quiet NaN with the
 * sign kept; widening keeps the payload and sets the quiet bit. Against
 * ml_dtypes, a NaN matches any NaN (payload and sign of a NaN are not
 * fixed by IEEE for arithmetic results).
 *
 * Replay: RESHARD_SEED=<seed> (default fixed). */
#include <criterion/criterion.h>

#include "copy/convert.h"
#include "copy/convert_elem.h"
#include "base/dtype.h"
#include "th_util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_SEED 0xC0417E57ull

static uint64_t test_seed(void) {
  const char *v = getenv("RESHARD_SEED");
  return v && *v ? strtoull(v, NULL, 0) : DEFAULT_SEED;
}

static uint64_t rnd(uint64_t *s) { return th_rand(s); }

/* ---- an independent reference, in double ------------------------------- */

/* A binary float format: p significand bits (the implicit one included),
 * smallest normal 2^emin, largest finite value max; has_inf: overflow
 * gives infinity (else the caller saturates). */
typedef struct fmt {
  const char *name;
  int bits, p, emin;
  double max;
} fmt;

static const fmt BF16 = {"bf16", 16, 8, -126, 0x1.fep127};
static const fmt F16 = {"f16", 16, 11, -14, 65504.0};
static const fmt E4M3 = {"e4m3", 8, 4, -6, 448.0};

/* Value of a bit pattern of f (e4m3: no infinity; S.1111.111 is NaN). */
static double ref_decode(const fmt *f, uint32_t b) {
  int mbits = f->p - 1, ebits = f->bits - 1 - mbits;
  uint32_t m = b & ((1u << mbits) - 1), e = (b >> mbits) & ((1u << ebits) - 1);
  bool neg = (b >> (f->bits - 1)) & 1;
  uint32_t emax = (1u << ebits) - 1;
  double v;
  if (f == &E4M3 && e == emax && m == (1u << mbits) - 1)
    v = NAN;
  else if (f != &E4M3 && e == emax)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp((double)m, f->emin - mbits);
  else
    v = ldexp((double)(m | (1u << mbits)), (int)e - (int)(emax >> 1) - mbits);
  return neg ? -v : v;
}

/* v rounded to f's grid, ties to even; past max: infinity, or +-max with
 * saturate. */
static double ref_round(const fmt *f, double v, bool saturate) {
  if (isnan(v) || v == 0) return v;
  double a = fabs(v);
  if (isinf(v) || (saturate && a > f->max))
    return saturate ? copysign(f->max, v) : v;
  int e;
  frexp(a, &e); /* a in [2^(e-1), 2^e) */
  int lead = e - 1 < f->emin ? f->emin : e - 1;
  double step = ldexp(1.0, lead - (f->p - 1));
  double r = nearbyint(a / step) * step;
  if (r > f->max) r = saturate ? f->max : INFINITY;
  return copysign(r, v);
}

static bool same_value(double got, double want) {
  if (isnan(want)) return isnan(got);
  return got == want && signbit(got) == signbit(want);
}

static float f32_of(uint32_t b) { return rsi_bits_f32(b); }

/* ---- every pattern ----------------------------------------------------- */

Test(convert_elem, bf16_every_pattern) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = rsi_bf16_to_f32((uint16_t)h);
    uint32_t u = rsi_f32_bits(f);
    bool nan = (h & 0x7fff) > 0x7f80;
    if (nan) {
      cr_assert_eq(u, (h << 16) | 0x00400000u, "bf16 %04x widened: %08x", h, u);
      cr_assert_eq(rsi_f32_to_bf16(f), (h & 0x8000) | 0x7fc0,
                   "bf16 NaN %04x narrowed back", h);
    } else {
      cr_assert_eq(u, h << 16, "bf16 %04x widened: %08x", h, u);
      cr_assert(same_value(f, ref_decode(&BF16, h)), "bf16 %04x value", h);
      cr_assert_eq(rsi_f32_to_bf16(f), h, "bf16 %04x round trip", h);
    }
  }
}

Test(convert_elem, f16_every_pattern) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = rsi_f16_to_f32((uint16_t)h);
    double want = ref_decode(&F16, h);
    cr_assert(same_value(f, want), "f16 %04x: %a, want %a", h, (double)f, want);
    if (isnan(want)) {
      uint32_t u = rsi_f32_bits(f);
      cr_assert_eq(u, ((h & 0x8000u) << 16) | 0x7f800000u |
                          ((h & 0x3ffu) << 13) | 0x00400000u,
                   "f16 NaN %04x widened: %08x (payload, quiet bit)", h, u);
      cr_assert_eq(rsi_f32_to_f16(f), (h & 0x8000) | 0x7e00,
                   "f16 NaN %04x narrowed back", h);
    } else {
      cr_assert_eq(rsi_f32_to_f16(f), h, "f16 %04x round trip", h);
    }
  }
}

Test(convert_elem, e4m3_every_pattern) {
  for (uint32_t b = 0; b < 256; b++) {
    float f = rsi_e4m3_to_f32((uint8_t)b);
    double want = ref_decode(&E4M3, b);
    cr_assert(same_value(f, want), "e4m3 %02x: %a, want %a", b, (double)f,
              want);
    uint8_t back = rsi_f32_to_e4m3_sat(f);
    if (isnan(want)) {
      cr_assert_eq(rsi_f32_bits(f), ((b & 0x80u) << 24) | 0x7fc00000u,
                   "e4m3 NaN %02x widened", b);
      cr_assert_eq(back, b, "e4m3 NaN %02x narrowed back: %02x", b, back);
    } else {
      cr_assert_eq(back, b, "e4m3 %02x round trip: %02x", b, back);
    }
  }
  cr_assert_eq(rsi_e4m3_to_f32(0x7e), 448.0f);
  cr_assert_eq(rsi_e4m3_to_f32(0x01), 0x1p-9f);
  cr_assert_eq(rsi_e4m3_to_f32(0x08), 0x1p-6f);
}

/* f16 <-> bf16: every pattern of each against the reference rounding of
 * its exact value. */
Test(convert_elem, f16_bf16_every_pattern) {
  for (uint32_t h = 0; h < 65536; h++) {
    double v = ref_decode(&F16, h);
    uint16_t b = rsi_f16_to_bf16((uint16_t)h);
    cr_assert(same_value(ref_decode(&BF16, b), ref_round(&BF16, v, false)),
              "f16 %04x -> bf16 %04x", h, b);
    if (isnan(v)) cr_assert_eq(b, (h & 0x8000) | 0x7fc0, "f16 NaN %04x", h);
    v = ref_decode(&BF16, h);
    uint16_t g = rsi_bf16_to_f16((uint16_t)h);
    cr_assert(same_value(ref_decode(&F16, g), ref_round(&F16, v, false)),
              "bf16 %04x -> f16 %04x", h, g);
    if (isnan(v)) cr_assert_eq(g, (h & 0x8000) | 0x7e00, "bf16 NaN %04x", h);
  }
}

/* ---- rounding ---------------------------------------------------------- */

static uint32_t narrow(const fmt *f, float x) {
  if (f == &BF16) return rsi_f32_to_bf16(x);
  if (f == &F16) return rsi_f32_to_f16(x);
  return rsi_f32_to_e4m3_sat(x);
}

static void check_narrow(const fmt *f, float x) {
  uint32_t got = narrow(f, x);
  double want = ref_round(f, x, f == &E4M3);
  cr_assert(same_value(ref_decode(f, got), want),
            "%s of %a (%08x): %x = %a, want %a", f->name, (double)x,
            rsi_f32_bits(x), got, ref_decode(f, got), want);
}

/* Every midpoint between neighbouring finite values of f (both signs),
 * and the f32 values on either side of it. */
static void check_midpoints(const fmt *f) {
  uint32_t top = f == &E4M3 ? 0x7e : (f == &F16 ? 0x7bff : 0x7f7f);
  for (uint32_t b = 0; b < top; b++) {
    float mid = (float)((ref_decode(f, b) + ref_decode(f, b + 1)) / 2);
    cr_assert_eq((double)mid, (ref_decode(f, b) + ref_decode(f, b + 1)) / 2,
                 "%s midpoint after %x is not an f32", f->name, b);
    for (int s = 0; s < 2; s++) {
      float m = s ? -mid : mid;
      uint32_t even = (b & 1) ? b + 1 : b;
      uint32_t sign = s ? 1u << (f->bits - 1) : 0;
      cr_assert_eq(narrow(f, m), even | sign, "%s tie after %x (%a)", f->name,
                   b, (double)m);
      check_narrow(f, nextafterf(m, 0));
      check_narrow(f, nextafterf(m, s ? -INFINITY : INFINITY));
    }
  }
}

Test(convert_elem, every_midpoint) {
  check_midpoints(&BF16);
  check_midpoints(&F16);
  check_midpoints(&E4M3);
}

Test(convert_elem, random_f32) {
  uint64_t seed = test_seed(), s = seed;
  for (int i = 0; i < 1000000; i++) {
    uint64_t r = rnd(&s);
    uint32_t bits = (uint32_t)r;
    /* half of them near the ranges of f16 and e4m3 */
    if (i & 1) bits = (bits & 0x81ffffffu) | ((uint32_t)(0x30 + (r >> 40) % 32) << 24);
    float x = f32_of(bits);
    check_narrow(&BF16, x);
    check_narrow(&F16, x);
    check_narrow(&E4M3, x);
  }
  (void)seed;
}

typedef struct named_case {
  const char *what;
  float x;
  uint32_t bf16, f16, e4m3;
} named_case;

Test(convert_elem, boundary_cases) {
  const named_case cases[] = {
      {"+0", 0.0f, 0x0000, 0x0000, 0x00},
      {"-0", -0.0f, 0x8000, 0x8000, 0x80},
      {"1", 1.0f, 0x3f80, 0x3c00, 0x38},
      {"bf16 tie to even, down", 1.0f + 0x1p-8f, 0x3f80, 0x3c04, 0x38},
      {"bf16 tie to even, up", 1.0f + 0x3p-8f, 0x3f82, 0x3c0c, 0x38},
      {"f16 tie to even, down", 1.0f + 0x1p-11f, 0x3f80, 0x3c00, 0x38},
      {"f16 tie to even, up", 1.0f + 0x3p-11f, 0x3f80, 0x3c02, 0x38},
      {"f16 largest", 65504.0f, 0x4780, 0x7bff, 0x7e},
      {"f16 below the overflow tie", 65519.0f, 0x4780, 0x7bff, 0x7e},
      {"f16 overflow tie -> inf", 65520.0f, 0x4780, 0x7c00, 0x7e},
      {"f16 smallest subnormal", 0x1p-24f, 0x3380, 0x0001, 0x00},
      {"f16 half the smallest: tie to 0", 0x1p-25f, 0x3300, 0x0000, 0x00},
      {"f16 1.5 x smallest: tie to 2", 0x3p-25f, 0x33c0, 0x0002, 0x00},
      {"f16 smallest normal", 0x1p-14f, 0x3880, 0x0400, 0x00},
      {"e4m3 largest", 448.0f, 0x43e0, 0x5f00, 0x7e},
      {"e4m3 saturates 464", 464.0f, 0x43e8, 0x5f40, 0x7e},
      {"e4m3 saturates -1e6", -1e6f, 0xc974, 0xfc00, 0xfe},
      {"e4m3 smallest subnormal", 0x1p-9f, 0x3b00, 0x1800, 0x01},
      {"e4m3 half the smallest: tie to 0", 0x1p-10f, 0x3a80, 0x1400, 0x00},
      {"e4m3 1.5 x smallest: tie to 2", 0x3p-10f, 0x3b40, 0x1a00, 0x02},
      {"e4m3 smallest normal", 0x1p-6f, 0x3c80, 0x2400, 0x08},
      {"bf16 smallest subnormal", 0x1p-133f, 0x0001, 0x0000, 0x00},
      {"f32 smallest subnormal", 0x1p-149f, 0x0000, 0x0000, 0x00},
      {"f32 largest", 0x1.fffffep127f, 0x7f80, 0x7c00, 0x7e},
      {"+inf", INFINITY, 0x7f80, 0x7c00, 0x7e},
      {"-inf", -INFINITY, 0xff80, 0xfc00, 0xfe},
      {"NaN", NAN, 0x7fc0, 0x7e00, 0x7f},
      {"-NaN", -NAN, 0xffc0, 0xfe00, 0xff},
      {"signaling NaN", 0.0f, 0x7fc0, 0x7e00, 0x7f},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    const named_case *c = &cases[i];
    float x = i == n - 1 ? f32_of(0x7f800001u) : c->x;
    cr_assert_eq(rsi_f32_to_bf16(x), c->bf16, "%s: bf16 %04x, want %04x",
                 c->what, rsi_f32_to_bf16(x), c->bf16);
    cr_assert_eq(rsi_f32_to_f16(x), c->f16, "%s: f16 %04x, want %04x", c->what,
                 rsi_f32_to_f16(x), c->f16);
    cr_assert_eq(rsi_f32_to_e4m3_sat(x), c->e4m3, "%s: e4m3 %02x, want %02x",
                 c->what, rsi_f32_to_e4m3_sat(x), c->e4m3);
  }
  /* a signaling NaN widens quiet */
  cr_assert_eq(rsi_f32_bits(rsi_bf16_to_f32(0x7f81)), 0x7fc10000u);
  cr_assert_eq(rsi_f32_bits(rsi_f16_to_f32(0x7c01)), 0x7fc02000u);
  cr_assert_eq(rsi_f32_bits(rsi_f16_to_f32(0x0001)), 0x33800000u);
  cr_assert_eq(rsi_f32_bits(rsi_f16_to_f32(0x8000)), 0x80000000u);
}

/* ---- block scales ------------------------------------------------------ */

/* The smallest 2^k >= amax / 448 (k >= -127), by stepping exactly. */
static double ref_ue8m0(double amax) {
  if (amax == 0) return 1;
  if (isnan(amax) || isinf(amax)) return amax;
  int e;
  frexp(amax, &e);
  int k = e - 10;
  while (ldexp(448.0, k) < amax) k++;
  return ldexp(1.0, k < -127 ? -127 : k);
}

static void check_scales(float amax) {
  float u = rsi_e4m3_scale_ue8m0(amax);
  cr_assert(same_value(u, ref_ue8m0(amax)), "ue8m0 scale of %a: %a, want %a",
            (double)amax, (double)u, ref_ue8m0(amax));
  float p = rsi_e4m3_scale(amax);
  float want = amax / 448.0f;
  if (amax == 0) want = 1;
  else if (want == 0) want = 0x1p-149f;
  cr_assert(same_value(p, want), "scale of %a: %a, want %a", (double)amax,
            (double)p, (double)want);
  if (isnan(amax)) {
    cr_assert_eq(rsi_f32_bits(p), 0x7fc00000u);
    cr_assert_eq(rsi_f32_bits(u), 0x7fc00000u);
  }
}

Test(convert_scale, both_rules) {
  cr_assert_eq(rsi_e4m3_scale(0.0f), 1.0f);
  cr_assert_eq(rsi_e4m3_scale_ue8m0(0.0f), 1.0f);
  cr_assert_eq(rsi_e4m3_scale(448.0f), 1.0f);
  cr_assert_eq(rsi_e4m3_scale_ue8m0(448.0f), 1.0f);
  cr_assert_eq(rsi_e4m3_scale_ue8m0(nextafterf(448.0f, 1e9f)), 2.0f);
  cr_assert_eq(rsi_e4m3_scale_ue8m0(1.0f), 0x1p-8f);
  cr_assert_eq(rsi_e4m3_scale_ue8m0(0x1p-149f), 0x1p-127f);
  cr_assert_eq(rsi_e4m3_scale(0x1p-149f), 0x1p-149f);
  cr_assert(isinf(rsi_e4m3_scale(INFINITY)));
  cr_assert(isinf(rsi_e4m3_scale_ue8m0(INFINITY)));
  /* every boundary 448 * 2^k and its neighbours, both rules */
  for (int k = -160; k <= 120; k++) {
    float b = ldexpf(448.0f, k);
    if (b == 0 || isinf(b)) continue;
    check_scales(b);
    check_scales(nextafterf(b, 0));
    check_scales(nextafterf(b, INFINITY));
  }
  uint64_t s = test_seed();
  for (int i = 0; i < 1000000; i++) {
    uint32_t bits = (uint32_t)rnd(&s) & 0x7fffffffu;
    check_scales(f32_of(bits));
  }
  check_scales(NAN);
  check_scales(f32_of(0x7f800001u));
}

/* x * 2^-k gives x / 2^k bit for bit: what rsi_convert_quantize_e4m3 uses
 * for a power-of-two scale. Every bf16 pattern, scales over the range. */
Test(convert_scale, reciprocal_of_powers_of_two) {
  static uint16_t src[65536];
  static uint8_t dst[65536];
  for (uint32_t h = 0; h < 65536; h++) src[h] = (uint16_t)h;
  const int ks[] = {-127, -126, -100, -20, -8, -1, 0, 1, 7, 20, 100, 120, 127};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    float scale = ldexpf(1.0f, ks[i]);
    rsi_err err = {0};
    cr_assert_eq(rsi_convert_quantize_e4m3(dst, 0, RS_DTYPE_BF16, src, 0, 1,
                                           65536, scale, &err),
                 RS_OK);
    for (uint32_t h = 0; h < 65536; h++) {
      uint8_t want = rsi_e4m3_quantize(rsi_bf16_to_f32((uint16_t)h), scale);
      cr_assert_eq(dst[h], want, "bf16 %04x / 2^%d: %02x, want %02x", h,
                   ks[i], dst[h], want);
    }
  }
}

/* ---- strided rows ------------------------------------------------------ */

static const rs_dtype FLOATS[] = {RS_DTYPE_F32, RS_DTYPE_BF16, RS_DTYPE_F16};

/* Random bits, a tenth of them special (NaN, inf, zeros, subnormals). */
static void fill_random(void *p, rs_dtype t, int64_t n, uint64_t *s) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd(s);
    if (t == RS_DTYPE_F32) {
      uint32_t b = (uint32_t)r;
      if (r % 10 == 0) b = (uint32_t[]){0x7fc00000u, 0xff800000u, 0x80000000u,
                                        0x00000003u, 0x7f800001u}[(r >> 40) % 5];
      else if (r & 2) b = (b & 0x81ffffffu) | 0x3c000000u; /* near 1 */
      memcpy((char *)p + 4 * i, &b, 4);
    } else {
      uint16_t b = (uint16_t)r;
      memcpy((char *)p + 2 * i, &b, 2);
    }
  }
}

static float widen(rs_dtype t, const void *p, int64_t i) {
  uint16_t h;
  float f;
  if (t == RS_DTYPE_F32) {
    memcpy(&f, (const char *)p + 4 * i, 4);
    return f;
  }
  memcpy(&h, (const char *)p + 2 * i, 2);
  return t == RS_DTYPE_BF16 ? rsi_bf16_to_f32(h) : rsi_f16_to_f32(h);
}

/* One element of dst dtype from f32, as bits. */
static uint32_t narrow_to(rs_dtype t, float f) {
  if (t == RS_DTYPE_F32) return rsi_f32_bits(f);
  return t == RS_DTYPE_BF16 ? rsi_f32_to_bf16(f) : rsi_f32_to_f16(f);
}

static uint32_t load_bits(rs_dtype t, const void *p, int64_t i) {
  if (t == RS_DTYPE_F32) {
    uint32_t b;
    memcpy(&b, (const char *)p + 4 * i, 4);
    return b;
  }
  uint16_t h;
  memcpy(&h, (const char *)p + 2 * i, 2);
  return h;
}

Test(convert_rows, casts_every_pair_strided) {
  uint64_t s = test_seed();
  for (int trial = 0; trial < 300; trial++) {
    rs_dtype st = FLOATS[trial % 3], dt = FLOATS[(trial / 3) % 3];
    int64_t rows = 1 + (int64_t)(rnd(&s) % 7), cols = (int64_t)(rnd(&s) % 300);
    bool dense = trial % 5 == 0;
    int64_t sstride = dense ? cols : cols + (int64_t)(rnd(&s) % 9);
    int64_t dstride = dense ? cols : cols + (int64_t)(rnd(&s) % 9);
    size_t ses = rsi_dtype_size(st), des = rsi_dtype_size(dt);
    int64_t sn = rows * sstride, dn = rows * dstride;
    /* a shard may start at any byte: either end at an odd address too */
    int64_t sskew = (trial / 9) % 2, dskew = (trial / 18) % 2;
    char *sbuf = malloc((size_t)sn * ses + 2), *dbuf = malloc((size_t)dn * des + 2);
    char *src = sbuf + sskew, *dst = dbuf + dskew;
    fill_random(src, st, sn, &s);
    memset(dst, 0xA5, (size_t)dn * des + 1);
    rsi_err err = {0};
    cr_assert_eq(rsi_convert_cast_rows(dt, dst, dstride, st, src, sstride, rows,
                                       cols, &err),
                 RS_OK, "%s", err.msg);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < dstride; c++) {
        int64_t i = r * dstride + c;
        uint32_t got = load_bits(dt, dst, i);
        if (c >= cols) { /* gaps untouched */
          cr_assert_eq(got, des == 4 ? 0xA5A5A5A5u : 0xA5A5u);
          continue;
        }
        uint32_t want = st == dt ? load_bits(st, src, r * sstride + c)
                                 : narrow_to(dt, widen(st, src, r * sstride + c));
        cr_assert_eq(got, want, "%s -> %s, %lldx%lld, [%lld][%lld]: %x, want %x",
                     rsi_dtype_name(st), rsi_dtype_name(dt), (long long)rows,
                     (long long)cols, (long long)r, (long long)c, got, want);
      }
    free(sbuf);
    free(dbuf);
  }
}

Test(convert_rows, cast_pairs) {
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      cr_assert_not_null(rsi_convert_cast_fn(FLOATS[a], FLOATS[b]));
  cr_assert_null(rsi_convert_cast_fn(RS_DTYPE_F8_E4M3, RS_DTYPE_F32));
  cr_assert_null(rsi_convert_cast_fn(RS_DTYPE_F32, RS_DTYPE_F64));
  cr_assert_null(rsi_convert_cast_fn(RS_DTYPE_I32, RS_DTYPE_F32));
  rsi_err err = {0};
  float f = 1;
  cr_assert_eq(rsi_convert_cast_rows(RS_DTYPE_F64, &f, 1, RS_DTYPE_F32, &f, 1,
                                     1, 1, &err),
               RS_ERR_UNSUPPORTED);
  cr_assert(strstr(err.msg, "f32") && strstr(err.msg, "f64"), "%s", err.msg);
  cr_assert_eq(rsi_convert_cast_rows(RS_DTYPE_F32, &f, 1, RS_DTYPE_BF16, &f, 1,
                                     -1, 1, &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rsi_convert_cast_rows(RS_DTYPE_F32, NULL, 0, RS_DTYPE_BF16, NULL,
                                     0, 0, 5, &err),
               RS_OK);
}

Test(convert_rows, amax) {
  uint64_t s = test_seed();
  for (int trial = 0; trial < 300; trial++) {
    rs_dtype t = FLOATS[trial % 3];
    int64_t rows = (int64_t)(rnd(&s) % 6), cols = (int64_t)(rnd(&s) % 200);
    int64_t stride = cols + (int64_t)(rnd(&s) % 5);
    size_t es = rsi_dtype_size(t);
    char *src = malloc((size_t)(rows * stride) * es + 1);
    fill_random(src, t, rows * stride, &s);
    /* NaN only in the gaps (outside the region) must not count */
    bool nan = false;
    double want = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        float v = widen(t, src, r * stride + c);
        if (isnan(v)) nan = true;
        else if (fabsf(v) > want) want = fabsf(v);
      }
    float got = -1;
    rsi_err err = {0};
    cr_assert_eq(rsi_convert_amax(t, src, stride, rows, cols, &got, &err), RS_OK);
    if (nan)
      cr_assert_eq(rsi_f32_bits(got), 0x7fc00000u, "amax %a: want quiet NaN",
                   (double)got);
    else
      cr_assert(same_value(got, want), "%s amax %a, want %a", rsi_dtype_name(t),
                (double)got, want);
    free(src);
  }
  const uint16_t negzero[3] = {0x8000, 0x8000, 0x8000};
  float got = -1;
  rsi_err err = {0};
  cr_assert_eq(rsi_convert_amax(RS_DTYPE_BF16, negzero, 3, 1, 3, &got, &err), RS_OK);
  cr_assert(got == 0 && !signbit(got), "amax of -0s: %a", (double)got);
  const uint16_t ninf[2] = {0xfc00, 0x3c00};
  cr_assert_eq(rsi_convert_amax(RS_DTYPE_F16, ninf, 2, 1, 2, &got, &err), RS_OK);
  cr_assert(isinf(got) && got > 0);
  cr_assert_eq(rsi_convert_amax(RS_DTYPE_F8_E4M3, ninf, 2, 1, 2, &got, &err),
               RS_ERR_UNSUPPORTED);
  cr_assert_eq(rsi_convert_amax(RS_DTYPE_F16, ninf, 2, 1, -2, &got, &err),
               RS_ERR_INVALID_ARGUMENT);
}

Test(convert_rows, quantize_strided) {
  uint64_t s = test_seed();
  const float scales[] = {1.0f, 0.25f, 0x1p-127f, 3.0f / 448.0f, 1e-3f, 7.5f,
                          0x1p-149f, NAN, INFINITY};
  for (int trial = 0; trial < 270; trial++) {
    rs_dtype t = FLOATS[trial % 3];
    float scale = scales[(trial / 3) % 9];
    int64_t rows = 1 + (int64_t)(rnd(&s) % 5), cols = (int64_t)(rnd(&s) % 300);
    int64_t ss = cols + (int64_t)(rnd(&s) % 4), ds = cols + (int64_t)(rnd(&s) % 4);
    size_t es = rsi_dtype_size(t);
    char *src = malloc((size_t)(rows * ss) * es + 1);
    uint8_t *dst = malloc((size_t)(rows * ds) + 1);
    fill_random(src, t, rows * ss, &s);
    memset(dst, 0xA5, (size_t)(rows * ds) + 1);
    rsi_err err = {0};
    cr_assert_eq(rsi_convert_quantize_e4m3(dst, ds, t, src, ss, rows, cols,
                                           scale, &err),
                 RS_OK);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < ds; c++) {
        uint8_t got = dst[r * ds + c];
        if (c >= cols) {
          cr_assert_eq(got, 0xA5);
          continue;
        }
        float x = widen(t, src, r * ss + c);
        uint8_t want = rsi_f32_to_e4m3_sat(x / scale);
        /* any NaN: 0x7f | sign; which sign x / NaN takes is the FPU's */
        if ((want & 0x7f) == 0x7f) got |= 0x80, want |= 0x80;
        cr_assert_eq(got, want, "%s / %a: [%lld][%lld] %02x, want %02x",
                     rsi_dtype_name(t), (double)scale, (long long)r,
                     (long long)c, got, want);
      }
    free(src);
    free(dst);
  }
}

/* ---- whole tensors ----------------------------------------------------- */

/* Checks rsi_quantize_blocks of a dense tensor against a loop over its
 * elements that finds each element's block by division. */
static void check_blocks(rs_dtype t, int ndim, const int64_t *shape,
                         int64_t b0, int64_t b1, bool ue8m0, uint64_t *s) {
  int64_t n = th_volume(ndim, shape);
  int64_t rows = ndim >= 2 ? shape[ndim - 2] : 1;
  int64_t cols = ndim >= 1 ? shape[ndim - 1] : 1;
  int64_t mats = rows * cols != 0 ? n / (rows * cols) : 0;
  int64_t br = (rows + b0 - 1) / b0, bc = (cols + b1 - 1) / b1;
  int64_t nscales = mats * br * bc;
  size_t es = rsi_dtype_size(t);
  char *src = malloc((size_t)n * es + 1);
  uint8_t *dst = malloc((size_t)n + 1);
  float *scales = malloc(sizeof(float) * (size_t)nscales + 1);
  float *amax = calloc((size_t)nscales + 1, sizeof(float));
  /* weights of a few magnitudes; now and then a NaN or an infinity */
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd(s);
    float v = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) *
              ldexpf(1.0f, (int)((r >> 8) % 24) - 12);
    if (r % 997 == 0) v = NAN;
    if (r % 991 == 0) v = -INFINITY;
    uint32_t b = narrow_to(t, v);
    memcpy(src + (size_t)i * es, &b, es); /* little-endian */
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t m = i / (rows * cols), r = i / cols % rows, c = i % cols;
    int64_t k = (m * br + r / b0) * bc + c / b1;
    float a = fabsf(widen(t, src, i));
    if (isnan(a) || isnan(amax[k])) amax[k] = NAN;
    else if (a > amax[k]) amax[k] = a;
  }
  rsi_err err = {0};
  cr_assert_eq(rsi_quantize_blocks(t, ndim, shape, src, dst, scales, b0, b1,
                                   ue8m0, &err),
               RS_OK, "%s", err.msg);
  for (int64_t k = 0; k < nscales; k++) {
    float want = ue8m0 ? rsi_e4m3_scale_ue8m0(amax[k]) : rsi_e4m3_scale(amax[k]);
    cr_assert_eq(rsi_f32_bits(scales[k]), rsi_f32_bits(want),
                 "scale %lld: %a, want %a (amax %a)", (long long)k,
                 (double)scales[k], (double)want, (double)amax[k]);
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t m = i / (rows * cols), r = i / cols % rows, c = i % cols;
    float sc = scales[(m * br + r / b0) * bc + c / b1];
    float x = widen(t, src, i);
    uint8_t got = dst[i], want = rsi_e4m3_quantize(x, sc);
    if ((want & 0x7f) == 0x7f) got |= 0x80, want |= 0x80;
    cr_assert_eq(got, want, "%s element %lld: %02x, want %02x",
                 rsi_dtype_name(t), (long long)i, got, want);
    /* dequantized, a finite element is within half a step of e4m3 */
    if (isfinite(x) && isfinite(sc) && fabsf(x) / sc >= 0x1p-6f) {
      float back = rsi_e4m3_to_f32(dst[i]) * sc;
      cr_assert(fabsf(back - x) <= fabsf(x) * 0x1p-4f * 1.0001f,
                "element %lld: %a back as %a", (long long)i, (double)x,
                (double)back);
    }
  }
  free(src);
  free(dst);
  free(scales);
  free(amax);
}

Test(convert_blocks, against_element_loop) {
  uint64_t s = test_seed();
  const int64_t fixed[][4] = {{300, 260}, {128, 128}, {129, 127}, {1, 1000},
                              {7168, 3}, {2, 130, 129}};
  for (int ue = 0; ue < 2; ue++)
    for (int t = 0; t < 3; t++) {
      check_blocks(FLOATS[t], 2, fixed[0], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 2, fixed[1], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 2, fixed[2], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 1, fixed[3], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 2, fixed[4], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 3, fixed[5], 128, 128, ue, &s);
      check_blocks(FLOATS[t], 0, NULL, 128, 128, ue, &s);
    }
  for (int trial = 0; trial < 200; trial++) {
    int ndim = (int)(rnd(&s) % 5);
    int64_t shape[4];
    for (int d = 0; d < ndim; d++) shape[d] = (int64_t)(rnd(&s) % (d >= ndim - 2 ? 70 : 4));
    int64_t b0 = 1 + (int64_t)(rnd(&s) % 20), b1 = 1 + (int64_t)(rnd(&s) % 40);
    check_blocks(FLOATS[trial % 3], ndim, shape, b0, b1, trial & 1, &s);
  }
}

Test(convert_blocks, bad_arguments) {
  rsi_err err = {0};
  uint16_t src[4] = {0};
  uint8_t dst[4];
  float sc[4];
  const int64_t shape[2] = {2, 2};
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_F64, 2, shape, src, dst, sc, 1, 1,
                                   false, &err),
               RS_ERR_UNSUPPORTED);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, RS_MAX_DIMS + 1, shape, src,
                                   dst, sc, 1, 1, false, &err),
               RS_ERR_TOO_MANY_DIMS);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, -1, shape, src, dst, sc, 1,
                                   1, false, &err),
               RS_ERR_BAD_SHAPE);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, I64(2, -2), src, dst, sc,
                                   1, 1, false, &err),
               RS_ERR_BAD_SHAPE);
  cr_assert(strstr(err.msg, "shape[1] = -2"), "%s", err.msg);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, src, dst, sc, 0, 1,
                                   false, &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, I64(INT64_MAX, 2), src,
                                   dst, sc, 1, 1, false, &err),
               RS_ERR_OVERFLOW);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, NULL, src, dst, sc, 1, 1,
                                   false, &err),
               RS_ERR_NULL_POINTER);
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, src, dst, NULL, 1,
                                   1, false, &err),
               RS_ERR_NULL_POINTER);
  cr_assert(strstr(err.msg, "scales"), "%s", err.msg);
  /* blocks far larger than the tensor: one block */
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, src, dst, sc,
                                   INT64_MAX, INT64_MAX, true, &err),
               RS_OK);
  /* an empty tensor needs no buffers */
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, I64(0, 5), NULL, NULL,
                                   NULL, 128, 128, true, &err),
               RS_OK);
  /* NULL err: the thread's record */
  cr_assert_eq(rsi_quantize_blocks(RS_DTYPE_BF16, 2, shape, src, dst, sc, 0, 1,
                                   false, NULL),
               RS_ERR_INVALID_ARGUMENT);
}

/* ---- row kernels and bands --------------------------------------------- */

Test(convert_row_kernels, dtypes) {
  const rsi_e4m3_rows *k = rsi_convert_e4m3_rows(RS_DTYPE_F32);
  cr_assert(k && k->esize == 4);
  k = rsi_convert_e4m3_rows(RS_DTYPE_BF16);
  cr_assert(k && k->esize == 2);
  k = rsi_convert_e4m3_rows(RS_DTYPE_F16);
  cr_assert(k && k->esize == 2);
  cr_assert_null(rsi_convert_e4m3_rows(RS_DTYPE_F64));
  cr_assert_null(rsi_convert_e4m3_rows(RS_DTYPE_F8_E4M3));
  /* a band's blocks: 1 to the most, never a wrapped product */
  cr_assert_eq(rsi_e4m3_band_blocks(2, 128, 128), RSI_E4M3_BAND_BLOCKS / 2);
  cr_assert_eq(rsi_e4m3_band_blocks(2, 1, 1), RSI_E4M3_BAND_BLOCKS);
  cr_assert_eq(rsi_e4m3_band_blocks(4, 4096, 4096), 1);
  cr_assert_eq(rsi_e4m3_band_blocks(2, INT64_MAX, INT64_MAX), 1);
}

/* The bit pattern of |x| as the amax kernels keep it. */
static uint32_t key_of(rs_dtype t, const void *p, int64_t i) {
  return load_bits(t, p, i) & (t == RS_DTYPE_F32 ? 0x7fffffffu : 0x7fffu);
}

/* Rows cut into blocks from any column of a first block (element 0 one
 * element in, or at an odd byte address, as a shard may start), each
 * block with its own scale, special ones among them; keys folded into
 * keys already there. */
Test(convert_row_kernels, blocks_of_a_row) {
  uint64_t s = test_seed();
  const uint32_t special[] = {0x7fc00000u, 0x7f800000u, 0, 0xbf800000u, 1,
                              0x00400000u, 0x3f800000u, 0x3b124925u};
  for (int trial = 0; trial < 600; trial++) {
    rs_dtype t = FLOATS[trial % 3];
    const rsi_e4m3_rows *k = rsi_convert_e4m3_rows(t);
    int64_t cols = (int64_t)(rnd(&s) % 400), b1 = 1 + (int64_t)(rnd(&s) % 70);
    int64_t first = (int64_t)(rnd(&s) % (uint64_t)b1);
    int64_t nb = (first + cols + b1 - 1) / b1 + 1;
    size_t es = rsi_dtype_size(t);
    int64_t skew = (int64_t[]){0, (int64_t)es, 1}[(trial / 3) % 3]; /* bytes */
    char *buf = malloc((size_t)(cols + 1) * es + 1);
    fill_random(buf, t, cols + 1, &s);
    const char *src = buf + skew;
    uint8_t *dst = malloc((size_t)cols + 1);
    float *scales = malloc(sizeof(float) * (size_t)nb);
    uint32_t *keys = malloc(sizeof(uint32_t) * (size_t)nb);
    uint32_t *want = malloc(sizeof(uint32_t) * (size_t)nb);
    for (int64_t j = 0; j < nb; j++) {
      uint64_t r = rnd(&s);
      uint32_t b = r % 5 == 0 ? special[(r >> 8) % 8]
                              : 0x3a000000u + (uint32_t)(r >> 40) % 0x4000000u;
      if (r % 7 == 0) b &= 0xff800000u; /* a power of two */
      scales[j] = f32_of(b);
      keys[j] = want[j] = (uint32_t)(rnd(&s) % 3) * 0x3c00u;
    }
    for (int64_t c = 0; c < cols; c++) {
      uint32_t key = key_of(t, src, c);
      int64_t j = (first + c) / b1;
      want[j] = key > want[j] ? key : want[j];
    }
    k->amax(src, cols, b1, first, keys);
    for (int64_t j = 0; j < nb; j++)
      cr_assert_eq(keys[j], want[j], "%s amax, block %lld: %x, want %x",
                   rsi_dtype_name(t), (long long)j, keys[j], want[j]);
    memset(dst, 0xA5, (size_t)cols + 1);
    k->quantize(dst, src, cols, b1, first, scales);
    cr_assert_eq(dst[cols], 0xA5, "wrote past the row");
    for (int64_t c = 0; c < cols; c++) {
      float sc = scales[(first + c) / b1];
      uint8_t got = dst[c], w = rsi_f32_to_e4m3_sat(widen(t, src, c) / sc);
      if ((w & 0x7f) == 0x7f) got |= 0x80, w |= 0x80; /* the FPU's NaN sign */
      cr_assert_eq(got, w, "%s / %a, column %lld of %lld (b1 %lld, first "
                   "%lld): %02x, want %02x", rsi_dtype_name(t), (double)sc,
                   (long long)c, (long long)cols, (long long)b1,
                   (long long)first, got, w);
    }
    /* the value a key stands for */
    for (int64_t j = 0; j < nb; j++) {
      float v = k->key_amax(want[j]);
      float x = widen(t, &want[j], 0);
      if (t != RS_DTYPE_F32) {
        uint16_t h = (uint16_t)want[j];
        x = t == RS_DTYPE_BF16 ? rsi_bf16_to_f32(h) : rsi_f16_to_f32(h);
      }
      cr_assert_eq(rsi_f32_bits(v),
                   x != x ? 0x7fc00000u : rsi_f32_bits(x), "key %x", want[j]);
    }
    free(buf);
    free(dst);
    free(scales);
    free(keys);
    free(want);
  }
}

/* Every bf16 pattern, one block, scales that are not powers of two (the
 * kernel's division path) and special ones, from an even and an odd
 * element. */
Test(convert_row_kernels, bf16_every_pattern_any_scale) {
  static uint16_t src[65537];
  static uint8_t dst[65536];
  for (uint32_t h = 0; h < 65537; h++) src[h] = (uint16_t)(h * 40503u);
  uint64_t s = test_seed();
  const rsi_e4m3_rows *k = rsi_convert_e4m3_rows(RS_DTYPE_BF16);
  for (int i = 0; i < 64; i++) {
    uint32_t b = i < 8 ? (uint32_t[]){0x3b124925u, 0x00000003u, 0x7f7fffffu,
                                      0x3f7fffffu, 0x7fc00000u, 0x7f800000u,
                                      0x80000000u, 0xc0400000u}[i]
                       : (uint32_t)rnd(&s) & 0x7fffffffu;
    float scale = f32_of(b);
    for (int skew = 0; skew < 2; skew++) {
      k->quantize(dst, src + skew, 65536, 65536, 0, &scale);
      for (uint32_t h = 0; h < 65536; h++) {
        uint8_t got = dst[h];
        uint8_t want = rsi_e4m3_quantize(rsi_bf16_to_f32(src[h + skew]), scale);
        if ((want & 0x7f) == 0x7f) got |= 0x80, want |= 0x80;
        cr_assert_eq(got, want, "bf16 %04x / %a: %02x, want %02x",
                     src[h + skew], (double)scale, got, want);
      }
    }
  }
}

/* Bands as a caller might cut a tensor: per block row, runs of blocks;
 * per run, its first rows from a column inside its first block (the
 * band that finds the scales), then the columns before that, then the
 * other rows (bands that reuse them). */
typedef struct band_plan {
  rsi_e4m3_band *bands;
  int n, next;
} band_plan;

static bool next_planned(void *state, rsi_e4m3_band *band) {
  band_plan *p = state;
  if (p->next == p->n) return false;
  *band = p->bands[p->next++];
  return true;
}

Test(convert_bands, reused_scales_and_part_rows) {
  uint64_t s = test_seed();
  for (int trial = 0; trial < 60; trial++) {
    rs_dtype t = FLOATS[trial % 3];
    const rsi_e4m3_rows *k = rsi_convert_e4m3_rows(t);
    bool ue8m0 = trial & 1;
    int64_t rows = 1 + (int64_t)(rnd(&s) % 40);
    int64_t cols = 1 + (int64_t)(rnd(&s) % (trial % 4 ? 300 : 1300));
    int64_t b0 = 1 + (int64_t)(rnd(&s) % 9), b1 = 1 + (int64_t)(rnd(&s) % 33);
    int64_t brows = (rows + b0 - 1) / b0, bcols = (cols + b1 - 1) / b1;
    size_t es = rsi_dtype_size(t);
    char *src = malloc((size_t)(rows * cols) * es);
    fill_random(src, t, rows * cols, &s);
    uint8_t *ref_q = malloc((size_t)(rows * cols)), *dst = malloc((size_t)(rows * cols));
    float *ref_s = malloc(sizeof(float) * (size_t)(brows * bcols));
    float *scales = malloc(sizeof(float) * (size_t)(brows * bcols));
    rsi_err err = {0};
    cr_assert_eq(rsi_quantize_blocks(t, 2, I64(rows, cols), src, ref_q, ref_s,
                                     b0, b1, ue8m0, &err),
                 RS_OK);
    band_plan p = {malloc(sizeof(rsi_e4m3_band) * (size_t)(brows * bcols * 3)),
                   0, 0};
    for (int64_t br = 0; br < brows; br++) {
      int64_t r0 = br * b0, nr = rows - r0 < b0 ? rows - r0 : b0;
      int64_t h = 1 + (int64_t)(rnd(&s) % (uint64_t)nr); /* rows first */
      for (int64_t bc = 0; bc < bcols;) {
        int64_t n = 1 + (int64_t)(rnd(&s) % 4);
        if (n > bcols - bc) n = bcols - bc;
        int64_t c0 = bc * b1, w = cols - c0 < n * b1 ? cols - c0 : n * b1;
        int64_t first = (int64_t)(rnd(&s) % (uint64_t)(w < b1 ? w : b1));
        const char *at = src + (r0 * cols + c0) * (int64_t)es;
        rsi_e4m3_band band = {at, nr, w, false,
                              scales + br * bcols + bc,
                              at + first * (int64_t)es, dst + r0 * cols + c0 + first,
                              h, w - first, first, cols * (int64_t)es, cols};
        p.bands[p.n++] = band;
        band.have_scales = true;
        if (first > 0) { /* the columns before, from the block's start */
          band.src = at;
          band.dst = dst + r0 * cols + c0;
          band.cols = first;
          band.first = 0;
          p.bands[p.n++] = band;
        }
        if (h < nr) { /* the other rows, whole */
          band.src = at + h * cols * (int64_t)es;
          band.dst = dst + (r0 + h) * cols + c0;
          band.rows = nr - h;
          band.cols = w;
          band.first = 0;
          p.bands[p.n++] = band;
        }
        bc += n;
      }
    }
    memset(dst, 0xA5, (size_t)(rows * cols));
    rsi_e4m3_run_bands(k, b1, ue8m0, next_planned, &p);
    cr_assert_eq(p.next, p.n, "bands left");
    cr_assert(!memcmp(scales, ref_s, sizeof(float) * (size_t)(brows * bcols)),
              "%s: scales differ from rsi_quantize_blocks'", rsi_dtype_name(t));
    for (int64_t i = 0; i < rows * cols; i++)
      cr_assert_eq(dst[i], ref_q[i], "%s %lld x %lld in %lld x %lld: element "
                   "%lld: %02x, want %02x", rsi_dtype_name(t), (long long)rows,
                   (long long)cols, (long long)b0, (long long)b1, (long long)i,
                   dst[i], ref_q[i]);
    free(src);
    free(ref_q);
    free(dst);
    free(ref_s);
    free(scales);
    free(p.bands);
  }
}

/* Rows wider than a band takes (several bands a block row), and longer
 * than a run between two slices of prefetching, against the per-element
 * loop. */
Test(convert_blocks, wide_rows) {
  uint64_t s = test_seed();
  for (int t = 0; t < 3; t++) {
    check_blocks(FLOATS[t], 2, I64(9, 5 * RSI_E4M3_BAND_BLOCKS + 77), 4, 5,
                 t == 1, &s);
    check_blocks(FLOATS[t], 2, I64(9, 1500), 4, 16, t != 1, &s);
    check_blocks(FLOATS[t], 1, I64(3 * RSI_E4M3_BAND_BLOCKS + 5), 1, 1, t != 1,
                 &s);
  }
}

/* ---- bit for bit against ml_dtypes ------------------------------------- */

#ifndef TH_PYTHON
#define TH_PYTHON "python3"
#endif

enum { FLAG_BLOCKS = 1, FLAG_UE8M0 = 2, FLAG_SCALE1 = 4, FLAG_DECODE = 8 };
enum { HEAD_BYTES = 32 + 4 * 4 + 4 * 8 + 5 * 8 };

typedef struct ref_record {
  char name[33];
  uint32_t src_dtype, dst_dtype, flags, ndim;
  int64_t shape[4], b0, b1, nsrc, ndst, nscales;
  const unsigned char *src, *dst, *scales;
} ref_record;

static uint32_t rd_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static int64_t rd_i64(const unsigned char *p) {
  return (int64_t)((uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32);
}

/* Parses the record at *at (of `size` bytes); false past the end. */
static bool next_record(const unsigned char *buf, size_t size, size_t *at,
                        ref_record *r) {
  if (*at + HEAD_BYTES > size) return false;
  const unsigned char *p = buf + *at;
  memcpy(r->name, p, 32);
  r->name[32] = '\0';
  p += 32;
  r->src_dtype = rd_u32(p);
  r->dst_dtype = rd_u32(p + 4);
  r->flags = rd_u32(p + 8);
  r->ndim = rd_u32(p + 12);
  p += 16;
  for (int d = 0; d < 4; d++) r->shape[d] = rd_i64(p + 8 * d);
  p += 32;
  r->b0 = rd_i64(p);
  r->b1 = rd_i64(p + 8);
  r->nsrc = rd_i64(p + 16);
  r->ndst = rd_i64(p + 24);
  r->nscales = rd_i64(p + 32);
  size_t sb = (size_t)r->nsrc * rsi_dtype_size((rs_dtype)r->src_dtype);
  size_t db = (size_t)r->ndst * rsi_dtype_size((rs_dtype)r->dst_dtype);
  size_t total = HEAD_BYTES + sb + db + 4 * (size_t)r->nscales;
  cr_assert(r->ndim <= 4 && *at + total <= size, "record %s overruns the file",
            r->name);
  r->src = buf + *at + HEAD_BYTES;
  r->dst = r->src + sb;
  r->scales = r->dst + db;
  *at += total;
  return true;
}

/* Compares n elements of dtype t (as bits) against the reference; a NaN
 * matches any NaN. Returns the mismatch count, reporting the first few. */
static int64_t compare(const char *what, rs_dtype t, const void *got,
                       const void *want, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t g = 0, w = 0;
    size_t es = t == RS_DTYPE_F8_E4M3 ? 1 : rsi_dtype_size(t);
    memcpy(&g, (const char *)got + (size_t)i * es, es);
    memcpy(&w, (const char *)want + (size_t)i * es, es);
    if (g == w) continue;
    double gv, wv;
    if (t == RS_DTYPE_F8_E4M3) gv = ref_decode(&E4M3, g), wv = ref_decode(&E4M3, w);
    else if (t == RS_DTYPE_F16) gv = ref_decode(&F16, g), wv = ref_decode(&F16, w);
    else if (t == RS_DTYPE_BF16) gv = ref_decode(&BF16, g), wv = ref_decode(&BF16, w);
    else gv = f32_of(g), wv = f32_of(w);
    if (isnan(gv) && isnan(wv)) continue;
    if (bad++ < 5)
      cr_log_error("%s: element %lld: %x, ml_dtypes/numpy %x", what,
                   (long long)i, g, w);
  }
  return bad;
}

static int64_t check_record(const ref_record *r) {
  rs_dtype st = (rs_dtype)r->src_dtype, dt = (rs_dtype)r->dst_dtype;
  rsi_err err = {0};
  if (r->flags & FLAG_DECODE) {
    float *out = malloc(sizeof(float) * (size_t)r->nsrc + 1);
    for (int64_t i = 0; i < r->nsrc; i++) out[i] = rsi_e4m3_to_f32(r->src[i]);
    int64_t bad = compare(r->name, RS_DTYPE_F32, out, r->dst, r->nsrc);
    free(out);
    return bad;
  }
  /* the file packs records: the source, copied to an aligned buffer */
  size_t src_bytes = (size_t)r->nsrc * rsi_dtype_size(st);
  void *src = malloc(src_bytes + 1);
  memcpy(src, r->src, src_bytes);
  size_t out_bytes = (size_t)r->ndst * rsi_dtype_size(dt) + 1;
  void *out = malloc(out_bytes);
  float *scales = malloc(sizeof(float) * (size_t)r->nscales + 1);
  memset(out, 0xA5, out_bytes);
  rs_status st_ = RS_OK;
  if (r->flags & FLAG_BLOCKS)
    st_ = rsi_quantize_blocks(st, (int)r->ndim, r->shape, src, out, scales,
                              r->b0, r->b1, r->flags & FLAG_UE8M0, &err);
  else if (r->flags & FLAG_SCALE1)
    st_ = rsi_convert_quantize_e4m3(out, r->nsrc, st, src, r->nsrc, 1,
                                    r->nsrc, 1.0f, &err);
  else
    st_ = rsi_convert_cast_rows(dt, out, r->ndst, st, src, r->nsrc, 1,
                                r->nsrc, &err);
  cr_assert_eq(st_, RS_OK, "%s: %s", r->name, err.msg);
  int64_t bad = compare(r->name, dt, out, r->dst, r->ndst);
  if (r->nscales) {
    char what[64];
    snprintf(what, sizeof what, "%s scales", r->name);
    bad += compare(what, RS_DTYPE_F32, scales, r->scales, r->nscales);
  }
  free(src);
  free(out);
  free(scales);
  return bad;
}

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

Test(convert_ref, ml_dtypes_bit_for_bit, .timeout = 60) {
  char path[512], cmd[2048];
  snprintf(path, sizeof path, "%s/convert_ref.%ld.bin", TH_CONVERT_REF_DIR,
           (long)getpid());
  snprintf(cmd, sizeof cmd, "'%s' '%s' --out '%s'", TH_PYTHON,
           TH_CONVERT_REF_PY, path);
  int rc = system(cmd);
  cr_assert(rc == 0,
            "%s failed (exit status %d): the bit-exact test needs python3 "
            "with numpy and ml_dtypes (scripts/setup.sh installs them)",
            cmd, rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
  size_t size = 0;
  unsigned char *buf = read_file(path, &size);
  remove(path);
  cr_assert(size >= 12 && memcmp(buf, "RSCVREF1", 8) == 0, "bad file %s", path);
  uint32_t count = rd_u32(buf + 8), seen = 0;
  size_t at = 12;
  ref_record r;
  int64_t bad = 0;
  while (next_record(buf, size, &at, &r)) {
    bad += check_record(&r);
    seen++;
  }
  cr_assert_eq(seen, count, "%u of %u records read", seen, count);
  cr_assert_eq(at, size, "trailing bytes");
  cr_assert_eq(bad, 0, "%lld elements differ from ml_dtypes/numpy",
               (long long)bad);
  free(buf);
}
