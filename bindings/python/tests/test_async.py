# SPDX-License-Identifier: Apache-2.0
"""execute_async, test, wait, abort."""
import threading
import time

import numpy as np
import pytest

import reshard
from reshard import Status

from conftest import bind_all, check, rows_to_cols


def test_execute_async_then_test(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    plan.execute_async()
    assert plan.in_flight
    polls = 0
    while not plan.test():
        polls += 1
        assert polls < 1_000_000
    assert not plan.in_flight
    check(full, d)
    assert plan.test()  # nothing in flight: done, status of the last one


def test_execute_async_then_wait(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    for k in range(3):
        s[0] += 1
        s[1] += 1
        plan.execute_async(None)
        plan.wait()
        check(full + k + 1, d)
    plan.wait()  # with none in flight: fine


def test_host_context_takes_no_stream(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.execute_async(stream=0x1234)
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert ei.value.message


def test_unbound_async_fails_before_anything(simple):
    plan, full, s, d = simple
    plan.bind("src", 0, 0, s[0])
    with pytest.raises(reshard.ArgumentError) as ei:
        plan.execute_async()
    assert ei.value.status == Status.UNKNOWN_BUFFER
    assert not plan.in_flight


def test_abort_then_async(ctx, simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    t = threading.Thread(target=ctx.abort)  # from another thread
    t.start()
    t.join()
    with pytest.raises(reshard.TransportError) as ei:
        plan.execute_async()
        plan.wait()
    assert ei.value.status == Status.TRANSPORT


def test_close_with_an_execution_in_flight(simple):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    plan.execute_async()
    plan.close()  # waits for it, then lets go of the memory
    check(full, d)


def test_other_threads_run_during_execute(ctx):
    """The GIL is released inside libreshard calls."""
    n = 1 << 22
    src = ctx.layout().add_tensor("t", "u8", (n,)).add_shard("t", 0, [0],
                                                              [n])
    dst = ctx.layout().add_tensor("t", "u8", (n,)).add_shard("t", 1, [0],
                                                              [n])
    with ctx.plan(src, dst) as plan:
        a = np.random.default_rng(0).integers(0, 255, n, dtype=np.uint8)
        b = np.zeros(n, np.uint8)
        plan.bind("src", 0, 0, a)
        plan.bind("dst", 1, 0, b)
        errors = []

        def run():
            try:
                for _ in range(20):
                    plan.execute()
            except Exception as e:  # pragma: no cover
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        ticks = 0
        while t.is_alive():
            ticks += 1
        t.join()
        assert not errors
        np.testing.assert_array_equal(a, b)


def test_progress_thread_runs_while_the_caller_works(ctx):
    """Context.progress_thread: execute_async returns, the execution ends
    while the caller does other work (the first test() afterwards finds it
    done), and the destination is exact."""
    assert ctx.progress_thread is False
    ctx.progress_thread = True
    assert ctx.progress_thread is True
    assert ctx.get_param(reshard.Param.PROGRESS_THREAD) == 1
    shape = (2048, 1024)
    src, dst = rows_to_cols(ctx, shape)
    plan = ctx.plan(src, dst)
    full = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    s = [full[:1024].copy(), full[1024:].copy()]
    d = [np.zeros((2048, 512), np.float32), np.zeros((2048, 512), np.float32)]
    bind_all(plan, s, d)
    for _ in range(2):
        s[0] += 1
        s[1] += 1
        d[0][:] = -1
        d[1][:] = -1
        plan.execute_async()
        assert plan.in_flight
        # the caller's own work (8 MiB move: milliseconds of the thread's)
        acc = 0.0
        for _ in range(20):
            acc += float(np.sum(np.sqrt(np.arange(200_000, dtype=np.float64))))
            time.sleep(0.05)
        assert acc > 0
        assert plan.test(), "not done after 1 s: the thread did not run it"
        plan.wait()
        now = np.concatenate(s)  # the sources as they are: bit-exact
        np.testing.assert_array_equal(d[0], now[:, :512])
        np.testing.assert_array_equal(d[1], now[:, 512:])
    plan.close()
    src.close()
    dst.close()


def test_progress_thread_refusals(ctx, simple):
    plan, full, s, d = simple
    with pytest.raises(reshard.Error) as ei:
        ctx.set_param(reshard.Param.PROGRESS_THREAD, 2)
    assert ei.value.status == Status.BAD_PARAM
    assert "[0, 1]" in ei.value.message
    ctx.progress_thread = True
    bind_all(plan, s, d)
    plan.execute_async()
    with pytest.raises(reshard.Error) as ei:  # the thread reads them
        ctx.copy_threads = 2
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert "progress thread" in ei.value.message
    plan.wait()
    check(full, d)
    ctx.copy_threads = 2  # ended: taken again
