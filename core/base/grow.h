/* SPDX-License-Identifier: Apache-2.0 */
/* Growable arrays: one way to make room, doubling. */
#ifndef RS_CORE_GROW_H
#define RS_CORE_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Make room for `need` items of `size` bytes in *items, whose capacity is
 * *cap (doubling from `first`). RS_ERR_NO_MEMORY leaves both unchanged. */
rs_status rsi_grow(void **items, int64_t *cap, int64_t need, size_t size,
                   int64_t first, rsi_err *err);

/* rsi_grow, but to a capacity of at most `most` (>= need): near a limit
 * on memory, the doubling stops at what the limit still allows. */
rs_status rsi_grow_at_most(void **items, int64_t *cap, int64_t need,
                           size_t size, int64_t first, int64_t most,
                           rsi_err *err);

#endif
