/* SPDX-License-Identifier: Apache-2.0 */
/* The NCCL entry points. They live in libreshard itself and hand their
 * arguments to the core, which loads the NCCL transport module on first
 * use (core/transport/module.c), so this file names no CUDA or NCCL type. */
#include "api.h"
#include "base/context.h"
#include "session/open.h"
#include "transport/transport.h"

#include <reshard/reshard_nccl.h>

static rs_status id_size(size_t bytes, rsi_err *err, const char *fn) {
  if (bytes != RS_NCCL_UNIQUE_ID_BYTES)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "%s: an NCCL unique id is %d bytes, %zu were given", fn,
                    RS_NCCL_UNIQUE_ID_BYTES, bytes);
  return RS_OK;
}

rs_status rs_nccl_unique_id(void *id, size_t bytes) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(id, err, "rs_nccl_unique_id");
  RSI_TRY(id_size(bytes, err, "rs_nccl_unique_id"));
  const rsi_module *m;
  RSI_TRY(rsi_module_load("nccl", &m, err));
  if (!m->make_id)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "the NCCL module makes no unique ids");
  return m->make_id(id, bytes, err);
}

rs_status rs_context_create_nccl_id(const void *id, size_t bytes, int rank,
                                    int world_size, int device,
                                    rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_nccl_id");
  *out = NULL;
  API_REQUIRE(id, err, "rs_context_create_nccl_id");
  RSI_TRY(id_size(bytes, err, "rs_context_create_nccl_id"));
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_context_create_nccl_id: rank %d of a world of %d "
                    "(0 <= rank < world_size)",
                    rank, world_size);
  if (device < 0)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_context_create_nccl_id: CUDA device %d (>= 0)",
                    device);
  rsi_module_args args = rsi_module_args_init();
  args.engine_id = id;
  args.engine_id_bytes = bytes;
  args.rank = rank;
  args.world = world_size;
  args.device = device;
  return rsi_context_create_module("nccl", RS_TRANSPORT_NCCL, &args, out,
                                   err);
}

rs_status rs_context_create_nccl_comm(void *comm, rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_nccl_comm");
  *out = NULL;
  API_REQUIRE(comm, err, "rs_context_create_nccl_comm");
  rsi_module_args args = rsi_module_args_init();
  args.engine = (int64_t)(intptr_t)comm;
  return rsi_context_create_module("nccl", RS_TRANSPORT_NCCL, &args, out,
                                   err);
}

rs_status rs_context_create_nccl_devices(const int *devices, int ndevices,
                                         rs_context **out) {
  rsi_err *err = rsi_thread_err();
  API_REQUIRE(out, err, "rs_context_create_nccl_devices");
  *out = NULL;
  API_REQUIRE(devices, err, "rs_context_create_nccl_devices");
  if (ndevices < 1 || ndevices > 1 << 16)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "rs_context_create_nccl_devices: %d devices (1 to %d)",
                    ndevices, 1 << 16);
  for (int i = 0; i < ndevices; i++) {
    if (devices[i] < 0)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "rs_context_create_nccl_devices: devices[%d] = %d "
                      "(>= 0)",
                      i, devices[i]);
    for (int j = 0; j < i; j++)
      if (devices[j] == devices[i])
        return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                        "rs_context_create_nccl_devices: device %d is both "
                        "rank %d and rank %d (one rank per device)",
                        devices[i], j, i);
  }
  rsi_module_args args = rsi_module_args_init();
  args.devices = devices;
  args.ndevices = ndevices;
  args.world = ndevices;
  args.rank = RS_ALL_RANKS;
  return rsi_context_create_module("nccl", RS_TRANSPORT_NCCL, &args, out,
                                   err);
}
