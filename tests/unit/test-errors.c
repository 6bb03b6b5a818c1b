/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "errors.h"

static void test_round_trip(void **state)
{
	(void)state;
	for (int e = 0; e < _UP_ERR_MAX; e++) {
		const char *name = up_error_name((enum up_error)e);
		assert_non_null(name);
		assert_non_null(up_error_message((enum up_error)e));
		assert_int_equal(up_error_from_name(name), e);
		assert_int_equal(up_error_from_code(up_error_code((enum up_error)e)), e);
	}
}

static void test_unique(void **state)
{
	(void)state;
	for (int a = 0; a < _UP_ERR_MAX; a++)
		for (int b = a + 1; b < _UP_ERR_MAX; b++) {
			assert_int_not_equal(up_error_code((enum up_error)a),
					     up_error_code((enum up_error)b));
			assert_string_not_equal(up_error_name((enum up_error)a),
						up_error_name((enum up_error)b));
		}
}

static void test_spec_codes(void **state)
{
	(void)state;
	/* The codes JSON-RPC 2.0 fixes, section 5.1. */
	assert_int_equal(up_error_code(UP_ERR_PARSE_ERROR), -32700);
	assert_int_equal(up_error_code(UP_ERR_INVALID_REQUEST), -32600);
	assert_int_equal(up_error_code(UP_ERR_METHOD_NOT_FOUND), -32601);
	assert_int_equal(up_error_code(UP_ERR_INVALID_PARAMS), -32602);
	assert_int_equal(up_error_code(UP_ERR_INTERNAL_ERROR), -32603);
	/* Our own live in the implementation-defined range or beyond it, never in the reserved one.
	 */
	for (int e = UP_ERR_INTERNAL_ERROR + 1; e < _UP_ERR_MAX; e++) {
		int c = up_error_code((enum up_error)e);
		assert_true(c > -32600 || c < -32768);
	}
}

static void test_unknown(void **state)
{
	(void)state;
	assert_int_equal(up_error_from_name("NO_SUCH_ERROR"), _UP_ERR_INVALID);
	assert_int_equal(up_error_from_name(NULL), _UP_ERR_INVALID);
	assert_int_equal(up_error_from_code(12345), _UP_ERR_INVALID);
	assert_null(up_error_name(_UP_ERR_MAX));
	assert_null(up_error_name(_UP_ERR_INVALID));
	assert_int_equal(up_error_code(_UP_ERR_INVALID), -32603);
	assert_string_equal(up_error_name(UP_ERR_SESSION_NOT_FOUND), "SESSION_NOT_FOUND");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_unique),
		cmocka_unit_test(test_spec_codes),
		cmocka_unit_test(test_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
