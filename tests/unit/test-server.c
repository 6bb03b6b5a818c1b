/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bounds.h"
#include "harness.h"

static int t_ping(struct up_request *req, void *params, void *ud)
{
	(void)params, (void)ud;
	up_request_reply(req, json_string("pong"));
	return 0;
}

static const struct up_method methods[] = {
	{"t.ping", NULL, 0, t_ping},
	{0},
};

static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.ping\"}\n";

static void expect_pong(struct harness *h, int fd)
{
	struct up_frame f;
	json_t *r;

	up_frame_init(&f, UP_MAX_FRAME_SIZE);
	harness_send(fd, ping);
	r = harness_recv(h, fd, &f);
	assert_string_equal(json_string_value(json_object_get(r, "result")), "pong");
	json_decref(r);
	up_frame_done(&f);
}

static int connect_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) <
		    (int)sizeof(sa.sun_path));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_listen_path_mode(void **state)
{
	char dir[] = "/tmp/uplink-server-XXXXXX", path[128];
	struct harness h;
	struct stat st;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	harness_init(&h, methods, NULL);
	assert_int_equal(up_server_listen_path(h.server, path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	fd = connect_path(path);
	expect_pong(&h, fd);
	assert_int_equal(up_server_stats(h.server)->clients, 1);
	close(fd);
	harness_done(&h);
	unlink(path);
	rmdir(dir);
}

static void test_oversized_frame_closes_only_that_client(void **state)
{
	struct harness h;
	struct up_frame f;
	char *big = malloc(UP_MAX_FRAME_SIZE + 100);
	int bad, good;

	(void)state;
	harness_init(&h, methods, NULL);
	up_frame_init(&f, UP_MAX_FRAME_SIZE);
	good = harness_connect(&h);
	bad = harness_connect(&h);
	memset(big, 'a', UP_MAX_FRAME_SIZE + 100);
	/* Written in pieces while the loop runs, as a real client's bytes would arrive. */
	fcntl(bad, F_SETFL, O_NONBLOCK);
	size_t off = 0;
	while (off < UP_MAX_FRAME_SIZE + 100) {
		ssize_t w = send(bad, big + off, UP_MAX_FRAME_SIZE + 100 - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EPIPE)
			break;
		if (w > 0)
			off += (size_t)w;
		(void)uv_run(&h.loop, UV_RUN_NOWAIT);
	}
	harness_expect_eof(&h, bad, &f);
	expect_pong(&h, good);
	close(bad);
	close(good);
	free(big);
	up_frame_done(&f);
	harness_done(&h);
}

static void test_many_clients(void **state)
{
	struct harness h;
	int fds[100];

	(void)state;
	harness_init(&h, methods, NULL);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		fds[i] = harness_connect(&h);
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < ELEMENTSOF(fds); i++)
			expect_pong(&h, fds[i]);
	assert_int_equal(up_server_stats(h.server)->clients, ELEMENTSOF(fds));
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		close(fds[i]);
	for (int i = 0; i < 100 && up_server_stats(h.server)->clients > 0; i++) {
		(void)uv_run(&h.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(up_server_stats(h.server)->clients, 0);
	harness_done(&h);
}

static void test_slow_reader_is_paused_then_served(void **state)
{
	struct harness h;
	struct up_frame f;
	int fd, n = 20000, got = 0;
	char *burst;
	size_t len = strlen(ping), off = 0;

	(void)state;
	/* Many requests without reading any answer: the daemon stops reading, never drops. */
	harness_init(&h, methods, NULL);
	up_frame_init(&f, UP_MAX_FRAME_SIZE);
	fd = harness_connect(&h);
	burst = malloc(len * (size_t)n);
	for (int i = 0; i < n; i++)
		memcpy(burst + len * (size_t)i, ping, len);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (off < len * (size_t)n) {
		ssize_t w = send(fd, burst + off, len * (size_t)n - off, MSG_NOSIGNAL);
		if (w > 0)
			off += (size_t)w;
		(void)uv_run(&h.loop, UV_RUN_NOWAIT);
		if (w < 0) {
			/* Our side is full too: read some answers so both can move. */
			bool eof;
			json_t *r = harness_recv_ex(&h, fd, &f, 50, &eof);
			assert_false(eof);
			if (r) {
				got++;
				json_decref(r);
			}
		}
	}
	while (got < n) {
		json_t *r = harness_recv(&h, fd, &f);
		json_decref(r);
		got++;
	}
	assert_int_equal(got, n);
	free(burst);
	close(fd);
	up_frame_done(&f);
	harness_done(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listen_path_mode),
		cmocka_unit_test(test_oversized_frame_closes_only_that_client),
		cmocka_unit_test(test_many_clients),
		cmocka_unit_test(test_slow_reader_is_paused_then_served),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
