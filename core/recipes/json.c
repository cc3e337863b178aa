/* SPDX-License-Identifier: Apache-2.0 */
/* The strict JSON reader (json.h): a recursive-descent parser over a
 * byte range, building nodes into one growing array. */
#include "recipes/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  const char *s;
  size_t len, at;
  rsi_json_doc *doc;
  const char *member; /* the member being read, for messages */
  rsi_err *err;
} parser;

static rs_status fail_at(parser *p, size_t at, const char *what) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < p->len; i++) {
    if (p->s[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  if (p->member)
    return RSI_FAIL(p->err, RS_ERR_INVALID_ARGUMENT,
                    "JSON: %s at line %zu, column %zu (byte %zu), near "
                    "member \"%s\"",
                    what, line, col, at, p->member);
  return RSI_FAIL(p->err, RS_ERR_INVALID_ARGUMENT,
                  "JSON: %s at line %zu, column %zu (byte %zu)", what, line,
                  col, at);
}

static void skip_ws(parser *p) {
  while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\t' ||
                            p->s[p->at] == '\n' || p->s[p->at] == '\r'))
    p->at++;
}

static rs_status new_node(parser *p, rsi_json_kind kind, int32_t *out) {
  rsi_json_doc *d = p->doc;
  if (d->count == d->cap) {
    if (d->cap >= (1 << 24))
      return fail_at(p, p->at, "more than 16777216 values");
    int32_t cap = d->cap ? 2 * d->cap : 64;
    rsi_json_node *n = realloc(d->n, sizeof *n * (size_t)cap);
    if (!n) return RSI_NOMEM(p->err);
    d->n = n;
    d->cap = cap;
  }
  rsi_json_node *x = &d->n[d->count];
  memset(x, 0, sizeof *x);
  x->kind = kind;
  x->next = x->child = -1;
  x->pos = p->at;
  *out = d->count++;
  return RS_OK;
}

static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return 0;
  }
  *out = v;
  return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string at p->at (the opening quote); *out gets a malloc'd copy. */
static rs_status read_string(parser *p, char **out) {
  size_t start = p->at++;
  size_t end = p->at;
  while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->len) return fail_at(p, start, "unterminated string");
  /* the decoded text is never longer than the escaped one */
  char *o = malloc(end - p->at + 1);
  if (!o) return RSI_NOMEM(p->err);
  size_t n = 0;
  while (p->at < end) {
    unsigned char c = (unsigned char)p->s[p->at];
    if (c < 0x20) {
      free(o);
      return fail_at(p, p->at, "a control character inside a string");
    }
    if (c != '\\') {
      o[n++] = (char)c;
      p->at++;
      continue;
    }
    char e = p->s[p->at + 1];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char to[] = "\"\\/\b\f\n\r\t";
      o[n++] = to[simple - "\"\\/bfnrt"];
      p->at += 2;
      continue;
    }
    unsigned cp, lo;
    if (e != 'u' || p->at + 6 > end || !hex4(p->s + p->at + 2, &cp)) {
      free(o);
      return fail_at(p, p->at, "a bad escape in a string");
    }
    p->at += 6;
    if (cp >= 0xD800 && cp < 0xDC00) {
      if (p->at + 6 > end || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u' ||
          !hex4(p->s + p->at + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
        free(o);
        return fail_at(p, p->at, "an unpaired surrogate in a string");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      p->at += 6;
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      free(o);
      return fail_at(p, p->at - 6, "an unpaired surrogate in a string");
    }
    if (cp == 0) {
      free(o);
      return fail_at(p, p->at - 6, "a NUL character (\\u0000) in a string");
    }
    n += put_utf8(o + n, cp);
  }
  o[n] = '\0';
  p->at = end + 1;
  *out = o;
  return RS_OK;
}

static rs_status read_number(parser *p, int32_t node) {
  size_t i = p->at;
  const char *s = p->s;
  int integral = 1;
  if (i < p->len && s[i] == '-') i++;
  if (i < p->len && s[i] == '0') {
    i++;
  } else if (i < p->len && s[i] >= '1' && s[i] <= '9') {
    while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
  } else {
    return fail_at(p, p->at, "a bad number");
  }
  if (i < p->len && s[i] == '.') {
    integral = 0;
    i++;
    if (i >= p->len || s[i] < '0' || s[i] > '9')
      return fail_at(p, p->at, "a bad number (no digit after '.')");
    while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
    integral = 0;
    i++;
    if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= p->len || s[i] < '0' || s[i] > '9')
      return fail_at(p, p->at, "a bad number (no digit in the exponent)");
    while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
  }
  char buf[64];
  if (i - p->at >= sizeof buf)
    return fail_at(p, p->at, "a number of more than 63 characters");
  memcpy(buf, s + p->at, i - p->at);
  buf[i - p->at] = '\0';
  double v = strtod(buf, NULL);
  if (!isfinite(v)) return fail_at(p, p->at, "a number out of range");
  p->doc->n[node].num = v;
  p->doc->n[node].integral = integral;
  p->at = i;
  return RS_OK;
}

static rs_status read_value(parser *p, int depth, int32_t *out);

static rs_status read_container(parser *p, int depth, int32_t node,
                                int object) {
  char close = object ? '}' : ']';
  p->at++;
  skip_ws(p);
  const char *outer = p->member;
  int32_t last = -1;
  if (p->at < p->len && p->s[p->at] == close) {
    p->at++;
    return RS_OK;
  }
  for (;;) {
    char *key = NULL;
    if (object) {
      skip_ws(p);
      if (p->at >= p->len || p->s[p->at] != '"')
        return fail_at(p, p->at,
                       p->at >= p->len ? "the input ends inside an object"
                                       : "expected a member name in quotes");
      RSI_TRY(read_string(p, &key));
      skip_ws(p);
      if (p->at >= p->len || p->s[p->at] != ':') {
        free(key);
        return fail_at(p, p->at, "expected ':' after a member name");
      }
      p->at++;
      p->member = key;
    }
    int32_t child;
    rs_status st = read_value(p, depth + 1, &child);
    if (st != RS_OK) {
      free(key);
      return st;
    }
    rsi_json_node *n = p->doc->n;
    n[child].key = key;
    if (last < 0)
      n[node].child = child;
    else
      n[last].next = child;
    last = child;
    n[node].count++;
    skip_ws(p);
    if (p->at >= p->len)
      return fail_at(p, p->at,
                     object ? "the input ends inside an object"
                            : "the input ends inside an array");
    if (p->s[p->at] == close) {
      p->at++;
      p->member = outer;
      return RS_OK;
    }
    if (p->s[p->at] != ',')
      return fail_at(p, p->at,
                     object ? "expected ',' or '}'" : "expected ',' or ']'");
    p->member = outer;
    p->at++;
    skip_ws(p);
    if (p->at < p->len && p->s[p->at] == close)
      return fail_at(p, p->at, "a trailing comma");
  }
}

static rs_status read_value(parser *p, int depth, int32_t *out) {
  skip_ws(p);
  if (depth > RSI_JSON_MAX_DEPTH)
    return fail_at(p, p->at, "nesting deeper than 64 levels");
  if (p->at >= p->len)
    return fail_at(p, p->at,
                   "the input ends where a "
                   "value was expected");
  char c = p->s[p->at];
  int32_t node;
  static const struct {
    const char *word;
    rsi_json_kind kind;
    int b;
  } words[] = {{"true", RSI_JSON_BOOL, 1},
               {"false", RSI_JSON_BOOL, 0},
               {"null", RSI_JSON_NULL, 0}};
  for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
    size_t l = strlen(words[w].word);
    if (c == words[w].word[0]) {
      if (p->len - p->at < l || memcmp(p->s + p->at, words[w].word, l))
        return fail_at(p, p->at, "an unknown word (not true, false, null)");
      RSI_TRY(new_node(p, words[w].kind, &node));
      p->doc->n[node].boolean = words[w].b;
      p->at += l;
      *out = node;
      return RS_OK;
    }
  }
  if (c == '{' || c == '[') {
    RSI_TRY(new_node(p, c == '{' ? RSI_JSON_OBJECT : RSI_JSON_ARRAY, &node));
    *out = node;
    return read_container(p, depth, node, c == '{');
  }
  if (c == '"') {
    RSI_TRY(new_node(p, RSI_JSON_STRING, &node));
    *out = node;
    return read_string(p, &p->doc->n[node].str);
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    RSI_TRY(new_node(p, RSI_JSON_NUMBER, &node));
    *out = node;
    return read_number(p, node);
  }
  return fail_at(p, p->at,
                 "an unexpected character where a value was "
                 "expected");
}

void rsi_json_free(rsi_json_doc *doc) {
  if (!doc) return;
  for (int32_t i = 0; i < doc->count; i++) {
    free(doc->n[i].key);
    free(doc->n[i].str);
  }
  free(doc->n);
  memset(doc, 0, sizeof *doc);
}

rs_status rsi_json_parse(const char *text, size_t len, rsi_json_doc *doc,
                         rsi_err *err) {
  memset(doc, 0, sizeof *doc);
  if (len > RSI_JSON_MAX_BYTES)
    return RSI_FAIL(err, RS_ERR_INVALID_ARGUMENT,
                    "JSON: %zu bytes is more than the %zu a configuration "
                    "may have",
                    len, RSI_JSON_MAX_BYTES);
  parser p = {text, len, 0, doc, NULL, err};
  int32_t root;
  rs_status st = read_value(&p, 0, &root);
  if (st == RS_OK) {
    skip_ws(&p);
    if (p.at < p.len) st = fail_at(&p, p.at, "more after the value");
  }
  if (st != RS_OK) rsi_json_free(doc);
  return st;
}

int32_t rsi_json_member(const rsi_json_doc *doc, int32_t obj, const char *key) {
  if (obj < 0 || obj >= doc->count || doc->n[obj].kind != RSI_JSON_OBJECT)
    return -1;
  int32_t found = -1;
  for (int32_t c = doc->n[obj].child; c >= 0; c = doc->n[c].next) {
    if (strcmp(doc->n[c].key, key) != 0) continue;
    if (found >= 0) return -2;
    found = c;
  }
  return found;
}

const char *rsi_json_kind_name(rsi_json_kind kind) {
  switch (kind) {
    case RSI_JSON_NULL:
      return "null";
    case RSI_JSON_BOOL:
      return "a boolean";
    case RSI_JSON_NUMBER:
      return "a number";
    case RSI_JSON_STRING:
      return "a string";
    case RSI_JSON_ARRAY:
      return "an array";
    case RSI_JSON_OBJECT:
      return "an object";
  }
  return "?";
}
