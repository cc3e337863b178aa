# SPDX-License-Identifier: Apache-2.0
"""reshard.recipes: a trainer's and an engine's layouts from a config, the
engine's buffers by name, and a plan between the layouts that moves every
byte exactly (there and back again) in one process."""
import json

import numpy as np
import pytest

import reshard
from reshard import recipes

TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 4, "intermediate_size": 48,
    "vocab_size": 50, "torch_dtype": "bfloat16",
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
}


def _bind_all(plan, side, bufs):
    for (rank, b), arr in bufs.items():
        plan.bind(side, rank, b, arr)


def _buffers(recipe, side, ranks, fill=None, rng=None):
    out = {}
    for q in ranks:
        for b, (_, nbytes) in recipe.buffers(side, q).items():
            if rng is not None:
                arr = rng.integers(0, 0xFFFF, nbytes // 2, dtype=np.uint16)
            else:
                arr = np.full(nbytes // 2, fill, dtype=np.uint16)
            out[(q, b)] = arr
    return out


@pytest.mark.parametrize("config_kind", ["dict", "str", "path"])
def test_layouts_and_engine_buffers(tmp_path, config_kind):
    config = {"dict": TINY, "str": json.dumps(TINY)}.get(config_kind)
    if config is None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(TINY))
        config = str(path)
    with reshard.Context.local(4) as ctx:
        src, dst, bufs = recipes.layouts(ctx, config, train="tp=2",
                                         infer="tp=1,dp=2")
        with src, dst:
            assert src.num_tensors == dst.num_tensors == 2 * 9 + 3
            assert src.num_shards > 0 and dst.num_shards > 0
        # engine ranks 2 and 3 each hold the whole model, fused as vLLM does
        name, nbytes = next(v for (q, b), v in bufs.items() if q == 2 and
                            v[0].endswith("0.self_attn.qkv_proj.weight"))
        assert name == "model.layers.0.self_attn.qkv_proj.weight"
        assert nbytes == (32 + 16 + 16) * 32 * 2
        names = {v[0] for (q, b), v in bufs.items() if q == 3}
        assert "model.layers.1.mlp.gate_up_proj.weight" in names
        assert "model.layers.1.mlp.down_proj.weight" in names
        assert "model.embed_tokens.weight" in names
        assert {q for q, _ in bufs} == {2, 3}


def test_one_rank_and_refusals():
    with reshard.Context.local(4) as ctx:
        src, dst, bufs = recipes.layouts(ctx, TINY, train="tp=2",
                                         infer="tp=1,dp=2", rank=3)
        with src, dst:
            assert src.num_shards == 0  # rank 3 is an engine rank
            assert dst.num_shards > 0 and {q for q, _ in bufs} == {3}
        with pytest.raises(reshard.ArgumentError, match="tp=3 does not divide"):
            recipes.layouts(ctx, TINY, train="tp=3", infer="tp=1")
        bad = dict(TINY, model_type="gpt2")
        with pytest.raises(reshard.UnsupportedError, match="gpt2"):
            recipes.layouts(ctx, bad)
        with pytest.raises(reshard.ArgumentError, match="hidden_size"):
            recipes.layouts(ctx, '{"model_type": "llama", "hidden_size": "x"}')
    assert "DeepSeek-V3" in recipes.catalog()
    with recipes.Model("qwen3-32b") as m:
        assert m.name == "Qwen3-32B" and m.num_tensors == 707


def test_plan_between_the_layouts_is_exact():
    """There (trainer -> engine) and back, twice. Random source bytes
    differ between the replicas of a replicated tensor (the norms, on both
    TP ranks), so the first trip back makes the source consistent; from
    then on every trip moves the same bytes."""
    rng = np.random.default_rng(7)
    with reshard.Context.local(4) as ctx:
        src, dst, bufs = recipes.layouts(ctx, TINY, train="tp=2",
                                         infer="tp=1,dp=2")
        with recipes.Recipe(TINY, "tp=2", "tp=1,dp=2") as recipe:
            sbufs = _buffers(recipe, "src", [0, 1], rng=rng)
            dbufs = [_buffers(recipe, "dst", [2, 3], fill=0xFFFF)
                     for _ in range(2)]
            back = [_buffers(recipe, "src", [0, 1], fill=0xFFFF)
                    for _ in range(2)]
        assert {k: v[1] for k, v in bufs.items()} == {
            k: a.nbytes for k, a in dbufs[0].items()}
        with src, dst, ctx.plan(src, dst) as there, \
                ctx.plan(dst, src) as home:
            start = sbufs
            for trip in range(2):
                _bind_all(there, "src", start)
                _bind_all(there, "dst", dbufs[trip])
                there.execute()
                _bind_all(home, "src", dbufs[trip])
                _bind_all(home, "dst", back[trip])
                home.execute()
                start = back[trip]
        # every engine byte of the model was written (the source values
        # are below 0xFFFF); vLLM pads the 50 vocabulary rows to 64, and
        # the padding rows are never written
        names = {k: v[0] for k, v in bufs.items()}
        for k, a in dbufs[0].items():
            if names[k] in ("model.embed_tokens.weight", "lm_head.weight"):
                real = TINY["vocab_size"] * TINY["hidden_size"]
                assert a.size == 64 * TINY["hidden_size"], k
                assert (a[real:] == 0xFFFF).all(), k
                a = a[:real]
            assert not (a == 0xFFFF).any(), k
        # both engine replicas hold the same model, the same both trips
        for (q, b), a in dbufs[0].items():
            assert np.array_equal(a, dbufs[1][(q, b)]), (q, b)
            if q == 2:
                assert np.array_equal(a, dbufs[0][(3, b)])
        for k, a in back[0].items():
            assert np.array_equal(a, back[1][k]), k
            # only the norms' replicas (160 of each rank's elements) differ
            assert (a != sbufs[k]).sum() <= 160, k


def test_fp8_engine_scales_are_parameters_of_their_own():
    """An fp8 engine: each quantized parameter's block scales are a float32
    buffer named as vLLM names it; bind checks each buffer against the one
    dtype its parameter is held in (f32 scales, f8 values, bf16 norms)."""
    with reshard.Context.local(2) as ctx:
        src, dst, bufs = recipes.layouts(
            ctx, TINY, train="tp=1", infer="tp=1",
            settings={"infer_dtype": reshard.DType.F8_E4M3,
                      "fp8_block_rows": 16, "fp8_block_cols": 16})
        names = {v[0]: (k, v[1]) for k, v in bufs.items()}
        # qkv_proj: q 32 rows (2 blocks), k and v 16 (1 each) of 32 columns
        (rank, b), nbytes = names[
            "model.layers.0.self_attn.qkv_proj.weight_scale_inv"]
        assert nbytes == (2 + 1 + 1) * 2 * 4
        assert "model.layers.0.input_layernorm.weight_scale_inv" not in names
        with src, dst, ctx.plan(src, dst) as plan:
            with pytest.raises(reshard.ArgumentError, match="is f16 .*not f32"):
                plan.bind("dst", rank, b, np.zeros(nbytes // 2, np.float16))
            plan.bind("dst", rank, b, np.zeros(nbytes // 4, np.float32))
            (rank, b), nbytes = names[
                "model.layers.0.self_attn.qkv_proj.weight"]
            with pytest.raises(reshard.ArgumentError, match="not f8_e4m3"):
                plan.bind("dst", rank, b, np.zeros(nbytes // 2, np.uint16))
            plan.bind("dst", rank, b, np.zeros(nbytes, np.uint8))  # bytes
            (rank, b), nbytes = names["model.layers.0.input_layernorm.weight"]
            with pytest.raises(reshard.ArgumentError, match="not bf16"):
                plan.bind("dst", rank, b, np.zeros(nbytes // 2, np.float16))
            plan.bind("dst", rank, b, np.zeros(nbytes // 2, np.uint16))


def test_shards_say_which_rows_each_buffer_holds():
    """Recipe.shards: vLLM's padded vocabulary rows on each engine rank,
    and one rank's shards are its part of every rank's."""
    config = dict(TINY, vocab_size=200)
    with recipes.Recipe(config, "tp=2", "tp=2") as recipe:
        first = recipe.get("infer_first_rank")
        embed = [s for s in recipe.shards("dst")
                 if s.tensor == "model.embed_tokens.weight"]
        # 200 rows padded to 256: 128 per rank, the second holds 72 of them
        assert [(s.rank, s.offset, s.extent) for s in embed] == [
            (first, (0, 0), (128, 32)), (first + 1, (128, 0), (72, 32))]
        assert all(s.strides == (32, 1) and not s.scales and
                   s.dtype == reshard.DType.BF16 for s in embed)
        every = recipe.shards("src")
        mine = recipe.shards("src", 1)
        assert mine and mine == [s for s in every if s.rank == 1]
        with pytest.raises(reshard.ArgumentError, match="rank"):
            recipe.shards("dst", 99)
