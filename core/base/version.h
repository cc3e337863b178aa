/* SPDX-License-Identifier: Apache-2.0 */
/* The library's version as text, for the core (the plan JSON names it) and
 * for rs_version_string. The numbers themselves are the RS_VERSION_*
 * macros of reshard.h, the one place they are written; CMake reads them
 * from there too. */
#ifndef RS_CORE_VERSION_H
#define RS_CORE_VERSION_H

/* "MAJOR.MINOR.PATCH"; static storage. */
const char *rsi_version_string(void);

#endif
