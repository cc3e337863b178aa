# SPDX-License-Identifier: Apache-2.0
"""What each buffer of a layout must hold, and the check ``Plan.bind``
makes with it: the bound object's dtype exactly, its shape against the
shard it holds (or the buffer's extent when it holds several), so that
no bind can make a plan move wrong data.

Only what this process added through Python is known here: shards that
came from another rank (allgather, deserialize) are that rank's to bind.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from . import _native as N
from .dtypes import DType
from .errors import Status


class Region(NamedTuple):
    """Data of one tensor in a buffer: at ``byte_offset``, either its
    dense local tensor of ``shape``, or (``shape`` None) a box with
    strides of the caller's choosing."""

    tensor: str
    dtype: DType
    byte_offset: int
    shape: Optional[Tuple[int, ...]]


class BufferNeed:
    """The regions of one (rank, buffer) and the bytes they reach. A
    value: adding a region makes a new one (a plan keeps the needs of
    its layouts as they were when it was made, without copying them)."""

    __slots__ = ("nbytes", "regions", "dtypes", "single_shape")

    def __init__(self, regions: Tuple[Region, ...] = (), nbytes: int = 0,
                 dtypes: Tuple[DType, ...] = ()) -> None:
        self.nbytes = nbytes
        self.regions = regions
        self.dtypes = dtypes  # sorted, each once
        # The shape of the one dense local tensor the buffer holds at
        # byte 0; None when it holds anything else.
        self.single_shape: Optional[Tuple[int, ...]] = \
            regions[0].shape if len(regions) == 1 and \
            regions[0].byte_offset == 0 else None

    def plus(self, region: Region, reach: int) -> "BufferNeed":
        """This need and ``region``, which reaches byte ``reach``."""
        dtypes = self.dtypes if region.dtype in self.dtypes else \
            tuple(sorted(self.dtypes + (region.dtype,)))
        return BufferNeed(self.regions + (region,), max(self.nbytes, reach),
                          dtypes)

    def at_least(self, nbytes: int) -> "BufferNeed":
        """This need, with at least ``nbytes`` bytes."""
        return BufferNeed(self.regions, max(self.nbytes, nbytes), self.dtypes)

    def describe(self) -> str:
        if len(self.regions) == 1:
            r = self.regions[0]
            if r.shape is not None and r.byte_offset == 0:
                return "tensor '%s' (%s, local shape %s)" % (
                    r.tensor, r.dtype.short_name, _shape(r.shape))
            return "tensor '%s' (%s)" % (r.tensor, r.dtype.short_name)
        names = sorted({r.tensor for r in self.regions})
        more = "" if len(names) <= 4 else ", ... (%d tensors)" % len(names)
        return "%d shards of %s%s (%s, %d bytes)" % (
            len(self.regions), ", ".join("'%s'" % n for n in names[:4]),
            more, "/".join(d.short_name for d in self.dtypes), self.nbytes)


def _shape(shape: Tuple[int, ...]) -> str:
    return "(%s)" % ", ".join(str(s) for s in shape) if len(shape) != 1 \
        else "(%d,)" % shape[0]


def _count(shape: Tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _carrier(bound: Any, want: DType) -> bool:
    """numpy has no bfloat16: a uint16 numpy array carries its bits."""
    return want == DType.BF16 and bound.dtype == DType.U16 and \
        type(bound.obj).__module__ == "numpy"


def check(need: Optional[BufferNeed], bound: Any, what: str,
          check_dtype: bool) -> None:
    """Refuse ``bound`` (an exported object, see _memory.Bound) for the
    buffer ``need`` describes, with a message naming the call, the
    tensor, what was declared and what was given."""
    if need is None or not need.regions or not check_dtype:
        return
    shape = need.single_shape
    if shape is not None and bound.dtype is need.dtypes[0] and \
            bound.shape == shape:
        return  # the usual case: the shard's own dtype and shape
    dtypes = need.dtypes
    if bound.dtype is None or (bound.dtype == DType.U8 and
                               DType.U8 not in dtypes):
        return  # raw bytes: the library checks the size (and forgets the
        # old binding)
    if len(dtypes) > 1:
        raise N.fail(Status.INVALID_ARGUMENT, "%s holds %s of several "
                     "dtypes; bind it as bytes (a uint8 view), not as a %s"
                     % (what, need.describe(), bound.describe_type()))
    if bound.dtype != dtypes[0] and not _carrier(bound, dtypes[0]):
        raise N.fail(Status.INVALID_ARGUMENT, "%s holds %s; the %s is %s "
                     "(%d-byte elements), not %s. Bind memory of %s (or its "
                     "bytes, a uint8 view)" % (
                         what, need.describe(), bound.describe_type(),
                         bound.dtype.short_name, bound.dtype.itemsize,
                         dtypes[0].short_name, dtypes[0].short_name))
    if bound.nbytes < need.nbytes:
        return  # too small: the library refuses it (see Plan.bind)
    got = bound.shape
    if shape is not None and got is not None:
        flat = len(got) == 1 and got[0] == _count(shape)
        if tuple(got) != tuple(shape) and not flat:
            raise N.fail(Status.BAD_SHAPE, "%s holds %s; the %s has shape %s "
                         "(the same elements in another shape would land "
                         "in the wrong places). Bind a tensor of shape %s, "
                         "or a flat one of %d elements" % (
                             what, need.describe(), bound.describe_type(),
                             _shape(got),
                             _shape(shape), _count(shape)))


Needs = Dict[Tuple[int, int], BufferNeed]
