/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libreshard over NCCL: GPU memory moved between CUDA devices.
 *
 * The NCCL transport is a module (libreshard-nccl.so.0) that libreshard
 * loads when the first NCCL context is created (or the first unique id
 * made), trying in order the path in the environment variable
 * RESHARD_NCCL_MODULE if set, the folder libreshard itself was loaded
 * from, and the dynamic loader's search path; the first that loads is
 * used. The module needs NCCL (libnccl.so.2) and a CUDA driver;
 * where either is missing, creating an NCCL context returns
 * RS_ERR_UNSUPPORTED and the message says what is missing. libreshard.so
 * itself never needs CUDA or NCCL, and this header names their types only
 * in static inline helpers compiled when nccl.h was included first.
 *
 * Three ways to a context:
 *  - from a communicator the caller already has (torch's, vLLM's, its
 *    own): rs_context_create_nccl_comm, one rank per process;
 *  - from an NCCL unique id that the caller made with rs_nccl_unique_id on
 *    one rank and moved to the others however it likes (a TCP store, MPI,
 *    a file): rs_context_create_nccl_id, one rank per process;
 *  - every rank in this process, one GPU each: rs_context_create_nccl_devices.
 *
 * Buffers are bound with rs_plan_bind_memory(..., RS_MEMORY_CUDA, device).
 * rs_plan_execute_async(plan, stream) enqueues the execution on a
 * cudaStream_t (NULL: the legacy default stream) after what is already on
 * it; the destination is ready when the stream reaches that point. Every
 * execution runs on the context's own streams, ordered after the caller's
 * stream and before what the caller enqueues next on it. Between processes
 * the call first exchanges a small record with the plan's peers (host
 * wait, bounded by RS_PARAM_TIMEOUT_MS) and leaves a second exchange to
 * rs_plan_test / rs_plan_wait, which must be called before the context's
 * next execution. In one process nothing is exchanged and the next
 * execution may be enqueued at once; rs_plan_wait then blocks until the
 * stream reached the end of the last one.
 *
 * Failures: communicators are non-blocking; a wait that passes
 * RS_PARAM_TIMEOUT_MS gives RS_ERR_TIMEOUT, an NCCL error RS_ERR_TRANSPORT
 * (with NCCL's own message), rs_context_abort works from another thread;
 * then the context's communicators are aborted (ncclCommAbort) and the
 * context is done. Notices do not travel over NCCL: a peer learns of a
 * failure through its own timeout.
 *
 * Domains: by default a rank's domain is its NVLink domain, the GPU fabric
 * clique that NVML reports (GB200 NVL72 and other multi-node NVLink
 * systems), else its host. RESHARD_DOMAIN_SIZE=n or rs_context_set_domain
 * / rs_context_set_domain_size override it.
 */
#ifndef RESHARD_NCCL_H
#define RESHARD_NCCL_H

#include <reshard/reshard.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of an NCCL unique id (sizeof(ncclUniqueId)). @since 0.3 */
#define RS_NCCL_UNIQUE_ID_BYTES 128

/**
 * Write a fresh NCCL unique id into @p id (@p bytes must be
 * RS_NCCL_UNIQUE_ID_BYTES). Call it on one rank and hand the bytes to
 * every rank of the future context before rs_context_create_nccl_id.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (wrong size),
 * RS_ERR_UNSUPPORTED (the NCCL module or NCCL cannot be loaded),
 * RS_ERR_TRANSPORT (NCCL failed; its message is kept). @since 0.3
 */
RS_API rs_status rs_nccl_unique_id(void *id, size_t bytes);

/**
 * Create a context of @p world_size ranks, this process being @p rank on
 * CUDA device @p device, from the unique id @p id (RS_NCCL_UNIQUE_ID_BYTES
 * bytes, the same on every rank). Collective: every rank calls it. The
 * context creates and owns its communicators and destroys them with
 * itself. Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (sizes,
 * rank outside the world, a device that does not exist, a malformed
 * RESHARD_DOMAIN_SIZE),
 * RS_ERR_UNSUPPORTED (NCCL, the module, a CUDA driver or a device is
 * missing; the message says which), RS_ERR_TIMEOUT (not every rank joined
 * within 60 s), RS_ERR_TRANSPORT, RS_ERR_NO_MEMORY. @since 0.3
 */
RS_API rs_status rs_context_create_nccl_id(const void *id, size_t bytes,
                                           int rank, int world_size,
                                           int device, rs_context **out);

/**
 * Create a context on the caller's communicator @p comm (an ncclComm_t),
 * one rank per process, its rank and size and device those of @p comm.
 * Collective over @p comm: the context splits its own communicators from
 * it (ncclCommSplit), so its traffic never mixes with the caller's, and
 * never destroys or aborts @p comm itself. Call it with the device of
 * @p comm current. Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT
 * (@p comm is not usable, a malformed RESHARD_DOMAIN_SIZE),
 * RS_ERR_UNSUPPORTED, RS_ERR_TIMEOUT,
 * RS_ERR_TRANSPORT, RS_ERR_NO_MEMORY. @since 0.3
 */
RS_API rs_status rs_context_create_nccl_comm(void *comm, rs_context **out);

/**
 * Create a context whose @p ndevices ranks all live in this process, rank
 * i on CUDA device @p devices[i] (distinct devices), as ncclCommInitAll
 * does: one host process reshards between its own GPUs. rs_context_rank
 * is RS_ALL_RANKS; every rank's buffers are bound in this process.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (no device, a
 * device twice or out of range, a malformed RESHARD_DOMAIN_SIZE),
 * RS_ERR_UNSUPPORTED, RS_ERR_TIMEOUT (the communicators were not all made
 * within 60 s), RS_ERR_TRANSPORT, RS_ERR_NO_MEMORY. @since 0.3
 */
RS_API rs_status rs_context_create_nccl_devices(const int *devices,
                                                int ndevices,
                                                rs_context **out);

#ifdef __cplusplus
}
#endif

/* Take the real type when the caller has nccl.h. */
#if defined(NCCL_H_) || defined(RESHARD_WITH_NCCL_H)
#include <nccl.h>
static inline rs_status rs_context_create_nccl(ncclComm_t comm,
                                               rs_context **out) {
  return rs_context_create_nccl_comm((void *)comm, out);
}
#endif

#endif /* RESHARD_NCCL_H */
