/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backoff.h"

static void test_schedule_without_jitter_spread(void **state)
{
	/* rnd % 1001 == 500 puts the jitter at exactly 1.0. */
	const uint64_t want[] = {200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000};

	(void)state;
	for (unsigned a = 0; a < sizeof(want) / sizeof(want[0]); a++)
		assert_int_equal(up_backoff_ms(a, 200, 10000, 500, -1), want[a]);
}

static void test_jitter_bounds(void **state)
{
	(void)state;
	assert_int_equal(up_backoff_ms(2, 200, 10000, 0, -1), 640);    /* 800 * 0.8 */
	assert_int_equal(up_backoff_ms(2, 200, 10000, 1000, -1), 960); /* 800 * 1.2 */
	for (uint32_t r = 0; r < 5000; r += 7) {
		uint64_t d = up_backoff_ms(30, 200, 10000, r, -1);
		assert_true(d >= 8000 && d <= 12000);
	}
}

static void test_huge_attempt_does_not_overflow(void **state)
{
	(void)state;
	assert_int_equal(up_backoff_ms(1000, 200, 10000, 500, -1), 10000);
	/* A silly cap is bounded to a day, and the jitter stays within 20% of it. */
	assert_int_equal(up_backoff_ms(200, 1, UINT64_MAX, 500, -1), 24ull * 3600 * 1000);
	assert_true(up_backoff_ms(200, UINT64_MAX, UINT64_MAX, 1000, -1) <= 24ull * 3600 * 1200);
}

static void test_retry_after(void **state)
{
	(void)state;
	assert_int_equal(up_backoff_ms(0, 200, 10000, 500, 3), 3000);	    /* longer: wins */
	assert_int_equal(up_backoff_ms(6, 200, 10000, 500, 1), 10000);	    /* shorter: ours */
	assert_int_equal(up_backoff_ms(0, 200, 10000, 500, 100000), 60000); /* capped */
	assert_int_equal(up_backoff_ms(0, 200, 10000, 500, 0), 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schedule_without_jitter_spread),
		cmocka_unit_test(test_jitter_bounds),
		cmocka_unit_test(test_huge_attempt_does_not_overflow),
		cmocka_unit_test(test_retry_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
