# SPDX-License-Identifier: Apache-2.0
"""Exceptions of libreshard: one class per group of status codes.

Every failure of a libreshard call raises an :class:`Error` carrying

- ``status``: the ``rs_status`` code (a :class:`Status`, which is an ``int``),
- ``name``: its C name, ``"RS_ERR_..."``,
- ``message``: the library's detail (what was wrong, with the values).

The class says the group (the hundreds of the status, as in ``reshard.h``)::

    Error
    +-- ArgumentError    1xx  the caller's arguments       (also a ValueError)
    +-- LayoutError      2xx  the layouts do not fit together
    +-- UnsupportedError 3xx  valid, but not supported
    +-- ResourceError    4xx  out of memory
    +-- TransportError   5xx  the transport and the other ranks
    |   +-- TimeoutError     501  (also the built-in TimeoutError)
    |   +-- MismatchError    502  ranks disagree on layouts or plan
    |   +-- CorruptError     503  received bytes failed their check
    +-- InternalError    9xx  a bug in libreshard
"""
from __future__ import annotations

import builtins
import enum
from typing import Dict, Tuple, Type, Union

__all__ = [
    "Status", "Error", "ArgumentError", "LayoutError", "UnsupportedError",
    "ResourceError", "TransportError", "TimeoutError", "MismatchError",
    "CorruptError", "InternalError", "error_class",
]


class Status(enum.IntEnum):
    """The status codes of ``reshard.h`` (``RS_OK``, ``RS_ERR_*``)."""

    OK = 0
    INVALID_ARGUMENT = 100
    NULL_POINTER = 101
    BAD_SHAPE = 102
    TOO_MANY_DIMS = 103
    OUT_OF_BOUNDS = 104
    OVERFLOW = 105
    OVERLAP = 106
    DUPLICATE_NAME = 107
    UNKNOWN_TENSOR = 108
    UNKNOWN_RANK = 109
    UNKNOWN_BUFFER = 110
    BUFFER_TOO_SMALL = 111
    BAD_PARAM = 112
    WRONG_CONTEXT = 113
    WRONG_MEMORY = 114
    INCOMPATIBLE = 200
    NOT_COVERED = 201
    UNSUPPORTED = 300
    NO_MEMORY = 400
    TRANSPORT = 500
    TIMEOUT = 501
    MISMATCH = 502
    CORRUPT = 503
    INTERNAL = 900

    @property
    def c_name(self) -> str:
        """The C enumerator: ``"RS_OK"`` or ``"RS_ERR_..."``."""
        return "RS_OK" if self == 0 else "RS_ERR_" + self.name


class Error(Exception):
    """A libreshard call failed. ``status``, ``name`` and ``message`` say how."""

    status: Union[Status, int]
    name: str
    message: str

    def __init__(self, status: int, name: str = "", message: str = "") -> None:
        try:
            st: Union[Status, int] = Status(status)
        except ValueError:
            st = int(status)
        if not name:
            name = st.c_name if isinstance(st, Status) else "RS_ERR_%d" % st
        super().__init__(int(st), name, message)
        self.status = st
        self.name = name
        self.message = message

    def __str__(self) -> str:
        if self.message:
            return "%s (%d): %s" % (self.name, int(self.status), self.message)
        return "%s (%d)" % (self.name, int(self.status))

    def __repr__(self) -> str:
        return "%s(%d, %r, %r)" % (type(self).__name__, int(self.status),
                                   self.name, self.message)

    def __reduce__(self) -> Tuple[type, Tuple[int, str, str]]:
        # picklable with the three fields
        return (type(self), (int(self.status), self.name, self.message))


class ArgumentError(Error, ValueError):
    """1xx: an argument out of its range, an unknown name, rank or buffer,
    a buffer too small or of the wrong kind of memory."""


class LayoutError(Error):
    """2xx: the two layouts do not fit together (names or shapes differ,
    a destination element that no source holds)."""


class UnsupportedError(Error):
    """3xx: valid, but not supported (a dtype change, a transport that is
    not available here)."""


class ResourceError(Error):
    """4xx: an allocation failed."""


class TransportError(Error):
    """5xx: the transport or another rank failed. The context is done
    afterwards (fail-stop): close it and make a new one."""


class TimeoutError(TransportError, builtins.TimeoutError):  # noqa: A001
    """501: a peer did not answer within ``timeout_ms``. Also caught by
    ``except TimeoutError`` with the built-in class."""


class MismatchError(TransportError):
    """502: the ranks disagree on the layouts or the plan."""


class CorruptError(TransportError):
    """503: received bytes failed their check (integrity on), or malformed
    serialized layout bytes."""


class InternalError(Error):
    """9xx: a bug in libreshard; please report it."""


_EXACT: Dict[int, Type[Error]] = {
    int(Status.TIMEOUT): TimeoutError,
    int(Status.MISMATCH): MismatchError,
    int(Status.CORRUPT): CorruptError,
}
_GROUPS: Tuple[Type[Error], ...] = (
    Error, ArgumentError, LayoutError, UnsupportedError, ResourceError,
    TransportError, Error, Error, Error, InternalError)


def error_class(status: int) -> Type[Error]:
    """The exception class of a status code (by its group)."""
    status = int(status)
    if status in _EXACT:
        return _EXACT[status]
    if 100 <= status < 1000:
        return _GROUPS[status // 100]
    return Error


def make_error(status: int, name: str = "", message: str = "") -> Error:
    """An instance of the right class for ``status``."""
    return error_class(status)(status, name, message)
