-- SPDX-License-Identifier: Apache-2.0
-- StridedShard (torch's _StridedShard, what FSDP2 over TP stores) through
-- the Lua layer: boxes in both orders, the auto order's refusal, several
-- boxes per rank, and the shards a layout gets.
local reshard = require "reshard"
local check = require "check"

local S, SS, R = reshard.Shard, reshard.StridedShard, reshard.Replicate

local function rows_of(boxes)
  local out = {}
  for i, b in ipairs(boxes) do
    out[i] = string.format("%d+%d@%d", b.offset[1], b.extent[1],
      b.local_offset[1])
  end
  return table.concat(out, " ")
end

describe("StridedShard placements", function()
  it("are placements", function()
    check.eq(tostring(SS(0, 2)), "StridedShard(0, 2)", "tostring")
    check.truthy(SS(0, 2) == SS(0, 2) and SS(0, 2) ~= SS(0, 3), "compare")
    check.truthy(SS(1, 1) == S(1), "split factor 1 is Shard")
    check.truthy(SS(0, 2) ~= S(0), "not a Shard")
    check.fails("RS_ERR_INVALID_ARGUMENT", SS, 0, 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", SS, -1, 2)
    check.eq(reshard.strided.fsdp2, 2, "order codes")
  end)

  it("give the issue's example as torch does", function()
    -- mesh (dp=2, tp=2), [StridedShard(0, 2), Shard(0)], shape [8, 3]:
    -- rows 4-5 on (0, 1), rows 2-3 on (1, 0), whatever the order
    local m = reshard.mesh({ 2, 2 })
    for _, order in ipairs{ "auto", "distribute", "fsdp2" } do
      local want = { "0+2@0", "4+2@0", "2+2@0", "6+2@0" }
      for r = 0, 3 do
        local shape, boxes = m:local_boxes({ 8, 3 }, { SS(0, 2), S(0) }, r,
          order)
        check.eq(table.concat(shape, ","), "2,3", "local shape")
        check.eq(rows_of(boxes), want[r + 1], order .. " rank " .. r)
        check.eq(boxes[1].extent[2], 3, "every column")
      end
    end
  end)

  it("hold several boxes of one local tensor", function()
    local shape, boxes = reshard.local_boxes({ 8, 3 }, { 2 }, { SS(0, 2) },
      { 0 }, "distribute")
    check.eq(table.concat(shape, ","), "4,3", "local shape")
    check.eq(rows_of(boxes), "0+2@0 4+2@2", "rows 0-1 and 4-5")
    shape, boxes = reshard.local_boxes({ 5 }, { 2 }, { SS(0, 3) }, { 0 },
      "distribute")
    check.eq(rows_of(boxes), "0+1@0 2+1@1 4+1@2", "three pieces")
  end)

  it("keep different elements in each order where uneven", function()
    -- [7, 2] on (3, 2): row 6 on (2, 0) distributed, on (2, 1) by FSDP2
    local places = { SS(0, 2), S(0) }
    local _, d0 = reshard.local_boxes({ 7, 2 }, { 3, 2 }, places, { 2, 0 },
      "distribute")
    local s1, d1 = reshard.local_boxes({ 7, 2 }, { 3, 2 }, places, { 2, 1 },
      "distribute")
    local s0, f0 = reshard.local_boxes({ 7, 2 }, { 3, 2 }, places, { 2, 0 },
      "fsdp2")
    local _, f1 = reshard.local_boxes({ 7, 2 }, { 3, 2 }, places, { 2, 1 },
      "fsdp2")
    check.eq(rows_of(d0), "6+1@0", "distribute (2, 0)")
    check.eq(#d1, 0, "distribute (2, 1) is empty")
    check.eq(s1[1], 0, "empty local shape")
    check.eq(#f0, 0, "fsdp2 (2, 0) is empty")
    check.eq(s0[2], 2, "empty local shape keeps the other dims")
    check.eq(rows_of(f1), "6+1@0", "fsdp2 (2, 1)")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_boxes, { 7, 2 },
      { 3, 2 }, places, { 0, 0 })
    check.fails("RS_ERR_UNSUPPORTED", reshard.local_boxes, { 8 }, { 2 },
      { SS(0, 2) }, { 0 }, "fsdp2")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_boxes, { 8 }, { 2 },
      { SS(0, 2) }, { 0 }, "sideways")
    check.fails("RS_ERR_UNSUPPORTED", reshard.local_box, { 8 }, { 2 },
      { SS(0, 2) }, { 0 })
  end)
end)

describe("layouts with StridedShard", function()
  it("add a rank's boxes as shards of its one buffer", function()
    local ctx <close> = reshard.local_context(4)
    local got <close> = ctx:layout():add_tensor("w", "f32", { 8, 3 })
    local want <close> = ctx:layout():add_tensor("w", "f32", { 8, 3 })
    got:add_dtensor("w", reshard.mesh({ 2 }, { 3, 1 }), { SS(0, 2) }, 2, 100,
      "distribute")
    for _, s in ipairs{ { 3, 0, 100 }, { 3, 4, 124 }, { 1, 2, 100 },
      { 1, 6, 124 } } do
      want:add_shard{ name = "w", rank = s[1], offset = { s[2], 0 },
        extent = { 2, 3 }, buffer = 2, byte_offset = s[3],
        strides = { 3, 1 } }
    end
    check.eq(got:serialize():bytes(), want:serialize():bytes(), "shards")
  end)

  it("take the order, and refuse an uneven tensor without one", function()
    local ctx <close> = reshard.local_context(6)
    local l <close> = ctx:layout():add_tensor("w", "bf16", { 7, 2 })
    local m = reshard.mesh({ 3, 2 })
    local places = { SS(0, 2), S(0) }
    check.fails("RS_ERR_INVALID_ARGUMENT", l.add_dtensor, l, "w", m, places)
    check.fails("RS_ERR_UNSUPPORTED", l.add_dtensor, l, "w", m,
      { SS(0, 2), R() }, 0, 0, "fsdp2")
    check.eq(l:num_shards(), 0, "nothing added")
    l:add_dtensor("w", m, places, 0, 0, "fsdp2")
    check.eq(l:num_shards(), 5, "the empty shard is skipped")
    local e <close> = ctx:layout():add_tensor("w", "bf16", { 8, 2 })
    e:add_dtensor("w", reshard.mesh({ 2, 2 }), { SS(0, 2), S(0) })
    check.eq(e:num_shards(), 4, "even: the auto order takes it")
  end)
end)
