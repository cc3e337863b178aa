/* SPDX-License-Identifier: Apache-2.0 */
/* The MPI entry points. They live in libreshard itself and hand the
 * communicator to the core, which loads the MPI transport module on first
 * use (core/transport/module.c), so this file names no MPI type. */
#include "api.h"
#include "base/context.h"
#include "session/open.h"
#include "layout/layout.h"
#include "transport/transport.h"

#include <reshard/reshard_mpi.h>

rs_status rs_context_create_mpi_fortran(int64_t fcomm, rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_mpi_fortran");
  *out = NULL;
  rsi_module_args args = rsi_module_args_init();
  args.engine = fcomm;
  return rsi_context_create_module("mpi", RS_TRANSPORT_MPI, &args, out, err);
}

rs_status rs_layout_allgather(rs_layout *layout) {
  API_REQUIRE(layout, rsi_thread_err(), "rs_layout_allgather");
  return rsi_layout_allgather(layout);
}
