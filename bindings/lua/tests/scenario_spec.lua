-- SPDX-License-Identifier: Apache-2.0
-- The shared scenario (examples/scenario.lua): trainer TP2 x DP2 ->
-- inference TP4 with fused buffers, two executions, every element checked.
local check = require "check"

describe("scenario", function()
  it("moves a small model from TP2xDP2 to TP4, twice, bit-exact", function()
    local run = require "scenario"
    local r = run{ quiet = true }
    check.eq(#r.runs, 2, "executions")
    for i, one in ipairs(r.runs) do
      check.eq(one.bad, 0, "wrong elements in execution " .. i)
      check.eq(one.checked, 4 * 18688, "elements checked")
    end
    local s = r.stats
    check.truthy(s.bytes_sent_inter > 0, "bytes across domains")
    check.truthy(s.bytes_sent_intra > 0, "norms forwarded inside a domain")
    check.eq(s.bytes_sent_inter + s.bytes_sent_intra + s.bytes_local,
      r.total_bytes, "every destination byte arrives once")
    check.eq(s.bytes_recv_inter, s.bytes_sent_inter, "received = sent")
  end)
end)
