/* SPDX-License-Identifier: Apache-2.0 */
/* The bad-input catalog, contexts: world sizes out of range, NULL handles
 * and NULL out-pointers of every context call, domains of unknown ranks
 * and negative domains. One table: each case names its malformed input and
 * asserts the exact rs_status, the message (on the context when there is
 * one, else on the thread) with the offending value, and that every
 * out-pointer it was given is cleared. */
#include "th_bad_input.h"

#include <string.h>

static rs_context *ctx; /* world 3 */

static void fx_setup(void) {
  cr_assert_eq(rs_context_create_local(3, &ctx), RS_OK);
}

static void fx_teardown(void) { rs_context_destroy(ctx); }

TestSuite(context, .init = fx_setup, .fini = fx_teardown);

typedef enum context_call {
  C_CREATE_LOCAL, /* rs_context_create_local(a, out) */
  C_WORLD_SIZE,
  C_RANK,
  C_TRANSPORT,
  C_SET_DOMAIN, /* (rank a, domain b) */
  C_GET_DOMAIN, /* (rank a) */
  C_SET_DOMAIN_SIZE, /* (a) */
  C_SET_PARAM,  /* RS_PARAM_TIMEOUT_MS = a */
  C_GET_PARAM   /* RS_PARAM_TIMEOUT_MS */
} context_call;

typedef struct context_case {
  const char *name;
  context_call call;
  int a, b;
  bool null_handle, null_out;
  rs_status want;
  const char *f1;
} context_case;

#define NUL true, false /* a NULL context */
#define OUT false, true /* a NULL out-pointer */
#define ARGS false, false

static const context_case context_cases[] = {
    {"world_size_zero", C_CREATE_LOCAL, 0, 0, ARGS, RS_ERR_INVALID_ARGUMENT,
     "0"},
    {"world_size_negative", C_CREATE_LOCAL, -3, 0, ARGS,
     RS_ERR_INVALID_ARGUMENT, "-3"},
    {"world_size_above_limit", C_CREATE_LOCAL, (1 << 24) + 1, 0, ARGS,
     RS_ERR_INVALID_ARGUMENT, "16777217"},
    {"out_null", C_CREATE_LOCAL, 2, 0, OUT, RS_ERR_NULL_POINTER, NULL},
    {"null_handles_and_outs", C_WORLD_SIZE, 0, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_WORLD_SIZE, 0, 0, OUT, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_RANK, 0, 0, NUL, RS_ERR_NULL_POINTER, NULL},
    {"null_handles_and_outs", C_RANK, 0, 0, OUT, RS_ERR_NULL_POINTER, NULL},
    {"null_handles_and_outs", C_TRANSPORT, 0, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_TRANSPORT, 0, 0, OUT, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_SET_DOMAIN, 0, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_GET_DOMAIN, 0, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_GET_DOMAIN, 0, 0, OUT, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_SET_DOMAIN_SIZE, 2, 0, NUL,
     RS_ERR_NULL_POINTER, NULL},
    {"null_handles_and_outs", C_SET_PARAM, 5, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_GET_PARAM, 0, 0, NUL, RS_ERR_NULL_POINTER,
     NULL},
    {"null_handles_and_outs", C_GET_PARAM, 0, 0, OUT, RS_ERR_NULL_POINTER,
     NULL},
    {"set_domain_rank_unknown", C_SET_DOMAIN, 3, 0, ARGS, RS_ERR_UNKNOWN_RANK,
     "3"},
    {"set_domain_rank_unknown", C_SET_DOMAIN, -4, 0, ARGS,
     RS_ERR_UNKNOWN_RANK, "-4"},
    {"set_domain_negative_domain", C_SET_DOMAIN, 1, -6, ARGS,
     RS_ERR_INVALID_ARGUMENT, "-6"},
    {"set_domain_size_zero", C_SET_DOMAIN_SIZE, 0, 0, ARGS,
     RS_ERR_INVALID_ARGUMENT, "0"},
    {"outs_cleared.context_world_size_null_ctx", C_WORLD_SIZE, 0, 0, NUL,
     RS_ERR_NULL_POINTER, NULL},
    {"outs_cleared.context_rank_null_ctx", C_RANK, 0, 0, NUL,
     RS_ERR_NULL_POINTER, NULL},
    {"outs_cleared.context_transport_null_ctx", C_TRANSPORT, 0, 0, NUL,
     RS_ERR_NULL_POINTER, NULL},
    {"outs_cleared.context_get_domain_null_ctx", C_GET_DOMAIN, 0, 0, NUL,
     RS_ERR_NULL_POINTER, NULL},
    {"outs_cleared.context_get_domain_unknown_rank", C_GET_DOMAIN, 99, 0,
     ARGS, RS_ERR_UNKNOWN_RANK, "99"},
    {"outs_cleared.context_create_local_bad_world", C_CREATE_LOCAL, 0, 0,
     ARGS, RS_ERR_INVALID_ARGUMENT, NULL},
};

TH_TABLE_TEST(context, cases, context_cases, i) {
  const context_case *c = &context_cases[*i];
  rs_context *h = c->null_handle ? NULL : ctx;
  th_outs o;
  th_outs_preset(&o);
  rs_context *made = SENTINEL;
  unsigned outs = 0;
  rs_status st = RS_OK;
  switch (c->call) {
  case C_CREATE_LOCAL:
    st = rs_context_create_local(c->a, c->null_out ? NULL : &made);
    if (!c->null_out) cr_assert_null(made, "%s: out not cleared", c->name);
    break;
  case C_WORLD_SIZE:
    st = rs_context_world_size(h, c->null_out ? NULL : &o.i[0]);
    outs = TH_OUT_I0;
    break;
  case C_RANK:
    st = rs_context_rank(h, c->null_out ? NULL : &o.i[0]);
    outs = TH_OUT_I0;
    break;
  case C_TRANSPORT:
    st = rs_context_transport(h, c->null_out ? NULL : &o.kind);
    outs = TH_OUT_KIND;
    break;
  case C_SET_DOMAIN:
    st = rs_context_set_domain(h, c->a, c->b);
    break;
  case C_GET_DOMAIN:
    st = rs_context_get_domain(h, c->a, c->null_out ? NULL : &o.i[0]);
    outs = TH_OUT_I0;
    break;
  case C_SET_DOMAIN_SIZE:
    st = rs_context_set_domain_size(h, c->a);
    break;
  case C_SET_PARAM:
    st = rs_context_set_param(h, RS_PARAM_TIMEOUT_MS, c->a);
    break;
  case C_GET_PARAM:
    st = rs_context_get_param(h, RS_PARAM_TIMEOUT_MS,
                              c->null_out ? NULL : &o.v);
    outs = TH_OUT_V;
    break;
  }
  bool on_thread = c->null_handle || c->call == C_CREATE_LOCAL;
  th_expect_case(c->name, st, c->want, RS_OK,
                 on_thread ? TH_MSG_THREAD : TH_MSG_CTX, ctx, c->f1, NULL);
  if (!c->null_out) th_expect_outs_cleared(c->name, &o, outs);
}
