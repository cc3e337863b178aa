#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reference conversions for test_convert (suite convert_ref), from an
implementation independent of libreshard: ml_dtypes (bf16, e4m3fn) and
numpy (f16), on inputs drawn with a fixed seed plus edge values.

Writes one binary file of records (little-endian):
  file   = b"RSCVREF1", u32 record count, records
  record = name (32 bytes, NUL-padded), u32 src dtype, u32 dst dtype
           (rs_dtype values), u32 flags (1: block-scaled e4m3, 2: UE8M0
           scales, 4: e4m3 with scale 1, 8: e4m3 decoded to f32), u32 ndim,
           i64 shape[4], i64 b0, i64 b1,
           i64 source count, i64 destination count, i64 scale count,
           then the source, destination and scale (f32) bytes.
A cast record is 1-D: destination[i] = cast(source[i]).

Block-scaled e4m3 follows core/copy/convert.h: per block amax = max |x| in f32
(NaN propagates), scale = amax / 448 in f32 (1 when amax is 0; 2^-149
when the quotient underflows) or, for UE8M0, the smallest 2^k >= amax /
448 (k >= -127), exactly; value = e4m3(clip(x / scale, -448, 448)).

Usage: convert_ref.py --out FILE
"""
import argparse
import math
import struct
import sys

try:
    import numpy as np
    import ml_dtypes
except ImportError as exc:  # fail loudly: the test must not pass silently
    sys.exit(
        f"convert_ref.py: {exc}; the bit-exact conversion test needs numpy and "
        f"ml_dtypes for {sys.executable} (scripts/setup.sh installs them)"
    )

F16, BF16, F32, F8_E4M3 = 9, 10, 11, 13
NP_OF = {F16: np.float16, BF16: ml_dtypes.bfloat16, F32: np.float32}
BITS_OF = {F16: np.uint16, BF16: np.uint16, F32: np.uint32}
E4M3 = ml_dtypes.float8_e4m3fn
SEED = 0x5EED_C0DE
FLAG_BLOCKS, FLAG_UE8M0, FLAG_SCALE1, FLAG_DECODE = 1, 2, 4, 8


def record(name, src_dtype, dst_dtype, flags, shape, b0, b1, src, dst, scales):
    ndim = len(shape)
    assert ndim <= 4
    head = struct.pack(
        "<32s4I4q5q",
        name.encode()[:31],
        src_dtype,
        dst_dtype,
        flags,
        ndim,
        *(list(shape) + [0] * (4 - ndim)),
        b0,
        b1,
        src.size,
        dst.size,
        scales.size,
    )
    return head + src.tobytes() + dst.tobytes() + scales.astype("<f4").tobytes()


def edge_f32():
    """Values at the edges of every format: zeros, subnormals, the largest
    finite values, ties, infinities, NaNs (both signs)."""
    v = [0.0, 1.0, 448.0, 464.0, 480.0, 65504.0, 65519.0, 65520.0, 65536.0,
         2.0**-6, 2.0**-9, 2.0**-10, 3 * 2.0**-10, 2.0**-14, 2.0**-24,
         2.0**-25, 3 * 2.0**-25, 2.0**-126, 2.0**-133, 2.0**-149,
         1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-11, 1 + 3 * 2.0**-11,
         3.4028234663852886e38, math.inf, math.nan]
    a = np.array(v + [-x for x in v], dtype=np.float32)
    bits = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FC00000, 0x00000001,
                     0x80000001, 0x007FFFFF, 0x7F7FFFFF, 0x3F808000, 0x3F818000,
                     0x3F807FFF, 0x3F808001], dtype=np.uint32)
    return np.concatenate([a, bits.view(np.float32)])


def random_f32(rng, n):
    """Random bit patterns (every exponent) and values near 1 and 448."""
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    near = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 300.0], n)).astype(
        np.float32)
    return np.concatenate([edge_f32(), bits.view(np.float32), near])


def cast_records(rng):
    out = []
    every16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f32 = random_f32(rng, 100_000)
    for src, bits in ((BF16, every16), (F16, every16), (F32, f32.view(np.uint32))):
        x = bits.view(NP_OF[src])
        for dst in (F16, BF16, F32):
            if dst == src:
                continue
            y = x.astype(NP_OF[dst])
            out.append(record(f"cast {src}->{dst}", src, dst, 0, [x.size], 1,
                              1, bits, y.view(BITS_OF[dst]), np.zeros(0)))
    # every e4m3 pattern decoded; f32 -> e4m3 saturating (scale 1)
    every8 = np.arange(256, dtype=np.uint8)
    out.append(record("decode e4m3", F8_E4M3, F32, FLAG_DECODE, [256], 1, 1,
                      every8, every8.view(E4M3).astype(np.float32)
                      .view(np.uint32), np.zeros(0)))
    with np.errstate(all="ignore"):
        sat = np.clip(f32, np.float32(-448), np.float32(448)).astype(E4M3)
    out.append(record("saturate f32->e4m3", F32, F8_E4M3, FLAG_SCALE1,
                      [f32.size], 1, 1, f32.view(np.uint32), sat.view(np.uint8),
                      np.zeros(0)))
    return out


def ue8m0_scale(amax):
    if amax == 0:
        return 1.0
    if math.isnan(amax) or math.isinf(amax):
        return amax
    k = math.frexp(amax)[1] - 10  # 448 * 2^k < amax here
    while math.ldexp(448.0, k) < amax:
        k += 1
    return math.ldexp(1.0, max(k, -127))


def plain_scale(amax):
    if amax == 0:
        return np.float32(1)
    s = np.float32(amax) / np.float32(448)
    return np.uint32(1).view(np.float32) if s == 0 else s


def quantize(x, b0, b1, ue8m0):
    """Block-scaled e4m3 of x (any float dtype), the reference rule."""
    shape = x.shape
    x32 = x.astype(np.float32)
    if x.ndim == 1:
        x32 = x32.reshape(1, 1, -1)
        b0 = 1
    else:
        x32 = x32.reshape(-1, shape[-2], shape[-1])
    mats, rows, cols = x32.shape
    nbr, nbc = -(-rows // b0), -(-cols // b1)
    q = np.zeros(x32.shape, dtype=np.uint8)
    scales = np.zeros((mats, nbr, nbc), dtype=np.float32)
    with np.errstate(all="ignore"):
        for m in range(mats):
            for i in range(nbr):
                for j in range(nbc):
                    blk = x32[m, i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
                    amax = np.max(np.abs(blk))
                    s = np.float32(ue8m0_scale(float(amax)) if ue8m0
                                   else plain_scale(amax))
                    v = np.clip(blk / s, np.float32(-448), np.float32(448))
                    q[m, i * b0:(i + 1) * b0, j * b1:(j + 1) * b1] = \
                        v.astype(E4M3).view(np.uint8)
                    scales[m, i, j] = s
    return q.reshape(shape), scales.reshape(-1)


def block_inputs(rng):
    """(name, dtype, shape, b0, b1, values as float32)."""
    def weights(shape, spread=True):
        v = rng.standard_normal(shape).astype(np.float32) * np.float32(0.02)
        if spread and len(shape) >= 2:  # blocks of very different magnitude
            v *= np.float32(2.0) ** rng.integers(-20, 20, size=shape[:-1] + (1,))
        return v

    cases = []
    w = weights((300, 260))
    w[5, 7] = np.nan  # one block all NaN
    w[140, 3] = np.inf  # one block with an infinity
    w[0:128, 128:256] = 0.0  # a block of zeros: scale 1
    w[0:4, 129] = -0.0
    w[150:200, 200:210] = np.float32(2.0**-130)  # f32 subnormals, in a block
    w[128:256, 256:260] = np.float32(1e-40)  # a block of f32 subnormals
    w[130, 257] = np.float32(-3e-40)
    w[256:300, 256:260] = np.float32(2.0**-149)  # amax / 448 underflows
    # UE8M0 boundaries: amax exactly 448 * 2^-3, then just above it
    w[256:300, 0:256] = np.float32(0.01)
    w[260, 5] = np.float32(56.0)
    w[261, 130] = np.float32(56.25)
    for dt in (BF16, F16, F32):
        cases.append((f"blocks 300x260 {dt}", dt, (300, 260), 128, 128, w))
    cases.append(("blocks 2x130x129", BF16, (2, 130, 129), 128, 128,
                  weights((2, 130, 129))))
    cases.append(("blocks 37x53 b 4x16", BF16, (37, 53), 4, 16,
                  weights((37, 53))))
    one = weights((1000,), spread=False)
    one[999] = -500.0  # a lone last block
    cases.append(("blocks 1-D 1000", F16, (1000,), 128, 128, one))
    big = np.linspace(-60000, 60000, 64 * 64, dtype=np.float32).reshape(64, 64)
    cases.append(("blocks f16 range", F16, (64, 64), 32, 32, big))
    return cases


def quant_records(rng):
    out = []
    for name, dt, shape, b0, b1, v in block_inputs(rng):
        x = v.astype(NP_OF[dt])
        for ue8m0 in (False, True):
            q, s = quantize(x, b0, b1, ue8m0)
            flags = FLAG_BLOCKS | (FLAG_UE8M0 if ue8m0 else 0)
            out.append(record(f"{name}{' ue8m0' if ue8m0 else ''}", dt,
                              F8_E4M3, flags, shape, b0, b1,
                              x.view(BITS_OF[dt]), q, s))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(SEED)
    with np.errstate(all="ignore"):
        recs = cast_records(rng) + quant_records(rng)
    with open(args.out, "wb") as f:
        f.write(b"RSCVREF1" + struct.pack("<I", len(recs)))
        for r in recs:
            f.write(r)
    print(f"convert_ref.py: {len(recs)} records (numpy {np.__version__}, "
          f"ml_dtypes {ml_dtypes.__version__}) -> {args.out}")


if __name__ == "__main__":
    main()
