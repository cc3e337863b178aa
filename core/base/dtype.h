/* SPDX-License-Identifier: Apache-2.0 */
/* Element types: the size and the name of every rs_dtype, for the core
 * and (through thin wrappers) for rs_dtype_size / rs_dtype_name. */
#ifndef RS_CORE_DTYPE_H
#define RS_CORE_DTYPE_H

#include <stddef.h>

#include <reshard/reshard.h>

/* Bytes of one element; 0 for a value that names no dtype. */
size_t rsi_dtype_size(rs_dtype dtype);

/* Lower-case name ("bf16"); "unknown" for a value that names no dtype.
 * Static storage. */
const char *rsi_dtype_name(rs_dtype dtype);

#endif
