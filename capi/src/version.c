/* SPDX-License-Identifier: Apache-2.0 */
/* The version of the loaded library: the RS_VERSION_* macros of reshard.h
 * (which CMake reads too), and the core's text of them (version.h). */
#include <reshard/reshard.h>

#include "base/version.h"

unsigned rs_version_number(void) { return RS_VERSION_NUMBER; }
unsigned rs_version_major(void) { return RS_VERSION_MAJOR; }
unsigned rs_version_minor(void) { return RS_VERSION_MINOR; }
unsigned rs_version_patch(void) { return RS_VERSION_PATCH; }
const char *rs_version_string(void) { return rsi_version_string(); }
