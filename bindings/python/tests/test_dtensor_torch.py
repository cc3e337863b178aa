# SPDX-License-Identifier: Apache-2.0
"""DTensor boxes exactly as torch stores them.

``distribute`` cases are compared with libreshard's ``strided="distribute"``
order, FSDP2 cases with ``strided="fsdp2"``; where the sizes are uneven the
two differ, and a layout asks which one made the tensor.

The fixture ``dtensor_torch/cases.json.gz`` was written by
``dtensor_torch/generate.py`` with real torch (the version is in the file):
for random meshes, shapes and placements (Shard, Replicate, _StridedShard)
what ``distribute_tensor`` keeps on every mesh coordinate, and for FSDP2
over TP what ``fully_shard`` keeps and the placements it reports. Every
coordinate's elements, as libreshard computes them, must be those.

Where torch >= 2.4 is installed, the same comparison also runs live on
fresh random cases (``RESHARD_TORCH_LIVE_CASES``, default 300).
"""
from __future__ import annotations

import gzip
import json
import os
import pathlib
import random
from typing import Any, Dict, List, Sequence

import pytest

import reshard
from reshard import Replicate, Shard, StridedShard
from reshard.mesh import dtensor_local_runs

HERE = pathlib.Path(__file__).resolve().parent / "dtensor_torch"


def _placement(e: Sequence[Any]) -> Any:
    if e[0] == "SS":
        return StridedShard(e[1], e[2])
    return Shard(e[1]) if e[0] == "S" else Replicate()


def _coordinates(mesh: Sequence[int]) -> List[tuple]:
    out: List[tuple] = [()]
    for s in mesh:
        out = [c + (i,) for c in out for i in range(s)]
    return out


def _mismatches(case: Dict[str, Any], placements: Sequence[Any]) -> List[str]:
    bad = []
    for coord, want in zip(_coordinates(case["mesh"]), case["local"]):
        runs = dtensor_local_runs(case["shape"], case["mesh"], placements,
                                  coord, strided=case["kind"] == "fsdp2" and
                                  "fsdp2" or "distribute")
        if isinstance(want, dict):  # an empty local tensor (torch's shape
            got = [sum(n for _, n in r) for r in runs]  # of it varies)
            ok = 0 in got
        else:
            got = [[list(x) for x in r] for r in runs]
            ok = got == want
        if not ok:
            bad.append("%s %s %s at %s: torch %s, libreshard %s" % (
                case["kind"], case["shape"], case["placements"], coord, want,
                got))
    return bad


def _fixture() -> Dict[str, Any]:
    with gzip.open(HERE / "cases.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def test_fixture_every_coordinate_as_torch_stores_it():
    data = _fixture()
    cases = data["cases"]
    assert len([c for c in cases if c["kind"] == "distribute"]) >= 10000
    assert any(c["kind"] == "fsdp2" for c in cases)
    bad: List[str] = []
    strided = 0
    for case in cases:
        placements = [_placement(e) for e in case["placements"]]
        strided += any(isinstance(p, StridedShard) for p in placements)
        bad += _mismatches(case, placements)
    assert strided > 1000
    assert not bad, "%d coordinates differ from torch %s, e.g.\n%s" % (
        len(bad), data["torch"], "\n".join(bad[:10]))


def test_fixture_plain_placements_agree_with_the_c_library():
    """Without StridedShard the C library computes the box itself
    (rs_dtensor_local_box): it must agree with torch too."""
    checked = 0
    for case in _fixture()["cases"]:
        if any(e[0] == "SS" for e in case["placements"]):
            continue
        places = [_placement(e) for e in case["placements"]]
        for coord, want in zip(_coordinates(case["mesh"]), case["local"]):
            off, ext = reshard.dtensor_local_box(case["shape"], case["mesh"],
                                                 places, coord)
            if isinstance(want, dict):
                assert 0 in ext
            else:
                assert [[[o, e]] for o, e in zip(off, ext)] == want
            checked += 1
    assert checked > 1000


def test_strided_shard_example_of_the_issue():
    """Mesh (dp=2, tp=2), [_StridedShard(0, 2), Shard(0)], shape [8, 3]:
    torch puts rows 4-5 on (0, 1) and rows 2-3 on (1, 0)."""
    places = [StridedShard(0, 2), Shard(0)]
    assert dtensor_local_runs((8, 3), (2, 2), places, (0, 1)) == \
        (((4, 2),), ((0, 3),))
    assert dtensor_local_runs((8, 3), (2, 2), places, (1, 0)) == \
        (((2, 2),), ((0, 3),))
    # one axis of two: rows 0-1 and 4-5, two boxes of one local tensor
    shape, boxes = reshard.dtensor_local_boxes((8, 3), (2,),
                                               [StridedShard(0, 2)], (0,))
    assert shape == (4, 3)
    assert [(b.offset, b.extent, b.local) for b in boxes] == [
        ((0, 0), (2, 3), (0, 0)), ((4, 0), (2, 3), (2, 0))]
    with pytest.raises(reshard.UnsupportedError, match="dtensor_local_boxes"):
        reshard.dtensor_local_box((8, 3), (2,), [StridedShard(0, 2)], (0,))


def test_split_factor_one_is_a_plain_shard_in_both_orders():
    """StridedShard(d, 1) holds what Shard(d) does, in distribute_tensor's
    order and in FSDP2's (which once failed with an IndexError)."""
    for places, plain in (([StridedShard(0, 1), Shard(0)],
                           [Shard(0), Shard(0)]),
                          ([Shard(1), StridedShard(0, 1)],
                           [Shard(1), Shard(0)])):
        for coord in ((0, 0), (0, 1), (1, 0), (1, 1)):
            want = dtensor_local_runs((7, 5), (2, 2), plain, coord)
            for order in ("distribute", "fsdp2"):
                assert dtensor_local_runs((7, 5), (2, 2), places, coord,
                                          order) == want


def _torch_dtensor():
    torch = pytest.importorskip("torch")
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 4):
        pytest.skip("torch %s: DTensor as compared here needs torch >= 2.4"
                    % torch.__version__)
    import importlib.util
    spec = importlib.util.spec_from_file_location("dtensor_generate",
                                                  HERE / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_live_against_installed_torch():
    gen = _torch_dtensor()
    n = int(os.environ.get("RESHARD_TORCH_LIVE_CASES", "300"))
    data = gen.generate(n, max(1, n // 20), random.randrange(1 << 30))
    bad: List[str] = []
    for case in data["cases"]:
        bad += _mismatches(case, [_placement(e) for e in case["placements"]])
    assert not bad, "\n".join(bad[:10])


def test_live_fsdp2_state_dicts_sync_exactly():
    """Real FSDP2-over-TP parameters (torch's DTensor, DeviceMesh and
    placements as they are) of every coordinate, added and bound by
    state dict, gathered on one more rank: the full weight, exactly."""
    gen = _torch_dtensor()
    import numpy as np
    rng = random.Random()
    for _ in range(12):
        dp, tp = rng.randint(1, 3), rng.randint(1, 3)
        shape = (rng.randint(1, 11), rng.randint(1, 11))
        full, weights = gen.fsdp_dtensors(shape, dp, tp, rng.randint(0, 1))
        world = dp * tp
        with reshard.Context.local(world + 1) as ctx:
            src = ctx.layout()
            for rank, (_, w) in enumerate(weights):
                if rank == 0:
                    src.add_state_dict({"w": w}, rank=rank, strided="fsdp2")
                else:
                    src.add_dtensor("w", mesh=w.device_mesh,
                                    placements=w.placements, only_rank=rank,
                                    strided="fsdp2")
                    src.name_buffer(rank, "w", 0)
            dst = ctx.layout().add_tensor("w", "f32", shape)
            dst.add_shard("w", world, [0, 0], shape)
            with ctx.plan(src, dst) as plan:
                for rank, (_, w) in enumerate(weights):
                    if w.to_local().numel():
                        plan.bind_state_dict("src", rank, {"w": w})
                out = np.zeros(shape, np.float32)
                plan.bind("dst", world, 0, out)
                plan.execute()
        assert np.array_equal(out, full.numpy()), (shape, dp, tp)
