-- SPDX-License-Identifier: Apache-2.0
-- execute_async, test, wait and abort.
local reshard = require "reshard"
local check = require "check"

describe("asynchronous execution", function()
  it("runs to the end through test()", function()
    local q = check.quickstart()
    q.fill(5)
    q.plan:execute_async()
    local polls = 0
    while not q.plan:test() do polls = polls + 1 end
    check.eq(q.verify(5), 0, "wrong elements")
    check.eq(q.plan:test(), true, "done stays done")
    q.plan:wait() -- nothing in flight: the status of the last one
    q.fill(6)
    q.plan:execute_async():wait()
    check.eq(q.verify(6), 0, "wrong elements")
    q.plan:close()
  end)

  it("allows one execution in flight per context", function()
    local q = check.quickstart()
    q.fill(1)
    q.plan:execute_async()
    -- refused while the first is in flight (unless it already ended)
    local ok, err = pcall(q.plan.execute_async, q.plan)
    if not ok then
      check.truthy(reshard.is_error(err), "a reshard.Error")
      check.eq(err.name, "RS_ERR_INVALID_ARGUMENT", "name")
      check.contains(err.message, "flight", "message")
    end
    q.plan:wait()
    check.eq(q.verify(1), 0, "wrong elements")
    q.plan:close()
  end)

  it("refuses a queue on a host context", function()
    local q = check.quickstart()
    q.fill(1)
    check.fails("RS_ERR_INVALID_ARGUMENT", q.plan.execute_async, q.plan, 4096)
    q.plan:execute()
    q.plan:close()
  end)

  it("abort() ends the context's executions", function()
    local q = check.quickstart()
    q.fill(1)
    q.plan:execute()
    q.ctx:abort()
    local err = check.fails("RS_ERR_TRANSPORT", q.plan.execute, q.plan)
    check.truthy(#err.message > 0, "a reason")
    check.fails("RS_ERR_TRANSPORT", function()
      q.plan:execute_async()
      q.plan:wait()
    end)
    q.plan:close()
    q.ctx:close()
  end)
end)
