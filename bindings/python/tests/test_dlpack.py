# SPDX-License-Identifier: Apache-2.0
"""Memory bound through DLPack (__dlpack__): torch tensors (CPU here;
CUDA where a GPU is), and any other exporter."""
import gc
import sys
import weakref

import numpy as np
import pytest

import reshard
from reshard import Status

from conftest import rows_to_cols

torch = pytest.importorskip(
    "torch", reason="torch is not installed (Debian: python3-torch)")


def torch_plan(ctx, dtype="bf16"):
    src, dst = rows_to_cols(ctx, dtype=dtype)
    return ctx.plan(src, dst)


def test_torch_cpu_bf16(ctx):
    with torch_plan(ctx) as plan:
        full = torch.randn(6, 9).to(torch.bfloat16)
        src = [full[:3].clone(), full[3:].clone()]
        dst = [torch.zeros(6, 5, dtype=torch.bfloat16),
               torch.zeros(6, 4, dtype=torch.bfloat16)]
        plan.bind("src", 0, 0, src[0])
        plan.bind("src", 1, 0, src[1])
        plan.bind("dst", 2, 0, dst[0])
        plan.bind("dst", 3, 0, dst[1])
        plan.execute()
        assert torch.equal(dst[0], full[:, :5])
        assert torch.equal(dst[1], full[:, 5:])
        src[0].mul_(2)  # in place: the bound memory
        src[1].mul_(2)
        plan.execute()
        assert torch.equal(dst[0], 2 * full[:, :5])
        assert torch.equal(dst[1], 2 * full[:, 5:])


def test_torch_views_and_byte_offsets(ctx):
    """A contiguous view into a larger tensor: its data pointer plus the
    DLPack byte offset."""
    with torch_plan(ctx, "float32") as plan:
        full = torch.arange(54, dtype=torch.float32).reshape(6, 9)
        big = torch.zeros(100)
        plan.bind("src", 0, 0, full[:3])
        plan.bind("src", 1, 0, full[3:])  # a view starting 27 floats in
        plan.bind("dst", 2, 0, big[10:40])
        out = torch.zeros(6, 4)
        plan.bind("dst", 3, 0, out)
        plan.execute()
        assert torch.equal(big[10:40].reshape(6, 5), full[:, :5])
        assert not big[:10].any() and not big[40:].any()
        assert torch.equal(out, full[:, 5:])


def test_torch_non_contiguous_refused(ctx):
    with torch_plan(ctx, "float32") as plan:
        t = torch.zeros(5, 6)
        with pytest.raises(reshard.ArgumentError) as ei:
            plan.bind("dst", 2, 0, t.t())
        assert ei.value.status == Status.INVALID_ARGUMENT
        assert "not contiguous" in ei.value.message
        with pytest.raises(reshard.ArgumentError, match="not contiguous"):
            plan.bind("dst", 2, 0, torch.zeros(6, 10)[:, :5])


def test_torch_element_size_and_bytes(ctx):
    with torch_plan(ctx, "bf16") as plan:
        with pytest.raises(reshard.ArgumentError, match="bf16"):
            plan.bind("dst", 2, 0, torch.zeros(30))  # float32
        plan.bind("dst", 2, 0, torch.zeros(60, dtype=torch.uint8))
        for other in (torch.int16, torch.float16):  # same size, not bf16
            with pytest.raises(reshard.ArgumentError, match="bf16"):
                plan.bind("dst", 2, 0, torch.zeros(30, dtype=other))
        plan.bind("dst", 2, 0, torch.zeros(6, 5, dtype=torch.bfloat16))
        with pytest.raises(reshard.ArgumentError) as ei:
            plan.bind("dst", 2, 0, torch.zeros(10, dtype=torch.bfloat16))
        assert ei.value.status == Status.BUFFER_TOO_SMALL


def test_torch_bool(ctx):
    src = ctx.layout().add_tensor("m", "bool", (8,)).add_shard("m", 0, [0],
                                                                [8])
    dst = ctx.layout().add_tensor("m", "bool", (8,)).add_shard("m", 1, [0],
                                                                [8])
    with ctx.plan(src, dst) as plan:
        a = torch.tensor([True, False] * 4)
        b = torch.zeros(8, dtype=torch.bool)
        plan.bind("src", 0, 0, a)
        plan.bind("dst", 1, 0, b)
        plan.execute()
        assert torch.equal(a, b)


def test_torch_cuda_tensor_on_a_host_context(ctx):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with torch_plan(ctx, "float32") as plan:
        with pytest.raises(reshard.ArgumentError) as ei:
            plan.bind("dst", 2, 0, torch.zeros(6, 5, device="cuda"))
        assert ei.value.status == Status.WRONG_MEMORY


class Exporter:
    """Something that exports memory by DLPack alone."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, *args, **kwargs):
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_the_deleter_runs_on_rebind_and_close(ctx):
    """A DLPack exporter's managed tensor holds a reference on the array;
    the plan calls its deleter when it lets go."""
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("numpy without DLPack")
    src, dst = rows_to_cols(ctx, dtype="float32")
    plan = ctx.plan(src, dst)
    a = np.zeros((6, 5), np.float32)
    e = Exporter(a)
    base = sys.getrefcount(a)
    plan.bind("dst", 2, 0, e)
    assert sys.getrefcount(a) == base + 1  # held by the managed tensor
    plan.bind("dst", 2, 0, np.zeros((6, 5), np.float32))
    assert sys.getrefcount(a) == base  # deleter called
    plan.bind("dst", 2, 0, e)
    assert sys.getrefcount(a) == base + 1
    full = np.arange(54, dtype=np.float32).reshape(6, 9)
    plan.bind("src", 0, 0, full[:3].copy())
    plan.bind("src", 1, 0, full[3:].copy())
    plan.bind("dst", 3, 0, np.zeros((6, 4), np.float32))
    plan.execute()
    np.testing.assert_array_equal(a, full[:, :5])
    plan.close()
    gc.collect()
    assert sys.getrefcount(a) == base
    # the exporter object is no longer referenced by the plan either
    r = weakref.ref(e)
    del e
    gc.collect()
    assert r() is None


def test_refused_dlpack_binding_releases_at_once(ctx):
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("numpy without DLPack")
    src, dst = rows_to_cols(ctx, dtype="float32")
    with ctx.plan(src, dst) as plan:
        a = np.zeros(3, np.float32)
        base = sys.getrefcount(a)
        with pytest.raises(reshard.ArgumentError):
            plan.bind("dst", 2, 0, Exporter(a))  # too small
        gc.collect()
        assert sys.getrefcount(a) == base
