/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc-client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "jsonrpc.h"
#include "bounds.h"

struct up_rpc_client {
	int fd;
	json_int_t next_id;
	struct up_frame frame;
};

int up_rpc_client_connect(const char *path, struct up_rpc_client **ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_(closep) int fd = -1;
	struct up_rpc_client *c;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = TAKE_FD(fd);
	c->next_id = 1;
	up_frame_init(&c->frame, UP_MAX_FRAME_SIZE);
	*ret = c;
	return 0;
}

struct up_rpc_client *up_rpc_client_free(struct up_rpc_client *c)
{
	if (!c)
		return NULL;
	closep(&c->fd);
	up_frame_done(&c->frame);
	free(c);
	return NULL;
}

void up_rpc_client_freep(struct up_rpc_client **c)
{
	*c = up_rpc_client_free(*c);
}

int up_rpc_client_fd(const struct up_rpc_client *c)
{
	return c->fd;
}

void up_rpc_error_done(struct up_rpc_error *e)
{
	json_decref(e->data);
	e->data = NULL;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int up_rpc_client_send(struct up_rpc_client *c, const char *method, json_t *params_steal)
{
	json_t *req = up_jsonrpc_request(method, params_steal, c->next_id++);
	_cleanup_(freep) char *line = NULL;
	size_t len;

	if (!req)
		return -ENOMEM;
	line = up_json_dump_line(req, &len);
	json_decref(req);
	return line ? write_all(c->fd, line, len) : -ENOMEM;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads until one whole line is buffered; returns it parsed. */
static int read_message(struct up_rpc_client *c, long long deadline, json_t **msg)
{
	char buf[65536], *line;
	size_t len;
	int r;

	for (;;) {
		r = up_frame_next(&c->frame, &line, &len);
		if (r < 0)
			return r;
		if (r > 0) {
			*msg = json_loadb(line, len, 0, NULL);
			return *msg ? 0 : -EBADMSG;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int timeout = deadline < 0 ? -1 : (int)(deadline - now_ms());
		if (deadline >= 0 && timeout <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		r = up_frame_feed(&c->frame, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

static void fill_error(json_t *e, struct up_rpc_error *err)
{
	const char *msg = json_string_value(json_object_get(e, "message"));
	json_t *data = json_object_get(e, "data");
	const char *name = json_string_value(json_object_get(data, "name"));

	err->code = (int)json_integer_value(json_object_get(e, "code"));
	(void)snprintf(err->name, sizeof(err->name), "%s", name ? name : "UNKNOWN");
	(void)snprintf(err->message, sizeof(err->message), "%s", msg ? msg : "(no message)");
	err->data = json_incref(data);
}

int up_rpc_client_call(struct up_rpc_client *c, const char *method, json_t *params_steal,
		       int timeout_ms, up_rpc_notify_cb cb, void *userdata, json_t **result,
		       struct up_rpc_error *err)
{
	json_int_t id = c->next_id++;
	json_t *req = up_jsonrpc_request(method, params_steal, id);
	_cleanup_(freep) char *line = NULL;
	long long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	size_t len;
	int r;

	if (!req)
		return -ENOMEM;
	line = up_json_dump_line(req, &len);
	json_decref(req);
	if (!line)
		return -ENOMEM;
	r = write_all(c->fd, line, len);
	if (r < 0) {
		/* The daemon may have refused us and closed: its reason is still readable. */
		json_t *msg = NULL;
		if (read_message(c, now_ms() + 1000, &msg) == 0 && json_object_get(msg, "error")) {
			fill_error(json_object_get(msg, "error"), err);
			json_decref(msg);
			return 1;
		}
		json_decref(msg);
		return r;
	}

	for (;;) {
		json_t *msg = NULL, *mid;

		r = read_message(c, deadline, &msg);
		if (r < 0)
			return r;
		mid = json_object_get(msg, "id");
		if (!mid) {
			const char *m = json_string_value(json_object_get(msg, "method"));
			if (cb && m)
				cb(m, json_object_get(msg, "params"), userdata);
			json_decref(msg);
			continue;
		}
		if (json_is_integer(mid) && json_integer_value(mid) == id) {
			json_t *e = json_object_get(msg, "error");
			if (e) {
				fill_error(e, err);
				json_decref(msg);
				return 1;
			}
			*result = json_incref(json_object_get(msg, "result"));
			json_decref(msg);
			return 0;
		}
		if (json_is_null(mid) && json_object_get(msg, "error")) {
			/* The daemon refused the connection itself (uid, limits). */
			fill_error(json_object_get(msg, "error"), err);
			json_decref(msg);
			return 1;
		}
		json_decref(msg);
	}
}
