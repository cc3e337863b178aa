/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 as libreshard takes it from callers: tensor names must be
 * well-formed UTF-8 without control characters (rsi_layout_add_tensor), so
 * that they go into JSON and error messages as they are, and error messages
 * escape whatever is not (rsi_fail). "Well-formed" is RFC 3629: shortest
 * form only, no surrogates, nothing above U+10FFFF. */
#ifndef RS_CORE_UTF8_H
#define RS_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length (1..4) of the well-formed UTF-8 character that starts the n bytes
 * at s (n >= 1); 0 when they do not start with one (a stray continuation
 * byte, an overlong form, a surrogate, a code point above U+10FFFF, or a
 * character cut short). A NUL byte counts as a character of length 1. */
size_t rsi_utf8_char_len(const unsigned char *s, size_t n);

/* An ASCII control byte: below 0x20, or DEL (0x7f). */
static inline bool rsi_is_control_byte(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

#endif
