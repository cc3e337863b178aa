/* SPDX-License-Identifier: Apache-2.0 */
/* The transport conformance suite in process (tcase.h): the `local`
 * transport, every rank driven by this one thread, on worlds of 2, 3 and 4
 * ranks. One Criterion test per case, named after it. The in-process
 * transport declares no control channel and no checksums: the cases that
 * need them check that control and set_integrity are NULL and are
 * reported as skipped. */
#include <criterion/criterion.h>

#include "tcase.h"

static const int worlds[] = {2, 3, 4};
#define MAX_WORLD 4

static rs_status create_local(void *arg, rsi_transport **out, rsi_err *err) {
  (void)arg;
  (void)err;
  return rsi_local_transport_create(out);
}

static void run_in_process(const tc_case *c) {
  int ranks[MAX_WORLD];
  for (int r = 0; r < MAX_WORLD; r++) ranks[r] = r;
  char why[TC_WHY_BYTES] = "";
  bool skipped = false;
  for (size_t i = 0; i < sizeof worlds / sizeof *worlds; i++) {
    tc_driver d = {.transport = "local",
                   .world = worlds[i],
                   .ranks = ranks,
                   .nranks = worlds[i],
                   .has_control = false,
                   .has_integrity = false,
                   .wait_ms = 1000, /* nothing arrives later in process */
                   .create = create_local};
    tc_verdict v = tc_run(&d, c, why, sizeof why);
    cr_assert(v != TC_FAIL, "%s on %d ranks: %s", c->name, worlds[i], why);
    skipped |= v == TC_SKIP;
  }
  if (skipped) cr_skip_test("%s: %s", c->name, why);
}

#define IN_PROCESS(name, needs)       \
  Test(transport_local, name) {       \
    run_in_process(&tc_cases[TC_CASE_##name]); \
  }
TC_CASES(IN_PROCESS)
