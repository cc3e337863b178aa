/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the layout wire-format decoder (rs_layout_deserialize).
 *
 * Input: one mode byte, then the bytes to decode. Mode bit 0 set: the
 * length field and the checksum are fixed up first, so that mutations reach
 * past the framing into the tensor and shard records (a random mutation
 * otherwise dies at the checksum). Checked:
 *   - the call returns RS_OK or a documented status, with a message;
 *   - a refused decode leaves the layout byte-for-byte as it was (both an
 *     empty layout and one that already holds a tensor and a shard);
 *   - accepted bytes re-encode to bytes that decode to the same layout
 *     (encode . decode is idempotent), and decoding them a second time
 *     into the same layout is accepted too. */
#include "fuzz_common.h"
#include "th_wire.h"

#define WORLD 8

static void decode_into_populated(rs_context *ctx, const uint8_t *b,
                                  size_t n) {
  rs_layout *l = NULL;
  FZ_CHECK(rs_layout_create(ctx, &l) == RS_OK, "layout_create");
  const int64_t shape[2] = {8, 6}, off[2] = {0, 0}, ext[2] = {4, 6};
  FZ_CHECK(rs_layout_add_tensor(l, "w", RS_DTYPE_F32, 2, shape) == RS_OK,
           "add_tensor");
  FZ_CHECK(rs_layout_add_shard(l, "w", 1, off, ext, 0, 0, NULL) == RS_OK,
           "add_shard");
  fz_snap before;
  fz_snap_take(l, &before);
  rs_status st = rs_layout_deserialize(l, b, n);
  fz_expect("rs_layout_deserialize(populated)", st, ctx,
            FZ_SET(FZ_DESERIALIZE_ERRS));
  if (st != RS_OK) fz_snap_same(l, &before, "rs_layout_deserialize");
  fz_snap_free(&before);
  rs_layout_destroy(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t mode = data[0];
  size_t n = size - 1;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) return 0;
  if (n) memcpy(b, data + 1, n);
  if (mode & 1) rw_reseal(b, n);

  rs_context *ctx = NULL;
  FZ_CHECK(rs_context_create_local(WORLD, &ctx) == RS_OK, "context");
  rs_layout *l = NULL;
  FZ_CHECK(rs_layout_create(ctx, &l) == RS_OK, "layout_create");

  rs_status st = rs_layout_deserialize(l, b, n);
  fz_expect("rs_layout_deserialize", st, ctx, FZ_SET(FZ_DESERIALIZE_ERRS));
  int nt = -1;
  int64_t ns = -1;
  rs_layout_num_tensors(l, &nt);
  rs_layout_num_shards(l, &ns);
  if (st != RS_OK) {
    FZ_CHECK(nt == 0 && ns == 0, "a refused decode left %d tensors and %lld "
             "shards behind", nt, (long long)ns);
  } else {
    /* encode . decode is idempotent */
    void *out = NULL;
    size_t len = 0;
    FZ_CHECK(rs_layout_serialize(l, &out, &len) == RS_OK, "serialize");
    rs_layout *again = NULL;
    FZ_CHECK(rs_layout_create(ctx, &again) == RS_OK, "layout_create");
    st = rs_layout_deserialize(again, out, len);
    FZ_CHECK(st == RS_OK, "re-encoded bytes refused: %s (%s)",
             rs_status_name(st), rs_context_last_error(ctx));
    void *out2 = NULL;
    size_t len2 = 0;
    FZ_CHECK(rs_layout_serialize(again, &out2, &len2) == RS_OK, "serialize");
    FZ_CHECK(len2 == len && memcmp(out, out2, len) == 0,
             "encode(decode(encode(x))) differs from encode(x)");
    int nt2 = -1;
    int64_t ns2 = -1;
    rs_layout_num_tensors(again, &nt2);
    rs_layout_num_shards(again, &ns2);
    FZ_CHECK(nt2 == nt && ns2 == ns, "round trip changed the counts");
    /* what the decoder accepted once it accepts again, adding the shards
     * a second time */
    st = rs_layout_deserialize(again, b, n);
    FZ_CHECK(st == RS_OK || st == RS_ERR_NO_MEMORY,
             "the same bytes decoded a second time: %s (%s)",
             rs_status_name(st), rs_context_last_error(ctx));
    if (st == RS_OK) {
      rs_layout_num_shards(again, &ns2);
      FZ_CHECK(ns2 == 2 * ns, "second decode added %lld shards, not %lld",
               (long long)(ns2 - ns), (long long)ns);
    }
    rs_free(out);
    rs_free(out2);
    rs_layout_destroy(again);
  }
  decode_into_populated(ctx, b, n);

  rs_layout_destroy(l);
  rs_context_destroy(ctx);
  free(b);
  return 0;
}
