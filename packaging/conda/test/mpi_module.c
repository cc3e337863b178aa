/* SPDX-License-Identifier: Apache-2.0 */
/* libreshard-mpi's package test: libreshard finds its MPI transport module
 * (libreshard-mpi.so.<major>) in its own folder. One process, an MPI
 * singleton, makes an MPI context over MPI_COMM_WORLD and destroys it. */
#include <mpi.h>
#include <reshard/reshard_mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  rs_context *ctx = NULL;
  rs_status st = rs_context_create_mpi(MPI_COMM_WORLD, &ctx);
  if (st != RS_OK) {
    fprintf(stderr, "rs_context_create_mpi: %s: %s\n", rs_status_name(st),
            rs_last_error());
    MPI_Finalize();
    return 1;
  }
  rs_context_destroy(ctx);
  MPI_Finalize();
  printf("libreshard %s made an MPI context\n", rs_version_string());
  return 0;
}
