# SPDX-License-Identifier: Apache-2.0
"""Changing dtype on the way: a bf16 source lands as block-scaled fp8
(f8_e4m3 values and float32 scales, Layout.set_block_scales), checked
against a reference computed here with numpy (and with ml_dtypes' own
float8_e4m3fn where it is installed); and the errors of bad declarations."""
import numpy as np
import pytest

import reshard
from reshard import ScaleRule, Status

N, B = 256, 128  # a [256, 256] tensor in [2, 2] blocks of 128 x 128


def bf16_source(seed=7):
    """A [256, 256] bf16 tensor (as its uint16 bits) whose four blocks
    differ: normal values, large ones (past 448), all zero, and small
    ones. (Under ue8m0 the scale is a power of two, so the quotients are
    bf16 values and many fall exactly between two fp8 values: ties.)"""
    rng = np.random.default_rng(seed)
    x = np.zeros((N, N), np.float32)
    x[:B, :B] = rng.standard_normal((B, B)) * 3
    x[:B, B:] = rng.standard_normal((B, B)) * 5000
    # x[B:, :B] stays zero: scale 1, every byte 0
    x[B:, B:] = rng.uniform(-1e-3, 1e-3, (B, B))
    x[B, B] = 2e-3  # the block's amax, a round number
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncate to bf16
    return bits


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def e4m3_bits(v):
    """OCP E4M3FN bits of float32 values already within [-448, 448]:
    round to nearest, ties to even; subnormals below 2^-6."""
    v = np.asarray(v, np.float64)  # exact for float32 inputs
    sign = np.where(np.signbit(v), 0x80, 0).astype(np.uint8)
    a = np.abs(v)
    out = np.zeros(a.shape, np.int64)
    sub = a < 2.0 ** -6
    out[sub] = np.rint(a[sub] / 2.0 ** -9)  # 0..8 (8 is the least normal)
    n = ~sub
    m, e = np.frexp(a[n])  # a = m * 2^e, m in [0.5, 1)
    e = e - 1  # a = (2m) * 2^e, 2m in [1, 2)
    frac = np.rint((2 * m - 1) * 8)  # ties to even
    carry = frac == 8
    e = np.where(carry, e + 1, e)
    frac = np.where(carry, 0, frac)
    out[n] = ((e + 7) << 3) | frac.astype(np.int64)
    assert out.max() <= 0x7e, "saturation must come first"
    return (out.astype(np.uint8) | sign)


def reference(bits, rule):
    """The fp8 bytes [256, 256] and the float32 scales [2, 2] the header's
    rule gives, computed block by block."""
    x = bf16_to_f32(bits)
    q = np.zeros((N, N), np.uint8)
    scales = np.zeros((2, 2), np.float32)
    for bi in range(2):
        for bj in range(2):
            blk = x[bi * B:(bi + 1) * B, bj * B:(bj + 1) * B]
            amax = np.float32(np.max(np.abs(blk)))
            if amax == 0:
                s = np.float32(1)
            elif rule == "amax":
                s = np.float32(amax / np.float32(448))
            else:
                r = np.float32(amax / np.float32(448))
                m, e = np.frexp(r)
                s = np.float32(np.ldexp(1.0, int(e) - 1 if m == 0.5 else int(e)))
            scales[bi, bj] = s
            y = np.clip(blk / s, np.float32(-448), np.float32(448))
            assert y.dtype == np.float32
            q[bi * B:(bi + 1) * B, bj * B:(bj + 1) * B] = e4m3_bits(y)
    return q, scales


def run(rule, bits):
    """Plan and execute on 2 in-process ranks: rank 0 holds the bf16
    source whole; rank 1 the fp8 destination (buffer 0) and its scales
    (buffer 1). Returns (fp8 bytes, scales, plan stats per rank)."""
    with reshard.Context.local(2) as ctx:
        src = ctx.layout().add_tensor("w", "bf16", (N, N))
        src.add_shard("w", 0, (0, 0), (N, N))
        dst = ctx.layout().add_tensor("w", "f8_e4m3", (N, N))
        dst.add_tensor("w_scale", "float32", (2, 2))
        dst.set_block_scales("w", "w_scale", block=(B, B), rule=rule)
        dst.add_shard("w", 1, (0, 0), (N, N))
        dst.add_shard("w_scale", 1, (0, 0), (2, 2), buffer=1)
        with ctx.plan(src, dst) as plan:
            out = np.full((N, N), 0xff, np.uint8)  # not what it must become
            sc = np.full((2, 2), np.nan, np.float32)
            plan.bind("src", 0, 0, bits)
            plan.bind("dst", 1, 0, out)
            plan.bind("dst", 1, 1, sc)
            plan.execute()
            stats = [plan.stats(r) for r in range(2)]
            stats.append(plan.stats())
        src.close()
        dst.close()
    return out, sc, stats


@pytest.mark.parametrize("rule", ["amax", "ue8m0"])
def test_bf16_to_block_scaled_fp8(rule):
    bits = bf16_source()
    want_q, want_s = reference(bits, rule)
    # a few values the rules fix, whatever the reference code does
    assert want_s[1, 0] == 1 and not want_q[B:, :B].any()
    if rule == "ue8m0":
        assert want_s[1, 1] == 2.0 ** -17  # 2e-3 / 448 -> 2^ceil(-17.095)
    q, s, stats = run(rule, bits)
    bad = np.argwhere(q != want_q)
    assert bad.size == 0, "%d fp8 bytes differ (%s), first at %s: got 0x%02x, " \
        "want 0x%02x from bf16 %r" % (
            len(bad), rule, tuple(bad[0]), q[tuple(bad[0])],
            want_q[tuple(bad[0])], float(bf16_to_f32(bits)[tuple(bad[0])]))
    np.testing.assert_array_equal(s.view(np.uint32), want_s.view(np.uint32),
                                  err_msg="scales (%s): got %s, want %s" % (
                                      rule, s.tolist(), want_s.tolist()))
    # Rank 0 holds every block whole: it converts before sending (each
    # element, and one for each block's scale); rank 1 converts nothing.
    assert stats[0]["converted_sending"] == N * N + 4
    assert stats[1]["converted_receiving"] == 0
    assert stats[2]["converted_sending"] == N * N + 4
    assert stats[2]["converted_receiving"] == 0
    # 1 byte an element and 4 a block on the wire, not bf16's 2
    assert stats[1]["bytes_recv_intra"] + stats[1]["bytes_recv_inter"] \
        == N * N + 16


@pytest.mark.parametrize("rule", ["amax", "ue8m0"])
def test_reference_agrees_with_ml_dtypes(rule):
    """The reference's own fp8 rounding, against ml_dtypes' float8_e4m3fn
    (the type JAX and PyTorch interoperate with)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bits = bf16_source(seed=11)
    q, scales = reference(bits, rule)
    x = bf16_to_f32(bits)
    s = np.repeat(np.repeat(scales, B, 0), B, 1)
    y = np.clip(x / s, np.float32(-448), np.float32(448)).astype(np.float32)
    want = y.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(q, want)
    # and every representable magnitude, with the ties between them
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    vals = grid.astype(np.float32)
    vals = vals[np.isfinite(vals)]
    vals = np.sort(vals)
    mids = ((vals[:-1].astype(np.float64) + vals[1:]) / 2).astype(np.float32)
    probe = np.concatenate([vals, mids])
    np.testing.assert_array_equal(
        e4m3_bits(probe), probe.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_hand_computed_blocks():
    """Blocks whose result is known by hand: all 448 -> scale 1, bytes
    0x7e; all 1.0 -> scale 1/448, bytes 0x7e; zero -> scale 1, bytes 0."""
    x = np.zeros((N, N), np.float32)
    x[:B, :B] = 448
    x[:B, B:] = 1
    x[B:, B:] = -2
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    q, s, _ = run(ScaleRule.AMAX, bits)
    assert s[0, 0] == 1 and s[0, 1] == np.float32(1) / np.float32(448)
    assert s[1, 0] == 1 and s[1, 1] == np.float32(2) / np.float32(448)
    assert (q[:B, :] == 0x7e).all() and (q[B:, :B] == 0).all()
    assert (q[B:, B:] == 0xfe).all()
    q, s, _ = run(ScaleRule.UE8M0, bits)
    assert s[0, 1] == 2.0 ** -8 and (q[:B, B:] == 0x78).all()  # 256


@pytest.fixture
def fp8_layouts():
    ctx = reshard.Context.local(2)
    src = ctx.layout().add_tensor("w", "bf16", (N, N))
    src.add_shard("w", 0, (0, 0), (N, N))
    dst = ctx.layout().add_tensor("w", "f8_e4m3", (N, N))
    dst.add_tensor("w_scale", "f32", (2, 2))
    dst.add_tensor("w_bf16", "bf16", (N, N))
    yield ctx, src, dst
    src.close()
    dst.close()
    ctx.close()


@pytest.mark.parametrize("args,status,part", [
    (("nope", "w_scale"), Status.UNKNOWN_TENSOR, "nope"),
    (("w", "nope"), Status.UNKNOWN_TENSOR, "nope"),
    (("w_bf16", "w_scale"), Status.INVALID_ARGUMENT, "w_bf16"),
    (("w", "w_bf16"), Status.INVALID_ARGUMENT, "w_bf16"),
])
def test_bad_declarations(fp8_layouts, args, status, part):
    _, _, dst = fp8_layouts
    with pytest.raises(reshard.ArgumentError) as e:
        dst.set_block_scales(*args, block=(B, B))
    assert e.value.status == status
    assert e.value.name == status.c_name
    assert part in e.value.message


def test_bad_block_and_rule(fp8_layouts):
    _, _, dst = fp8_layouts
    for block in [(0, B), (B, -1)]:
        with pytest.raises(reshard.ArgumentError) as e:
            dst.set_block_scales("w", "w_scale", block=block)
        assert e.value.name == "RS_ERR_INVALID_ARGUMENT" and e.value.message
    # scales of another shape than [256/64, 256/64]
    with pytest.raises(reshard.ArgumentError) as e:
        dst.set_block_scales("w", "w_scale", block=(64, 64))
    assert e.value.status == Status.INVALID_ARGUMENT
    with pytest.raises(reshard.ArgumentError) as e:
        dst.set_block_scales("w", "w_scale", rule="mxfp")
    assert "mxfp" in e.value.message and "ue8m0" in e.value.message
    with pytest.raises(reshard.ArgumentError) as e:
        dst.set_block_scales("w", "w_scale", rule=7)  # refused by C
    assert e.value.name == "RS_ERR_INVALID_ARGUMENT" and e.value.message
    with pytest.raises(TypeError):
        dst.set_block_scales("w", "w_scale", block=128)
    # after all that, a good declaration still goes through, twice
    dst.set_block_scales("w", "w_scale", block=(B, B), rule="UE8M0")
    dst.set_block_scales("w", "w_scale", block=(B, B), rule=ScaleRule.UE8M0)


def test_blocks_split_by_a_destination_shard(fp8_layouts):
    """A destination shard that cuts a block: the plan is refused with
    RS_ERR_UNSUPPORTED, naming the tensor."""
    ctx, src, dst = fp8_layouts
    dst.set_block_scales("w", "w_scale", block=(B, B))
    dst.add_shard("w", 0, (0, 0), (64, N))
    dst.add_shard("w", 1, (64, 0), (N - 64, N))
    dst.add_shard("w_scale", 1, (0, 0), (2, 2), buffer=1)
    dst.add_shard("w_bf16", 1, (0, 0), (N, N), buffer=2)
    src.add_tensor("w_bf16", "bf16", (N, N)).add_shard("w_bf16", 0, (0, 0),
                                                       (N, N), buffer=1)
    with pytest.raises(reshard.UnsupportedError) as e:
        ctx.plan(src, dst)
    assert e.value.status == Status.UNSUPPORTED
    assert e.value.name == "RS_ERR_UNSUPPORTED"
    assert "'w'" in e.value.message and "cuts block" in e.value.message, \
        e.value.message


def test_declaration_travels_with_serialize():
    bits = bf16_source()
    with reshard.Context.local(2) as ctx:
        src = ctx.layout().add_tensor("w", "bf16", (N, N))
        src.add_shard("w", 0, (0, 0), (N, N))
        dst = ctx.layout().add_tensor("w", "f8_e4m3", (N, N))
        dst.add_tensor("w_scale", "float32", (2, 2))
        dst.set_block_scales("w", "w_scale", (B, B), "ue8m0")
        dst.add_shard("w", 1, (0, 0), (N, N))
        dst.add_shard("w_scale", 1, (0, 0), (2, 2), buffer=1)
        copy = ctx.layout().deserialize(dst.serialize())
        with ctx.plan(src, dst) as a, ctx.plan(src, copy) as b:
            assert a.fingerprint == b.fingerprint
            out = np.zeros((N, N), np.uint8)
            sc = np.zeros((2, 2), np.float32)
            b.bind("src", 0, 0, bits)
            b.bind("dst", 1, 0, out)
            b.bind("dst", 1, 1, sc)
            b.execute()
        want_q, want_s = reference(bits, "ue8m0")
        np.testing.assert_array_equal(out, want_q)
        np.testing.assert_array_equal(sc, want_s)
        for x in (src, dst, copy):
            x.close()
