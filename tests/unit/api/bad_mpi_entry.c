/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, MPI entry points without MPI (reshard_mpi.h): an
 * allgather on an in-process context or of a NULL layout, a NULL out, bad
 * RESHARD_DOMAIN_SIZE values, the MPI module missing, MPI not initialized.
 * Each case names its malformed input and asserts the exact rs_status, a
 * message naming the problem (the variable and its value, the module's
 * path), and that nothing was made. */
#include "th_bad_input.h"

#include <reshard/reshard_mpi.h>

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------ the calls */

typedef enum mpi_call {
  M_ALLGATHER_LOCAL, /* rs_layout_allgather of an in-process layout */
  M_ALLGATHER_NULL,  /* rs_layout_allgather(NULL) */
  M_CREATE_OUT_NULL  /* rs_context_create_mpi_fortran(0, NULL) */
} mpi_call;

typedef struct call_case {
  const char *name;
  mpi_call call;
  rs_status want;
  const char *f1;
} call_case;

static const call_case call_cases[] = {
    {"allgather_on_an_in_process_context", M_ALLGATHER_LOCAL,
     RS_ERR_UNSUPPORTED, "MPI"},
    {"allgather_null_layout", M_ALLGATHER_NULL, RS_ERR_NULL_POINTER,
     "layout"},
    {"create_out_null", M_CREATE_OUT_NULL, RS_ERR_NULL_POINTER, "out"},
};

TH_TABLE_TEST(mpi_without_mpi, calls, call_cases, i) {
  const call_case *c = &call_cases[*i];
  rs_context *ctx = NULL;
  rs_layout *l = NULL;
  rs_status st = RS_OK;
  switch (c->call) {
  case M_ALLGATHER_LOCAL:
    cr_assert_eq(rs_context_create_local(2, &ctx), RS_OK);
    cr_assert_eq(rs_layout_create(ctx, &l), RS_OK);
    cr_assert_eq(rs_layout_add_tensor(l, "t", RS_DTYPE_U8, 1, I64(4)), RS_OK);
    st = rs_layout_allgather(l);
    break;
  case M_ALLGATHER_NULL:
    st = rs_layout_allgather(NULL);
    break;
  case M_CREATE_OUT_NULL:
    st = rs_context_create_mpi_fortran(0, NULL);
    break;
  }
  th_expect_case(c->name, st, c->want, RS_OK, ctx ? TH_MSG_CTX : TH_MSG_THREAD,
                 ctx, c->f1, NULL);
  if (l) { /* the layout is as it was */
    int n = 0;
    cr_assert_eq(rs_layout_num_tensors(l, &n), RS_OK);
    cr_assert_eq(n, 1);
  }
  rs_layout_destroy(l);
  rs_context_destroy(ctx);
}

/* ---------------------------------------------- RESHARD_DOMAIN_SIZE */

typedef struct env_case {
  const char *name;
  const char *value;
} env_case;

static const env_case env_cases[] = {
    {"domain_size_env_not_a_number", "eight"},
    {"domain_size_env_zero", "0"},
    {"domain_size_env_negative", "-4"},
    {"domain_size_env_trailing_garbage", "4x"},
    {"domain_size_env_too_large", "99999999999"},
};

/* Creating an MPI context refuses the value before anything else, naming
 * the variable and the value, and makes nothing. */
TH_TABLE_TEST(mpi_without_mpi, domain_size_env, env_cases, i) {
  const env_case *c = &env_cases[*i];
  rs_context *ctx = SENTINEL;
  setenv("RESHARD_DOMAIN_SIZE", c->value, 1);
  char want[64];
  snprintf(want, sizeof want, "RESHARD_DOMAIN_SIZE='%s'", c->value);
  rs_status st = rs_context_create_mpi_fortran(0, &ctx);
  th_expect_case(c->name, st, RS_ERR_INVALID_ARGUMENT, RS_OK, TH_MSG_THREAD,
                 NULL, want, NULL);
  cr_assert_null(ctx, "%s: out not cleared", c->name);
}

/* ------------------------------------------------------ the MPI module */

Test(mpi_without_mpi, module_not_found) {
  rs_context *ctx = SENTINEL;
  unsetenv("RESHARD_DOMAIN_SIZE");
  setenv("RESHARD_MPI_MODULE", "/nonexistent/libreshard-mpi.so.0", 1);
  rs_status st = rs_context_create_mpi_fortran(0, &ctx);
  cr_assert_null(ctx);
  if (st == RS_ERR_INVALID_ARGUMENT &&
      th_contains(rs_last_error(), "not initialized"))
    return; /* a module is installed where the loader finds it anyway */
  th_expect_fail("rs_context_create_mpi_fortran", st, RS_ERR_UNSUPPORTED,
                 RS_OK, rs_last_error(), "/nonexistent/libreshard-mpi.so.0",
                 "RESHARD_MPI_MODULE");
}

#ifdef TH_MPI_MODULE
Test(mpi_without_mpi, mpi_not_initialized) {
  rs_context *ctx = SENTINEL;
  unsetenv("RESHARD_DOMAIN_SIZE");
  setenv("RESHARD_MPI_MODULE", TH_MPI_MODULE, 1);
  EXPECT_FAIL(rs_context_create_mpi_fortran(0, &ctx), RS_ERR_INVALID_ARGUMENT,
              NULL, "not initialized", "MPI_Init");
  cr_assert_null(ctx);
}
#endif
