-- SPDX-License-Identifier: Apache-2.0
-- The shared scenario: a weight sync from trainer TP2 x DP2 to inference
-- TP4, every rank in this process.
--
-- A small transformer (2 layers of q/k/v/o, gate/up/down and two norms)
-- lives on trainer ranks 0..3, a {2, 2} mesh [DP, TP] (Megatron: q, k, v,
-- gate and up split by rows, o and down by columns, norms replicated),
-- each rank's shards one after another in one buffer. Inference ranks
-- 4..7, a {4} mesh [TP], want them in one fused buffer per rank, vLLM
-- style (qkv_proj = q, k, v shards back to back; gate_up_proj = gate, up).
-- Domains of 4 ranks: the trainers are one, the inference ranks another.
-- Plan, print what crosses, execute, check every element; change the
-- weights, execute the same plan again, check again.
--
--   LUA_PATH="build/.../bindings/lua/?.lua;;" \
--   LUA_CPATH="build/.../bindings/lua/?.so;;" lua5.4 scenario.lua
local reshard = require "reshard"

local HIDDEN, Q, KV, FFN, LAYERS = 64, 64, 32, 128, 2

-- The model: name, dtype, shape, trainer TP placement, inference TP
-- placement (each a tensor dimension to split, or nil to replicate), and
-- the fused inference buffer part it belongs to.
local function model()
  local t = {}
  for l = 0, LAYERS - 1 do
    local p = "model.layers." .. l .. "."
    local function add(name, dtype, shape, split)
      t[#t + 1] = { name = p .. name, dtype = dtype, shape = shape,
        split = split }
    end
    add("self_attn.q_proj.weight", "f32", { Q, HIDDEN }, 0)  -- qkv_proj
    add("self_attn.k_proj.weight", "f32", { KV, HIDDEN }, 0) -- qkv_proj
    add("self_attn.v_proj.weight", "f32", { KV, HIDDEN }, 0) -- qkv_proj
    add("self_attn.o_proj.weight", "f32", { HIDDEN, Q }, 1)
    add("mlp.gate_proj.weight", "f32", { FFN, HIDDEN }, 0)   -- gate_up_proj
    add("mlp.up_proj.weight", "f32", { FFN, HIDDEN }, 0)     -- gate_up_proj
    add("mlp.down_proj.weight", "f32", { HIDDEN, FFN }, 1)
    add("input_layernorm.weight", "bf16", { HIDDEN }, nil)
    add("post_attention_layernorm.weight", "bf16", { HIDDEN }, nil)
  end
  return t
end

-- Element g (row-major index in the whole tensor) of tensor number t in
-- generation gen: exact in f32, and in bf16 for the norms.
local function value(t, g, gen, dtype)
  if dtype == "bf16" then return (g + 7 * gen + t) % 256 end
  return gen * 1048576 + t * 16384 + g
end

-- Calls f(local_index, global_index) for every element of the box
-- (offset, extent) of a tensor of shape, both row-major from 0.
local function each_element(shape, offset, extent, f)
  local nd = #shape
  local idx = {}
  for d = 1, nd do
    if extent[d] == 0 then return end
    idx[d] = 0
  end
  local n = 0
  while true do
    local g = 0
    for d = 1, nd do g = g * shape[d] + offset[d] + idx[d] end
    f(n, g)
    n = n + 1
    local d = nd
    while d >= 1 do
      idx[d] = idx[d] + 1
      if idx[d] < extent[d] then break end
      idx[d] = 0
      d = d - 1
    end
    if d < 1 then return end
  end
end

-- Lays the tensors of a mesh out back to back in one buffer per rank:
-- returns {[tensor] = byte offset} and the bytes each rank needs.
local function pack(tensors, mesh, placements_of)
  local offsets, at = {}, 0
  for i, t in ipairs(tensors) do
    local size = reshard.dtype_size(t.dtype)
    local numel = nil
    for _, rank in ipairs(mesh.ranks) do -- same on every rank (even splits)
      local n = mesh:local_numel(t.shape, placements_of(t), rank)
      assert(numel == nil or numel == n, "uneven shards in " .. t.name)
      numel = n
    end
    offsets[i] = at
    at = at + numel * size
  end
  return offsets, at
end

local function run(opts)
  opts = opts or {}
  local say = opts.quiet and function() end or print
  local tensors = model()

  local ctx <close> = reshard.local_context(8)
  ctx:set_domain_size(4) -- {0..3} trainers, {4..7} inference

  local trainer = reshard.mesh({ 2, 2 }, { 0, 1, 2, 3 }, { "dp", "tp" })
  local infer = reshard.mesh({ 4 }, { 4, 5, 6, 7 }, { "tp" })
  local function trainer_placements(t)
    return trainer:placements{ tp = t.split and reshard.Shard(t.split) or nil }
  end
  local function infer_placements(t)
    return infer:placements{ tp = t.split and reshard.Shard(t.split) or nil }
  end
  local src_off, src_bytes = pack(tensors, trainer, trainer_placements)
  local dst_off, dst_bytes = pack(tensors, infer, infer_placements)

  local src <close> = ctx:layout()
  local dst <close> = ctx:layout()
  for i, t in ipairs(tensors) do
    src:add_tensor(t.name, t.dtype, t.shape)
    dst:add_tensor(t.name, t.dtype, t.shape)
    src:add_dtensor(t.name, trainer, trainer_placements(t), 0, src_off[i])
    dst:add_dtensor(t.name, infer, infer_placements(t), 0, dst_off[i])
  end

  local plan <close> = reshard.plan(src, dst)
  local all = plan:stats()
  local total = dst_bytes * infer:size()
  say(("libreshard %s, Lua binding: %d tensors, %d moves, %d round(s)")
    :format(reshard.version(), #tensors, all.moves, all.rounds))
  say(("  bytes inside domains: %d, across domains: %d, local: %d;" ..
    " %d destination bytes"):format(all.bytes_sent_intra,
    all.bytes_sent_inter, all.bytes_local, total))
  for _, rank in ipairs(infer.ranks) do
    local s = plan:stats(rank)
    say(("  rank %d receives %d bytes across domains, %d inside")
      :format(rank, s.bytes_recv_inter, s.bytes_recv_intra))
  end

  local sbuf, dbuf = {}, {}
  for _, rank in ipairs(trainer.ranks) do
    sbuf[rank] = reshard.buffer(src_bytes)
    plan:bind("src", rank, 0, sbuf[rank])
  end
  for _, rank in ipairs(infer.ranks) do
    dbuf[rank] = reshard.buffer(dst_bytes)
    plan:bind("dst", rank, 0, dbuf[rank])
  end

  local function fill(gen)
    for _, rank in ipairs(trainer.ranks) do
      local b = sbuf[rank]
      for i, t in ipairs(tensors) do
        local off, ext = trainer:local_box(t.shape, trainer_placements(t), rank)
        local base = src_off[i] // reshard.dtype_size(t.dtype)
        each_element(t.shape, off, ext, function(n, g)
          b:set(t.dtype, base + n, value(i, g, gen, t.dtype))
        end)
      end
    end
  end

  local function verify(gen)
    local checked, bad = 0, 0
    for _, rank in ipairs(infer.ranks) do
      local b = dbuf[rank]
      for i, t in ipairs(tensors) do
        local off, ext = infer:local_box(t.shape, infer_placements(t), rank)
        local base = dst_off[i] // reshard.dtype_size(t.dtype)
        each_element(t.shape, off, ext, function(n, g)
          checked = checked + 1
          if b:get(t.dtype, base + n) ~= value(i, g, gen, t.dtype) then
            if bad < 5 then
              say(("  WRONG: rank %d %s element %d"):format(rank, t.name, g))
            end
            bad = bad + 1
          end
        end)
      end
    end
    return checked, bad
  end

  local results = { stats = all, total_bytes = total, runs = {} }
  for gen = 0, 1 do
    for _, rank in ipairs(infer.ranks) do dbuf[rank]:fill(0xff) end
    fill(gen)
    plan:execute()
    local checked, bad = verify(gen)
    results.runs[#results.runs + 1] = { checked = checked, bad = bad }
    say(("  execution %d: %d elements checked, %s"):format(gen + 1, checked,
      bad == 0 and "bit-exact" or (bad .. " WRONG")))
  end
  for _, b in pairs(sbuf) do b:close() end
  for _, b in pairs(dbuf) do b:close() end
  return results
end

if ... == "scenario" then return run end -- require "scenario": the function
local r = run()
for _, one in ipairs(r.runs) do
  if one.bad ~= 0 or one.checked == 0 then os.exit(1) end
end
