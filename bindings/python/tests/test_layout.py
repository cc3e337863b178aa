# SPDX-License-Identifier: Apache-2.0
"""Layouts in DTensor vocabulary, dtypes, serialization, plan inspection."""
import json

import numpy as np
import pytest

import reshard
from reshard import DeviceMesh, DType, Replicate, Shard, Status


@pytest.mark.parametrize("spelling,want", [
    ("bf16", DType.BF16), ("bfloat16", DType.BF16), ("torch.bfloat16",
                                                      DType.BF16),
    ("float32", DType.F32), ("f32", DType.F32), ("F32", DType.F32),
    ("fp16", DType.F16), ("float16", DType.F16), ("uint8", DType.U8),
    ("int64", DType.I64), ("bool", DType.BOOL), ("f8_e4m3", DType.F8_E4M3),
    ("float8_e4m3fn", DType.F8_E4M3), ("float8_e5m2", DType.F8_E5M2),
    (np.float32, DType.F32), (np.dtype("int16"), DType.I16),
    (np.uint64, DType.U64), (np.bool_, DType.BOOL), (11, DType.F32),
    (DType.F64, DType.F64),
])
def test_dtype_spellings(spelling, want):
    assert reshard.dtype(spelling) is want


def test_dtype_sizes():
    assert DType.BF16.itemsize == 2 and DType.F64.itemsize == 8
    assert DType.F8_E5M2.itemsize == 1 and str(DType.BF16) == "bf16"
    with pytest.raises(ValueError):
        reshard.dtype("float128")
    with pytest.raises(ValueError):
        reshard.dtype(99)


def test_torch_dtypes():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    assert reshard.dtype(torch.bfloat16) is DType.BF16
    assert reshard.dtype(torch.float32) is DType.F32
    assert reshard.dtype(torch.int8) is DType.I8
    assert reshard.dtype(torch.bool) is DType.BOOL


def test_mesh():
    m = DeviceMesh((2, 2), [4, 5, 6, 7], ("dp", "tp"))
    assert m.coordinate(5) == (0, 1) and m.coordinate(6) == (1, 0)
    assert m.coordinate(0) is None and 7 in m and 3 not in m
    assert m.rank_at((1, 1)) == 7 and m.axis("tp") == 1
    assert m.local_box((8, 6), [Replicate(), Shard(0)], 7) == ((4, 0),
                                                               (4, 6))
    assert m.local_shape((8, 6), [Shard(1), Shard(0)], 6) == (4, 3)
    with pytest.raises(ValueError):
        DeviceMesh((2, 2), [0, 1, 2])
    with pytest.raises(ValueError):
        DeviceMesh((2,), [1, 1])
    with pytest.raises(ValueError):
        Shard(-1)
    with pytest.raises(reshard.Error) as e:  # a rank is a C int
        DeviceMesh((2,), [0, 1 << 31])
    assert e.value.status == Status.UNKNOWN_RANK and "2147483648" in str(
        e.value)


def test_uneven_shards_follow_torch_chunk():
    # 5 rows over 4: chunk 2 -> 2, 2, 1, 0
    ext = [reshard.dtensor_local_box([5, 3], [4], [Shard(0)], [i])[1][0]
           for i in range(4)]
    assert ext == [2, 2, 1, 0]
    # two axes sharding one dim nest left to right
    assert reshard.dtensor_local_box([8], [2, 2], [Shard(0), Shard(0)],
                                     [1, 0]) == ((4,), (2,))


def test_only_rank_describes_the_same_layout():
    """Each rank describing its own shard adds up to add_dtensor for all."""
    with reshard.Context.local(8) as ctx:
        mesh = DeviceMesh((2, 2), [0, 1, 2, 3])
        place = [Replicate(), Shard(1)]
        whole = ctx.layout().add_tensor("w", "bf16", (7, 5))
        whole.add_dtensor("w", mesh=mesh, placements=place, buffer=1,
                          byte_offset=64)
        parts = ctx.layout().add_tensor("w", "bf16", (7, 5))
        for r in range(8):  # ranks 4..7 are not in the mesh: nothing
            parts.add_dtensor("w", mesh_shape=(2, 2),
                              mesh_ranks=[0, 1, 2, 3], placements=place,
                              buffer=1, byte_offset=64, only_rank=r)
        assert whole.num_shards == parts.num_shards == 4
        dst = ctx.layout().add_tensor("w", "bf16", (7, 5)).add_dtensor(
            "w", mesh_shape=(4,), mesh_ranks=[4, 5, 6, 7],
            placements=[Shard(0)])
        with ctx.plan(whole, dst) as p1, ctx.plan(parts, dst) as p2:
            assert p1.fingerprint == p2.fingerprint
        # 7x5 bf16 over tp=2 on dim 1: 3 columns on tp 0 -> 7*3*2 bytes
        assert whole.buffer_bytes(0, 1) == 64 + 42
        assert parts.buffer_bytes(1, 1) == 64 + 7 * 2 * 2


def test_serialize_roundtrip(ctx):
    a = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(1)])
    data = a.serialize()
    assert isinstance(data, bytes) and len(data) > 0
    b = ctx.layout().deserialize(data)
    assert b.num_tensors == 1 and b.num_shards == 2
    with pytest.raises(reshard.CorruptError) as ei:
        ctx.layout().deserialize(data[:-3])
    assert ei.value.status == Status.CORRUPT
    with pytest.raises(reshard.MismatchError):  # declared differently
        ctx.layout().add_tensor("w", "f32", (4, 7)).deserialize(data)


def test_allgather_on_local_is_unsupported(ctx):
    lay = ctx.layout()
    with pytest.raises(reshard.UnsupportedError) as ei:
        lay.allgather()
    assert ei.value.status == Status.UNSUPPORTED


def test_plan_inspection(ctx):
    src = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(0)])
    dst = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[2, 3], placements=[Replicate()])
    ctx.set_domain_size(2)
    assert ctx.domains == [0, 0, 1, 1]
    with ctx.plan(src, dst) as plan:
        s = plan.stats()
        assert set(s) == set(reshard.STAT_NAMES)
        # 96 bytes cross into domain 1 once, then are forwarded inside it
        assert s["bytes_sent_inter"] == 96
        assert s["bytes_sent_intra"] == 96
        assert s["bytes_recv_inter"] + s["bytes_recv_intra"] == 192
        per_rank = [plan.stats(r) for r in range(4)]
        for k in ("bytes_sent_inter", "bytes_recv_intra", "moves"):
            assert sum(p[k] for p in per_rank) == s[k]
        j = plan.to_json()
        assert j["world_size"] == 4 and len(j["moves"]) == plan.num_moves
        assert len(plan.moves) == plan.num_moves
        assert json.loads(plan.to_json_text()) == j
        assert plan.num_tensors == 1
        assert plan.fingerprint == plan.fingerprint
        with pytest.raises(reshard.ArgumentError) as ei:
            plan.stats(4)
        assert ei.value.status == Status.UNKNOWN_RANK
        with pytest.raises(reshard.ArgumentError):
            plan.stat("bytes_everywhere")


def test_plan_part(ctx):
    """A plan's part: only that rank's moves, every rank's figures."""
    src = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(0)])
    dst = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[2, 3], placements=[Replicate()])
    assert ctx.plan_part == -1
    with ctx.plan(src, dst) as whole:
        for rank in range(4):
            ctx.plan_part = rank
            with ctx.plan(src, dst) as part:
                mine = [m for m in whole.moves
                        if rank in (m["src"]["rank"], m["dst"]["rank"])]
                assert part.moves == mine and part.num_moves == len(mine)
                assert part.to_json()["part"] == rank
                assert part.stats() == whole.stats()
                assert part.fingerprint == whole.fingerprint
                with pytest.raises(reshard.UnsupportedError):
                    part.execute()
    ctx.plan_part = -1
    ctx.plan_part = 4  # any rank may be asked for; the plan refuses it
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.plan(src, dst)
    assert ei.value.status == Status.UNKNOWN_RANK
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.plan_part = -2
    assert ei.value.status == Status.BAD_PARAM


def test_plan_without_boxes(ctx):
    """A plan made without boxes: the same moves, figures and fingerprint,
    no box in its moves, and it does not run."""
    src = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(0)])
    dst = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[2, 3], placements=[Replicate()])
    assert ctx.plan_boxes is True
    with ctx.plan(src, dst) as whole:
        ctx.plan_boxes = False
        assert ctx.get_param("plan_boxes") == 0
        with ctx.plan(src, dst) as bare:
            assert bare.to_json()["boxes"] is False
            assert whole.to_json()["boxes"] is True
            assert bare.moves == [
                {k: v for k, v in m.items() if k not in ("offset", "extent")}
                for m in whole.moves]
            assert bare.stats() == whole.stats()
            assert bare.fingerprint == whole.fingerprint
            with pytest.raises(reshard.UnsupportedError):
                bare.execute()
        ctx.plan_boxes = True
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.set_param("plan_boxes", 2)
    assert ei.value.status == Status.BAD_PARAM


def test_rounds_by_domain_pair(ctx):
    """Rounds by domain pair: another fingerprint, the same bytes between
    the same ranks, and a setting outside rs_rounds refused."""
    src = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[0, 1], placements=[Shard(0)])
    dst = ctx.layout().add_tensor("w", "f32", (4, 6)).add_dtensor(
        "w", mesh_shape=(2,), mesh_ranks=[2, 3], placements=[Replicate()])
    assert ctx.rounds is reshard.Rounds.PACKED
    with ctx.plan(src, dst) as packed:
        ctx.rounds = reshard.Rounds.BY_DOMAIN_PAIR
        assert ctx.get_param("rounds") == 1
        with ctx.plan(src, dst) as paired:
            assert paired.fingerprint != packed.fingerprint
            for k in ("bytes_sent_intra", "bytes_sent_inter", "bytes_local"):
                assert paired.stats()[k] == packed.stats()[k], k
        ctx.rounds = reshard.Rounds.PACKED
    with pytest.raises(reshard.ArgumentError) as ei:
        ctx.set_param("rounds", 2)
    assert ei.value.status == Status.BAD_PARAM


def test_context_settings(ctx):
    assert ctx.world_size == 4 and ctx.rank is None
    assert ctx.ranks == [0, 1, 2, 3]
    assert ctx.transport is reshard.Transport.LOCAL
    ctx.set_domain(3, 7)
    assert ctx.domain(3) == 7
    ctx.staging_bytes = 1 << 20
    assert ctx.get_param("staging_bytes") == 1 << 20
    ctx.integrity = True
    assert ctx.integrity is True
    ctx.set_param(reshard.Param.TIMEOUT_MS, 5000)
    assert ctx.timeout_ms == 5000
    assert "local" in repr(ctx)


def test_add_state_dict_reads_placements_of_every_tensor(ctx):
    """add_state_dict converts a mesh or a placement tuple once per call
    (by identity); a placement list may be one object changed between
    tensors, and each tensor's own must still be read."""
    import numpy as np
    from reshard import Replicate, Shard

    kinds = [[Shard(0)], [Replicate()], [Shard(1)]]
    local = {0: (4, 6), 1: (8, 6), 2: (8, 3)}
    shared: list = []  # one list, refilled at every access
    mesh = reshard.DeviceMesh((2,), [0, 1])

    class Duck:
        def __init__(self, i):
            self.i = i
            self.shape = (8, 6)
            self.local = np.zeros(local[i % 3], np.float32)

        dtype = property(lambda self: self.local.dtype)
        device_mesh = property(lambda self: mesh)

        @property
        def placements(self):
            shared[:] = kinds[self.i % 3]
            return shared

        def to_local(self):
            return self.local

    sd = {"t%d" % i: Duck(i) for i in range(30)}
    lay = ctx.layout().add_state_dict(sd, rank=0)
    for i in range(30):
        assert lay._needs[(0, i)].regions[0].shape == local[i % 3], i
