/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "params.h"

struct p {
	const char *name;
	int64_t count;
	bool wait;
	json_t *filter;
	json_t *ids;
	json_t *args;
	const char *maybe;
};

static int check_positive(const char *name, json_t *v, void *field, char *why, size_t len)
{
	(void)field;
	if (json_integer_value(v) <= 0)
		return snprintf(why, len, "parameter '%s' must be positive", name), -EINVAL;
	return 0;
}

static const struct up_param table[] = {
	{"name", UP_PARAM_STRING, offsetof(struct p, name), UP_PARAM_MANDATORY, NULL},
	{"count", UP_PARAM_INT, offsetof(struct p, count), 0, check_positive},
	{"wait", UP_PARAM_BOOL, offsetof(struct p, wait), 0, NULL},
	{"filter", UP_PARAM_OBJECT, offsetof(struct p, filter), 0, NULL},
	{"ids", UP_PARAM_STRV, offsetof(struct p, ids), 0, NULL},
	{"args", UP_PARAM_ARRAY, offsetof(struct p, args), 0, NULL},
	{"maybe", UP_PARAM_STRING, offsetof(struct p, maybe), UP_PARAM_NULLABLE, NULL},
	{0},
};

static int run(const char *text, struct p *out, char *why)
{
	json_t *params = text ? json_loads(text, 0, NULL) : NULL;
	int r;

	if (text)
		assert_non_null(params);
	*out = (struct p){0};
	r = up_params_dispatch(table, params, out, why, 256);
	json_decref(params);
	return r;
}

static void expect(const char *text, const char *want)
{
	struct p out;
	char why[256] = "";

	assert_int_equal(run(text, &out, why), -EINVAL);
	assert_string_equal(why, want);
}

static void test_ok(void **state)
{
	json_t *params = json_loads("{\"name\":\"x\",\"count\":3,\"wait\":true,\"filter\":{},"
				    "\"ids\":[\"a\",\"b\"],\"args\":[1,\"z\"],\"maybe\":null}",
				    0, NULL);
	struct p out = {.maybe = "set"};
	char why[256];

	(void)state;
	assert_int_equal(up_params_dispatch(table, params, &out, why, sizeof(why)), 0);
	assert_string_equal(out.name, "x");
	assert_int_equal(out.count, 3);
	assert_true(out.wait);
	assert_true(json_is_object(out.filter));
	assert_int_equal(json_array_size(out.ids), 2);
	assert_int_equal(json_array_size(out.args), 2);
	assert_null(out.maybe);
	json_decref(params);
}

static void test_errors(void **state)
{
	(void)state;
	expect("{\"name\":\"x\",\"bogus\":1}", "unknown parameter 'bogus'");
	expect("{}", "missing parameter 'name'");
	expect(NULL, "missing parameter 'name'");
	expect("{\"name\":3}", "parameter 'name' must be a string, not an integer");
	expect("{\"name\":\"x\",\"count\":\"3\"}",
	       "parameter 'count' must be an integer, not a string");
	expect("{\"name\":\"x\",\"count\":1.5}",
	       "parameter 'count' must be an integer, not a number with a fraction");
	expect("{\"name\":\"x\",\"wait\":1}", "parameter 'wait' must be a boolean, not an integer");
	expect("{\"name\":\"x\",\"filter\":[]}",
	       "parameter 'filter' must be an object, not an array");
	expect("{\"name\":\"x\",\"ids\":[\"a\",2]}",
	       "parameter 'ids' must be an array of strings, not an array");
	expect("{\"name\":null}", "parameter 'name' must be a string, not null");
	expect("{\"name\":\"x\",\"count\":0}", "parameter 'count' must be positive");
	expect("[\"x\"]", "params must be an object with named members, not an array");
}

static void test_empty_array_is_no_params(void **state)
{
	static const struct up_param none[] = {{0}};
	json_t *params = json_array();
	char why[256];

	(void)state;
	assert_int_equal(up_params_dispatch(none, params, NULL, why, sizeof(why)), 0);
	assert_int_equal(up_params_dispatch(none, NULL, NULL, why, sizeof(why)), 0);
	json_decref(params);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_empty_array_is_no_params),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
