-- SPDX-License-Identifier: Apache-2.0
-- Layouts, meshes and plans through the Lua layer.
local reshard = require "reshard"
local check = require "check"

describe("meshes", function()
  it("map ranks to coordinates and back", function()
    local m = reshard.mesh({ 2, 3 }, 10, { "dp", "tp" })
    check.eq(m:size(), 6, "size")
    check.eq(m.ranks[1], 10, "first rank")
    check.eq(m.ranks[6], 15, "last rank")
    local c = m:coord(14)
    check.eq(c[1], 1, "dp")
    check.eq(c[2], 1, "tp")
    check.eq(m:rank_at{ 1, 2 }, 15, "rank_at")
    check.eq(m:coord(3), nil, "not in the mesh")
    check.truthy(m:contains(10) and not m:contains(16), "contains")
    local p = m:placements{ tp = reshard.Shard(1) }
    check.eq(tostring(p[1]), "Replicate()", "dp")
    check.eq(tostring(p[2]), "Shard(1)", "tp")
    check.truthy(p[2] == reshard.Shard(1), "placements compare")
    check.contains(tostring(m), "dp=2xtp=3", "tostring")
    local same = reshard.mesh{ shape = { 2, 3 }, ranks = { 10, 11, 12, 13, 14, 15 } }
    check.eq(same:rank_at{ 0, 2 }, 12, "table form")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.mesh, { 2, 2 }, { 0, 1, 2 })
    check.fails("RS_ERR_INVALID_ARGUMENT", m.placements, m, { pp = reshard.Shard(0) })
  end)

  it("give DTensor boxes, uneven ones as torch.chunk does", function()
    local m = reshard.mesh({ 4 })
    local sizes = {}
    for r = 0, 3 do
      local off, ext = m:local_box({ 10, 3 }, { reshard.Shard(0) }, r)
      sizes[#sizes + 1] = ext[1]
      check.eq(off[1], 3 * r < 10 and 3 * r or off[1], "offset")
      check.eq(ext[2], 3, "whole dim 1")
    end
    check.eq(table.concat(sizes, ","), "3,3,3,1", "chunks")
    check.eq(m:local_numel({ 10, 3 }, { reshard.Shard(0) }, 3), 3, "numel")
    local off, ext = reshard.local_box({ 8, 8 }, { 2, 2 },
      { reshard.Shard(0), reshard.Shard(1) }, { 1, 0 })
    check.eq(table.concat(off, ","), "4,0", "offset")
    check.eq(table.concat(ext, ","), "4,4", "extent")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_box, { 8 }, { 2 },
      { reshard.Shard(3) }, { 0 })
  end)
end)

describe("layouts", function()
  it("take strided shards, plain mesh tables and integer placements", function()
    local ctx <close> = reshard.local_context(3)
    local src <close> = ctx:layout():add_tensor("w", "i16", { 4, 2 })
    local dst <close> = ctx:layout():add_tensor("w", "i16", { 4, 2 })
    -- rank 0 stores the 4x2 tensor column-major (strides {1, 4})
    src:add_shard{ name = "w", rank = 0, offset = { 0, 0 }, extent = { 4, 2 },
      strides = { 1, 4 } }
    -- ranks 1 and 2 hold columns, as Shard(1) over a plain mesh table
    dst:add_dtensor("w", { shape = { 2 }, ranks = { 1, 2 } }, { 1 })
    check.eq(src:num_shards(), 1, "src shards")
    check.eq(dst:num_shards(), 2, "dst shards")
    check.contains(tostring(dst), "2 shards", "tostring")
    local plan <close> = reshard.plan(src, dst)
    check.contains(tostring(plan), "moves", "tostring")
    local a <close> = reshard.buffer(16)
    for i = 0, 7 do a:set("i16", i, -100 - i) end -- element (r, c) at r + 4c
    local b1 <close> = reshard.buffer(8)
    local b2 <close> = reshard.buffer(8)
    plan:bind("src", 0, 0, a):bind("dst", 1, 0, b1):bind(reshard.DST, 2, 0, b2)
    plan:execute()
    for r = 0, 3 do
      check.eq(b1:get("i16", r), -100 - r, "column 0")
      check.eq(b2:get("i16", r), -104 - r, "column 1")
    end
  end)

  it("give per-rank figures and JSON", function()
    local q = check.quickstart()
    local all = q.plan:stats()
    local names = { "bytes_sent_intra", "bytes_sent_inter", "bytes_recv_intra",
      "bytes_recv_inter", "bytes_local", "messages_sent", "messages_recv",
      "rounds", "staging_bytes", "moves" }
    local sum = 0
    for _, n in ipairs(names) do check.integer(all[n], n) end
    for r = 0, 4 do
      local s = q.plan:stats(r)
      sum = sum + s.bytes_recv_intra + s.bytes_recv_inter + s.bytes_local
      check.eq(q.plan:stat("bytes_sent_inter", r), s.bytes_sent_inter, "stat")
    end
    check.eq(sum, 6 * 9 * 4, "every destination byte")
    check.fails("RS_ERR_UNKNOWN_RANK", q.plan.stats, q.plan, 5)
    check.fails("RS_ERR_INVALID_ARGUMENT", q.plan.stat, q.plan, "nope")
    local json = q.plan:json()
    check.contains(json, '"name":"w"', "tensor")
    check.contains(json, '"world_size":5', "world")
    check.eq(q.ctx:transport(), "local", "transport")
    check.contains(tostring(q.ctx), "world 5", "tostring")
    q.plan:close()
  end)
end)
