/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/proc.c: stdout and stderr apart or together, a file as fd 3, the timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

static char *sh[] = {(char *)"/bin/sh", (char *)"-c", NULL, NULL};

static void test_stdout_and_stderr_apart(void **state)
{
	char out[64], err[64];
	struct up_run run = {.argv = sh,
			     .timeout_ms = 5000,
			     .fd3 = -1,
			     .out = out,
			     .out_len = sizeof(out),
			     .err = err,
			     .err_len = sizeof(err)};

	(void)state;
	sh[2] = (char *)"echo oops >&2; echo key; echo more >&2; exit 3";
	assert_int_equal(up_run(&run), 0);
	assert_string_equal(out, "key\n");
	assert_string_equal(err, "oops\nmore\n");
	assert_true(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 3);
	/* each bounded by its own buffer */
	run.err_len = 3;
	sh[2] = (char *)"echo abcdef >&2; echo key";
	assert_int_equal(up_run(&run), 0);
	assert_string_equal(err, "ab");
	assert_string_equal(out, "key\n");
}

static void test_together_or_dropped(void **state)
{
	char out[64];
	int status = -1;

	(void)state;
	sh[2] = (char *)"echo a; echo b >&2";
	assert_int_equal(up_run_capture(sh, 5000, true, out, sizeof(out), &status), 0);
	assert_string_equal(out, "a\nb\n");
	assert_int_equal(up_run_capture(sh, 5000, false, out, sizeof(out), &status), 0);
	assert_string_equal(out, "a\n");
	assert_int_equal(status, 0);
}

static void test_fd3_and_stdin(void **state)
{
	char out[64];
	int fd = memfd_create("t", MFD_CLOEXEC);
	struct up_run run = {
		.argv = sh, .timeout_ms = 5000, .fd3 = fd, .out = out, .out_len = sizeof(out)};

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "secret\n", 7), 7);
	/* opened again by path it reads from the start; stdin is empty */
	sh[2] = (char *)"cat /dev/fd/3; cat /dev/fd/3; cat; echo end";
	assert_int_equal(up_run(&run), 0);
	assert_string_equal(out, "secret\nsecret\nend\n");
	/* the caller's fd stays open; fd 3 itself works as well */
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	if (fd != 3) {
		assert_int_equal(dup2(fd, 3), 3);
		(void)close(fd);
		fd = 3;
	}
	run.fd3 = 3;
	sh[2] = (char *)"cat /dev/fd/3";
	assert_int_equal(up_run(&run), 0);
	assert_string_equal(out, "secret\n");
	assert_int_equal(close(fd), 0);
	/* without one, the command has no fd 3 */
	run.fd3 = -1;
	sh[2] = (char *)"cat /dev/fd/3 2>/dev/null || echo none";
	assert_int_equal(up_run(&run), 0);
	assert_string_equal(out, "none\n");
}

static void test_timeout_and_missing(void **state)
{
	char out[16];
	char *nope[] = {(char *)"uplink-no-such-program", NULL};
	struct up_run run = {
		.argv = sh, .timeout_ms = 200, .fd3 = -1, .out = out, .out_len = sizeof(out)};

	(void)state;
	sh[2] = (char *)"echo started; exec sleep 10";
	assert_int_equal(up_run(&run), -ETIMEDOUT);
	assert_string_equal(out, "started\n");
	assert_true(WIFSIGNALED(run.status) && WTERMSIG(run.status) == SIGKILL);
	run.argv = nope;
	assert_int_equal(up_run(&run), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stdout_and_stderr_apart),
		cmocka_unit_test(test_together_or_dropped),
		cmocka_unit_test(test_fd3_and_stdin),
		cmocka_unit_test(test_timeout_and_missing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
