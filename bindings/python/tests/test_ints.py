# SPDX-License-Identifier: Apache-2.0
"""64-bit integers travel exactly: shapes, offsets and figures beyond 2^53
(where a double would round) in both directions."""
import pytest

import reshard
from reshard import Status

BIG = 2 ** 53 + 1  # the first integer a double cannot hold


def test_offsets_beyond_2_53_in_error_messages(ctx):
    n = 2 ** 62 + 1
    lay = ctx.layout().add_tensor("t", "u8", (n,))
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_shard("t", 0, [BIG], [2 ** 62])
    assert ei.value.status == Status.OUT_OF_BOUNDS
    assert str(BIG) in ei.value.message
    assert str(2 ** 62) in ei.value.message
    assert str(n) in ei.value.message


def test_largest_values_pass(ctx):
    lay = ctx.layout().add_tensor("t", "u8", (2 ** 63 - 1,))
    lay.add_shard("t", 0, [2 ** 63 - 2], [1])
    lay.add_shard("t", 1, [0], [1], byte_offset=2 ** 62 + 3)
    assert lay.buffer_bytes(1) == 2 ** 62 + 4
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.layout().add_tensor("t", "f32", (2 ** 62, 4))
    assert ei.value.status == Status.OVERFLOW


def test_out_of_int64_is_refused_not_wrapped(ctx):
    lay = ctx.layout()
    for bad in (2 ** 63, -2 ** 63 - 1, 2 ** 64 + 5):
        with pytest.raises(reshard.ArgumentError) as ei:
            lay.add_tensor("t", "u8", (bad,))
        assert ei.value.status == Status.OVERFLOW
        assert str(bad) in ei.value.message


def test_plan_figures_beyond_2_53():
    with reshard.Context.local(2) as ctx:
        ctx.staging_bytes = 2 ** 40
        assert ctx.staging_bytes == 2 ** 40
        n = 2 ** 53 + 3
        src = ctx.layout().add_tensor("t", "u8", (n,)).add_shard(
            "t", 0, [0], [n])
        dst = ctx.layout().add_tensor("t", "u8", (n,)).add_shard(
            "t", 1, [0], [n])
        with ctx.plan(src, dst) as plan:
            s = plan.stats()
            assert s["bytes_sent_inter"] == n
            assert s["bytes_recv_inter"] == n
            assert plan.stats(0)["bytes_sent_inter"] == n
            assert plan.stats(1)["bytes_recv_inter"] == n
            assert plan.stat("bytes_sent_inter", 0) == n
            ranks = plan.to_json()["ranks"]
            assert ranks[0]["bytes_sent_inter"] == n  # json keeps ints exact
            f = plan.fingerprint
            assert 0 <= f < 2 ** 64


def test_param_bounds_exact(ctx):
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.staging_bytes = 2 ** 40 + 1
    assert str(2 ** 40 + 1) in ei.value.message
    ctx.timeout_ms = 86400000
    assert ctx.timeout_ms == 86400000


def test_dtensor_boxes_beyond_2_53():
    off, ext = reshard.dtensor_local_box([2 ** 60 + 3], [4], [reshard.Shard(0)],
                                         [3])
    chunk = -(-(2 ** 60 + 3) // 4)
    assert off == (3 * chunk,)
    assert ext == (2 ** 60 + 3 - 3 * chunk,)


def test_swig_takes_lists_of_ints_exactly():
    """The extension copies a list or tuple where C wants rsw_ints: every
    element an int fitting int64, or a TypeError/OverflowError naming it
    (nothing truncated, no bool taken as an int)."""
    C = reshard._native.C
    r = reshard._native.result()
    with reshard.Context.local(1) as c:
        lay = c.layout()
        h = lay._h()
        C.rsw_layout_add_tensor(r, h, "t", int(reshard.DType.U8),
                                (2 ** 63 - 1,))
        assert r.status == 0
        C.rsw_layout_add_shard(r, h, "t", 0, [2 ** 63 - 2], [1], 0, 0, [])
        assert r.status == 0
        for bad, exc in (([2 ** 63], OverflowError), ([-2 ** 63 - 1],
                         OverflowError), ([1.0], TypeError),
                         ([True], TypeError), (["1"], TypeError)):
            with pytest.raises(exc, match="element 0"):
                C.rsw_layout_add_shard(r, h, "t", 0, bad, [1], 0, 0, [])
        with pytest.raises(TypeError):
            C.rsw_layout_add_shard(r, h, "t", 0, 5, [1], 0, 0, [])
        assert lay.num_shards == 1
        lay.close()


def test_buffer_address_is_the_memory():
    import numpy as np
    a = np.zeros(8, np.float32)
    C = reshard._native.C
    assert C.rsw_py_buffer_address(memoryview(a)) == a.ctypes.data
    assert C.rsw_py_buffer_address(object()) == 0
