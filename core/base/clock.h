/* SPDX-License-Identifier: Apache-2.0 */
/* The one clock of the core and its transport modules: monotonic
 * milliseconds for timeouts, nanoseconds for durations, and the short sleep
 * between looks at something not done yet. */
#ifndef RS_CORE_CLOCK_H
#define RS_CORE_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC: only differences mean anything. */
int64_t rsi_now_ms(void);

/* Nanoseconds of CLOCK_MONOTONIC, for how long something took. */
int64_t rsi_now_ns(void);

/* A short sleep between looks at a wait (20 us). */
void rsi_pause(void);

#endif
