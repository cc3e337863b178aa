-- SPDX-License-Identifier: Apache-2.0
-- Assertions shared by the spec files; they raise plain errors, so they
-- work under busted and under tests/run.lua alike.
local reshard = require "reshard"

local check = {}

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if math.type(v) then return string.format("%s (%s)", tostring(v), math.type(v)) end
  return tostring(v)
end

--- a == b, and for numbers the same subtype (an integer is not a float).
function check.eq(a, b, what)
  if a ~= b or math.type(a) ~= math.type(b) then
    error(string.format("%s: got %s, expected %s", what or "value", show(a),
      show(b)), 2)
  end
end

function check.truthy(v, what)
  if not v then error((what or "condition") .. " is false", 2) end
end

function check.integer(v, what)
  if math.type(v) ~= "integer" then
    error(string.format("%s: %s is not an integer", what or "value", show(v)), 2)
  end
end

function check.contains(s, part, what)
  if type(s) ~= "string" or not s:find(part, 1, true) then
    error(string.format("%s: %s does not contain %q", what or "text", show(s),
      part), 2)
  end
end

--- Calls f(...) and returns the error it raised; fails when it raised none.
function check.raises(f, ...)
  local ok, err = pcall(f, ...)
  if ok then error("expected an error, got none", 2) end
  return err
end

--- Calls f(...), expects a reshard.Error named name (status, name and
-- message filled in), returns it.
function check.fails(name, f, ...)
  local ok, err = pcall(f, ...)
  if ok then error("expected " .. name .. ", got no error", 2) end
  if not reshard.is_error(err) then
    error("expected a reshard.Error " .. name .. ", got " .. show(err), 2)
  end
  if err.name ~= name then
    error(string.format("expected %s, got %s", name, tostring(err)), 2)
  end
  check.integer(err.status, "status")
  check.eq(err.status, reshard.status[name], "status of " .. name)
  if type(err.message) ~= "string" or err.message == "" then
    error(name .. " without a message", 2)
  end
  return err
end

--- The README's quickstart: a 6x9 f32 tensor from ranks {0, 1} (rows
-- split) to ranks {2, 3, 4} (columns split), in one process. Returns a
-- table with ctx, src, dst, plan, the bound buffers (ins, outs, indexed by
-- rank), fill(gen) and verify(gen) -> number of wrong elements.
function check.quickstart()
  local ROWS, COLS = 6, 9
  local q = {}
  q.ctx = reshard.local_context(5)
  q.ctx:set_domain_size(2)
  local train = reshard.mesh({ 2 }, { 0, 1 })
  local infer = reshard.mesh({ 3 }, 2)
  q.src = q.ctx:layout():add_tensor("w", "f32", { ROWS, COLS })
  q.dst = q.ctx:layout():add_tensor("w", "f32", { ROWS, COLS })
  q.src:add_dtensor("w", train, { reshard.Shard(0) }, 0, 0)
  q.dst:add_dtensor("w", infer, { reshard.Shard(1) }, 0, 0)
  q.plan = q.src:plan(q.dst)
  q.ins, q.outs = {}, {}
  for r = 0, 1 do
    q.ins[r] = reshard.buffer(ROWS // 2 * COLS * 4)
    q.plan:bind("src", r, 0, q.ins[r])
  end
  for r = 2, 4 do
    q.outs[r] = reshard.buffer(ROWS * COLS // 3 * 4)
    q.plan:bind("dst", r, 0, q.outs[r])
  end
  function q.fill(gen)
    for r = 0, 1 do
      for i = 0, ROWS // 2 - 1 do
        for j = 0, COLS - 1 do
          q.ins[r]:set("f32", i * COLS + j, (r * 3 + i) * 100 + j + gen * 1000)
        end
      end
    end
  end
  function q.verify(gen)
    local bad = 0
    for r = 2, 4 do
      for i = 0, ROWS - 1 do
        for j = 0, COLS // 3 - 1 do
          local want = i * 100 + (r - 2) * 3 + j + gen * 1000
          if q.outs[r]:get("f32", i * (COLS // 3) + j) ~= want then
            bad = bad + 1
          end
        end
      end
    end
    return bad
  end
  return q
end

return check
