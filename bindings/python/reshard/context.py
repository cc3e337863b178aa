# SPDX-License-Identifier: Apache-2.0
"""Contexts: who takes part (world size, domains), settings, transport."""
from __future__ import annotations

import enum
from typing import Any, List, Optional, Sequence, TypeVar, Union, TYPE_CHECKING

from . import _native as N
from ._native import C
from .errors import Status

if TYPE_CHECKING:  # pragma: no cover
    from .layout import Layout
    from .plan import Plan

__all__ = ["Context", "Param", "Transport", "nccl_unique_id",
           "NCCL_UNIQUE_ID_BYTES", "ALL_RANKS"]

ALL_RANKS = -1  # RS_ALL_RANKS
NCCL_UNIQUE_ID_BYTES = 128


class Transport(enum.IntEnum):
    """``rs_transport_kind``."""

    LOCAL = 1
    MPI = 2
    NCCL = 3


class Param(enum.IntEnum):
    """``rs_param``: the settings of a context."""

    STAGING_BYTES = 100
    SLICE_BYTES = 101
    COPY_THREADS = 102
    PROGRESS_THREAD = 103
    TIMEOUT_MS = 200
    INTEGRITY = 201
    PLAN_PART = 300
    PLAN_BOXES = 301
    ROUNDS = 302


class Rounds(enum.IntEnum):
    """``rs_rounds``: how a plan is cut into rounds (``Param.ROUNDS``)."""

    PACKED = 0
    BY_DOMAIN_PAIR = 1


def _param(p: Union[Param, int, str]) -> int:
    if isinstance(p, str):
        try:
            return int(Param[p.upper()])
        except KeyError:
            raise N.fail(Status.BAD_PARAM, "unknown parameter %r (one of: "
                         "%s)" % (p, ", ".join(x.name.lower() for x in Param))
                         ) from None
    return N.int32(p, "param", Status.BAD_PARAM)


_H = TypeVar("_H", bound="_Handle")


class _Handle:
    """Owns one C handle; close() (or the end of a ``with`` block, or
    garbage collection) drops it. C handles hold references on their
    context, so closing in any order is safe."""

    _kind = "handle"
    _handle: Any = None

    def _h(self) -> Any:
        h = self._handle
        if h is None:
            raise N.fail(Status.NULL_POINTER, "the %s is closed" % self._kind)
        return h

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _destroy(self, h: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        """Free the C handle. Safe to call twice."""
        h, self._handle = self._handle, None
        if h is not None:
            self._destroy(h)

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _made(r: Any) -> Any:
    if r.status:
        N.raise_for(r)
    return C.rsw_result_context(r)


class Context(_Handle):
    """Who takes part in a reshard and how bytes travel between them.

    Make one with :meth:`local`, :meth:`mpi`, :meth:`nccl_id`,
    :meth:`nccl_comm` or :meth:`nccl_devices`; then make layouts
    (:meth:`layout`) and plans (:meth:`plan`) from it. Layouts and plans
    keep the context alive: closing it first is safe.
    """

    _kind = "context"

    def __init__(self, handle: Any, keep: Any = None) -> None:
        if handle is None:
            raise TypeError("use Context.local(), Context.mpi(), ... to make "
                            "a context")
        self._handle = handle
        self._keep = keep  # what the context was made from (a communicator)

    def _destroy(self, h: Any) -> None:
        C.rsw_context_destroy(h)

    # ---- making contexts -----------------------------------------------------

    @classmethod
    def local(cls, world_size: int) -> "Context":
        """Every one of ``world_size`` ranks lives in this process (the
        in-process transport); each rank starts in its own domain."""
        r = N.result()
        C.rsw_context_create_local(r, N.int32(world_size, "world_size"))
        return cls(_made(r))

    @classmethod
    def mpi(cls, comm: Any = None) -> "Context":
        """One rank per MPI process, over an mpi4py communicator (default
        ``MPI.COMM_WORLD``) or a Fortran communicator handle (an int).
        Collective. The context duplicates the communicator."""
        if comm is None:
            from mpi4py import MPI  # initializes MPI if needed
            comm = MPI.COMM_WORLD
        if isinstance(comm, int) and not isinstance(comm, bool):
            fcomm = comm
        elif hasattr(comm, "py2f"):
            fcomm = comm.py2f()
        else:
            raise TypeError("Context.mpi takes an mpi4py communicator or a "
                            "Fortran handle, not %s" % type(comm).__name__)
        r = N.result()
        C.rsw_context_create_mpi(r, N.int64(fcomm, "communicator"))
        return cls(_made(r), keep=comm)

    @classmethod
    def nccl_id(cls, unique_id: bytes, rank: int, world_size: int,
                device: int) -> "Context":
        """One rank per process on CUDA device ``device``, from the 128
        bytes of :func:`nccl_unique_id` made on one rank and shared (for
        example with ``torch.distributed.broadcast_object_list``).
        Collective."""
        data = bytes(unique_id)
        if len(data) != NCCL_UNIQUE_ID_BYTES:
            raise N.fail(Status.INVALID_ARGUMENT, "an NCCL unique id has %d "
                         "bytes, not %d" % (NCCL_UNIQUE_ID_BYTES, len(data)))
        b = N.buffer_from_bytes(data)
        try:
            r = N.result()
            C.rsw_context_create_nccl_id(r, b, N.int32(rank, "rank"),
                                         N.int32(world_size, "world_size"),
                                         N.int32(device, "device"))
            return cls(_made(r))
        finally:
            C.rsw_buffer_free(b)

    @classmethod
    def nccl_comm(cls, comm: Any) -> "Context":
        """One rank per process, on an NCCL communicator you already have
        (an ``ncclComm_t``: an int address, a ``ctypes.c_void_p``, or an
        object with a ``comm`` attribute holding one, such as vLLM's
        ``PyNcclCommunicator``). The context splits its own communicators
        from it and never destroys it. Collective."""
        keep = comm
        if hasattr(comm, "comm") and not isinstance(comm, int):
            comm = comm.comm
        if hasattr(comm, "value") and not isinstance(comm, int):
            comm = comm.value
        if comm is None:
            comm = 0
        r = N.result()
        C.rsw_context_create_nccl_comm(r, N.as_int(comm, "comm") &
                                       ((1 << 64) - 1))
        return cls(_made(r), keep=keep)

    @classmethod
    def nccl_devices(cls, devices: Sequence[int]) -> "Context":
        """Every rank in this process, rank i on CUDA device
        ``devices[i]``."""
        devs = N.int_list(devices, "devices")
        r = N.result()
        C.rsw_context_create_nccl_devices(r, devs)
        return cls(_made(r))

    # ---- who takes part ------------------------------------------------------

    def _int(self, fn: Any, *args: Any) -> int:
        r = N.result()
        fn(r, self._h(), *args)
        if r.status:
            N.raise_for(r)
        return r.value

    @property
    def world_size(self) -> int:
        return self._int(C.rsw_context_world_size)

    @property
    def rank(self) -> Optional[int]:
        """This process's rank; None when the context drives every rank
        itself (``Context.local``, ``Context.nccl_devices``)."""
        v = self._int(C.rsw_context_rank)
        return None if v == ALL_RANKS else v

    @property
    def ranks(self) -> List[int]:
        """The ranks this process drives (binds buffers for)."""
        me = self.rank
        return list(range(self.world_size)) if me is None else [me]

    @property
    def transport(self) -> Transport:
        return Transport(self._int(C.rsw_context_transport))

    def set_domain(self, rank: int, domain: int) -> None:
        """Put ``rank`` in domain ``domain`` (ranks with a fast fabric
        between them: an NVLink domain, a host). Plans made afterwards
        use it."""
        self._int(C.rsw_context_set_domain, N.int32(rank, "rank"),
                  N.int32(domain, "domain"))

    def domain(self, rank: int) -> int:
        return self._int(C.rsw_context_get_domain, N.int32(rank, "rank"))

    @property
    def domains(self) -> List[int]:
        """The domain of every rank."""
        return [self.domain(r) for r in range(self.world_size)]

    def set_domain_size(self, ranks_per_domain: int) -> None:
        """Group consecutive ranks into domains of ``ranks_per_domain``."""
        self._int(C.rsw_context_set_domain_size,
                  N.int32(ranks_per_domain, "ranks_per_domain"))

    # ---- settings --------------------------------------------------------------

    def set_param(self, param: Union[Param, int, str], value: int) -> None:
        """Set a parameter (``"staging_bytes"``, ``"timeout_ms"``,
        ``"integrity"``, or a :class:`Param`)."""
        if isinstance(value, bool):
            value = int(value)
        self._int(C.rsw_context_set_param, _param(param),
                  N.int64(value, "value"))

    def get_param(self, param: Union[Param, int, str]) -> int:
        return self._int(C.rsw_context_get_param, _param(param))

    @property
    def staging_bytes(self) -> int:
        """Staging memory a rank may use for one execution (read by plans
        made afterwards)."""
        return self.get_param(Param.STAGING_BYTES)

    @staging_bytes.setter
    def staging_bytes(self, value: int) -> None:
        self.set_param(Param.STAGING_BYTES, value)

    @property
    def timeout_ms(self) -> int:
        """How long to wait for a peer before a TimeoutError."""
        return self.get_param(Param.TIMEOUT_MS)

    @timeout_ms.setter
    def timeout_ms(self, value: int) -> None:
        self.set_param(Param.TIMEOUT_MS, value)

    @property
    def integrity(self) -> bool:
        """Every message between processes carries a checksum."""
        return bool(self.get_param(Param.INTEGRITY))

    @integrity.setter
    def integrity(self, value: bool) -> None:
        self.set_param(Param.INTEGRITY, 1 if value else 0)

    @property
    def plan_part(self) -> int:
        """Which part of a plan made afterwards is kept: -1 the whole
        plan, a rank only what that rank sends, receives, forwards and
        copies (between processes: this process's rank)."""
        return self.get_param(Param.PLAN_PART)

    @plan_part.setter
    def plan_part(self, rank: int) -> None:
        self.set_param(Param.PLAN_PART, rank)

    @property
    def plan_boxes(self) -> bool:
        """Plans made afterwards keep every move's box (True, the default)
        or none (False: a plan to inspect and price, not to run, in a
        fifth less memory; its moves have no "offset" and "extent", and
        ``execute`` raises :class:`reshard.UnsupportedError`)."""
        return bool(self.get_param(Param.PLAN_BOXES))

    @plan_boxes.setter
    def plan_boxes(self, value: bool) -> None:
        self.set_param(Param.PLAN_BOXES, 1 if value else 0)

    @property
    def rounds(self) -> Rounds:
        """How plans made afterwards are cut into rounds:
        ``Rounds.PACKED`` (the default: few rounds, each mixing many
        peers) or ``Rounds.BY_DOMAIN_PAIR`` (a round decided by the two
        domains a message runs between, as a rank planning its own part
        can; more rounds, the same staging bound)."""
        return Rounds(self.get_param(Param.ROUNDS))

    @rounds.setter
    def rounds(self, value: Union[Rounds, int]) -> None:
        self.set_param(Param.ROUNDS, int(value))

    @property
    def copy_threads(self) -> int:
        """Threads that copy host memory during an execution: a batch of
        copies of at least 1 MiB is cut over them. 1 (the default): the
        calling thread alone; 0: one per CPU this process may run on. It
        pays where cores are idle; MPI ranks that share a machine's cores
        take time from each other. No effect on NCCL contexts."""
        return self.get_param(Param.COPY_THREADS)

    @copy_threads.setter
    def copy_threads(self, n: int) -> None:
        self.set_param(Param.COPY_THREADS, n)

    @property
    def progress_thread(self) -> bool:
        """Whether ``execute_async`` hands an execution on a host context
        (in process, MPI) to a thread of the context, so that it goes on
        while the caller works; ``test`` then only looks and ``wait``
        blocks. Off by default (it advances inside ``test`` and ``wait``
        only). Refused on NCCL contexts and on MPI below
        ``MPI_THREAD_MULTIPLE``. While the thread runs an execution, only
        that plan's ``test``, ``wait`` and destruction, and ``abort``, may
        be called on the context. Since 0.6."""
        return bool(self.get_param(Param.PROGRESS_THREAD))

    @progress_thread.setter
    def progress_thread(self, on: bool) -> None:
        self.set_param(Param.PROGRESS_THREAD, 1 if on else 0)

    # ---- what is made from it ---------------------------------------------------

    def layout(self) -> "Layout":
        """An empty layout on this context."""
        from .layout import Layout
        return Layout(self)

    def plan(self, src: "Layout", dst: "Layout") -> "Plan":
        """The plan that turns layout ``src`` into layout ``dst``."""
        from .plan import Plan
        return Plan(src, dst)

    def abort(self) -> None:
        """Make the execution in flight (or the next one) fail at once
        with a TransportError; the context is done afterwards. May be
        called from another thread while this context is in use."""
        h = self._handle
        if h is not None:
            C.rsw_context_abort(h)

    def __repr__(self) -> str:
        if self.closed:
            return "<reshard.Context closed>"
        me = self.rank
        return "<reshard.Context %s world_size=%d rank=%s>" % (
            self.transport.name.lower(), self.world_size,
            "all" if me is None else me)


def nccl_unique_id() -> bytes:
    """A fresh NCCL unique id (128 bytes) for :meth:`Context.nccl_id`."""
    b = N.new_buffer(NCCL_UNIQUE_ID_BYTES)
    try:
        r = N.result()
        C.rsw_nccl_unique_id(r, b)
        if r.status:
            N.raise_for(r)
        return N.buffer_bytes(b)
    finally:
        C.rsw_buffer_free(b)
