/* rs_layout_allgather: every rank sends what it added; every rank decodes
 * all contributions, in rank order, into a fresh layout, which then replaces
 * its own. Decoding validates everything, so a rank cannot slip a malformed
 * shard into the others' layouts. */
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"
#include "wire.h"

rs_status rsi_layout_allgather(rs_layout *l) {
  rs_context *ctx = l->ctx;
  rsi_err *err = ctx->err;
  rsi_transport *tp = ctx->transport;
  if (ctx->rank == RS_ALL_RANKS || !tp || !tp->control)
    return RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                    "rs_layout_allgather needs a context with one rank per "
                    "process (MPI, NCCL); this one drives every rank itself");
  RSI_TRY(rsi_context_usable(ctx));
  for (int64_t i = 0; i < l->nshards; i++)
    if (l->shards[i].rank != ctx->rank)
      return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                      "rank %d holds a shard of tensor '%s' for rank %d: "
                      "before rs_layout_allgather each rank adds only its own "
                      "shards",
                      ctx->rank, l->tensors[l->shards[i].tensor].name,
                      l->shards[i].rank);
  void *mine = NULL, *all = NULL;
  size_t len = 0;
  RSI_TRY(rsi_wire_encode(l, ctx->rank, &mine, &len, err));
  size_t *counts = malloc((size_t)ctx->world_size * sizeof *counts);
  rs_status st = counts ? RS_OK : RSI_NOMEM(err);
  if (st == RS_OK)
    st = tp->control->allgatherv(tp, mine, len, &all, counts, ctx->timeout_ms, err);
  if (st == RS_ERR_TIMEOUT || st == RS_ERR_TRANSPORT) rsi_context_fail(ctx);
  free(mine);
  if (st == RS_OK)
    st = rsi_wire_merge(l, all, counts, ctx->world_size, false, err);
  free(all);
  free(counts);
  return st;
}
