/* SPDX-License-Identifier: Apache-2.0 */
/* The session record as a jansson object: built, changed, checked (daemon/store-record.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "store-fixture.h"

static void test_record_new(void **state)
{
	json_t *rec = record(ID);
	char err[256];
	int code = -1;

	(void)state;
	assert_int_equal(up_record_check(rec, ID, err, sizeof(err)), 0);
	assert_string_equal(up_record_id(rec), ID);
	assert_string_equal(up_record_namespace(rec), "agent-uplink-" ID);
	assert_int_equal(up_record_state(rec), UP_SESSION_PREPARING);
	assert_string_equal(up_record_reason(rec), "");
	assert_string_equal(up_record_agent(rec), "claude");
	assert_string_equal(up_record_mode(rec), "anthropic");
	assert_string_equal(up_record_cwd(rec), "/home/u/project");
	assert_string_equal(up_record_deploy_context(rec), "local-k8s-admin");
	assert_int_equal(up_record_created_at(rec), NOW);
	assert_int_equal(up_record_expires_at(rec), NOW + 24 * 3600);
	assert_int_equal(up_record_idle_timeout(rec), 4 * 3600);
	assert_int_equal(up_record_updated_at(rec), NOW);
	assert_false(up_record_exit_code(rec, &code));
	assert_int_equal(json_integer_value(json_object_get(rec, "version")), 1);
	assert_int_equal(json_object_size(rec), 14);

	assert_null(up_record_new("nope", "claude", "", "/", "", NOW, 1, 1));
	assert_null(up_record_new(ID, NULL, "", "/", "", NOW, 1, 1));
	assert_null(up_record_new(ID, "claude", "", "/", "", NOW, UP_MAX_DURATION_S + 1, 1));
	json_decref(rec);
}

static void test_record_setters(void **state)
{
	json_t *rec = record(ID), *before;
	int code = 0;

	(void)state;
	assert_int_equal(up_record_set_state(rec, UP_SESSION_BUILDING, NULL, NOW + 1), 0);
	assert_int_equal(up_record_set_state(rec, UP_SESSION_DEPLOYING, "", NOW + 2), 0);
	before = json_deep_copy(rec);
	/* Illegal: the record stays as it was. */
	assert_int_equal(up_record_set_state(rec, UP_SESSION_PREPARING, "x", NOW + 3), -EINVAL);
	assert_int_equal(up_record_set_state(rec, UP_SESSION_GONE, "x", NOW + 3), -EINVAL);
	assert_true(json_equal(rec, before));
	assert_int_equal(up_record_set_state(rec, UP_SESSION_FAILED,
					     "the agent pod was evicted: node out of memory",
					     NOW + 4),
			 0);
	assert_int_equal(up_record_state(rec), UP_SESSION_FAILED);
	assert_string_equal(up_record_reason(rec), "the agent pod was evicted: node out of memory");
	assert_int_equal(up_record_updated_at(rec), NOW + 4);
	assert_int_equal(up_record_set_exit_code(rec, 137, NOW + 5), 0);
	assert_true(up_record_exit_code(rec, &code));
	assert_int_equal(code, 137);
	assert_int_equal(up_record_set_expires_at(rec, NOW + 99, NOW + 6), 0);
	assert_int_equal(up_record_expires_at(rec), NOW + 99);
	assert_int_equal(up_record_updated_at(rec), NOW + 6);
	json_decref(before);
	json_decref(rec);
}

static void test_record_check(void **state)
{
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		json_t *rec = broken_record(i);

		assert_int_equal(up_record_check(rec, NULL, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, broken[i].why);
		json_decref(rec);
	}
	json_t *rec = record(ID);
	assert_int_equal(up_record_check(rec, ID2, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "it holds id '" ID "', but its file is named '" ID2 ".json'");
	/* Keys it does not know are kept, not refused. */
	assert_int_equal(json_object_set_new(rec, "future", json_true()), 0);
	assert_int_equal(up_record_check(rec, ID, err, sizeof(err)), 0);
	json_decref(rec);
	rec = json_array();
	assert_int_equal(up_record_check(rec, NULL, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "it is not a JSON object");
	json_decref(rec);
}

/* What an adopting daemon needs to go on renewing: set, read back, saved and loaded; a
 * record without the keys (written before them) still loads and reads as "none". */
static void test_record_renewal(void **state)
{
	struct fixture *f = *state;
	json_t *a = record(ID), *old = record(ID2), *profiles = json_pack("[s, s]", "dev", "prod");
	json_t *records, *problems, *got;
	char err[256];

	assert_false(up_record_has_renewal(old));
	assert_null(up_record_aws_profiles(old));
	assert_int_equal(up_record_aws_expires_at(old), 0);
	assert_int_equal(up_record_login_expires_at(old), 0);
	assert_int_equal(up_record_exec_refresh_s(old), 0);
	assert_int_equal(up_record_check(old, ID2, err, sizeof(err)), 0);

	assert_int_equal(up_record_set_renewal(a, profiles, NOW + 3600, NOW + 28800, 120), 0);
	json_decref(profiles);
	assert_int_equal(up_record_check(a, ID, err, sizeof(err)), 0);
	assert_true(up_record_has_renewal(a));
	assert_int_equal(json_array_size(up_record_aws_profiles(a)), 2);
	assert_string_equal(json_string_value(json_array_get(up_record_aws_profiles(a), 1)),
			    "prod");
	assert_int_equal(up_record_aws_expires_at(a), NOW + 3600);
	assert_int_equal(up_record_login_expires_at(a), NOW + 28800);
	assert_int_equal(up_record_exec_refresh_s(a), 120);
	/* Each renewal moves its expiry; a negative one reads as none. */
	assert_int_equal(up_record_set_aws_expires_at(a, NOW + 7200), 0);
	assert_int_equal(up_record_set_login_expires_at(a, -1), 0);
	assert_int_equal(up_record_aws_expires_at(a), NOW + 7200);
	assert_int_equal(up_record_login_expires_at(a), 0);
	/* No profiles: an empty array, read as none. */
	assert_int_equal(up_record_set_renewal(old, NULL, 0, 0, 0), 0);
	assert_null(up_record_aws_profiles(old));
	assert_int_equal(json_object_del(old, "aws_profiles"), 0);
	assert_int_equal(json_object_del(old, "aws_expires_at"), 0);
	assert_int_equal(json_object_del(old, "login_expires_at"), 0);
	assert_int_equal(json_object_del(old, "exec_refresh_s"), 0);

	save(f, a);
	save(f, old);
	load(f, &records, &problems);
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(json_object_size(records), 2);
	got = json_object_get(records, ID);
	assert_true(json_equal(got, a));
	assert_int_equal(up_record_aws_expires_at(got), NOW + 7200);
	assert_string_equal(json_string_value(json_array_get(up_record_aws_profiles(got), 0)),
			    "dev");
	got = json_object_get(records, ID2);
	assert_true(json_equal(got, old));
	assert_false(up_record_has_renewal(got));
	json_decref(records);
	json_decref(problems);
	json_decref(a);
	json_decref(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_new),
		cmocka_unit_test(test_record_setters),
		cmocka_unit_test(test_record_check),
		cmocka_unit_test_setup_teardown(test_record_renewal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
