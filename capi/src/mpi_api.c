/* The MPI entry points. They live in libreshard itself and load the MPI
 * module on first use, so this file names no MPI type. */
#include <stdlib.h>

#include "api.h"
#include "context.h"
#include "layout.h"
#include "transport/transport.h"

#include <reshard/reshard_mpi.h>

/* RESHARD_DOMAIN_SIZE=n: consecutive blocks of n ranks; 0 when unset. */
static int domain_size_from_env(rsi_err *err, rs_status *st) {
  const char *v = getenv("RESHARD_DOMAIN_SIZE");
  *st = RS_OK;
  if (!v || !v[0]) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || n < 1 || n > (1 << 24)) {
    *st = RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                   "RESHARD_DOMAIN_SIZE='%s' is not a whole number of ranks "
                   "from 1 to %d",
                   v, 1 << 24);
    return 0;
  }
  return (int)n;
}

rs_status rs_context_create_mpi_fortran(int64_t fcomm, rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_mpi_fortran");
  *out = NULL;
  rs_status st;
  int block = domain_size_from_env(err, &st);
  if (st != RS_OK) return st;
  const rsi_module *m;
  RSI_TRY(rsi_module_load("mpi", &m, err));
  rsi_transport *tp;
  int rank, world, *hosts;
  RSI_TRY(m->create(fcomm, &tp, &rank, &world, &hosts, err));
  rs_context *ctx;
  st = rsi_context_create(world, rank, RS_TRANSPORT_MPI, tp, &ctx);
  if (st != RS_OK) {
    tp->ops->destroy(tp);
    free(hosts);
    return st;
  }
  for (int r = 0; r < world; r++)
    ctx->domain_of[r] = block ? r / block : hosts[r];
  free(hosts);
  *out = ctx;
  return RS_OK;
}

rs_status rs_layout_allgather(rs_layout *layout) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_allgather");
  return rsi_layout_allgather(layout);
}
