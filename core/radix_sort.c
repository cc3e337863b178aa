#include "radix_sort.h"

#include <string.h>

static uint64_t word(const rsi_keyed *k, int w) { return w ? k->hi : k->lo; }

void rsi_radix_sort(rsi_keyed *v, rsi_keyed *tmp, int64_t n) {
  if (n < 2) return;
  /* Every digit's counts from one read of the records (counting in each
   * digit's own pass read them twice a digit): digit d is byte d % 8 of
   * lo for d < 8, then of hi. */
  int64_t count[16][256];
  memset(count, 0, sizeof count);
  for (int64_t i = 0; i < n; i++) {
    uint64_t lo = v[i].lo, hi = v[i].hi;
    for (int d = 0; d < 8; d++) {
      count[d][(lo >> (d * 8)) & 0xff]++;
      count[8 + d][(hi >> (d * 8)) & 0xff]++;
    }
  }
  rsi_keyed *from = v, *to = tmp;
  for (int d = 0; d < 16; d++) { /* lo first: least significant */
    int w = d / 8, shift = d % 8 * 8;
    /* a digit every record shares orders nothing */
    if (count[d][(word(&v[0], w) >> shift) & 0xff] == n) continue;
    int64_t at = 0;
    for (int b = 0; b < 256; b++) {
      int64_t c = count[d][b];
      count[d][b] = at;
      at += c;
    }
    for (int64_t i = 0; i < n; i++)
      to[count[d][(word(&from[i], w) >> shift) & 0xff]++] = from[i];
    rsi_keyed *t = from;
    from = to;
    to = t;
  }
  if (from != v) memcpy(v, from, (size_t)n * sizeof *v);
}
