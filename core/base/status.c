/* SPDX-License-Identifier: Apache-2.0 */
/* Status texts (status.h): one switch per text, over the pinned rs_status
 * values of reshard.h. */
#include "base/status.h"

const char *rsi_status_string(rs_status status) {
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
    case RS_ERR_WRONG_MEMORY: return "buffer in another kind of memory";
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

const char *rsi_status_name(rs_status status) {
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
    NAME(RS_ERR_WRONG_MEMORY)
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
