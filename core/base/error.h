/* SPDX-License-Identifier: Apache-2.0 */
/* Error recording: a status is returned, a message is recorded (with the
 * file and line that raised it), and the caller's buffers are left alone. */
#ifndef RS_CORE_ERROR_H
#define RS_CORE_ERROR_H

#include <reshard/reshard.h>

#define RSI_ERR_MSG_BYTES 768

typedef struct rsi_err {
  rs_status status;
  char msg[RSI_ERR_MSG_BYTES];
} rsi_err;

/* Record status and a printf-style message into err (or into this thread's
 * fallback when err is NULL); returns status. The stored message holds no
 * control byte and only well-formed UTF-8: any other byte the formatted
 * text holds (from a name, say) is stored as \xNN. */
rs_status rsi_fail(rsi_err *err, rs_status status, const char *file, int line,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* This thread's fallback record. */
rsi_err *rsi_thread_err(void);

#define RSI_FAIL(err, status, ...) \
  rsi_fail((err), (status), __FILE__, __LINE__, __VA_ARGS__)

/* Return from the calling function when expr yields an error status. */
#define RSI_TRY(expr)                         \
  do {                                        \
    rs_status rsi_try_status_ = (expr);       \
    if (rsi_try_status_ != RS_OK) return rsi_try_status_; \
  } while (0)

#define RSI_NOMEM(err) RSI_FAIL((err), RS_ERR_NO_MEMORY, "out of memory")

#endif
