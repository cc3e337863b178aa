/* Host copies of strided boxes: the pack and unpack of the executor.
 * Dimensions are merged where both sides are contiguous across them, and
 * contiguous runs are copied with memcpy. */
#ifndef RS_CORE_COPY_H
#define RS_CORE_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Copy elements [lo, hi) (row-major order of a box of extent ext) from src
 * to dst. Each side is either strided (strides in elements, base = element
 * 0 of the box) or, with strides NULL, a dense stream whose base holds
 * element lo. */
void rsi_copy_range(int ndim, const int64_t *ext, size_t esize, char *dst,
                    const int64_t *dst_strides, const char *src,
                    const int64_t *src_strides, int64_t lo, int64_t hi);

#endif
