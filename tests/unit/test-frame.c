/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

static int next(struct up_frame *f, const char *want)
{
	char *line;
	size_t len;
	int r = up_frame_next(f, &line, &len);

	if (r == 1 && want) {
		assert_int_equal(len, strlen(want));
		assert_memory_equal(line, want, len);
		assert_int_equal(line[len], '\0');
	}
	return r;
}

static void test_partial_reads(void **state)
{
	struct up_frame f;
	const char *msg = "{\"a\":1}\n";

	(void)state;
	up_frame_init(&f, 64);
	/* One byte at a time: nothing until the newline arrives. */
	for (size_t i = 0; i < strlen(msg) - 1; i++) {
		assert_int_equal(up_frame_feed(&f, msg + i, 1), 0);
		assert_int_equal(next(&f, NULL), 0);
	}
	assert_int_equal(up_frame_feed(&f, "\n", 1), 0);
	assert_int_equal(next(&f, "{\"a\":1}"), 1);
	assert_int_equal(next(&f, NULL), 0);
	assert_int_equal(up_frame_pending(&f), 0);
	up_frame_done(&f);
}

static void test_several_per_read(void **state)
{
	struct up_frame f;
	const char *data = "one\ntwo\r\n\n   \nthree\nfour-partial";

	(void)state;
	up_frame_init(&f, 64);
	assert_int_equal(up_frame_feed(&f, data, strlen(data)), 0);
	assert_int_equal(next(&f, "one"), 1);
	assert_int_equal(next(&f, "two"), 1);	/* CR stripped */
	assert_int_equal(next(&f, "three"), 1); /* blank lines skipped */
	assert_int_equal(next(&f, NULL), 0);
	assert_int_equal(up_frame_pending(&f), strlen("four-partial"));
	assert_int_equal(up_frame_feed(&f, "\nfive\n", 6), 0);
	assert_int_equal(next(&f, "four-partial"), 1);
	assert_int_equal(next(&f, "five"), 1);
	assert_int_equal(next(&f, NULL), 0);
	up_frame_done(&f);
}

static void test_exact_limit(void **state)
{
	struct up_frame f;
	char line[17];

	(void)state;
	memset(line, 'x', 16);
	line[16] = '\n';
	up_frame_init(&f, 16);
	assert_int_equal(up_frame_feed(&f, line, sizeof(line)), 0);
	assert_int_equal(next(&f, "xxxxxxxxxxxxxxxx"), 1);
	up_frame_done(&f);
}

static void test_oversized_with_newline(void **state)
{
	struct up_frame f;
	char line[18];

	(void)state;
	memset(line, 'x', 17);
	line[17] = '\n';
	up_frame_init(&f, 16);
	assert_int_equal(up_frame_feed(&f, line, sizeof(line)), 0);
	assert_int_equal(next(&f, NULL), -EMSGSIZE);
	up_frame_done(&f);
}

static void test_oversized_without_newline(void **state)
{
	struct up_frame f;
	char chunk[10];
	int r = 0;

	(void)state;
	memset(chunk, 'y', sizeof(chunk));
	up_frame_init(&f, 32);
	/* A caller that drains after every feed learns as soon as the line passes the limit. */
	for (int i = 0; i < 10 && r == 0; i++) {
		assert_int_equal(up_frame_feed(&f, chunk, sizeof(chunk)), 0);
		r = next(&f, NULL);
	}
	assert_int_equal(r, -EMSGSIZE);
	up_frame_done(&f);
}

static void test_undrained_feed_refused(void **state)
{
	struct up_frame f;
	char chunk[40];

	(void)state;
	memset(chunk, 'z', sizeof(chunk));
	up_frame_init(&f, 32);
	assert_int_equal(up_frame_feed(&f, chunk, sizeof(chunk)), 0);
	/* Never drained: the buffer may not grow without bound. */
	assert_int_equal(up_frame_feed(&f, chunk, sizeof(chunk)), -EMSGSIZE);
	up_frame_done(&f);
}

static void test_compaction_keeps_data(void **state)
{
	struct up_frame f;
	char buf[32];

	(void)state;
	up_frame_init(&f, 64);
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(buf, sizeof(buf), "line-%d\nhalf-%d", i, i);
		assert_int_equal(up_frame_feed(&f, buf, (size_t)n), 0);
		snprintf(buf, sizeof(buf), "line-%d", i);
		if (i > 0) {
			char prev[32];
			snprintf(prev, sizeof(prev), "half-%dline-%d", i - 1, i);
			assert_int_equal(next(&f, prev), 1);
		} else {
			assert_int_equal(next(&f, buf), 1);
		}
		assert_int_equal(next(&f, NULL), 0);
	}
	assert_true(f.cap < 4096 * 2);
	up_frame_done(&f);
}

static void test_done_twice(void **state)
{
	struct up_frame f;

	(void)state;
	up_frame_init(&f, 8);
	up_frame_done(&f);
	up_frame_done(&f);
	assert_int_equal(up_frame_feed(&f, "a\n", 2), 0);
	assert_int_equal(next(&f, "a"), 1);
	up_frame_done(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_partial_reads),
		cmocka_unit_test(test_several_per_read),
		cmocka_unit_test(test_exact_limit),
		cmocka_unit_test(test_oversized_with_newline),
		cmocka_unit_test(test_oversized_without_newline),
		cmocka_unit_test(test_undrained_feed_refused),
		cmocka_unit_test(test_compaction_keeps_data),
		cmocka_unit_test(test_done_twice),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
