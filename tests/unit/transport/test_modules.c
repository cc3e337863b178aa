/* SPDX-License-Identifier: Apache-2.0 */
/* Transport modules and the contexts made on them (core/transport/module.c,
 * core/transport/module.c, core/session/open.c): which names the loader accepts, where it looks and what
 * it says when nothing is there, one load per name shared by every caller
 * and thread, the versioned creation arguments a module refuses, and the
 * domains a context assembled on a transport gets. The MPI module, where
 * the build made one (TH_MPI_MODULE), stands in for a module that loads. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/context.h"
#include "session/open.h"
#include "transport/transport.h"

static bool has(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

static void expect_load_fails(const char *name, rs_status want,
                              const char *says1, const char *says2) {
  rsi_err err = {0};
  const rsi_module *m = (const rsi_module *)&err;
  rs_status st = rsi_module_load(name, &m, &err);
  cr_assert_eq(st, want, "load '%s': %s, want %s (%s)", name,
               rs_status_name(st), rs_status_name(want), err.msg);
  cr_assert_null(m, "load '%s' failed but gave a module", name);
  cr_assert(has(err.msg, says1), "message '%s' lacks '%s'", err.msg, says1);
  if (says2)
    cr_assert(has(err.msg, says2), "message '%s' lacks '%s'", err.msg, says2);
}

/* ------------------------------------------------------------ names */

Test(module_names, outside_a_z_0_9_underscore_are_refused) {
  const char *bad[] = {"MPI", "a-b", "../mpi", "mpi.so", "mp i", "nccl\n",
                       "/etc/passwd", "\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_load_fails(bad[i], RS_ERR_INVALID_ARGUMENT, "[a-z0-9_]", NULL);
}

Test(module_names, empty_and_overlong_are_refused) {
  expect_load_fails("", RS_ERR_INVALID_ARGUMENT, "0 bytes", NULL);
  char longname[64];
  memset(longname, 'a', 33);
  longname[33] = '\0';
  expect_load_fails(longname, RS_ERR_INVALID_ARGUMENT, "33 bytes", NULL);
}

/* ------------------------------------------------------- not there */

Test(module_search, missing_module_names_file_and_variable) {
  unsetenv("RESHARD_NO_SUCH_2_MODULE");
  expect_load_fails("no_such_2", RS_ERR_UNSUPPORTED,
                    "libreshard-no_such_2.so.0", "RESHARD_NO_SUCH_2_MODULE");
}

Test(module_search, variable_is_tried_first_and_named) {
  setenv("RESHARD_NOSUCH_MODULE", "/nonexistent/x/libreshard-nosuch.so.0", 1);
  rsi_err err = {0};
  const rsi_module *m;
  cr_assert_eq(rsi_module_load("nosuch", &m, &err), RS_ERR_UNSUPPORTED);
  const char *env = strstr(err.msg, "/nonexistent/x/libreshard-nosuch.so.0");
  const char *dir = strstr(err.msg, ", libreshard-nosuch.so.0");
  cr_assert(env && dir && env < dir, "tried in order: %s", err.msg);
}

Test(module_search, a_library_that_is_no_module_is_named_so) {
  setenv("RESHARD_LIBC_MODULE", "libc.so.6", 1);
  expect_load_fails("libc", RS_ERR_UNSUPPORTED, "libc.so.6 exports no rsi_module_libc",
                    NULL);
}

/* ------------------------------------------- a module that loads: MPI */

/* Point RESHARD_MPI_MODULE at the module the build made (TH_MPI_MODULE,
 * its path, given by CMake), or skip. */
static void use_built_mpi_module(void) {
#ifdef TH_MPI_MODULE
  const char *path = TH_MPI_MODULE;
#else
  const char *path = "(none: the build made no MPI module)";
#endif
  if (access(path, F_OK) != 0) cr_skip_test("no MPI module at %s", path);
  setenv("RESHARD_MPI_MODULE", path, 1);
}

static const rsi_module *load_mpi(void) {
  rsi_err err = {0};
  const rsi_module *m = NULL;
  cr_assert_eq(rsi_module_load("mpi", &m, &err), RS_OK, "%s", err.msg);
  cr_assert_not_null(m);
  cr_assert_eq(m->abi, RSI_MODULE_ABI);
  cr_assert_str_eq(m->name, "mpi");
  return m;
}

Test(module_cache, one_load_per_name) {
  use_built_mpi_module();
  const rsi_module *a = load_mpi();
  setenv("RESHARD_MPI_MODULE", "/nonexistent/libreshard-mpi.so.0", 1);
  cr_assert_eq(load_mpi(), a, "a second load is the first one");
}

static void *load_in_thread(void *arg) {
  rsi_err err = {0};
  const rsi_module *m = NULL;
  rs_status st = rsi_module_load("mpi", &m, &err);
  *(const rsi_module **)arg = st == RS_OK ? m : NULL;
  return NULL;
}

Test(module_cache, threads_share_one_load) {
  use_built_mpi_module();
  enum { N = 8 };
  pthread_t t[N];
  const rsi_module *got[N];
  for (int i = 0; i < N; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, load_in_thread, &got[i]), 0);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N; i++) {
    cr_assert_not_null(got[i], "thread %d", i);
    cr_assert_eq(got[i], got[0], "thread %d got another module", i);
  }
}

/* ------------------------------------------------ creation arguments */

static void expect_args_refused(rsi_module_args a, rs_status want,
                                const char *says) {
  rsi_err err = {0};
  rs_status st = rsi_module_args_check(&a, "test", &err);
  cr_assert_eq(st, want, "%s (%s)", rs_status_name(st), err.msg);
  cr_assert(has(err.msg, says), "message '%s' lacks '%s'", err.msg, says);
}

Test(module_args, current_version_is_accepted) {
  rsi_module_args a = rsi_module_args_init();
  rsi_err err = {0};
  cr_assert_eq(rsi_module_args_check(&a, "test", &err), RS_OK, "%s", err.msg);
  cr_assert_eq(a.size, sizeof a);
  cr_assert_eq(a.version, RSI_MODULE_ARGS_VERSION);
  cr_assert_eq(a.rank, -1);
  cr_assert_eq(a.world, -1);
  cr_assert_eq(a.device, -1);
  cr_assert_eq(a.engine, 0);
  cr_assert_null(a.engine_id);
  cr_assert_null(a.queue);
  cr_assert_null(a.devices);
  cr_assert_eq(a.ndevices, 0);
}

Test(module_args, unknown_version_small_size_options_are_refused) {
  rsi_module_args a = rsi_module_args_init();
  a.version = RSI_MODULE_ARGS_VERSION + 1;
  char says[32];
  snprintf(says, sizeof says, "was given version %u",
           RSI_MODULE_ARGS_VERSION + 1);
  expect_args_refused(a, RS_ERR_INVALID_ARGUMENT, says);
  a = rsi_module_args_init();
  a.version = 0;
  expect_args_refused(a, RS_ERR_INVALID_ARGUMENT, "was given version 0");
  a = rsi_module_args_init();
  a.size = 8;
  expect_args_refused(a, RS_ERR_INVALID_ARGUMENT, "(8 bytes)");
  a = rsi_module_args_init();
  a.options = 4;
  expect_args_refused(a, RS_ERR_INVALID_ARGUMENT, "options 0x4");
  rsi_err err = {0};
  cr_assert_eq(rsi_module_args_check(NULL, "test", &err),
               RS_ERR_NULL_POINTER);
}

Test(module_args, the_mpi_module_refuses_before_touching_mpi) {
  use_built_mpi_module();
  const rsi_module *m = load_mpi();
  rsi_module_args a = rsi_module_args_init();
  a.version = 7;
  rsi_err err = {0};
  rsi_transport *tp = (rsi_transport *)&err;
  int rank = 5, world = 5, *hosts = NULL;
  cr_assert_eq(m->create(&a, &tp, &rank, &world, &hosts, &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(has(err.msg, "'mpi'") && has(err.msg, "version 7"), "%s",
            err.msg);
  a = rsi_module_args_init();
  cr_assert_eq(m->create(&a, &tp, &rank, &world, &hosts, &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert(has(err.msg, "not initialized"), "%s", err.msg);
}

/* ------------------------------------------------ context assembly */

static int *domains_of(const int *host_of, int block, int world) {
  rsi_transport *tp;
  cr_assert_eq(rsi_local_transport_create(&tp), RS_OK);
  rs_context *ctx = NULL;
  cr_assert_eq(rsi_context_assemble(RS_TRANSPORT_LOCAL, tp, RS_ALL_RANKS,
                                    world, host_of, block, &ctx),
               RS_OK);
  int *d = malloc((size_t)world * sizeof *d);
  memcpy(d, ctx->domain_of, (size_t)world * sizeof *d);
  cr_assert_eq(ctx->world_size, world);
  cr_assert_eq(ctx->transport, tp);
  rsi_context_unref(ctx); /* destroys tp */
  return d;
}

Test(context_assembly, domains_from_hosts_block_or_rank) {
  const int hosts[6] = {0, 0, 2, 2, 4, 4};
  int *d = domains_of(hosts, 0, 6);
  for (int r = 0; r < 6; r++) cr_assert_eq(d[r], hosts[r], "rank %d", r);
  free(d);
  d = domains_of(hosts, 3, 6); /* the block wins over the hosts */
  for (int r = 0; r < 6; r++) cr_assert_eq(d[r], r / 3, "rank %d", r);
  free(d);
  d = domains_of(NULL, 0, 6);
  for (int r = 0; r < 6; r++) cr_assert_eq(d[r], r, "rank %d", r);
  free(d);
}

Test(context_assembly, domain_size_variable_is_checked_before_loading) {
  setenv("RESHARD_DOMAIN_SIZE", "0", 1);
  rsi_module_args a = rsi_module_args_init();
  rsi_err err = {0};
  rs_context *ctx = (rs_context *)&err;
  cr_assert_eq(rsi_context_create_module("nosuch", RS_TRANSPORT_MPI, &a, &ctx,
                                         &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_assert_null(ctx);
  cr_assert(has(err.msg, "RESHARD_DOMAIN_SIZE='0'"), "%s", err.msg);
  setenv("RESHARD_DOMAIN_SIZE", "2", 1);
  cr_assert_eq(rsi_context_create_module("nosuch", RS_TRANSPORT_MPI, &a, &ctx,
                                         &err),
               RS_ERR_UNSUPPORTED);
  cr_assert_null(ctx);
  cr_assert(has(err.msg, "RESHARD_NOSUCH_MODULE"), "%s", err.msg);
}
