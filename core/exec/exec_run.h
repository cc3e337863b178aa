/* SPDX-License-Identifier: Apache-2.0 */
/* The one driver: every rank this process drives (one between processes,
 * all of them in process) runs its steps (core/plan/staging.h) as a small state
 * machine. A step begins by posting its receives, then packing (through
 * the context's copy engine, one batch per step) and posting its sends; it
 * ends, once the transport says its group is done, by unpacking what
 * arrived. The next step may begin before the current one ends when it
 * reads only source shards and the current one forwards nothing from relay
 * slots: packing round k+1 overlaps the transfers of round k.
 *
 * In process, the ranks take turns (cooperative, one thread): a pass
 * advances each rank as far as it can without waiting. There the same
 * steps post direct messages instead (transport.h's send_direct and
 * recv_direct): no packing, no unpacking, no staging for them; each end
 * posts the copies of the segment's moves with its own memory (source
 * shard, relay slot or destination shard, strided), and the transport
 * runs them at the match, one copy a move from the sender's memory into
 * the receiver's, converting on the way where the move does. Between
 * processes, a pass that makes no progress waits. */
#ifndef RS_CORE_EXEC_RUN_H
#define RS_CORE_EXEC_RUN_H

#include "copy/engine.h"
#include "plan/staging.h"

/* A segment that arrived (or will), to unpack when its step ends; none to
 * unpack when in_place (it went straight into its memory, or direct). */
typedef struct rsi_arrival {
  rsi_segment seg;
  const void *view; /* where its bytes are; NULL: it landed in place */
  bool in_place;
} rsi_arrival;

/* One rank this process drives. */
typedef struct rsi_part {
  rsi_rank_steps s;
  char *staging;         /* 2 x s.half bytes of the engine's memory */
  int64_t next, oldest;  /* next step to begin; oldest step in flight */
  int64_t since;         /* when the oldest step in flight began waiting */
  rsi_arrival *arrivals[2];
  int64_t narrivals[2], cap_arrivals[2];
  rsi_copy *direct[2]; /* this rank's side of each direct copy in flight */
  int64_t ndirect[2], cap_direct[2];
} rsi_part;

/* What every execution of a plan reuses: built at the first one. */
typedef struct rsi_driver {
  rsi_part *parts;
  int nparts;
  int64_t staging_bytes; /* allocated over all parts */
  rsi_copy *batch;       /* copies of the step being packed or unpacked */
  int64_t nbatch, cap_batch;
} rsi_driver;

/* Build the parts of the ranks this process drives that take part in the
 * plan, and their staging (through the engine). */
rs_status rsi_driver_create(const rs_plan *plan, rsi_driver **out,
                            rsi_err *err);
/* Free; staging that abandoned operations may still touch is handed to the
 * transport when the context failed. */
void rsi_driver_destroy(rsi_driver *d, rs_context *ctx);

/* Staging the driver allocated for `rank`, or -1 when it drives none. */
int64_t rsi_driver_staging(const rsi_driver *d, int rank);

/* Reset every part for a new execution. */
void rsi_driver_begin(rsi_driver *d);

/* One pass: every part advances as far as it can without waiting.
 * *finished once every part ran all its steps; *progress when anything
 * happened. */
rs_status rsi_driver_pass(rs_plan *plan, rsi_driver *d, void *queue,
                          bool *finished, bool *progress, rsi_err *err);

#endif
