# SPDX-License-Identifier: Apache-2.0
"""Layouts: which rank holds which boxes of which tensors, and where in
its buffers."""
from __future__ import annotations

import enum
import operator
from typing import (Any, Dict, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

from . import _native as N
from ._native import C
from .context import Context, _Handle
from .dtypes import DType, DTypeLike, dtype as to_dtype
from .errors import Status
from ._needs import BufferNeed, Needs, Region
from .mesh import (DeviceMesh, Pieces, StridedShard, _orders_agree,
                   is_dtensor, placement, placement_codes, STRIDED_ORDERS)

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


def _has_strided(places: Tuple[Any, ...]) -> bool:
    return any(type(p) is StridedShard for p in places)


def _placements(ps: Sequence[Any],
                by_value: Dict[Any, Tuple[Any, ...]]) -> Tuple[Any, ...]:
    """Placements of this module for ``ps``, through ``by_value`` (equal
    placement lists convert once)."""
    try:
        got = by_value.get(ps)
    except TypeError:  # not hashable
        return tuple(placement(p) for p in ps)
    if got is None:
        got = by_value[ps] = tuple(placement(p) for p in ps)
    return got


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
        # (rank, buffer) -> what it holds; only what was added here
        # (allgathered or deserialized shards are not known to Python).
        self._needs: Needs = {}
        # rank -> {name: buffer}: the names a state dict binds by
        # (add_state_dict, recipes)
        self._buffer_names: Dict[int, Dict[str, int]] = {}

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
        self._declare(name, to_dtype(dtype),
                      tuple(N.int_list(shape, "shape")))
        return self

    def _declare(self, name: str, dt: DType, shape: Tuple[int, ...]) -> None:
        """add_tensor on a name, a DType and a tuple of ints (the C call
        checks their range)."""
        if not shape:
            raise N.fail(Status.BAD_SHAPE, "tensor '%s': a shape has 1 to "
                         "16 dimensions, not 0" % name)
        r = N.result()
        C.rsw_layout_add_tensor(r, self._h(), name, int(dt), shape)
        self._check(r)
        self._tensors[name] = TensorInfo(name, dt, shape)

    def _need(self, name: str, rank: int, buffer: int, byte_offset: int,
              extent: Sequence[int], strides: Optional[Sequence[int]],
              local_shape: Optional[Sequence[int]] = None) -> None:
        """Record what (rank, buffer) holds: a box of ``extent`` with
        ``strides`` (None: dense), part of a dense local tensor of
        ``local_shape`` starting at ``byte_offset`` when given."""
        info = self._tensors.get(name)
        if info is None:
            return
        dense = local_shape if local_shape is not None else \
            (None if strides else extent)
        if dense is not None:
            self._need_dense(info, rank, buffer, byte_offset, tuple(dense))
            return
        if min(extent, default=0) <= 0:
            return
        span = 1 + sum((e - 1) * s for e, s in zip(extent, strides or ()))
        self._need_region(rank, buffer, Region(name, info.dtype, byte_offset,
                                               None),
                          byte_offset + span * info.dtype.itemsize)

    def _need_dense(self, info: TensorInfo, rank: int, buffer: int,
                    byte_offset: int, shape: Tuple[int, ...]) -> None:
        """(rank, buffer) holds a dense local tensor of ``info`` of
        ``shape`` at ``byte_offset`` (nothing when it is empty)."""
        n = info.dtype.itemsize
        for s in shape:
            if s <= 0:
                return
            n *= s
        self._need_region(rank, buffer, Region(info.name, info.dtype,
                                               byte_offset, shape),
                          byte_offset + n)

    def _need_region(self, rank: int, buffer: int, region: Region,
                     reach: int) -> None:
        key = (rank, buffer)
        need = self._needs.get(key)
        self._needs[key] = BufferNeed((region,), reach, (region.dtype,)) \
            if need is None else need.plus(region, reach)

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
        self._add_box(name, rank_i, off, ext, buf_i, boff, strd)
        self._need(name, rank_i, buf_i, boff, ext, strd or None)
        return self

    def _add_box(self, name: str, rank: int, offset: Sequence[int],
                 extent: Sequence[int], buffer: int, byte_offset: int,
                 strides: Sequence[int]) -> None:
        r = N.result()
        C.rsw_layout_add_shard(r, self._h(), name, rank, list(offset),
                               list(extent), buffer, byte_offset,
                               list(strides))
        self._check(r)

    def add_dtensor(self, name: str,
                    mesh_shape: Optional[Sequence[int]] = None,
                    mesh_ranks: Optional[Sequence[int]] = None,
                    placements: Sequence[Any] = (),
                    buffer: int = 0, byte_offset: int = 0, *,
                    mesh: Any = None,
                    only_rank: Optional[int] = None,
                    strided: Optional[str] = None) -> "Layout":
        """Add the shards of tensor ``name`` laid out DTensor style: the
        device mesh (``mesh=``, a :class:`DeviceMesh` or torch's
        ``DeviceMesh``; or ``mesh_shape`` and ``mesh_ranks`` in row-major
        order) and one placement per mesh axis: ``Shard(d)``,
        ``Replicate()``, ``StridedShard(d, f)``, or torch's own
        (``Partial`` is refused: reduce first). Each rank's local tensor
        is dense row-major in its buffer ``buffer`` at ``byte_offset``;
        with ``StridedShard`` it may hold several boxes of the tensor, all
        described.

        ``strided``: who made a tensor with ``StridedShard`` placements,
        ``"fsdp2"`` (FSDP2 over TP) or ``"distribute"``
        (``distribute_tensor``); they keep different elements where the
        sizes are uneven, and such a tensor is refused without it.

        ``only_rank=r`` adds the shard of rank ``r`` alone (nothing when
        ``r`` is not in the mesh): between processes each rank describes
        its own shards, then :meth:`allgather` shares them."""
        if mesh is not None:
            if mesh_shape is not None or mesh_ranks is not None:
                raise TypeError("give mesh= or mesh_shape/mesh_ranks, not "
                                "both")
            m = DeviceMesh.of(mesh)
        else:
            if mesh_shape is None:
                raise TypeError("add_dtensor needs mesh= or mesh_shape")
            m = DeviceMesh(mesh_shape, mesh_ranks)
        places = tuple(placement(p) for p in placements)
        buf_i = N.int32(buffer, "buffer", Status.UNKNOWN_BUFFER)
        boff = N.int64(byte_offset, "byte_offset")
        if strided is not None and strided not in STRIDED_ORDERS:
            raise N.fail(Status.INVALID_ARGUMENT, "add_dtensor: strided=%r "
                         "is one of %s" % (strided, ", ".join(STRIDED_ORDERS)))
        only = None if only_rank is None else N.as_int(only_rank,
                                                       "only_rank")
        return self._place(name, m, places, buf_i, boff, only, strided)

    def _place(self, name: str, m: DeviceMesh, places: Tuple[Any, ...],
               buffer: int, byte_offset: int, only_rank: Optional[int],
               strided: Optional[str],
               is_strided: Optional[bool] = None) -> "Layout":
        """add_dtensor on checked arguments (placements of this module;
        ``is_strided``: whether one is a StridedShard, when known)."""
        if is_strided is None:
            is_strided = _has_strided(places)
        if only_rank is None and not is_strided:
            return self._add_dtensor_all(name, m, places, buffer,
                                         byte_offset)
        info = self._tensors.get(name)
        if info is None:
            raise N.fail(Status.UNKNOWN_TENSOR, "add_dtensor: no tensor "
                         "'%s' was declared in this layout (add_tensor "
                         "first)" % name)
        if len(places) != m.ndim:
            raise N.fail(Status.INVALID_ARGUMENT, "add_dtensor('%s'): one "
                         "placement per mesh axis is needed: mesh %r, "
                         "placements %r" % (name, m.shape, list(places)))
        order = strided or "distribute"
        if is_strided and strided is None and \
                not _orders_agree(info.shape, m.shape, places):
            raise N.fail(Status.INVALID_ARGUMENT, "add_dtensor('%s'): shape "
                         "%s with placements %r is uneven along a strided "
                         "dimension, where distribute_tensor and FSDP2 keep "
                         "different elements; say which made it: "
                         "strided='fsdp2' or strided='distribute'" % (
                             name, list(info.shape), list(places)))
        ranks = m.ranks if only_rank is None else (only_rank,)
        for rank in ranks:
            got = m._pieces(info.shape, places, rank, order)
            if got is not None:
                self._add_local(info, rank, got, buffer, byte_offset)
        return self

    def _add_dtensor_all(self, name: str, m: DeviceMesh, places: List[Any],
                         buffer: int, byte_offset: int) -> "Layout":
        """Plain placements on every rank: the C library places them."""
        codes = placement_codes(places)
        r = N.result()
        C.rsw_layout_add_dtensor(r, self._h(), name, m.shape, m.ranks, codes,
                                 buffer, byte_offset)
        self._check(r)
        info = self._tensors.get(name)
        if info is not None:
            places_t = tuple(places)
            for rank in m.ranks:
                self._need_dense(info, rank, buffer, byte_offset,
                                 m._pieces(info.shape, places_t, rank).shape)
        return self

    def _add_local(self, info: TensorInfo, rank: int, pieces: Pieces,
                   buffer: int, byte_offset: int) -> None:
        """The boxes of one rank's dense local tensor (``pieces``) at
        ``byte_offset`` of its buffer; ``rank`` fits a C int."""
        boxes = pieces.boxes
        if not boxes:
            return
        strides = [] if len(boxes) == 1 else pieces.strides
        size = info.dtype.itemsize
        for offset, extent, at in boxes:
            self._add_box(info.name, rank, offset, extent, buffer,
                          byte_offset + at * size, strides)
        self._need_dense(info, rank, buffer, byte_offset, pieces.shape)

    # ---- a whole state dict --------------------------------------------------

    def add_state_dict(self, state_dict: Mapping[str, Any], *,
                       rank: Optional[int] = None,
                       dtypes: Optional[Mapping[str, DTypeLike]] = None,
                       strided: Optional[str] = None,
                       first_buffer: int = 0) -> "Layout":
        """Declare every tensor of ``state_dict`` (name -> value) and add
        its shards, each tensor in its own buffer (the i-th entry in
        buffer ``first_buffer + i``, on every rank), remembered by name
        for :meth:`Plan.bind_state_dict`.

        A value is a torch DTensor or a :class:`ShardedTensor` (global
        shape, dtype, device mesh and placements are read from it), or a
        plain tensor or array, which ``rank`` holds whole. ``rank``: the
        rank of this process, which adds its own shards (then
        :meth:`allgather`); None adds every rank of each DTensor's mesh
        (in one process); several ranks may add theirs to one layout.
        ``dtypes`` overrides a tensor's dtype (a numpy
        uint16 array carrying bf16: ``{"w": "bf16"}``). ``strided``: see
        :meth:`add_dtensor` (FSDP2 state dicts: ``"fsdp2"``)."""
        rank_i = None if rank is None else N.int32(rank, "rank",
                                                   Status.UNKNOWN_RANK)
        if strided is not None and strided not in STRIDED_ORDERS:
            raise N.fail(Status.INVALID_ARGUMENT, "add_state_dict: strided="
                         "%r is one of %s" % (strided,
                                              ", ".join(STRIDED_ORDERS)))
        dtypes = dtypes or {}
        # A state dict shares a few meshes and placement tuples among all
        # its tensors: each is converted once per call, keyed by identity
        # (each entry holds its key object, so that no id is reused by
        # another object while the call runs; a placement list, which may
        # change, is read every time).
        meshes: Dict[int, Tuple[Any, DeviceMesh]] = {}
        placed: Dict[int, Tuple[Any, Tuple[Any, ...], bool]] = {}
        by_value: Dict[Any, Tuple[Any, ...]] = {}
        tensors, names = self._tensors, self._buffer_names
        for i, (name, value) in enumerate(state_dict.items()):
            buf = first_buffer + i
            dt = dtypes.get(name)
            dt = to_dtype(dt if dt is not None else
                          getattr(value, "dtype", None))
            shape = tuple(map(operator.index, value.shape))
            known = tensors.get(name)
            if known is None:
                if not isinstance(name, str):
                    raise TypeError("a tensor name is a str, not %s"
                                    % type(name).__name__)
                self._declare(name, dt, shape)
            elif known.dtype != dt or known.shape != shape:
                raise N.fail(Status.DUPLICATE_NAME, "add_state_dict: '%s' is "
                             "already declared as %s %s, not %s %s" % (
                                 name, known.dtype.short_name,
                                 list(known.shape), dt.short_name,
                                 list(shape)))
            if not is_dtensor(value):
                if rank_i is None:
                    raise N.fail(Status.INVALID_ARGUMENT, "add_state_dict: "
                                 "'%s' is a plain %s, held whole by the "
                                 "rank of this process: give rank=" % (
                                     name, type(value).__name__))
                self.add_shard(name, rank_i, [0] * len(shape), shape, buf)
                names.setdefault(rank_i, {})[name] = buf
                continue
            dm = value.device_mesh
            got_mesh = meshes.get(id(dm))
            if got_mesh is None:
                got_mesh = meshes[id(dm)] = (dm, DeviceMesh.of(dm))
            mesh = got_mesh[1]
            ps = value.placements
            got = placed.get(id(ps)) if type(ps) is tuple else None
            if got is None:
                places = _placements(ps, by_value)
                got = (ps, places, _has_strided(places))
                if type(ps) is tuple:
                    placed[id(ps)] = got
            if rank_i is None:
                self._place(name, mesh, got[1], buf, 0, None, strided,
                            got[2])
                for r in mesh.ranks:
                    names.setdefault(r, {})[name] = buf
            else:
                self._place(name, mesh, got[1], buf, 0, rank_i, strided,
                            got[2])
                if rank_i in mesh:
                    names.setdefault(rank_i, {})[name] = buf
        return self

    def name_buffer(self, rank: int, name: str, buffer: int) -> "Layout":
        """Give buffer ``buffer`` of ``rank`` the name a state dict binds
        it by (:meth:`Plan.bind_state_dict`); recipes name an engine's
        fused buffers this way."""
        self._buffer_names.setdefault(
            N.int32(rank, "rank", Status.UNKNOWN_RANK), {})[name] = \
            N.int32(buffer, "buffer", Status.UNKNOWN_BUFFER)
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
        return None if e is None else e.nbytes

    def __repr__(self) -> str:
        if self.closed:
            return "<reshard.Layout closed>"
        return "<reshard.Layout tensors=%d shards=%d>" % (self.num_tensors,
                                                         self.num_shards)
