-- SPDX-License-Identifier: Apache-2.0
-- A small runner for the spec files where busted is not installed: it
-- gives them describe/it (and before_each/after_each), runs every test,
-- prints TAP lines and a summary, and exits nonzero when one failed.
--   lua5.4 run.lua a_spec.lua b_spec.lua ...
local tests, stack = {}, {}
local hooks = { before = {}, after = {} }

local function full(name)
  local parts = {}
  for _, d in ipairs(stack) do
    if d.name then parts[#parts + 1] = d.name end
  end
  parts[#parts + 1] = name
  return table.concat(parts, " ")
end

function describe(name, body)
  stack[#stack + 1] = { name = name, before = {}, after = {} }
  body()
  table.remove(stack)
end

function it(name, body)
  local before, after = {}, {}
  for _, d in ipairs(stack) do
    for _, f in ipairs(d.before) do before[#before + 1] = f end
    for _, f in ipairs(d.after) do after[#after + 1] = f end
  end
  tests[#tests + 1] = { name = full(name), body = body, before = before,
    after = after }
end

function before_each(f) table.insert(stack[#stack].before, f) end
function after_each(f) table.insert(stack[#stack].after, f) end
function pending(name) tests[#tests + 1] = { name = full(name), pending = true } end

for _, file in ipairs(arg) do
  local chunk, err = loadfile(file)
  if not chunk then
    io.stderr:write(err, "\n")
    os.exit(2)
  end
  stack = { { before = {}, after = {} } } -- the file's own level
  chunk()
end

local function traceback(e)
  return debug.traceback(tostring(e), 2)
end

print("1.." .. #tests)
local passed, failed, skipped = 0, 0, 0
for i, t in ipairs(tests) do
  if t.pending then
    skipped = skipped + 1
    print(("ok %d - %s # SKIP pending"):format(i, t.name))
  else
    local ok, err = true, nil
    for _, f in ipairs(t.before) do
      if ok then ok, err = xpcall(f, traceback) end
    end
    if ok then ok, err = xpcall(t.body, traceback) end
    for _, f in ipairs(t.after) do
      local ok2, err2 = xpcall(f, traceback)
      if ok and not ok2 then ok, err = ok2, err2 end
    end
    if ok then
      passed = passed + 1
      print(("ok %d - %s"):format(i, t.name))
    else
      failed = failed + 1
      print(("not ok %d - %s"):format(i, t.name))
      for line in tostring(err):gmatch("[^\n]+") do print("# " .. line) end
    end
  end
end
collectgarbage("collect")
print(("# %d passed, %d failed, %d pending"):format(passed, failed, skipped))
os.exit(failed == 0 and 0 or 1, true) -- true: close the state, run every __gc
