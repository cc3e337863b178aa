/* SPDX-License-Identifier: Apache-2.0 */
#include "base/grow.h"

#include <stdlib.h>

rs_status rsi_grow(void **items, int64_t *cap, int64_t need, size_t size,
                   int64_t first, rsi_err *err) {
  return rsi_grow_at_most(items, cap, need, size, first, INT64_MAX, err);
}

rs_status rsi_grow_at_most(void **items, int64_t *cap, int64_t need,
                           size_t size, int64_t first, int64_t most,
                           rsi_err *err) {
  if (need <= *cap) return RS_OK;
  int64_t c = *cap ? *cap : first;
  while (c < need) c *= 2;
  if (c > most) c = most;
  void *p = realloc(*items, (size_t)c * size);
  if (!p) return RSI_NOMEM(err);
  *items = p;
  *cap = c;
  return RS_OK;
}
