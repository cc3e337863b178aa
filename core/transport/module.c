/* Loading transport modules. The only process-wide state in libreshard:
 * a loaded module stays loaded (and is shared by every context) until the
 * process ends, guarded by a mutex. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static const rsi_module *loaded_mpi;

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

rs_status rsi_module_load(const char *name, const rsi_module **out,
                          rsi_err *err) {
  if (strcmp(name, "mpi") != 0)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED, "no transport module '%s'", name);
  pthread_mutex_lock(&load_lock);
  if (loaded_mpi) {
    *out = loaded_mpi;
    pthread_mutex_unlock(&load_lock);
    return RS_OK;
  }
  char tried[3][1024];
  int ntried = 0;
  const char *env = getenv("RESHARD_MPI_MODULE");
  if (env && env[0]) snprintf(tried[ntried++], sizeof tried[0], "%s", env);
  char dir[900];
  if (own_folder(dir, sizeof dir))
    snprintf(tried[ntried++], sizeof tried[0], "%s/libreshard-mpi.so.0", dir);
  snprintf(tried[ntried++], sizeof tried[0], "libreshard-mpi.so.0");
  void *handle = NULL;
  char why[512] = "";
  for (int i = 0; i < ntried && !handle; i++) {
    handle = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(why, sizeof why, "%s", dlerror());
  }
  const rsi_module *m = handle ? dlsym(handle, "rsi_module_mpi") : NULL;
  rs_status st = RS_OK;
  if (!handle)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "cannot load the MPI transport module (tried %s%s%s%s%s; "
                  "last error: %s); install libreshard's MPI module or set "
                  "RESHARD_MPI_MODULE",
                  tried[0], ntried > 1 ? ", " : "", ntried > 1 ? tried[1] : "",
                  ntried > 2 ? ", " : "", ntried > 2 ? tried[2] : "", why);
  else if (!m || m->abi != RSI_MODULE_ABI)
    st = RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                  "the MPI transport module found is not this libreshard's "
                  "(module ABI %u, expected %u)",
                  m ? m->abi : 0, RSI_MODULE_ABI);
  if (st == RS_OK)
    loaded_mpi = m;
  else if (handle)
    dlclose(handle);
  *out = loaded_mpi;
  pthread_mutex_unlock(&load_lock);
  return st;
}
