# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures. The package under test is the one on PYTHONPATH (the
build tree's bindings/python, staged by CMake)."""
import gc

import numpy as np
import pytest

import reshard
from reshard import Replicate, Shard


@pytest.fixture
def ctx():
    c = reshard.Context.local(4)
    yield c
    c.close()


def rows_to_cols(ctx, shape=(6, 9), dtype="float32"):
    """src: rows split over ranks 0, 1; dst: columns split over 2, 3."""
    src = ctx.layout().add_tensor("w", dtype, shape)
    src.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[0, 1],
                    placements=[Shard(0)])
    dst = ctx.layout().add_tensor("w", dtype, shape)
    dst.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[2, 3],
                    placements=[Shard(1)])
    return src, dst


@pytest.fixture
def simple(ctx):
    """A plan over `ctx` and its data: (plan, full, src arrays, dst arrays)."""
    src, dst = rows_to_cols(ctx)
    plan = ctx.plan(src, dst)
    full = np.arange(54, dtype=np.float32).reshape(6, 9)
    s = [full[:3].copy(), full[3:].copy()]
    d = [np.zeros((6, 5), np.float32), np.zeros((6, 4), np.float32)]
    yield plan, full, s, d
    plan.close()
    src.close()
    dst.close()
    gc.collect()


def bind_all(plan, s, d):
    plan.bind("src", 0, 0, s[0])
    plan.bind("src", 1, 0, s[1])
    plan.bind("dst", 2, 0, d[0])
    plan.bind("dst", 3, 0, d[1])


def check(full, d):
    np.testing.assert_array_equal(np.asarray(d[0]), full[:, :5])
    np.testing.assert_array_equal(np.asarray(d[1]), full[:, 5:])
