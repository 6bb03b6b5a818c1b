/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"

static int check(const char *text, const char **method, json_t **params, json_t **id, char *why)
{
	json_t *req = json_loads(text, JSON_DECODE_ANY, NULL);
	int r;

	assert_non_null(req);
	r = up_jsonrpc_check_request(req, method, params, id, why, 256);
	json_decref(req); /* the out pointers are borrowed: only compare before this in callers */
	return r;
}

static void expect_invalid(const char *text, const char *want_why)
{
	const char *method;
	json_t *params, *id;
	char why[256] = "";

	assert_int_equal(check(text, &method, &params, &id, why), -EINVAL);
	assert_string_equal(why, want_why);
}

static void test_valid(void **state)
{
	json_t *req = json_loads(
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"a.b\",\"params\":{\"x\":1}}", 0, NULL);
	const char *method;
	json_t *params, *id;
	char why[256];

	(void)state;
	assert_int_equal(up_jsonrpc_check_request(req, &method, &params, &id, why, sizeof(why)), 0);
	assert_string_equal(method, "a.b");
	assert_int_equal(json_integer_value(id), 7);
	assert_int_equal(json_integer_value(json_object_get(params, "x")), 1);
	json_decref(req);
}

static void test_notification(void **state)
{
	json_t *req = json_loads("{\"jsonrpc\":\"2.0\",\"method\":\"n\"}", 0, NULL);
	const char *method;
	json_t *params, *id;
	char why[256];

	(void)state;
	assert_int_equal(up_jsonrpc_check_request(req, &method, &params, &id, why, sizeof(why)), 0);
	assert_null(id);
	assert_null(params);
	json_decref(req);
}

static void test_invalid(void **state)
{
	(void)state;
	expect_invalid("[1]", "a request must be a JSON object");
	expect_invalid("1", "a request must be a JSON object");
	expect_invalid("{\"method\":\"x\"}", "'jsonrpc' must be \"2.0\"");
	expect_invalid("{\"jsonrpc\":\"1.0\",\"method\":\"x\"}", "'jsonrpc' must be \"2.0\"");
	expect_invalid("{\"jsonrpc\":\"2.0\"}", "'method' must be a string");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":1}", "'method' must be a string");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"s\"}",
		       "'params' must be an object or an array");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":{}}",
		       "'id' must be a string, an integer or null");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1.5}",
		       "'id' must be a string, an integer or null");
	expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"extra\":1}",
		       "unknown member 'extra' in the request");
}

static void test_builders(void **state)
{
	json_t *id = json_string("abc");
	json_t *r;
	char *line;
	size_t len;

	(void)state;
	r = up_jsonrpc_result(id, json_pack("{s:i}", "ok", 1));
	line = up_json_dump_line(r, &len);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"result\":{\"ok\":1}}\n");
	assert_int_equal(len, strlen(line));
	free(line);
	json_decref(r);

	r = up_jsonrpc_errorf(NULL, UP_ERR_SESSION_NOT_FOUND, "no session %s", "abc");
	line = up_json_dump_line(r, NULL);
	assert_string_equal(
		line,
		"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32010,"
		"\"message\":\"no session abc\",\"data\":{\"name\":\"SESSION_NOT_FOUND\"}}}\n");
	free(line);
	json_decref(r);

	r = up_jsonrpc_error(id, UP_ERR_PARSE_ERROR, NULL);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "error"), "message")),
		up_error_message(UP_ERR_PARSE_ERROR));
	json_decref(r);

	r = up_jsonrpc_request("daemon.status", NULL, 3);
	line = up_json_dump_line(r, NULL);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"method\":\"daemon.status\",\"id\":3}\n");
	free(line);
	json_decref(r);

	r = up_jsonrpc_notification("session.progress", json_pack("{s:s}", "phase", "BUILDING"));
	assert_null(json_object_get(r, "id"));
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "params"), "phase")),
		"BUILDING");
	json_decref(r);
	json_decref(id);
}

static void test_join(void **state)
{
	json_t *a = json_pack("[s, i, s, s]", "one", 2, "three", "");
	char *s;

	(void)state;
	s = up_json_join(a, "\n");
	assert_string_equal(s, "one\nthree\n");
	free(s);
	json_decref(a);
	a = json_array();
	s = up_json_join(a, ", ");
	assert_string_equal(s, "");
	free(s);
	json_decref(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),	cmocka_unit_test(test_notification),
		cmocka_unit_test(test_invalid), cmocka_unit_test(test_builders),
		cmocka_unit_test(test_join),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
