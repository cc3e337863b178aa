# SPDX-License-Identifier: Apache-2.0
"""libreshard for Python: move tensors from one distributed layout straight
into another.

::

    import numpy as np
    import reshard
    from reshard import Shard, Replicate

    with reshard.Context.local(4) as ctx:
        src = ctx.layout().add_tensor("w", "float32", (6, 8))
        src.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[0, 1],
                        placements=[Shard(0)])
        dst = ctx.layout().add_tensor("w", "float32", (6, 8))
        dst.add_dtensor("w", mesh_shape=(2,), mesh_ranks=[2, 3],
                        placements=[Shard(1)])
        with ctx.plan(src, dst) as plan:
            full = np.arange(48, dtype=np.float32).reshape(6, 8)
            plan.bind("src", 0, 0, full[:3].copy())
            plan.bind("src", 1, 0, full[3:].copy())
            out = [np.zeros((6, 4), np.float32) for _ in range(2)]
            plan.bind("dst", 2, 0, out[0])
            plan.bind("dst", 3, 0, out[1])
            plan.execute()

Contexts (:class:`Context`), layouts (:class:`Layout`) and plans
(:class:`Plan`) own C handles: close them (or use ``with``) in any order;
the garbage collector closes what is left. Failures raise
:class:`reshard.Error` subclasses that carry ``status``, ``name`` and
``message``.
"""
from __future__ import annotations

from ._native import version as _version
from .context import (ALL_RANKS, NCCL_UNIQUE_ID_BYTES, Context, Param,
                      Rounds, Transport, nccl_unique_id)
from .dtypes import DType, dtype
from .errors import (ArgumentError, CorruptError, Error, InternalError,
                     LayoutError, MismatchError, ResourceError, Status,
                     TimeoutError, TransportError, UnsupportedError,
                     error_class)
from .layout import Layout, ScaleRule, TensorInfo
from .logs import (LOG_LEVELS, LOG_SUBSYSTEMS, log_level, log_to_python,
                   log_to_stderr, set_log_level)
from .mesh import (DeviceMesh, LocalBox, Replicate, Shard, ShardedTensor,
                   StridedShard, dtensor_local_box, dtensor_local_boxes)
from .plan import DST, SRC, STAT_NAMES, Plan, Side
from . import recipes

#: Version of the loaded libreshard ("MAJOR.MINOR.PATCH"); the bindings
#: are versioned with the library.
library_version: str = _version()
__version__ = library_version

__all__ = [
    "Context", "Layout", "Plan", "TensorInfo", "ScaleRule", "Shard",
    "Replicate", "StridedShard", "LocalBox", "ShardedTensor",
    "DeviceMesh", "dtensor_local_box", "dtensor_local_boxes", "DType", "dtype", "Param", "Rounds",
    "Transport", "Side", "SRC", "DST", "STAT_NAMES", "ALL_RANKS",
    "NCCL_UNIQUE_ID_BYTES", "nccl_unique_id", "library_version",
    "Status", "Error", "ArgumentError", "LayoutError", "UnsupportedError",
    "ResourceError", "TransportError", "MismatchError", "CorruptError",
    "InternalError", "error_class", "set_log_level", "log_level",
    "log_to_python", "log_to_stderr", "LOG_LEVELS", "LOG_SUBSYSTEMS",
]
# reshard.TimeoutError (a subclass of the built-in TimeoutError) is left out
# of __all__ so that `from reshard import *` does not shadow the built-in.
