# SPDX-License-Identifier: Apache-2.0
"""Plans: what moves from where to where, in which round; and running
them on bound memory."""
from __future__ import annotations

import enum
import json
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _native as N
from ._native import C
from ._memory import Bound, export, MEMORY_HOST
from ._needs import check as check_binding
from .context import Context, Transport, _Handle
from .errors import Status
from .layout import Layout

__all__ = ["Plan", "Side", "SRC", "DST", "STAT_NAMES"]


class Side(enum.IntEnum):
    """``rs_side``: which layout a buffer belongs to."""

    SRC = 0
    DST = 1


SRC = Side.SRC
DST = Side.DST

# rs_stat values, by the names of plan.stats()
STAT_NAMES: Dict[str, int] = {
    "bytes_sent_intra": 1, "bytes_sent_inter": 2, "bytes_recv_intra": 3,
    "bytes_recv_inter": 4, "bytes_local": 5, "messages_sent": 6,
    "messages_recv": 7, "rounds": 8, "staging_bytes": 9, "moves": 10,
    "converted_sending": 11, "converted_receiving": 12,
    "bytes_copied_from_relay": 13, "bytes_packed": 14, "bytes_unpacked": 15,
}

_SIDES = {"src": Side.SRC, "source": Side.SRC, "dst": Side.DST,
          "dest": Side.DST, "destination": Side.DST}


def _side(side: Union[Side, int, str]) -> Side:
    if isinstance(side, str):
        try:
            return _SIDES[side.lower()]
        except KeyError:
            raise N.fail(Status.INVALID_ARGUMENT, "side is 'src' or 'dst', "
                         "not %r" % side) from None
    try:
        return Side(N.as_int(side, "side"))
    except ValueError:
        raise N.fail(Status.INVALID_ARGUMENT, "side is SRC (0) or DST (1), "
                     "not %r" % (side,)) from None


class _BindSite:
    """Which bind a message is about, formatted only when one is."""

    __slots__ = ("side", "rank", "buffer")

    def __init__(self, side: Side, rank: int, buffer: int) -> None:
        self.side, self.rank, self.buffer = side, rank, buffer

    def __str__(self) -> str:
        return "Plan.bind: %s buffer %d of rank %d" % (
            self.side.name.lower(), self.buffer, self.rank)


def _stream(stream: Any) -> int:
    """A CUDA stream as an address: None (0, the legacy default stream, or
    no queue on host contexts), an int, a torch.cuda.Stream
    (``cuda_stream``), a CuPy stream (``ptr``), a ctypes pointer."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr", "value", "handle"):
        if not isinstance(stream, int) and hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if stream is None:
        return 0
    return N.as_int(stream, "stream") & ((1 << 64) - 1)


def _torch_current_stream(context: Context) -> Any:
    """torch's current CUDA stream for a GPU context, where torch is
    loaded (never imported here); None otherwise."""
    torch = sys.modules.get("torch")
    if torch is None or context.transport != Transport.NCCL:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        return torch.cuda.current_stream().cuda_stream
    except Exception:
        return None


class Plan(_Handle):
    """The plan that turns layout ``src`` into layout ``dst`` (both from
    one context). Self-contained: the layouts may be closed afterwards.

    Look at it (:meth:`stats`, :meth:`to_json`, :attr:`moves`), bind the
    memory of every buffer the ranks of this process hold (:meth:`bind`),
    then :meth:`execute` it, again after each change of the sources.
    """

    _kind = "plan"

    def __init__(self, src: Layout, dst: Layout) -> None:
        if not isinstance(src, Layout) or not isinstance(dst, Layout):
            raise TypeError("Plan(src, dst) takes two reshard.Layout")
        r = N.result()
        C.rsw_plan_create(r, src._h(), dst._h())
        if r.status:
            N.raise_for(r)
        self._handle = C.rsw_result_plan(r)
        self.context: Context = src.context
        # What the plan's buffers need (as far as Python saw it added),
        # and the names a state dict binds by, per side.
        self._needs = (dict(src._needs), dict(dst._needs))
        self._buffer_names = tuple(
            {rank: dict(names) for rank, names in lay._buffer_names.items()}
            for lay in (src, dst))
        self._bound: Dict[Tuple[int, int, int], Bound] = {}
        self._in_flight = False
        self._json: Optional[Dict[str, Any]] = None

    def _destroy(self, h: Any) -> None:
        if self._in_flight:  # the memory stays until the execution ended
            self._in_flight = False
            C.rsw_plan_wait(N.result(), h)
        C.rsw_plan_destroy(h)
        bound, self._bound = self._bound, {}
        for b in bound.values():
            b.release()

    def _check(self, r: Any) -> None:
        if r.status:
            N.raise_for(r)

    # ---- looking at it ---------------------------------------------------------

    def stat(self, name: Union[str, int], rank: Optional[int] = None) -> int:
        """One figure (``"bytes_sent_inter"``, ...) of ``rank``; rank None
        sums over ranks (``rounds`` and ``staging_bytes``: the maximum)."""
        code = STAT_NAMES.get(name) if isinstance(name, str) else \
            N.as_int(name, "stat")
        if code is None:
            raise N.fail(Status.INVALID_ARGUMENT, "unknown plan figure %r "
                         "(one of: %s)" % (name, ", ".join(STAT_NAMES)))
        rk = -1 if rank is None else N.int32(rank, "rank",
                                             Status.UNKNOWN_RANK)
        r = N.result()
        C.rsw_plan_stat(r, self._h(), rk, code)
        self._check(r)
        return r.value

    def stats(self, rank: Optional[int] = None) -> Dict[str, int]:
        """Every figure of ``rank`` (None: all ranks together) as a dict:
        bytes_sent_intra, bytes_sent_inter, bytes_recv_intra,
        bytes_recv_inter, bytes_local, messages_sent, messages_recv,
        rounds, staging_bytes, moves, converted_sending (elements the rank
        converts to another dtype before sending them; an fp8 block's
        scale counts one), converted_receiving (elements it converts
        once they arrived, or in a copy inside the rank),
        bytes_copied_from_relay (bytes it copies out of a relay slot: it
        received them once, forwards them and needs them itself; not in
        bytes_local), bytes_packed and bytes_unpacked (of the bytes it
        sends or receives, those copied into or out of staging as they
        are, by a transport that stages: MPI, NCCL)."""
        h = self._h()
        rk = -1 if rank is None else N.int32(rank, "rank",
                                             Status.UNKNOWN_RANK)
        r = N.result()
        out: Dict[str, int] = {}
        for name, code in STAT_NAMES.items():
            C.rsw_plan_stat(r, h, rk, code)
            self._check(r)
            out[name] = r.value
        return out

    @property
    def num_moves(self) -> int:
        r = N.result()
        C.rsw_plan_num_moves(r, self._h())
        self._check(r)
        return r.value

    @property
    def num_tensors(self) -> int:
        r = N.result()
        C.rsw_plan_num_tensors(r, self._h())
        self._check(r)
        return r.value

    @property
    def fingerprint(self) -> int:
        """64-bit fingerprint (unsigned) of everything the plan was
        computed from; ranks that agree on it compute the same plan."""
        r = N.result()
        C.rsw_plan_fingerprint(r, self._h())
        self._check(r)
        return r.value & ((1 << 64) - 1)

    def to_json(self) -> Dict[str, Any]:
        """The whole plan (tensors, per-rank figures, every move), parsed."""
        if self._json is None:
            r = N.result()
            text = C.rsw_plan_to_json(r, self._h())
            self._check(r)
            if text is None:  # the copy failed
                raise N.fail(Status.NO_MEMORY, "out of memory")
            self._json = json.loads(text)
        return self._json

    def to_json_text(self) -> str:
        """The JSON text itself."""
        r = N.result()
        text = C.rsw_plan_to_json(r, self._h())
        self._check(r)
        if text is None:  # the copy failed
            raise N.fail(Status.NO_MEMORY, "out of memory")
        return text

    @property
    def moves(self) -> List[Dict[str, Any]]:
        """Every move (box copy) of the plan, from :meth:`to_json`."""
        moves: List[Dict[str, Any]] = self.to_json().get("moves", [])
        return moves

    # ---- memory ------------------------------------------------------------------

    def bind(self, side: Union[Side, int, str], rank: int, buffer: int,
             memory: Any, *, check_dtype: bool = True) -> None:
        """Say where buffer ``buffer`` of ``rank`` on ``side`` ("src" or
        "dst") lives: anything with the buffer protocol (numpy arrays,
        bytearray, memoryview, ...) or DLPack (torch tensors on CPU or
        CUDA, a DTensor's local tensor, CuPy, JAX, ...). It must be
        C-contiguous and writable on the destination side. The plan keeps
        a reference to it until it is bound again or the plan is closed.

        What the layout says the buffer holds (as added through Python on
        this process) is checked: a typed object's dtype must be the
        tensor's exactly (float16 is not bf16, int32 not float32), and its
        shape the shard's local shape (or flat with as many elements);
        a buffer holding several shards needs their extent, in their one
        dtype. Untyped bytes (bytearray, a uint8 array) are taken for any
        dtype, checked for size only; so is any object with
        ``check_dtype=False``. numpy has no bfloat16: a uint16 array
        carries bf16 bits (ml_dtypes.bfloat16 is checked as bf16). A torch tensor that requires grad is bound
        through ``detach()`` (the same memory)."""
        self._bind(_side(side), N.int32(rank, "rank", Status.UNKNOWN_RANK),
                   N.int32(buffer, "buffer", Status.UNKNOWN_BUFFER), memory,
                   check_dtype)

    def _bind(self, s: Side, rank_i: int, buf_i: int, memory: Any,
              check_dtype: bool = True) -> None:
        """bind() on checked arguments."""
        h = self._h()
        what = _BindSite(s, rank_i, buf_i)
        b = export(memory, s == Side.DST, what)
        need = self._needs[s].get((rank_i, buf_i))
        try:
            check_binding(need, b, what, check_dtype)
            r = N.result()
            C.rsw_plan_bind(r, h, int(s), rank_i, buf_i, b.address, b.nbytes,
                            b.memory, b.device)
        except BaseException:
            b.release()
            raise
        key = (int(s), rank_i, buf_i)
        if r.status:
            b.release()
            if r.status == Status.BUFFER_TOO_SMALL:  # C forgot the old one
                old = self._bound.pop(key, None)
                if old is not None:
                    old.release()
                if need is not None and need.regions:
                    raise N.fail(r.status, "%s: %s (it holds %s)" % (
                        what, N.python_message(r.message or ""),
                        need.describe()))
            N.raise_for(r)
        old = self._bound.get(key)
        self._bound[key] = b
        if old is not None and old is not b:
            old.release()

    def bind_state_dict(self, side: Union[Side, int, str], rank: int,
                        state_dict: Mapping[str, Any], *,
                        strict: bool = True) -> None:
        """Bind every tensor of ``state_dict`` (name -> tensor, DTensor or
        array) to the buffer the layout gave that name on ``rank``
        (:meth:`Layout.add_state_dict`, or a recipe's engine names), with
        the checks of :meth:`bind`. ``strict``: a name the layout does not
        know, or a named buffer the dict lacks, is an error (else
        skipped)."""
        s = _side(side)
        rank_i = N.int32(rank, "rank", Status.UNKNOWN_RANK)
        names = self._buffer_names[s].get(rank_i, {})
        if strict:
            unknown = [k for k in state_dict if k not in names]
            missing = [k for k in names if k not in state_dict]
            if unknown or missing:
                raise N.fail(Status.UNKNOWN_BUFFER, "Plan.bind_state_dict(%s,"
                             " rank %d): %s%s%s" % (
                                 s.name.lower(), rank_i,
                                 "not in the layout: %s" % N.names(unknown[:8])
                                 if unknown else "",
                                 "; " if unknown and missing else "",
                                 "missing from the dict: %s" % N.names(
                                     missing[:8]) if missing else ""))
        for name, obj in state_dict.items():
            buf = names.get(name)
            if buf is not None:
                self._bind(s, rank_i, buf, obj)

    def bound(self, side: Union[Side, int, str], rank: int,
              buffer: int = 0) -> Any:
        """The object bound to (side, rank, buffer), or None."""
        b = self._bound.get((int(_side(side)), rank, buffer))
        return None if b is None else b.obj

    def buffer_bytes(self, side: Union[Side, int, str], rank: int,
                     buffer: int = 0) -> Optional[int]:
        """Bytes the buffer must have (as far as the layout was described
        through Python on this process); None if unknown."""
        need = self._needs[_side(side)].get((rank, buffer))
        return None if need is None else need.nbytes

    # ---- running it ----------------------------------------------------------------

    def _refuse_moved(self, call: str) -> None:
        """Refuse to run when a bound object's memory moved (a torch
        tensor resized or set_() since it was bound): nothing is written."""
        for (side, rank, buf), b in self._bound.items():
            if b.moved():
                raise N.fail(Status.INVALID_ARGUMENT, "%s: the %s bound to "
                             "%s buffer %d of rank %d no longer has the "
                             "memory it was bound with (resized or set_() "
                             "since Plan.bind); nothing was moved. Bind it "
                             "again" % (call, b.describe_type(),
                                        Side(side).name.lower(), buf, rank))

    def execute(self) -> None:
        """Move the bytes: afterwards every destination shard holds its box
        of the source tensors, bit-exact. Again after the sources changed:
        no re-planning."""
        h = self._h()
        self._refuse_moved("Plan.execute")
        r = N.result()
        C.rsw_plan_execute(r, h)
        if r.status:
            N.raise_for(r)

    def execute_async(self, stream: Any = None) -> None:
        """Start an execution and return without waiting. ``stream``: the
        CUDA stream a GPU context orders the work on (None: torch's current
        stream where torch is loaded, else the legacy default stream; host
        contexts take None). Then call :meth:`test` or :meth:`wait` until
        it ended; bound memory stays referenced."""
        h = self._h()
        self._refuse_moved("Plan.execute_async")
        if stream is None:
            stream = _torch_current_stream(self.context)
        r = N.result()
        C.rsw_plan_execute_async(r, h, _stream(stream))
        if r.status:
            N.raise_for(r)
        self._in_flight = True

    def test(self) -> bool:
        """Advance the execution in flight without waiting: True once it
        ended (raising its error if it failed), False while it goes on."""
        h = self._h()
        r = N.result()
        C.rsw_plan_test(r, h)
        if r.status:
            self._in_flight = False
            N.raise_for(r)
        done = bool(r.value)
        if done:
            self._in_flight = False
        return done

    def wait(self) -> None:
        """Advance the execution in flight until it ended; raise its error
        if it failed."""
        h = self._h()
        r = N.result()
        C.rsw_plan_wait(r, h)
        self._in_flight = False
        if r.status:
            N.raise_for(r)

    @property
    def in_flight(self) -> bool:
        """An execute_async not yet seen to end by test() or wait()."""
        return self._in_flight

    @property
    def handle_address(self) -> int:
        """The address of the C ``rs_plan`` (to call the C API on it from
        ctypes or cffi); valid while the plan is open."""
        return N.handle_address(self._h())

    def __repr__(self) -> str:
        if self.closed:
            return "<reshard.Plan closed>"
        return "<reshard.Plan moves=%d fingerprint=%016x>" % (
            self.num_moves, self.fingerprint)
