# SPDX-License-Identifier: Apache-2.0
"""DTensor vocabulary: device meshes and placements.

A mesh is an n-dimensional grid of ranks (row-major); each mesh axis either
shards one tensor dimension (``Shard(d)``, or ``StridedShard(d, f)`` as
FSDP2 over TP stores it) or replicates the tensor (``Replicate()``). torch's
own placements and ``DeviceMesh`` are accepted as they are. Uneven sizes follow ``torch.chunk`` (chunk =
ceil(size / n); trailing shards may be short or empty), and several axes
sharding one dimension nest left to right, as DTensor does.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import (Any, Dict, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

from . import _native as N
from ._native import C
from .errors import Error, Status

__all__ = ["Shard", "Replicate", "StridedShard", "Placement", "DeviceMesh",
           "ShardedTensor", "is_dtensor",
           "LocalBox", "dtensor_local_box", "dtensor_local_boxes",
           "dtensor_local_runs"]


@dataclass(frozen=True)
class Shard:
    """The mesh axis splits tensor dimension ``dim`` (torch.chunk rule)."""

    dim: int

    def __post_init__(self) -> None:
        d = N.as_int(self.dim, "Shard.dim")
        if d < 0:
            raise ValueError("Shard(%d): the dimension must be >= 0" % d)
        object.__setattr__(self, "dim", d)

    def __repr__(self) -> str:
        return "Shard(%d)" % self.dim


@dataclass(frozen=True)
class Replicate:
    """Every rank along the mesh axis holds the same data."""

    def __repr__(self) -> str:
        return "Replicate()"


@dataclass(frozen=True)
class StridedShard:
    """torch's ``_StridedShard(dim, split_factor)``: what FSDP2 over TP
    stores. The tensor dimension ``dim`` is first cut into
    ``split_factor`` pieces (the sharding "to the right", done first),
    each piece into as many chunks as the mesh axis has coordinates
    (torch.chunk rule), and coordinate i holds chunk i of every piece,
    concatenated. A rank's rows may then be several runs: its shard is
    several boxes of one dense local tensor."""

    dim: int
    split_factor: int

    def __post_init__(self) -> None:
        d = N.as_int(self.dim, "StridedShard.dim")
        f = N.as_int(self.split_factor, "StridedShard.split_factor")
        if d < 0:
            raise ValueError("StridedShard(%d): the dimension must be >= 0"
                             % d)
        if f < 1:
            raise ValueError("StridedShard(%d, split_factor=%d): the split "
                             "factor must be >= 1" % (d, f))
        object.__setattr__(self, "dim", d)
        object.__setattr__(self, "split_factor", f)

    def __repr__(self) -> str:
        return "StridedShard(%d, split_factor=%d)" % (self.dim,
                                                     self.split_factor)


Placement = Union[Shard, Replicate, StridedShard]

REPLICATE = -1  # RS_REPLICATE


def placement(p: Any) -> Placement:
    """``p`` as one of this module's placements: ours, torch's DTensor
    placements (``Shard``, ``Replicate``, ``_StridedShard``; torch is not
    imported), or an int (-1: replicate, d >= 0: ``Shard(d)``). torch's
    ``Partial`` is refused: its values are pending a reduction."""
    if isinstance(p, (Shard, Replicate, StridedShard)):
        return p
    cls = type(p).__name__
    if cls == "Replicate":
        return Replicate()
    if cls == "_StridedShard" and hasattr(p, "dim"):
        return StridedShard(p.dim, int(p.split_factor))
    if cls == "Shard" and hasattr(p, "dim"):
        return Shard(p.dim)
    if cls in ("Partial", "_Partial", "_NormPartial", "MaskPartial") or \
            hasattr(p, "reduce_op"):
        raise N.fail(Status.UNSUPPORTED, "%r: a Partial placement holds "
                     "values that are still to be reduced across its mesh "
                     "axis, not a shard of the tensor; reduce it first "
                     "(dtensor.redistribute(placements=[Replicate() or "
                     "Shard(d) ...]) or dtensor.full_tensor())" % (p,))
    if isinstance(p, int) and not isinstance(p, bool) and p >= -1:
        return Replicate() if p == REPLICATE else Shard(p)
    raise TypeError("a placement is Shard(d), Replicate() or "
                    "StridedShard(d, split_factor), not %r" % (p,))


def placement_code(p: Any) -> int:
    """RS_REPLICATE (-1) or the sharded dimension (plain placements)."""
    q = placement(p)
    if isinstance(q, StridedShard):
        raise N.fail(Status.UNSUPPORTED, "%r has no placement code of the C "
                     "API; the Python layer places it (Layout.add_dtensor)"
                     % (q,))
    return REPLICATE if isinstance(q, Replicate) else q.dim


def placement_codes(placements: Sequence[Any]) -> List[int]:
    return [placement_code(p) for p in placements]


def has_strided(placements: Sequence[Any]) -> bool:
    return any(isinstance(placement(p), StridedShard) for p in placements)

# ---- which elements a mesh coordinate holds ----------------------------------
# Along each tensor dimension a coordinate holds a list of global indices,
# kept as runs (start, length) in local order; the local tensor is the
# product of these lists over the dimensions, dense row-major (what
# distribute_tensor and FSDP2 store).

Runs = Tuple[Tuple[int, int], ...]


def _length(runs: Runs) -> int:
    return sum(n for _, n in runs)


def _take(runs: Runs, lo: int, hi: int) -> Runs:
    """The positions [lo, hi) of a run list."""
    out = []
    pos = 0
    for start, n in runs:
        a, b = max(lo, pos), min(hi, pos + n)
        if a < b:
            out.append((start + a - pos, b - a))
        pos += n
    return tuple(out)


def _chunk(runs: Runs, pieces: int, i: int) -> Runs:
    """Chunk i of torch.chunk(runs, pieces): ceil-sized chunks, the last
    short, the missing ones empty."""
    total = _length(runs)
    size = -(-total // pieces)
    lo = min(i * size, total)
    return _take(runs, lo, min(lo + size, total))


def _merge(runs: Runs) -> Runs:
    out: List[Tuple[int, int]] = []
    for start, n in runs:
        if n == 0:
            continue
        if out and out[-1][0] + out[-1][1] == start:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((start, n))
    return tuple(out)


STRIDED_ORDERS = ("distribute", "fsdp2")


def _fsdp2_order(places: Sequence[Placement], mesh: Sequence[int]
                 ) -> List[int]:
    """The mesh axes in the order FSDP2 shards with them: a StridedShard
    axis after the later Shard axes of its dim that it is strided over
    (their sizes multiply to its split factor)."""
    order = list(range(len(places)))
    for a, p in enumerate(places):
        if not isinstance(p, StridedShard) or p.split_factor == 1:
            continue  # a split factor of 1 is Shard(dim): no reordering
        group, prod = [], 1
        for b in range(a + 1, len(places)):
            q = places[b]
            if prod >= p.split_factor:
                break
            if isinstance(q, Shard) and q.dim == p.dim:
                group.append(b)
                prod *= mesh[b]
            elif not isinstance(q, Replicate) and q.dim == p.dim:
                break
        if prod != p.split_factor:
            raise N.fail(Status.UNSUPPORTED, "%r on mesh axis %d: FSDP2 "
                         "order needs later Shard(%d) axes whose sizes "
                         "multiply to %d (mesh %r, placements %r)" % (
                             p, a, p.dim, p.split_factor, tuple(mesh),
                             list(places)))
        order.remove(a)
        order.insert(order.index(group[-1]) + 1, a)
    return order


def dtensor_local_runs(shape: Sequence[int], mesh_shape: Sequence[int],
                       placements: Sequence[Any], coord: Sequence[int],
                       strided: str = "distribute") -> Tuple[Runs, ...]:
    """For each tensor dimension, the global indices that mesh coordinate
    ``coord`` holds, as runs ``(start, length)`` in the order of its local
    tensor.

    ``strided="distribute"``: placements apply left to right over the
    mesh axes, as ``distribute_tensor`` does (``StridedShard``: see its
    doc). ``strided="fsdp2"``: as FSDP2 over TP keeps its memory: each
    ``StridedShard(d, f)`` axis cuts what the later ``Shard(d)`` axes
    (sizes multiplying to f) left. The two agree wherever the sharded
    sizes divide evenly; :func:`strided_orders_agree` says whether they
    do for a tensor."""
    return _local_runs(tuple(N.int_list(shape, "shape")),
                       tuple(N.int_list(mesh_shape, "mesh_shape")),
                       tuple(placement(p) for p in placements),
                       tuple(N.int_list(coord, "coord")), strided)


@functools.lru_cache(maxsize=65536)
def _local_runs(shape_l: Tuple[int, ...], mesh_l: Tuple[int, ...],
                places: Tuple[Placement, ...], coord_l: Tuple[int, ...],
                strided: str) -> Tuple[Runs, ...]:
    """dtensor_local_runs on normalized arguments (a state dict repeats
    a few shapes over many tensors and ranks: cached)."""
    if len(places) != len(mesh_l) or len(coord_l) != len(mesh_l):
        raise N.fail(Status.INVALID_ARGUMENT, "one placement and one "
                     "coordinate per mesh axis: mesh %r, placements %r, "
                     "coordinate %r" % (tuple(mesh_l), places, tuple(coord_l)))
    if strided not in STRIDED_ORDERS:
        raise N.fail(Status.INVALID_ARGUMENT, "strided=%r: one of %s" % (
            strided, ", ".join(STRIDED_ORDERS)))
    for axis, (p, n, c) in enumerate(zip(places, mesh_l, coord_l)):
        if not 0 <= c < n:
            raise N.fail(Status.OUT_OF_BOUNDS, "coordinate %d of mesh axis "
                         "%d is outside [0, %d)" % (c, axis, n))
        if not isinstance(p, Replicate) and p.dim >= len(shape_l):
            raise N.fail(Status.BAD_SHAPE, "%r on mesh axis %d: the tensor "
                         "has %d dimensions" % (p, axis, len(shape_l)))
    order = list(range(len(places)))
    if strided == "fsdp2" and any(isinstance(p, StridedShard)
                                  for p in places):
        order = _fsdp2_order(places, mesh_l)
    dims: List[Runs] = [((0, s),) if s > 0 else () for s in shape_l]
    for axis in order:
        p, n, c = places[axis], mesh_l[axis], coord_l[axis]
        if isinstance(p, Replicate):
            continue
        runs = dims[p.dim]
        if isinstance(p, Shard) or strided == "fsdp2":
            dims[p.dim] = _chunk(runs, n, c)
        else:
            held: Runs = ()
            for j in range(p.split_factor):
                held += _chunk(_chunk(runs, p.split_factor, j), n, c)
            dims[p.dim] = held
    return tuple(_merge(r) for r in dims)


def strided_orders_agree(shape: Sequence[int], mesh_shape: Sequence[int],
                         placements: Sequence[Any]) -> bool:
    """Whether ``distribute_tensor`` and FSDP2 keep the same elements on
    every coordinate (always, without StridedShard; with it, where sizes
    divide evenly). False also where the FSDP2 order does not apply."""
    if not has_strided(placements):
        return True
    return _orders_agree(tuple(N.int_list(shape, "shape")),
                         tuple(N.int_list(mesh_shape, "mesh_shape")),
                         tuple(placement(p) for p in placements))


@functools.lru_cache(maxsize=4096)
def _orders_agree(shape: Tuple[int, ...], mesh: Tuple[int, ...],
                  places: Tuple[Placement, ...]) -> bool:
    coords = itertools.product(*(range(s) for s in mesh))
    try:
        return all(_local_runs(shape, mesh, places, c, "distribute") ==
                   _local_runs(shape, mesh, places, c, "fsdp2")
                   for c in coords)
    except Error:
        return False


class LocalBox(NamedTuple):
    """One box of a rank's local tensor: its global ``offset`` and
    ``extent``, and where it starts in the local tensor (``local``)."""

    offset: Tuple[int, ...]
    extent: Tuple[int, ...]
    local: Tuple[int, ...]


def dtensor_local_boxes(shape: Sequence[int], mesh_shape: Sequence[int],
                        placements: Sequence[Any], coord: Sequence[int],
                        strided: str = "distribute"
                        ) -> Tuple[Tuple[int, ...], List[LocalBox]]:
    """(local shape, boxes) of what mesh coordinate ``coord`` holds: one
    box with ``Shard``/``Replicate``; with ``StridedShard`` possibly
    several, each a box of the global tensor at a position of the dense
    local tensor. No boxes when the shard is empty. ``strided``: as for
    :func:`dtensor_local_runs`."""
    local_shape, boxes = _local_boxes(
        tuple(N.int_list(shape, "shape")),
        tuple(N.int_list(mesh_shape, "mesh_shape")),
        tuple(placement(p) for p in placements),
        tuple(N.int_list(coord, "coord")), strided)
    return local_shape, list(boxes)


@functools.lru_cache(maxsize=65536)
def _local_boxes(shape_l: Tuple[int, ...], mesh_l: Tuple[int, ...],
                 places: Tuple[Placement, ...], coord_l: Tuple[int, ...],
                 strided: str
                 ) -> Tuple[Tuple[int, ...], Tuple[LocalBox, ...]]:
    """dtensor_local_boxes on normalized arguments (cached)."""
    runs = _local_runs(shape_l, mesh_l, places, coord_l, strided)
    local_shape = tuple(_length(r) for r in runs)
    if any(n == 0 for n in local_shape):
        return local_shape, ()
    per_dim = []
    for r in runs:
        pos, items = 0, []
        for start, n in r:
            items.append((start, n, pos))
            pos += n
        per_dim.append(items)
    return local_shape, tuple(
        LocalBox(tuple(x[0] for x in combo), tuple(x[1] for x in combo),
                 tuple(x[2] for x in combo))
        for combo in itertools.product(*per_dim))


class Pieces(NamedTuple):
    """A coordinate's dense local tensor: its ``shape``, its row-major
    element ``strides``, and each box of the global tensor it holds as
    (offset, extent, element position in the local tensor)."""

    shape: Tuple[int, ...]
    strides: List[int]
    boxes: Tuple[Tuple[List[int], List[int], int], ...]


@functools.lru_cache(maxsize=65536)
def _local_pieces(shape_l: Tuple[int, ...], mesh_l: Tuple[int, ...],
                  places: Tuple[Placement, ...], coord_l: Tuple[int, ...],
                  strided: str) -> Pieces:
    """_local_boxes in the form a layout adds them (cached: a state dict
    repeats a few shapes over many tensors and ranks)."""
    local_shape, boxes = _local_boxes(shape_l, mesh_l, places, coord_l,
                                      strided)
    strides = [1] * len(local_shape)
    for d in range(len(local_shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * local_shape[d + 1]
    return Pieces(local_shape, strides, tuple(
        (list(b.offset), list(b.extent),
         sum(p * s for p, s in zip(b.local, strides))) for b in boxes))


def dtensor_local_box(shape: Sequence[int], mesh_shape: Sequence[int],
                      placements: Sequence[Any], coord: Sequence[int]
                      ) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """The box (offset, extent) that mesh coordinate ``coord`` holds of a
    tensor of ``shape``. An empty shard has extent 0 in its sharded dim.
    A coordinate whose elements are not one box (``StridedShard``) is
    refused: :func:`dtensor_local_boxes` gives its boxes."""
    if has_strided(placements):
        local_shape, boxes = dtensor_local_boxes(shape, mesh_shape,
                                                 placements, coord)
        if not boxes:
            return tuple(0 for _ in local_shape), local_shape
        if len(boxes) > 1:
            raise N.fail(Status.UNSUPPORTED, "dtensor_local_box: "
                         "coordinate %r holds %d boxes of the tensor "
                         "(placements %r), not one; dtensor_local_boxes "
                         "gives them" % (tuple(coord), len(boxes),
                                         [placement(p) for p in placements]))
        return boxes[0].offset, boxes[0].extent
    shape_l = N.int_list(shape, "shape")
    mesh_l = N.int_list(mesh_shape, "mesh_shape")
    place_l = placement_codes(placements)
    coord_l = N.int_list(coord, "coord")
    r = N.result()
    with N.vectors([], []) as (off, ext):
        C.rsw_dtensor_local_box(r, shape_l, mesh_l, place_l, coord_l, off,
                                ext)
        if r.status:
            N.raise_for(r)
        return tuple(N.read_vector(off)), tuple(N.read_vector(ext))


class DeviceMesh:
    """A grid of ranks in row-major order (the last axis varies fastest).

    ``DeviceMesh((2, 2), [0, 1, 2, 3], ("dp", "tp"))``: ranks 0 and 1 form
    the first TP group (coordinates (0, 0) and (0, 1)), ranks 0 and 2 hold
    the same TP shard in two DP replicas."""

    def __init__(self, shape: Sequence[int],
                 ranks: Optional[Sequence[int]] = None,
                 dim_names: Optional[Sequence[str]] = None) -> None:
        self.shape: Tuple[int, ...] = tuple(N.int_list(shape, "mesh shape"))
        if not self.shape or any(s < 1 for s in self.shape):
            raise N.fail(Status.INVALID_ARGUMENT, "a mesh has at least one "
                         "axis, each >= 1: %r" % (self.shape,))
        size = 1
        for s in self.shape:
            size *= s
        if ranks is None:
            ranks = range(size)
        self.ranks: Tuple[int, ...] = tuple(N.int_list(ranks, "mesh ranks"))
        for r in self.ranks:
            if not N.INT_MIN <= r <= N.INT_MAX:
                raise N.fail(Status.UNKNOWN_RANK, "mesh rank %d does not "
                             "fit a C int" % r)
        if len(self.ranks) != size:
            raise N.fail(Status.INVALID_ARGUMENT, "a mesh of shape %r has %d "
                         "ranks, not %d" % (self.shape, size, len(self.ranks)))
        if len(set(self.ranks)) != len(self.ranks):
            raise N.fail(Status.INVALID_ARGUMENT, "a rank appears twice in "
                         "the mesh %r" % (list(self.ranks),))
        if dim_names is not None:
            dim_names = tuple(dim_names)
            if len(dim_names) != len(self.shape):
                raise N.fail(Status.INVALID_ARGUMENT, "one name per mesh "
                             "axis is needed: %r for %d axes" % (
                                 dim_names, len(self.shape)))
        self.dim_names: Optional[Tuple[str, ...]] = dim_names
        self._coord: Dict[int, Tuple[int, ...]] = {
            r: c for r, c in zip(self.ranks, self.coordinates())}

    @classmethod
    def of(cls, mesh: Any) -> "DeviceMesh":
        """``mesh`` as a DeviceMesh: one of ours, or torch's
        ``torch.distributed.DeviceMesh`` (its ``mesh`` tensor gives the
        shape and the ranks, ``mesh_dim_names`` the names)."""
        if isinstance(mesh, DeviceMesh):
            return mesh
        grid = getattr(mesh, "mesh", None)
        if grid is not None and hasattr(grid, "shape") and \
                hasattr(grid, "flatten"):
            names = getattr(mesh, "mesh_dim_names", None)
            return cls(tuple(int(s) for s in grid.shape),
                       [int(r) for r in grid.flatten().tolist()],
                       tuple(names) if names else None)
        raise TypeError("a device mesh is a reshard.DeviceMesh or a "
                        "torch.distributed.DeviceMesh, not %s"
                        % type(mesh).__name__)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def coordinates(self) -> Iterator[Tuple[int, ...]]:
        """Every coordinate, in rank order (row-major)."""
        return itertools.product(*(range(s) for s in self.shape))

    def coordinate(self, rank: int) -> Optional[Tuple[int, ...]]:
        """The coordinate of ``rank``, None if it is not in the mesh."""
        return self._coord.get(rank)

    def rank_at(self, coord: Sequence[int]) -> int:
        i = 0
        for c, s in zip(coord, self.shape):
            i = i * s + c
        return self.ranks[i]

    def axis(self, name: str) -> int:
        if self.dim_names is None or name not in self.dim_names:
            raise KeyError(name)
        return self.dim_names.index(name)

    def local_box(self, shape: Sequence[int], placements: Sequence[Any],
                  rank: int) -> Optional[Tuple[Tuple[int, ...],
                                               Tuple[int, ...]]]:
        """(offset, extent) of the tensor that ``rank`` holds; None when
        the rank is not in the mesh."""
        c = self.coordinate(rank)
        if c is None:
            return None
        return dtensor_local_box(shape, self.shape, placements, c)

    def local_boxes(self, shape: Sequence[int], placements: Sequence[Any],
                    rank: int, strided: str = "distribute"
                    ) -> Optional[Tuple[Tuple[int, ...], List[LocalBox]]]:
        """(local shape, boxes) of what ``rank`` holds
        (:func:`dtensor_local_boxes`); None when it is not in the mesh."""
        c = self.coordinate(rank)
        if c is None:
            return None
        return dtensor_local_boxes(shape, self.shape, placements, c, strided)

    def _pieces(self, shape: Tuple[int, ...], places: Tuple[Placement, ...],
                rank: int, strided: str = "distribute") -> Optional[Pieces]:
        """What ``rank`` holds (:func:`_local_pieces`), for a shape of ints
        and placements already of this module: no conversions, cached.
        None when the rank is not in the mesh."""
        c = self._coord.get(rank)
        if c is None:
            return None
        return _local_pieces(shape, self.shape, places, c, strided)

    def local_shape(self, shape: Sequence[int], placements: Sequence[Any],
                    rank: int) -> Optional[Tuple[int, ...]]:
        got = self.local_boxes(shape, placements, rank)
        return None if got is None else got[0]

    def __contains__(self, rank: object) -> bool:
        return rank in self._coord

    def __repr__(self) -> str:
        names = "" if self.dim_names is None else ", dim_names=%r" % (
            self.dim_names,)
        return "DeviceMesh(%r, %r%s)" % (self.shape, list(self.ranks), names)


class ShardedTensor(NamedTuple):
    """A rank's shard with its global description, for code without
    torch's DTensor (numpy arrays, torch before 2.4): read like a DTensor
    by :meth:`Layout.add_state_dict`, :meth:`Plan.bind_state_dict` and
    :meth:`Plan.bind`. ``local`` is this rank's dense local tensor,
    ``shape`` the global shape."""

    local: Any
    shape: Tuple[int, ...]
    device_mesh: Any
    placements: Tuple[Any, ...]

    @property
    def dtype(self) -> Any:
        return self.local.dtype

    def to_local(self) -> Any:
        return self.local


def is_dtensor(obj: Any) -> bool:
    """A torch DTensor or a :class:`ShardedTensor` (duck-typed: torch is
    not imported)."""
    return hasattr(obj, "to_local") and hasattr(obj, "placements") and \
        hasattr(obj, "device_mesh")
