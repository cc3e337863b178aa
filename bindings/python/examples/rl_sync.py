# SPDX-License-Identifier: Apache-2.0
"""An RL weight sync between processes: an FSDP2 x TP trainer into a
vLLM-style engine laid out by a recipe, checked element by element.

Run with 6 MPI processes (ctest: python.example.rl_sync)::

    mpirun -np 6 python3 examples/rl_sync.py

- Ranks 0-3 are the trainer: mesh (dp=2, tp=2), each holding its shard of
  every parameter as FSDP2 over TP keeps it (column-parallel weights
  ``[StridedShard(0, 2), Shard(0)]``, row-parallel ones
  ``[Shard(0), Shard(1)]``, norms ``[Shard(0), Replicate()]``), in a state
  dict of ``reshard.ShardedTensor`` (torch's DTensor is read the same way:
  pass a real FSDP2 state dict where torch >= 2.4 is installed).
  ``Layout.add_state_dict`` describes it.
- Ranks 4-5 are the engine: vLLM with TP 2, laid out by
  ``reshard.recipes.layouts`` from the model's config (a small Qwen3 here,
  as a dict; a ``config.json`` path works the same), with the engine's own
  parameter names and fused ``qkv_proj`` / ``gate_up_proj`` buffers. Each
  engine rank allocates those buffers and binds them by name
  (``Plan.bind_state_dict``).

The plan runs; every engine rank checks every element of every buffer
against what vLLM's TP sharding puts there (computed here independently of
the library); the trainer takes a step (its weights change) and the same
plan runs and is checked again.
"""
from __future__ import annotations

import sys
import zlib
from typing import Any, Dict, Tuple

import numpy as np
from mpi4py import MPI

import reshard
import reshard.recipes as recipes
from reshard import Replicate, Shard, ShardedTensor, StridedShard

CONFIG = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
          "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "intermediate_size": 96, "vocab_size": 200,
          "torch_dtype": "bfloat16", "tie_word_embeddings": False}
TRAIN, INFER = "tp=2,dp=2", "tp=2"
TRAINER = reshard.DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))
ENGINE_TP, ENGINE_FIRST = 2, 4
COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
          "embed_tokens", "lm_head")
ROW = ("o_proj", "down_proj")


def role(name: str) -> str:
    if any(".%s." % c in name or name.startswith(c) for c in COLUMN):
        return "column"
    if any(".%s." % r in name for r in ROW):
        return "row"
    return "norm"


def full_weight(name: str, shape: Tuple[int, ...], step: int) -> np.ndarray:
    """The trainer's weights at a step (bf16 bits, numpy uint16)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 7919 * step)
    return rng.integers(0, 1 << 16, shape, dtype=np.uint16)


def trainer_placements(name: str):
    r = role(name)
    if r == "column":
        return (StridedShard(0, 2), Shard(0))
    if r == "row":
        return (Shard(0), Shard(1))
    return (Shard(0), Replicate())


def trainer_state_dict(me: int, tensors, step: int) -> Dict[str, Any]:
    """What FSDP2 over TP keeps on rank ``me``: TP shards first, then FSDP
    chunks of them (rows), written out with numpy."""
    dp, tp = TRAINER.coordinate(me)
    sd = {}
    for name, (_, shape) in tensors.items():
        full = full_weight(name, shape, step)
        r = role(name)
        if r == "column":
            local = chunk(chunk(full, 2, tp, 0), 2, dp, 0)
        elif r == "row":
            local = chunk(chunk(full, 2, tp, 1), 2, dp, 0)
        else:
            local = chunk(full, 2, dp, 0)
        sd[name] = ShardedTensor(np.ascontiguousarray(local), shape, TRAINER,
                                 trainer_placements(name))
    return sd


def chunk(a: np.ndarray, n: int, i: int, axis: int) -> np.ndarray:
    """torch.chunk's i-th of n along ``axis`` (ceil-sized, last short)."""
    size = -(-a.shape[axis] // n)
    return a.take(range(i * size, min((i + 1) * size, a.shape[axis])),
                  axis=axis)


def vocab_rows(full: np.ndarray, t: int) -> np.ndarray:
    """vLLM's vocab-parallel rows on TP rank ``t``: the vocabulary padded
    to a multiple of 64, split evenly; padding rows are never written
    (zero here, as the engine buffers start)."""
    per = -(-full.shape[0] // 64) * 64 // ENGINE_TP
    out = np.zeros((per,) + full.shape[1:], full.dtype)
    rows = full[t * per:(t + 1) * per]
    out[:len(rows)] = rows
    return out


def engine_expected(name: str, tensors, t: int, step: int) -> np.ndarray:
    """What vLLM's TP rank ``t`` holds in its parameter ``name``."""
    def part(hf: str) -> np.ndarray:
        full = full_weight(hf, tensors[hf][1], step)
        r = role(hf)
        if "embed_tokens" in hf or hf.startswith("lm_head"):
            return vocab_rows(full, t)
        if r == "column":
            return chunk(full, ENGINE_TP, t, 0)
        if r == "row":
            return chunk(full, ENGINE_TP, t, 1)
        return full
    if name.endswith("qkv_proj.weight"):
        p = name[:-len("qkv_proj.weight")]
        return np.concatenate([part(p + x + ".weight")
                               for x in ("q_proj", "k_proj", "v_proj")])
    if name.endswith("gate_up_proj.weight"):
        p = name[:-len("gate_up_proj.weight")]
        return np.concatenate([part(p + x + ".weight")
                               for x in ("gate_proj", "up_proj")])
    return part(name)


def main() -> int:
    comm = MPI.COMM_WORLD
    with reshard.Context.mpi() as ctx:
        me, n = ctx.rank, ctx.world_size
        if n != 6:
            raise SystemExit("run with 6 processes (mpirun -np 6)")
        tensors = recipes.Model(CONFIG).tensors()
        bf16 = {k: "bf16" for k in tensors}

        src = ctx.layout()
        sd = None
        if me in TRAINER:
            sd = trainer_state_dict(me, tensors, 0)
            src.add_state_dict(sd, rank=me, dtypes=bf16, strided="fsdp2")
        else:
            for name, (dt, shape) in tensors.items():
                src.add_tensor(name, dt, shape)
        src.allgather()
        unused, dst, buffers = recipes.layouts(ctx, CONFIG, train=TRAIN,
                                               infer=INFER, rank=me)
        unused.close()
        dst.allgather()

        engine_sd = {name: np.zeros(nbytes // 2, np.uint16)
                     for (rank, _), (name, nbytes) in buffers.items()
                     if rank == me}
        with ctx.plan(src, dst) as plan:
            if sd is not None:
                plan.bind_state_dict("src", me, sd)
            if engine_sd:
                plan.bind_state_dict("dst", me, engine_sd)
            for step in (0, 1):
                if step and sd is not None:  # a training step, in place
                    for name, v in trainer_state_dict(me, tensors,
                                                      step).items():
                        sd[name].local[...] = v.local
                plan.execute()
                bad = []
                for name, got in engine_sd.items():
                    want = engine_expected(name, tensors, me - ENGINE_FIRST,
                                           step)
                    if not np.array_equal(got, want.reshape(-1)):
                        bad.append(name)
                checked = sum(v.size for v in engine_sd.values())
                counts = comm.gather((len(bad), checked, bad[:3],
                                      len(engine_sd)), root=0)
                if me == 0:
                    fails = sum(c[0] for c in counts)
                    total = sum(c[1] for c in counts)
                    print("step %d: %d bf16 elements checked on the engine "
                          "ranks, %s" % (step, total, "all equal" if not fails
                                         else "%d buffers differ: %s" % (
                                             fails, [c[2] for c in counts])))
                    if fails:
                        comm.Abort(1)
                comm.Barrier()
        if me == 0:
            print("rl_sync: FSDP2 x TP (4 ranks) -> vLLM TP 2 (2 ranks), %d "
                  "tensors into %d engine buffers per rank: ok"
                  % (len(tensors), counts[ENGINE_FIRST][3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
