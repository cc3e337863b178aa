#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How planning grows with the job: `reshard plan` on DeepSeek-V3 from
trainer EP16 x PP8 x EDP to inference TP8 x DP (as many GPUs on each side),
256 to 8192 GPUs a side, on dgx-h100. For each size it prints the plan's
moves, the CLI's own phase times (layouts, rs_plan_create, the cost model),
the wall and CPU time of the whole run and its peak memory, beside the
figures issue 14 reported for the same commands before the planner's
quadratic walks were removed (one loaded machine; ratios are what count).

Usage: bench/plan_scale.py [--build DIR] [--max GPUS]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

# GPUs a side -> (seconds, MiB) as issue 14 measured them before
BEFORE = {256: (0.9, 240), 1024: (5.3, 941), 4096: (40.0, 3584),
          8192: (139.0, 7168)}


def run(exe, gpus):
    edp = gpus // 128
    cmd = [exe, "plan", "--model", "DeepSeek-V3",
           "--train", f"tp=1,cp=1,ep=16,pp=8,edp={edp}",
           "--infer", f"tp=8,dp={gpus // 8}", "--cluster", "dgx-h100",
           "--quiet", "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                before.ru_stime)
    # the largest child so far: sizes only grow, so this run's
    rss_mib = after.ru_maxrss / 1024
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:]
    plan = json.loads(p.stdout)["plan"]
    return {"moves": plan["moves"], "layout_s": plan["layout_s"],
            "create_s": plan["create_s"], "model_s": plan["model_s"],
            "wall": wall, "cpu": cpu, "rss_mib": rss_mib}, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--max", type=int, default=8192)
    a = ap.parse_args()
    exe = os.path.join(a.build, "tools", "reshard")
    if not os.access(exe, os.X_OK):
        sys.exit(f"plan_scale.py: {exe} not built")
    with open("/proc/loadavg") as f:
        print(f"load before: {f.read().split()[0]}; {os.cpu_count()} cores")
    print(f"{'GPUs/side':>9} {'moves':>10} {'layouts s':>9} {'create s':>9} "
          f"{'model s':>8} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}   "
          f"before: wall s, MiB")
    failed = False
    gpus = 256
    while gpus <= a.max:
        r, err = run(exe, gpus)
        b = BEFORE.get(gpus)
        was = f"{b[0]:g} s, {b[1]} MiB" if b else "-"
        if r is None:
            print(f"{gpus:>9} failed: {' '.join(err)}")
            failed = True
        else:
            print(f"{gpus:>9} {r['moves']:>10} {r['layout_s']:>9.2f} "
                  f"{r['create_s']:>9.2f} {r['model_s']:>8.2f} "
                  f"{r['wall']:>8.2f} {r['cpu']:>8.2f} {r['rss_mib']:>9.0f}"
                  f"   {was}")
        sys.stdout.flush()
        gpus *= 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
