# SPDX-License-Identifier: Apache-2.0
"""The library's log from Python: its level and subsystems (what
``RESHARD_DEBUG`` and ``RESHARD_DEBUG_SUBSYS`` set), and its lines routed
into :mod:`logging` instead of ``RESHARD_DEBUG_FILE`` or stderr.

::

    import logging, reshard
    logging.basicConfig(level=logging.INFO)
    reshard.log_to_python()            # the "reshard" logger
    reshard.set_log_level("info")      # or RESHARD_DEBUG=INFO
"""
from __future__ import annotations

import atexit
import logging
from typing import FrozenSet, Iterable, Optional, Tuple, Union

from . import _native as N
from ._native import C
from .errors import Status

__all__ = ["set_log_level", "log_level", "log_to_python", "log_to_stderr",
           "LOG_LEVELS", "LOG_SUBSYSTEMS"]

#: Library log levels (``rs_log_level``), each including those before it.
LOG_LEVELS = {"none": 0, "warn": 1, "info": 2, "trace": 3}
#: Subsystems (``RS_LOG_*`` bits).
LOG_SUBSYSTEMS = {"context": 0x01, "layout": 0x02, "plan": 0x04,
                  "exec": 0x08, "transport": 0x10}
_ALL = 0xFFFFFFFF
_TO_PYTHON = {1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def set_log_level(level: Union[str, int],
                  subsystems: Optional[Iterable[str]] = None) -> None:
    """Log at ``level`` ("none", "warn", "info", "trace" or 0-3) for
    ``subsystems`` (names of :data:`LOG_SUBSYSTEMS`; None: all), for the
    whole process, over what the environment said."""
    if isinstance(level, str):
        try:
            code = LOG_LEVELS[level.lower()]
        except KeyError:
            raise N.fail(Status.INVALID_ARGUMENT, "set_log_level: level %r "
                         "is one of %s" % (level, ", ".join(LOG_LEVELS))
                         ) from None
    else:
        code = N.int32(level, "level")
    mask = _ALL
    if subsystems is not None:
        if isinstance(subsystems, str):
            subsystems = [subsystems]
        mask = 0
        for name in subsystems:
            bit = LOG_SUBSYSTEMS.get(str(name).lower())
            if bit is None:
                raise N.fail(Status.INVALID_ARGUMENT, "set_log_level: "
                             "subsystem %r is one of %s" % (
                                 name, ", ".join(LOG_SUBSYSTEMS)))
            mask |= bit
    r = N.result()
    C.rsw_log_set_level(r, code, mask)
    if r.status:
        N.raise_for(r)


def log_level() -> Tuple[str, FrozenSet[str]]:
    """(level, subsystems) now in force."""
    code, mask = C.rsw_log_level(), C.rsw_log_subsystems()
    name = next(k for k, v in LOG_LEVELS.items() if v == code)
    return name, frozenset(k for k, v in LOG_SUBSYSTEMS.items() if mask & v)


def log_to_python(logger: Union[logging.Logger, str, None] = None) -> None:
    """Send the library's lines to ``logger`` (a Logger or its name;
    default "reshard"): WARN as WARNING, INFO as INFO, TRACE as DEBUG,
    each record carrying ``rank`` (None where none applies) and
    ``subsystem``. The library's level still decides what is logged
    (:func:`set_log_level`, ``RESHARD_DEBUG``)."""
    if logger is None or isinstance(logger, str):
        logger = logging.getLogger(logger or "reshard")
    log = logger

    def sink(level: int, subsystem: int, rank: int, message: str) -> None:
        name = next((k for k, v in LOG_SUBSYSTEMS.items() if v == subsystem),
                    "?")
        log.log(_TO_PYTHON.get(level, logging.DEBUG), "%s: %s", name,
                message, extra={"rank": rank if rank >= 0 else None,
                                "subsystem": name})
    C.rsw_py_log_route(sink)


def log_to_stderr() -> None:
    """Send the library's lines back to ``RESHARD_DEBUG_FILE`` or
    stderr."""
    C.rsw_py_log_route(None)


# The interpreter must not be called once it is going away.
atexit.register(log_to_stderr)
