/* SPDX-License-Identifier: Apache-2.0 */
/* Loading transport modules: the only process-wide state in libreshard.
 *
 * A transport with an outside engine (MPI, NCCL) lives in a module of its
 * own, so that libreshard.so needs nothing but libc and pthreads to load.
 * Module `name` (lower-case letters, digits and '_') is the shared object
 * libreshard-<name>.so.<major> (libreshard-mpi.so.0: the major version is
 * libreshard's, RS_VERSION_MAJOR), exporting
 * `const rsi_module rsi_module_<name>` whose `abi` is RSI_MODULE_ABI
 * (transport.h). It is looked for, in this order, at:
 *   1. the path in the environment variable RESHARD_<NAME>_MODULE (the name
 *      upper-cased: RESHARD_MPI_MODULE, RESHARD_NCCL_MODULE), if set;
 *   2. libreshard-<name>.so.<major> in the folder libreshard itself was
 *      loaded from (the program's folder when libreshard is linked
 *      statically);
 *   3. libreshard-<name>.so.<major> through the dynamic loader's search
 *      path.
 * The first that loads is used; a failure says what was tried, why it
 * failed (the loader's reason for a file that exists, else the last
 * reason) and what to install or set (RS_ERR_UNSUPPORTED).
 *
 * A loaded module stays loaded, shared by every context, until the process
 * ends: one per name, kept in a small table under a mutex. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

#define NAME_MAX_BYTES 32 /* of a module name */
#define MAX_MODULES 8     /* distinct names loaded in one process */
#define MAX_TRIES 3
#define PATH_BYTES 1024

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char name[NAME_MAX_BYTES + 1];
  const rsi_module *module;
} loaded[MAX_MODULES];
static int nloaded;

/* The folder this code was loaded from (libreshard.so, or the program
 * that links libreshard statically). */
static bool own_folder(char *dir, size_t cap) {
  Dl_info info;
  if (!dladdr((const void *)&load_lock, &info) || !info.dli_fname) return false;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return false;
  size_t n = (size_t)(slash - info.dli_fname);
  if (n + 1 > cap) return false;
  memcpy(dir, info.dli_fname, n);
  dir[n] = '\0';
  return true;
}

static rs_status check_name(const char *name, rsi_err *err) {
  size_t n = strlen(name);
  if (n == 0 || n > NAME_MAX_BYTES)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "transport module name of %zu bytes, must be 1..%d", n,
                    NAME_MAX_BYTES);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "transport module name '%s': byte %zu is not one of "
                      "[a-z0-9_]",
                      name, i);
  }
  return RS_OK;
}

/* The candidates of `name`, in the order they are tried; *env gets the
 * name of its environment variable. */
static int candidates(const char *name, char tried[MAX_TRIES][PATH_BYTES],
                      char *env, size_t env_cap) {
  int n = 0;
  int len = snprintf(env, env_cap, "RESHARD_%s_MODULE", name);
  for (int i = 8; i < len; i++)
    if (env[i] >= 'a' && env[i] <= 'z') env[i] = (char)(env[i] - 'a' + 'A');
  const char *path = getenv(env);
  if (path && path[0]) snprintf(tried[n++], PATH_BYTES, "%s", path);
  char dir[PATH_BYTES - 64];
  if (own_folder(dir, sizeof dir))
    snprintf(tried[n++], PATH_BYTES, "%s/libreshard-%s.so.%d", dir, name,
             RS_VERSION_MAJOR);
  snprintf(tried[n++], PATH_BYTES, "libreshard-%s.so.%d", name,
           RS_VERSION_MAJOR);
  return n;
}

/* Open the first candidate that loads (its index in *which); on failure
 * *why gets the loader's reason for a file that exists (it is the one
 * meant), else the last. */
static void *open_first(char tried[MAX_TRIES][PATH_BYTES], int ntried,
                        int *which, char *why, size_t cap) {
  bool why_kept = false;
  for (int i = 0; i < ntried; i++) {
    void *handle = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
    *which = i;
    if (handle) return handle;
    const char *e = dlerror();
    if (!why_kept) snprintf(why, cap, "%s", e ? e : "unknown");
    if (strchr(tried[i], '/') && access(tried[i], F_OK) == 0) why_kept = true;
  }
  return NULL;
}

/* Load module `name` from the first candidate that opens, check what it
 * exports, and return it (not yet in the table). */
static rs_status load(const char *name, const rsi_module **out,
                      rsi_err *err) {
  char tried[MAX_TRIES][PATH_BYTES], env[NAME_MAX_BYTES + 16];
  int ntried = candidates(name, tried, env, sizeof env);
  char why[512] = "";
  int at;
  void *handle = open_first(tried, ntried, &at, why, sizeof why);
  if (!handle) {
    char list[MAX_TRIES * PATH_BYTES] = "";
    for (int i = 0; i < ntried; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
               i ? ", " : "", tried[i]);
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "cannot load the %s transport module "
                    "libreshard-%s.so.%d: install it next to libreshard or "
                    "set %s to its path (tried %s; error: %s)",
                    name, name, RS_VERSION_MAJOR, env, list, why);
  }
  char symbol[NAME_MAX_BYTES + 16];
  snprintf(symbol, sizeof symbol, "rsi_module_%s", name);
  const rsi_module *m = dlsym(handle, symbol);
  rs_status st = RS_OK;
  if (!m)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "%s exports no %s: it is not a libreshard transport "
                  "module; install libreshard's %s module or set %s",
                  tried[at], symbol, name, env);
  else if (m->abi != RSI_MODULE_ABI)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "%s is not this libreshard's %s module (module ABI %u, "
                  "expected %u); install the module of the same release or "
                  "set %s",
                  tried[at], name, m->abi, RSI_MODULE_ABI, env);
  else if (!m->name || strcmp(m->name, name) != 0 || !m->create)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "%s exports %s, but calls itself '%s' or has no create "
                  "function",
                  tried[at], symbol, m->name ? m->name : "(null)");
  if (st != RS_OK) {
    dlclose(handle);
    return st;
  }
  *out = m;
  RSI_LOG(RS_LOG_INFO, RS_LOG_TRANSPORT, -1,
          "transport module '%s' loaded from %s", name, tried[at]);
  return RS_OK;
}

rs_status rsi_module_load(const char *name, const rsi_module **out,
                          rsi_err *err) {
  *out = NULL;
  RSI_TRY(check_name(name, err));
  pthread_mutex_lock(&load_lock);
  rs_status st = RS_OK;
  for (int i = 0; i < nloaded && !*out; i++)
    if (strcmp(loaded[i].name, name) == 0) *out = loaded[i].module;
  if (!*out && nloaded == MAX_MODULES)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "cannot load the %s transport module: %d modules are "
                  "loaded already, the most one process holds",
                  name, MAX_MODULES);
  else if (!*out && (st = load(name, out, err)) == RS_OK) {
    snprintf(loaded[nloaded].name, sizeof loaded[0].name, "%s", name);
    loaded[nloaded++].module = *out;
  }
  pthread_mutex_unlock(&load_lock);
  return st;
}
