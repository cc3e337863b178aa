# SPDX-License-Identifier: Apache-2.0
"""Layouts: which rank holds which boxes of which tensors, and where in
its buffers."""
from __future__ import annotations

import enum
from typing import (Any, Dict, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

from . import _native as N
from ._native import C
from .context import Context, _Handle
from .dtypes import DType, DTypeLike, dtype as to_dtype
from .errors import Status
from .mesh import DeviceMesh, dtensor_local_box, placement_codes

__all__ = ["Layout", "TensorInfo", "ScaleRule"]


class ScaleRule(enum.IntEnum):
    """``rs_scale_rule``: how the scale of an fp8 block is chosen
    (:meth:`Layout.set_block_scales`). Since 0.4."""

    #: scale = amax / 448
    AMAX = 1
    #: scale = 2^ceil(log2(amax / 448)), a power of two ("UE8M0" scales)
    UE8M0 = 2


def _scale_rule(rule: Union[ScaleRule, int, str]) -> int:
    if isinstance(rule, str):
        try:
            return int(ScaleRule[rule.upper()])
        except KeyError:
            raise N.fail(Status.INVALID_ARGUMENT, "unknown scale rule %r "
                         "(one of: %s)" % (rule, ", ".join(
                             x.name.lower() for x in ScaleRule))) from None
    return N.int32(rule, "rule")


class TensorInfo(NamedTuple):
    """A declared tensor."""

    name: str
    dtype: DType
    shape: Tuple[int, ...]

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


class Layout(_Handle):
    """Tensors (name, dtype, shape) and the shards ranks hold of them.

    Declare each tensor with :meth:`add_tensor`, then say who holds what
    with :meth:`add_dtensor` (DTensor style) or :meth:`add_shard` (any
    box). Between processes every rank adds only its own shards and calls
    :meth:`allgather`. The methods return the layout, so calls chain.
    """

    _kind = "layout"

    def __init__(self, context: Context) -> None:
        if not isinstance(context, Context):
            raise TypeError("Layout(context) takes a reshard.Context")
        r = N.result()
        C.rsw_layout_create(r, context._h())
        if r.status:
            N.raise_for(r)
        self._handle = C.rsw_result_layout(r)
        self.context = context  # keeps the Python context alive too
        self._tensors: Dict[str, TensorInfo] = {}
        # (rank, buffer) -> [bytes the shards reach, dtypes in it]; only
        # what was added here (allgathered or deserialized shards are not
        # known to Python).
        self._needs: Dict[Tuple[int, int], List[Any]] = {}

    def _destroy(self, h: Any) -> None:
        C.rsw_layout_destroy(h)

    def _check(self, r: Any) -> None:
        if r.status:
            N.raise_for(r)

    # ---- tensors and shards ---------------------------------------------------

    def add_tensor(self, name: str, dtype: DTypeLike,
                   shape: Sequence[int]) -> "Layout":
        """Declare tensor ``name`` of ``dtype`` ("bf16", "float32",
        ``numpy.float16``, ``torch.bfloat16``, ...) and ``shape``."""
        if not isinstance(name, str):
            raise TypeError("a tensor name is a str")
        dt = to_dtype(dtype)
        shp = N.int_list(shape, "shape")
        if not shp:
            raise N.fail(Status.BAD_SHAPE, "tensor '%s': a shape has 1 to "
                         "16 dimensions, not 0" % name)
        r = N.result()
        with N.vectors(shp) as v:
            C.rsw_layout_add_tensor(r, self._h(), name, int(dt), v[0])
        self._check(r)
        self._tensors[name] = TensorInfo(name, dt, tuple(shp))
        return self

    def _need(self, name: str, rank: int, buffer: int, byte_offset: int,
              extent: Sequence[int], strides: Optional[Sequence[int]]) -> None:
        info = self._tensors.get(name)
        if info is None:
            return
        size = info.dtype.itemsize
        if any(e <= 0 for e in extent):
            return
        if strides:
            span = 1 + sum((e - 1) * s for e, s in zip(extent, strides))
        else:
            span = 1
            for e in extent:
                span *= e
        entry = self._needs.setdefault((rank, buffer), [0, set()])
        entry[0] = max(entry[0], byte_offset + span * size)
        entry[1].add(info.dtype)

    def add_shard(self, name: str, rank: int, offset: Sequence[int],
                  extent: Sequence[int], buffer: int = 0,
                  byte_offset: int = 0,
                  strides: Optional[Sequence[int]] = None) -> "Layout":
        """``rank`` holds the box [offset, offset + extent) of tensor
        ``name`` in its buffer ``buffer``, starting ``byte_offset`` bytes
        in, with element ``strides`` per dimension (None: dense
        row-major)."""
        off = N.int_list(offset, "offset")
        ext = N.int_list(extent, "extent")
        strd = N.int_list(strides, "strides") if strides is not None else []
        if not off or not ext:
            raise N.fail(Status.BAD_SHAPE, "tensor '%s': a box has 1 to 16 "
                         "dimensions, not 0" % name)
        rank_i = N.int32(rank, "rank", Status.UNKNOWN_RANK)
        buf_i = N.int32(buffer, "buffer", Status.UNKNOWN_BUFFER)
        boff = N.int64(byte_offset, "byte_offset")
        r = N.result()
        with N.vectors(off, ext, strd) as v:
            C.rsw_layout_add_shard(r, self._h(), name, rank_i, v[0], v[1],
                                   buf_i, boff, v[2])
        self._check(r)
        self._need(name, rank_i, buf_i, boff, ext, strd or None)
        return self

    def add_dtensor(self, name: str,
                    mesh_shape: Optional[Sequence[int]] = None,
                    mesh_ranks: Optional[Sequence[int]] = None,
                    placements: Sequence[Any] = (),
                    buffer: int = 0, byte_offset: int = 0, *,
                    mesh: Optional[DeviceMesh] = None,
                    only_rank: Optional[int] = None) -> "Layout":
        """Add the shards of tensor ``name`` laid out DTensor style: the
        device mesh (``mesh=DeviceMesh(...)``, or ``mesh_shape`` and
        ``mesh_ranks`` in row-major order) and one placement per mesh axis,
        ``Shard(d)`` or ``Replicate()``. Each rank's local shard is dense
        row-major in its buffer ``buffer`` at ``byte_offset``.

        ``only_rank=r`` adds the shard of rank ``r`` alone (nothing when
        ``r`` is not in the mesh): between processes each rank describes
        its own shards, then :meth:`allgather` shares them."""
        if mesh is not None:
            if mesh_shape is not None or mesh_ranks is not None:
                raise TypeError("give mesh= or mesh_shape/mesh_ranks, not "
                                "both")
            mshape, mranks = list(mesh.shape), list(mesh.ranks)
        else:
            if mesh_shape is None:
                raise TypeError("add_dtensor needs mesh= or mesh_shape")
            mshape = N.int_list(mesh_shape, "mesh_shape")
            if mesh_ranks is None:
                n = 1
                for s in mshape:
                    n *= s
                mranks = list(range(n))
            else:
                mranks = N.int_list(mesh_ranks, "mesh_ranks")
        places = placement_codes(placements)
        buf_i = N.int32(buffer, "buffer", Status.UNKNOWN_BUFFER)
        boff = N.int64(byte_offset, "byte_offset")
        if only_rank is not None:
            return self._add_dtensor_rank(name, mshape, mranks, places,
                                          buf_i, boff, only_rank)
        r = N.result()
        with N.vectors(mshape, mranks, places) as v:
            C.rsw_layout_add_dtensor(r, self._h(), name, v[0], v[1], v[2],
                                     buf_i, boff)
        self._check(r)
        info = self._tensors.get(name)
        if info is not None:
            m = DeviceMesh(mshape, mranks)
            for rank, coord in zip(m.ranks, m.coordinates()):
                _, ext = dtensor_local_box(info.shape, mshape, places, coord)
                self._need(name, rank, buf_i, boff, ext, None)
        return self

    def _add_dtensor_rank(self, name: str, mshape: List[int],
                          mranks: List[int], places: List[int], buffer: int,
                          byte_offset: int, rank: int) -> "Layout":
        info = self._tensors.get(name)
        if info is None:
            raise N.fail(Status.UNKNOWN_TENSOR, "add_dtensor: no tensor "
                         "'%s' was declared in this layout (add_tensor "
                         "first)" % name)
        if len(places) != len(mshape):
            raise N.fail(Status.INVALID_ARGUMENT, "one placement per mesh "
                         "axis is needed")
        m = DeviceMesh(mshape, mranks)
        coord = m.coordinate(N.as_int(rank, "only_rank"))
        if coord is None:
            return self
        off, ext = dtensor_local_box(info.shape, mshape, places, coord)
        if all(e > 0 for e in ext):
            self.add_shard(name, rank, off, ext, buffer, byte_offset)
        return self

    # ---- dtype change on the way ----------------------------------------------

    def set_block_scales(self, values: str, scales: str,
                         block: Sequence[int] = (128, 128),
                         rule: Union[ScaleRule, int, str] = "amax"
                         ) -> "Layout":
        """Declare that tensor ``values`` (f8_e4m3, in the destination
        layout) is quantized in blocks of ``block = (rows, cols)`` elements
        over its last two dims (a 1-D tensor: ``(1, n)``), with one float32
        scale per block in tensor ``scales``, whose shape is the values'
        with the last two dims divided by the block, rounded up. Declare
        both tensors first; the scales are placed with shards like any
        tensor and are not in the source layout. ``rule``: ``"amax"``
        (scale = amax / 448) or ``"ue8m0"`` (a power of two), or a
        :class:`ScaleRule`. The plan converts from the source's f32, bf16
        or f16 on the way; a reader takes ``value * scale``. Since 0.4."""
        for what, name in (("values", values), ("scales", scales)):
            if not isinstance(name, str):
                raise TypeError("%s: a tensor name is a str" % what)
        if isinstance(block, (str, bytes)) or not hasattr(block, "__len__") \
                or len(block) != 2:
            raise TypeError("block is a pair (rows, cols), not %r" % (block,))
        rows = N.int64(block[0], "block rows")
        cols = N.int64(block[1], "block cols")
        code = _scale_rule(rule)
        r = N.result()
        C.rsw_layout_set_block_scales(r, self._h(), values, scales, rows,
                                      cols, code)
        self._check(r)
        return self

    # ---- between processes -----------------------------------------------------

    def allgather(self) -> "Layout":
        """Share the shards every rank added (collective over the
        context's ranks): afterwards every rank holds the same layout."""
        r = N.result()
        C.rsw_layout_allgather(r, self._h())
        self._check(r)
        return self

    def serialize(self) -> bytes:
        """Every tensor and shard in libreshard's wire format (versioned,
        checksummed), to exchange layouts over a channel of your own."""
        r = N.result()
        C.rsw_layout_serialize(r, self._h())
        self._check(r)
        b = C.rsw_result_buffer(r)
        try:
            return N.buffer_bytes(b)
        finally:
            C.rsw_buffer_free(b)

    def deserialize(self, data: Any) -> "Layout":
        """Add what ``serialize`` bytes hold (from this or another
        layout); nothing is added on failure."""
        b = N.buffer_from_bytes(bytes(data))
        try:
            r = N.result()
            C.rsw_layout_deserialize(r, self._h(), b)
            self._check(r)
        finally:
            C.rsw_buffer_free(b)
        return self

    # ---- what it holds -----------------------------------------------------------

    @property
    def num_tensors(self) -> int:
        r = N.result()
        C.rsw_layout_num_tensors(r, self._h())
        self._check(r)
        return r.value

    @property
    def num_shards(self) -> int:
        r = N.result()
        C.rsw_layout_num_shards(r, self._h())
        self._check(r)
        return r.value

    @property
    def tensors(self) -> Dict[str, TensorInfo]:
        """The tensors declared through this object (name -> TensorInfo)."""
        return dict(self._tensors)

    def buffer_bytes(self, rank: int, buffer: int = 0) -> Optional[int]:
        """Bytes buffer ``buffer`` of ``rank`` must have for the shards
        added through this object; None if none was."""
        e = self._needs.get((rank, buffer))
        return None if e is None else e[0]

    def __repr__(self) -> str:
        if self.closed:
            return "<reshard.Layout closed>"
        return "<reshard.Layout tensors=%d shards=%d>" % (self.num_tensors,
                                                         self.num_shards)
