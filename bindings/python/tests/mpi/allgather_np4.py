# SPDX-License-Identifier: Apache-2.0
"""Between processes: run under `mpirun -np 4` (ctest: python.mpi.np4).

Every rank describes only its own shards (add_dtensor(..., only_rank=me)),
Layout.allgather() shares them, then every rank plans (keeping only its
own part, which must be its moves of the whole plan), binds its own
buffers, executes and checks every element of what it received; the
sources change and the same plan runs again. With rounds by domain pair
each rank then plans only its own part, with its peers, and runs it. Then a rank that adds
another rank's shard is refused, and ranks that disagree on their inputs
get a MismatchError on every rank and keep a usable context.

Source: TP2 x DP2 on ranks 0-3 (mesh [DP, TP]). Destination: TP4 on the
ranks in reverse order (so that every shard moves), with the two tensors
in one fused buffer per rank.
"""
import sys
import traceback

import numpy as np
from mpi4py import MPI

import reshard
from reshard import DeviceMesh, Replicate, Shard

comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
TENSORS = [("w", "float32", (10, 12), 0), ("b", "bf16", (12,), 0)]
SRC_MESH = DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))
DST_MESH = DeviceMesh((4,), [3, 2, 1, 0], ("tp",))


def full_tensors(step):
    rng = np.random.default_rng(100 + step)
    return {"w": rng.standard_normal((10, 12)).astype(np.float32),
            "b": rng.integers(0, 1 << 16, 12, dtype=np.uint16)}


def box(full, b):
    offset, extent = b
    return full[tuple(slice(o, o + e) for o, e in zip(offset, extent))]


def describe(ctx, mesh, place_of, fused):
    """This rank's shards only; returns (layout, {name: (offset, box)},
    buffer bytes)."""
    lay = ctx.layout()
    where, offset = {}, 0
    for name, dt, shape, _ in TENSORS:
        lay.add_tensor(name, dt, shape)
        place = place_of(name)
        b = mesh.local_box(shape, place, me)
        buf = 0 if fused else len(where)
        off = offset if fused else 0
        lay.add_dtensor(name, mesh=mesh, placements=place, buffer=buf,
                        byte_offset=off, only_rank=me)
        if b is not None and all(e > 0 for e in b[1]):
            nbytes = int(np.prod(b[1])) * reshard.dtype(dt).itemsize
            where[name] = (buf, off, b)
            if fused:
                offset += (nbytes + 63) // 64 * 64
    lay.allgather()
    return lay, where, offset


def src_place(name):
    return [Replicate(), Shard(0)] if name == "w" else [Replicate(),
                                                        Replicate()]


def dst_place(name):
    return [Shard(1)] if name == "w" else [Shard(0)]


def views(where, buffers):
    out = {}
    for name, dt, _, _ in TENSORS:
        if name not in where:
            continue
        buf, off, (_, extent) = where[name]
        t = np.float32 if dt == "float32" else np.uint16
        k = int(np.prod(extent))
        mem = buffers[buf]
        out[name] = mem[off:off + k * np.dtype(t).itemsize].view(t) \
            .reshape(extent)
    return out


def run_and_check(plan, swhere, dwhere, dbytes, steps):
    """Bind this rank's buffers (one per source tensor, one fused
    destination), refuse another rank's, execute `steps` times with new
    sources (the second asynchronously) and check every element."""
    sbufs = {}
    for name, dt, _, _ in TENSORS:
        buf, _, (_, extent) = swhere[name]
        size = int(np.prod(extent)) * reshard.dtype(dt).itemsize
        sbufs[buf] = np.zeros(size, np.uint8)
        plan.bind("src", me, buf, sbufs[buf])
    dbuf = np.zeros(dbytes, np.uint8)
    plan.bind("dst", me, 0, dbuf)
    with_errors = False
    try:
        plan.bind("src", (me + 1) % 4, 0, sbufs[0])
    except reshard.ArgumentError as e:  # only its own rank
        with_errors = True
        assert e.status == reshard.Status.UNKNOWN_RANK, e
    assert with_errors
    for step in range(steps):
        full = full_tensors(step)
        for name, v in views(swhere, sbufs).items():
            v[...] = box(full[name], swhere[name][2])
        dbuf.fill(0xEE)
        if step == 0:
            plan.execute()
        else:  # the asynchronous way
            plan.execute_async()
            while not plan.test():
                pass
        for name, v in views(dwhere, {0: dbuf}).items():
            want = box(full[name], dwhere[name][2])
            assert np.array_equal(v, want), (me, step, name)


def main():
    assert n == 4, "run with mpirun -np 4"
    with reshard.Context.mpi(comm) as ctx:
        assert ctx.rank == me and ctx.world_size == 4
        assert ctx.transport is reshard.Transport.MPI
        ctx.timeout_ms = 30000
        ctx.set_domain_size(2)
        src, swhere, _ = describe(ctx, SRC_MESH, src_place, fused=False)
        dst, dwhere, dbytes = describe(ctx, DST_MESH, dst_place, fused=True)
        # every rank now holds every rank's shards
        assert src.num_shards == 8, src.num_shards  # 4 ranks x 2 tensors
        assert dst.num_shards == 8, dst.num_shards
        with reshard.Plan(src, dst) as whole:
            mine = [m for m in whole.moves
                    if me in (m["src"]["rank"], m["dst"]["rank"])]
        ctx.plan_part = me  # each rank keeps only its own part
        with reshard.Plan(src, dst) as plan:
            assert plan.moves == mine, (me, plan.moves, mine)
            fps = comm.allgather(plan.fingerprint)
            assert len(set(fps)) == 1, fps
            stats = plan.stats()
            assert stats == comm.bcast(stats, root=0)
            run_and_check(plan, swhere, dwhere, dbytes, steps=2)
        # Per-rank planning: with rounds by domain pair each rank plans
        # only its own part, with its peers (Plan is then collective), and
        # gets the whole plan's moves of its own, figures and rounds.
        ctx.plan_part = -1
        ctx.rounds = reshard.Rounds.BY_DOMAIN_PAIR
        with reshard.Plan(src, dst) as whole:
            mine = [m for m in whole.moves
                    if me in (m["src"]["rank"], m["dst"]["rank"])]
            whole_stats = [whole.stats(r) for r in range(4)]
        ctx.plan_part = me
        with reshard.Plan(src, dst) as plan:
            assert plan.moves == mine, (me, plan.moves, mine)
            assert [plan.stats(r) for r in range(4)] == whole_stats
            run_and_check(plan, swhere, dwhere, dbytes, steps=1)
        ctx.rounds = reshard.Rounds.PACKED
        # a shard of another rank cannot be allgathered
        lay = ctx.layout().add_tensor("x", "f32", (4,))
        lay.add_shard("x", (me + 1) % 4, [me], [1])
        try:
            lay.allgather()
        except reshard.ArgumentError as e:
            assert e.status == reshard.Status.INVALID_ARGUMENT and e.message
        else:
            raise AssertionError("allgather took another rank's shard")
        lay.close()
        ctx.plan_part = -1
        # ranks that disagree: MismatchError everywhere, context usable
        a = ctx.layout().add_tensor("m", "u8", (8,)).add_shard(
            "m", me, [2 * me], [2])
        b = ctx.layout().add_tensor("m", "u8", (8,)).add_shard(
            "m", me, [2 * ((me + 1) % 4)], [2])
        a.allgather()
        b.allgather()
        if me == 3:
            ctx.staging_bytes = 1 << 20  # a plan input of its own
        try:
            with reshard.Plan(a, b) as bad:
                x, y = np.zeros(2, np.uint8), np.zeros(2, np.uint8)
                bad.bind("src", me, 0, x)
                bad.bind("dst", me, 0, y)
                bad.execute()
        except reshard.MismatchError as e:
            assert e.status == reshard.Status.MISMATCH and e.message
        else:
            raise AssertionError("ranks with different inputs ran a plan")
        if me == 3:
            ctx.staging_bytes = 256 << 20
        with reshard.Plan(a, b) as good:
            x = np.full(2, me, np.uint8)
            y = np.zeros(2, np.uint8)
            good.bind("src", me, 0, x)
            good.bind("dst", me, 0, y)
            good.execute()
            assert (y == (me + 1) % 4).all(), (me, y)
    comm.Barrier()
    if me == 0:
        print("python.mpi.np4: 4 ranks, allgathered layouts, executed and "
              "checked twice; a part planned per rank executed and checked; "
              "mismatch detected and recovered")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        comm.Abort(1)
    sys.exit(rc)
