-- SPDX-License-Identifier: Apache-2.0
-- reshard.buffer: C memory with typed element access (0-based indices).
local reshard = require "reshard"
local check = require "check"

describe("buffers", function()
  it("are userdata with a size, zeroed", function()
    local b <close> = reshard.buffer(24)
    check.eq(type(b), "userdata", "type")
    check.eq(#b, 24, "#buf")
    check.eq(b:size(), 24, "size")
    check.eq(b:count("f32"), 6, "count")
    check.eq(b:count("bf16"), 12, "count")
    check.truthy(reshard.is_buffer(b), "is_buffer")
    check.contains(tostring(b), "24 bytes", "tostring")
    for i = 0, 23 do check.eq(b:get("u8", i), 0, "zero") end
    check.eq(#reshard.buffer(0), 0, "empty")
  end)

  it("index elements from 0", function()
    local b <close> = reshard.buffer(4)
    b:set("u8", 0, 0x11)
    b:set("u8", 3, 0x44)
    check.eq(b:bytes(), "\x11\0\0\x44", "bytes")
    check.eq(b:get("u32", 0), 0x44000011, "little-endian u32")
    check.fails("RS_ERR_INVALID_ARGUMENT", b.get, b, "u8", 4)
    check.fails("RS_ERR_INVALID_ARGUMENT", b.get, b, "u8", -1)
    check.fails("RS_ERR_INVALID_ARGUMENT", b.get, b, "u64", 0) -- 8 > 4 bytes
  end)

  it("hold every integer dtype exactly, in range", function()
    local b <close> = reshard.buffer(64)
    local cases = {
      u8 = { 0, 255 }, i8 = { -128, 127 }, u16 = { 0, 65535 },
      i16 = { -32768, 32767 }, u32 = { 0, 4294967295 },
      i32 = { -2147483648, 2147483647 },
      i64 = { math.mininteger, math.maxinteger, (1 << 53) + 1, -((1 << 53) + 1) },
      u64 = { 0, math.maxinteger, -1 }, -- u64: the bit pattern
    }
    for dtype, values in pairs(cases) do
      for i, v in ipairs(values) do
        b:set(dtype, i, v)
        check.eq(b:get(dtype, i), v, dtype)
      end
      local lo, hi = values[1], values[2]
      if dtype ~= "u64" and dtype ~= "i64" then
        check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, dtype, 0, hi + 1)
        check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, dtype, 0, lo - 1)
      end
      check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, dtype, 0, 1.5)
      check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, dtype, 0, "1")
    end
    b:set("u64", 0, -1)
    check.eq(b:get("i64", 0), -1, "same bits")
    check.eq(string.format("%x", b:get("u64", 0)), "ffffffffffffffff", "hex")
    b:set("i32", 0, 7.0) -- an exact integer in a float is fine
    check.eq(b:get("i32", 0), 7, "7.0")
  end)

  it("hold floats, rounded to nearest even by the narrow dtypes", function()
    local b <close> = reshard.buffer(32)
    local cases = {
      f64 = { { 0.1, 0.1 }, { -1e300, -1e300 }, { 2 ^ 53 + 2, 2 ^ 53 + 2 } },
      f32 = { { 0.1, 0.100000001490116119384765625 }, { -2.5, -2.5 },
        { 16777217, 16777216.0 } },
      f16 = { { 0.1, 0.0999755859375 }, { 65504, 65504.0 }, { -1.5, -1.5 },
        { 2049, 2048.0 }, { 1e6, math.huge } },
      bf16 = { { 0.1, 0.10009765625 }, { 3.140625, 3.140625 }, { 257, 256.0 },
        { -1.5, -1.5 } },
    }
    for dtype, pairs_ in pairs(cases) do
      for i, c in ipairs(pairs_) do
        b:set(dtype, i, c[1])
        local got = b:get(dtype, i)
        check.eq(math.type(got), "float", dtype .. " is read as a float")
        check.eq(got, c[2] + 0.0, dtype .. " " .. tostring(c[1]))
      end
      b:set(dtype, 0, 3) -- integers are numbers too
      check.eq(b:get(dtype, 0), 3.0, dtype .. " 3")
      check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, dtype, 0, "3")
    end
    b:set("f32", 0, 0 / 0)
    local nan = b:get("f32", 0)
    check.truthy(nan ~= nan, "NaN")
  end)

  it("hold bools as booleans and f8 as bit patterns", function()
    local b <close> = reshard.buffer(4)
    b:set("bool", 0, true)
    b:set("bool", 1, false)
    b:set("bool", 2, 1)
    check.eq(b:get("bool", 0), true, "true")
    check.eq(b:get("bool", 1), false, "false")
    check.eq(b:get("bool", 2), true, "1")
    check.fails("RS_ERR_INVALID_ARGUMENT", b.set, b, "bool", 0, 2)
    b:set("f8_e4m3", 3, 0x38) -- 1.0 in e4m3
    check.eq(b:get("f8_e4m3", 3), 0x38, "f8 bits")
    check.eq(b:get("f8_e5m2", 3), 0x38, "f8 bits")
  end)

  it("take dtype names, torch names and codes", function()
    local b <close> = reshard.buffer(8)
    b:set("bfloat16", 0, 1.5)
    check.eq(b:get(reshard.dtype.bf16, 0), 1.5, "code")
    check.eq(b:get(10, 0), 1.5, "number")
    check.eq(reshard.dtype_size("float32"), 4, "dtype_size")
    check.eq(reshard.dtype_name(reshard.dtype.f8_e5m2), "f8_e5m2", "dtype_name")
    check.fails("RS_ERR_INVALID_ARGUMENT", b.get, b, "f128", 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", b.get, b, 99, 0)
  end)

  it("fill bytes, and copy strings in and out", function()
    local b <close> = reshard.buffer(6)
    b:fill(0xab)
    check.eq(b:get("u16", 1), 0xabab, "u16")
    check.eq(b:bytes(), string.rep("\xab", 6), "bytes")
    check.fails("RS_ERR_INVALID_ARGUMENT", b.fill, b, 256)
    local s = "hello\0world"
    local c <close> = reshard.buffer(s)
    check.eq(#c, #s, "size")
    check.eq(c:bytes(), s, "round trip")
  end)

  it("carry serialized layouts", function()
    local ctx <close> = reshard.local_context(2)
    local l <close> = ctx:layout():add_tensor("a", "f32", { 4, 4 })
    l:add_tensor("b", "bf16", { 8 })
    l:add_shard{ name = "a", rank = 1, offset = { 0, 0 }, extent = { 4, 4 } }
    local bytes <close> = l:serialize()
    check.truthy(#bytes > 0, "bytes")
    local m <close> = ctx:layout()
    m:deserialize(bytes)
    check.eq(m:num_tensors(), 2, "tensors")
    check.eq(m:num_shards(), 1, "shards")
    local n <close> = ctx:layout()
    n:deserialize(bytes:bytes()) -- a string works too
    check.eq(n:num_shards(), 1, "shards")
    local broken = bytes:bytes():sub(1, #bytes - 1)
    check.fails("RS_ERR_CORRUPT", n.deserialize, n, broken)
  end)

  it("close once, and refuse use afterwards", function()
    local b = reshard.buffer(8)
    b:close()
    b:close()
    check.truthy(b:closed(), "closed")
    check.contains(tostring(b), "closed", "tostring")
    check.fails("RS_ERR_NULL_POINTER", b.set, b, "u8", 0, 1)
    check.fails("RS_ERR_NULL_POINTER", b.fill, b, 0)
    check.fails("RS_ERR_NULL_POINTER", b.bytes, b)
  end)
end)
