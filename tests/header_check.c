/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled with -std=c99 and -std=c11, -Wall -Wextra -pedantic -Werror:
 * the public header must compile cleanly on its own, first of all includes,
 * and link against the library. */
#include <reshard/reshard.h>
#include <reshard/recipes.h>

#include <stdio.h>

int main(void) {
  rs_context *ctx = NULL;
  rs_status st = rs_context_create_local(1, &ctx);
  unsigned v = rs_version_number();
  if (rs_model_catalog_count() < 1) return 1;
  rs_context_destroy(ctx);
  if (st != RS_OK || v != (unsigned)RS_VERSION_NUMBER) {
    fprintf(stderr, "header check: %s, version %u\n", rs_status_name(st), v);
    return 1;
  }
  return 0;
}
