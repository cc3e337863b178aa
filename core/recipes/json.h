/* SPDX-License-Identifier: Apache-2.0 */
/* A small, strict JSON reader for model configurations (config.json): the
 * whole of RFC 8259 (objects, arrays, strings with escapes, numbers,
 * true/false/null), no extensions (no comments, no trailing commas, no
 * NaN). The document becomes a tree of nodes in one array; the recipes read
 * the keys they know and skip the rest. Input over RSI_JSON_MAX_BYTES or
 * nested deeper than RSI_JSON_MAX_DEPTH is refused, and every error names
 * the line, column and byte where it was found, and the member it was in. */
#ifndef RS_CORE_RECIPES_JSON_H
#define RS_CORE_RECIPES_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define RSI_JSON_MAX_BYTES ((size_t)16 << 20)
#define RSI_JSON_MAX_DEPTH 64

typedef enum rsi_json_kind {
  RSI_JSON_NULL,
  RSI_JSON_BOOL,
  RSI_JSON_NUMBER,
  RSI_JSON_STRING,
  RSI_JSON_ARRAY,
  RSI_JSON_OBJECT
} rsi_json_kind;

typedef struct rsi_json_node {
  rsi_json_kind kind;
  int32_t next;  /* next member / element of the parent; -1: last */
  int32_t child; /* first member / element; -1: none */
  int32_t count; /* members / elements */
  char *key;     /* member name inside an object, else NULL */
  char *str;     /* a string's value (UTF-8, NUL-terminated) */
  double num;    /* a number's value */
  int integral;  /* the number was written without fraction or exponent */
  int boolean;
  size_t pos; /* byte offset of the value in the input */
} rsi_json_node;

typedef struct rsi_json_doc {
  rsi_json_node *n; /* n[0] is the root */
  int32_t count, cap;
} rsi_json_doc;

/* Parse len bytes of text (no NUL needed). On failure the doc is empty and
 * err says what and where (RS_ERR_INVALID_ARGUMENT; RS_ERR_NO_MEMORY). */
rs_status rsi_json_parse(const char *text, size_t len, rsi_json_doc *doc,
                         rsi_err *err);
void rsi_json_free(rsi_json_doc *doc);
/* The member `key` of object node obj: its index, -1 when absent, -2 when
 * the object names it more than once. */
int32_t rsi_json_member(const rsi_json_doc *doc, int32_t obj, const char *key);
const char *rsi_json_kind_name(rsi_json_kind kind);

#endif
