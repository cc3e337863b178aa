# SPDX-License-Identifier: Apache-2.0
"""What the Python layer costs: plan.execute() from Python beside
rs_plan_execute called from C (through ctypes, on the very same rs_plan
handle, in this process), for a 64 MiB reshard; and the time of binding a
buffer (numpy, bytearray, torch via DLPack) beside rs_plan_bind.

The plan: a 4096 x 8192 bf16 tensor (64 MiB), rows split over ranks 0-1,
columns split over ranks 2-5, every rank in this process
(Context.local(6)). Python and C executions alternate so that both see
the same caches and clocks; the table gives medians.

    python3 bench/overhead.py            # 64 MiB, 30 runs each
    python3 bench/overhead.py --quick    # 4 MiB, a smoke test (ctest)
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time

import numpy as np

import reshard
from reshard import Shard


def loaded_libreshard() -> ctypes.CDLL:
    """The libreshard this process already loaded (through the
    extension), so that ctypes calls the same code on the same handles."""
    path = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libreshard.so" in line:
                path = line.split()[-1]
                break
    lib = ctypes.CDLL(path or "libreshard.so.0")
    lib.rs_plan_execute.argtypes = [ctypes.c_void_p]
    lib.rs_plan_execute.restype = ctypes.c_int
    lib.rs_plan_bind.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_void_p,
                                 ctypes.c_size_t]
    lib.rs_plan_bind.restype = ctypes.c_int
    return lib


def median_time(fn, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return "%.3f ms" % (seconds * 1e3)
    return "%.2f us" % (seconds * 1e6)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="4 MiB and few runs (a smoke test)")
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    rows, cols = (4096, 8192) if not args.quick else (1024, 2048)
    runs = args.runs or (30 if not args.quick else 5)
    nbytes = rows * cols * 2

    lib = loaded_libreshard()
    with reshard.Context.local(6) as ctx:
        src = ctx.layout().add_tensor("w", "bf16", (rows, cols)).add_dtensor(
            "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(0)])
        dst = ctx.layout().add_tensor("w", "bf16", (rows, cols)).add_dtensor(
            "w", mesh_shape=(4,), mesh_ranks=[2, 3, 4, 5],
            placements=[Shard(1)])
        with ctx.plan(src, dst) as plan:
            full = np.random.default_rng(0).integers(
                0, 1 << 16, (rows, cols), dtype=np.uint16)
            s = [full[: rows // 2].copy(), full[rows // 2:].copy()]
            d = [np.zeros((rows, cols // 4), np.uint16) for _ in range(4)]
            for r in range(2):
                plan.bind("src", r, 0, s[r])
            for r in range(4):
                plan.bind("dst", 2 + r, 0, d[r])
            handle = plan.handle_address

            def c_execute():
                st = lib.rs_plan_execute(handle)
                if st:
                    raise RuntimeError("rs_plan_execute: %d" % st)

            for _ in range(3):  # warm: staging allocated, pages touched
                plan.execute()
                c_execute()
            py_t, c_t = [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                plan.execute()
                t1 = time.perf_counter()
                c_execute()
                t2 = time.perf_counter()
                py_t.append(t1 - t0)
                c_t.append(t2 - t1)
            for r in range(4):
                np.testing.assert_array_equal(
                    d[r], full[:, r * cols // 4:(r + 1) * cols // 4])
            py_exec, c_exec = statistics.median(py_t), statistics.median(c_t)

            # binding: the same source buffer again, several ways
            k = 2000 if not args.quick else 200
            arr = s[0]
            ba = bytearray(arr.nbytes)
            addr = arr.ctypes.data
            size = arr.nbytes
            bind_np = median_time(lambda: plan.bind("src", 0, 0, arr), k)
            bind_ba = median_time(lambda: plan.bind("src", 0, 0, ba), k)
            bind_c = median_time(
                lambda: lib.rs_plan_bind(handle, 0, 0, 0, addr, size), k)
            bind_torch = None
            try:
                import torch
                t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
                bind_torch = median_time(lambda: plan.bind("src", 0, 0, t), k)
            except ImportError:
                pass
            plan.bind("src", 0, 0, arr)

            ratio = py_exec / c_exec
            print("libreshard %s, Python %s: a %d x %d bf16 tensor (%d MiB), "
                  "rows over 2 ranks -> columns over 4, in process; "
                  "medians of %d runs" % (reshard.library_version,
                                          sys.version.split()[0], rows, cols,
                                          nbytes >> 20, runs))
            print("%-34s %14s %14s %8s" % ("", "Python", "C (ctypes)",
                                           "ratio"))
            print("%-34s %14s %14s %8.3f" % ("plan.execute()", fmt(py_exec),
                                             fmt(c_exec), ratio))
            print("%-34s %14s %14s %8.1f" % ("bind a numpy array",
                                             fmt(bind_np), fmt(bind_c),
                                             bind_np / bind_c))
            print("%-34s %14s %14s %8.1f" % ("bind a bytearray", fmt(bind_ba),
                                             fmt(bind_c), bind_ba / bind_c))
            if bind_torch is not None:
                print("%-34s %14s %14s %8.1f" % (
                    "bind a torch tensor (DLPack)", fmt(bind_torch),
                    fmt(bind_c), bind_torch / bind_c))
            print("execute from Python / from C: %.3f (target <= 1.10): %s"
                  % (ratio, "met" if ratio <= 1.10 else "NOT met"))
            if not args.quick and ratio > 1.10:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
