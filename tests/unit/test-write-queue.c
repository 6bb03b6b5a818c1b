/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "write-queue.h"

struct seen {
	int failed, closed, failed_error, closed_error;
};

static void on_failed(void *ud, int error)
{
	struct seen *s = ud;

	s->failed++;
	s->failed_error = error;
}

static void on_closed(void *ud, int error)
{
	struct seen *s = ud;

	s->closed++;
	s->closed_error = error;
}

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	(void)snprintf(path, sizeof(path), "/tmp/test-write-queue-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	(void)close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	(void)unlink(path);
	return 0;
}

static size_t read_back(char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, buf, len - 1);

	(void)close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return (size_t)n;
}

/* What comes before the file waits; the file is written in order, then closed, once. */
static void test_queued_before_start_then_in_order(void **state)
{
	struct up_write_queue q;
	struct seen s = {0};
	uv_loop_t loop;
	char buf[256];

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	up_write_queue_init(&q, &loop, 1024, on_failed, on_closed, &s);
	up_write_queue_push(&q, "one", 3, true);
	up_write_queue_push(&q, "two", 3, false);
	assert_false(up_write_queue_busy(&q));
	up_write_queue_start(&q, open(path, O_WRONLY | O_APPEND), 0);
	up_write_queue_push(&q, "three", 5, true);
	up_write_queue_close(&q);
	assert_true(up_write_queue_busy(&q));
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_false(up_write_queue_busy(&q));
	assert_int_equal(s.closed, 1);
	assert_int_equal(s.closed_error, 0);
	assert_int_equal(s.failed, 0);
	assert_int_equal(read_back(buf, sizeof(buf)), 13);
	assert_string_equal(buf, "one\ntwothree\n");
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* Past `max` waiting, bytes are dropped and counted, never blocking. */
static void test_bounded(void **state)
{
	struct up_write_queue q;
	struct seen s = {0};
	uv_loop_t loop;
	char buf[256];

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	up_write_queue_init(&q, &loop, 8, NULL, on_closed, &s);
	up_write_queue_push(&q, "12345", 5, false);
	up_write_queue_push(&q, "6789", 4, false); /* 9 > 8: dropped */
	up_write_queue_push(&q, "abc", 3, false);
	assert_int_equal(q.dropped, 4);
	up_write_queue_start(&q, open(path, O_WRONLY | O_APPEND), 0);
	up_write_queue_close(&q);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(s.closed, 1);
	assert_int_equal(read_back(buf, sizeof(buf)), 8);
	assert_string_equal(buf, "12345abc");
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* A file that could not be opened: nothing is written or closed, the owner may go at once. */
static void test_never_opened(void **state)
{
	struct up_write_queue q;
	struct seen s = {0};
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	up_write_queue_init(&q, &loop, 64, on_failed, on_closed, &s);
	up_write_queue_push(&q, "lost", 4, true);
	up_write_queue_start(&q, -1, -EACCES);
	assert_int_equal(q.error, -EACCES);
	up_write_queue_push(&q, "after", 5, true); /* after a failure: not even queued */
	assert_int_equal(q.dropped, 6);
	up_write_queue_close(&q);
	assert_false(up_write_queue_busy(&q));
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(s.closed + s.failed, 0);
	up_write_queue_clear(&q);
	assert_null(q.head);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* A failing write stops the writing, says so once, and the file is still closed. */
static void test_write_fails(void **state)
{
	struct up_write_queue q;
	struct seen s = {0};
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	up_write_queue_init(&q, &loop, 64, on_failed, on_closed, &s);
	up_write_queue_start(&q, open(path, O_RDONLY), 0); /* writes fail with EBADF */
	up_write_queue_push(&q, "a", 1, false);
	up_write_queue_push(&q, "b", 1, false);
	up_write_queue_close(&q);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(s.failed, 1);
	assert_int_equal(s.failed_error, UV_EBADF);
	assert_int_equal(s.closed, 1);
	assert_int_equal(s.closed_error, UV_EBADF);
	up_write_queue_clear(&q);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_queued_before_start_then_in_order),
		T(test_bounded),
		T(test_never_opened),
		T(test_write_fails),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
