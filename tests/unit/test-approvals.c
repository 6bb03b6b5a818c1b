/* SPDX-License-Identifier: Apache-2.0 */
/* The rule an approval for the session adds (README.md "When a request is denied"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "approvals.h"

static void check(const char *method, const char *host, const char *path, const char *host_re,
		  const char *path_re)
{
	json_t *r = up_approval_rule(method, host, path);

	assert_non_null(r);
	assert_string_equal(json_string_value(json_array_get(json_object_get(r, "hosts"), 0)),
			    host_re);
	assert_string_equal(json_string_value(json_array_get(json_object_get(r, "methods"), 0)),
			    method);
	assert_string_equal(json_string_value(json_array_get(json_object_get(r, "paths"), 0)),
			    path_re);
	assert_int_equal(json_object_size(r), 4); /* name, hosts, methods, paths: no inject */
	json_decref(r);
}

static void test_stable_prefix(void **state)
{
	(void)state;
	check("POST", "api.github.com", "/repos/acme/app/pulls", "api\\.github\\.com",
	      "/repos/acme(/[^?]*)?(\\?.*)?");
	check("GET", "pypi.org", "/simple", "pypi\\.org", "/simple(/[^?]*)?(\\?.*)?");
}

static void test_stops_before_ids(void **state)
{
	(void)state;
	check("GET", "x.example", "/v1/12345/items", "x\\.example", "/v1(/[^?]*)?(\\?.*)?");
	check("GET", "x.example", "/users/3f2a9c1d-77aa/x", "x\\.example",
	      "/users(/[^?]*)?(\\?.*)?");
	/* no stable first segment: the exact path, any query */
	check("DELETE", "x.example", "/42?force=1", "x\\.example", "/42(\\?.*)?");
	check("GET", "x.example", "/", "x\\.example", "/(\\?.*)?");
}

static void test_escapes_metacharacters(void **state)
{
	(void)state;
	check("PUT", "a-b.example", "/a+b/c(d)/e", "a-b\\.example",
	      "/a\\+b/c\\(d\\)(/[^?]*)?(\\?.*)?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stable_prefix),
		cmocka_unit_test(test_stops_before_ids),
		cmocka_unit_test(test_escapes_metacharacters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
