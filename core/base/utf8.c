/* SPDX-License-Identifier: Apache-2.0 */
/* The UTF-8 well-formedness check of utf8.h: Table 3-7 of the Unicode
 * standard (the second byte's range depends on the first byte; every later
 * byte is 0x80..0xbf). */
#include "base/utf8.h"

/* The range the second byte of a sequence led by `lead` must fall in. */
static void second_byte_range(unsigned char lead, unsigned char *lo,
                              unsigned char *hi) {
  *lo = 0x80;
  *hi = 0xbf;
  if (lead == 0xe0) *lo = 0xa0;      /* no overlong 3-byte forms */
  else if (lead == 0xed) *hi = 0x9f; /* no surrogates */
  else if (lead == 0xf0) *lo = 0x90; /* no overlong 4-byte forms */
  else if (lead == 0xf4) *hi = 0x8f; /* nothing above U+10FFFF */
}

size_t rsi_utf8_char_len(const unsigned char *s, size_t n) {
  unsigned char lead = s[0];
  size_t len = lead < 0x80                 ? 1
               : lead >= 0xc2 && lead <= 0xdf ? 2
               : lead >= 0xe0 && lead <= 0xef ? 3
               : lead >= 0xf0 && lead <= 0xf4 ? 4
                                              : 0;
  if (len <= 1) return len; /* ASCII, or a byte no character starts with */
  if (len > n) return 0;
  unsigned char lo, hi;
  second_byte_range(lead, &lo, &hi);
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return len;
}
