/* SPDX-License-Identifier: Apache-2.0 */
/* The version string (version.h), spelled out from the RS_VERSION_*
 * macros of reshard.h at compile time. */
#include "base/version.h"

#include <reshard/reshard.h>

#define RSI_STR2(x) #x
#define RSI_STR(x) RSI_STR2(x)

const char *rsi_version_string(void) {
  return RSI_STR(RS_VERSION_MAJOR) "." RSI_STR(RS_VERSION_MINOR) "." RSI_STR(
      RS_VERSION_PATCH);
}
