-- SPDX-License-Identifier: Apache-2.0
-- Runs every ```lua block of a Markdown file (bindings/lua/README.md), in
-- order, each as a chunk of its own, so that the README's examples are
-- checked as they stand.
local path = assert(arg[1], "usage: readme.lua README.md")
local text = assert(io.open(path)):read("a")
local n = 0
for block in text:gmatch("```lua\n(.-)\n```") do
  n = n + 1
  local chunk = assert(load(block, "=README.md example " .. n))
  chunk()
end
assert(n > 0, "no ```lua block in " .. path)
