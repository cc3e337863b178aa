#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local rsi_err thread_err;

rsi_err *rsi_thread_err(void) { return &thread_err; }

rs_status rsi_fail(rsi_err *err, rs_status status, const char *file, int line,
                   const char *fmt, ...) {
  if (!err) err = &thread_err;
  err->status = status;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n < sizeof err->msg) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    snprintf(err->msg + n, sizeof err->msg - (size_t)n, " [%s:%d]", base,
             line);
  }
  return status;
}
