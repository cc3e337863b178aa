/* SPDX-License-Identifier: Apache-2.0 */
/* The library's log (log.h): its state, read from RESHARD_DEBUG,
 * RESHARD_DEBUG_SUBSYS and RESHARD_DEBUG_FILE at the first check, and where
 * its lines go: a callback, the file, or stderr. */
#define _GNU_SOURCE
#include "base/log_sink.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static int start(void);
static void write_line(rs_log_level level, unsigned subsys, int rank,
                       const char *text);

rsi_log_state rsi_log_library = {-1, RS_LOG_ALL, start, write_line};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rs_log_fn callback; /* under mu */
static void *callback_user;
static FILE *out;          /* under mu: NULL until the first line */
static char *file_pattern; /* RESHARD_DEBUG_FILE, or NULL */
static char host[256];     /* this host's name, read with the environment */

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
static const struct {
  const char *name;
  unsigned bit;
} subsys_names[] = {{"CONTEXT", RS_LOG_CONTEXT},     {"LAYOUT", RS_LOG_LAYOUT},
                    {"PLAN", RS_LOG_PLAN},           {"EXEC", RS_LOG_EXEC},
                    {"TRANSPORT", RS_LOG_TRANSPORT}, {"ALL", RS_LOG_ALL}};

static const char *subsys_name(unsigned bit) {
  for (size_t i = 0; i < sizeof subsys_names / sizeof *subsys_names; i++)
    if (subsys_names[i].bit == bit) return subsys_names[i].name;
  return "?";
}

/* A problem with the environment, said once on stderr (the log itself may
 * be what is misconfigured). */
static void env_warning(const char *what, const char *value,
                        const char *instead) {
  fprintf(stderr, "libreshard: %s='%s' is not understood; %s\n", what, value,
          instead);
}

static int level_from_env(void) {
  const char *v = getenv("RESHARD_DEBUG");
  if (!v || !v[0]) return RS_LOG_NONE;
  for (int l = RS_LOG_NONE; l <= RS_LOG_TRACE; l++)
    if (!strcasecmp(v, level_names[l])) return l;
  env_warning("RESHARD_DEBUG", v, "WARN, INFO or TRACE; WARN is used");
  return RS_LOG_WARN;
}

static unsigned subsys_from_env(void) {
  const char *v = getenv("RESHARD_DEBUG_SUBSYS");
  if (!v || !v[0]) return RS_LOG_ALL;
  bool invert = v[0] == '^';
  char list[256];
  snprintf(list, sizeof list, "%s", v + invert);
  unsigned bits = 0;
  char *save = NULL;
  for (char *t = strtok_r(list, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    size_t i = 0, n = sizeof subsys_names / sizeof *subsys_names;
    while (i < n && strcasecmp(t, subsys_names[i].name)) i++;
    if (i < n)
      bits |= subsys_names[i].bit;
    else
      env_warning("RESHARD_DEBUG_SUBSYS", t,
                  "the subsystems are CONTEXT, LAYOUT, PLAN, EXEC, TRANSPORT "
                  "and ALL; it is left out");
  }
  return invert ? ~bits : bits;
}

/* Runs once, before any rs_log_set_level stores (which calls start()
 * first), so that the environment never overrides a later setting. */
static void read_env(void) {
  gethostname(host, sizeof host - 1);
  if (host[0] == '\0') snprintf(host, sizeof host, "?");
  const char *f = getenv("RESHARD_DEBUG_FILE");
  if (f && f[0]) file_pattern = strdup(f);
  atomic_store(&rsi_log_library.subsys, subsys_from_env());
  atomic_store(&rsi_log_library.level, level_from_env());
}

static int start(void) {
  pthread_once(&once, read_env);
  return atomic_load(&rsi_log_library.level);
}

void rsi_log_start(void) { start(); }

/* RESHARD_DEBUG_FILE with %h (host name), %p (process id) and %% replaced. */
static FILE *open_file(void) {
  if (!file_pattern) return stderr;
  char path[4096];
  size_t n = 0;
  for (const char *p = file_pattern; *p && n + 1 < sizeof path; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p' || p[1] == '%')) {
      char part[256];
      if (p[1] == 'h')
        snprintf(part, sizeof part, "%s", host);
      else if (p[1] == 'p')
        snprintf(part, sizeof part, "%ld", (long)getpid());
      else
        snprintf(part, sizeof part, "%%");
      n += (size_t)snprintf(path + n, sizeof path - n, "%s", part);
      if (n >= sizeof path) n = sizeof path - 1;
      p++;
    } else {
      path[n++] = *p;
    }
  }
  path[n] = '\0';
  FILE *f = fopen(path, "a");
  if (!f) {
    fprintf(stderr,
            "libreshard: RESHARD_DEBUG_FILE: cannot open '%s'; logging to "
            "stderr\n",
            path);
    return stderr;
  }
  return f;
}

static void write_line(rs_log_level level, unsigned subsys, int rank,
                       const char *text) {
  pthread_mutex_lock(&mu);
  rs_log_fn fn = callback;
  void *user = callback_user;
  if (fn) {
    pthread_mutex_unlock(&mu);
    fn(user, level, subsys, rank, text);
    return;
  }
  if (!out) out = open_file();
  char who[16] = "-";
  if (rank >= 0) snprintf(who, sizeof who, "%d", rank);
  int short_host = (int)strcspn(host, "."); /* as NCCL prints it */
  fprintf(
      out, "%.*s:%ld:%ld [%s] RESHARD %s %s: %s\n", short_host, host,
      (long)getpid(), (long)syscall(SYS_gettid), who,
      level >= RS_LOG_WARN && level <= RS_LOG_TRACE ? level_names[level] : "?",
      subsys_name(subsys), text);
  fflush(out);
  pthread_mutex_unlock(&mu);
}

rs_status rsi_log_set_level(int level, unsigned subsys, rsi_err *err) {
  if (level < RS_LOG_NONE || level > RS_LOG_TRACE)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "log level %d is none of RS_LOG_NONE (0), RS_LOG_WARN, "
                    "RS_LOG_INFO, RS_LOG_TRACE (3)",
                    level);
  start(); /* the environment is read first, so that it does not win later */
  atomic_store(&rsi_log_library.subsys, subsys);
  atomic_store(&rsi_log_library.level, level);
  return RS_OK;
}

void rsi_log_get_level(int *level, unsigned *subsys) {
  int l = start();
  if (level) *level = l;
  if (subsys) *subsys = atomic_load(&rsi_log_library.subsys);
}

void rsi_log_set_callback(rs_log_fn fn, void *user) {
  pthread_mutex_lock(&mu);
  callback = fn;
  callback_user = user;
  pthread_mutex_unlock(&mu);
}
