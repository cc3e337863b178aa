-- SPDX-License-Identifier: Apache-2.0
-- close() in any order, twice, or never (__gc): nothing is freed twice, and
-- every object keeps alive what it needs.
local reshard = require "reshard"
local check = require "check"

local function permutations(items)
  local out = {}
  local function go(rest, acc)
    if #rest == 0 then out[#out + 1] = acc return end
    for i = 1, #rest do
      local r, a = {}, {}
      for j = 1, #rest do if j ~= i then r[#r + 1] = rest[j] end end
      for j = 1, #acc do a[j] = acc[j] end
      a[#a + 1] = rest[i]
      go(r, a)
    end
  end
  go(items, {})
  return out
end

local function full_gc()
  collectgarbage("collect")
  collectgarbage("collect")
end

describe("lifetimes", function()
  it("close in every order, with the plan still working until closed", function()
    local names = { "ctx", "src", "dst", "plan", "in0", "out2" }
    local n = 0
    for _, order in ipairs(permutations(names)) do
      local q = check.quickstart()
      local objs = { ctx = q.ctx, src = q.src, dst = q.dst, plan = q.plan,
        in0 = q.ins[0], out2 = q.outs[2] }
      local closed = {}
      for step, name in ipairs(order) do
        objs[name]:close()
        closed[name] = true
        if not closed.plan and step % 2 == 1 then
          -- buffers closed while bound keep their memory for the plan
          if not closed.in0 then q.fill(step) end
          q.plan:execute()
          if not closed.in0 and not closed.out2 then
            check.eq(q.verify(step), 0, "wrong elements")
          end
        end
      end
      for name in pairs(objs) do objs[name]:close() end -- twice: nothing
      for _, b in pairs(q.ins) do b:close() end
      for _, b in pairs(q.outs) do b:close() end
      n = n + 1
      if n % 60 == 0 then full_gc() end
    end
    check.eq(n, 720, "orders")
    full_gc()
  end)

  it("__gc frees what was never closed, and not what was", function()
    for round = 1, 50 do
      local q = check.quickstart()
      q.fill(round)
      q.plan:execute()
      check.eq(q.verify(round), 0, "wrong elements")
      if round % 2 == 0 then q.plan:close() end
      if round % 3 == 0 then q.ctx:close() end
      if round % 5 == 0 then q.ins[0]:close() end
      q = nil
      if round % 10 == 0 then full_gc() end
    end
    full_gc()
  end)

  it("a layout keeps its context, a plan its buffers", function()
    local q = check.quickstart()
    local plan, src = q.plan, q.src
    local out = q.outs[2]
    local ins = q.ins
    q = nil
    full_gc()
    -- only the plan holds the other buffers now
    ins[0]:fill(0)
    ins[1]:fill(0)
    ins[0]:set("f32", 0, 42)
    ins = nil
    full_gc()
    plan:execute()
    check.eq(out:get("f32", 0), 42.0, "rank 2 got element [0, 0]")
    check.eq(out:get("f32", 1), 0.0, "and [0, 1]")
    src:add_tensor("extra", "u8", { 1 }) -- its context is alive
    check.eq(src:num_tensors(), 2, "tensors")
    plan = nil
    full_gc()
    check.eq(#out, 6 * 3 * 4, "out stays usable")
  end)

  it("a closed buffer lives on while a plan uses it", function()
    local q = check.quickstart()
    q.fill(7)
    local out = q.outs[4]
    for r, b in pairs(q.ins) do b:close() end -- the plan keeps their memory
    q.plan:execute()
    check.eq(q.verify(7), 0, "wrong elements")
    out:close()
    full_gc()
    q.plan:execute() -- writes into the memory of the closed buffer
    q.plan:close()   -- now it goes
    full_gc()
  end)

  it("rebinding lets go of the earlier buffer", function()
    local q = check.quickstart()
    local first = q.outs[2]
    first:close()
    local second <close> = reshard.buffer(6 * 3 * 4)
    q.plan:bind("dst", 2, 0, second)
    q.fill(1)
    q.plan:execute()
    check.eq(second:get("f32", 1), 1001.0, "into the new buffer")
    q.plan:close()
  end)

  it("to-be-closed variables close at the end of their scope", function()
    local keep
    do
      local ctx <close> = reshard.local_context(2)
      local l <close> = ctx:layout()
      local b <close> = reshard.buffer(4)
      keep = { ctx = ctx, l = l, b = b }
    end
    check.fails("RS_ERR_NULL_POINTER", keep.ctx.world_size, keep.ctx)
    check.fails("RS_ERR_NULL_POINTER", keep.l.num_tensors, keep.l)
    check.truthy(keep.b:closed(), "buffer closed")
    check.contains(tostring(keep.ctx), "closed", "tostring")
    check.contains(tostring(keep.l), "closed", "tostring")
  end)

  it("a plan collected during an execution ends it first", function()
    for _ = 1, 20 do
      local q = check.quickstart()
      q.fill(2)
      q.plan:execute_async()
      q = nil
      full_gc()
    end
    local q = check.quickstart()
    q.fill(3)
    q.plan:execute_async()
    q.plan:close() -- waits
    check.eq(q.verify(3), 0, "finished before the close returned")
  end)
end)
