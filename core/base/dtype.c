/* SPDX-License-Identifier: Apache-2.0 */
/* Element types (dtype.h): one switch per fact, over the pinned rs_dtype
 * values of reshard.h. */
#include "base/dtype.h"

size_t rsi_dtype_size(rs_dtype dtype) {
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

const char *rsi_dtype_name(rs_dtype dtype) {
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
