-- SPDX-License-Identifier: Apache-2.0
-- The library's log level and subsystems from Lua.
local reshard = require "reshard"
local check = require "check"

describe("log", function()
  it("sets and reads the level and subsystems", function()
    local before, subs = reshard.log_level()
    reshard.set_log_level("info", { "plan", "exec" })
    local level, now = reshard.log_level()
    check.eq(level, "info", "level")
    check.truthy(now.plan and now.exec and not now.layout, "subsystems")
    local names = {}
    for k in pairs(subs) do names[#names + 1] = k end
    reshard.set_log_level(before, names)
  end)

  it("refuses what is not a level or a subsystem", function()
    local ok, err = pcall(reshard.set_log_level, "loud")
    check.eq(ok, false, "level")
    check.contains(tostring(err), "loud", "message")
    ok, err = pcall(reshard.set_log_level, "info", { "planner" })
    check.eq(ok, false, "subsystem")
    check.contains(tostring(err), "planner", "message")
  end)
end)
