#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run the CPU benches several times and print each closing-table figure as
min and median over the runs, with the machine's load before each run: the
numbers the README's Figures table quotes.

Usage: bench/figures.py [--runs N] [--build DIR] [--only NAME[,NAME...]]
                        [--log FILE]

Each bench prints its own closing table (bench_common.h: figure, measured,
baseline, meas/base); this script reads those rows back, takes the first
number of each cell, and prints min / median per cell over the runs. A run
that fails or prints no table is reported and counts as a failure (exit 1).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

MPIRUN = ["mpirun", "--oversubscribe"] + (
    ["--allow-run-as-root"] if os.geteuid() == 0 else []) + ["-np", "8"]

# name -> (argv after the binary, runs through mpirun)
BENCHES = {
    "bench_mpi_refit": (["2", "5", "1"], True),  # integrity off and on too
    "bench_colocated": ([], True),
    "bench_mpi_fp8": ([], True),
    "bench_exec_local": (["5"], False),
    "bench_async_overlap": (["9"], False),
    "bench_convert": ([], False),
    "bench_plan_dsv3": (["3"], False),
    "bench_plan_blowups": ([], False),
    "bench_hostile_input": ([], False),
    "bench_published": ([], False),
}

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def table_rows(text):
    """The closing table's rows: (figure, [cells...]); its columns are the
    runs of dashes under its header (bench_common.h prints them)."""
    rows, lines = [], text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if not line.startswith("figure") or not lines[i + 1].startswith("--"):
            continue
        spans = [(m.start(), m.end())
                 for m in re.finditer(r"-+", lines[i + 1])]
        rows = []
        for row in lines[i + 2:]:
            gap = spans[0][1]  # a row has a blank between its columns
            if not row.strip() or (len(row) > gap and row[gap] != " "):
                break
            cells = [row[lo:hi].strip() for lo, hi in spans[:-1]]
            cells.append(row[spans[-1][0]:].strip())
            rows.append((cells[0], cells[1:]))
    return rows


# Lines outside the tables that carry a bench's verdict: (figure, regex
# whose group is the number).
EXTRA = [
    ("integrity on/off", re.compile(r"^integrity: .* on/off ([\d.]+)x")),
    ("fp8 time (min) vs bf16", re.compile(r"^\s*time \(min\)\s+([\d.]+)x")),
    ("fp8 bytes vs bf16", re.compile(r"^\s*bytes moved\s+([\d.]+)x")),
]


def extra_rows(text):
    rows = []
    for fig, rx in EXTRA:
        for line in text.splitlines():
            m = rx.search(line)
            if m:
                rows.append((fig, [m.group(1)]))
                break
    return rows


def first_number(cell):
    m = NUMBER.search(cell)
    return float(m.group()) if m else None


def fmt(values):
    nums = [v for v in values if v is not None]
    if not nums:
        return "-"
    lo, med = min(nums), statistics.median(nums)
    return f"{lo:g} / {med:g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--only", default="")
    ap.add_argument("--log", default="")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        sys.exit(f"figures.py: unknown bench {', '.join(unknown)}; "
                 f"known: {', '.join(BENCHES)}")
    log = open(a.log, "w") if a.log else None
    failed = False
    for name in names:
        args, mpi = BENCHES[name]
        exe = os.path.join(a.build, "bench", name)
        if not os.access(exe, os.X_OK):
            print(f"{name}: {exe} not built")
            failed = True
            continue
        runs, loads = [], []
        for i in range(a.runs):
            loads.append(load())
            cmd = (MPIRUN if mpi else []) + [exe] + args
            p = subprocess.run(cmd, capture_output=True, text=True)
            if log:
                log.write(f"==== {name} run {i + 1}: {' '.join(cmd)}\n")
                log.write(p.stdout + p.stderr)
            rows = table_rows(p.stdout) + extra_rows(p.stdout)
            if p.returncode != 0 or not rows:
                print(f"{name}: run {i + 1} failed (exit {p.returncode}, "
                      f"{len(rows)} table rows)")
                failed = True
                continue
            runs.append(dict(rows))
        if not runs:
            continue
        print(f"\n{name}: {len(runs)} runs, load before each "
              f"{', '.join(f'{x:.2f}' for x in loads)}; cells are "
              f"min / median over the runs")
        for fig in runs[0]:
            ncols = len(runs[0][fig])
            cols = [fmt([first_number(r[fig][c]) for r in runs
                         if fig in r and c < len(r[fig])])
                    for c in range(ncols)]
            print(f"  {fig:<34} " + " ".join(f"{c:>22}" for c in cols))
    if log:
        log.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
