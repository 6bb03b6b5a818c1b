/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "duration.h"

static const struct {
	const char *text;
	uint64_t seconds;
} good[] = {
	{"90s", 90},
	{"30m", 1800},
	{"2h", 7200},
	{"1d", 86400},
	{"0s", 0},
	{"24h", 86400},
	{" 2h ", 7200},
	{"2 h", 7200},
	{"2\th", 7200},
	{"\n 5m \r\n", 300},
	{"007m", 420},
	{"3650d", 3650ull * 86400},
	{"87600h", 3650ull * 86400},
	{"315360000s", 3650ull * 86400},
};

static void test_good(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char err[256] = "";
		uint64_t v = 12345;

		assert_int_equal(up_duration_parse(good[i].text, &v, err, sizeof(err)), 0);
		assert_int_equal(v, good[i].seconds);
		assert_string_equal(err, "");
	}
}

static const char *const bad[] = {
	"",   "   ",   "5",   "5x",   "10x", "h",    "1.5h",  "-5m",  "+5m",	   "2H",
	"1D", "1 d x", "1dd", "1d2h", "s5",  "5 5m", "0x10s", "1e3s", "\xd9\xa1s", "5m\x01",
};

static void test_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256], want[256];
		uint64_t v = 12345;

		assert_int_equal(up_duration_parse(bad[i], &v, err, sizeof(err)), -EINVAL);
		assert_int_equal(v, 12345);
		(void)snprintf(want, sizeof(want),
			       "invalid duration '%s'; use forms like 30m, 2h, 1d", bad[i]);
		assert_string_equal(err, want);
	}
}

static void test_messages(void **state)
{
	char err[256];
	uint64_t v;

	(void)state;
	assert_int_equal(up_duration_parse("1.5h", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration '1.5h'; use forms like 30m, 2h, 1d");
	assert_int_equal(up_duration_parse("-5m", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration '-5m'; use forms like 30m, 2h, 1d");
	assert_int_equal(up_duration_parse("", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration ''; use forms like 30m, 2h, 1d");
	assert_int_equal(up_duration_parse("5", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration '5'; use forms like 30m, 2h, 1d");
	assert_int_equal(up_duration_parse("5x", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration '5x'; use forms like 30m, 2h, 1d");
	/* The value as given, blanks and all. */
	assert_int_equal(up_duration_parse(" 5 x ", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid duration ' 5 x '; use forms like 30m, 2h, 1d");
}

static void test_too_long(void **state)
{
	static const char *const huge[] = {
		"3651d",
		"87601h",
		"5256001m",
		"315360001s",
		"18446744073709551616s",
		"99999999999999999999999999999999d",
		" 18446744073709551617 s ",
	};
	char err[256], want[256];
	uint64_t v = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		assert_int_equal(up_duration_parse(huge[i], &v, err, sizeof(err)), -ERANGE);
		(void)snprintf(want, sizeof(want),
			       "invalid duration '%s'; the longest accepted is 3650d", huge[i]);
		assert_string_equal(err, want);
		assert_int_equal(v, 7);
	}
	/* Syntax first: a huge number with a fraction is a syntax error, not a range one. */
	assert_int_equal(up_duration_parse("99999999999999999999999.5h", &v, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(up_duration_parse("99999999999999999999999x", &v, err, sizeof(err)),
			 -EINVAL);
}

static void test_small_err_buffer(void **state)
{
	char err[8];
	uint64_t v;

	(void)state;
	assert_int_equal(up_duration_parse("1.5h", &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "invalid");
	assert_int_equal(up_duration_parse("1.5h", &v, NULL, 0), -EINVAL);
	assert_int_equal(up_duration_parse(NULL, &v, err, sizeof(err)), -EINVAL);
}

static const struct {
	int64_t seconds;
	const char *text;
} formats[] = {
	{0, "0s"},
	{1, "1s"},
	{59, "59s"},
	{60, "1m"},
	{119, "1m"},
	{3599, "59m"},
	{3600, "1h00m"},
	{2 * 3600 + 5 * 60 + 59, "2h05m"},
	{86399, "23h59m"},
	{86400, "1d00h"},
	{3 * 86400 + 4 * 3600 + 3599, "3d04h"},
	{3650LL * 86400, "3650d00h"},
	{-42, "-42s"},
	{-(2 * 3600 + 5 * 60), "-2h05m"},
	{INT64_MAX, "106751991167300d15h"},
	{INT64_MIN, "-106751991167300d15h"},
};

static void test_format(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		char buf[UP_DURATION_FORMAT_MAX];
		int n = up_duration_format(formats[i].seconds, buf, sizeof(buf));

		assert_int_equal(n, (int)strlen(formats[i].text));
		assert_string_equal(buf, formats[i].text);
	}
}

static void test_format_small(void **state)
{
	char buf[6];

	(void)state;
	assert_int_equal(up_duration_format(7500, buf, 5), -ENOBUFS);
	assert_int_equal(up_duration_format(7500, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "2h05m");
	assert_int_equal(up_duration_format(59, buf, 4), 3);
}

/* What is formatted parses back to no more than it was (the format truncates). */
static void test_round_trip(void **state)
{
	static const int64_t values[] = {0, 59, 60, 3600, 86400, 3 * 86400};

	(void)state;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char buf[UP_DURATION_FORMAT_MAX], err[128];
		uint64_t v;

		assert_true(up_duration_format(values[i], buf, sizeof(buf)) > 0);
		if (strlen(buf) <= 4) {
			assert_int_equal(up_duration_parse(buf, &v, err, sizeof(err)), 0);
			assert_int_equal(v, (uint64_t)values[i]);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_small_err_buffer),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_small),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
