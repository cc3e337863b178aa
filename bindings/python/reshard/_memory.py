# SPDX-License-Identifier: Apache-2.0
"""What ``Plan.bind`` accepts: memory exported by the buffer protocol
(numpy arrays, bytearray, memoryview, mmap, array.array, ...) or by DLPack
(``__dlpack__``: torch tensors on CPU and CUDA, CuPy, JAX, numpy).

Each binding keeps what it needs alive: the exporting object, a
memoryview (which also locks a bytearray against resizing), or the DLPack
managed tensor, whose deleter is called when the binding is released.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, Optional, Tuple

from . import _native as N
from .dtypes import DType, _from_name
from .errors import Status

MEMORY_HOST = 0  # RS_MEMORY_HOST
MEMORY_CUDA = 1  # RS_MEMORY_CUDA

# ---- the buffer protocol ----------------------------------------------------


_api = ctypes.pythonapi
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int


def _address_of(mv: memoryview) -> int:
    """The address of a C-contiguous memoryview's first byte. The view
    itself (held by the caller) keeps the memory exported."""
    return N.C.rsw_py_buffer_address(mv)


def _format_dtype(fmt: str) -> Optional[DType]:
    try:
        return _FORMATS[fmt]
    except KeyError:
        pass
    f = fmt.lstrip("@=<>!")
    d = _from_name(f) if len(f) == 1 else None
    if len(_FORMATS) < 256:
        _FORMATS[fmt] = d
    return d


_FORMATS: Dict[str, Optional[DType]] = {}  # buffer format -> dtype


class Bound:
    """One bound buffer: the memory and what keeps it alive."""

    __slots__ = ("obj", "keep", "address", "nbytes", "memory", "device",
                 "itemsize", "dtype", "kind", "shape", "probe", "_managed",
                 "_deleter")

    def __init__(self, obj: Any, keep: Any, address: int, nbytes: int,
                 memory: int, device: int, itemsize: Optional[int],
                 dtype: Optional[DType], kind: str) -> None:
        self.obj = obj
        self.keep = keep
        self.address = address
        self.nbytes = nbytes
        self.memory = memory
        self.device = device
        self.itemsize = itemsize
        self.dtype = dtype
        self.kind = kind
        self.shape: Optional[Tuple[int, ...]] = None
        # () -> (address, nbytes) of the object now, for objects whose
        # memory can move while bound (a torch tensor's resize_, set_)
        self.probe: Optional[Callable[[], Tuple[int, int]]] = None
        self._managed: Optional[int] = None
        self._deleter: Any = None

    def release(self) -> None:
        """Let go of the memory (the DLPack deleter runs here)."""
        managed, deleter = self._managed, self._deleter
        self._managed = self._deleter = None
        if managed and deleter:
            deleter(managed)
        if isinstance(self.keep, memoryview):
            try:
                self.keep.release()
            except Exception:  # exported further by someone: let GC do it
                pass
        self.keep = None
        self.obj = None

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def describe_type(self) -> str:
        """"numpy.ndarray", "torch.Tensor", "bytearray", ..."""
        t = type(self.obj)
        mod = t.__module__.split(".")[0]
        return t.__name__ if mod == "builtins" else "%s.%s" % (mod,
                                                               t.__name__)

    def moved(self) -> bool:
        """Whether the object's memory is no longer the bound one."""
        if self.probe is None:
            return False
        try:
            return self.probe() != (self.address, self.nbytes)
        except Exception:  # the object cannot say: it did not keep it
            return True

    def describe(self) -> str:
        where = "host" if self.memory == MEMORY_HOST else "cuda:%d" % (
            self.device)
        return "%s (%d bytes, %s)" % (type(self.obj).__name__, self.nbytes,
                                      where)


def _from_buffer(obj: Any, mv: memoryview, writable: bool,
                 what: str) -> Bound:
    if not mv.c_contiguous:
        mv.release()
        raise N.fail(Status.INVALID_ARGUMENT,
                     "%s: the %s is not C-contiguous; libreshard needs one "
                     "dense block (numpy.ascontiguousarray makes a copy, "
                     "which would not see the %s)" % (
                         what, type(obj).__name__,
                         "result" if writable else "changes"))
    if writable and mv.readonly:
        mv.release()
        raise N.fail(Status.INVALID_ARGUMENT,
                     "%s: the %s is read-only, and a destination buffer is "
                     "written" % (what, type(obj).__name__))
    b = Bound(obj, mv, _address_of(mv), mv.nbytes, MEMORY_HOST, -1,
              mv.itemsize, _format_dtype(mv.format), "buffer")
    b.shape = tuple(mv.shape) if mv.shape is not None else (mv.nbytes,)
    if mv.format in ("B", "c") and not hasattr(obj, "dtype"):
        b.dtype = None  # bytes, bytearray, mmap, ...: untyped memory
    return b

# ---- DLPack ---------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", _DLDevice),
        ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_DLManagedTensor._fields_ = [
    ("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.c_void_p),
]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_DL_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL",
                    7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
                    11: "ROCm host", 13: "CUDA managed", 14: "oneAPI",
                    15: "WebGPU", 16: "Hexagon", 17: "MAIA"}
_DL_DTYPES = {
    (0, 8): DType.I8, (0, 16): DType.I16, (0, 32): DType.I32,
    (0, 64): DType.I64, (1, 8): DType.U8, (1, 16): DType.U16,
    (1, 32): DType.U32, (1, 64): DType.U64, (2, 16): DType.F16,
    (2, 32): DType.F32, (2, 64): DType.F64, (4, 16): DType.BF16,
    (6, 8): DType.BOOL, (10, 8): DType.F8_E4M3, (12, 8): DType.F8_E5M2,
}
# Names the capsule gets once consumed; they must outlive the capsules.
_USED = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"


def _dlpack_capsule(obj: Any) -> Any:
    try:  # DLPack 1.x: a versioned tensor, with a read-only flag
        return obj.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        pass
    return obj.__dlpack__()


def _torch_bool_as_bytes(obj: Any) -> Any:
    """torch before 2.0 exports no bool tensor: its bytes instead."""
    if type(obj).__module__.startswith("torch") and \
            str(getattr(obj, "dtype", "")) == "torch.bool":
        import torch
        return obj.view(torch.uint8)
    return None


def _from_dlpack(obj: Any, writable: bool, what: str) -> Bound:
    try:
        capsule = _dlpack_capsule(obj)
    except (RuntimeError, BufferError):
        as_bytes = _torch_bool_as_bytes(obj)
        if as_bytes is None:
            raise
        bound = _from_dlpack(as_bytes, writable, what)
        bound.obj, bound.dtype = obj, DType.BOOL
        return bound
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        ptr = _api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        m = _DLManagedTensorVersioned.from_address(ptr)
        if m.version.major != 1:
            raise N.fail(Status.UNSUPPORTED, "%s: DLPack version %d.%d is "
                         "not understood" % (what, m.version.major,
                                             m.version.minor))
        read_only = bool(m.flags & _DL_READ_ONLY)
        used = _USED_VERSIONED
    elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
        ptr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
        m = _DLManagedTensor.from_address(ptr)  # type: ignore[assignment]
        read_only = False
        used = _USED
    else:
        raise TypeError("%s: %s.__dlpack__() did not return a DLPack "
                        "capsule" % (what, type(obj).__name__))
    # Consumed from here: the deleter is ours to call.
    _api.PyCapsule_SetName(capsule, used)
    bound = Bound(obj, None, 0, 0, MEMORY_HOST, -1, None, None, "dlpack")
    bound._managed = ptr
    bound._deleter = _DELETER(m.deleter) if m.deleter else None
    try:
        t = m.dl_tensor
        dt = t.dtype
        bits = dt.bits * dt.lanes
        if bits % 8:
            raise N.fail(Status.UNSUPPORTED, "%s: elements of %d bits are "
                         "not whole bytes" % (what, bits))
        itemsize = bits // 8
        shape = [t.shape[i] for i in range(t.ndim)]
        count = 1
        for s in shape:
            count *= s
        if t.strides and count > 0:
            expect = 1
            for i in reversed(range(t.ndim)):
                if shape[i] != 1 and t.strides[i] != expect:
                    raise N.fail(
                        Status.INVALID_ARGUMENT,
                        "%s: the %s is not contiguous (shape %s, strides "
                        "%s); libreshard needs one dense row-major block "
                        "(.contiguous() makes a copy, which would not see "
                        "the %s)" % (what, type(obj).__name__, tuple(shape),
                                     tuple(t.strides[j] for j in
                                           range(t.ndim)),
                                     "result" if writable else "changes"))
                expect *= shape[i]
        if writable and read_only:
            raise N.fail(Status.INVALID_ARGUMENT, "%s: the %s is read-only "
                         "(DLPack), and a destination buffer is written"
                         % (what, type(obj).__name__))
        kind = t.device.device_type
        if kind in (_KDL_CPU, _KDL_CUDA_HOST):
            memory, device = MEMORY_HOST, -1
        elif kind in (_KDL_CUDA, _KDL_CUDA_MANAGED):
            memory, device = MEMORY_CUDA, t.device.device_id
        else:
            raise N.fail(Status.WRONG_MEMORY, "%s: memory of a %s device; "
                         "libreshard moves host and CUDA memory" % (
                             what, _DL_DEVICE_NAMES.get(kind, str(kind))))
        bound.address = (t.data or 0) + t.byte_offset
        bound.nbytes = count * itemsize
        bound.memory, bound.device = memory, device
        bound.itemsize = itemsize
        bound.dtype = _DL_DTYPES.get((dt.code, dt.bits)) if dt.lanes == 1 \
            else None
        bound.shape = tuple(shape)
        bound.keep = capsule
        return bound
    except BaseException:
        bound.release()
        raise


def _from_array_interface(obj: Any, writable: bool, what: str) -> Bound:
    """numpy's __array_interface__ (dtypes the buffer protocol cannot
    express, such as ml_dtypes' bfloat16)."""
    ai = obj.__array_interface__
    address, read_only = ai["data"]
    shape = tuple(ai["shape"])
    typestr = ai["typestr"]
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    count = 1
    for x in shape:
        count *= x
    strides = ai.get("strides")
    if strides is not None and count > 0:
        expect = itemsize
        for i in reversed(range(len(shape))):
            if shape[i] != 1 and strides[i] != expect:
                raise N.fail(Status.INVALID_ARGUMENT,
                             "%s: the %s is not C-contiguous (strides %s)"
                             % (what, type(obj).__name__, tuple(strides)))
            expect *= shape[i]
    if writable and read_only:
        raise N.fail(Status.INVALID_ARGUMENT, "%s: the %s is read-only, and "
                     "a destination buffer is written"
                     % (what, type(obj).__name__))
    name = getattr(getattr(obj, "dtype", None), "name", "")
    b = Bound(obj, None, address or 0, count * itemsize, MEMORY_HOST, -1,
              itemsize or None, _from_name(name) if name else None,
              "array_interface")
    b.shape = shape
    return b


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and \
        hasattr(obj, "data_ptr") and hasattr(obj, "__dlpack__")


def _from_torch(obj: Any, writable: bool, what: str) -> Bound:
    """A torch tensor (or nn.Parameter) through DLPack; one that requires
    grad through detach() (the same memory, which torch's exporter would
    refuse otherwise). Its memory can move under the binding (resize_,
    set_): the binding keeps a probe compared before each execution."""
    tensor = obj
    if getattr(obj, "requires_grad", False):
        obj = obj.detach()
    b = _from_dlpack(obj, writable, what)
    b.obj = tensor
    b.probe = lambda: (tensor.data_ptr(),
                       tensor.numel() * tensor.element_size())
    return b


def export(obj: Any, writable: bool, what: str) -> Bound:
    """The memory of ``obj``, checked: C-contiguous, writable when it is
    written. The buffer protocol first, then DLPack, then numpy's
    __array_interface__."""
    if isinstance(obj, Bound):
        return obj
    if hasattr(obj, "to_local") and hasattr(obj, "placements"):
        obj = obj.to_local()  # a DTensor: this rank's shard, same memory
    if _is_torch(obj):
        return _from_torch(obj, writable, what)
    first: Optional[BaseException] = None
    try:
        mv = memoryview(obj)
    except (TypeError, ValueError, BufferError, NotImplementedError) as e:
        first = e
    else:
        return _from_buffer(obj, mv, writable, what)
    if hasattr(obj, "__dlpack__"):
        try:
            return _from_dlpack(obj, writable, what)
        except (TypeError, BufferError, NotImplementedError) as e:
            if not hasattr(obj, "__array_interface__"):
                raise
            first = e
    if hasattr(obj, "__array_interface__"):
        return _from_array_interface(obj, writable, what)
    if isinstance(first, TypeError):
        raise TypeError("%s: a %s has neither the buffer protocol nor "
                        "DLPack (__dlpack__); bind a numpy array, bytearray, "
                        "memoryview, torch tensor, ..."
                        % (what, type(obj).__name__)) from None
    raise TypeError("%s: the memory of a %s cannot be exported: %s"
                    % (what, type(obj).__name__, first)) from first
