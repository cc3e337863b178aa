# SPDX-License-Identifier: Apache-2.0
"""The shared scenario: a weight sync from trainer TP2 x DP2 to inference TP4.

A tiny transformer (embedding, 2 decoder layers with q/k/v/o, gate/up/down
and two norms) lives on 8 ranks of one process (Context.local(8)):

- trainer ranks 0-3, mesh (2, 2) with axes [DP, TP]: column-parallel
  weights are [Replicate(), Shard(0)], row-parallel ones
  [Replicate(), Shard(1)], norms replicated; each rank keeps its shards in
  one flat buffer (tensors at byte offsets);
- inference ranks 4-7, mesh (4,) [TP]: the same placements over TP4, and
  one fused buffer per rank holding every tensor at its byte offset (as an
  engine keeps its weights).

Ranks 0-3 and 4-7 form two domains (two nodes): the plan's bytes inside
and across domains are printed. Then the plan runs, every element is
checked, the trainer's weights change (a training step), and the same plan
runs and is checked again. Weights are bf16 (carried by numpy uint16,
compared bit for bit); norms are float32.

Run: python3 examples/scenario.py  (with the package on PYTHONPATH)
"""
from __future__ import annotations

import sys
import time
from typing import Dict, List, Tuple

import numpy as np

import reshard
from reshard import DeviceMesh, Replicate, Shard

HIDDEN, HEADS, KV_HEADS, INTER, VOCAB, LAYERS = 256, 8, 4, 688, 1000, 2
HEAD_DIM = HIDDEN // HEADS
TRAINERS = DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))
ENGINE = DeviceMesh((4,), [4, 5, 6, 7], ("tp",))
WORLD, DOMAIN_SIZE, ALIGN = 8, 4, 256

COLUMN, ROW, REPLICATED = "column", "row", "replicated"


def model() -> List[Tuple[str, str, Tuple[int, ...], str]]:
    """(name, dtype, shape, parallelism) of every tensor."""
    out: List[Tuple[str, str, Tuple[int, ...], str]] = [
        ("embed_tokens", "bf16", (VOCAB, HIDDEN), COLUMN)]
    for i in range(LAYERS):
        p = "layers.%d." % i
        out += [
            (p + "q_proj", "bf16", (HEADS * HEAD_DIM, HIDDEN), COLUMN),
            (p + "k_proj", "bf16", (KV_HEADS * HEAD_DIM, HIDDEN), COLUMN),
            (p + "v_proj", "bf16", (KV_HEADS * HEAD_DIM, HIDDEN), COLUMN),
            (p + "o_proj", "bf16", (HIDDEN, HEADS * HEAD_DIM), ROW),
            (p + "gate_proj", "bf16", (INTER, HIDDEN), COLUMN),
            (p + "up_proj", "bf16", (INTER, HIDDEN), COLUMN),
            (p + "down_proj", "bf16", (HIDDEN, INTER), ROW),
            (p + "input_layernorm", "float32", (HIDDEN,), REPLICATED),
            (p + "post_attention_layernorm", "float32", (HIDDEN,),
             REPLICATED),
        ]
    out.append(("norm", "float32", (HIDDEN,), REPLICATED))
    return out


def placements(mesh: DeviceMesh, kind: str) -> List[object]:
    """One placement per mesh axis; the last axis is TP."""
    tp = {COLUMN: Shard(0), ROW: Shard(1), REPLICATED: Replicate()}[kind]
    return [Replicate()] * (mesh.ndim - 1) + [tp]


def np_dtype(name: str) -> type:
    return np.uint16 if name == "bf16" else np.float32  # bf16 as its bits


class Side:
    """One side (trainer or engine): a fused buffer per rank, every tensor
    at the same byte offset on every rank of the mesh."""

    def __init__(self, ctx: reshard.Context, mesh: DeviceMesh) -> None:
        self.mesh = mesh
        self.layout = ctx.layout()
        self.offsets: Dict[str, int] = {}
        self.boxes: Dict[Tuple[str, int], Tuple[Tuple[int, ...],
                                                Tuple[int, ...]]] = {}
        offset = 0
        for name, dt, shape, kind in model():
            place = placements(mesh, kind)
            self.layout.add_tensor(name, dt, shape)
            self.layout.add_dtensor(name, mesh=mesh, placements=place,
                                    buffer=0, byte_offset=offset)
            self.offsets[name] = offset
            largest = 0
            for rank in mesh.ranks:
                box = mesh.local_box(shape, place, rank)
                assert box is not None  # every rank of the mesh has one
                self.boxes[name, rank] = box
                n = int(np.prod(box[1])) * reshard.dtype(dt).itemsize
                largest = max(largest, n)
            offset += (largest + ALIGN - 1) // ALIGN * ALIGN
        self.nbytes = offset
        # The memory: one flat byte buffer per rank.
        self.buffers = {r: np.zeros(self.nbytes, np.uint8) for r in mesh.ranks}

    def view(self, rank: int, name: str, dt: str) -> np.ndarray:
        """The local shard of `name` on `rank`, as an array in its buffer."""
        _, extent = self.boxes[name, rank]
        t = np_dtype(dt)
        n = int(np.prod(extent))
        off = self.offsets[name]
        return self.buffers[rank][off:off + n * np.dtype(t).itemsize] \
            .view(t).reshape(extent)


def weights(step: int) -> Dict[str, np.ndarray]:
    """The full weights after training step `step`."""
    rng = np.random.default_rng(1234 + step)
    out = {}
    for name, dt, shape, _ in model():
        if dt == "bf16":
            out[name] = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
        else:
            out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


def box_of(full: np.ndarray, box: Tuple[Tuple[int, ...], Tuple[int, ...]]
           ) -> np.ndarray:
    offset, extent = box
    return full[tuple(slice(o, o + e) for o, e in zip(offset, extent))]


def load(trainer: Side, full: Dict[str, np.ndarray]) -> None:
    """Every trainer rank holds its shards of `full`."""
    for name, dt, _, _ in model():
        for rank in trainer.mesh.ranks:
            trainer.view(rank, name, dt)[...] = box_of(
                full[name], trainer.boxes[name, rank])


def verify(engine: Side, full: Dict[str, np.ndarray]) -> int:
    """Check every element of every engine rank; the bytes checked."""
    checked = 0
    for name, dt, _, _ in model():
        for rank in engine.mesh.ranks:
            got = engine.view(rank, name, dt)
            want = box_of(full[name], engine.boxes[name, rank])
            if got.shape != want.shape or not np.array_equal(
                    got.view(np.uint8), np.ascontiguousarray(want)
                    .view(np.uint8)):
                raise AssertionError("rank %d, %s: wrong elements"
                                     % (rank, name))
            checked += got.nbytes
    return checked


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else \
                "%.1f %s" % (n, unit)
        n /= 1024.0  # type: ignore[assignment]
    return str(n)


def run(verbose: bool = True) -> Dict[str, object]:
    out: Dict[str, object] = {}
    with reshard.Context.local(WORLD) as ctx:
        ctx.set_domain_size(DOMAIN_SIZE)  # ranks 0-3 and 4-7: two nodes
        trainer, engine = Side(ctx, TRAINERS), Side(ctx, ENGINE)
        with ctx.plan(trainer.layout, engine.layout) as plan:
            for rank, buf in trainer.buffers.items():
                plan.bind("src", rank, 0, buf)
            for rank, buf in engine.buffers.items():
                plan.bind("dst", rank, 0, buf)
            total = plan.stats()
            out["stats"] = total
            out["per_rank"] = [plan.stats(r) for r in range(WORLD)]
            out["moves"] = len(plan.moves)
            if verbose:
                print("trainer TP2xDP2 (ranks 0-3) -> inference TP4 (ranks "
                      "4-7), %d tensors, %s per engine rank, domains of %d"
                      % (len(model()), human(engine.nbytes), DOMAIN_SIZE))
                print("plan: %d moves, %d rounds, fingerprint %016x"
                      % (len(plan.moves), total["rounds"], plan.fingerprint))
                head = ("rank", "sent intra", "sent inter", "recv intra",
                        "recv inter", "msgs out", "msgs in")
                print("%-6s %12s %12s %12s %12s %9s %9s" % head)
                for r in range(WORLD):
                    s = plan.stats(r)
                    print("%-6d %12s %12s %12s %12s %9d %9d" % (
                        r, human(s["bytes_sent_intra"]),
                        human(s["bytes_sent_inter"]),
                        human(s["bytes_recv_intra"]),
                        human(s["bytes_recv_inter"]), s["messages_sent"],
                        s["messages_recv"]))
                print("%-6s %12s %12s %12s %12s %9d %9d" % (
                    "all", human(total["bytes_sent_intra"]),
                    human(total["bytes_sent_inter"]),
                    human(total["bytes_recv_intra"]),
                    human(total["bytes_recv_inter"]),
                    total["messages_sent"], total["messages_recv"]))
            for step in (0, 1):
                full = weights(step)
                load(trainer, full)
                for buf in engine.buffers.values():
                    buf.fill(0xA5)  # stale weights
                t0 = time.perf_counter()
                plan.execute()
                dt = time.perf_counter() - t0
                checked = verify(engine, full)
                if verbose:
                    print("step %d: executed in %.2f ms, %s checked on the "
                          "engine ranks: all equal" % (step, dt * 1e3,
                                                       human(checked)))
            out["checked"] = checked
    return out


def main() -> int:
    run(verbose=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
