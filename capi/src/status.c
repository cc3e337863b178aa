/* Status texts, dtype facts, the per-thread error fallback. */
#include <stdlib.h>

#include "error.h"

const char *rs_status_string(rs_status status) {
  switch (status) {
    case RS_OK: return "success";
    case RS_ERR_INVALID_ARGUMENT: return "invalid argument";
    case RS_ERR_NULL_POINTER: return "required pointer is NULL";
    case RS_ERR_BAD_SHAPE: return "bad shape or extent";
    case RS_ERR_TOO_MANY_DIMS: return "too many dimensions";
    case RS_ERR_OUT_OF_BOUNDS: return "box outside its tensor";
    case RS_ERR_OVERFLOW: return "size arithmetic overflows";
    case RS_ERR_OVERLAP: return "memory written twice or overlapping";
    case RS_ERR_DUPLICATE_NAME: return "tensor name declared twice";
    case RS_ERR_UNKNOWN_TENSOR: return "no tensor of that name";
    case RS_ERR_UNKNOWN_RANK: return "rank outside the world";
    case RS_ERR_UNKNOWN_BUFFER: return "buffer unknown or not bound";
    case RS_ERR_BUFFER_TOO_SMALL: return "buffer smaller than its shards";
    case RS_ERR_BAD_PARAM: return "unknown parameter or value out of bounds";
    case RS_ERR_WRONG_CONTEXT: return "handles from different contexts";
    case RS_ERR_INCOMPATIBLE: return "layouts describe different tensors";
    case RS_ERR_NOT_COVERED: return "destination element held by no source";
    case RS_ERR_UNSUPPORTED: return "not supported";
    case RS_ERR_NO_MEMORY: return "out of memory";
    case RS_ERR_TRANSPORT: return "transport error";
    case RS_ERR_TIMEOUT: return "timed out waiting for a peer";
    case RS_ERR_MISMATCH: return "ranks disagree on layouts or plan";
    case RS_ERR_CORRUPT: return "received data failed its check";
    case RS_ERR_INTERNAL: return "internal error in libreshard";
  }
  return "unknown status";
}

const char *rs_status_name(rs_status status) {
  switch (status) {
#define NAME(x) \
  case x: return #x;
    NAME(RS_OK)
    NAME(RS_ERR_INVALID_ARGUMENT)
    NAME(RS_ERR_NULL_POINTER)
    NAME(RS_ERR_BAD_SHAPE)
    NAME(RS_ERR_TOO_MANY_DIMS)
    NAME(RS_ERR_OUT_OF_BOUNDS)
    NAME(RS_ERR_OVERFLOW)
    NAME(RS_ERR_OVERLAP)
    NAME(RS_ERR_DUPLICATE_NAME)
    NAME(RS_ERR_UNKNOWN_TENSOR)
    NAME(RS_ERR_UNKNOWN_RANK)
    NAME(RS_ERR_UNKNOWN_BUFFER)
    NAME(RS_ERR_BUFFER_TOO_SMALL)
    NAME(RS_ERR_BAD_PARAM)
    NAME(RS_ERR_WRONG_CONTEXT)
    NAME(RS_ERR_INCOMPATIBLE)
    NAME(RS_ERR_NOT_COVERED)
    NAME(RS_ERR_UNSUPPORTED)
    NAME(RS_ERR_NO_MEMORY)
    NAME(RS_ERR_TRANSPORT)
    NAME(RS_ERR_TIMEOUT)
    NAME(RS_ERR_MISMATCH)
    NAME(RS_ERR_CORRUPT)
    NAME(RS_ERR_INTERNAL)
#undef NAME
  }
  return "RS_ERR_UNKNOWN";
}

const char *rs_last_error(void) { return rsi_thread_err()->msg; }

size_t rs_dtype_size(rs_dtype dtype) {
  switch (dtype) {
    case RS_DTYPE_U8:
    case RS_DTYPE_I8:
    case RS_DTYPE_F8_E4M3:
    case RS_DTYPE_F8_E5M2:
    case RS_DTYPE_BOOL: return 1;
    case RS_DTYPE_U16:
    case RS_DTYPE_I16:
    case RS_DTYPE_F16:
    case RS_DTYPE_BF16: return 2;
    case RS_DTYPE_U32:
    case RS_DTYPE_I32:
    case RS_DTYPE_F32: return 4;
    case RS_DTYPE_U64:
    case RS_DTYPE_I64:
    case RS_DTYPE_F64: return 8;
  }
  return 0;
}

const char *rs_dtype_name(rs_dtype dtype) {
  switch (dtype) {
    case RS_DTYPE_U8: return "u8";
    case RS_DTYPE_I8: return "i8";
    case RS_DTYPE_U16: return "u16";
    case RS_DTYPE_I16: return "i16";
    case RS_DTYPE_U32: return "u32";
    case RS_DTYPE_I32: return "i32";
    case RS_DTYPE_U64: return "u64";
    case RS_DTYPE_I64: return "i64";
    case RS_DTYPE_F16: return "f16";
    case RS_DTYPE_BF16: return "bf16";
    case RS_DTYPE_F32: return "f32";
    case RS_DTYPE_F64: return "f64";
    case RS_DTYPE_F8_E4M3: return "f8_e4m3";
    case RS_DTYPE_F8_E5M2: return "f8_e5m2";
    case RS_DTYPE_BOOL: return "bool";
  }
  return "unknown";
}

void rs_free(void *ptr) { free(ptr); }
