/* SPDX-License-Identifier: Apache-2.0 */
/* The layout wire format: what one rank sends the others in
 * rs_layout_allgather. Little-endian, versioned, size-checked:
 *
 *   "RSLAYOUT" u32 version(=1) u32 rank u64 total_bytes
 *   u32 ntensors, then per tensor: u32 name_len, name bytes (no NUL),
 *       i32 dtype, i32 ndim, i64 shape[ndim]
 *   u64 nshards, then per shard: u32 tensor (index above), i32 rank,
 *       i32 buffer, i64 byte_offset, i64 offset[ndim], extent[ndim],
 *       strides[ndim]
 *   u64 checksum (FNV-1a 64 of every byte before it)
 *
 * Decoding checks every length against what is left before reading, and
 * adds what it read through the same validation as the public calls. */
#ifndef RS_CORE_WIRE_H
#define RS_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "layout/layout.h"

/* Version 2 adds, after the shards, the block-scale declarations
 * (rs_layout_set_block_scales); a layout without any is written as
 * version 1, byte for byte what 0.3 wrote. Both are read. */
#define RSI_WIRE_VERSION 2u
#define RSI_WIRE_VERSION_PLAIN 1u
#define RSI_WIRE_ANY_SENDER (-2)

/* Encode every tensor and shard of layout; *out is malloc'd. */
rs_status rsi_wire_encode(const rs_layout *layout, int rank, void **out,
                          size_t *len, rsi_err *err);

/* Decode bytes sent by rank `from` (RSI_WIRE_ANY_SENDER: whoever) into
 * layout: tensors new to it are declared (through rsi_layout_add_tensor,
 * so names follow its rule), known ones must agree (RS_ERR_MISMATCH),
 * shards are added. Malformed bytes give RS_ERR_CORRUPT. The work is linear
 * in len. On failure the layout may hold part of the bytes: callers take
 * them back (rsi_wire_merge does). */
rs_status rsi_wire_decode(rs_layout *layout, int from, const void *bytes,
                          size_t len, rsi_err *err);

/* Decode several encodings (counts[i] bytes each, back to back, the i-th
 * sent by rank i, or by anyone when from_any) into layout, all or nothing.
 * from_any: added to what layout holds, in place, and on failure rolled
 * back to the counts it had (rs_layout_deserialize), so the work is linear
 * in the bytes, not in the layout. Otherwise the encodings replace what
 * layout holds (rs_layout_allgather, whose encodings include its own). */
rs_status rsi_wire_merge(rs_layout *layout, const void *bytes,
                         const size_t *counts, int n, bool from_any,
                         rsi_err *err);

/* rsi_wire_merge's replacing half in two steps, for a caller that must
 * learn whether its peers decoded theirs before it changes anything: the
 * encodings decoded into a fresh layout of ctx (*out), then that layout's
 * contents put in place of l's (fresh is destroyed). */
rs_status rsi_wire_decode_fresh(rs_context *ctx, const void *bytes,
                                const size_t *counts, int n, rs_layout **out,
                                rsi_err *err);
void rsi_wire_replace(rs_layout *l, rs_layout *fresh);

#endif
