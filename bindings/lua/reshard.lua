-- SPDX-License-Identifier: Apache-2.0
--- reshard: libreshard for Lua 5.4.
--
-- `local reshard = require "reshard"` gives contexts, layouts, plans and
-- buffers as Lua objects over the SWIG module `reshard_swig` (made from
-- swig/reshard.i, the interface every language shares).
--
-- Conventions
-- * Everything the library counts from 0 stays 0-based: ranks, mesh
--   coordinates, tensor dimensions (Shard(0) is the first), offsets,
--   buffer numbers, byte offsets, and element indices of buffer:get/set.
--   Lua tables of integers (shapes, offsets, ranks) are ordinary 1-based
--   sequences.
-- * Integers are exact Lua integers everywhere (shapes, offsets, figures,
--   element values): a value that is not an exact integer is refused,
--   never rounded. Write big constants as integers ((1 << 53) + 1, not
--   2^53 + 1, which is a float).
-- * Failures raise a reshard.Error (a table with status, name and message,
--   and a __tostring); pcall returns it. Arguments this layer refuses
--   raise one too (status RS_ERR_INVALID_ARGUMENT, or RS_ERR_NULL_POINTER
--   for an object used after close()).
-- * Every object has :close() (also the __close of `local x <close>`) and
--   a __gc; close twice, close in any order, or leave it to the collector:
--   nothing is freed twice, and an object keeps alive what it needs (a
--   layout its context, a plan its context and every buffer bound to it).
local C = require "reshard_swig"

local M = {}
M.swig = C
M._VERSION = C.rsw_version()

local mtype = math.type
local tointeger = math.tointeger
local format = string.format

-- One result for calls made by the program, another for finalizers, which
-- the collector may run between a call and the reading of its result.
local R = C.rsw_result_new()
local GCR = C.rsw_result_new()

---------------------------------------------------------------------------
-- Errors
---------------------------------------------------------------------------

--- reshard.Error: the error object every failure raises.
local Error = {}
Error.__index = Error
Error.__name = "reshard.Error"
function Error.__tostring(e)
  if e.message ~= nil and e.message ~= "" then
    return format("%s (%d): %s", e.name, e.status, e.message)
  end
  return format("%s (%d)", e.name, e.status)
end
M.Error = Error

local function new_error(status, name, message)
  return setmetatable({ status = status, name = name, message = message },
    Error)
end

--- True when v is a reshard.Error.
function M.is_error(v)
  return getmetatable(v) == Error
end

local function raise(r)
  error(new_error(r.status, r.name, r.message), 0)
end

local function argerror(message)
  error(new_error(C.RS_ERR_INVALID_ARGUMENT, "RS_ERR_INVALID_ARGUMENT",
    message), 0)
end

local function closederror(what)
  error(new_error(C.RS_ERR_NULL_POINTER, "RS_ERR_NULL_POINTER",
    what .. " used after close()"), 0)
end

-- The handle (obj._h) of an object of class `name`, raising on a closed
-- one.
local function handle_of(name)
  return function(self)
    local h = self._h
    if h == nil then closederror(name) end
    return h
  end
end

-- close(), __close and __gc for cls: destroy(h) frees the handle once.
local function closable(cls, destroy)
  function cls.close(self)
    local h = self._h
    if h ~= nil then
      self._h = nil
      destroy(h)
    end
  end
  cls.__close = cls.close
  cls.__gc = cls.close
end

-- Raise the error recorded in r, if any.
local function check(r)
  if r.status ~= 0 then raise(r) end
end

---------------------------------------------------------------------------
-- Integers
---------------------------------------------------------------------------

local function toint(v, what)
  if mtype(v) == "integer" then return v end
  local i = mtype(v) == "float" and tointeger(v) or nil
  if i == nil then
    argerror(format("%s must be an integer, not %s", what,
      v == nil and "nil" or tostring(v)))
  end
  return i
end

local INT_MIN, INT_MAX = -2147483648, 2147483647
local function toint32(v, what)
  local i = toint(v, what)
  if i < INT_MIN or i > INT_MAX then
    argerror(format("%s (%d) does not fit an int", what, i))
  end
  return i
end

-- A table of integers checked element by element: a new Lua table.
local function ints(t, what)
  if type(t) ~= "table" then
    argerror(format("%s must be a table of integers, not %s", what,
      type(t)))
  end
  local vals = {}
  for i = 1, #t do vals[i] = toint(t[i], format("%s[%d]", what, i)) end
  return vals
end

-- An rsw_ints holding checked integers (from ints()); free it with
-- free_ints. Made only once every argument is checked, so that an
-- argument error cannot leak one.
local function vec(vals)
  local v = C.rsw_ints_new()
  for i = 1, #vals do C.rsw_ints_push(v, vals[i]) end
  return v
end

local function ints_table(v)
  local t = {}
  for i = 0, C.rsw_ints_len(v) - 1 do t[i + 1] = C.rsw_ints_get(v, i) end
  return t
end

local function free_ints(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if v ~= nil then C.rsw_ints_free(v) end
  end
end

local function copy(t)
  local c = {}
  for i = 1, #t do c[i] = t[i] end
  return c
end

---------------------------------------------------------------------------
-- Constants
---------------------------------------------------------------------------

M.ALL_RANKS = C.RS_ALL_RANKS
M.SRC = C.RS_SIDE_SRC
M.DST = C.RS_SIDE_DST

--- Status codes by name: reshard.status.RS_ERR_OUT_OF_BOUNDS == 104.
M.status = {}
for k, v in pairs(C) do
  if type(k) == "string" and (k == "RS_OK" or k:match("^RS_ERR_")) then
    M.status[k] = v
  end
end

--- dtype codes by name ("f32", "bf16", ...; torch names too).
local DTYPE = {
  u8 = C.RS_DTYPE_U8, i8 = C.RS_DTYPE_I8, u16 = C.RS_DTYPE_U16,
  i16 = C.RS_DTYPE_I16, u32 = C.RS_DTYPE_U32, i32 = C.RS_DTYPE_I32,
  u64 = C.RS_DTYPE_U64, i64 = C.RS_DTYPE_I64, f16 = C.RS_DTYPE_F16,
  bf16 = C.RS_DTYPE_BF16, f32 = C.RS_DTYPE_F32, f64 = C.RS_DTYPE_F64,
  f8_e4m3 = C.RS_DTYPE_F8_E4M3, f8_e5m2 = C.RS_DTYPE_F8_E5M2,
  bool = C.RS_DTYPE_BOOL,
}
local ALIASES = {
  uint8 = "u8", int8 = "i8", uint16 = "u16", int16 = "i16", uint32 = "u32",
  int32 = "i32", uint64 = "u64", int64 = "i64", float16 = "f16",
  half = "f16", bfloat16 = "bf16", float32 = "f32", float = "f32",
  float64 = "f64", double = "f64", float8_e4m3fn = "f8_e4m3",
  float8_e5m2 = "f8_e5m2",
}
M.dtype = {}
for k, v in pairs(DTYPE) do M.dtype[k] = v end
for k, v in pairs(ALIASES) do M.dtype[k] = DTYPE[v] end

-- For buffer element access: code -> {kind, lo, hi}.
local ELEMENT = {
  [C.RS_DTYPE_U8] = { "int", 0, 255 },
  [C.RS_DTYPE_I8] = { "int", -128, 127 },
  [C.RS_DTYPE_U16] = { "int", 0, 65535 },
  [C.RS_DTYPE_I16] = { "int", -32768, 32767 },
  [C.RS_DTYPE_U32] = { "int", 0, 4294967295 },
  [C.RS_DTYPE_I32] = { "int", INT_MIN, INT_MAX },
  [C.RS_DTYPE_U64] = { "int", math.mininteger, math.maxinteger },
  [C.RS_DTYPE_I64] = { "int", math.mininteger, math.maxinteger },
  [C.RS_DTYPE_F16] = { "float" },
  [C.RS_DTYPE_BF16] = { "float" },
  [C.RS_DTYPE_F32] = { "float" },
  [C.RS_DTYPE_F64] = { "float" },
  [C.RS_DTYPE_F8_E4M3] = { "int", 0, 255 }, -- the bit pattern
  [C.RS_DTYPE_F8_E5M2] = { "int", 0, 255 },
  [C.RS_DTYPE_BOOL] = { "bool", 0, 1 },
}

local function dtype_code(d)
  if type(d) == "string" then
    local code = M.dtype[d]
    if code then return code end
    argerror(format("unknown dtype %q", d))
  end
  local code = mtype(d) == "integer" and d or tointeger(d)
  if code == nil or ELEMENT[code] == nil then
    argerror(format("unknown dtype %s", tostring(d)))
  end
  return code
end
M.dtype_code = dtype_code

--- Size of one element of dtype d in bytes.
function M.dtype_size(d) return C.rsw_dtype_size(dtype_code(d)) end
--- Lower-case name of dtype d ("bf16").
function M.dtype_name(d) return C.rsw_dtype_name(dtype_code(d)) end
--- "MAJOR.MINOR.PATCH" of the loaded libreshard.
function M.version() return C.rsw_version() end
--- Name of a status code ("RS_ERR_OUT_OF_BOUNDS").
function M.status_name(s) return C.rsw_status_name(toint32(s, "status")) end

--- The library's log levels and subsystems (RESHARD_DEBUG,
--- RESHARD_DEBUG_SUBSYS); lines go to RESHARD_DEBUG_FILE or stderr. Since 0.6.
M.LOG_LEVELS = { none = 0, warn = 1, info = 2, trace = 3 }
M.LOG_SUBSYSTEMS = { context = 0x01, layout = 0x02, plan = 0x04, exec = 0x08,
  transport = 0x10 }

--- Log at level ("none", "warn", "info", "trace") for the subsystems (a
--- list of names; nil: all) in the whole process, over the environment.
function M.set_log_level(level, subsystems)
  local code = M.LOG_LEVELS[level]
  if code == nil then
    argerror(format("log level %s is none, warn, info or trace",
      tostring(level)))
  end
  local mask = 0xffffffff
  if subsystems ~= nil then
    mask = 0
    for _, name in ipairs(subsystems) do
      local bit = M.LOG_SUBSYSTEMS[name]
      if bit == nil then
        argerror(format("log subsystem %s is none of context, layout, plan, "
          .. "exec, transport", tostring(name)))
      end
      mask = mask | bit
    end
  end
  C.rsw_log_set_level(R, code, mask)
  check(R)
end

--- The level now in force ("info") and the set of its subsystems
--- ({ plan = true, ... }).
function M.log_level()
  local code, mask = C.rsw_log_level(), C.rsw_log_subsystems()
  local name, subs = nil, {}
  for k, v in pairs(M.LOG_LEVELS) do if v == code then name = k end end
  for k, v in pairs(M.LOG_SUBSYSTEMS) do
    if mask & v ~= 0 then subs[k] = true end
  end
  return name, subs
end

local PARAM = {
  staging_bytes = C.RS_PARAM_STAGING_BYTES,
  slice_bytes = C.RS_PARAM_SLICE_BYTES,
  copy_threads = C.RS_PARAM_COPY_THREADS,
  progress_thread = C.RS_PARAM_PROGRESS_THREAD,
  timeout_ms = C.RS_PARAM_TIMEOUT_MS,
  integrity = C.RS_PARAM_INTEGRITY,
  plan_part = C.RS_PARAM_PLAN_PART,
  plan_boxes = C.RS_PARAM_PLAN_BOXES,
  rounds = C.RS_PARAM_ROUNDS,
}
local function param_code(p)
  if type(p) == "string" then
    local c = PARAM[p]
    if not c then argerror(format("unknown parameter %q", p)) end
    return c
  end
  return toint32(p, "parameter")
end

local STATS = {
  { "bytes_sent_intra", C.RS_STAT_BYTES_SENT_INTRA },
  { "bytes_sent_inter", C.RS_STAT_BYTES_SENT_INTER },
  { "bytes_recv_intra", C.RS_STAT_BYTES_RECV_INTRA },
  { "bytes_recv_inter", C.RS_STAT_BYTES_RECV_INTER },
  { "bytes_local", C.RS_STAT_BYTES_LOCAL },
  { "messages_sent", C.RS_STAT_MESSAGES_SENT },
  { "messages_recv", C.RS_STAT_MESSAGES_RECV },
  { "rounds", C.RS_STAT_ROUNDS },
  { "staging_bytes", C.RS_STAT_STAGING_BYTES },
  { "moves", C.RS_STAT_MOVES },
  { "converted_sending", C.RS_STAT_CONVERTED_SENDING },
  { "converted_receiving", C.RS_STAT_CONVERTED_RECEIVING },
  { "bytes_copied_from_relay", C.RS_STAT_BYTES_COPIED_FROM_RELAY },
  { "bytes_packed", C.RS_STAT_BYTES_PACKED },
  { "bytes_unpacked", C.RS_STAT_BYTES_UNPACKED },
}
local STAT = {}
for _, s in ipairs(STATS) do STAT[s[1]] = s[2] end

local function side_code(s)
  if s == "src" or s == "source" then return C.RS_SIDE_SRC end
  if s == "dst" or s == "destination" then return C.RS_SIDE_DST end
  if s == C.RS_SIDE_SRC or s == C.RS_SIDE_DST then return tointeger(s) end
  argerror(format("side must be \"src\" or \"dst\", not %s", tostring(s)))
end

local MEMORY = { host = C.RS_MEMORY_HOST, cuda = C.RS_MEMORY_CUDA }

--- Scale rules of block-scaled fp8 by name (layout:set_block_scales):
-- reshard.scale.amax (scale = amax / 448), reshard.scale.ue8m0 (a power
-- of two, 2^ceil(log2(amax / 448))). Since 0.4.
M.scale = { amax = C.RS_SCALE_AMAX, ue8m0 = C.RS_SCALE_UE8M0 }
--- Values of the "rounds" setting (rs_rounds).
M.rounds = { packed = C.RS_ROUNDS_PACKED,
             by_domain_pair = C.RS_ROUNDS_BY_DOMAIN_PAIR }
local function scale_rule_code(rule)
  if type(rule) == "string" then
    local c = M.scale[rule:lower()]
    if not c then
      argerror(format("unknown scale rule %q (amax or ue8m0)", rule))
    end
    return c
  end
  return toint32(rule, "scale rule")
end

---------------------------------------------------------------------------
-- Buffers: C memory (rsw_buffer) as a userdata with element access
---------------------------------------------------------------------------

-- A buffer is the SWIG userdata of its rsw_buffer itself, given a
-- metatable of its own. Its state lives here, keyed weakly by it:
-- size, pins (plans it is bound to), closed (close() or __gc asked for
-- its end), freed (its memory went back).
local Buffer = {}
local buffer_methods = {}
Buffer.__index = buffer_methods
Buffer.__name = "reshard.buffer"
local bstate = setmetatable({}, { __mode = "k" })

local function free_buffer(b, st)
  if st.closed and st.pins == 0 and not st.freed then
    st.freed = true
    C.rsw_buffer_free(b)
  end
end

local function adopt_buffer(ud, size)
  debug.setmetatable(ud, Buffer)
  bstate[ud] = { size = size, pins = 0, closed = false, freed = false }
  return ud
end

local function buffer_state(b)
  local st = bstate[b]
  if st == nil then argerror("not a reshard.buffer: " .. tostring(b)) end
  if st.closed then closederror("reshard.buffer") end
  return st
end

--- True when v is a reshard.buffer.
function M.is_buffer(v)
  return bstate[v] ~= nil
end

--- reshard.buffer(bytes) -> a zeroed buffer of that many bytes, 64-byte
-- aligned; reshard.buffer(string) -> a buffer holding the string's bytes.
function M.buffer(n)
  local s
  if type(n) == "string" then
    s, n = n, #n
  end
  n = toint(n, "buffer size")
  if n < 0 then argerror(format("buffer size %d is negative", n)) end
  local ud = n <= math.maxinteger - 64 and C.rsw_buffer_new(n) or nil
  if ud == nil then
    error(new_error(C.RS_ERR_NO_MEMORY, "RS_ERR_NO_MEMORY",
      format("no memory for a buffer of %d bytes", n)), 0)
  end
  local b = adopt_buffer(ud, n)
  if s then
    for i = 1, n do C.rsw_buffer_set_int(R, b, C.RS_DTYPE_U8, i - 1, s:byte(i)) end
  end
  return b
end

--- buf:get(dtype, i): element i (0-based) of an array of dtype laid over
-- the buffer: an integer (exact; u64 as its bit pattern, f8 types as their
-- bit pattern), a float (f16, bf16, f32, f64; widened exactly) or a
-- boolean (bool).
function buffer_methods.get(b, dtype, i)
  buffer_state(b)
  local code = dtype_code(dtype)
  local kind = ELEMENT[code][1]
  if mtype(i) ~= "integer" then i = toint(i, "element index") end
  if kind == "float" then
    C.rsw_buffer_get_float(R, b, code, i)
    check(R)
    return R.real
  end
  C.rsw_buffer_get_int(R, b, code, i)
  check(R)
  if kind == "bool" then return R.value ~= 0 end
  return R.value
end

--- buf:set(dtype, i, v): store v as element i (0-based). Integer dtypes
-- take exact integers in their range (u64: any Lua integer, as its bit
-- pattern); float dtypes any number (rounded to nearest even); bool a
-- boolean (or 0/1).
function buffer_methods.set(b, dtype, i, v)
  buffer_state(b)
  local code = dtype_code(dtype)
  local e = ELEMENT[code]
  if mtype(i) ~= "integer" then i = toint(i, "element index") end
  if e[1] == "float" then
    if type(v) ~= "number" then
      argerror(format("a %s element must be a number, not %s",
        C.rsw_dtype_name(code), tostring(v)))
    end
    C.rsw_buffer_set_float(R, b, code, i, v + 0.0)
  else
    if e[1] == "bool" and type(v) == "boolean" then
      v = v and 1 or 0
    elseif mtype(v) ~= "integer" then
      v = toint(v, "a " .. C.rsw_dtype_name(code) .. " element")
    end
    if v < e[2] or v > e[3] then
      argerror(format("%d does not fit a %s element", v,
        C.rsw_dtype_name(code)))
    end
    C.rsw_buffer_set_int(R, b, code, i, v)
  end
  check(R)
end

--- buf:fill(byte): every byte set to byte (0..255).
function buffer_methods.fill(b, byte)
  buffer_state(b)
  byte = toint(byte, "fill byte")
  if byte < 0 or byte > 255 then
    argerror(format("fill byte %d outside 0..255", byte))
  end
  C.rsw_buffer_fill(b, byte)
end

--- buf:size(): its size in bytes (also #buf).
function buffer_methods.size(b) return buffer_state(b).size end

--- buf:count(dtype): how many dtype elements fit in it.
function buffer_methods.count(b, dtype)
  return buffer_state(b).size // C.rsw_dtype_size(dtype_code(dtype))
end

--- buf:address(): the address of its first byte, as an integer.
function buffer_methods.address(b)
  buffer_state(b)
  return C.rsw_buffer_address(b)
end

--- buf:bytes(): its contents as a Lua string.
function buffer_methods.bytes(b)
  local n = buffer_state(b).size
  local parts, chunk = {}, {}
  for i = 0, n - 1 do
    C.rsw_buffer_get_int(R, b, C.RS_DTYPE_U8, i)
    chunk[#chunk + 1] = R.value
    if #chunk == 4096 then
      parts[#parts + 1] = string.char(table.unpack(chunk))
      chunk = {}
    end
  end
  if #chunk > 0 then parts[#parts + 1] = string.char(table.unpack(chunk)) end
  return table.concat(parts)
end

--- buf:closed(): true once closed.
function buffer_methods.closed(b)
  local st = bstate[b]
  return st == nil or st.closed
end

--- buf:close(): no more access; its memory goes back at once, or when
-- the last plan it is bound to is closed (or collected).
function buffer_methods.close(b)
  local st = bstate[b]
  if st == nil or st.closed then return end
  st.closed = true
  free_buffer(b, st)
end

Buffer.__len = function(b) return buffer_state(b).size end
Buffer.__close = buffer_methods.close
Buffer.__gc = buffer_methods.close
Buffer.__tostring = function(b)
  local st = bstate[b]
  if st == nil or st.closed then return "reshard.buffer (closed)" end
  return format("reshard.buffer(%d bytes)", st.size)
end

---------------------------------------------------------------------------
-- Placements and meshes
---------------------------------------------------------------------------

local Placement = {}
Placement.__index = Placement
Placement.__name = "reshard.Placement"
Placement.__tostring = function(p)
  if p.kind == "shard" then return format("Shard(%d)", p.dim) end
  if p.kind == "strided" then
    return format("StridedShard(%d, %d)", p.dim, p.split_factor)
  end
  return "Replicate()"
end
Placement.__eq = function(a, b)
  return a.kind == b.kind and a.dim == b.dim and
    a.split_factor == b.split_factor
end

--- reshard.Shard(d): the mesh axis splits tensor dimension d (0-based).
function M.Shard(d)
  d = toint(d, "Shard dimension")
  if d < 0 then argerror(format("Shard(%d): a dimension is >= 0", d)) end
  return setmetatable({ kind = "shard", dim = d }, Placement)
end

--- reshard.Replicate(): every rank along the mesh axis holds the same.
function M.Replicate()
  return setmetatable({ kind = "replicate" }, Placement)
end

--- reshard.StridedShard(d, f): torch's _StridedShard(d, split_factor=f),
-- what FSDP2 over TP stores: dimension d is cut into f pieces, each split
-- over the mesh axis (torch.chunk), and a coordinate holds its chunk of
-- every piece, so a rank's shard may be several boxes. f == 1 is
-- Shard(d). Since 0.6.
function M.StridedShard(d, f)
  d = toint(d, "StridedShard dimension")
  f = toint32(f, "StridedShard split factor")
  if d < 0 then
    argerror(format("StridedShard(%d, %d): a dimension is >= 0", d, f))
  end
  if f < 1 then
    argerror(format("StridedShard(%d, %d): a split factor is >= 1", d, f))
  end
  if f == 1 then return M.Shard(d) end
  return setmetatable({ kind = "strided", dim = d, split_factor = f },
    Placement)
end

--- reshard.strided: the orders a tensor with StridedShard placements may
-- have been made in (rs_strided_order): auto (either, where they agree;
-- refused where they do not), distribute (distribute_tensor's), fsdp2
-- (FSDP2 over TP's). Since 0.6.
M.strided = { auto = C.RS_STRIDED_AUTO, distribute = C.RS_STRIDED_DISTRIBUTE,
  fsdp2 = C.RS_STRIDED_FSDP2 }

local function strided_order_code(order)
  if order == nil then return C.RS_STRIDED_AUTO end
  if type(order) == "string" then
    local c = M.strided[order]
    if c == nil then
      argerror(format("strided order %q is none of auto, distribute, fsdp2",
        order))
    end
    return c
  end
  return toint32(order, "strided order")
end

-- The C placement code of p (a dim or RS_REPLICATE) and its split factor.
local function placement_code(p, i)
  if getmetatable(p) == Placement then
    if p.kind == "replicate" then return C.RS_REPLICATE, 1 end
    return p.dim, p.split_factor or 1
  end
  if p == "replicate" then return C.RS_REPLICATE, 1 end
  return toint32(p, format("placements[%d]", i)), 1
end

-- Codes, split factors, and whether a placement is strided.
local function placement_codes(ps)
  if type(ps) ~= "table" then argerror("placements must be a table") end
  local out, split, strided = {}, {}, false
  for i = 1, #ps do
    out[i], split[i] = placement_code(ps[i], i)
    strided = strided or split[i] ~= 1
  end
  return out, split, strided
end

local Mesh = {}
Mesh.__index = Mesh
Mesh.__name = "reshard.Mesh"

--- reshard.mesh(shape, ranks, names): a device mesh of shape (a table,
-- or one integer) whose ranks, in row-major mesh order, are `ranks` (a
-- table; or an integer r: the ranks r, r+1, ...; or nil: from 0). names
-- (optional) names the axes, as {"dp", "tp"}.
-- Also reshard.mesh{shape = ..., ranks = ..., names = ...}.
function M.mesh(shape, ranks, names)
  if type(shape) == "table" and shape.shape ~= nil then
    shape, ranks, names = shape.shape, shape.ranks, shape.names
  end
  if mtype(shape) ~= nil then shape = { shape } end
  if type(shape) ~= "table" or #shape == 0 then
    argerror("a mesh shape is a table of axis sizes")
  end
  local n = 1
  local s = {}
  for i = 1, #shape do
    s[i] = toint(shape[i], format("mesh shape[%d]", i))
    if s[i] < 1 then argerror(format("mesh axis %d has size %d", i - 1, s[i])) end
    n = n * s[i]
  end
  local r = {}
  if ranks == nil or mtype(ranks) ~= nil then
    local first = ranks == nil and 0 or toint(ranks, "first rank")
    for i = 1, n do r[i] = first + i - 1 end
  else
    if type(ranks) ~= "table" or #ranks ~= n then
      argerror(format("a mesh of %d ranks needs %d ranks, got %s", n, n,
        type(ranks) == "table" and tostring(#ranks) or type(ranks)))
    end
    for i = 1, n do r[i] = toint(ranks[i], format("mesh ranks[%d]", i)) end
  end
  local m = setmetatable({ shape = s, ranks = r, names = names, _index = {} },
    Mesh)
  for i, rank in ipairs(r) do m._index[rank] = i - 1 end
  if names ~= nil then
    if type(names) ~= "table" or #names ~= #s then
      argerror("a mesh needs one name per axis")
    end
    m._axis = {}
    for i, name in ipairs(names) do m._axis[name] = i end
  end
  return m
end

Mesh.__tostring = function(m)
  local axes = {}
  for i, size in ipairs(m.shape) do
    axes[i] = m.names and format("%s=%d", m.names[i], size) or tostring(size)
  end
  return format("reshard.Mesh(%s; ranks %d..%d)", table.concat(axes, "x"),
    m.ranks[1], m.ranks[#m.ranks])
end

--- mesh:size(): the number of ranks.
function Mesh:size() return #self.ranks end

--- mesh:contains(rank)
function Mesh:contains(rank) return self._index[rank] ~= nil end

--- mesh:coord(rank): the rank's mesh coordinate (0-based entries, one per
-- axis), or nil when the rank is not in the mesh.
function Mesh:coord(rank)
  local flat = self._index[rank]
  if flat == nil then return nil end
  local c = {}
  for i = #self.shape, 1, -1 do
    c[i] = flat % self.shape[i]
    flat = flat // self.shape[i]
  end
  return c
end

--- mesh:rank_at(coord): the rank at a mesh coordinate.
function Mesh:rank_at(coord)
  if type(coord) ~= "table" or #coord ~= #self.shape then
    argerror("a mesh coordinate has one entry per axis")
  end
  local flat = 0
  for i = 1, #self.shape do
    local c = toint(coord[i], format("coordinate[%d]", i))
    if c < 0 or c >= self.shape[i] then
      argerror(format("coordinate %d outside axis %d of size %d", c, i - 1,
        self.shape[i]))
    end
    flat = flat * self.shape[i] + c
  end
  return self.ranks[flat + 1]
end

--- mesh:placements{tp = reshard.Shard(0)}: one placement per axis, named
-- ones as given, the others Replicate() (needs axis names).
function Mesh:placements(by_name)
  if self._axis == nil then argerror("this mesh has no axis names") end
  local out = {}
  for i = 1, #self.shape do out[i] = M.Replicate() end
  for name, p in pairs(by_name) do
    local i = self._axis[name]
    if i == nil then argerror(format("the mesh has no axis %q", tostring(name))) end
    out[i] = p
  end
  return out
end

--- reshard.local_box(shape, mesh_shape, placements, coord) -> offset,
-- extent: the box (0-based offset, extent per dimension) a DTensor
-- placement gives the mesh coordinate coord. Uneven sizes follow
-- torch.chunk; an empty shard has extent 0 in its sharded dimension.
function M.local_box(shape, mesh_shape, placements, coord)
  local p, _, strided = placement_codes(placements)
  if strided then
    error(new_error(C.RS_ERR_UNSUPPORTED, "RS_ERR_UNSUPPORTED",
      "a StridedShard may hold several boxes: reshard.local_boxes gives them"),
      0)
  end
  local s = ints(shape, "shape")
  local ms, c = ints(mesh_shape, "mesh shape"), ints(coord, "coordinate")
  s, ms, p, c = vec(s), vec(ms), vec(p), vec(c)
  local off, ext = C.rsw_ints_new(), C.rsw_ints_new()
  C.rsw_dtensor_local_box(R, s, ms, p, c, off, ext)
  local offset, extent = ints_table(off), ints_table(ext)
  free_ints(s, ms, p, c, off, ext)
  check(R)
  return offset, extent
end

--- reshard.local_boxes(shape, mesh_shape, placements, coord, order) ->
-- local_shape, boxes: what mesh coordinate coord holds, StridedShard
-- included: its dense local shape and its boxes, each {offset = ...,
-- extent = ..., local_offset = ...} (where it starts in the local tensor),
-- row-major over the dimensions' runs; none for an empty shard. order: as
-- reshard.strided ("auto" by default). Since 0.6.
function M.local_boxes(shape, mesh_shape, placements, coord, order)
  local p, f = placement_codes(placements)
  local o = strided_order_code(order)
  local s = ints(shape, "shape")
  local ms, c = ints(mesh_shape, "mesh shape"), ints(coord, "coordinate")
  local nd = #s
  s, ms, p, f, c = vec(s), vec(ms), vec(p), vec(f), vec(c)
  local outs = { C.rsw_ints_new(), C.rsw_ints_new(), C.rsw_ints_new(),
    C.rsw_ints_new() }
  C.rsw_dtensor_local_boxes(R, s, ms, p, f, o, c, outs[1], outs[2], outs[3],
    outs[4])
  local local_shape, off, ext, loc = ints_table(outs[1]), ints_table(outs[2]),
    ints_table(outs[3]), ints_table(outs[4])
  local n = R.value
  free_ints(s, ms, p, f, c, outs[1], outs[2], outs[3], outs[4])
  check(R)
  local boxes = {}
  for b = 1, n do
    local box = { offset = {}, extent = {}, local_offset = {} }
    for d = 1, nd do
      local at = (b - 1) * nd + d
      box.offset[d], box.extent[d], box.local_offset[d] = off[at], ext[at],
        loc[at]
    end
    boxes[b] = box
  end
  return local_shape, boxes
end

--- mesh:local_boxes(shape, placements, rank, order): reshard.local_boxes
-- for the rank's coordinate. Since 0.6.
function Mesh:local_boxes(shape, placements, rank, order)
  local coord = self:coord(rank)
  if coord == nil then
    argerror(format("rank %s is not in the mesh", tostring(rank)))
  end
  return M.local_boxes(shape, self.shape, placements, coord, order)
end

--- mesh:local_box(shape, placements, rank) -> offset, extent of the rank's
-- shard of a tensor of shape.
function Mesh:local_box(shape, placements, rank)
  local coord = self:coord(rank)
  if coord == nil then
    argerror(format("rank %s is not in the mesh", tostring(rank)))
  end
  return M.local_box(shape, self.shape, placements, coord)
end

--- mesh:local_shape(shape, placements, rank): the extent alone.
function Mesh:local_shape(shape, placements, rank)
  local _, extent = self:local_box(shape, placements, rank)
  return extent
end

--- mesh:local_numel(shape, placements, rank): elements of the rank's shard.
function Mesh:local_numel(shape, placements, rank)
  local n = 1
  for _, e in ipairs(self:local_shape(shape, placements, rank)) do n = n * e end
  return n
end

---------------------------------------------------------------------------
-- Contexts
---------------------------------------------------------------------------

local Context = {}
Context.__index = Context
Context.__name = "reshard.Context"

local context_handle = handle_of("reshard.Context")

local function new_context(r)
  check(r)
  return setmetatable({ _h = C.rsw_result_context(r) }, Context)
end

--- reshard.local_context(world): world ranks, all in this process.
function M.local_context(world)
  C.rsw_context_create_local(R, toint32(world, "world size"))
  return new_context(R)
end

--- reshard.mpi_context(fcomm): one rank per MPI process, over the MPI
-- communicator whose Fortran handle is fcomm (an integer, MPI_Comm_c2f;
-- mpi4py: comm.py2f()). MPI must be initialized.
function M.mpi_context(fcomm)
  C.rsw_context_create_mpi(R, toint(fcomm, "Fortran communicator"))
  return new_context(R)
end

--- reshard.nccl_unique_id(): a new NCCL unique id, as a 128-byte buffer
-- (buf:bytes() gives it as a string to send to the other ranks;
-- reshard.buffer(string) makes it a buffer again).
function M.nccl_unique_id()
  local id = M.buffer(C.RS_NCCL_UNIQUE_ID_BYTES)
  C.rsw_nccl_unique_id(R, id)
  if R.status ~= 0 then
    local e = new_error(R.status, R.name, R.message)
    id:close()
    error(e, 0)
  end
  return id
end

--- reshard.nccl_context(id, rank, world, device): one GPU rank of an NCCL
-- world made from a unique id (a buffer or a 128-byte string).
function M.nccl_context(id, rank, world, device)
  local own = false
  if type(id) == "string" then id, own = M.buffer(id), true end
  buffer_state(id)
  C.rsw_context_create_nccl_id(R, id, toint32(rank, "rank"),
    toint32(world, "world size"), toint32(device, "device"))
  if own then id:close() end
  return new_context(R)
end

--- reshard.nccl_context_comm(comm): over an ncclComm_t you already have,
-- given as its address (an integer); the context never destroys it.
function M.nccl_context_comm(comm)
  C.rsw_context_create_nccl_comm(R, toint(comm, "ncclComm_t address"))
  return new_context(R)
end

--- reshard.nccl_context_devices{0, 1, ...}: every rank in this process,
-- rank i on CUDA device devices[i + 1].
function M.nccl_context_devices(devices)
  local d = vec(ints(devices, "devices"))
  C.rsw_context_create_nccl_devices(R, d)
  free_ints(d)
  return new_context(R)
end

local TRANSPORT = { [C.RS_TRANSPORT_LOCAL] = "local",
  [C.RS_TRANSPORT_MPI] = "mpi", [C.RS_TRANSPORT_NCCL] = "nccl" }

--- ctx:world_size()
function Context:world_size()
  C.rsw_context_world_size(R, context_handle(self))
  check(R)
  return R.value
end

--- ctx:rank(): this process's rank, or reshard.ALL_RANKS (-1) for a
-- context that drives every rank itself.
function Context:rank()
  C.rsw_context_rank(R, context_handle(self))
  check(R)
  return R.value
end

--- ctx:transport(): "local", "mpi" or "nccl".
function Context:transport()
  C.rsw_context_transport(R, context_handle(self))
  check(R)
  return TRANSPORT[R.value] or R.value
end

--- ctx:set_domain(rank, domain)
function Context:set_domain(rank, domain)
  C.rsw_context_set_domain(R, context_handle(self), toint32(rank, "rank"),
    toint32(domain, "domain"))
  check(R)
  return self
end

--- ctx:domain(rank)
function Context:domain(rank)
  C.rsw_context_get_domain(R, context_handle(self), toint32(rank, "rank"))
  check(R)
  return R.value
end

--- ctx:set_domain_size(n): rank r in domain r // n.
function Context:set_domain_size(n)
  C.rsw_context_set_domain_size(R, context_handle(self),
    toint32(n, "ranks per domain"))
  check(R)
  return self
end

--- ctx:set_param(name, value): name "staging_bytes", "timeout_ms",
-- "integrity" (a boolean or 0/1), "plan_part" (-1, or the rank whose part
-- of plans made afterwards is kept), "plan_boxes" (a boolean or 0/1: false
-- makes plans to inspect, not to run), "copy_threads" (threads that copy
-- host memory in an execution: 1 the default, 0 one per CPU),
-- "progress_thread" (a boolean or 0/1: execute_async hands an execution on
-- a host context to a thread of the context; since 0.6), "rounds"
-- (reshard.rounds.packed, the default, or reshard.rounds.by_domain_pair)
-- or "slice_bytes", or a RS_PARAM_ code.
function Context:set_param(p, value)
  if type(value) == "boolean" then value = value and 1 or 0 end
  C.rsw_context_set_param(R, context_handle(self), param_code(p),
    toint(value, "parameter value"))
  check(R)
  return self
end

--- ctx:param(name)
function Context:param(p)
  C.rsw_context_get_param(R, context_handle(self), param_code(p))
  check(R)
  return R.value
end

--- ctx:abort(): make the execution in flight (or the next) fail at once;
-- the context is done afterwards.
function Context:abort()
  C.rsw_context_abort(context_handle(self))
end

local Layout = {}
Layout.__index = Layout
Layout.__name = "reshard.Layout"

--- ctx:layout(): a new empty layout.
function Context:layout()
  C.rsw_layout_create(R, context_handle(self))
  check(R)
  return setmetatable({ _h = C.rsw_result_layout(R), _ctx = self },
    Layout)
end

--- ctx:close(): drop this reference; layouts and plans made from the
-- context keep it alive as long as they need it.
closable(Context, C.rsw_context_destroy)
Context.__tostring = function(self)
  if self._h == nil then return "reshard.Context (closed)" end
  return format("reshard.Context(%s, world %d)", self:transport(),
    self:world_size())
end

---------------------------------------------------------------------------
-- Layouts
---------------------------------------------------------------------------

local layout_handle = handle_of("reshard.Layout")

local function checkname(name)
  if type(name) ~= "string" then
    argerror(format("a tensor name is a string, not %s", type(name)))
  end
  return name
end

--- layout:add_tensor(name, dtype, shape): declare a tensor.
function Layout:add_tensor(name, dtype, shape)
  local h = layout_handle(self)
  checkname(name)
  local code = dtype_code(dtype)
  local s = vec(ints(shape, "shape"))
  C.rsw_layout_add_tensor(R, h, name, code, s)
  free_ints(s)
  check(R)
  return self
end

--- layout:add_shard{name=, rank=, offset=, extent=, buffer=0,
-- byte_offset=0, strides=nil}: rank holds the box [offset, offset+extent)
-- of the tensor, in its buffer number `buffer` from byte_offset on, dense
-- row-major or with element strides.
function Layout:add_shard(a)
  local h = layout_handle(self)
  if type(a) ~= "table" then argerror("add_shard takes a table") end
  checkname(a.name)
  local rank = toint32(a.rank, "rank")
  local buffer = toint32(a.buffer or 0, "buffer")
  local byte_offset = toint(a.byte_offset or 0, "byte_offset")
  local off = ints(a.offset, "offset")
  local ext = ints(a.extent, "extent")
  local str = a.strides ~= nil and ints(a.strides, "strides") or nil
  off, ext, str = vec(off), vec(ext), str and vec(str)
  C.rsw_layout_add_shard(R, h, a.name, rank, off, ext, buffer, byte_offset,
    str)
  free_ints(off, ext, str)
  check(R)
  return self
end

--- layout:add_dtensor(name, mesh, placements, buffer, byte_offset, order):
-- the shards of a DTensor: mesh is a reshard.mesh or {shape=..., ranks=...},
-- placements one per mesh axis (reshard.Shard(d), reshard.Replicate(),
-- reshard.StridedShard(d, f)). Each rank's shard is dense in its buffer
-- `buffer` (default 0) at byte_offset (default 0); a StridedShard may make
-- it several boxes of that one local tensor. order (since 0.6): which
-- order a tensor with StridedShard placements was made in, "fsdp2",
-- "distribute" or "auto" (the default: refused where the two differ).
function Layout:add_dtensor(name, mesh, placements, buffer, byte_offset,
                            order)
  local h = layout_handle(self)
  checkname(name)
  if type(mesh) ~= "table" or mesh.shape == nil then
    argerror("a mesh is a reshard.mesh or a table {shape=..., ranks=...}")
  end
  local codes, split, strided = placement_codes(placements)
  local o = strided_order_code(order)
  buffer = toint32(buffer or 0, "buffer")
  byte_offset = toint(byte_offset or 0, "byte_offset")
  local shape = ints(mtype(mesh.shape) and { mesh.shape } or mesh.shape,
    "mesh shape")
  local ranks = mesh.ranks
  if ranks == nil then
    local n = 1
    for i = 1, #shape do n = n * shape[i] end
    ranks = {}
    for i = 1, n do ranks[i] = i - 1 end
  end
  local ms, mr = ints(shape, "mesh shape"), ints(ranks, "mesh ranks")
  local p, f
  ms, mr, p = vec(ms), vec(mr), vec(codes)
  if strided or order ~= nil then
    f = vec(split)
    C.rsw_layout_add_dtensor_strided(R, h, name, ms, mr, p, f, o, buffer,
      byte_offset)
  else
    C.rsw_layout_add_dtensor(R, h, name, ms, mr, p, buffer, byte_offset)
  end
  free_ints(ms, mr, p, f)
  check(R)
  return self
end

--- layout:set_block_scales(values, scales, rows, cols, rule): tensor
-- values (f8_e4m3, in the destination layout) is quantized in blocks of
-- rows x cols elements (default 128 x 128) over its last two dimensions
-- (a 1-D tensor: rows 1), with one f32 scale per block in tensor scales,
-- whose shape is the values' with the last two dimensions divided by the
-- block, rounded up. rule: "amax" (default) or "ue8m0", or a
-- reshard.scale value. Declare both tensors first; the scales are placed
-- with shards like any tensor and are not in the source layout. The plan
-- converts from the source's f32, bf16 or f16 on the way; a reader takes
-- value * scale. Since 0.4.
function Layout:set_block_scales(values, scales, rows, cols, rule)
  local h = layout_handle(self)
  checkname(values)
  checkname(scales)
  rows = toint(rows or 128, "block rows")
  cols = toint(cols or 128, "block cols")
  local code = scale_rule_code(rule or "amax")
  C.rsw_layout_set_block_scales(R, h, values, scales, rows, cols, code)
  check(R)
  return self
end

--- layout:allgather(): share every rank's shards with every rank
-- (collective; MPI and NCCL contexts).
function Layout:allgather()
  C.rsw_layout_allgather(R, layout_handle(self))
  check(R)
  return self
end

--- layout:num_tensors()
function Layout:num_tensors()
  C.rsw_layout_num_tensors(R, layout_handle(self))
  check(R)
  return R.value
end

--- layout:num_shards()
function Layout:num_shards()
  C.rsw_layout_num_shards(R, layout_handle(self))
  check(R)
  return R.value
end

--- layout:serialize(): the layout's wire bytes, in a new buffer.
function Layout:serialize()
  C.rsw_layout_serialize(R, layout_handle(self))
  check(R)
  return adopt_buffer(C.rsw_result_buffer(R), R.value)
end

--- layout:deserialize(bytes): add what serialized bytes (a buffer or a
-- string) hold.
function Layout:deserialize(bytes)
  local h = layout_handle(self)
  local own = false
  if type(bytes) == "string" then bytes, own = M.buffer(bytes), true end
  buffer_state(bytes)
  C.rsw_layout_deserialize(R, h, bytes)
  if own then bytes:close() end
  check(R)
  return self
end

--- layout:close()
closable(Layout, C.rsw_layout_destroy)
Layout.__tostring = function(self)
  if self._h == nil then return "reshard.Layout (closed)" end
  return format("reshard.Layout(%d tensors, %d shards)", self:num_tensors(),
    self:num_shards())
end

---------------------------------------------------------------------------
-- Plans
---------------------------------------------------------------------------

local Plan = {}
Plan.__index = Plan
Plan.__name = "reshard.Plan"

local plan_handle = handle_of("reshard.Plan")

--- reshard.plan(src, dst) (also src:plan(dst)): what moves where. The plan
-- copies what it needs: the layouts may be closed afterwards.
function M.plan(src, dst)
  if getmetatable(src) ~= Layout or getmetatable(dst) ~= Layout then
    argerror("reshard.plan(src, dst) takes two layouts")
  end
  C.rsw_plan_create(R, layout_handle(src), layout_handle(dst))
  check(R)
  return setmetatable({ _h = C.rsw_result_plan(R), _ctx = src._ctx,
    _bound = {}, _inflight = false }, Plan)
end
Layout.plan = M.plan

--- plan:stat(name, rank): one figure ("bytes_sent_inter", ...) of rank
-- (default: all ranks summed; rounds and staging_bytes: the maximum).
function Plan:stat(name, rank)
  local code = STAT[name]
  if code == nil then argerror(format("unknown plan figure %s", tostring(name))) end
  C.rsw_plan_stat(R, plan_handle(self), toint32(rank or C.RS_ALL_RANKS, "rank"),
    code)
  check(R)
  return R.value
end

--- plan:stats(rank): every figure of rank (default all ranks) in a table:
-- bytes_sent_intra, bytes_sent_inter, bytes_recv_intra, bytes_recv_inter,
-- bytes_local, messages_sent, messages_recv, rounds, staging_bytes, moves,
-- converted_sending (elements converted to another dtype before sending;
-- an fp8 block's scale counts one), converted_receiving (elements
-- converted once they arrived, or in a copy inside the rank),
-- bytes_copied_from_relay (copied out of a relay slot: received once,
-- forwarded, and needed by the rank itself; not in bytes_local),
-- bytes_packed and bytes_unpacked (of the bytes it sends or receives,
-- those copied into or out of staging as they are, by a transport that
-- stages: MPI, NCCL).
function Plan:stats(rank)
  local h = plan_handle(self)
  rank = toint32(rank or C.RS_ALL_RANKS, "rank")
  local t = {}
  for _, s in ipairs(STATS) do
    C.rsw_plan_stat(R, h, rank, s[2])
    check(R)
    t[s[1]] = R.value
  end
  return t
end

--- plan:json(): the whole plan as JSON text.
function Plan:json()
  local s = C.rsw_plan_to_json(R, plan_handle(self))
  check(R)
  return s
end

--- plan:num_moves()
function Plan:num_moves()
  C.rsw_plan_num_moves(R, plan_handle(self))
  check(R)
  return R.value
end

--- plan:num_tensors()
function Plan:num_tensors()
  C.rsw_plan_num_tensors(R, plan_handle(self))
  check(R)
  return R.value
end

--- plan:fingerprint(): the 64-bit fingerprint as an integer (its bit
-- pattern; format("%016x") prints it).
function Plan:fingerprint()
  C.rsw_plan_fingerprint(R, plan_handle(self))
  check(R)
  return R.value
end

local function unpin(b)
  local st = bstate[b]
  if st ~= nil then
    st.pins = st.pins - 1
    free_buffer(b, st)
  end
end

--- plan:bind(side, rank, index, buf): buffer number `index` of rank on
-- side ("src" or "dst") is the reshard.buffer buf. The plan keeps buf
-- alive (and its memory, even after buf:close()) until the plan is closed
-- or buf is replaced by a later bind of the same (side, rank, index).
function Plan:bind(side, rank, index, buf)
  local h = plan_handle(self)
  local s = side_code(side)
  rank = toint32(rank, "rank")
  index = toint32(index, "buffer")
  local st = buffer_state(buf)
  C.rsw_plan_bind_buffer(R, h, s, rank, index, buf)
  check(R)
  local key = format("%d:%d:%d", s, rank, index)
  local old = self._bound[key]
  st.pins = st.pins + 1
  self._bound[key] = buf
  if old ~= nil then unpin(old) end
  return self
end

--- plan:bind_address(side, rank, index, address, bytes, memory, device):
-- bind memory the caller owns and keeps valid (a CUDA pointer from
-- another library, ...); memory "host" (default) or "cuda".
function Plan:bind_address(side, rank, index, address, bytes, memory, device)
  local h = plan_handle(self)
  local mem = MEMORY[memory or "host"]
  if mem == nil then mem = toint32(memory, "memory kind") end
  C.rsw_plan_bind(R, h, side_code(side), toint32(rank, "rank"),
    toint32(index, "buffer"), toint(address, "address"),
    toint(bytes, "bytes"), mem, toint32(device or -1, "device"))
  check(R)
  return self
end

--- plan:execute(): move the bytes (again after the sources changed).
function Plan:execute()
  C.rsw_plan_execute(R, plan_handle(self))
  check(R)
  return self
end

--- plan:execute_async(queue): start an execution and return; queue is a
-- cudaStream_t address on GPU contexts (nil or 0: none). Then call
-- plan:test() or plan:wait().
function Plan:execute_async(queue)
  C.rsw_plan_execute_async(R, plan_handle(self), toint(queue or 0, "queue"))
  check(R)
  self._inflight = true
  return self
end

--- plan:test(): advance the execution without waiting; true once it
-- ended (raising its error if it failed).
function Plan:test()
  C.rsw_plan_test(R, plan_handle(self))
  if R.status ~= 0 then
    self._inflight = false
    raise(R)
  end
  local done = R.value ~= 0
  if done then self._inflight = false end
  return done
end

--- plan:wait(): until the execution ended; raises its error.
function Plan:wait()
  C.rsw_plan_wait(R, plan_handle(self))
  self._inflight = false
  check(R)
  return self
end

-- Close with the result r (R, or GCR in a finalizer).
local function close_plan(self, r)
  local h = self._h
  if h == nil then return end
  if self._inflight then
    -- An execution in flight reads and writes the bound buffers: end it
    -- before they can go.
    C.rsw_plan_wait(r, h)
    self._inflight = false
  end
  self._h = nil
  C.rsw_plan_destroy(h)
  local bound = self._bound
  self._bound = {}
  for _, b in pairs(bound) do unpin(b) end
end

--- plan:close(): waits for an execution in flight, frees the plan, and
-- lets go of its buffers.
function Plan:close() close_plan(self, R) end
Plan.__close = Plan.close
Plan.__gc = function(self) close_plan(self, GCR) end
Plan.__tostring = function(self)
  if self._h == nil then return "reshard.Plan (closed)" end
  return format("reshard.Plan(%d moves, %d tensors)", self:num_moves(),
    self:num_tensors())
end

---------------------------------------------------------------------------
-- Recipes (reshard/recipes.h, since 0.6): the layouts of real frameworks
---------------------------------------------------------------------------

--- reshard.recipes: models from a Hugging Face config.json or the
-- built-in catalog, and recipes that know how a Megatron-style trainer
-- ("tp=2,pp=2": keys tp cp ep etp pp dp edp gpus fsdp vocab_pad) and a
-- vLLM-style engine ("tp=4,dp=2": keys tp dp ep gpus vocab_pad) shard
-- every parameter, with the engine's own buffer names (qkv_proj,
-- gate_up_proj at byte offsets). Trainer ranks are 0 .. train world - 1,
-- engine ranks follow them (colocated: from 0). Since 0.6.
local recipes = {}
M.recipes = recipes

-- Sizes (get) and settings (get and set) of a recipe, by the names of
-- rs_recipe_param without RS_RECIPE_.
local RECIPE_PARAM = {
  train_tp = C.RS_RECIPE_TRAIN_TP, train_cp = C.RS_RECIPE_TRAIN_CP,
  train_ep = C.RS_RECIPE_TRAIN_EP, train_etp = C.RS_RECIPE_TRAIN_ETP,
  train_pp = C.RS_RECIPE_TRAIN_PP, train_dp = C.RS_RECIPE_TRAIN_DP,
  train_edp = C.RS_RECIPE_TRAIN_EDP, train_fsdp = C.RS_RECIPE_TRAIN_FSDP,
  train_world = C.RS_RECIPE_TRAIN_WORLD, infer_tp = C.RS_RECIPE_INFER_TP,
  infer_dp = C.RS_RECIPE_INFER_DP, infer_ep = C.RS_RECIPE_INFER_EP,
  infer_world = C.RS_RECIPE_INFER_WORLD,
  train_dtype = C.RS_RECIPE_TRAIN_DTYPE, infer_dtype = C.RS_RECIPE_INFER_DTYPE,
  fp8_block_rows = C.RS_RECIPE_FP8_BLOCK_ROWS,
  fp8_block_cols = C.RS_RECIPE_FP8_BLOCK_COLS,
  fp8_scale_rule = C.RS_RECIPE_FP8_SCALE_RULE,
  infer_first_rank = C.RS_RECIPE_INFER_FIRST_RANK,
  train_vocab_pad = C.RS_RECIPE_TRAIN_VOCAB_PAD,
  infer_vocab_pad = C.RS_RECIPE_INFER_VOCAB_PAD,
}
recipes.param = RECIPE_PARAM

-- Facts of a model, by the names of rs_model_param without RS_MODEL_.
local MODEL_PARAM = {
  hidden_size = C.RS_MODEL_HIDDEN_SIZE, num_layers = C.RS_MODEL_NUM_LAYERS,
  num_heads = C.RS_MODEL_NUM_HEADS, num_kv_heads = C.RS_MODEL_NUM_KV_HEADS,
  head_dim = C.RS_MODEL_HEAD_DIM,
  intermediate_size = C.RS_MODEL_INTERMEDIATE_SIZE,
  moe_intermediate_size = C.RS_MODEL_MOE_INTERMEDIATE_SIZE,
  num_experts = C.RS_MODEL_NUM_EXPERTS,
  num_shared_experts = C.RS_MODEL_NUM_SHARED_EXPERTS,
  first_moe_layer = C.RS_MODEL_FIRST_MOE_LAYER,
  vocab_size = C.RS_MODEL_VOCAB_SIZE, qk_norm = C.RS_MODEL_QK_NORM,
  mla = C.RS_MODEL_MLA, q_lora_rank = C.RS_MODEL_Q_LORA_RANK,
  kv_lora_rank = C.RS_MODEL_KV_LORA_RANK,
  qk_nope_head_dim = C.RS_MODEL_QK_NOPE_HEAD_DIM,
  qk_rope_head_dim = C.RS_MODEL_QK_ROPE_HEAD_DIM,
  v_head_dim = C.RS_MODEL_V_HEAD_DIM,
  published_params = C.RS_MODEL_PUBLISHED_PARAMS,
  tied_embeddings = C.RS_MODEL_TIED_EMBEDDINGS,
  num_fused = C.RS_MODEL_NUM_FUSED,
}
recipes.fact = MODEL_PARAM

-- A parameter code from a name of `names` or an integer code (which the
-- library checks).
local function named_code(names, p, what)
  if type(p) == "string" then
    local c = names[p]
    if c == nil then argerror(format("unknown %s %q", what, p)) end
    return c
  end
  return toint32(p, what)
end

--- reshard.recipes.catalog(): the names of the built-in catalog's models
-- ("DeepSeek-V3", "Llama-3.1-8B", ...), a sequence.
function recipes.catalog()
  local out = {}
  for i = 0, C.rsw_model_catalog_count() - 1 do
    out[#out + 1] = C.rsw_model_catalog_name(i)
  end
  return out
end

local Model = {}
Model.__index = Model
Model.__name = "reshard.recipes.Model"

local model_handle = handle_of("reshard.recipes.Model")

local function is_model(v) return getmetatable(v) == Model end

--- reshard.recipes.model(config): a model's parameter tensors. config is
-- the JSON text of a config.json (it starts with "{"), the path of one,
-- or a catalog name or alias ("llama8b", "dsv3"; case-insensitive).
-- Failures raise the library's error: RS_ERR_INVALID_ARGUMENT (not JSON,
-- with line and column; a key of the wrong type, named; an unknown
-- catalog name, with the catalog), RS_ERR_UNSUPPORTED (an unknown
-- model_type, named).
function recipes.model(config)
  if type(config) ~= "string" then
    argerror(format("a model config is JSON text, a path or a catalog " ..
      "name, not %s", type(config)))
  end
  local text
  if config:match("^%s*{") then
    text = config
  else
    local f = io.open(config, "rb")
    if f ~= nil then
      local err
      text, err = f:read("a")
      f:close()
      if text == nil then
        argerror(format("cannot read %s: %s", config, tostring(err)))
      end
    end
  end
  if text ~= nil then
    local nul = text:find("\0", 1, true)
    if nul then
      argerror(format("the config holds a NUL byte at byte %d", nul - 1))
    end
    C.rsw_model_from_config(R, text)
  else
    if config:find("\0", 1, true) then
      argerror("a catalog name holds a NUL byte")
    end
    C.rsw_model_from_catalog(R, config)
  end
  check(R)
  return setmetatable({ _h = C.rsw_result_model(R) }, Model)
end

--- model:name(): the catalog's name, the config's "_name_or_path", or
-- its model_type.
function Model:name() return C.rsw_model_name(model_handle(self)) end

--- model:num_tensors()
function Model:num_tensors()
  C.rsw_model_num_tensors(R, model_handle(self))
  check(R)
  return R.value
end

--- model:tensor(i): tensor i (0-based) as {name=, dtype=, shape=}: its
-- Hugging Face name, dtype name ("bf16") and shape (a sequence).
function Model:tensor(i)
  local h = model_handle(self)
  i = toint32(i, "tensor index")
  local v = C.rsw_ints_new()
  local name = C.rsw_model_tensor_info(R, h, i, v)
  local shape = ints_table(v)
  free_ints(v)
  check(R)
  return { name = name, dtype = C.rsw_dtype_name(R.value), shape = shape }
end

--- model:tensors(): every tensor, in the model's order, as model:tensor.
function Model:tensors()
  local out = {}
  for i = 0, self:num_tensors() - 1 do out[i + 1] = self:tensor(i) end
  return out
end

--- model:get(fact): a fact of the model, by name ("hidden_size",
-- "num_layers", "vocab_size", ...: rs_model_param without RS_MODEL_, in
-- lower case) or code.
function Model:get(p)
  C.rsw_model_get(R, model_handle(self), named_code(MODEL_PARAM, p, "fact"))
  check(R)
  return R.value
end

--- model:close()
closable(Model, C.rsw_model_destroy)
Model.__tostring = function(self)
  if self._h == nil then return "reshard.recipes.Model (closed)" end
  return format("reshard.recipes.Model(%s, %d tensors)", self:name(),
    self:num_tensors())
end

local Recipe = {}
Recipe.__index = Recipe
Recipe.__name = "reshard.recipes.Recipe"

local recipe_handle = handle_of("reshard.recipes.Recipe")

local function spec(s, what)
  if type(s) ~= "string" or s:find("\0", 1, true) then
    argerror(format("the %s spec is a string such as \"tp=2,pp=2\", not %s",
      what, tostring(s)))
  end
  return s
end

--- reshard.recipes.recipe(model, train, infer): model (a
-- reshard.recipes.model, or what reshard.recipes.model takes) sharded by
-- a trainer spec and an engine spec. The recipe keeps its own copy of the
-- model. A bad spec, or a size that does not fit the model, raises
-- RS_ERR_INVALID_ARGUMENT naming the key and the model's figure.
function recipes.recipe(model, train, infer)
  spec(train, "train")
  spec(infer, "infer")
  local own = not is_model(model)
  local m = own and recipes.model(model) or model
  C.rsw_recipe_create(R, model_handle(m), train, infer)
  local status = R.status
  local h = status == 0 and C.rsw_result_recipe(R) or nil
  local e = status ~= 0 and new_error(R.status, R.name, R.message) or nil
  if own then m:close() end
  if e then error(e, 0) end
  return setmetatable({ _h = h }, Recipe)
end

-- The value of a setting: dtypes and scale rules by name too.
local function setting_value(code, v)
  if code == C.RS_RECIPE_TRAIN_DTYPE or code == C.RS_RECIPE_INFER_DTYPE then
    if type(v) == "string" then return dtype_code(v) end
  elseif code == C.RS_RECIPE_FP8_SCALE_RULE then
    return scale_rule_code(v)
  end
  return toint(v, "recipe setting")
end

--- recipe:get(name): a size or setting by name ("train_world",
-- "infer_tp", "infer_first_rank", ...: rs_recipe_param without
-- RS_RECIPE_, in lower case) or code.
function Recipe:get(p)
  C.rsw_recipe_get(R, recipe_handle(self),
    named_code(RECIPE_PARAM, p, "recipe parameter"))
  check(R)
  return R.value
end

--- recipe:set(name, value): a setting: "train_dtype", "infer_dtype" (a
-- dtype name such as "f8_e4m3", or a code), "fp8_block_rows",
-- "fp8_block_cols", "fp8_scale_rule" ("amax", "ue8m0"),
-- "infer_first_rank" (0: colocated), "train_vocab_pad",
-- "infer_vocab_pad". A size, an unknown parameter or a value out of range
-- raises RS_ERR_BAD_PARAM. Returns the recipe.
function Recipe:set(p, value)
  local h = recipe_handle(self)
  local code = named_code(RECIPE_PARAM, p, "recipe parameter")
  C.rsw_recipe_set(R, h, code, setting_value(code, value))
  check(R)
  return self
end

local function add(self, fn, layout, rank)
  local h = recipe_handle(self)
  if getmetatable(layout) ~= Layout then
    argerror(format("a reshard.Layout is needed, not %s", tostring(layout)))
  end
  local lh = layout_handle(layout)
  rank = rank == nil and C.RS_ALL_RANKS or toint32(rank, "rank")
  fn(R, lh, h, rank)
  check(R)
  return self
end

--- recipe:add_train(layout, rank): declare every tensor in layout with
-- the trainer's dtypes and add the trainer's shards: every rank's (rank
-- nil or reshard.ALL_RANKS) or rank's alone (a rank that holds nothing on
-- this side adds the declarations alone, as each process does before
-- layout:allgather()). On failure the layout is left as it was.
function Recipe:add_train(layout, rank)
  return add(self, C.rsw_recipe_add_train, layout, rank)
end

--- recipe:add_infer(layout, rank): the same for the engine (its dtypes,
-- fp8 block scales, fused buffers at byte offsets).
function Recipe:add_infer(layout, rank)
  return add(self, C.rsw_recipe_add_infer, layout, rank)
end

--- recipe:ranks(side): the layout ranks of side ("src": the trainer's,
-- "dst": the engine's), a sequence.
function Recipe:ranks(side)
  local s = side_code(side)
  local first, n = 0, nil
  if s == C.RS_SIDE_SRC then
    n = self:get("train_world")
  else
    first, n = self:get("infer_first_rank"), self:get("infer_world")
  end
  local out = {}
  for i = 1, n do out[i] = first + i - 1 end
  return out
end

--- recipe:buffers(side, rank): the buffers layout rank `rank` holds on
-- side, in buffer order, each {rank=, buffer=, name=, bytes=}: bind
-- `bytes` bytes as buffer number `buffer` of `rank`. `name` is the
-- framework's ("model.layers.0.self_attn.qkv_proj.weight";
-- "param_buffer.bf16"). Buffers the rank leaves empty are left out.
function Recipe:buffers(side, rank)
  local h = recipe_handle(self)
  local s = side_code(side)
  rank = toint32(rank, "rank")
  C.rsw_recipe_num_buffers(R, h, s)
  check(R)
  local out = {}
  for b = 0, R.value - 1 do
    local name = C.rsw_recipe_buffer(R, h, s, rank, b)
    check(R)
    if R.value > 0 then
      out[#out + 1] = { rank = rank, buffer = b, name = name, bytes = R.value }
    end
  end
  return out
end

--- recipe:shards(side, rank): the shards side adds for layout rank
-- `rank` (nil: every rank's), in the order the layouts get them, each
-- {tensor=, tensor_index=, scales=, rank=, offset=, extent=, buffer=,
-- byte_offset=, strides=, dtype=}: the box [offset, offset + extent) of
-- the tensor (its block scales when scales is true: the layout's tensor
-- tensor .. "_scale_inv", in block coordinates) in buffer `buffer` from
-- byte_offset on, with element strides, held in dtype (a name, "bf16").
function Recipe:shards(side, rank)
  local h = recipe_handle(self)
  local s = side_code(side)
  rank = rank == nil and C.RS_ALL_RANKS or toint32(rank, "rank")
  C.rsw_recipe_num_shards(R, h, s, rank)
  check(R)
  local out = {}
  local fields = C.rsw_ints_new()
  for i = 0, R.value - 1 do
    local name = C.rsw_recipe_shard(R, h, s, rank, i, fields)
    if R.status ~= 0 then
      free_ints(fields)
      raise(R)
    end
    local f = ints_table(fields)
    local nd = f[7]
    local function part(k)
      local t = {}
      for d = 1, nd do t[d] = f[7 + k * nd + d] end
      return t
    end
    out[#out + 1] = {
      tensor = name, tensor_index = f[1], scales = f[2] ~= 0, rank = f[3],
      buffer = f[4], byte_offset = f[5], dtype = C.rsw_dtype_name(f[6]),
      offset = part(0), extent = part(1), strides = part(2),
    }
  end
  free_ints(fields)
  return out
end

--- recipe:close()
closable(Recipe, C.rsw_recipe_destroy)
Recipe.__tostring = function(self)
  if self._h == nil then return "reshard.recipes.Recipe (closed)" end
  return format("reshard.recipes.Recipe(train world %d, infer world %d)",
    self:get("train_world"), self:get("infer_world"))
end

--- reshard.recipes.layouts(ctx, config, opts) -> src, dst, recipe,
-- buffers: the trainer's and the engine's layouts of a model on ctx, the
-- recipe (recipe:buffers, recipe:shards), and the engine's buffers of the
-- ranks added (a sequence of recipe:buffers entries). config is what
-- reshard.recipes.model takes, or a model. opts (optional): train (default
-- "tp=2,pp=2"), infer (default "tp=4,dp=2"), rank (only that rank's
-- shards, as each process adds them before layout:allgather()), colocated
-- (true: the engine on ranks 0 ..), settings (recipe:set before anything
-- is added: {infer_dtype = "f8_e4m3"}, {train_vocab_pad = 128}). The
-- caller closes the layouts and the recipe; on failure nothing is left
-- open.
function recipes.layouts(ctx, config, opts)
  if getmetatable(ctx) ~= Context then
    argerror(format("reshard.recipes.layouts takes a reshard.Context, " ..
      "not %s", tostring(ctx)))
  end
  opts = opts or {}
  if type(opts) ~= "table" then argerror("the options are a table") end
  local rank = opts.rank ~= nil and toint32(opts.rank, "rank") or nil
  local names = {}
  for k in pairs(opts.settings or {}) do
    if type(k) ~= "string" then argerror("settings are keyed by name") end
    names[#names + 1] = k
  end
  table.sort(names)
  local recipe = recipes.recipe(config, opts.train or "tp=2,pp=2",
    opts.infer or "tp=4,dp=2")
  local src, dst
  local ok, err = pcall(function()
    if opts.colocated then recipe:set("infer_first_rank", 0) end
    for _, k in ipairs(names) do recipe:set(k, opts.settings[k]) end
    src, dst = ctx:layout(), ctx:layout()
    recipe:add_train(src, rank)
    recipe:add_infer(dst, rank)
  end)
  if not ok then
    if dst then dst:close() end
    if src then src:close() end
    recipe:close()
    error(err, 0)
  end
  local buffers = {}
  local first, n = recipe:get("infer_first_rank"), recipe:get("infer_world")
  for _, q in ipairs(rank ~= nil and { rank } or recipe:ranks("dst")) do
    if q >= first and q < first + n then
      for _, b in ipairs(recipe:buffers("dst", q)) do
        buffers[#buffers + 1] = b
      end
    end
  end
  return src, dst, recipe, buffers
end

return M
