/* SPDX-License-Identifier: Apache-2.0 */
/* Logging (reshard.h, "Logging"): RSI_LOG formats nothing unless its level
 * and subsystem are on. The state lives in libreshard (log_sink.c, read
 * from the environment at the first check); a transport module logs
 * through the library's, handed over when it is created (rsi_log_adopt),
 * and nothing before. */
#ifndef RS_CORE_LOG_H
#define RS_CORE_LOG_H

#include <reshard/reshard.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct rsi_log_state {
  _Atomic int level;       /* rs_log_level; -1 until the environment is read */
  _Atomic unsigned subsys; /* RS_LOG_* bits */
  int (*start)(void);      /* read the environment once; the level */
  /* Write one formatted message to the callback, the file or stderr. */
  void (*write)(rs_log_level level, unsigned subsys, int rank,
                const char *text);
} rsi_log_state;

/* This object's state: the library's, or a module's adopted one; NULL:
 * logging is off. */
extern rsi_log_state *rsi_log_now;

static inline bool rsi_log_on(rs_log_level level, unsigned subsys) {
  rsi_log_state *s = rsi_log_now;
  if (!s) return false;
  int at = atomic_load_explicit(&s->level, memory_order_relaxed);
  if (at < 0) at = s->start();
  return at >= (int)level &&
         (atomic_load_explicit(&s->subsys, memory_order_relaxed) & subsys);
}

/* Format and write a message (rsi_log_on said yes); control bytes of the
 * text are written as '?'. */
void rsi_log_emit(rs_log_level level, unsigned subsys, int rank,
                  const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#define RSI_LOG(level, subsys, rank, ...)                   \
  do {                                                      \
    if (rsi_log_on((level), (subsys)))                      \
      rsi_log_emit((level), (subsys), (rank), __VA_ARGS__); \
  } while (0)

/* A transport module: log through `library` (the library's rsi_log_now,
 * from its creation arguments; NULL stays off). */
void rsi_log_adopt(rsi_log_state *library);

/* The subsystem of a failure recorded in source file `file` (a path). */
unsigned rsi_log_subsys_of(const char *file);

#endif
