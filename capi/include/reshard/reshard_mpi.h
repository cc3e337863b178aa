/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libreshard over MPI: one rank per MPI process.
 *
 * The MPI transport is a module (libreshard-mpi.so) that libreshard loads
 * when the first MPI context is created: from the path in the environment
 * variable RESHARD_MPI_MODULE if set, else from the folder libreshard itself
 * was loaded from, else through the dynamic loader's search path. So
 * libreshard.so needs no MPI library to load, and this header is the only
 * one that names MPI types.
 *
 * libreshard never calls MPI_Init or MPI_Finalize: initialize MPI first
 * (any thread level; libreshard calls MPI only from the thread that calls
 * it) and keep it initialized while contexts exist.
 */
#ifndef RESHARD_MPI_H
#define RESHARD_MPI_H

#include <reshard/reshard.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a context over the communicator whose Fortran handle is @p fcomm
 * (MPI_Comm_c2f(comm) in C, comm.py2f() in mpi4py). Collective over the
 * communicator. The context duplicates the communicator, so its traffic
 * never mixes with the caller's. Every rank's domain defaults to its host
 * (ranks that share memory); the environment variable RESHARD_DOMAIN_SIZE=n
 * (or rs_context_set_domain_size) puts consecutive blocks of n ranks in a
 * domain instead, to model NVLink domains on one machine. Creation waits
 * for every rank of the communicator at most RESHARD_TIMEOUT_MS (60 s when
 * unset; since 0.5), except inside MPI_Comm_split_type, which MPI offers
 * only blocking and which runs once every rank has joined.
 * The caller owns *out (rs_context_destroy, which is not collective).
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNSUPPORTED (the MPI module cannot be
 * loaded; the message says where it looked), RS_ERR_INVALID_ARGUMENT (MPI
 * not initialized, a bad communicator, or RESHARD_DOMAIN_SIZE set to other
 * than a whole number from 1 to 2^24), RS_ERR_TIMEOUT (a rank did not
 * join), RS_ERR_TRANSPORT, RS_ERR_NO_MEMORY.
 * Details in rs_last_error(). @since 0.1
 */
RS_API rs_status rs_context_create_mpi_fortran(int64_t fcomm,
                                               rs_context **out);

/* rs_layout_allgather, which shares the ranks' shards, is declared in
 * reshard.h: it serves every transport with one rank per process. */

#ifdef __cplusplus
}
#endif

/* Convert a C communicator, when the caller has mpi.h. */
#if defined(MPI_VERSION) || defined(RESHARD_WITH_MPI_H)
#include <mpi.h>
static inline rs_status rs_context_create_mpi(MPI_Comm comm, rs_context **out) {
  return rs_context_create_mpi_fortran((int64_t)MPI_Comm_c2f(comm), out);
}
#endif

#endif /* RESHARD_MPI_H */
