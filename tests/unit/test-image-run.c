/* SPDX-License-Identifier: Apache-2.0 */
/* The image job's loop helpers (daemon/image-run.c, image-log.c) on a real loop: a child's
 * lines and exit, a spawn error and a kill, the append-only build log. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "bounds.h"
#include "fileio.h"
#include "http.h"
#include "image-private.h"
#include "image.h"
#include "image-fixture.h"

struct run_state {
	char lines[8][UP_IMAGE_LOG_LINE_MAX + 1];
	size_t lens[8];
	int n;
	bool exited;
	struct up_image_exit e;
};

static void run_line(const char *line, size_t len, void *ud)
{
	struct run_state *s = ud;

	if (s->n < 8) {
		memcpy(s->lines[s->n], line, len + 1);
		s->lens[s->n++] = len;
	}
}

static void run_exit(const struct up_image_exit *e, void *ud)
{
	struct run_state *s = ud;

	s->exited = true;
	s->e = *e;
}

static void test_run_lines(void **state)
{
	char script[256];
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run_state s = {0};
	struct up_image_run *r;
	uv_loop_t loop;

	(void)state;
	/* Two lines, one too long (cut, the rest dropped), one last without its newline; exit 3. */
	(void)snprintf(script, sizeof(script),
		       "echo one; head -c %d /dev/zero | tr '\\0' y; echo; echo two >&2; printf "
		       "last; exit 3",
		       UP_IMAGE_LOG_LINE_MAX + 100);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_run_start(&loop, argv, env, 10000, run_line, run_exit, &s, &r),
			 0);
	close_loop(&loop);
	assert_true(s.exited);
	assert_int_equal(s.e.status, 3);
	assert_int_equal(s.e.spawn_error, 0);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.lines[0], "one");
	assert_int_equal(s.lens[1], UP_IMAGE_LOG_LINE_MAX);
	assert_int_equal(s.lines[1][0], 'y');
	/* stderr and stdout are separate pipes: "two" and "last" come in either order. */
	assert_true(!strcmp(s.lines[2], "two") || !strcmp(s.lines[3], "two"));
	assert_true(!strcmp(s.lines[2], "last") || !strcmp(s.lines[3], "last"));
}

static void test_run_spawn_error_and_kill(void **state)
{
	char *missing[] = {"/nonexistent/docker", NULL};
	char *sleeper[] = {"/bin/sh", "-c", "sleep 30 & sleep 30; echo never", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run_state s = {0};
	struct up_image_run *r;
	uv_loop_t loop;
	uint64_t t0;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_run_start(&loop, missing, env, 10000, run_line, run_exit, &s, &r),
			 0);
	close_loop(&loop);
	assert_true(s.exited);
	assert_int_equal(s.e.spawn_error, UV_ENOENT);

	/* Killed: the whole group goes (the background sleep holds the pipes), nothing is called.
	 */
	memset(&s, 0, sizeof(s));
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_run_start(&loop, sleeper, env, 10000, run_line, run_exit, &s, &r),
			 0);
	(void)uv_run(&loop, UV_RUN_NOWAIT);
	t0 = uv_hrtime();
	up_image_run_kill(r);
	close_loop(&loop);
	assert_false(s.exited);
	assert_true(uv_hrtime() - t0 < 5000000000ull);

	/* Timed out. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_run_start(&loop, sleeper, env, 100, run_line, run_exit, &s, &r),
			 0);
	close_loop(&loop);
	assert_true(s.exited);
	assert_true(s.e.timed_out);
}

static void log_cb(int r, void *ud)
{
	*(int *)ud = r == 0 ? 1 : r;
}

struct close_in_open {
	struct up_image_log *log;
	int opened, closed;
};

static void close_in_open_cb(int r, void *ud)
{
	struct close_in_open *c = ud;

	c->opened = r == 0 ? 1 : r;
	up_image_log_close(c->log, log_cb, &c->closed);
}

static void test_log_writer(void **state)
{
	char path[128], big[1000], *text = NULL;
	struct up_image_log *l;
	int opened = 0, closed = 0;
	uv_loop_t loop;
	size_t want = 0;
	FILE *f;

	(void)state;
	(void)snprintf(path, sizeof(path), "%s/build.log", tmp);
	memset(big, 'z', sizeof(big));
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_log_open(&loop, path, log_cb, &opened, &l), 0);
	for (int i = 0; i < 300; i++) {
		up_image_log_write(l, big, sizeof(big));
		up_image_log_write(l, "\n", 1);
		want += sizeof(big) + 1;
	}
	up_image_log_close(l, log_cb, &closed);
	close_loop(&loop);
	assert_int_equal(opened, 1);
	assert_int_equal(closed, 1);
	f = fopen(path, "r");
	assert_non_null(f);
	text = calloc(1, want + 10);
	assert_int_equal(fread(text, 1, want + 10, f), want);
	fclose(f);
	for (size_t i = 0; i < want; i++)
		assert_int_equal(text[i], (i + 1) % 1001 == 0 ? '\n' : 'z');
	free(text);
	{
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}

	/* A folder that does not exist: the open fails, close still completes. */
	opened = closed = 0;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_log_open(&loop, "/nonexistent/dir/log", log_cb, &opened, &l), 0);
	up_image_log_write(l, "x", 1);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(opened, UV_ENOENT);
	up_image_log_close(l, log_cb, &closed);
	close_loop(&loop);
	assert_int_equal(closed, UV_ENOENT);

	/* Closed from inside the open callback, as image.c does when the open fails. */
	{
		struct close_in_open c = {0};
		assert_int_equal(uv_loop_init(&loop), 0);
		assert_int_equal(up_image_log_open(&loop, "/nonexistent/dir/log", close_in_open_cb,
						   &c, &c.log),
				 0);
		close_loop(&loop);
		assert_int_equal(c.opened, UV_ENOENT);
		assert_int_equal(c.closed, UV_ENOENT);
	}

	/* Detached while opening: frees itself, calls nothing. */
	opened = 0;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_image_log_open(&loop, path, log_cb, &opened, &l), 0);
	up_image_log_write(l, "x", 1);
	up_image_log_close(l, NULL, NULL);
	close_loop(&loop);
	assert_int_equal(opened, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_spawn_error_and_kill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_writer, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
