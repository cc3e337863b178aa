#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Digests of every catalog configuration's plan, to prove a change of code
left the plans alone: the plan as rs_plan_to_json writes it (with its
fingerprint and every box, less the library's version, so that a release
alone changes no digest) and the CLI's figures (less the three wall-clock
timings), for both round rules.

  plan_digests.py --reshard PATH --write FILE   record the digests
  plan_digests.py --reshard PATH --check FILE   compare, name what differs
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

TIMINGS = ("layout_s", "create_s", "model_s")
ROUND_RULES = ("packed", "by-domain-pair")


# rs_plan_to_json opens with the library's version: {"version":"0.6.0",...
VERSION = re.compile(rb'^\{"version":"[^"]*"')


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        first = True
        for block in iter(lambda: f.read(1 << 20), b""):
            if first:
                block = VERSION.sub(b'{"version":""', block, count=1)
                first = False
            h.update(block)
    return h.hexdigest()


def figures_digest(text):
    figures = json.loads(text)
    for key in TIMINGS:
        figures["plan"].pop(key, None)
    canon = json.dumps(figures, sort_keys=True).encode()
    return hashlib.sha256(canon).hexdigest()


def configurations(reshard):
    out = subprocess.run([reshard, "configs"], check=True,
                         capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def digests(reshard):
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.json")
        svg = os.path.join(tmp, "plan.svg")
        for config in configurations(reshard):
            for rule in ROUND_RULES:
                run = subprocess.run(
                    [reshard, "plan", "--config", config, "--rounds", rule,
                     "--json", "--quiet", "--plan-json", plan, "--svg", svg],
                    capture_output=True, text=True)
                key = f"{config} {rule}"
                if run.returncode != 0:
                    rows[key] = f"failed({run.returncode}) {run.stderr.strip()}"
                    continue
                rows[key] = (f"plan={file_digest(plan)} "
                             f"figures={figures_digest(run.stdout)}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reshard", required=True, help="the reshard CLI")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    rows = digests(args.reshard)
    if args.write:
        with open(args.write, "w") as f:
            for key in sorted(rows):
                f.write(f"{key} {rows[key]}\n")
        print(f"{len(rows)} plans recorded in {args.write}")
        return 0
    want = {}
    with open(args.check) as f:
        for line in f:
            config, rule, rest = line.rstrip("\n").split(" ", 2)
            want[f"{config} {rule}"] = rest
    bad = [k for k in sorted(set(want) | set(rows)) if want.get(k) != rows.get(k)]
    for key in bad:
        print(f"differs: {key}\n  recorded {want.get(key, '(none)')}\n"
              f"  now      {rows.get(key, '(none)')}")
    print(f"{len(rows) - len(bad)} of {len(rows)} plans identical to {args.check}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
