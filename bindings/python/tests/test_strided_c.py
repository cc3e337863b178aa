# SPDX-License-Identifier: Apache-2.0
"""StridedShard in the C library (rs_dtensor_local_boxes and
rs_layout_add_dtensor_strided, through their rsw_ wrappers) against the
Python implementation (reshard.mesh), which is checked against torch.

Every coordinate of every case of the torch fixture
(``dtensor_torch/cases.json.gz``, see test_dtensor_torch.py) and a few
thousand random cases (meshes up to 3 axes, shapes up to 3 dims, uneven
sizes, both orders and RS_STRIDED_AUTO) must get the same local shape and
boxes, or the same refusal; and a layout built by the C call must hold
exactly the shards (same boxes, strides, byte offsets, order) that
``Layout.add_dtensor`` adds.
"""
from __future__ import annotations

import gzip
import itertools
import json
import pathlib
import random
from typing import Any, List, Optional, Sequence, Tuple

import pytest

import reshard
from reshard import Replicate, Shard, StridedShard
from reshard import _native as N
from reshard._native import C
from reshard.errors import Error, Status
from reshard.mesh import dtensor_local_boxes, strided_orders_agree

HERE = pathlib.Path(__file__).resolve().parent / "dtensor_torch"

ORDER = {None: C.RS_STRIDED_AUTO, "distribute": C.RS_STRIDED_DISTRIBUTE,
         "fsdp2": C.RS_STRIDED_FSDP2}


def _codes(places: Sequence[Any]) -> Tuple[List[int], List[int]]:
    """Placement codes and split factors of the C API."""
    codes, split = [], []
    for p in places:
        codes.append(-1 if isinstance(p, Replicate) else p.dim)
        split.append(p.split_factor if isinstance(p, StridedShard) else 1)
    return codes, split


def c_boxes(shape: Sequence[int], mesh: Sequence[int],
            places: Sequence[Any], coord: Sequence[int],
            order: Optional[str]) -> Tuple[int, Any]:
    """(status, (local shape, [(offset, extent, local), ...])) from C."""
    codes, split = _codes(places)
    r = N.result()
    nd = len(shape)
    with N.vectors(shape, mesh, codes, split, coord, [], [], [], []) as v:
        C.rsw_dtensor_local_boxes(r, v[0], v[1], v[2], v[3], ORDER[order],
                                  v[4], v[5], v[6], v[7], v[8])
        if r.status:
            return r.status, r.message
        flat = [N.read_vector(x) for x in v[6:9]]
        n = r.value
        boxes = [tuple(tuple(f[i * nd:(i + 1) * nd]) for f in flat)
                 for i in range(n)]
        return 0, (tuple(N.read_vector(v[5])), boxes)


def py_boxes(shape: Sequence[int], mesh: Sequence[int],
             places: Sequence[Any], coord: Sequence[int],
             order: Optional[str]) -> Tuple[int, Any]:
    """The same from the Python implementation; order None is
    Layout.add_dtensor's strided=None (refused where the orders differ)."""
    try:
        if order is None and not strided_orders_agree(shape, mesh, places):
            return int(Status.INVALID_ARGUMENT), None
        local, boxes = dtensor_local_boxes(shape, mesh, places, coord,
                                           order or "distribute")
    except Error as e:
        return int(e.status), None
    return 0, (tuple(local), [(b.offset, b.extent, b.local) for b in boxes])


def _same(shape, mesh, places, coord, order) -> Optional[str]:
    want = py_boxes(shape, mesh, places, coord, order)
    got = c_boxes(shape, mesh, places, coord, order)
    if want[0] != got[0] or (want[0] == 0 and want[1] != got[1]):
        return "%s shape %s mesh %s %s at %s: python %s, C %s" % (
            order, list(shape), list(mesh), list(places), tuple(coord), want,
            got)
    return None


def _placement(e: Sequence[Any]) -> Any:
    if e[0] == "SS":
        return StridedShard(e[1], e[2])
    return Shard(e[1]) if e[0] == "S" else Replicate()


def _fixture() -> List[Any]:
    with gzip.open(HERE / "cases.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)["cases"]


def test_every_fixture_coordinate_as_python_and_torch():
    bad: List[str] = []
    coords = strided = 0
    for case in _fixture():
        places = [_placement(e) for e in case["placements"]]
        order = "fsdp2" if case["kind"] == "fsdp2" else "distribute"
        strided += any(isinstance(p, StridedShard) and p.split_factor > 1
                       for p in places)
        for coord, want in zip(
                itertools.product(*(range(s) for s in case["mesh"])),
                case["local"]):
            coords += 1
            why = _same(case["shape"], case["mesh"], places, coord, order)
            if why:
                bad.append(why)
                continue
            # and what torch keeps: the runs of each dim
            st, (local, boxes) = c_boxes(case["shape"], case["mesh"],
                                         places, coord, order)
            if isinstance(want, dict):
                ok = 0 in local and not boxes
            else:
                runs = [sorted({(b[0][d], b[1][d], b[2][d]) for b in boxes},
                               key=lambda x: x[2])
                        for d in range(len(local))]
                ok = [[[o, e] for o, e, _ in r] for r in runs] == want
            if not ok:
                bad.append("%s %s %s at %s: torch %s, C %s" % (
                    order, case["shape"], case["placements"], coord, want,
                    boxes))
    assert coords > 50000 and strided > 1000
    assert not bad, "%d coordinates differ, e.g.\n%s" % (
        len(bad), "\n".join(bad[:10]))


def _random_case(rng: random.Random) -> Tuple[List[int], List[int], List[Any]]:
    """Shapes up to 3 dims of 1..13, meshes up to 3 axes of 1..4, any
    placements; a strided axis is often followed by Shard axes of its dim
    whose sizes multiply to its split factor (FSDP2's case)."""
    ndim = rng.randint(1, 3)
    shape = [rng.randint(1, 13) for _ in range(ndim)]
    mesh = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
    places: List[Any] = []
    for _ in mesh:
        k, d = rng.random(), rng.randrange(ndim)
        if k < 0.25:
            places.append(Replicate())
        elif k < 0.55:
            places.append(Shard(d))
        else:
            places.append(StridedShard(d, rng.randint(2, 6)))
    for a, p in enumerate(places):
        if isinstance(p, StridedShard) and rng.random() < 0.7:
            f = 1
            for b in range(a + 1, len(places)):
                if rng.random() < 0.7:
                    places[b] = Shard(p.dim)
                    f *= mesh[b]
            if f > 1:
                places[a] = StridedShard(p.dim, f)
    return shape, mesh, places


def test_random_cases_as_python():
    rng = random.Random(20240611)
    bad: List[str] = []
    seen = {0: 0, 1: 0}
    for _ in range(3000):
        shape, mesh, places = _random_case(rng)
        order = rng.choice([None, "distribute", "fsdp2"])
        for coord in itertools.product(*(range(s) for s in mesh)):
            why = _same(shape, mesh, places, coord, order)
            if why:
                bad.append(why)
        agree = strided_orders_agree(shape, mesh, places)
        seen[agree] += 1
    assert not bad, "%d coordinates differ, e.g.\n%s" % (
        len(bad), "\n".join(bad[:10]))
    assert seen[0] > 100 and seen[1] > 100, seen


def test_count_only_and_bad_input_through_the_wrapper():
    st, got = c_boxes([8, 3], [2, 2], [StridedShard(0, 2), Shard(0)],
                      [0, 1], None)
    assert st == 0 and got == ((2, 3), [((4, 0), (2, 3), (0, 0))])
    st, msg = c_boxes([7, 2], [3, 2], [StridedShard(0, 2), Shard(0)],
                      [0, 0], None)
    assert st == Status.INVALID_ARGUMENT
    assert "RS_STRIDED_DISTRIBUTE" in msg and "RS_STRIDED_FSDP2" in msg
    st, msg = c_boxes([8], [2], [StridedShard(0, 2)], [0], "fsdp2")
    assert st == Status.UNSUPPORTED and "FSDP2 order" in msg


# ---- layouts -----------------------------------------------------------------

DTYPES = ["f32", "bf16", "u8", "f64"]


def _layout_bytes(shape, mesh, places, order, dtype, buffer, offset,
                  use_c: bool) -> Tuple[int, bytes]:
    n = 1
    for s in mesh:
        n *= s
    ctx = reshard.Context.local(n)
    lay = ctx.layout()
    lay.add_tensor("t", dtype, shape)
    ranks = list(range(n))[::-1]  # not the identity
    try:
        if use_c:
            codes, split = _codes(places)
            r = N.result()
            with N.vectors(mesh, ranks, codes, split) as v:
                C.rsw_layout_add_dtensor_strided(
                    r, lay._h(), "t", v[0], v[1], v[2], v[3], ORDER[order],
                    buffer, offset)
            if r.status:
                return r.status, b""
        else:
            lay.add_dtensor("t", mesh, ranks, places, buffer, offset,
                            strided=order)
    except Error as e:
        return int(e.status), b""
    return 0, lay.serialize()


def test_layouts_hold_the_shards_python_adds():
    rng = random.Random(7)
    cases = []
    for case in _fixture():
        if any(e[0] == "SS" and e[2] > 1 for e in case["placements"]):
            # StridedShard(d, 1) is Shard(d) (the C API has no other way
            # to say it; mesh._fsdp2_order cannot order it)
            cases.append((case["shape"], case["mesh"], [
                Shard(e[1]) if e[0] == "SS" and e[2] == 1 else _placement(e)
                for e in case["placements"]]))
    rng.shuffle(cases)
    cases = cases[:600] + [_random_case(rng) for _ in range(600)]
    compared = refused = 0
    bad: List[str] = []
    for shape, mesh, places in cases:
        order = rng.choice([None, "distribute", "fsdp2"])
        dtype = rng.choice(DTYPES)
        buffer, offset = rng.randint(0, 3), rng.choice([0, 8, 1000])
        want = _layout_bytes(shape, mesh, places, order, dtype, buffer,
                             offset, False)
        got = _layout_bytes(shape, mesh, places, order, dtype, buffer,
                            offset, True)
        if want != got:
            bad.append("%s %s %s %s: python %s, C %s" % (
                order, shape, mesh, places, want[0], got[0]))
        compared += 1
        refused += want[0] != 0
    assert not bad, "%d layouts differ, e.g.\n%s" % (len(bad),
                                                     "\n".join(bad[:10]))
    assert compared == 1200 and 50 < refused < 1000, refused


def test_issue_example_layout():
    """Mesh (dp=2, tp=2), [StridedShard(0, 2), Shard(0)], shape [8, 3]:
    rows 4-5 on (0, 1), rows 2-3 on (1, 0), one dense box each."""
    ctx = reshard.Context.local(4)
    lay = ctx.layout()
    lay.add_tensor("w", "f32", [8, 3])
    r = N.result()
    with N.vectors([2, 2], [0, 1, 2, 3], [0, 0], [2, 1]) as v:
        C.rsw_layout_add_dtensor_strided(r, lay._h(), "w", v[0], v[1], v[2],
                                         v[3], C.RS_STRIDED_AUTO, 0, 0)
    assert r.status == 0, r.message
    want = ctx.layout()
    want.add_tensor("w", "f32", [8, 3])
    for rank, row in enumerate([0, 4, 2, 6]):
        want.add_shard("w", rank, [row, 0], [2, 3])
    assert lay.serialize() == want.serialize()


@pytest.mark.parametrize("split", [[2, 1, 1], [1, 0], []])
def test_wrapper_refuses_split_factors_of_another_length(split):
    ctx = reshard.Context.local(2)
    lay = ctx.layout()
    lay.add_tensor("w", "f32", [8])
    r = N.result()
    with N.vectors([2], [0, 1], [0], split) as v:
        C.rsw_layout_add_dtensor_strided(r, lay._h(), "w", v[0], v[1], v[2],
                                         v[3], C.RS_STRIDED_DISTRIBUTE, 0, 0)
    if split == []:
        assert r.status == 0 and lay.num_shards == 2
    else:
        assert r.status == Status.INVALID_ARGUMENT
        assert lay.num_shards == 0
