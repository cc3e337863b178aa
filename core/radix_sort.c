#include "radix_sort.h"

#include <string.h>

static uint64_t word(const rsi_keyed *k, int w) { return w ? k->hi : k->lo; }

void rsi_radix_sort(rsi_keyed *v, rsi_keyed *tmp, int64_t n) {
  if (n < 2) return;
  /* bits that differ between some two records, per key word */
  uint64_t any[2] = {0, 0}, all[2] = {~0ull, ~0ull};
  for (int64_t i = 0; i < n; i++) {
    any[0] |= v[i].lo;
    all[0] &= v[i].lo;
    any[1] |= v[i].hi;
    all[1] &= v[i].hi;
  }
  rsi_keyed *from = v, *to = tmp;
  for (int w = 0; w < 2; w++) { /* lo first: least significant */
    uint64_t varies = any[w] ^ all[w];
    for (int shift = 0; shift < 64; shift += 8) {
      if (!((varies >> shift) & 0xff)) continue;
      int64_t count[256] = {0};
      for (int64_t i = 0; i < n; i++)
        count[(word(&from[i], w) >> shift) & 0xff]++;
      int64_t at = 0;
      for (int b = 0; b < 256; b++) {
        int64_t c = count[b];
        count[b] = at;
        at += c;
      }
      for (int64_t i = 0; i < n; i++)
        to[count[(word(&from[i], w) >> shift) & 0xff]++] = from[i];
      rsi_keyed *t = from;
      from = to;
      to = t;
    }
  }
  if (from != v) memcpy(v, from, (size_t)n * sizeof *v);
}
