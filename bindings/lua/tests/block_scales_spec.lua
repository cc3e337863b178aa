-- SPDX-License-Identifier: Apache-2.0
-- Changing dtype on the way: a bf16 source lands as block-scaled fp8
-- (f8_e4m3 values and f32 scales, layout:set_block_scales), checked
-- against values computed by hand; and the errors of bad declarations.
local reshard = require "reshard"
local check = require "check"

local N, B = 256, 128 -- a [256, 256] tensor in [2, 2] blocks of 128 x 128

-- Source element (i, j), 0-based: block [0, 0] all 448, [0, 1] all 1,
-- [1, 0] all 0, [1, 1] +-(j % 8) / 2 (minus in odd rows; never -0),
-- whose amax 3.5 makes the scale 3.5/448 = 2^-7 under either rule.
local function source(i, j)
  if i < B and j < B then return 448.0 end
  if i < B then return 1.0 end
  if j < B then return 0.0 end
  local x = (j % 8) / 2
  if i % 2 == 1 and x ~= 0 then x = -x end
  return x
end

-- e4m3 bytes of the quotients (j % 8) * 64 of block [1, 1].
local QUOTIENT = { [0] = 0x00, 0x68, 0x70, 0x74, 0x78, 0x7a, 0x7c, 0x7e }

-- The f32 nearest to x (as the library rounds), via a buffer.
local function f32(x)
  local b <close> = reshard.buffer(4)
  b:set("f32", 0, x)
  return b:get("f32", 0)
end

-- Plan and execute on 2 in-process ranks: rank 0 holds the bf16 source
-- whole; rank 1 the fp8 values (buffer 0) and the [2, 2] scales (buffer
-- 1). Returns the fp8 buffer, the scale buffer and the stats of ranks 0
-- and 1 (the buffers are closed by the caller).
local function run(rule)
  local ctx <close> = reshard.local_context(2)
  local src <close> = ctx:layout():add_tensor("w", "bf16", { N, N })
  src:add_shard{ name = "w", rank = 0, offset = { 0, 0 }, extent = { N, N } }
  local dst <close> = ctx:layout():add_tensor("w", "f8_e4m3", { N, N })
  dst:add_tensor("w_scale", "f32", { 2, 2 })
  dst:set_block_scales("w", "w_scale", B, B, rule)
  dst:add_shard{ name = "w", rank = 1, offset = { 0, 0 }, extent = { N, N } }
  dst:add_shard{ name = "w_scale", rank = 1, offset = { 0, 0 },
    extent = { 2, 2 }, buffer = 1 }
  local plan <close> = src:plan(dst)
  local input <close> = reshard.buffer(N * N * 2)
  for i = 0, N - 1 do
    for j = 0, N - 1 do input:set("bf16", i * N + j, source(i, j)) end
  end
  local out = reshard.buffer(N * N)
  out:fill(0xa5) -- none of the bytes it must become
  local scales = reshard.buffer(16)
  scales:fill(0xff)
  plan:bind("src", 0, 0, input)
  plan:bind("dst", 1, 0, out)
  plan:bind("dst", 1, 1, scales)
  plan:execute()
  return out, scales, plan:stats(0), plan:stats(1)
end

describe("block-scaled fp8", function()
  for _, rule in ipairs{ "amax", "ue8m0" } do
    it("from bf16, by hand (" .. rule .. ")", function()
      local o, s, st0, st1 = run(rule)
      local out <close> = o
      local scales <close> = s
      -- block of 448: scale 1, bytes 0x7e; block of 1: scale 1/448
      -- (amax) or 2^-8 (ue8m0), bytes 0x7e or 0x78 (256); zero block:
      -- scale 1, bytes 0; block [1, 1]: scale 2^-7.
      local ones, ones_byte = f32(1 / 448), 0x7e
      if rule == "ue8m0" then ones, ones_byte = 2.0 ^ -8, 0x78 end
      local bad, first = 0, nil
      for i = 0, N - 1 do
        for j = 0, N - 1 do
          local w
          if i < B and j < B then w = 0x7e
          elseif i < B then w = ones_byte
          elseif j < B then w = 0
          else
            w = QUOTIENT[j % 8]
            if i % 2 == 1 and w ~= 0 then w = w | 0x80 end
          end
          local got = out:get("f8_e4m3", i * N + j)
          if got ~= w then
            bad = bad + 1
            first = first or string.format("[%d, %d] is 0x%02x, want 0x%02x",
              i, j, got, w)
          end
        end
      end
      check.eq(bad, 0, "fp8 bytes that differ (" .. rule .. "), first " ..
        tostring(first))
      local want = { 1.0, ones, 1.0, 2.0 ^ -7 }
      for k = 1, 4 do
        check.eq(scales:get("f32", k - 1), want[k],
          string.format("scale [%d, %d] (%s)", (k - 1) // 2, (k - 1) % 2, rule))
      end
      -- Rank 0 holds every block whole: it converts before sending (each
      -- element, and one per block for the scale).
      check.eq(st0.converted_sending, N * N + 4, "converted_sending, rank 0")
      check.eq(st1.converted_receiving, 0, "converted_receiving, rank 1")
      check.eq(reshard.scale[rule], rule == "amax" and 1 or 2, "reshard.scale")
    end)
  end

  it("refuse bad declarations with the right error", function()
    local ctx <close> = reshard.local_context(2)
    local l <close> = ctx:layout()
    l:add_tensor("w", "f8_e4m3", { N, N }):add_tensor("w_scale", "f32", { 2, 2 })
    l:add_tensor("w_bf16", "bf16", { N, N })
    local function fails(name, part, ...)
      local e = check.fails(name, l.set_block_scales, l, ...)
      check.contains(e.message, part, name .. " message")
      check.contains(tostring(e), name, "tostring")
    end
    fails("RS_ERR_UNKNOWN_TENSOR", "nope", "nope", "w_scale", B, B, "amax")
    fails("RS_ERR_UNKNOWN_TENSOR", "nope", "w", "nope", B, B, "amax")
    fails("RS_ERR_INVALID_ARGUMENT", "w_bf16", "w_bf16", "w_scale", B, B)
    fails("RS_ERR_INVALID_ARGUMENT", "w_bf16", "w", "w_bf16", B, B)
    fails("RS_ERR_INVALID_ARGUMENT", "'w'", "w", "w_scale", 0, B)
    fails("RS_ERR_INVALID_ARGUMENT", "w_scale", "w", "w_scale", 64, 64, "ue8m0")
    fails("RS_ERR_INVALID_ARGUMENT", "7", "w", "w_scale", B, B, 7)
    fails("RS_ERR_INVALID_ARGUMENT", "mxfp", "w", "w_scale", B, B, "mxfp")
    fails("RS_ERR_INVALID_ARGUMENT", "block rows", "w", "w_scale", 1.5, B)
    fails("RS_ERR_INVALID_ARGUMENT", "string", "w", 42, B, B)
    -- good ones: the defaults (128 x 128, amax), and the same again
    check.eq(l:set_block_scales("w", "w_scale"), l, "returns the layout")
    l:set_block_scales("w", "w_scale", B, B, reshard.scale.amax)
    fails("RS_ERR_INVALID_ARGUMENT", "w", "w", "w_scale", B, B, "ue8m0")

    -- A destination shard that cuts a block: the plan is refused.
    local src <close> = ctx:layout():add_tensor("w", "bf16", { N, N })
    src:add_shard{ name = "w", rank = 0, offset = { 0, 0 }, extent = { N, N } }
    local dst <close> = ctx:layout():add_tensor("w", "f8_e4m3", { N, N })
    dst:add_tensor("w_scale", "f32", { 2, 2 })
    dst:set_block_scales("w", "w_scale", B, B, "amax")
    dst:add_shard{ name = "w", rank = 0, offset = { 0, 0 }, extent = { 64, N } }
    dst:add_shard{ name = "w", rank = 1, offset = { 64, 0 },
      extent = { N - 64, N } }
    dst:add_shard{ name = "w_scale", rank = 1, offset = { 0, 0 },
      extent = { 2, 2 }, buffer = 1 }
    local e = check.fails("RS_ERR_UNSUPPORTED", reshard.plan, src, dst)
    check.contains(e.message, "cuts block", "message")
  end)
end)
