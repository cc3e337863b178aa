# SPDX-License-Identifier: Apache-2.0
"""No bind moves wrong data: dtypes exactly, shapes against the shard,
strided (FSDP2) shards as several boxes, memory that moved refused."""
from __future__ import annotations

import random
from typing import Any, List, Sequence

import numpy as np
import pytest

import reshard
from reshard import Replicate, Shard, ShardedTensor, Status, StridedShard


def chunk_rows(n: int, pieces: int, i: int) -> List[int]:
    """torch.chunk's rows, written out independently of the library."""
    size = -(-n // pieces)
    return list(range(n))[i * size:(i + 1) * size]


def fsdp2_rows(n: int, dp: int, tp: int, d: int, t: int) -> List[int]:
    """FSDP2 over TP on dim 0: TP chunks first, then FSDP chunks them."""
    tp_rows = chunk_rows(n, tp, t)
    return [tp_rows[k] for k in chunk_rows(len(tp_rows), dp, d)]


def run_to_full(src_layout_fn, shape, locals_by_rank, dtype=np.float32):
    """Sources on ranks 0..n-1 (as given), one full copy on rank n."""
    n = len(locals_by_rank)
    with reshard.Context.local(n + 1) as ctx:
        src = ctx.layout().add_tensor("w", dtype, shape)
        src_layout_fn(src)
        dst = ctx.layout().add_tensor("w", dtype, shape)
        dst.add_shard("w", n, [0] * len(shape), shape)
        with ctx.plan(src, dst) as plan:
            for rank, local in locals_by_rank.items():
                if local.size:  # an empty shard has no buffer
                    plan.bind("src", rank, 0, local)
            out = np.zeros(shape, dtype)
            plan.bind("dst", n, 0, out)
            plan.execute()
            return out


def test_strided_shard_rows_as_torch_keeps_them():
    """(dp=2, tp=2), [_StridedShard(0, 2), Shard(0)], [8, 3]: rows 4-5 on
    (0, 1), rows 2-3 on (1, 0); one axis alone gives two boxes."""
    full = np.arange(24, dtype=np.float32).reshape(8, 3)
    mesh = reshard.DeviceMesh((2, 2), [0, 1, 2, 3])
    places = [StridedShard(0, 2), Shard(0)]
    locals_ = {r: full[fsdp2_rows(8, 2, 2, r // 2, r % 2)].copy()
               for r in range(4)}
    assert locals_[1][0, 0] == 12 and locals_[2][0, 0] == 6
    out = run_to_full(lambda s: s.add_dtensor("w", mesh=mesh,
                                              placements=places),
                      (8, 3), locals_)
    assert np.array_equal(out, full)


def test_uneven_strided_needs_to_know_who_made_it():
    """(dp=3, tp=2) over 7 rows: distribute_tensor and FSDP2 differ."""
    full = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    mesh = reshard.DeviceMesh((3, 2), range(6))
    places = [StridedShard(0, 2), Shard(0)]
    with reshard.Context.local(7) as ctx:
        lay = ctx.layout().add_tensor("w", "f32", (7, 2))
        with pytest.raises(reshard.ArgumentError) as ei:
            lay.add_dtensor("w", mesh=mesh, placements=places)
        assert "strided='fsdp2'" in ei.value.message
        assert "'w'" in ei.value.message
    locals_ = {r: full[fsdp2_rows(7, 3, 2, r // 2, r % 2)].copy()
               for r in range(6)}
    assert locals_[4].shape == (0, 2) and locals_[5][0, 0] == 12
    out = run_to_full(lambda s: s.add_dtensor("w", mesh=mesh,
                                              placements=places,
                                              strided="fsdp2"),
                      (7, 2), locals_)
    assert np.array_equal(out, full)


def test_partial_is_refused_with_what_to_do():
    class Partial:  # the shape of torch's, without torch
        reduce_op = "sum"

        def __repr__(self) -> str:
            return "Partial(sum)"

    with reshard.Context.local(2) as ctx:
        lay = ctx.layout().add_tensor("w", "f32", (4, 4))
        with pytest.raises(reshard.UnsupportedError, match="reduce"):
            lay.add_dtensor("w", mesh_shape=(2,), placements=[Partial()])


def test_a_torch_style_device_mesh_is_read():
    class TorchLikeMesh:  # torch.distributed.DeviceMesh's attributes
        mesh = np.array([[3, 1], [2, 0]])
        mesh_dim_names = ("dp", "tp")

    m = reshard.DeviceMesh.of(TorchLikeMesh())
    assert m.shape == (2, 2) and m.ranks == (3, 1, 2, 0)
    assert m.dim_names == ("dp", "tp") and m.coordinate(2) == (1, 0)
    with reshard.Context.local(4) as ctx:
        lay = ctx.layout().add_tensor("w", "f32", (4, 4))
        lay.add_dtensor("w", mesh=TorchLikeMesh(),
                        placements=[Shard(0), Replicate()])
        assert lay.buffer_bytes(3) == 2 * 4 * 4


def test_library_messages_name_python_calls():
    with reshard.Context.local(2) as ctx:
        src = ctx.layout().add_tensor("w", "f32", (4,)).add_shard(
            "w", 0, [0], [4])
        dst = ctx.layout().add_tensor("w", "f32", (4,)).add_shard(
            "w", 1, [0], [4])
        with ctx.plan(src, dst) as plan:
            with pytest.raises(reshard.ArgumentError) as ei:
                plan.execute()
            assert "Plan.bind" in ei.value.message
            assert "rs_" not in ei.value.message

# ---- property: every accepted bind is exact, every other refused ------------

DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32,
          "u8": np.uint8, "f64": np.float64, "i16": np.int16}


def _candidates(rng: random.Random, shape: Sequence[int], dt: Any) -> List[Any]:
    n = int(np.prod(shape))
    itemsize = np.dtype(dt).itemsize
    others = [d for d in DTYPES.values() if d is not dt]
    wrong = rng.choice(others)
    out = [np.zeros(shape, dt), np.zeros(n, dt), np.zeros(shape[::-1], dt),
           np.zeros((n,) + (1,), dt), np.zeros(n * itemsize, np.uint8),
           bytearray(n * itemsize), np.zeros(max(n - 1, 0), dt),
           np.zeros(tuple(shape) + (1,), dt), np.zeros(shape, wrong),
           np.zeros(n * itemsize // np.dtype(wrong).itemsize or 1, wrong),
           np.zeros(n + 1, dt)]
    if len(shape) == 2 and shape[0] > 1:
        out.append(np.zeros((shape[0] - 1, shape[1] + 1), dt))
    return out


def _meaning_kept(obj: Any, shape: Sequence[int], dt: Any) -> bool:
    """Whether reading ``obj`` as its user would sees the shard: typed
    objects by their own shape, bytes as the shard's row-major bytes."""
    if isinstance(obj, bytearray):
        return True
    if obj.dtype == np.uint8 and dt is not np.uint8:
        return True
    if obj.dtype != dt:
        return False
    return obj.shape == tuple(shape) or obj.ndim == 1


def test_property_accepted_binds_are_exact_the_rest_refused():
    rng = random.Random(45)
    accepted = refused = 0
    for case in range(60):
        name = rng.choice(sorted(DTYPES))
        dt = DTYPES[name]
        shape = (rng.randint(1, 5), rng.randint(1, 6))
        full_shape = (shape[0], shape[1] * 2)
        full = (np.arange(np.prod(full_shape)) % 120 + 1).astype(dt).reshape(
            full_shape)
        with reshard.Context.local(3) as ctx:
            src = ctx.layout().add_tensor("w", name, full_shape)
            src.add_shard("w", 0, [0, 0], full_shape)
            dst = ctx.layout().add_tensor("w", name, full_shape)
            dst.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[1, 2],
                            placements=[Shard(1)])
            with ctx.plan(src, dst) as plan:
                plan.bind("src", 0, 0, full.copy())
                plan.bind("dst", 2, 0, np.zeros(shape, dt))
                for obj in _candidates(rng, shape, dt):
                    try:
                        plan.bind("dst", 1, 0, obj)
                    except reshard.Error:
                        refused += 1
                        continue
                    plan.execute()
                    accepted += 1
                    want = np.ascontiguousarray(full[:, :shape[1]])
                    got = np.frombuffer(obj, np.uint8)[:want.nbytes]
                    assert got.tobytes() == want.tobytes(), (name, obj)
                    assert _meaning_kept(obj, shape, dt), (
                        "accepted but read wrong: %s %r for %s %s" % (
                            type(obj).__name__, getattr(obj, "shape", None),
                            name, shape))
    assert accepted > 100 and refused > 100

# ---- state dicts ---------------------------------------------------------------


def test_state_dict_in_one_call_fsdp2_style_to_tp():
    """Trainer ranks 0-3 hold an FSDP2-over-TP state dict (ShardedTensor,
    the DTensor stand-in); engine ranks 4-5 hold TP shards; bound by name."""
    mesh = reshard.DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))
    shapes = {"q": (12, 4), "o": (4, 12), "norm": (4,)}
    full = {k: np.arange(np.prod(s), dtype=np.float32).reshape(s) + i * 1000
            for i, (k, s) in enumerate(shapes.items())}
    places = {"q": [StridedShard(0, 2), Shard(0)], "o": [Shard(0), Shard(1)],
              "norm": [Replicate(), Replicate()]}

    def trainer_sd(rank: int):
        sd = {}
        for k, s in shapes.items():
            runs = reshard.mesh.dtensor_local_runs(s, mesh.shape, places[k],
                                                   mesh.coordinate(rank))
            idx = [sum((list(range(a, a + n)) for a, n in r), [])
                   for r in runs]
            local = full[k][np.ix_(*idx)].copy()
            sd[k] = ShardedTensor(local, s, mesh, tuple(places[k]))
        return sd

    engine = reshard.DeviceMesh((2,), [4, 5], ("tp",))
    eng_places = {"q": [Shard(0)], "o": [Shard(1)], "norm": [Replicate()]}
    with reshard.Context.local(6) as ctx:
        src = ctx.layout()
        sds = {r: trainer_sd(r) for r in range(4)}
        for r in range(4):  # as each trainer process would, for itself
            if r == 0:
                src.add_state_dict(sds[r], rank=r)
            else:
                for i, (k, v) in enumerate(sds[r].items()):
                    src.add_dtensor(k, mesh=mesh, placements=v.placements,
                                    buffer=i, only_rank=r)
                    src.name_buffer(r, k, i)
        dst = ctx.layout()
        eng_sd = {r: {} for r in (4, 5)}
        for k, s in shapes.items():
            for r in (4, 5):
                lshape = engine.local_shape(s, eng_places[k], r)
                eng_sd[r][k] = ShardedTensor(np.zeros(lshape, np.float32), s,
                                             engine, tuple(eng_places[k]))
        dst.add_state_dict(eng_sd[4])  # every engine rank, one process
        with ctx.plan(src, dst) as plan:
            for r in range(4):
                plan.bind_state_dict("src", r, sds[r])
            for r in (4, 5):
                plan.bind_state_dict("dst", r, eng_sd[r])
            plan.execute()
        for k in shapes:
            for r in (4, 5):
                off, ext = engine.local_box(shapes[k], eng_places[k], r)
                sl = tuple(slice(o, o + e) for o, e in zip(off, ext))
                assert np.array_equal(eng_sd[r][k].local, full[k][sl]), (k, r)
        with ctx.plan(src, dst) as plan:
            with pytest.raises(reshard.ArgumentError) as ei:
                plan.bind_state_dict("dst", 4, {"q": eng_sd[4]["q"],
                                                "extra": eng_sd[4]["q"]})
            assert "extra" in ei.value.message and "norm" in ei.value.message


def test_plain_arrays_in_a_state_dict_need_a_rank():
    with reshard.Context.local(2) as ctx:
        with pytest.raises(reshard.ArgumentError, match="rank="):
            ctx.layout().add_state_dict({"w": np.zeros(3, np.float32)})
        lay = ctx.layout().add_state_dict(
            {"w": np.zeros(3, np.uint16)}, rank=1, dtypes={"w": "bf16"})
        assert lay.tensors["w"].dtype == reshard.DType.BF16
        assert lay.buffer_bytes(1, 0) == 6

# ---- torch: memory that moves, parameters ---------------------------------------


def _torch():
    return pytest.importorskip("torch")


def _torch_plan(ctx: Any, torch: Any):
    src = ctx.layout().add_tensor("w", "f32", (4, 3)).add_shard(
        "w", 0, [0, 0], [4, 3])
    dst = ctx.layout().add_tensor("w", "f32", (4, 3)).add_shard(
        "w", 1, [0, 0], [4, 3])
    return ctx.plan(src, dst)


def test_torch_resize_while_bound_is_refused_not_written():
    torch = _torch()
    with reshard.Context.local(2) as ctx, _torch_plan(ctx, torch) as plan:
        plan.bind("src", 0, 0, torch.arange(12, dtype=torch.float32)
                  .reshape(4, 3))
        out = torch.zeros(4, 3)
        plan.bind("dst", 1, 0, out)
        out.resize_(64, 64).zero_()  # torch moves its storage
        for run in (plan.execute, plan.execute_async):
            with pytest.raises(reshard.ArgumentError) as ei:
                run()
            assert "resized" in ei.value.message
            assert "dst buffer 0 of rank 1" in ei.value.message
        assert not out.any()
        out2 = torch.zeros(4, 3)
        plan.bind("dst", 1, 0, out2)  # bound again: runs
        plan.execute()
        assert out2.flatten().tolist() == list(range(12))


def test_torch_parameter_that_requires_grad_binds_through_detach():
    torch = _torch()
    with reshard.Context.local(2) as ctx, _torch_plan(ctx, torch) as plan:
        w = torch.nn.Parameter(torch.arange(12, dtype=torch.float32)
                               .reshape(4, 3))
        assert w.requires_grad
        plan.bind("src", 0, 0, w)
        out = torch.nn.Parameter(torch.zeros(4, 3))
        plan.bind("dst", 1, 0, out)
        assert plan.bound("dst", 1) is out
        plan.execute()
        assert out.detach().flatten().tolist() == list(range(12))
        with pytest.raises(reshard.ArgumentError, match="f16"):
            plan.bind("dst", 1, 0, torch.zeros(4, 3, dtype=torch.float16))
        with pytest.raises(reshard.ArgumentError, match=r"shape \(3, 4\)"):
            plan.bind("dst", 1, 0, torch.zeros(3, 4))


def test_recipe_engine_buffers_are_checked_and_bound_by_name():
    import reshard.recipes as recipes
    cfg = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
           "hidden_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 2,
           "head_dim": 16, "intermediate_size": 48, "vocab_size": 64,
           "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    with reshard.Context.local(4) as ctx:
        src, dst, buffers = recipes.layouts(ctx, cfg, train="tp=2",
                                            infer="tp=2")
        qkv = [(k, v) for k, v in buffers.items() if k[0] == 2 and
               v[0].endswith("qkv_proj.weight")]
        assert len(qkv) == 1
        (rank, buf), (name, nbytes) = qkv[0]
        with ctx.plan(src, dst) as plan:
            with pytest.raises(reshard.ArgumentError) as ei:
                plan.bind("dst", rank, buf, np.zeros(nbytes // 2, np.float16))
            assert name in ei.value.message and "bf16" in ei.value.message
            plan.bind("dst", rank, buf, np.zeros(nbytes // 2, np.uint16))
            with pytest.raises(reshard.ArgumentError, match="missing"):
                plan.bind_state_dict("dst", rank, {name: np.zeros(
                    nbytes // 2, np.uint16)})
        src.close()
        dst.close()
