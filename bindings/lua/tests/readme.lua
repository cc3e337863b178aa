-- SPDX-License-Identifier: Apache-2.0
-- Runs the first ```lua block of a Markdown file (bindings/lua/README.md),
-- so that the README's example is checked as it stands.
local path = assert(arg[1], "usage: readme.lua README.md")
local text = assert(io.open(path)):read("a")
local block = text:match("```lua\n(.-)\n```")
assert(block, "no ```lua block in " .. path)
local chunk = assert(load(block, "=README.md example"))
chunk()
