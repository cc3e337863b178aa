/* SPDX-License-Identifier: Apache-2.0 */
#include "base/clock.h"

#include <time.h>

int64_t rsi_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rsi_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void rsi_pause(void) {
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}
