-- SPDX-License-Identifier: Apache-2.0
-- reshard.recipes: models from the catalog and from the config.json files
-- the C tests ship (tests/unit/recipes/configs), a trainer's and an
-- engine's layouts, a plan between them that puts every element where the
-- engine's shards say, and bad input refused with the library's status.
local reshard = require "reshard"
local check = require "check"
local recipes = reshard.recipes

-- tests/unit/recipes/configs, from this file's place in the checkout.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local CONFIGS = here .. "../../../tests/unit/recipes/configs/"
local LLAMA8B = CONFIGS .. "llama-3.1-8b.json"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

-- Llama-3.1-8B's config.json shrunk to a model whose every element can be
-- checked (the sizes of the Python tests' TINY).
local function tiny_config(vocab)
  local text = read(LLAMA8B)
  local sizes = { hidden_size = 32, num_hidden_layers = 2,
    num_attention_heads = 8, num_key_value_heads = 4, intermediate_size = 48,
    vocab_size = vocab or 50 }
  for k, v in pairs(sizes) do
    local n
    text, n = text:gsub('("' .. k .. '"%s*:%s*)%d+', "%1" .. v)
    assert(n == 1, k)
  end
  return (text:gsub("{", '{\n  "head_dim": 4,', 1))
end

-- What element `flat` (row-major) of tensor t holds: a finite bf16 bit
-- pattern, never the 0xFFFF the destinations start with.
local function code(t, flat) return (t * 2053 + flat) % 0x7F00 end

-- f(element index in the buffer, row-major index in the tensor) for every
-- element of shard s (2-byte elements) of a tensor of shape `shape`.
local function each_element(s, shape, f)
  assert(s.byte_offset % 2 == 0 and reshard.dtype_size(s.dtype) == 2)
  local nd = #shape
  local c = {}
  for d = 1, nd do c[d] = 0 end
  while true do
    local at, flat = s.byte_offset // 2, 0
    for d = 1, nd do
      at = at + c[d] * s.strides[d]
      flat = flat * shape[d] + s.offset[d] + c[d]
    end
    f(at, flat)
    local d = nd
    while d >= 1 do
      c[d] = c[d] + 1
      if c[d] < s.extent[d] then break end
      c[d] = 0
      d = d - 1
    end
    if d < 1 then return end
  end
end

describe("recipes", function()
  it("give the catalog and its models", function()
    local names = {}
    for _, n in ipairs(recipes.catalog()) do names[n] = true end
    check.truthy(names["DeepSeek-V3"] and names["Llama-3.1-8B"], "catalog")
    local m <close> = recipes.model("llama8b") -- an alias
    check.eq(m:name(), "Llama-3.1-8B", "name")
    check.eq(m:num_tensors(), 32 * 9 + 3, "tensors")
    check.eq(m:get("hidden_size"), 4096, "hidden_size")
    local t = m:tensor(0)
    check.eq(t.name, "model.embed_tokens.weight", "tensor 0")
    check.eq(t.dtype, "bf16", "dtype")
    check.eq(t.shape[1], 128256, "rows")
    check.eq(t.shape[2], 4096, "columns")
    check.contains(tostring(m), "Llama-3.1-8B", "tostring")
  end)

  it("read a shipped config.json as the catalog's model", function()
    local file <close> = recipes.model(LLAMA8B)
    local text <close> = recipes.model(read(LLAMA8B))
    local cat <close> = recipes.model("Llama-3.1-8B")
    local a, b, c = file:tensors(), text:tensors(), cat:tensors()
    check.eq(#a, #c, "tensors")
    for i = 1, #c do
      for _, m in ipairs{ a[i], b[i] } do
        check.eq(m.name, c[i].name, "name")
        check.eq(m.dtype, c[i].dtype, "dtype")
        check.eq(table.concat(m.shape, "x"), table.concat(c[i].shape, "x"),
          "shape of " .. c[i].name)
      end
    end
  end)

  it("make layouts of a config file and a plan between them", function()
    local ctx <close> = reshard.local_context(16)
    local src, dst, recipe, bufs = recipes.layouts(ctx, LLAMA8B,
      { train = "tp=2,pp=4", infer = "tp=8" })
    check.eq(src:num_tensors(), 291, "trainer tensors")
    check.eq(dst:num_tensors(), 291, "engine tensors")
    check.eq(table.concat(recipe:ranks("dst"), ","),
      "8,9,10,11,12,13,14,15", "engine ranks")
    local qkv
    for _, b in ipairs(bufs) do
      if b.rank == 8 and b.name == "model.layers.0.self_attn.qkv_proj.weight" then
        qkv = b
      end
    end
    -- q 4096 rows, k and v 1024 each, over tp 8; 4096 bf16 columns
    check.truthy(qkv, "qkv_proj of rank 8")
    check.eq(qkv.bytes, (4096 + 1024 + 1024) // 8 * 4096 * 2, "qkv bytes")
    local plan <close> = src:plan(dst)
    check.eq(plan:num_tensors(), 291, "tensors planned")
    src:close()
    dst:close()
    recipe:close()
  end)

  for _, case in ipairs{ { "apart", 6, false }, { "colocated", 4, true } } do
    it("move every element where the engine's shards say (" .. case[1] .. ")",
      function()
        local config = tiny_config(50)
        local model <close> = recipes.model(config)
        local tensors = model:tensors()
        local ctx <close> = reshard.local_context(case[2])
        local src, dst, recipe = recipes.layouts(ctx, config,
          { train = "tp=2,pp=2", infer = "tp=2", colocated = case[3] })
        local plan <close> = src:plan(dst)
        src:close()
        dst:close()

        local mem = { src = {}, dst = {} }
        local names = {}
        for _, side in ipairs{ "src", "dst" } do
          for _, rank in ipairs(recipe:ranks(side)) do
            for _, rb in ipairs(recipe:buffers(side, rank)) do
              local b = reshard.buffer(rb.bytes)
              b:fill(0xFF)
              plan:bind(side, rank, rb.buffer, b)
              local key = rank .. ":" .. rb.buffer
              mem[side][key] = b
              if side == "dst" then names[key] = rb.name end
            end
          end
        end
        for _, s in ipairs(recipe:shards("src")) do
          local b = mem.src[s.rank .. ":" .. s.buffer]
          each_element(s, tensors[s.tensor_index + 1].shape, function(at, flat)
            b:set("u16", at, code(s.tensor_index, flat))
          end)
        end
        plan:execute()

        local checked, bad, held = 0, 0, {}
        for _, s in ipairs(recipe:shards("dst")) do
          check.eq(s.tensor, tensors[s.tensor_index + 1].name, "tensor name")
          check.eq(s.scales, false, "scales")
          local key = s.rank .. ":" .. s.buffer
          local b = mem.dst[key]
          each_element(s, tensors[s.tensor_index + 1].shape, function(at, flat)
            checked = checked + 1
            held[key] = (held[key] or 0) + 1
            local want = code(s.tensor_index, flat)
            local got = b:get("u16", at)
            if got ~= want then
              bad = bad + 1
              if bad <= 5 then
                print(("rank %d %s[%d]: %d, want %d"):format(s.rank, s.tensor,
                  flat, got, want))
              end
            end
          end)
        end
        check.eq(bad, 0, "wrong elements")
        -- one engine replica: every tensor once, the norms on both ranks
        local want = 0
        for _, t in ipairs(tensors) do
          local n = 1
          for _, d in ipairs(t.shape) do n = n * d end
          if t.name:match("norm%.weight$") then n = 2 * n end
          want = want + n
        end
        check.eq(checked, want, "elements checked")
        -- shards fill every engine buffer but vLLM's vocabulary padding:
        -- 50 rows padded to 64, 32 a rank, 14 spare rows on the second,
        -- which keep what they held
        for key, b in pairs(mem.dst) do
          local spare = b:count("u16") - (held[key] or 0)
          local name = names[key]
          if name == "model.embed_tokens.weight" or name == "lm_head.weight" then
            check.truthy(spare == 0 or spare == 14 * 32, name .. " padding")
            for i = b:count("u16") - spare, b:count("u16") - 1 do
              check.eq(b:get("u16", i), 0xFFFF, name .. " padding untouched")
            end
          else
            check.eq(spare, 0, "elements of " .. name .. " in no shard")
          end
        end
        plan:close()
        for _, side in pairs(mem) do
          for _, b in pairs(side) do b:close() end
        end
        recipe:close()
      end)
  end

  it("say which rows each buffer holds", function()
    local r <close> = recipes.recipe(tiny_config(200), "tp=2", "tp=2")
    check.eq(r:get("infer_first_rank"), 2, "first engine rank")
    local embed = {}
    for _, s in ipairs(r:shards("dst")) do
      if s.tensor == "model.embed_tokens.weight" then embed[#embed + 1] = s end
    end
    -- 200 rows padded to 256: 128 a rank, the second holds 72 of them
    check.eq(#embed, 2, "embed shards")
    local want = { { 2, 0, 128 }, { 3, 128, 72 } }
    for i, s in ipairs(embed) do
      check.eq(s.rank, want[i][1], "rank")
      check.eq(s.offset[1], want[i][2], "row offset")
      check.eq(s.extent[1], want[i][3], "rows")
      check.eq(s.extent[2], 32, "columns")
      check.eq(table.concat(s.strides, ","), "32,1", "strides")
      check.eq(s.dtype, "bf16", "dtype")
    end
    local mine, theirs = r:shards("src", 1), {}
    for _, s in ipairs(r:shards("src")) do
      if s.rank == 1 then theirs[#theirs + 1] = s end
    end
    check.truthy(#mine > 0, "rank 1 holds shards")
    check.eq(#mine, #theirs, "rank 1's shards")
    for i = 1, #mine do
      check.eq(mine[i].tensor, theirs[i].tensor, "tensor")
      check.eq(mine[i].byte_offset, theirs[i].byte_offset, "byte offset")
    end
    local b = r:buffers("src", 0)
    check.eq(#b, 1, "trainer buffers")
    check.eq(b[1].name, "param_buffer.bf16", "trainer buffer name")
  end)

  it("take settings, one rank, and a model", function()
    local ctx <close> = reshard.local_context(2)
    local model <close> = recipes.model(tiny_config(50))
    local s, d, rc, bufs = recipes.layouts(ctx, model,
      { train = "tp=1", infer = "tp=1", rank = 1,
        settings = { infer_dtype = "f8_e4m3", fp8_block_rows = 16,
                     fp8_block_cols = 16 } })
    local src <close> = s
    local dst <close> = d
    local r <close> = rc
    check.eq(src:num_shards(), 0, "rank 1 is an engine rank")
    check.truthy(dst:num_shards() > 0, "engine shards")
    check.eq(r:get("infer_dtype"), reshard.dtype.f8_e4m3, "engine dtype")
    local scales
    for _, b in ipairs(bufs) do
      check.eq(b.rank, 1, "rank of the buffers")
      if b.name == "model.layers.0.self_attn.qkv_proj.weight_scale_inv" then
        scales = b
      end
    end
    -- q 32 rows (2 blocks), k and v 16 (1 each), of 32 columns (2 blocks)
    check.truthy(scales, "qkv_proj scales")
    check.eq(scales.bytes, (2 + 1 + 1) * 2 * 4, "scale bytes")
  end)

  it("refuse bad input with the library's status and message", function()
    local e = check.fails("RS_ERR_INVALID_ARGUMENT", recipes.model,
      "no-such-model")
    check.contains(e.message, "DeepSeek-V3", "the catalog listed")
    e = check.fails("RS_ERR_UNSUPPORTED", recipes.model, '{"model_type": "gpt2"}')
    check.contains(e.message, "gpt2", "model_type named")
    e = check.fails("RS_ERR_INVALID_ARGUMENT", recipes.model,
      '{"model_type": "llama", "hidden_size": "x"}')
    check.contains(e.message, "hidden_size", "key named")
    e = check.fails("RS_ERR_INVALID_ARGUMENT", recipes.model,
      '{\n "model_type": llama}')
    check.contains(e.message, "line 2", "where")
    check.fails("RS_ERR_INVALID_ARGUMENT", recipes.model, '{"a": 1}\0')
    check.fails("RS_ERR_INVALID_ARGUMENT", recipes.model, 42)

    local m <close> = recipes.model(tiny_config(50))
    check.fails("RS_ERR_INVALID_ARGUMENT", m.tensor, m, 10000)
    e = check.fails("RS_ERR_BAD_PARAM", m.get, m, 999)
    check.contains(e.message, "999", "parameter named")
    check.fails("RS_ERR_INVALID_ARGUMENT", m.get, m, "no_such_fact")
    e = check.fails("RS_ERR_INVALID_ARGUMENT", recipes.recipe, m, "tp=3", "tp=1")
    check.contains(e.message, "tp=3", "key named")
    e = check.fails("RS_ERR_INVALID_ARGUMENT", recipes.recipe, m, "tp=2,bogus=2",
      "tp=1")
    check.contains(e.message, "bogus", "key named")
    check.fails("RS_ERR_INVALID_ARGUMENT", recipes.recipe, m, nil, "tp=1")

    local r <close> = recipes.recipe(m, "tp=2", "tp=1,dp=2")
    e = check.fails("RS_ERR_BAD_PARAM", r.set, r, 999, 1)
    check.contains(e.message, "999", "parameter named")
    check.fails("RS_ERR_BAD_PARAM", r.get, r, 999)
    check.fails("RS_ERR_INVALID_ARGUMENT", r.set, r, "no_such_setting", 1)
    e = check.fails("RS_ERR_BAD_PARAM", r.set, r, "train_tp", 4) -- a size
    check.contains(e.message, "read-only", "why")
    check.fails("RS_ERR_BAD_PARAM", r.set, r, "fp8_block_rows", 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", r.set, r, "infer_dtype", "f99")
    check.fails("RS_ERR_INVALID_ARGUMENT", r.buffers, r, "dst", 99)
    check.fails("RS_ERR_INVALID_ARGUMENT", r.shards, r, "dst", 99)
    check.fails("RS_ERR_INVALID_ARGUMENT", r.shards, r, "sideways")

    local ctx <close> = reshard.local_context(3) -- one rank short
    local l <close> = ctx:layout()
    e = check.fails("RS_ERR_UNKNOWN_RANK", r.add_infer, r, l) -- engine rank 3
    check.contains(e.message, "rank 3 outside", "rank named")
    check.eq(l:num_tensors(), 0, "a failed add leaves the layout")
    check.fails("RS_ERR_INVALID_ARGUMENT", r.add_train, r, l, -5)
    check.fails("RS_ERR_INVALID_ARGUMENT", r.add_train, r, {}, 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", recipes.layouts, ctx, "no-such-model",
      { train = "tp=1", infer = "tp=1" })
    check.fails("RS_ERR_BAD_PARAM", recipes.layouts, ctx, m,
      { train = "tp=1", infer = "tp=1", settings = { fp8_block_rows = 0 } })
    check.fails("RS_ERR_INVALID_ARGUMENT", recipes.layouts, "ctx", m)

    r:close()
    r:close()
    check.fails("RS_ERR_NULL_POINTER", r.get, r, "train_tp")
    m:close()
    check.fails("RS_ERR_NULL_POINTER", recipes.recipe, m, "tp=1", "tp=1")
  end)

  it("are freed by the collector", function()
    for _ = 1, 10 do
      local m = recipes.model("qwen3-30b")
      recipes.recipe(m, "tp=4,ep=8", "tp=4,dp=2,ep=8")
    end
    collectgarbage()
    collectgarbage()
  end)
end)
