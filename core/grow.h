/* SPDX-License-Identifier: Apache-2.0 */
/* Growable arrays: one way to make room, doubling. */
#ifndef RS_CORE_GROW_H
#define RS_CORE_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Make room for `need` items of `size` bytes in *items, whose capacity is
 * *cap (doubling from `first`). RS_ERR_NO_MEMORY leaves both unchanged. */
rs_status rsi_grow(void **items, int64_t *cap, int64_t need, size_t size,
                   int64_t first, rsi_err *err);

#endif
