# SPDX-License-Identifier: Apache-2.0
"""Every failure raises reshard.Error with status, name and message, of the
class of its status group."""
import builtins
import pickle

import numpy as np
import pytest

import reshard
from reshard import Replicate, Shard, Status

from conftest import rows_to_cols

GROUPS = {
    1: reshard.ArgumentError, 2: reshard.LayoutError,
    3: reshard.UnsupportedError, 4: reshard.ResourceError,
    5: reshard.TransportError, 9: reshard.InternalError,
}


@pytest.mark.parametrize("status", [s for s in Status if s != Status.OK])
def test_every_status_has_its_class(status):
    cls = reshard.error_class(status)
    assert issubclass(cls, GROUPS[status // 100])
    e = cls(status, status.c_name, "detail")
    assert isinstance(e, reshard.Error)
    assert e.status == status and isinstance(e.status, int)
    assert e.name == "RS_ERR_" + status.name
    assert e.message == "detail"
    assert status.c_name in str(e) and "detail" in str(e)


def test_transport_subclasses():
    assert reshard.error_class(501) is reshard.TimeoutError
    assert reshard.error_class(502) is reshard.MismatchError
    assert reshard.error_class(503) is reshard.CorruptError
    assert reshard.error_class(500) is reshard.TransportError
    for cls in (reshard.TimeoutError, reshard.MismatchError,
                reshard.CorruptError):
        assert issubclass(cls, reshard.TransportError)
    # `except TimeoutError` (the built-in) catches libreshard's too
    assert issubclass(reshard.TimeoutError, builtins.TimeoutError)
    assert issubclass(reshard.ArgumentError, ValueError)
    e = reshard.TimeoutError(501, "RS_ERR_TIMEOUT", "rank 3 went silent")
    assert str(e) == "RS_ERR_TIMEOUT (501): rank 3 went silent"
    assert e.status == 501 and e.message == "rank 3 went silent"


def test_unknown_statuses_fall_into_their_group():
    assert reshard.error_class(199) is reshard.ArgumentError
    assert reshard.error_class(599) is reshard.TransportError
    assert reshard.error_class(42) is reshard.Error
    e = reshard.error_class(599)(599)
    assert e.status == 599 and e.name == "RS_ERR_599"


def test_errors_pickle():
    e = reshard.MismatchError(502, "RS_ERR_MISMATCH", "plan differs")
    f = pickle.loads(pickle.dumps(e))
    assert type(f) is reshard.MismatchError
    assert (f.status, f.name, f.message) == (502, "RS_ERR_MISMATCH",
                                             "plan differs")


def test_argument_errors_from_the_library(ctx):
    lay = ctx.layout().add_tensor("w", "bf16", (4, 4))
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_tensor("w", "bf16", (4, 4))
    e = ei.value
    assert e.status == Status.DUPLICATE_NAME == 107
    assert e.name == "RS_ERR_DUPLICATE_NAME"
    assert "'w'" in e.message
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_shard("w", 9, [0, 0], [4, 4])
    assert ei.value.name == "RS_ERR_UNKNOWN_RANK" and "9" in ei.value.message
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_shard("nope", 0, [0, 0], [4, 4])
    assert ei.value.status == Status.UNKNOWN_TENSOR
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_shard("w", 0, [2, 0], [4, 4])
    assert ei.value.status == Status.OUT_OF_BOUNDS
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_tensor("x", "f32", [])
    assert ei.value.status in (Status.BAD_SHAPE, Status.INVALID_ARGUMENT)
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_tensor("y", "f32", [2] * 17)
    assert ei.value.status == Status.TOO_MANY_DIMS
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[0, 0],
                        placements=[Shard(0)])
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert ei.value.message
    with pytest.raises(reshard.ArgumentError) as ei:
        reshard.Context.local(0)
    assert ei.value.status == Status.INVALID_ARGUMENT
    assert ei.value.message
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.set_param("staging_bytes", 1)
    assert ei.value.status == Status.BAD_PARAM
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.set_param("no_such_param", 1)
    assert ei.value.status == Status.BAD_PARAM


def test_layout_errors(ctx):
    a = ctx.layout().add_tensor("w", "f32", (4, 4)).add_shard(
        "w", 0, [0, 0], [4, 4])
    b = ctx.layout().add_tensor("w", "f32", (4, 5)).add_shard(
        "w", 1, [0, 0], [4, 5])
    with pytest.raises(reshard.LayoutError) as ei:
        ctx.plan(a, b)
    assert ei.value.status == Status.INCOMPATIBLE
    assert ei.value.name == "RS_ERR_INCOMPATIBLE"
    assert "w" in ei.value.message
    c = ctx.layout().add_tensor("w", "f32", (4, 4)).add_shard(
        "w", 0, [0, 0], [2, 4])
    d = ctx.layout().add_tensor("w", "f32", (4, 4)).add_shard(
        "w", 1, [0, 0], [4, 4])
    with pytest.raises(reshard.LayoutError) as ei:
        ctx.plan(c, d)
    assert ei.value.status == Status.NOT_COVERED
    assert "w" in ei.value.message


def test_unsupported_dtype_change(ctx):
    # Since 0.4 f32, bf16 and f16 convert into each other (and into
    # block-scaled fp8); any other pair is refused when planning.
    a = ctx.layout().add_tensor("w", "i32", (4,)).add_shard("w", 0, [0], [4])
    b = ctx.layout().add_tensor("w", "f32", (4,)).add_shard("w", 1, [0], [4])
    with pytest.raises(reshard.UnsupportedError) as ei:
        ctx.plan(a, b)
    assert ei.value.status == Status.UNSUPPORTED
    assert ei.value.name == "RS_ERR_UNSUPPORTED"
    assert "i32" in ei.value.message and "f32" in ei.value.message
    # fp8 without its scales declared (Layout.set_block_scales)
    c = ctx.layout().add_tensor("w", "f8_e4m3", (4,)).add_shard(
        "w", 1, [0], [4])
    with pytest.raises(reshard.UnsupportedError) as ei:
        ctx.plan(b, c)
    assert "set_block_scales" in ei.value.message
    d = ctx.layout().add_tensor("w", "bf16", (4,)).add_shard("w", 1, [0], [4])
    with ctx.plan(b, d):  # a cast: planned
        pass


def test_layout_across_contexts(ctx):
    other = reshard.Context.local(4)
    a = ctx.layout().add_tensor("w", "f32", (4,)).add_shard("w", 0, [0], [4])
    b = other.layout().add_tensor("w", "f32", (4,)).add_shard("w", 1, [0],
                                                               [4])
    with pytest.raises(reshard.ArgumentError) as ei:
        reshard.Plan(a, b)
    assert ei.value.status == Status.WRONG_CONTEXT
    other.close()


def test_transport_error_after_abort(ctx, simple):
    plan, full, s, d = simple
    from conftest import bind_all
    bind_all(plan, s, d)
    plan.execute()
    ctx.abort()
    with pytest.raises(reshard.TransportError) as ei:
        plan.execute()
    assert ei.value.status == Status.TRANSPORT
    assert ei.value.name == "RS_ERR_TRANSPORT"
    assert ei.value.message
    # fail-stop: it stays done
    with pytest.raises(reshard.TransportError):
        plan.execute()


def test_no_nccl_here_is_unsupported_or_works():
    try:
        uid = reshard.nccl_unique_id()
    except reshard.UnsupportedError as e:
        assert e.status == Status.UNSUPPORTED and e.message
    except reshard.TransportError as e:  # NCCL present, no usable GPU
        assert e.message
    else:
        assert isinstance(uid, bytes) and len(uid) == 128
    with pytest.raises(reshard.ArgumentError):
        reshard.Context.nccl_id(b"short", 0, 1, 0)
    try:
        c = reshard.Context.nccl_devices([0])
    except (reshard.UnsupportedError, reshard.TransportError,
            reshard.ArgumentError) as e:
        assert e.message
    else:
        assert c.transport == reshard.Transport.NCCL
        c.close()


def test_closed_handles_refuse(ctx):
    lay = ctx.layout()
    lay.close()
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_tensor("w", "f32", (4,))
    assert ei.value.status == Status.NULL_POINTER
    assert "closed" in ei.value.message
    lay.close()  # twice is fine


def test_python_side_checks(ctx):
    lay = ctx.layout()
    with pytest.raises(TypeError):
        lay.add_tensor("w", "f32", (4.0,))
    with pytest.raises(ValueError):
        lay.add_tensor("w", "complex64", (4,))
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_tensor("w", "f32", (1 << 64,))
    assert ei.value.status == Status.OVERFLOW and str(1 << 64) in \
        ei.value.message
    lay.add_tensor("w", "f32", (4,))
    with pytest.raises(reshard.ArgumentError) as ei:
        lay.add_shard("w", 1 << 40, [0], [4])
    assert ei.value.status == Status.UNKNOWN_RANK
