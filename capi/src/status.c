/* SPDX-License-Identifier: Apache-2.0 */
/* Status texts, dtype facts, the per-thread error fallback, rs_free: thin
 * wrappers over the core (status.h, dtype.h, error.h). */
#include <stdlib.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/status.h"

const char *rs_status_string(rs_status status) {
  return rsi_status_string(status);
}

const char *rs_status_name(rs_status status) { return rsi_status_name(status); }

const char *rs_last_error(void) { return rsi_thread_err()->msg; }

size_t rs_dtype_size(rs_dtype dtype) { return rsi_dtype_size(dtype); }

const char *rs_dtype_name(rs_dtype dtype) { return rsi_dtype_name(dtype); }

void rs_free(void *ptr) { free(ptr); }
