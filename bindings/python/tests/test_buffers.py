# SPDX-License-Identifier: Apache-2.0
"""Memory bound through the buffer protocol: numpy arrays, bytearray,
memoryview, array.array, mmap; refused when it cannot work."""
import array
import gc
import mmap
import os
import signal

import numpy as np
import pytest

import reshard
from reshard import Status

from conftest import bind_all, check, rows_to_cols


def as_bytes(a):
    return bytearray(a.tobytes())


def test_numpy(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    plan.execute()
    check(full, d)
    # again after the source changed, without re-planning
    s[0] += 100
    s[1] += 100
    plan.execute()
    check(full + 100, d)


def test_bytearray_and_memoryview(simple):
    plan, full, s, d = simple
    src0 = bytearray(s[0].tobytes())
    src1 = memoryview(bytearray(s[1].tobytes()))
    dst0 = bytearray(d[0].nbytes)
    dst1 = memoryview(bytearray(d[1].nbytes)).cast("B")
    plan.bind("src", 0, 0, src0)
    plan.bind("src", 1, 0, src1)
    plan.bind("dst", 2, 0, dst0)
    plan.bind(reshard.DST, 3, 0, dst1)
    plan.execute()
    got = [np.frombuffer(dst0, np.float32).reshape(6, 5),
           np.frombuffer(dst1, np.float32).reshape(6, 4)]
    check(full, got)


def test_array_array_and_mmap(simple):
    plan, full, s, d = simple
    src0 = array.array("f", s[0].ravel().tolist())
    m = mmap.mmap(-1, s[1].nbytes)
    m.write(s[1].tobytes())
    plan.bind("src", 0, 0, src0)
    plan.bind("src", 1, 0, m)
    out0 = array.array("f", [0.0] * 30)
    out1 = mmap.mmap(-1, d[1].nbytes)
    plan.bind("dst", 2, 0, out0)
    plan.bind("dst", 3, 0, out1)
    plan.execute()
    check(full, [np.array(out0, np.float32).reshape(6, 5),
                 np.frombuffer(out1, np.float32).reshape(6, 4)])
    plan.close()  # lets go of the mmaps
    m.close()
    out1.close()


def test_read_only_source_is_fine_destination_is_refused(simple):
    plan, full, s, d = simple
    plan.bind("src", 0, 0, s[0].tobytes())  # bytes: read-only
    ro = s[1].copy()
    ro.flags.writeable = False
    plan.bind("src", 1, 0, ro)
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("dst", 2, 0, bytes(d[0].nbytes))
    e = ei.value
    assert e.status == Status.INVALID_ARGUMENT
    assert "read-only" in e.message and "dst buffer 0 of rank 2" in e.message
    ro_dst = d[0].copy()
    ro_dst.flags.writeable = False
    with pytest.raises(reshard.ArgumentError, match="read-only"):
        plan.bind("dst", 2, 0, ro_dst)
    with pytest.raises(reshard.ArgumentError, match="read-only"):
        plan.bind("dst", 2, 0, memoryview(bytearray(120)).toreadonly())
    plan.bind("dst", 2, 0, d[0])
    plan.bind("dst", 3, 0, d[1])
    plan.execute()
    check(full, d)


def test_non_contiguous_is_refused(simple):
    plan, full, s, d = simple
    wide = np.zeros((6, 10), np.float32)
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("dst", 2, 0, wide[:, :5])
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert "not C-contiguous" in ei.value.message
    with pytest.raises(reshard.ArgumentError, match="not C-contiguous"):
        plan.bind("src", 0, 0, np.asfortranarray(np.zeros((3, 9),
                                                          np.float32)))
    with pytest.raises(reshard.ArgumentError, match="not C-contiguous"):
        plan.bind("dst", 2, 0, memoryview(bytearray(240))[::2])
    # a contiguous slice is fine (and writes into its base)
    base = np.zeros((8, 5), np.float32)
    plan.bind("dst", 2, 0, base[1:7])
    plan.bind("dst", 3, 0, d[1])
    bind_src = [plan.bind("src", r, 0, s[r]) for r in (0, 1)]
    plan.execute()
    np.testing.assert_array_equal(base[1:7], full[:, :5])
    assert not base[0].any() and not base[7].any()


def test_too_small_is_refused_and_unbinds(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("dst", 2, 0, np.zeros(29, np.float32))
    assert ei.value.status == Status.BUFFER_TOO_SMALL
    assert ei.value.name == "RS_ERR_BUFFER_TOO_SMALL"
    assert "120" in ei.value.message  # the bytes it needs
    assert plan.bound("dst", 2, 0) is None
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.execute()  # nothing runs until it is bound again
    assert ei.value.status == Status.UNKNOWN_BUFFER
    plan.bind("dst", 2, 0, d[0])
    plan.execute()
    check(full, d)


def test_unknown_buffer_rank_side(simple):
    plan, full, s, d = simple
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("src", 2, 0, s[0])  # rank 2 holds no source
    assert ei.value.status == Status.UNKNOWN_BUFFER
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("src", 0, 1, s[0])
    assert ei.value.status == Status.UNKNOWN_BUFFER
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("src", 7, 0, s[0])
    assert ei.value.status == Status.UNKNOWN_RANK
    with pytest.raises(reshard.ArgumentError):
        plan.bind("sideways", 0, 0, s[0])
    with pytest.raises(TypeError, match="buffer protocol"):
        plan.bind("src", 0, 0, object())
    with pytest.raises(TypeError):
        plan.bind("src", 0, 0, [1.0, 2.0])


def test_element_size_check(simple):
    plan, full, s, d = simple
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("dst", 2, 0, np.zeros(15, np.float64))
    assert "f32" in ei.value.message and "8-byte" in ei.value.message
    # same-sized elements of another dtype are refused too: int32 is not f32
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.bind("dst", 2, 0, np.zeros(30, np.int32))
    assert "i32" in ei.value.message and "tensor 'w'" in ei.value.message
    assert "Plan.bind" in ei.value.message
    # bytes are accepted; the check can be skipped
    plan.bind("dst", 2, 0, np.zeros(120, np.uint8))
    plan.bind("dst", 2, 0, np.zeros(15, np.float64), check_dtype=False)


def test_bound_bytearray_cannot_be_resized(simple):
    plan, full, s, d = simple
    buf = bytearray(d[0].nbytes)
    plan.bind("dst", 2, 0, buf)
    with pytest.raises(BufferError):
        buf.extend(b"x" * 4096)  # would move the memory under the plan
    plan.bind("dst", 2, 0, d[0])  # rebinding lets go of it
    buf.extend(b"x")
    plan.bind("dst", 2, 0, buf)
    plan.close()
    buf.extend(b"x")


def test_fused_buffer_of_several_dtypes(ctx):
    """One buffer per destination rank with tensors of two dtypes at byte
    offsets, bound as bytes."""
    src = ctx.layout()
    dst = ctx.layout()
    for lay in (src, dst):
        lay.add_tensor("a", "bf16", (4, 8)).add_tensor("b", "float32", (8,))
    src.add_shard("a", 0, [0, 0], [4, 8]).add_shard("b", 0, [0], [8],
                                                    byte_offset=64)
    dst.add_shard("a", 1, [0, 0], [4, 8], byte_offset=32)
    dst.add_shard("b", 1, [0], [8], byte_offset=0)
    assert src.buffer_bytes(0) == 96 and dst.buffer_bytes(1) == 96
    with ctx.plan(src, dst) as plan:
        assert plan.buffer_bytes("dst", 1) == 96
        a = np.arange(32, dtype=np.uint16)
        b = np.linspace(0, 1, 8, dtype=np.float32)
        sbuf = np.concatenate([a.view(np.uint8), b.view(np.uint8)])
        dbuf = np.zeros(96, np.uint8)
        with pytest.raises(reshard.ArgumentError, match="bf16"):
            plan.bind("src", 0, 0, sbuf.view(np.float32))
        plan.bind("src", 0, 0, sbuf)
        plan.bind("dst", 1, 0, dbuf)
        plan.execute()
        np.testing.assert_array_equal(dbuf[32:].view(np.uint16), a)
        np.testing.assert_array_equal(dbuf[:32].view(np.float32), b)
    gc.collect()


def test_copies_over_threads(ctx):
    """copy_threads: a 1024 x 1536 float32 tensor (6 MiB, its pieces
    above the 1 MiB a batch needs to be cut) moved rows to columns over
    2 threads and over one per CPU: the same values every time."""
    assert ctx.copy_threads == 1
    src, dst = rows_to_cols(ctx, shape=(1024, 1536))
    full = np.arange(1024 * 1536, dtype=np.float32).reshape(1024, 1536)
    s = [full[:512].copy(), full[512:].copy()]
    with ctx.plan(src, dst) as plan:
        for n in (2, 0, 1):
            ctx.copy_threads = n
            assert ctx.get_param("copy_threads") == n
            d = [np.zeros((1024, 768), np.float32) for _ in range(2)]
            bind_all(plan, s, d)
            plan.execute()
            np.testing.assert_array_equal(d[0], full[:, :768])
            np.testing.assert_array_equal(d[1], full[:, 768:])
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.copy_threads = -1
    assert ei.value.status == Status.BAD_PARAM
    assert ctx.copy_threads == 1
    src.close()
    dst.close()


def test_fork_after_copies_over_threads(ctx):
    """A process forked once the copy threads ran (what multiprocessing's
    fork start method does to a trainer): the child executes the same
    plan with threads of its own and closes the context, which joins
    those alone; the parent's threads still serve it."""
    src, dst = rows_to_cols(ctx, shape=(1024, 1536))
    full = np.arange(1024 * 1536, dtype=np.float32).reshape(1024, 1536)
    s = [full[:512].copy(), full[512:].copy()]
    ctx.copy_threads = 2

    def run_and_check(plan):
        d = [np.zeros((1024, 768), np.float32) for _ in range(2)]
        bind_all(plan, s, d)
        plan.execute()
        return (np.array_equal(d[0], full[:, :768]) and
                np.array_equal(d[1], full[:, 768:]))

    with ctx.plan(src, dst) as plan:
        assert run_and_check(plan)
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                signal.alarm(20)  # a hang fails the child
                ok = run_and_check(plan) and run_and_check(plan)
                # closing joins the child's threads, none of the parent's
                plan.close()
                ctx.close()
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert run_and_check(plan)
    ctx.copy_threads = 1
    src.close()
    dst.close()
