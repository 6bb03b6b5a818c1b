/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real uv_loop_t and real sockets for the daemon's unit tests: the test drives the
 * loop by hand while it waits for the peer end of a socket to become readable.
 */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "frame.h"
#include "rpc.h"
#include "server.h"

struct harness {
	uv_loop_t loop;
	struct up_rpc *rpc;
	struct up_server *server;
};

static inline void harness_init(struct harness *h, const struct up_method *methods, void *ud)
{
	assert_int_equal(uv_loop_init(&h->loop), 0);
	h->rpc = up_rpc_new();
	assert_non_null(h->rpc);
	if (methods)
		assert_int_equal(up_rpc_register(h->rpc, methods, ud), 0);
	assert_int_equal(up_server_new(&h->loop, h->rpc, &h->server), 0);
}

/* A connected client: returns the test's end; the server serves the other. */
static inline int harness_connect(struct harness *h)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(up_server_adopt_fd(h->server, sv[1]), 0);
	return sv[0];
}

static inline void harness_send(int fd, const char *text)
{
	size_t n = strlen(text);

	while (n > 0) {
		ssize_t w = send(fd, text, n, MSG_NOSIGNAL);
		assert_true(w > 0);
		text += w;
		n -= (size_t)w;
	}
}

static inline long long harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Runs the loop until a whole line arrives on fd (returned parsed), the peer closes
 * (NULL, *eof = true) or the timeout passes (NULL, *eof = false).
 */
static inline json_t *harness_recv_ex(struct harness *h, int fd, struct up_frame *f, int timeout_ms,
				      bool *eof)
{
	long long deadline = harness_now_ms() + timeout_ms;
	char buf[65536], *line;
	size_t len;

	*eof = false;
	for (;;) {
		int r = up_frame_next(f, &line, &len);
		assert_true(r >= 0);
		if (r > 0) {
			json_t *v = json_loadb(line, len, 0, NULL);
			assert_non_null(v);
			return v;
		}
		if (harness_now_ms() > deadline)
			return NULL;
		(void)uv_run(&h->loop, UV_RUN_NOWAIT);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 5) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			*eof = true;
			return NULL;
		}
		assert_int_equal(up_frame_feed(f, buf, (size_t)n), 0);
	}
}

static inline json_t *harness_recv(struct harness *h, int fd, struct up_frame *f)
{
	bool eof;
	json_t *v = harness_recv_ex(h, fd, f, 5000, &eof);

	assert_non_null(v);
	return v;
}

/* Runs the loop until the peer closes fd; fails after 5 s. */
static inline void harness_expect_eof(struct harness *h, int fd, struct up_frame *f)
{
	bool eof = false;
	json_t *v;

	while ((v = harness_recv_ex(h, fd, f, 5000, &eof)))
		json_decref(v);
	assert_true(eof);
}

/* Shuts the server down and checks that every handle was closed. */
static inline void harness_done(struct harness *h)
{
	up_server_shutdown(h->server);
	(void)uv_run(&h->loop, UV_RUN_DEFAULT);
	assert_true(up_server_closed(h->server));
	assert_int_equal(uv_loop_close(&h->loop), 0);
	h->server = up_server_free(h->server);
	h->rpc = up_rpc_free(h->rpc);
}

static inline const char *error_name(const json_t *msg)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(msg, "error"), "data"), "name"));
}

static inline const char *error_message(const json_t *msg)
{
	return json_string_value(json_object_get(json_object_get(msg, "error"), "message"));
}
