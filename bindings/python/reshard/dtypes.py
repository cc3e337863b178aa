# SPDX-License-Identifier: Apache-2.0
"""Element types: libreshard's ``rs_dtype`` and the names other libraries
give them."""
from __future__ import annotations

import enum
from typing import Any, Dict, Optional, Tuple, Union

__all__ = ["DType", "dtype", "DTypeLike"]


class DType(enum.IntEnum):
    """``rs_dtype``: pinned values of ``reshard.h``."""

    U8 = 1
    I8 = 2
    U16 = 3
    I16 = 4
    U32 = 5
    I32 = 6
    U64 = 7
    I64 = 8
    F16 = 9
    BF16 = 10
    F32 = 11
    F64 = 12
    F8_E4M3 = 13
    F8_E5M2 = 14
    BOOL = 15

    @property
    def itemsize(self) -> int:
        """Bytes of one element."""
        return _SIZES[self]

    @property
    def short_name(self) -> str:
        """libreshard's name: ``"bf16"``, ``"f32"``, ..."""
        return self.name.lower()

    def __str__(self) -> str:
        return self.short_name


_SIZES = {
    DType.U8: 1, DType.I8: 1, DType.U16: 2, DType.I16: 2, DType.U32: 4,
    DType.I32: 4, DType.U64: 8, DType.I64: 8, DType.F16: 2, DType.BF16: 2,
    DType.F32: 4, DType.F64: 8, DType.F8_E4M3: 1, DType.F8_E5M2: 1,
    DType.BOOL: 1,
}

# Every spelling accepted, lower case: libreshard's, numpy's, torch's
# (without "torch."), ml_dtypes', and the usual aliases.
_NAMES: Dict[str, DType] = {}
for _d, _aliases in {
    DType.U8: "u8 uint8 ubyte B",
    DType.I8: "i8 int8 byte b",
    DType.U16: "u16 uint16 ushort H",
    DType.I16: "i16 int16 short h",
    DType.U32: "u32 uint32 uintc I",
    DType.I32: "i32 int32 intc i",
    DType.U64: "u64 uint64 ulonglong Q L",
    DType.I64: "i64 int64 longlong q l",
    DType.F16: "f16 float16 half e fp16",
    DType.BF16: "bf16 bfloat16",
    DType.F32: "f32 float32 single f fp32",
    DType.F64: "f64 float64 double d fp64",
    DType.F8_E4M3: "f8_e4m3 float8_e4m3 float8_e4m3fn fp8_e4m3 e4m3",
    DType.F8_E5M2: "f8_e5m2 float8_e5m2 fp8_e5m2 e5m2",
    DType.BOOL: "bool bool_ ?",
}.items():
    for _a in _aliases.split():
        _NAMES[_a if len(_a) == 1 else _a.lower()] = _d

DTypeLike = Union[DType, int, str, Any]


def _from_name(s: str) -> Optional[DType]:
    if len(s) == 1:  # struct / buffer-protocol format characters
        return _NAMES.get(s)
    key = s.strip().lower()
    for prefix in ("torch.", "numpy.", "np.", "jnp.", "rs_dtype_", "dtype."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return _NAMES.get(key)


def dtype(x: DTypeLike) -> DType:
    """The :class:`DType` of ``x``: a DType or its value, a name ("bf16",
    "bfloat16", "float32", "f32", ...), a numpy dtype or scalar type
    (``numpy.float32``, ``ml_dtypes.bfloat16``), or a torch dtype
    (``torch.bfloat16``)."""
    if isinstance(x, DType):
        return x
    if isinstance(x, bool):
        raise TypeError("a dtype, not a bool")
    try:
        return _KNOWN[(type(x), x)]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    d = _dtype(x)
    try:
        if len(_KNOWN) < 4096:
            _KNOWN[(type(x), x)] = d
    except TypeError:
        pass
    return d


# (type, value) -> DType of the values dtype() resolved (a state dict
# names the same few dtypes thousands of times). The type is part of the
# key: 1 == 1.0 == True, but only the int names a dtype.
_KNOWN: Dict[Tuple[type, Any], DType] = {}


def _dtype(x: Any) -> DType:
    if isinstance(x, int):
        try:
            return DType(x)
        except ValueError:
            raise ValueError("no dtype has the value %d" % x) from None
    if isinstance(x, str):
        d = _from_name(x)
        if d is None:
            raise ValueError("unknown dtype %r (use one of: %s)"
                             % (x, ", ".join(t.short_name for t in DType)))
        return d
    mod = getattr(type(x), "__module__", "") or ""
    if mod.startswith("torch"):  # torch.dtype: "torch.bfloat16"
        d = _from_name(str(x))
        if d is not None:
            return d
    # numpy dtypes, numpy scalar types, ml_dtypes, anything numpy accepts
    name = getattr(x, "name", None)
    if isinstance(name, str) and _from_name(name) is not None:
        return _from_name(name)  # type: ignore[return-value]
    try:
        import numpy as np
        nd = np.dtype(x)
    except Exception:
        raise TypeError("not a dtype: %r" % (x,)) from None
    d = _from_name(nd.name)
    if d is None:
        raise ValueError("libreshard has no dtype for %s" % nd)
    return d
