/* SPDX-License-Identifier: Apache-2.0 */
/* Logging, the part every object that logs carries (log.h): the state
 * pointer, formatting, a failure's subsystem. The library's state and its
 * sinks are log_sink.c's. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Defined in libreshard (log_sink.c); absent from a transport module,
 * where the weak reference is NULL until rsi_log_adopt. */
extern rsi_log_state rsi_log_library __attribute__((weak));

rsi_log_state *rsi_log_now = &rsi_log_library;

void rsi_log_adopt(rsi_log_state *library) { rsi_log_now = library; }

void rsi_log_emit(rs_log_level level, unsigned subsys, int rank,
                  const char *fmt, ...) {
  rsi_log_state *s = rsi_log_now;
  if (!s || !s->write) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  for (char *c = text; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  s->write(level, subsys, rank, text);
}

unsigned rsi_log_subsys_of(const char *file) {
  static const struct {
    const char *part;
    unsigned subsys;
  } by_path[] = {
      {"/transport/", RS_LOG_TRANSPORT}, {"mpi_api", RS_LOG_TRANSPORT},
      {"nccl_api", RS_LOG_TRANSPORT},    {"/layout/", RS_LOG_LAYOUT},
      {"layout_api", RS_LOG_LAYOUT},     {"/recipes/", RS_LOG_LAYOUT},
      {"recipes_api", RS_LOG_LAYOUT},    {"/plan/", RS_LOG_PLAN},
      {"plan_api", RS_LOG_PLAN},         {"/exec/", RS_LOG_EXEC},
      {"/copy/", RS_LOG_EXEC},           {"exec_api", RS_LOG_EXEC},
  };
  for (size_t i = 0; i < sizeof by_path / sizeof *by_path; i++)
    if (strstr(file, by_path[i].part)) return by_path[i].subsys;
  return RS_LOG_CONTEXT;
}
