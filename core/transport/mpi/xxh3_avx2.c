/* SPDX-License-Identifier: Apache-2.0 */
/* XXH3-64 built for AVX2: the same function as the system libxxhash's
 * XXH3_64bits (which Debian builds for baseline x86-64, SSE2), about 2.4x
 * its speed on bytes in a cache. Compiled with -mavx2 (core/CMakeLists.txt)
 * and called only where the CPU has AVX2 (mpi.c, pick_xxh3). */
#define XXH_INLINE_ALL
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#ifndef __AVX2__
#error "xxh3_avx2.c must be compiled with -mavx2"
#endif

uint64_t rsi_xxh3_avx2(const void *p, size_t n);
uint64_t rsi_xxh3_avx2(const void *p, size_t n) { return XXH3_64bits(p, n); }
