# SPDX-License-Identifier: Apache-2.0
"""Layouts of real frameworks, from a model config (``reshard/recipes.h``).

A recipe knows how a Megatron-style trainer (``"tp=2,cp=2,ep=16,pp=4"``:
keys tp cp ep etp pp dp edp gpus fsdp) and a vLLM-style engine
(``"tp=8,dp=16"``, ``ep=`` all the engine's ranks) shard every parameter
of a model, read from a Hugging Face ``config.json`` or the built-in
catalog. Both layouts name tensors the Hugging Face way, so a plan between
them matches every tensor; the engine's buffers carry the engine's own
parameter names (``model.layers.0.self_attn.qkv_proj.weight``) and hold
fused tensors at byte offsets, so vLLM's tensors can be bound as they are::

    with reshard.Context.local(12) as ctx:
        src, dst, buffers = reshard.recipes.layouts(
            ctx, "config.json", train="tp=2,pp=2", infer="tp=4,dp=2")
        # buffers[(rank, buffer)] == (engine parameter name, bytes)

Trainer ranks come first (0 .. train world - 1), engine ranks after them
(``colocated=True``: on the same ranks, from 0).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from . import _native as N
from ._native import C
from .context import ALL_RANKS, Context, _Handle
from ._needs import BufferNeed, Region
from .dtypes import DType
from .layout import Layout

__all__ = ["Model", "Recipe", "RecipeShard", "layouts", "catalog"]

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any], "Model"]


def _check(r: Any) -> None:
    if r.status:
        N.raise_for(r)


def catalog() -> Tuple[str, ...]:
    """The names of the built-in catalog's models."""
    return tuple(C.rsw_model_catalog_name(i)
                 for i in range(C.rsw_model_catalog_count()))


class Model(_Handle):
    """A model's parameter tensors: from a config (a path to a
    ``config.json``, its JSON text, or a dict) or a catalog name."""

    _kind = "model"

    def __init__(self, config: ConfigLike) -> None:
        r = N.result()
        if isinstance(config, Mapping):
            C.rsw_model_from_config(r, json.dumps(dict(config)))
        elif isinstance(config, (str, os.PathLike)):
            text = os.fspath(config)
            if text.lstrip().startswith("{"):
                C.rsw_model_from_config(r, text)
            elif os.path.exists(text):
                with open(text, "r", encoding="utf-8") as f:
                    C.rsw_model_from_config(r, f.read())
            else:
                C.rsw_model_from_catalog(r, text)
        else:
            raise TypeError("a model config is a path, a JSON str, a dict "
                            "or a catalog name, not %s"
                            % type(config).__name__)
        _check(r)
        self._handle = C.rsw_result_model(r)

    def _destroy(self, h: Any) -> None:
        C.rsw_model_destroy(h)

    @property
    def name(self) -> str:
        return C.rsw_model_name(self._h())

    @property
    def num_tensors(self) -> int:
        r = N.result()
        C.rsw_model_num_tensors(r, self._h())
        _check(r)
        return int(r.value)

    def tensors(self) -> Dict[str, Tuple[DType, Tuple[int, ...]]]:
        """Every parameter tensor: Hugging Face name -> (dtype, shape), in
        the model's order (experts stacked per layer, as trainers hold
        them)."""
        out: Dict[str, Tuple[DType, Tuple[int, ...]]] = {}
        h = self._h()
        for i in range(self.num_tensors):
            r = N.result()
            with N.vectors([]) as v:
                name = C.rsw_model_tensor_info(r, h, i, v[0])
                _check(r)
                out[name] = (DType(int(r.value)), tuple(N.read_vector(v[0])))
        return out

    def __repr__(self) -> str:
        if self.closed:
            return "<reshard.recipes.Model closed>"
        return "<reshard.recipes.Model %s, %d tensors>" % (self.name,
                                                           self.num_tensors)


_SIZES = {"train_tp": 0, "train_cp": 1, "train_ep": 2, "train_etp": 3,
          "train_pp": 4, "train_dp": 5, "train_edp": 6, "train_fsdp": 7,
          "train_world": 8, "infer_tp": 100, "infer_dp": 101, "infer_ep": 102,
          "infer_world": 103, "train_dtype": 200, "infer_dtype": 201,
          "fp8_block_rows": 202, "fp8_block_cols": 203,
          "fp8_scale_rule": 204, "infer_first_rank": 205,
          "train_vocab_pad": 206, "infer_vocab_pad": 207}


class RecipeShard(NamedTuple):
    """One shard a recipe adds: rows ``offset`` .. ``offset + extent`` of
    tensor ``tensor`` (its block scales when ``scales``: the layout's
    tensor ``tensor + "_scale_inv"``, in block coordinates) on layout
    rank ``rank``, in buffer ``buffer`` at ``byte_offset`` with element
    ``strides``, held in ``dtype``."""
    tensor: str
    scales: bool
    rank: int
    offset: Tuple[int, ...]
    extent: Tuple[int, ...]
    buffer: int
    byte_offset: int
    strides: Tuple[int, ...]
    dtype: DType


class Recipe(_Handle):
    """A model with a trainer and an engine parallelism."""

    _kind = "recipe"

    def __init__(self, model: ConfigLike, train: str, infer: str) -> None:
        own = not isinstance(model, Model)
        m = Model(model) if own else model
        try:
            r = N.result()
            C.rsw_recipe_create(r, m._h(), str(train), str(infer))
            _check(r)
            self._handle = C.rsw_result_recipe(r)  # keeps its own model copy
        finally:
            if own:
                m.close()

    def _destroy(self, h: Any) -> None:
        C.rsw_recipe_destroy(h)

    def get(self, what: str) -> int:
        """A size or setting: "train_world", "infer_tp", "infer_dtype"..."""
        r = N.result()
        C.rsw_recipe_get(r, self._h(), _SIZES[what])
        _check(r)
        return int(r.value)

    def set(self, what: str, value: int) -> None:
        """A setting: "train_dtype", "infer_dtype" (reshard.DType values),
        "fp8_block_rows", "fp8_block_cols", "fp8_scale_rule",
        "infer_first_rank", "train_vocab_pad" (Megatron's
        make_vocab_size_divisible_by; 1, the default: no padding),
        "infer_vocab_pad" (vLLM's padding, 64 by default)."""
        r = N.result()
        C.rsw_recipe_set(r, self._h(), _SIZES[what], N.int64(value, what))
        _check(r)

    def add_train(self, layout: Layout, rank: Optional[int] = None) -> None:
        """Declare every tensor in ``layout`` and add the trainer's shards
        (every rank's, or ``rank``'s)."""
        r = N.result()
        C.rsw_recipe_add_train(r, layout._h(), self._h(),
                               ALL_RANKS if rank is None else
                               N.int32(rank, "rank"))
        _check(r)

    def add_infer(self, layout: Layout, rank: Optional[int] = None) -> None:
        """The same for the engine (fused buffers, fp8 scales)."""
        r = N.result()
        C.rsw_recipe_add_infer(r, layout._h(), self._h(),
                               ALL_RANKS if rank is None else
                               N.int32(rank, "rank"))
        _check(r)

    def shards(self, side: str, rank: Optional[int] = None
               ) -> List[RecipeShard]:
        """The shards ``side`` ("src" or "dst") adds for layout rank
        ``rank`` (every rank's when None), in the order the layouts get
        them: which rows of which tensor each buffer holds, and where."""
        s = {"src": 0, "dst": 1}[side]
        q = ALL_RANKS if rank is None else N.int32(rank, "rank")
        r = N.result()
        C.rsw_recipe_num_shards(r, self._h(), s, q)
        _check(r)
        out: List[RecipeShard] = []
        with N.vectors(()) as (fields,):
            for i in range(int(r.value)):
                name = C.rsw_recipe_shard(r, self._h(), s, q, i, fields)
                _check(r)
                f = N.read_vector(fields)
                nd, box = f[6], f[7:]
                out.append(RecipeShard(name, bool(f[1]), f[2],
                                       tuple(box[:nd]),
                                       tuple(box[nd:2 * nd]), f[3], f[4],
                                       tuple(box[2 * nd:]), DType(f[5])))
        return out

    def buffers(self, side: str, rank: int) -> Dict[int, Tuple[str, int]]:
        """Buffer -> (the framework's name, bytes) for one layout rank of
        ``side`` ("src" or "dst"); buffers the rank leaves empty are left
        out."""
        s = {"src": 0, "dst": 1}[side]
        r = N.result()
        C.rsw_recipe_num_buffers(r, self._h(), s)
        _check(r)
        out: Dict[int, Tuple[str, int]] = {}
        for b in range(int(r.value)):
            name = C.rsw_recipe_buffer(r, self._h(), s, N.int32(rank, "rank"),
                                       b)
            _check(r)
            if r.value:
                out[b] = (name, int(r.value))
        return out


def layouts(context: Context, config: ConfigLike, train: str = "tp=2,pp=2",
            infer: str = "tp=4,dp=2", rank: Optional[int] = None, *,
            colocated: bool = False,
            settings: Optional[Dict[str, int]] = None
            ) -> Tuple[Layout, Layout,
                       Dict[Tuple[int, int], Tuple[str, int]]]:
    """The trainer's and the engine's layouts of a model on ``context``,
    and the engine's buffers: ``{(rank, buffer): (engine parameter name,
    bytes)}``.

    ``config`` is a path to a ``config.json``, its JSON text, a dict, a
    :class:`Model` or a catalog name. With ``rank`` only that rank's
    shards are added (between processes, before ``allgather``); the
    layouts are the caller's to close. ``settings`` go to
    :meth:`Recipe.set` first, e.g. ``{"infer_dtype": reshard.DType.F8_E4M3}``
    for an fp8 engine (each quantized parameter's block scales are then a
    ``*.weight_scale_inv`` buffer of its own) or ``{"train_vocab_pad":
    128}`` for Megatron-LM's vocabulary padding."""
    if not isinstance(context, Context):
        raise TypeError("layouts(context, ...) takes a reshard.Context")
    with Recipe(config, train, infer) as recipe:
        if colocated:
            recipe.set("infer_first_rank", 0)
        for what, value in (settings or {}).items():
            recipe.set(what, int(value))
        first = recipe.get("infer_first_rank")
        iw = recipe.get("infer_world")
        src, dst = Layout(context), Layout(context)
        try:
            recipe.add_train(src, rank)
            recipe.add_infer(dst, rank)
        except BaseException:
            src.close()
            dst.close()
            raise
        tw = recipe.get("train_world")
        buffers: Dict[Tuple[int, int], Tuple[str, int]] = {}
        for side, lay, lo, n in (("src", src, 0, tw), ("dst", dst, first, iw)):
            ranks = range(lo, lo + n) if rank is None else (
                [rank] if lo <= rank < lo + n else [])
            for q in ranks:
                dtypes: Dict[int, set] = {}
                for s in recipe.shards(side, q):
                    dtypes.setdefault(s.buffer, set()).add(s.dtype)
                for b, (name, nbytes) in recipe.buffers(side, q).items():
                    held = dtypes.get(b, set())
                    _name_buffer(lay, q, b, name, nbytes,
                                 held.pop() if len(held) == 1 else None)
                    if side == "dst":
                        buffers[(q, b)] = (name, nbytes)
    return src, dst, buffers


def _name_buffer(layout: Layout, rank: int, buffer: int, name: str,
                 nbytes: int, dt: Optional[DType]) -> None:
    """What Plan.bind and Plan.bind_state_dict know of a recipe's buffer:
    its framework name, its bytes, and the one dtype its shards are held
    in (every recipe buffer has one; None would check the size alone)."""
    layout.name_buffer(rank, name, buffer)
    need = layout._needs.get((rank, buffer), BufferNeed())
    layout._needs[(rank, buffer)] = need.at_least(nbytes) if dt is None \
        else need.plus(Region(name, dt, 0, None), nbytes)
