// SPDX-License-Identifier: Apache-2.0
// Compiled with g++ -std=c++11 -Wall -Wextra -pedantic -Werror: the public
// header must be usable from C++ (extern "C", no C-only constructs).
#include <reshard/reshard.h>
#include <reshard/recipes.h>

#include <cstdio>

int main() {
  rs_context *ctx = nullptr;
  rs_status st = rs_context_create_local(2, &ctx);
  unsigned v = rs_version_number();
  if (rs_model_catalog_count() < 1) return 1;
  rs_dtype dt = RS_DTYPE_BF16;
  size_t es = rs_dtype_size(dt);
  rs_context_destroy(ctx);
  if (st != RS_OK || v != static_cast<unsigned>(RS_VERSION_NUMBER) ||
      es != 2) {
    std::fprintf(stderr, "header check: %s\n", rs_status_name(st));
    return 1;
  }
  return 0;
}
