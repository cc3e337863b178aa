-- SPDX-License-Identifier: Apache-2.0
-- 64-bit integers stay exact: Lua integers in, Lua integers out, through
-- the SWIG typemaps (swig/reshard.i) and the Lua layer.
local reshard = require "reshard"
local check = require "check"
local C = reshard.swig

local BIG = (1 << 53) + 1 -- 9007199254740993: no double holds it

describe("64-bit integers", function()
  it("cross the SWIG typemaps exactly, both ways", function()
    local v = C.rsw_ints_new()
    local values = { BIG, -BIG, -1, 0, math.maxinteger, math.mininteger,
      (1 << 62) + 3 }
    for _, x in ipairs(values) do check.eq(C.rsw_ints_push(v, x), 0, "push") end
    check.eq(C.rsw_ints_len(v), #values, "len")
    for i, x in ipairs(values) do
      check.eq(C.rsw_ints_get(v, i - 1), x, "element " .. i)
    end
    -- a float with an exact integer value is taken as that integer
    C.rsw_ints_push(v, 3.0)
    check.eq(C.rsw_ints_get(v, #values), 3, "3.0")
    C.rsw_ints_free(v)
  end)

  it("refuse what is not an exact integer", function()
    local v = C.rsw_ints_new()
    for _, bad in ipairs{ 3.5, 2.0 ^ 63, -2.0 ^ 64, 0 / 0, "3", true } do
      local err = check.raises(C.rsw_ints_push, v, bad)
      check.contains(tostring(err), "int64_t", "message for " .. tostring(bad))
    end
    check.eq(C.rsw_ints_len(v), 0, "nothing pushed")
    C.rsw_ints_free(v)
    -- int arguments: must fit an int, never truncated
    local r = C.rsw_result_new()
    check.raises(C.rsw_context_create_local, r, 1 << 32)
    check.raises(C.rsw_context_create_local, r, 2.5)
  end)

  it("come back as integers, not floats (status, value, constants)", function()
    local r = C.rsw_result_new()
    C.rsw_context_create_local(r, 0)
    check.eq(r.status, 100, "int result field")
    check.eq(C.rsw_dtype_size(C.RS_DTYPE_F64), 8, "int64_t result")
    check.eq(C.RS_ERR_CORRUPT, 503, "constant")
    check.eq(C.RS_ALL_RANKS, -1, "negative constant")
  end)

  it("uint64_t travels as its bit pattern", function()
    local b <close> = reshard.buffer(16)
    local addr = C.rsw_buffer_address(b)
    check.integer(addr, "address")
    check.eq(addr % 64, 0, "64-byte aligned")
    check.eq(b:address(), addr, "buffer:address")
  end)

  it("a shape and offset of 2^53+1 round-trip into errors, JSON and data", function()
    local ctx <close> = reshard.local_context(2)
    ctx:set_domain_size(1)
    local src <close> = ctx:layout():add_tensor("w", "u8", { BIG + 1 })
    local dst <close> = ctx:layout():add_tensor("w", "u8", { BIG + 1 })
    local err = check.fails("RS_ERR_OUT_OF_BOUNDS", src.add_shard, src,
      { name = "w", rank = 0, offset = { BIG }, extent = { 2 } })
    check.contains(err.message, "9007199254740993", "offset in the message")
    check.contains(err.message, "9007199254740994", "size in the message")
    -- rank 0 holds element 2^53+1 at byte offset 2^53+1 of its buffer 0
    -- and at byte 1 of its buffer 1; rank 1 wants it.
    src:add_shard{ name = "w", rank = 0, offset = { BIG }, extent = { 1 },
      buffer = 0, byte_offset = BIG }
    dst:add_shard{ name = "w", rank = 1, offset = { BIG }, extent = { 1 },
      byte_offset = 3 }
    local plan <close> = reshard.plan(src, dst)
    local json = plan:json()
    check.contains(json, '"shape":[9007199254740994]', "shape in JSON")
    check.contains(json, '"offset":[9007199254740993]', "offset in JSON")
    local small <close> = reshard.buffer(8)
    err = check.fails("RS_ERR_BUFFER_TOO_SMALL", plan.bind, plan, "src", 0, 0,
      small)
    check.contains(err.message, "9007199254740994", "byte offset + 1")
    local s = plan:stats()
    check.eq(s.bytes_sent_inter, 1, "stat")
    check.eq(s.bytes_recv_inter, 1, "stat")
    for k, v in pairs(s) do check.integer(v, k) end
  end)

  it("a tensor of 2^53+1 elements moves its last element", function()
    local ctx <close> = reshard.local_context(2)
    local src <close> = ctx:layout():add_tensor("w", "i64", { BIG })
    local dst <close> = ctx:layout():add_tensor("w", "i64", { BIG })
    src:add_shard{ name = "w", rank = 0, offset = { BIG - 2 }, extent = { 2 } }
    dst:add_shard{ name = "w", rank = 1, offset = { BIG - 1 }, extent = { 1 },
      byte_offset = 8 }
    local plan <close> = src:plan(dst)
    local a <close> = reshard.buffer(16)
    local b <close> = reshard.buffer(16)
    a:set("i64", 0, -BIG)
    a:set("i64", 1, BIG)
    plan:bind("src", 0, 0, a):bind("dst", 1, 0, b):execute()
    check.eq(b:get("i64", 1), BIG, "moved")
    check.eq(b:get("i64", 0), 0, "untouched")
  end)

  it("parameters and figures are exact integers", function()
    local ctx <close> = reshard.local_context(2)
    ctx:set_param("staging_bytes", 1 << 40)
    check.eq(ctx:param("staging_bytes"), 1 << 40, "staging_bytes")
    local err = check.fails("RS_ERR_BAD_PARAM", ctx.set_param, ctx,
      "staging_bytes", (1 << 40) + 1)
    check.contains(err.message, "1099511627777", "message")
    ctx:set_param("integrity", true)
    check.eq(ctx:param("integrity"), 1, "integrity")
    check.eq(ctx:param("copy_threads"), 1, "copy_threads default")
    ctx:set_param("copy_threads", 0)
    check.eq(ctx:param("copy_threads"), 0, "copy_threads")
    check.fails("RS_ERR_BAD_PARAM", ctx.set_param, ctx, "copy_threads", 257)
    check.eq(ctx:param("rounds"), reshard.rounds.packed, "rounds default")
    ctx:set_param("rounds", reshard.rounds.by_domain_pair)
    check.eq(ctx:param("rounds"), 1, "rounds")
    check.fails("RS_ERR_BAD_PARAM", ctx.set_param, ctx, "rounds", 2)
    check.eq(ctx:world_size(), 2, "world_size")
    check.eq(ctx:rank(), reshard.ALL_RANKS, "rank")
    check.eq(ctx:domain(1), 1, "domain")
    local q = check.quickstart()
    local fp = q.plan:fingerprint()
    check.integer(fp, "fingerprint")
    check.contains(q.plan:json(), string.format('"fingerprint":"%016x"', fp),
      "the fingerprint's bits")
    check.eq(q.plan:num_tensors(), 1, "num_tensors")
    check.integer(q.plan:num_moves(), "num_moves")
    -- each rank's part: its moves only, every rank's figures
    local parts = 0
    for rank = 0, 4 do
      q.ctx:set_param("plan_part", rank)
      check.eq(q.ctx:param("plan_part"), rank, "plan_part")
      local part = reshard.plan(q.src, q.dst)
      check.contains(part:json(), string.format('"part":%d', rank), "part")
      check.eq(part:stat("moves", rank), q.plan:stat("moves", rank), "moves")
      parts = parts + part:num_moves()
      check.fails("RS_ERR_UNSUPPORTED", part.execute, part)
      part:close()
    end
    check.eq(parts >= q.plan:num_moves(), true, "every move in a part")
    q.ctx:set_param("plan_part", 5)
    check.fails("RS_ERR_UNKNOWN_RANK", reshard.plan, q.src, q.dst)
    q.ctx:set_param("plan_part", -1)
    -- without boxes: the same figures, no box, not to run
    q.ctx:set_param("plan_boxes", false)
    check.eq(q.ctx:param("plan_boxes"), 0, "plan_boxes")
    local bare = reshard.plan(q.src, q.dst)
    q.ctx:set_param("plan_boxes", true)
    check.eq(bare:fingerprint(), q.plan:fingerprint(), "fingerprint")
    check.eq(bare:num_moves(), q.plan:num_moves(), "num_moves")
    check.eq(bare:stat("moves", 0), q.plan:stat("moves", 0), "moves")
    check.contains(bare:json(), '"boxes":false', "boxes")
    check.fails("RS_ERR_UNSUPPORTED", bare.execute, bare)
    bare:close()
    q.plan:close()
  end)
end)
