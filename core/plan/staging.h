/* SPDX-License-Identifier: Apache-2.0 */
/* How a plan's messages become steps and staging: one set of rules that
 * the planner's figures and the executor's allocation both follow, so that
 * RS_STAT_STAGING_BYTES is what an execution allocates.
 *
 * A rank's messages (plan order) are cut into steps at every change of
 * (round, stage). Inside a message, a move of at least RSI_DIRECT_BYTES is
 * a segment of its own, and travels straight from the sender's memory or
 * into the receiver's when that memory is one contiguous run; consecutive
 * smaller moves are packed together into one segment (each 16-aligned in
 * it). A segment that does not go straight needs RSI_ALIGN64(bytes) of
 * staging at that end.
 *
 * Staging is two halves; step i uses half i % 2. A stage-0 step's half
 * holds, first, the relay slots of its round (bytes that cross into the
 * domain and are forwarded in stage 1), then its segments; a stage-1 step
 * reads those slots from the previous step's half and puts its own
 * segments in its half. A half is as large as the largest step needs, so a
 * rank allocates 2 x half. The planner keeps every round of every rank
 * within half the staging setting (each move charged, at each end,
 * nothing where it is a segment of its own that goes straight, else
 * RSI_ALIGN64 of its bytes, and RSI_ALIGN64 of its bytes again for a relay
 * slot), so 2 x half never exceeds the setting.
 *
 * In process, segments between ranks go direct (transport.h: one copy from
 * the sender's memory into the receiver's) and leave their staging unused;
 * only relay slots are written there. The halves are sized and allocated
 * by these rules all the same, so that a plan's figures do not depend on
 * the transport of the context it was made on (the reshard tool plans a
 * cluster on an in-process context). */
#ifndef RS_CORE_STAGING_H
#define RS_CORE_STAGING_H

#include <stdbool.h>

#include "plan/plan.h"

#define RSI_DIRECT_BYTES ((int64_t)64 * 1024)
#define RSI_ALIGN16(x) (((x) + 15) / 16 * 16)
#define RSI_ALIGN64(x) (((x) + 63) / 64 * 64)

/* Moves [first, first + n) of a message, packed size `bytes`; `single`: one
 * large move. */
typedef struct rsi_segment {
  int64_t first, n, bytes;
  bool single;
} rsi_segment;

/* The segment of msg starting at move `at`. */
rsi_segment rsi_segment_at(const rs_plan *plan, const rsi_message *msg,
                           int64_t at);

/* Whether the memory of move m at one end (the sender's when src) is one
 * contiguous run: a segment of that one move travels straight from or into
 * it. The planner stores both ends in m->contiguous when it makes m. */
bool rsi_move_contiguous(const rs_plan *plan, const rsi_move *m, bool src);

/* Whether a box of extent ext inside shard `shard` of `side` (RS_SIDE_SRC
 * or RS_SIDE_DST) is one contiguous run of its memory. */
bool rsi_shard_box_contiguous(const rs_plan *plan, int side, int64_t shard,
                              int ndim, const int64_t *ext);

/* Staging a segment needs at one end: 0 when it goes straight. */
int64_t rsi_segment_staging(const rs_plan *plan, const rsi_segment *g,
                            bool src);

/* One step of one rank. */
typedef struct rsi_step {
  int32_t round, stage;
  int64_t first, n;    /* into the rank's message list */
  int64_t relay_bytes; /* relay slots at the start of its half (stage 0) */
  int64_t seg_bytes;   /* staging of its segments, after the relay slots */
  bool reads_dst;      /* sends bytes that arrived in an earlier round */
  bool reads_relay;    /* forwards from the previous step's relay slots */
} rsi_step;

/* One rank's steps: msgs[] holds the indices of the messages that touch it
 * (plan order), steps[] cuts them; half is the size of one staging half. */
typedef struct rsi_rank_steps {
  int rank;
  int64_t *msgs, nmsgs;
  rsi_step *steps;
  int64_t nsteps, half;
  int64_t cap_msgs, cap_steps;
} rsi_rank_steps;

/* The steps of every rank in `ranks` (n of them, ascending), in one pass
 * over the plan. out[] has n entries; free each with rsi_rank_steps_free. */
rs_status rsi_build_steps(const rs_plan *plan, const int *ranks, int n,
                          rsi_rank_steps *out, rsi_err *err);
void rsi_rank_steps_free(rsi_rank_steps *s);

/* The staging half of every rank (world entries), in one pass. */
rs_status rsi_staging_halves(const rs_plan *plan, int64_t *half,
                             rsi_err *err);

#endif
