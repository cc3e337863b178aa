# SPDX-License-Identifier: Apache-2.0
"""What torch's DTensor really stores on each rank, as a fixture.

Runs with real torch >= 2.4 on CPU (no GPU, no other process: a "fake"
process group stands in for the ranks). For random meshes, shapes and
placements (Shard, Replicate, _StridedShard), every mesh coordinate's local
tensor is made by ``distribute_tensor(..., src_data_rank=None)`` from a
tensor holding each element's own index, so its values say which global
elements it holds; and for FSDP2 over TP, ``fully_shard`` of a module whose
weight is TP-sharded gives the placements FSDP2 reports and the memory it
keeps. torch's own ``compute_local_shape_and_global_offset`` is recorded
beside (for uneven sizes with _StridedShard it disagrees with the memory;
the memory is what counts).

    python3 generate.py --cases 10000 --fsdp 600 --out cases.json.gz

The test ``test_dtensor_torch.py`` compares libreshard with the committed
output, and with torch live where torch >= 2.4 is installed.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch.distributed.tensor import (DeviceMesh, Replicate, Shard,
                                      distribute_tensor)
from torch.distributed.tensor._utils import \
    compute_local_shape_and_global_offset
from torch.distributed.tensor.placement_types import _StridedShard
from torch.testing._internal.distributed.fake_pg import FakeStore

Runs = List[List[int]]


def encode_placement(p: Any) -> List[int]:
    """["R"], ["S", dim] or ["SS", dim, split_factor]."""
    if isinstance(p, _StridedShard):
        return ["SS", p.dim, int(p.split_factor)]
    if isinstance(p, Shard):
        return ["S", p.dim]
    if isinstance(p, Replicate):
        return ["R"]
    raise ValueError("unexpected placement %r" % (p,))


def decode_placement(e: Sequence[Any]) -> Any:
    if e[0] == "SS":
        return _StridedShard(e[1], split_factor=e[2])
    return Shard(e[1]) if e[0] == "S" else Replicate()


def runs_of(local: torch.Tensor, shape: Sequence[int]) -> Any:
    """The global indices a local tensor of element numbers holds, per
    dimension as runs [start, length]; raises if they are not a product
    of one list per dimension (libreshard's model of a local tensor).
    An empty local tensor: {"empty": its shape}."""
    if local.numel() == 0:
        return {"empty": list(local.shape)}
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    flat = local.reshape(-1).to(torch.int64).tolist()
    lists = []
    for d in range(len(shape)):
        index = [0] * local.dim()
        values = []
        for i in range(local.shape[d]):
            index[d] = i
            values.append(int(local[tuple(index)].item()) // strides[d]
                          % shape[d])
        lists.append(values)
    expect = [0]
    for d, values in enumerate(lists):
        expect = [e + v * strides[d] for e in expect for v in values]
    if expect != flat:
        raise AssertionError("the local tensor is not a product of index "
                             "lists")
    out = []
    for values in lists:
        runs: Runs = []
        for v in values:
            if runs and runs[-1][0] + runs[-1][1] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        out.append(runs)
    return out


_WORLD = 64


def _init(rank: int = 0, world: int = _WORLD) -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank,
                            world_size=world)


def _mesh_at(mesh_shape: Sequence[int], coord: Sequence[int]) -> DeviceMesh:
    """A mesh of the fake world's ranks with this process (rank 0) at
    ``coord``; no process groups (distribute_tensor with
    src_data_rank=None needs none)."""
    n = math.prod(mesh_shape)
    index = 0
    for c, s in zip(coord, mesh_shape):
        index = index * s + c
    ranks = list(range(1, n))
    ranks.insert(index, 0)
    return DeviceMesh("cpu", torch.tensor(ranks).reshape(tuple(mesh_shape)),
                      _init_backend=False)


def coordinates(mesh_shape: Sequence[int]) -> List[Tuple[int, ...]]:
    out: List[Tuple[int, ...]] = [()]
    for s in mesh_shape:
        out = [c + (i,) for c in out for i in range(s)]
    return out


def distribute_case(shape: Sequence[int], mesh_shape: Sequence[int],
                    placements: Sequence[Any]) -> Dict[str, Any]:
    """Every coordinate's memory and torch's helper, for one case."""
    full = torch.arange(math.prod(shape), dtype=torch.float64).reshape(
        tuple(shape))
    local, helper = [], []
    for coord in coordinates(mesh_shape):
        mesh = _mesh_at(mesh_shape, coord)
        t = distribute_tensor(full, mesh, list(placements),
                              src_data_rank=None)
        local.append(runs_of(t.to_local(), shape))
        lshape, offset = compute_local_shape_and_global_offset(
            tuple(shape), mesh, list(placements))
        helper.append([list(lshape), list(offset)])
    return {"kind": "distribute", "shape": list(shape),
            "mesh": list(mesh_shape),
            "placements": [encode_placement(p) for p in placements],
            "local": local, "helper": helper}


def fsdp_dtensors(shape: Sequence[int], dp: int, tp: int, tp_dim: int
                  ) -> Tuple[torch.Tensor, List[Tuple[Tuple[int, ...], Any]]]:
    """A Linear whose weight (element numbers) is TP-sharded on
    ``tp_dim`` over (dp, tp), then fully_shard over dp: the full weight
    and, per mesh coordinate, the DTensor parameter FSDP2 keeps there."""
    from torch.distributed.fsdp import fully_shard
    full = torch.arange(math.prod(shape), dtype=torch.float32).reshape(
        tuple(shape))
    out = []
    for coord in coordinates((dp, tp)):
        _init(coord[0] * tp + coord[1], dp * tp)
        mesh = DeviceMesh("cpu", torch.arange(dp * tp).reshape(dp, tp),
                          mesh_dim_names=("dp", "tp"))
        m = torch.nn.Linear(shape[1], shape[0], bias=False)
        with torch.no_grad():
            m.weight = torch.nn.Parameter(distribute_tensor(
                full, mesh["tp"], [Shard(tp_dim)], src_data_rank=None))
        fully_shard(m, mesh=mesh["dp"])
        out.append((coord, m.weight))
    _init()
    return full, out


def fsdp_case(shape: Sequence[int], dp: int, tp: int,
              tp_dim: int) -> Dict[str, Any]:
    """FSDP2's placements and memory for fsdp_dtensors(...)."""
    _, weights = fsdp_dtensors(shape, dp, tp, tp_dim)
    placements = None
    local = []
    for _, w in weights:
        got = [encode_placement(p) for p in w.placements]
        if placements is None:
            placements = got
        elif got != placements:
            raise AssertionError("placements differ between ranks")
        local.append(runs_of(w.to_local().detach(), shape))
    return {"kind": "fsdp2", "shape": list(shape), "mesh": [dp, tp],
            "tp_dim": tp_dim, "placements": placements, "local": local}


def random_case(rng: random.Random) -> Tuple[List[int], List[int],
                                             List[Any]]:
    ndim = rng.randint(1, 3)
    shape = [rng.randint(1, 13) for _ in range(ndim)]
    axes = rng.randint(1, 3)
    while True:
        mesh = [rng.randint(1, 4) for _ in range(axes)]
        if math.prod(mesh) <= 16:
            break
    placements: List[Any] = []
    for _ in range(axes):
        k = rng.random()
        d = rng.randrange(ndim)
        if k < 0.2:
            placements.append(Replicate())
        elif k < 0.55:
            placements.append(Shard(d))
        else:
            placements.append(_StridedShard(d, split_factor=rng.randint(1, 4)))
    return shape, mesh, placements


def generate(cases: int, fsdp: int, seed: int) -> Dict[str, Any]:
    rng = random.Random(seed)
    _init()
    out: List[Dict[str, Any]] = []
    refused = 0
    while len(out) < cases:
        shape, mesh, placements = random_case(rng)
        try:
            out.append(distribute_case(shape, mesh, placements))
        except (RuntimeError, ValueError, AssertionError) as e:
            refused += 1  # torch refuses the placements: not a case
            if refused > cases:
                raise SystemExit("torch refused too many cases: %s" % e)
    for _ in range(fsdp):
        dp, tp = rng.randint(1, 4), rng.randint(1, 4)
        shape = [rng.randint(1, 13), rng.randint(1, 13)]
        out.append(fsdp_case(shape, dp, tp, rng.randint(0, 1)))
    dist.destroy_process_group()
    return {"torch": torch.__version__, "seed": seed,
            "torch_refused": refused, "cases": out}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--fsdp", type=int, default=600)
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--out", default="cases.json.gz")
    args = ap.parse_args(argv)
    data = generate(args.cases, args.fsdp, args.seed)
    with gzip.open(args.out, "wt", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    print("%d cases (%d refused by torch) from torch %s -> %s"
          % (len(data["cases"]), data["torch_refused"], data["torch"],
             args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
