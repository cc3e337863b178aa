/* SPDX-License-Identifier: Apache-2.0 */
/* Markers for functions that run on both sides of a CUDA build: plain C11
 * here, __host__ __device__ when nvcc compiles the file as CUDA C++. Per-
 * element and per-thread helpers that a kernel and its CPU twin share are
 * `static inline RSI_HD`. */
#ifndef RS_CORE_HD_H
#define RS_CORE_HD_H

#ifdef __CUDACC__
#define RSI_HD __host__ __device__
#define RSI_HD_COLD __host__ __device__ __noinline__
#else
#define RSI_HD
#define RSI_HD_COLD
#endif
/* Keeps nvcc from unrolling a loop over dims: code size and registers. */
#ifdef __CUDA_ARCH__
#define RSI_NO_UNROLL _Pragma("unroll 1")
#else
#define RSI_NO_UNROLL
#endif

#endif
