/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, NCCL entry points (reshard_nccl.h), on any
 * machine: malformed arguments are refused before anything loads, the
 * module missing is RS_ERR_UNSUPPORTED naming where it looked, and on a
 * machine without a CUDA driver or GPU, a well-formed request is
 * RS_ERR_UNSUPPORTED saying so. Each case asserts the exact rs_status, a
 * message naming the problem, and that nothing was made. */
#include "th_bad_input.h"

#include <reshard/reshard_nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char some_id[RS_NCCL_UNIQUE_ID_BYTES];

/* ------------------------------------------------------------ the calls */

typedef enum nccl_call {
  N_ID_NULL,        /* rs_nccl_unique_id(NULL, 128) */
  N_ID_SIZE,        /* rs_nccl_unique_id(buf, 64) */
  N_FROM_ID,        /* rs_context_create_nccl_id(id, bytes, rank, world, dev) */
  N_FROM_ID_NULL,   /* rs_context_create_nccl_id(NULL, ...) */
  N_FROM_ID_OUT,    /* rs_context_create_nccl_id(..., NULL) */
  N_FROM_COMM_NULL, /* rs_context_create_nccl_comm(NULL, &ctx) */
  N_FROM_COMM_OUT,  /* rs_context_create_nccl_comm(comm, NULL) */
  N_DEVICES         /* rs_context_create_nccl_devices(devices, n) */
} nccl_call;

typedef struct call_case {
  const char *name;
  nccl_call call;
  size_t bytes;
  int rank, world, device;
  int ndevices;
  int devices[3];
  rs_status want;
  const char *f1, *f2;
} call_case;

static const call_case call_cases[] = {
    {"unique_id_null", N_ID_NULL, 128, 0, 0, 0, 0, {0}, RS_ERR_NULL_POINTER,
     "id", NULL},
    {"unique_id_wrong_size", N_ID_SIZE, 64, 0, 0, 0, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "128 bytes", "64"},
    {"from_id_null", N_FROM_ID_NULL, 128, 0, 1, 0, 0, {0}, RS_ERR_NULL_POINTER,
     "id", NULL},
    {"from_id_out_null", N_FROM_ID_OUT, 128, 0, 1, 0, 0, {0},
     RS_ERR_NULL_POINTER, "out", NULL},
    {"from_id_wrong_size", N_FROM_ID, 127, 0, 1, 0, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "128 bytes", "127"},
    {"from_id_negative_rank", N_FROM_ID, 128, -1, 2, 0, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "rank -1", "world of 2"},
    {"from_id_rank_past_world", N_FROM_ID, 128, 2, 2, 0, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "rank 2", "world of 2"},
    {"from_id_empty_world", N_FROM_ID, 128, 0, 0, 0, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "world of 0", NULL},
    {"from_id_negative_device", N_FROM_ID, 128, 0, 1, -3, 0, {0},
     RS_ERR_INVALID_ARGUMENT, "device -3", NULL},
    {"from_comm_null", N_FROM_COMM_NULL, 0, 0, 0, 0, 0, {0},
     RS_ERR_NULL_POINTER, "comm", NULL},
    {"from_comm_out_null", N_FROM_COMM_OUT, 0, 0, 0, 0, 0, {0},
     RS_ERR_NULL_POINTER, "out", NULL},
    {"devices_none", N_DEVICES, 0, 0, 0, 0, 0, {0}, RS_ERR_INVALID_ARGUMENT,
     "0 devices", NULL},
    {"devices_negative", N_DEVICES, 0, 0, 0, 0, 2, {0, -1},
     RS_ERR_INVALID_ARGUMENT, "devices[1] = -1", NULL},
    {"devices_twice", N_DEVICES, 0, 0, 0, 0, 3, {1, 0, 1},
     RS_ERR_INVALID_ARGUMENT, "device 1", "rank 0 and rank 2"},
};

TH_TABLE_TEST(nccl_entry, calls, call_cases, i) {
  const call_case *c = &call_cases[*i];
  /* Refused before the module is looked for: a missing one cannot matter. */
  setenv("RESHARD_NCCL_MODULE", "/nonexistent/libreshard-nccl.so.0", 1);
  rs_context *ctx = SENTINEL;
  unsigned char id[RS_NCCL_UNIQUE_ID_BYTES];
  memset(id, 0x5a, sizeof id);
  int fake_comm = 0;
  rs_status st = RS_OK;
  switch (c->call) {
  case N_ID_NULL:
    st = rs_nccl_unique_id(NULL, c->bytes);
    ctx = NULL;
    break;
  case N_ID_SIZE:
    st = rs_nccl_unique_id(id, c->bytes);
    for (size_t b = 0; b < sizeof id; b++)
      cr_assert_eq(id[b], 0x5a, "%s: the id buffer was written", c->name);
    ctx = NULL;
    break;
  case N_FROM_ID:
    st = rs_context_create_nccl_id(some_id, c->bytes, c->rank, c->world,
                                   c->device, &ctx);
    break;
  case N_FROM_ID_NULL:
    st = rs_context_create_nccl_id(NULL, c->bytes, 0, 1, 0, &ctx);
    break;
  case N_FROM_ID_OUT:
    st = rs_context_create_nccl_id(some_id, c->bytes, 0, 1, 0, NULL);
    ctx = NULL;
    break;
  case N_FROM_COMM_NULL:
    st = rs_context_create_nccl_comm(NULL, &ctx);
    break;
  case N_FROM_COMM_OUT:
    st = rs_context_create_nccl_comm(&fake_comm, NULL);
    ctx = NULL;
    break;
  case N_DEVICES:
    st = rs_context_create_nccl_devices(c->ndevices ? c->devices : NULL,
                                        c->ndevices, &ctx);
    if (!c->ndevices) { /* NULL devices is its own case: ask with some */
      ctx = SENTINEL;
      st = rs_context_create_nccl_devices(c->devices, 0, &ctx);
    }
    break;
  }
  th_expect_case(c->name, st, c->want, RS_OK, TH_MSG_THREAD, NULL, c->f1,
                 c->f2);
  cr_assert(ctx == NULL, "%s: out not cleared", c->name);
}

Test(nccl_entry, devices_null) {
  rs_context *ctx = SENTINEL;
  EXPECT_FAIL(rs_context_create_nccl_devices(NULL, 1, &ctx),
              RS_ERR_NULL_POINTER, NULL, "devices", NULL);
  cr_assert_null(ctx);
}

/* ----------------------------------------------------- the NCCL module */

Test(nccl_entry, module_not_found) {
  setenv("RESHARD_NCCL_MODULE", "/nonexistent/libreshard-nccl.so.0", 1);
  rs_context *ctx = SENTINEL;
  int dev = 0;
  rs_status st = rs_context_create_nccl_devices(&dev, 1, &ctx);
  cr_assert_null(ctx);
  th_expect_fail("rs_context_create_nccl_devices", st, RS_ERR_UNSUPPORTED,
                 RS_OK, rs_last_error(), "/nonexistent/libreshard-nccl.so.0",
                 "RESHARD_NCCL_MODULE");
  unsigned char id[RS_NCCL_UNIQUE_ID_BYTES];
  th_expect_fail("rs_nccl_unique_id", rs_nccl_unique_id(id, sizeof id),
                 RS_ERR_UNSUPPORTED, RS_OK, rs_last_error(),
                 "/nonexistent/libreshard-nccl.so.0", NULL);
}

#ifdef TH_NCCL_MODULE
/* The module loads (NCCL is installed), but this machine may have no CUDA
 * driver or GPU: then every way to a context says so. Where one is
 * present, the GPU tests (label gpu) cover it instead. */
static bool have_gpu(void) {
  setenv("RESHARD_NCCL_MODULE", TH_NCCL_MODULE, 1);
  rs_context *ctx = NULL;
  int dev = 0;
  rs_status st = rs_context_create_nccl_devices(&dev, 1, &ctx);
  rs_context_destroy(ctx);
  return st == RS_OK;
}

/* Making an id needs NCCL, not a GPU. */
Test(nccl_entry, unique_id_without_gpu) {
  setenv("RESHARD_NCCL_MODULE", TH_NCCL_MODULE, 1);
  unsigned char a[RS_NCCL_UNIQUE_ID_BYTES] = {0}, b[RS_NCCL_UNIQUE_ID_BYTES];
  memset(b, 0, sizeof b);
  cr_assert_eq(rs_nccl_unique_id(a, sizeof a), RS_OK, "%s", rs_last_error());
  cr_assert_eq(rs_nccl_unique_id(b, sizeof b), RS_OK, "%s", rs_last_error());
  static const unsigned char zero[RS_NCCL_UNIQUE_ID_BYTES];
  cr_assert(memcmp(a, zero, sizeof a) != 0, "the id is all zero");
  cr_assert(memcmp(a, b, sizeof a) != 0, "two ids are the same");
}

Test(nccl_entry, no_driver_is_unsupported) {
  if (have_gpu()) cr_skip_test("a GPU is present: the gpu tests cover it");
  rs_context *ctx = SENTINEL;
  int devs[2] = {0, 1};
  EXPECT_FAIL(rs_context_create_nccl_devices(devs, 2, &ctx),
              RS_ERR_UNSUPPORTED, NULL, "CUDA driver", "cudaGetDeviceCount");
  cr_assert_null(ctx);
  ctx = SENTINEL;
  EXPECT_FAIL(rs_context_create_nccl_id(some_id, sizeof some_id, 0, 2, 0,
                                        &ctx),
              RS_ERR_UNSUPPORTED, NULL, "CUDA driver", NULL);
  cr_assert_null(ctx);
}
#endif
