# SPDX-License-Identifier: Apache-2.0
# Stub of the SWIG proxy module (generated from swig/reshard.i): the
# functions of the extension, the rsw_result struct, the C constants.
from typing import Any

from ._reshard_swig import *  # noqa: F401,F403

class rsw_result:
    """What a fallible call filled: status, name, message, outputs."""

    @property
    def status(self) -> int: ...
    @property
    def value(self) -> int: ...
    @property
    def real(self) -> float: ...
    @property
    def handle(self) -> Any: ...
    @property
    def name(self) -> str: ...
    @property
    def message(self) -> str: ...
    def __init__(self) -> None: ...

RS_OK: int
RS_ERR_INVALID_ARGUMENT: int
RS_ERR_NULL_POINTER: int
RS_ERR_BAD_SHAPE: int
RS_ERR_TOO_MANY_DIMS: int
RS_ERR_OUT_OF_BOUNDS: int
RS_ERR_OVERFLOW: int
RS_ERR_OVERLAP: int
RS_ERR_DUPLICATE_NAME: int
RS_ERR_UNKNOWN_TENSOR: int
RS_ERR_UNKNOWN_RANK: int
RS_ERR_UNKNOWN_BUFFER: int
RS_ERR_BUFFER_TOO_SMALL: int
RS_ERR_BAD_PARAM: int
RS_ERR_WRONG_CONTEXT: int
RS_ERR_WRONG_MEMORY: int
RS_ERR_INCOMPATIBLE: int
RS_ERR_NOT_COVERED: int
RS_ERR_UNSUPPORTED: int
RS_ERR_NO_MEMORY: int
RS_ERR_TRANSPORT: int
RS_ERR_TIMEOUT: int
RS_ERR_MISMATCH: int
RS_ERR_CORRUPT: int
RS_ERR_INTERNAL: int
RS_DTYPE_U8: int
RS_DTYPE_I8: int
RS_DTYPE_U16: int
RS_DTYPE_I16: int
RS_DTYPE_U32: int
RS_DTYPE_I32: int
RS_DTYPE_U64: int
RS_DTYPE_I64: int
RS_DTYPE_F16: int
RS_DTYPE_BF16: int
RS_DTYPE_F32: int
RS_DTYPE_F64: int
RS_DTYPE_F8_E4M3: int
RS_DTYPE_F8_E5M2: int
RS_DTYPE_BOOL: int
RS_TRANSPORT_LOCAL: int
RS_TRANSPORT_MPI: int
RS_TRANSPORT_NCCL: int
RS_ALL_RANKS: int
RS_REPLICATE: int
RS_MAX_DIMS: int
RS_MAX_BUFFERS: int
RS_NCCL_UNIQUE_ID_BYTES: int
RS_PARAM_STAGING_BYTES: int
RS_PARAM_SLICE_BYTES: int
RS_PARAM_COPY_THREADS: int
RS_PARAM_TIMEOUT_MS: int
RS_PARAM_INTEGRITY: int
RS_PARAM_PLAN_PART: int
RS_PARAM_PLAN_BOXES: int
RS_PARAM_ROUNDS: int
RS_ROUNDS_PACKED: int
RS_ROUNDS_BY_DOMAIN_PAIR: int
RS_STAT_BYTES_SENT_INTRA: int
RS_STAT_BYTES_SENT_INTER: int
RS_STAT_BYTES_RECV_INTRA: int
RS_STAT_BYTES_RECV_INTER: int
RS_STAT_BYTES_LOCAL: int
RS_STAT_MESSAGES_SENT: int
RS_STAT_MESSAGES_RECV: int
RS_STAT_ROUNDS: int
RS_STAT_STAGING_BYTES: int
RS_STAT_MOVES: int
RS_STAT_CONVERTED_SENDING: int
RS_STAT_CONVERTED_RECEIVING: int
RS_STAT_BYTES_COPIED_FROM_RELAY: int
RS_STAT_BYTES_PACKED: int
RS_STAT_BYTES_UNPACKED: int
RS_SCALE_AMAX: int
RS_SCALE_UE8M0: int
RS_ROUTE_LOCAL: int
RS_ROUTE_INTRA: int
RS_ROUTE_INTER: int
RS_SIDE_SRC: int
RS_SIDE_DST: int
RS_MEMORY_HOST: int
RS_MEMORY_CUDA: int
