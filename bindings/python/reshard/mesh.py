# SPDX-License-Identifier: Apache-2.0
"""DTensor vocabulary: device meshes and placements.

A mesh is an n-dimensional grid of ranks (row-major); each mesh axis either
shards one tensor dimension (``Shard(d)``) or replicates the tensor
(``Replicate()``). Uneven sizes follow ``torch.chunk`` (chunk =
ceil(size / n); trailing shards may be short or empty), and several axes
sharding one dimension nest left to right, as DTensor does.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _native as N
from ._native import C

__all__ = ["Shard", "Replicate", "Placement", "DeviceMesh",
           "dtensor_local_box"]


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


Placement = Union[Shard, Replicate]

REPLICATE = -1  # RS_REPLICATE


def placement_code(p: Any) -> int:
    """RS_REPLICATE (-1) or the sharded dimension."""
    if isinstance(p, Replicate):
        return REPLICATE
    if isinstance(p, Shard):
        return p.dim
    # DTensor's own classes, without importing torch
    cls = type(p).__name__
    if cls == "Replicate":
        return REPLICATE
    if cls in ("Shard", "_StridedShard") and hasattr(p, "dim"):
        return N.as_int(p.dim, "Shard.dim")
    if isinstance(p, int) and not isinstance(p, bool) and p >= -1:
        return p
    raise TypeError("a placement is Shard(d) or Replicate(), not %r" % (p,))


def placement_codes(placements: Sequence[Any]) -> List[int]:
    return [placement_code(p) for p in placements]


def dtensor_local_box(shape: Sequence[int], mesh_shape: Sequence[int],
                      placements: Sequence[Any], coord: Sequence[int]
                      ) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """The box (offset, extent) that mesh coordinate ``coord`` holds of a
    tensor of ``shape``. An empty shard has extent 0 in its sharded dim."""
    shape_l = N.int_list(shape, "shape")
    mesh_l = N.int_list(mesh_shape, "mesh_shape")
    place_l = placement_codes(placements)
    coord_l = N.int_list(coord, "coord")
    r = N.result()
    with N.vectors(shape_l, mesh_l, place_l, coord_l, [], []) as v:
        C.rsw_dtensor_local_box(r, v[0], v[1], v[2], v[3], v[4], v[5])
        if r.status:
            N.raise_for(r)
        return tuple(N.read_vector(v[4])), tuple(N.read_vector(v[5]))


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
            raise ValueError("a mesh has at least one axis, each >= 1: %r"
                             % (self.shape,))
        size = 1
        for s in self.shape:
            size *= s
        if ranks is None:
            ranks = range(size)
        self.ranks: Tuple[int, ...] = tuple(N.int_list(ranks, "mesh ranks"))
        if len(self.ranks) != size:
            raise ValueError("a mesh of shape %r has %d ranks, not %d"
                             % (self.shape, size, len(self.ranks)))
        if len(set(self.ranks)) != len(self.ranks):
            raise ValueError("a rank appears twice in the mesh")
        if dim_names is not None:
            dim_names = tuple(dim_names)
            if len(dim_names) != len(self.shape):
                raise ValueError("one name per mesh axis is needed")
        self.dim_names: Optional[Tuple[str, ...]] = dim_names
        self._coord: Dict[int, Tuple[int, ...]] = {
            r: c for r, c in zip(self.ranks, self.coordinates())}

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

    def local_shape(self, shape: Sequence[int], placements: Sequence[Any],
                    rank: int) -> Optional[Tuple[int, ...]]:
        box = self.local_box(shape, placements, rank)
        return None if box is None else box[1]

    def __contains__(self, rank: object) -> bool:
        return rank in self._coord

    def __repr__(self) -> str:
        names = "" if self.dim_names is None else ", dim_names=%r" % (
            self.dim_names,)
        return "DeviceMesh(%r, %r%s)" % (self.shape, list(self.ranks), names)
