/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the C API layer: argument checks that record where the
 * failure happened. */
#ifndef RS_CAPI_API_H
#define RS_CAPI_API_H

#include "base/error.h"

#define API_REQUIRE(ptr, err, fn)                                         \
  do {                                                                    \
    if (!(ptr))                                                           \
      return RSI_FAIL((err), RS_ERR_NULL_POINTER, "%s: '%s' is NULL", fn, \
                      #ptr);                                              \
  } while (0)

#endif
