/* SPDX-License-Identifier: Apache-2.0 */
/* Status texts: the short description and the enumerator's name of every
 * rs_status, for the core (messages that quote another rank's status) and
 * (through thin wrappers) for rs_status_string / rs_status_name. */
#ifndef RS_CORE_STATUS_H
#define RS_CORE_STATUS_H

#include <reshard/reshard.h>

/* Short, static description ("box outside its tensor"); "unknown status"
 * for a value that names no status. Never NULL. */
const char *rsi_status_string(rs_status status);

/* The enumerator's name ("RS_ERR_OUT_OF_BOUNDS"); "RS_ERR_UNKNOWN" for a
 * value that names no status. Never NULL. */
const char *rsi_status_name(rs_status status);

#endif
