/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/aws.c: the parts that need no aws CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aws.h"
#include "bounds.h"

static void test_profile_names(void **state)
{
	static const char *const good[] = {"dev", "A.b_C-9", "prod.eu_1", "-", "."};
	static const char *const bad[] = {"", "a b", "x]y", "[evil]", "a/b", "a\nb", "é", "a=b"};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_true(up_aws_profile_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(up_aws_profile_ok(bad[i]));
	assert_false(up_aws_profile_ok(NULL));
}

static void test_check_profiles(void **state)
{
	json_t *ok = json_pack("[s, s]", "dev", "prod"), *bad = json_pack("[s, s]", "dev", "a]b");
	json_t *many = json_array();
	char why[256];

	(void)state;
	assert_int_equal(up_aws_check_profiles(ok, why, sizeof(why)), 0);
	assert_int_equal(up_aws_check_profiles(NULL, why, sizeof(why)), 0);
	assert_int_equal(up_aws_check_profiles(bad, why, sizeof(why)), -EINVAL);
	assert_string_equal(why,
			    "invalid AWS profile name 'a]b': only letters, digits, '.', '_' and "
			    "'-' are allowed");
	for (int i = 0; i <= UP_MAX_AWS_PROFILES; i++)
		assert_int_equal(json_array_append_new(many, json_sprintf("p%d", i)), 0);
	assert_int_equal(up_aws_check_profiles(many, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "--aws-profiles: at most 32 profiles");
	json_decref(ok);
	json_decref(bad);
	json_decref(many);
}

static void test_dummy_keys(void **state)
{
	char akid[UP_AWS_AKID_LEN + 1];
	json_t *two = json_pack("[s, s]", "dev", "prod.eu_1");
	char *ini;

	(void)state;
	/* AKIA + SHA-256("dev")[:16], uppercased (checked with Python's hashlib) */
	up_aws_dummy_akid("dev", akid);
	assert_string_equal(akid, "AKIAEF260E9AA3C673AF");
	up_aws_dummy_akid("prod.eu_1", akid);
	assert_string_equal(akid, "AKIAE1E92FAF327F2F0B");
	assert_int_equal(strlen(UP_AWS_DUMMY_SECRET), 40);
	ini = up_aws_dummy_ini(two);
	assert_non_null(ini);
	assert_string_equal(ini,
			    "[dev]\naws_access_key_id = AKIAEF260E9AA3C673AF\n"
			    "aws_secret_access_key = DUMMYsecret0000000000000000000000000000A\n\n"
			    "[prod.eu_1]\naws_access_key_id = AKIAE1E92FAF327F2F0B\n"
			    "aws_secret_access_key = DUMMYsecret0000000000000000000000000000A\n\n");
	free(ini);
	json_decref(two);
}

static void test_parse_time(void **state)
{
	int64_t t = 0;

	(void)state;
	assert_int_equal(up_aws_parse_time("2026-11-29T12:00:00Z", &t), 0);
	assert_int_equal(t, 1795953600);
	assert_int_equal(up_aws_parse_time("2026-11-29T12:00:00+00:00", &t), 0);
	assert_int_equal(t, 1795953600);
	assert_int_equal(up_aws_parse_time("2026-11-29T13:30:00+01:30", &t), 0);
	assert_int_equal(t, 1795953600);
	assert_int_equal(up_aws_parse_time("2026-11-29T11:00:00.123456-01:00", &t), 0);
	assert_int_equal(t, 1795953600);
	assert_int_equal(up_aws_parse_time("2026-11-29T12:00:00", &t), -EINVAL); /* no zone */
	assert_int_equal(up_aws_parse_time("2026-11-29 12:00:00Z", &t), -EINVAL);
	assert_int_equal(up_aws_parse_time("2026-11-29T12:00:00+1:00", &t), -EINVAL);
	assert_int_equal(up_aws_parse_time("2026-11-29T12:00:00Zjunk", &t), -EINVAL);
	assert_int_equal(up_aws_parse_time("tomorrow", &t), -EINVAL);
	assert_int_equal(up_aws_parse_time(NULL, &t), -EINVAL);
}

static void test_parse_export(void **state)
{
	static const char full[] =
		"{\"Version\": 1, \"AccessKeyId\": \"ASIAX\", \"SecretAccessKey\": "
		"\"s3cr3t\", \"SessionToken\": \"tok\", \"Expiration\": "
		"\"2026-11-29T12:00:00+00:00\"}";
	static const char plain[] =
		"{\"Version\": 1, \"AccessKeyId\": \"AKIAX\", \"SecretAccessKey\": \"s\"}";
	struct up_aws_creds c;
	char why[128];

	(void)state;
	assert_int_equal(up_aws_parse_export(full, strlen(full), &c, why, sizeof(why)), 0);
	assert_string_equal(c.access_key_id, "ASIAX");
	assert_string_equal(c.secret_access_key, "s3cr3t");
	assert_string_equal(c.session_token, "tok");
	assert_int_equal(c.expires_at, 1795953600);
	up_aws_creds_wipe(&c);
	assert_null(c.secret_access_key);
	/* long-lived keys: no token, no expiry */
	assert_int_equal(up_aws_parse_export(plain, strlen(plain), &c, why, sizeof(why)), 0);
	assert_null(c.session_token);
	assert_int_equal(c.expires_at, 0);
	up_aws_creds_wipe(&c);
	assert_int_equal(up_aws_parse_export("{\"AccessKeyId\": \"A\"}", 20, &c, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "its output has no SecretAccessKey");
	assert_null(c.access_key_id);
	assert_int_equal(
		up_aws_parse_export("{\"SecretAccessKey\": \"s3cr3t\"}", 29, &c, why, sizeof(why)),
		-EINVAL);
	assert_string_equal(why, "its output has no AccessKeyId");
	assert_int_equal(up_aws_parse_export("AWS_ACCESS_KEY_ID=x", 19, &c, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "its output is not a JSON object");
	static const char bad_exp[] = "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s3cr3t\", "
				      "\"Expiration\": \"soon\"}";
	assert_int_equal(up_aws_parse_export(bad_exp, strlen(bad_exp), &c, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "its Expiration 'soon' is not an ISO-8601 time");
	assert_null(strstr(why, "s3cr3t"));
}

static void test_refresh_delay(void **state)
{
	const int64_t now = 1795953600;

	(void)state;
	assert_int_equal(up_refresh_delay_ms(now, 0, 1), -1);	   /* never expires */
	assert_int_equal(up_refresh_delay_ms(now, now - 5, 1), 0); /* expired: now */
	assert_int_equal(up_refresh_delay_ms(now, now, 1), 0);
	assert_int_equal(up_refresh_delay_ms(now, now + 3600, 1), 3300 * 1000); /* 5 min before */
	assert_int_equal(up_refresh_delay_ms(now, now + 1200, 1), 900 * 1000);	/* 1200/4 = 300 */
	assert_int_equal(up_refresh_delay_ms(now, now + 120, 1), 90 * 1000);	/* a quarter */
	assert_int_equal(up_refresh_delay_ms(now, now + 120, 60), 1500);	/* tests */
	assert_int_equal(up_refresh_delay_ms(now, now + 3, 1), 3000);		/* 3/4 = 0 */
	assert_int_equal(up_refresh_delay_ms(now, now + 3600, 0), 3300 * 1000); /* 0 is 1 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profile_names), cmocka_unit_test(test_check_profiles),
		cmocka_unit_test(test_dummy_keys),    cmocka_unit_test(test_parse_time),
		cmocka_unit_test(test_parse_export),  cmocka_unit_test(test_refresh_delay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
