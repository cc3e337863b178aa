-- SPDX-License-Identifier: Apache-2.0
-- Failures come back as reshard.Error objects: status, name, message.
local reshard = require "reshard"
local check = require "check"

describe("errors", function()
  it("carry status, name and message, and print them", function()
    local err = check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_context, 0)
    check.eq(err.status, 100, "status")
    check.contains(err.message, "world size 0", "message")
    local text = tostring(err)
    check.contains(text, "RS_ERR_INVALID_ARGUMENT", "tostring")
    check.contains(text, "(100)", "tostring")
    check.contains(text, "world size 0", "tostring")
    check.truthy(getmetatable(err) == reshard.Error, "metatable")
  end)

  it("reach pcall as the error object, and error() passes them on", function()
    local ok, err = pcall(function()
      local ctx = reshard.local_context(2)
      local l = ctx:layout()
      l:add_tensor("w", "f32", { 4 })
      l:add_tensor("w", "f32", { 4 })
    end)
    check.eq(ok, false, "pcall")
    check.eq(err.name, "RS_ERR_DUPLICATE_NAME", "name")
    check.eq(err.status, 107, "status")
    check.contains(err.message, "w", "message")
    local ok2, again = pcall(error, err)
    check.eq(ok2, false, "rethrow")
    check.truthy(again == err, "the same object")
  end)

  it("name the offending values (out of bounds)", function()
    local ctx <close> = reshard.local_context(2)
    local l <close> = ctx:layout():add_tensor("w", "f32", { 4, 6 })
    local err = check.fails("RS_ERR_OUT_OF_BOUNDS", l.add_shard, l,
      { name = "w", rank = 0, offset = { 2, 0 }, extent = { 3, 6 } })
    check.contains(err.message, "'w'", "message")
    check.fails("RS_ERR_UNKNOWN_TENSOR", l.add_shard, l,
      { name = "nope", rank = 0, offset = { 0, 0 }, extent = { 1, 1 } })
    check.fails("RS_ERR_UNKNOWN_RANK", l.add_shard, l,
      { name = "w", rank = 7, offset = { 0, 0 }, extent = { 1, 1 } })
    check.fails("RS_ERR_BAD_SHAPE", l.add_tensor, l, "z", "f32", { 0 })
    check.fails("RS_ERR_TOO_MANY_DIMS", l.add_tensor, l, "z", "f32",
      { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 })
  end)

  it("come from planning, binding and executing", function()
    local ctx <close> = reshard.local_context(3)
    local src <close> = ctx:layout():add_tensor("w", "i32", { 8 })
    local dst <close> = ctx:layout():add_tensor("w", "i32", { 8 })
    src:add_shard{ name = "w", rank = 0, offset = { 0 }, extent = { 4 } }
    dst:add_shard{ name = "w", rank = 2, offset = { 0 }, extent = { 8 } }
    local err = check.fails("RS_ERR_NOT_COVERED", reshard.plan, src, dst)
    check.contains(err.message, "'w'", "message")
    src:add_shard{ name = "w", rank = 1, offset = { 4 }, extent = { 4 } }
    local plan <close> = reshard.plan(src, dst)
    local small <close> = reshard.buffer(8)
    err = check.fails("RS_ERR_BUFFER_TOO_SMALL", plan.bind, plan, "src", 0, 0,
      small)
    check.contains(err.message, "8 bytes", "message")
    check.fails("RS_ERR_UNKNOWN_BUFFER", plan.bind, plan, "src", 0, 5,
      reshard.buffer(16))
    check.fails("RS_ERR_UNKNOWN_BUFFER", plan.execute, plan)
    local other <close> = reshard.local_context(3)
    local foreign <close> = other:layout():add_tensor("w", "i32", { 8 })
    check.fails("RS_ERR_WRONG_CONTEXT", reshard.plan, src, foreign)
    local wide <close> = ctx:layout():add_tensor("w", "i32", { 9 })
    check.fails("RS_ERR_INCOMPATIBLE", reshard.plan, src, wide)
  end)

  it("come from contexts and parameters", function()
    local ctx <close> = reshard.local_context(4)
    check.fails("RS_ERR_UNKNOWN_RANK", ctx.set_domain, ctx, 9, 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", ctx.set_domain_size, ctx, 0)
    check.fails("RS_ERR_BAD_PARAM", ctx.set_param, ctx, "timeout_ms", 0)
    check.fails("RS_ERR_INVALID_ARGUMENT", ctx.set_param, ctx, "nope", 1)
    local l <close> = ctx:layout()
    check.fails("RS_ERR_UNSUPPORTED", l.allgather, l) -- in-process context
  end)

  it("come from the MPI and NCCL constructors without their runtime", function()
    -- No MPI_Init in this process.
    local err = check.fails("RS_ERR_INVALID_ARGUMENT", reshard.mpi_context, 0)
    check.contains(err.message, "MPI", "message")
    check.fails("RS_ERR_NULL_POINTER", reshard.nccl_context_comm, 0)
    -- Without a GPU these fail; on a GPU machine they may work.
    for _, make in ipairs{
      function() return reshard.nccl_context_devices{ 0 } end,
      function() return reshard.nccl_context(string.rep("\0", 128), 0, 1, 0) end,
    } do
      local ok, ctx = pcall(make)
      if ok then
        check.eq(ctx:transport(), "nccl", "transport")
        ctx:close()
      else
        check.truthy(reshard.is_error(ctx), "a reshard.Error: " .. tostring(ctx))
        check.truthy(ctx.status ~= 0 and ctx.message ~= "", "filled in")
      end
    end
  end)

  it("are raised for arguments this layer refuses", function()
    local ctx <close> = reshard.local_context(2)
    local l <close> = ctx:layout()
    local err = check.fails("RS_ERR_INVALID_ARGUMENT", l.add_tensor, l, "w",
      "f32", { 2.5 })
    check.contains(err.message, "shape[1]", "message")
    err = check.fails("RS_ERR_INVALID_ARGUMENT", l.add_tensor, l, "w", "f99", { 2 })
    check.contains(err.message, "f99", "message")
    check.fails("RS_ERR_INVALID_ARGUMENT", l.add_tensor, l, 7, "f32", { 2 })
    check.fails("RS_ERR_INVALID_ARGUMENT", l.add_tensor, l, "w", "f32", "2")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_context, 1 << 40)
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.local_context, "2")
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.plan, l, nil)
    check.fails("RS_ERR_INVALID_ARGUMENT", reshard.Shard, -1)
  end)

  it("report an object used after close()", function()
    local ctx = reshard.local_context(2)
    local l = ctx:layout()
    l:close()
    check.fails("RS_ERR_NULL_POINTER", l.add_tensor, l, "w", "f32", { 2 })
    ctx:close()
    check.fails("RS_ERR_NULL_POINTER", ctx.layout, ctx)
    local b = reshard.buffer(4)
    b:close()
    check.fails("RS_ERR_NULL_POINTER", b.get, b, "u8", 0)
    check.fails("RS_ERR_NULL_POINTER", function() return #b end)
  end)

  it("have names and codes for every status", function()
    check.eq(reshard.status.RS_OK, 0, "RS_OK")
    check.eq(reshard.status.RS_ERR_CORRUPT, 503, "RS_ERR_CORRUPT")
    check.eq(reshard.status_name(111), "RS_ERR_BUFFER_TOO_SMALL", "name")
    for name, code in pairs(reshard.status) do
      check.integer(code, name)
      check.eq(reshard.status_name(code), name, "status_name")
    end
  end)
end)
