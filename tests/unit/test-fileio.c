/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a whole file: a regular file as it is, the size limit, and a FIFO put where a
 * file is expected (a project's .uplink.yaml, a rules file) never holding the reader,
 * which in the daemon is a worker thread of a small pool.
 */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	(void)snprintf(dir, sizeof(dir), "/tmp/test-fileio-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t len, const char *name)
{
	(void)snprintf(buf, len, "%s/%s", dir, name);
}

static void test_regular_and_limit(void **state)
{
	char path[128], *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	path_of(path, sizeof(path), "f");
	f = fopen(path, "w");
	assert_non_null(f);
	(void)fputs("rules: []\n", f);
	(void)fclose(f);
	assert_int_equal(up_read_file(path, 100, &text, &len), 0);
	assert_int_equal(len, 10);
	assert_string_equal(text, "rules: []\n");
	free(text);
	assert_int_equal(up_read_file(path, 4, &text, &len), -EFBIG);
}

/* A FIFO with no writer: without O_NONBLOCK open() waits for one forever. alarm() turns a
 * hang into a failure instead of a stuck test. */
static void test_fifo_does_not_block(void **state)
{
	char path[128], *text = NULL;
	size_t len = 7;
	int w;

	(void)state;
	path_of(path, sizeof(path), "fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	(void)alarm(10);
	assert_int_equal(up_read_file(path, 100, &text, &len), 0);
	assert_int_equal(len, 0);
	free(text);
	assert_int_equal(up_read_file_at(AT_FDCWD, path, 100, &text, &len), 0);
	free(text);
	/* a writer that holds it open without writing: refused, not waited for */
	w = open(path, O_RDWR | O_NONBLOCK);
	assert_true(w >= 0);
	assert_int_equal(up_read_file(path, 100, &text, &len), -EAGAIN);
	(void)close(w);
	(void)alarm(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_regular_and_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_does_not_block, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
