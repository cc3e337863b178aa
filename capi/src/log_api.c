/* SPDX-License-Identifier: Apache-2.0 */
/* rs_log_*: the process's log settings (base/log_sink.h). */
#include "base/log_sink.h"

rs_status rs_log_set_level(rs_log_level level, unsigned subsystems) {
  return rsi_log_set_level((int)level, subsystems, NULL);
}

rs_status rs_log_get_level(rs_log_level *level, unsigned *subsystems) {
  int l;
  rsi_log_get_level(&l, subsystems);
  if (level) *level = (rs_log_level)l;
  return RS_OK;
}

rs_status rs_log_set_callback(rs_log_fn fn, void *user) {
  rsi_log_set_callback(fn, user);
  return RS_OK;
}
