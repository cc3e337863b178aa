# SPDX-License-Identifier: Apache-2.0
"""Contexts, layouts and plans close in any order; Python objects keep
alive what they need."""
import gc
import itertools
import weakref

import numpy as np
import pytest

import reshard

from conftest import bind_all, check, rows_to_cols

FULL = np.arange(54, dtype=np.float32).reshape(6, 9)


def make():
    ctx = reshard.Context.local(4)
    src, dst = rows_to_cols(ctx)
    plan = ctx.plan(src, dst)
    return {"ctx": ctx, "src": src, "dst": dst, "plan": plan}


@pytest.mark.parametrize("order", list(itertools.permutations(
    ["ctx", "src", "dst", "plan"])))
def test_close_in_any_order(order):
    objs = make()
    s = [FULL[:3].copy(), FULL[3:].copy()]
    d = [np.zeros((6, 5), np.float32), np.zeros((6, 4), np.float32)]
    plan = objs["plan"]
    bind_all(plan, s, d)
    for name in order:
        if name != "plan" and not plan.closed:
            # the plan runs whatever else is gone
            d[0].fill(0)
            plan.execute()
            check(FULL, d)
        objs[name].close()
        gc.collect()
    for o in objs.values():
        assert o.closed


@pytest.mark.parametrize("order", list(itertools.permutations(
    ["ctx", "src", "dst", "plan"])))
def test_drop_references_in_any_order(order):
    objs = make()
    refs = {k: weakref.ref(v) for k, v in objs.items()}
    for name in order:
        del objs[name]
        gc.collect()
    gc.collect()
    assert all(r() is None for r in refs.values())


def test_children_keep_the_context_object_alive():
    ctx = reshard.Context.local(4)
    src, dst = rows_to_cols(ctx)
    plan = ctx.plan(src, dst)
    r = weakref.ref(ctx)
    del ctx, src, dst
    gc.collect()
    assert r() is not None and plan.context is r()
    del plan
    gc.collect()
    assert r() is None


def test_plan_keeps_bound_objects(simple):
    plan, full, s, d = simple
    arrays = [full[:3].copy(), full[3:].copy()]
    refs = [weakref.ref(a) for a in arrays]
    plan.bind("src", 0, 0, arrays[0])
    plan.bind("src", 1, 0, arrays[1])
    del arrays
    gc.collect()
    assert all(r() is not None for r in refs)
    plan.bind("dst", 2, 0, d[0])
    plan.bind("dst", 3, 0, d[1])
    plan.execute()
    check(full, d)
    plan.bind("src", 0, 0, s[0])  # rebinding lets the old one go
    gc.collect()
    assert refs[0]() is None and refs[1]() is not None
    assert plan.bound("src", 0, 0) is s[0]
    plan.close()
    gc.collect()
    assert refs[1]() is None


def test_closed_context_refuses_but_children_work(simple, ctx):
    plan, full, s, d = simple
    bind_all(plan, s, d)
    ctx.close()
    with pytest.raises(reshard.ArgumentError):
        ctx.layout()
    with pytest.raises(reshard.ArgumentError):
        ctx.world_size
    ctx.abort()  # nothing to abort: no error
    plan.execute()
    check(full, d)


def test_with_blocks():
    with reshard.Context.local(4) as ctx:
        src, dst = rows_to_cols(ctx)
        with src, dst, ctx.plan(src, dst) as plan:
            assert plan.num_moves > 0
        assert plan.closed and src.closed and dst.closed
    assert ctx.closed
