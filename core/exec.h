/* The executor: checks a plan's bindings, then moves every message: pack
 * from the sender's memory into staging, exchange through the transport,
 * unpack into the receiver's memory. Moves inside one rank are copied
 * directly. */
#ifndef RS_CORE_EXEC_H
#define RS_CORE_EXEC_H

#include "plan.h"

rs_status rsi_plan_bind(rs_plan *plan, rs_side side, int rank, int buffer,
                        void *ptr, size_t bytes);
rs_status rsi_plan_execute(rs_plan *plan);

#endif
