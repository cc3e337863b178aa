# SPDX-License-Identifier: Apache-2.0
"""A 64-tensor state dict through Python beside the same work through the
C API (ctypes calls on the same library, in this process).

Trainer ranks 0-3 hold an FSDP2-over-TP state dict (mesh dp=2 x tp=2:
column-parallel weights [StridedShard(0, 2), Shard(0)], row-parallel ones
[Shard(0), Shard(1)]); engine ranks 4-7 hold TP shards. Python:
``add_state_dict`` (each trainer rank for itself, the engine in one
call), ``Context.plan``, ``bind_state_dict`` on every rank, ``execute``.
C: the same tensors and shards (the boxes Python computed, replayed as
rs_layout_add_tensor / rs_layout_add_shard), rs_plan_create,
rs_plan_bind of every buffer, rs_plan_execute. Runs alternate; medians.
Then each later sync: the same plan, bound once, executed again
(``Plan.execute`` beside ``rs_plan_execute`` on the same handle). The
eight ranks live in this one process, so the first sync's Python work is
eight ranks' worth; a trainer or engine process does its own rank's.

    python3 bench/state_dict.py            # 64 x 1 MiB bf16, 15 runs
    python3 bench/state_dict.py --quick    # 64 x 64 KiB (ctest)
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from typing import Any, Dict, List, Tuple

import numpy as np

import reshard
from overhead import loaded_libreshard  # this folder
from reshard import Shard, ShardedTensor, StridedShard

BF16 = int(reshard.DType.BF16)
TRAIN = reshard.DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))
ENGINE = reshard.DeviceMesh((4,), [4, 5, 6, 7], ("tp",))


def library() -> ctypes.CDLL:
    lib = loaded_libreshard()
    P, I, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    sig = {
        "rs_layout_create": [P, ctypes.POINTER(P)],
        "rs_layout_destroy": [P],
        "rs_layout_add_tensor": [P, ctypes.c_char_p, I, I,
                                 ctypes.POINTER(L)],
        "rs_layout_add_shard": [P, ctypes.c_char_p, I, ctypes.POINTER(L),
                                ctypes.POINTER(L), I, L, ctypes.POINTER(L)],
        "rs_plan_create": [P, P, ctypes.POINTER(P)],
        "rs_plan_destroy": [P],
        "rs_plan_bind": [P, I, I, I, P, ctypes.c_size_t],
        "rs_plan_execute": [P],
    }
    for name, args in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None if name.endswith("destroy") else I
    return lib


def state_dicts(n: int, rows: int, cols: int):
    rng = np.random.default_rng(0)
    train: Dict[int, Dict[str, Any]] = {r: {} for r in TRAIN.ranks}
    engine: Dict[int, Dict[str, Any]] = {r: {} for r in ENGINE.ranks}
    for i in range(n):
        name = "layers.%d.w" % i
        column = i % 2 == 0
        places = (StridedShard(0, 2), Shard(0)) if column else \
            (Shard(0), Shard(1))
        eng = (Shard(0),) if column else (Shard(1),)
        full = rng.integers(0, 1 << 16, (rows, cols), dtype=np.uint16)
        for r in TRAIN.ranks:
            runs = reshard.mesh.dtensor_local_runs(full.shape, TRAIN.shape,
                                                   places,
                                                   TRAIN.coordinate(r))
            idx = [np.concatenate([np.arange(a, a + k) for a, k in rr])
                   for rr in runs]
            train[r][name] = ShardedTensor(full[np.ix_(*idx)].copy(),
                                           full.shape, TRAIN, places)
        for r in ENGINE.ranks:
            shape = ENGINE.local_shape(full.shape, eng, r)
            engine[r][name] = ShardedTensor(np.zeros(shape, np.uint16),
                                            full.shape, ENGINE, eng)
    return train, engine


def python_sync(ctx, train, engine) -> None:
    src = ctx.layout()
    for r, sd in train.items():
        src.add_state_dict(sd, rank=r, dtypes={k: "bf16" for k in sd})
    dst = ctx.layout().add_state_dict(
        engine[ENGINE.ranks[0]], dtypes={k: "bf16" for k in
                                         engine[ENGINE.ranks[0]]})
    with ctx.plan(src, dst) as plan:
        for r, sd in train.items():
            plan.bind_state_dict("src", r, sd)
        for r, sd in engine.items():
            plan.bind_state_dict("dst", r, sd)
        plan.execute()
    src.close()
    dst.close()


def recorded_shards(ctx, train, engine) -> Tuple[List[Any], List[Any]]:
    """What Python added, replayed by the C baseline: per side, the
    tensor declarations and the add_shard calls."""
    calls: Tuple[List[Any], List[Any]] = ([], [])
    real = reshard.Layout._add_box

    def record(side):
        def spy(self, name, rank, off, ext, buf, boff, strides):
            calls[side].append(("shard", name, rank, list(off), list(ext),
                                buf, boff, list(strides)))
            return real(self, name, rank, off, ext, buf, boff, strides)
        return spy
    for side, (sds, one) in enumerate(((train, False), (engine, True))):
        reshard.Layout._add_box = record(side)
        try:
            lay = ctx.layout()
            items = [(ENGINE.ranks[0], sds[ENGINE.ranks[0]])] if one else \
                list(sds.items())
            for r, sd in items:
                for name, v in sd.items():
                    if name not in lay.tensors and \
                            ("tensor", name, v.shape) not in calls[side]:
                        calls[side].append(("tensor", name, v.shape))
                bf16 = {k: "bf16" for k in sd}
                if one:
                    lay.add_state_dict(sd, dtypes=bf16)
                else:
                    lay.add_state_dict(sd, rank=r, dtypes=bf16)
            if one:  # plain placements go to the C library whole
                for i, (name, v) in enumerate(sds[ENGINE.ranks[0]].items()):
                    for r in ENGINE.ranks:
                        off, ext = ENGINE.local_box(v.shape, v.placements, r)
                        calls[side].append(("shard", name, r, list(off),
                                            list(ext), i, 0, []))
            lay.close()
        finally:
            reshard.Layout._add_box = real
    return calls


def c_sync(lib, ctx_ptr: int, calls, buffers) -> None:
    L = ctypes.c_int64
    lays = []
    for side in (0, 1):
        h = ctypes.c_void_p()
        assert lib.rs_layout_create(ctx_ptr, ctypes.byref(h)) == 0
        for c in calls[side]:
            if c[0] == "tensor":
                shape = (L * len(c[2]))(*c[2])
                assert lib.rs_layout_add_tensor(h, c[1].encode(), BF16,
                                                len(c[2]), shape) == 0
            else:
                _, name, rank, off, ext, buf, boff, strides = c
                n = len(off)
                st = (L * n)(*strides) if strides else None
                assert lib.rs_layout_add_shard(
                    h, name.encode(), rank, (L * n)(*off), (L * n)(*ext),
                    buf, boff, st) == 0
        lays.append(h)
    plan = ctypes.c_void_p()
    assert lib.rs_plan_create(lays[0], lays[1], ctypes.byref(plan)) == 0
    for side, rank, buf, addr, size in buffers:
        assert lib.rs_plan_bind(plan, side, rank, buf, addr, size) == 0
    assert lib.rs_plan_execute(plan) == 0
    lib.rs_plan_destroy(plan)
    for h in lays:
        lib.rs_layout_destroy(h)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    rows, cols = (512, 1024) if not args.quick else (128, 256)
    runs = args.runs or (15 if not args.quick else 3)
    n = 64
    train, engine = state_dicts(n, rows, cols)
    lib = library()
    buffers = []
    for side, sds in ((0, train), (1, engine)):
        for r, sd in sds.items():
            for i, v in enumerate(sd.values()):
                if v.local.size:
                    buffers.append((side, r, i, v.local.ctypes.data,
                                    v.local.nbytes))
    with reshard.Context.local(8) as ctx:
        calls = recorded_shards(ctx, train, engine)
        ctx_ptr = reshard._native.handle_address(ctx._h())
        for _ in range(2):  # warm
            python_sync(ctx, train, engine)
            c_sync(lib, ctx_ptr, calls, buffers)
        py_t, c_t = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            python_sync(ctx, train, engine)
            py_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            c_sync(lib, ctx_ptr, calls, buffers)
            c_t.append(time.perf_counter() - t0)
        # each later sync: the plan made and bound once, executed again
        # (Python checks that no bound tensor moved before each run)
        src, dst = ctx.layout(), ctx.layout()
        for r, sd in train.items():
            src.add_state_dict(sd, rank=r, dtypes={k: "bf16" for k in sd})
        e0 = engine[ENGINE.ranks[0]]
        dst.add_state_dict(e0, dtypes={k: "bf16" for k in e0})
        with ctx.plan(src, dst) as plan:
            for side, sds in (("src", train), ("dst", engine)):
                for r, sd in sds.items():
                    plan.bind_state_dict(side, r, sd)
            handle = plan.handle_address
            plan.execute()
            again_py, again_c = [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                plan.execute()
                again_py.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                assert lib.rs_plan_execute(handle) == 0
                again_c.append(time.perf_counter() - t0)
    py, c = statistics.median(py_t), statistics.median(c_t)
    again = statistics.median(again_py), statistics.median(again_c)
    total = sum(v.local.nbytes for sd in train.values() for v in sd.values())
    print("libreshard %s: a %d-tensor state dict (%d x %d bf16 each, %.1f "
          "MiB held by the trainer), FSDP2 x TP (2 x 2) -> TP 4, in process; "
          "medians of %d runs" % (reshard.library_version, n, rows, cols,
                                  total / 2**20, runs))
    print("%-44s %12s %12s %8s" % ("", "Python", "C API", "ratio"))
    print("%-44s %9.3f ms %9.3f ms %8.3f" % (
        "first sync: layouts + plan + bind + execute", py * 1e3, c * 1e3,
        py / c))
    print("%-44s %9.3f ms %9.3f ms %8.3f" % (
        "each later sync: execute", again[0] * 1e3, again[1] * 1e3,
        again[0] / again[1]))
    for what, ratio in (("first sync", py / c),
                        ("each later sync", again[0] / again[1])):
        print("%s, Python / C: %.3f (target <= 1.05): %s" % (
            what, ratio, "met" if ratio <= 1.05 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
