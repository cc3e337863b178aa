/* SPDX-License-Identifier: Apache-2.0 */
/* The strict JSON reader of the recipes (core/recipes/json.c): values of
 * every kind, escapes, and refusals that name where the input went wrong
 * (truncated, trailing commas, bad numbers and escapes, deep nesting, too
 * much input). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "recipes/json.h"

static rs_status parse(const char *text, rsi_json_doc *doc, rsi_err *err) {
  return rsi_json_parse(text, strlen(text), doc, err);
}

Test(json, values_of_every_kind) {
  rsi_json_doc d;
  rsi_err err;
  const char *text =
      " {\"a\": 1, \"b\": -2.5e3, \"c\": \"x\\n\\u00e9\\ud83d\\ude00\","
      " \"d\": [true, false, null, {}], \"e\": {\"f\": []}}\n";
  cr_assert_eq(parse(text, &d, &err), RS_OK, "%s", err.msg);
  cr_expect_eq(d.n[0].kind, RSI_JSON_OBJECT);
  cr_expect_eq(d.n[0].count, 5);
  int32_t a = rsi_json_member(&d, 0, "a"), b = rsi_json_member(&d, 0, "b");
  int32_t c = rsi_json_member(&d, 0, "c"), x = rsi_json_member(&d, 0, "d");
  cr_assert(a >= 0 && b >= 0 && c >= 0 && x >= 0);
  cr_expect_eq(d.n[a].num, 1);
  cr_expect(d.n[a].integral);
  cr_expect_eq(d.n[b].num, -2500);
  cr_expect(!d.n[b].integral);
  cr_expect_str_eq(d.n[c].str, "x\n\xc3\xa9\xf0\x9f\x98\x80");
  cr_expect_eq(d.n[x].kind, RSI_JSON_ARRAY);
  cr_expect_eq(d.n[x].count, 4);
  int32_t first = d.n[x].child;
  cr_expect_eq(d.n[first].kind, RSI_JSON_BOOL);
  cr_expect(d.n[first].boolean);
  cr_expect_eq(rsi_json_member(&d, 0, "nope"), -1);
  rsi_json_free(&d);
}

Test(json, a_key_given_twice_is_found_twice) {
  rsi_json_doc d;
  rsi_err err;
  cr_assert_eq(parse("{\"k\": 1, \"k\": 2}", &d, &err), RS_OK);
  cr_expect_eq(rsi_json_member(&d, 0, "k"), -2);
  rsi_json_free(&d);
}

/* Bad input: its status, and a needle the message must hold. */
static void refused(const char *text, const char *needle) {
  rsi_json_doc d;
  rsi_err err;
  memset(&err, 0, sizeof err);
  rs_status st = parse(text, &d, &err);
  cr_expect_eq(st, RS_ERR_INVALID_ARGUMENT, "accepted: %s", text);
  cr_expect(strstr(err.msg, needle) != NULL, "'%s' not in: %s", needle,
            err.msg);
  cr_expect_eq(d.count, 0);
  cr_expect_null(d.n);
}

Test(json, bad_input_names_where) {
  refused("", "ends where a value");
  refused("{\"a\": 1", "ends inside an object");
  refused("{\"a\": [1, 2", "ends inside an array");
  refused("{\"a\": \"abc", "unterminated string");
  refused("{\"a\": 1,}", "trailing comma");
  refused("[1, 2,]", "trailing comma");
  refused("{\"a\" 1}", "expected ':'");
  refused("{a: 1}", "member name in quotes");
  refused("{\"a\": 01}", "expected ',' or '}'");
  refused("{\"a\": 1.}", "no digit after '.'");
  refused("{\"a\": 1e}", "exponent");
  refused("{\"a\": -}", "bad number");
  refused("{\"a\": tru}", "unknown word");
  refused("{\"a\": NaN}", "unexpected character");
  refused("{\"a\": \"\\x\"}", "bad escape");
  refused("{\"a\": \"\\ud800\"}", "unpaired surrogate");
  refused("{\"a\": \"\\u0000\"}", "NUL");
  refused("{\"a\": \"tab\there\"}", "control character");
  refused("{\"a\": 1} {}", "more after the value");
  refused("{\"a\": 1e999}", "out of range");
  /* where: line and column, and the member it was in */
  refused("{\n  \"hidden_size\": 40x6\n}", "line 2, column 20");
  refused("{\n  \"hidden_size\": 40x6\n}", "\"hidden_size\"");
}

Test(json, deep_nesting_is_refused) {
  char deep[300];
  memset(deep, '[', 200);
  deep[200] = '\0';
  refused(deep, "deeper than 64");
  /* 64 levels are fine */
  char ok[200];
  memset(ok, '[', 64);
  memset(ok + 64, ']', 64);
  ok[128] = '\0';
  rsi_json_doc d;
  rsi_err err;
  cr_expect_eq(parse(ok, &d, &err), RS_OK, "%s", err.msg);
  rsi_json_free(&d);
}

Test(json, too_much_input_is_refused_before_reading) {
  rsi_json_doc d;
  rsi_err err;
  /* the length alone decides: the bytes are never read */
  cr_expect_eq(rsi_json_parse("{}", RSI_JSON_MAX_BYTES + 1, &d, &err),
               RS_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(err.msg, "more than") != NULL, "%s", err.msg);
}

Test(json, every_truncation_of_a_config_is_refused) {
  const char *text =
      "{\"model_type\": \"llama\", \"a\": [1, 2.5, {\"b\": \"\\u00e9\"}], "
      "\"c\": true, \"d\": null}";
  size_t n = strlen(text);
  for (size_t cut = 0; cut < n; cut++) {
    rsi_json_doc d;
    rsi_err err;
    rs_status st = rsi_json_parse(text, cut, &d, &err);
    if (st == RS_OK) rsi_json_free(&d);
    cr_expect_neq(st, RS_OK, "a prefix of %zu bytes was accepted", cut);
  }
}
