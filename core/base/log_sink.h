/* SPDX-License-Identifier: Apache-2.0 */
/* The library's log state and its settings (log_sink.c); libreshard only,
 * never a transport module. */
#ifndef RS_CORE_LOG_SINK_H
#define RS_CORE_LOG_SINK_H

#include "base/error.h"
#include "base/log.h"

/* The library's state (rsi_log_now points to it). */
extern rsi_log_state rsi_log_library;

/* Read the environment now, if not yet done. */
void rsi_log_start(void);

/* rs_log_set_level, rs_log_get_level, rs_log_set_callback. */
rs_status rsi_log_set_level(int level, unsigned subsys, rsi_err *err);
void rsi_log_get_level(int *level, unsigned *subsys);
void rsi_log_set_callback(rs_log_fn fn, void *user);

#endif
