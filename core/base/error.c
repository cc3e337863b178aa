/* SPDX-License-Identifier: Apache-2.0 */
/* Error recording (error.h). A message is formatted, then copied into the
 * record with every control byte and every byte outside well-formed UTF-8
 * written as \xNN, so that a name echoed back (an unknown tensor, bytes
 * from the wire) can never put raw control bytes or invalid UTF-8 into what
 * callers print or hand to JSON; then the file and line are appended. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "base/utf8.h"

static _Thread_local rsi_err thread_err;

rsi_err *rsi_thread_err(void) { return &thread_err; }

/* Copy the NUL-terminated src into dst (cap bytes, always terminated),
 * escaping what must not be stored; a character or escape that would not
 * fit is left out with all that follows. Returns the length written. */
static size_t copy_escaped(char *dst, size_t cap, const char *src) {
  const unsigned char *s = (const unsigned char *)src;
  size_t n = strlen(src), at = 0, out = 0;
  while (at < n) {
    size_t k = rsi_utf8_char_len(s + at, n - at);
    if (k && !rsi_is_control_byte(s[at])) {
      if (out + k >= cap) break;
      memcpy(dst + out, s + at, k);
      out += k;
      at += k;
    } else {
      if (out + 4 >= cap) break;
      snprintf(dst + out, 5, "\\x%02x", s[at]);
      out += 4;
      at++;
    }
  }
  dst[out] = '\0';
  return out;
}

rs_status rsi_fail(rsi_err *err, rs_status status, const char *file, int line,
                   const char *fmt, ...) {
  if (!err) err = &thread_err;
  char raw[RSI_ERR_MSG_BYTES]; /* fmt's arguments may point into err->msg */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  err->status = status;
  size_t n = copy_escaped(err->msg, sizeof err->msg, raw);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  snprintf(err->msg + n, sizeof err->msg - n, " [%s:%d]", base, line);
  if (rsi_log_on(RS_LOG_WARN, RS_LOG_ALL)) {
    unsigned subsys = rsi_log_subsys_of(file);
    if (rsi_log_on(RS_LOG_WARN, subsys))
      rsi_log_emit(RS_LOG_WARN, subsys, -1, "%s: %s", rsi_status_name(status),
                   err->msg);
  }
  return status;
}
