/* SPDX-License-Identifier: Apache-2.0 */
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonrpc.h"
#include "bounds.h"
#include "log.h"
#include "loop-read.h"
#include "rpc.h"

struct up_server {
	uv_loop_t *loop;
	struct up_rpc *rpc;
	uv_pipe_t listener;
	bool listening;
	bool listener_closed;
	bool shutting_down;
	struct up_list conns; /* up_conn::link */
	struct up_server_stats stats;
	uint64_t next_serial;
};

struct write_req {
	uv_write_t req;
	struct up_conn *conn;
	char *data;
};

int up_server_new(uv_loop_t *loop, struct up_rpc *rpc, struct up_server **ret)
{
	struct up_server *s =
		up_new(struct up_server, .loop = loop, .rpc = rpc, .listener_closed = true);
	int r;

	if (!s)
		return -ENOMEM;
	up_list_init(&s->conns);
	r = uv_pipe_init(loop, &s->listener, 0);
	if (r < 0) {
		free(s);
		return r;
	}
	s->listener.data = s;
	s->listener_closed = false;
	*ret = s;
	return 0;
}

const struct up_server_stats *up_server_stats(const struct up_server *s)
{
	return &s->stats;
}

bool up_server_closed(const struct up_server *s)
{
	return s->listener_closed && up_list_empty(&s->conns);
}

static void conn_on_close(uv_handle_t *h)
{
	struct up_conn *c = h->data;

	up_list_remove(&c->link);
	c->server->stats.clients--;
	up_frame_done(&c->frame);
	free(c);
}

static void conn_close(struct up_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	up_rpc_conn_gone(c);
	uv_close((uv_handle_t *)&c->pipe, conn_on_close);
}

static void on_write(uv_write_t *w, int status)
{
	struct write_req *wr = (struct write_req *)w;
	struct up_conn *c = wr->conn;

	free(wr->data);
	free(wr);
	if (c->closing)
		return;
	if (status < 0) {
		log_debug("Client %" PRIu64 ": write failed: %s", c->serial, uv_strerror(status));
		conn_close(c);
		return;
	}
	c->writes_pending--;
	if (c->close_on_flush && c->writes_pending == 0) {
		conn_close(c);
		return;
	}
	up_conn_update_reading(c);
}

int up_conn_send(struct up_conn *c, const json_t *msg)
{
	struct write_req *wr;
	size_t len;
	int r;

	if (c->closing)
		return -ECONNRESET;
	wr = calloc(1, sizeof(*wr));
	if (!wr)
		return -ENOMEM;
	wr->conn = c;
	wr->data = up_json_dump_line(msg, &len);
	if (!wr->data) {
		free(wr);
		return -ENOMEM;
	}
	uv_buf_t buf = uv_buf_init(wr->data, (unsigned)len);
	r = uv_write(&wr->req, (uv_stream_t *)&c->pipe, &buf, 1, on_write);
	if (r < 0) {
		free(wr->data);
		free(wr);
		conn_close(c);
		return r;
	}
	c->writes_pending++;
	if (c->pipe.write_queue_size > UP_WRITE_QUEUE_MAX) {
		log_warning("Client %" PRIu64
			    " (pid %d) reads too slowly (%zu bytes queued), disconnecting",
			    c->serial, (int)c->pid, c->pipe.write_queue_size);
		conn_close(c);
		return -ENOBUFS;
	}
	up_conn_update_reading(c);
	return 0;
}

int up_conn_notify(struct up_conn *c, const char *method, json_t *params_steal)
{
	json_t *n = up_jsonrpc_notification(method, params_steal);
	int r;

	if (!n)
		return -ENOMEM;
	r = up_conn_send(c, n);
	json_decref(n);
	return r;
}

void up_conn_close_after_flush(struct up_conn *c)
{
	if (c->closing)
		return;
	c->close_on_flush = true;
	if (c->reading) {
		(void)uv_read_stop((uv_stream_t *)&c->pipe);
		c->reading = false;
	}
	if (c->writes_pending == 0)
		conn_close(c);
}

static void conn_process(struct up_conn *c)
{
	char *line;
	size_t len;
	int r;

	if (c->processing)
		return; /* an answer sent from inside the loop below re-entered us */
	c->processing = true;
	while (!c->closing && !c->close_on_flush && c->inflight < UP_MAX_INFLIGHT_PER_CONN) {
		r = up_frame_next(&c->frame, &line, &len);
		if (r == 0)
			break;
		if (r < 0) {
			log_warning("Client %" PRIu64
				    " (pid %d) sent a line over %d bytes, disconnecting",
				    c->serial, (int)c->pid, UP_MAX_FRAME_SIZE);
			conn_close(c);
			break;
		}
		c->server->stats.requests++;
		up_rpc_handle_line(c->server->rpc, c, line, len);
	}
	c->processing = false;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	struct up_conn *c = stream->data;
	int r;

	if (n == 0)
		return;
	if (n < 0) {
		if (n != UV_EOF)
			log_debug("Client %" PRIu64 ": read failed: %s", c->serial,
				  uv_strerror((int)n));
		conn_close(c);
		return;
	}
	r = up_frame_feed(&c->frame, buf->base, (size_t)n);
	if (r < 0) {
		log_warning("Client %" PRIu64 " (pid %d) sent a line over %d bytes, disconnecting",
			    c->serial, (int)c->pid, UP_MAX_FRAME_SIZE);
		conn_close(c);
		return;
	}
	conn_process(c);
	up_conn_update_reading(c);
}

void up_conn_update_reading(struct up_conn *c)
{
	bool want;

	if (c->closing || c->close_on_flush)
		return;
	want = c->inflight < UP_MAX_INFLIGHT_PER_CONN &&
	       c->pipe.write_queue_size < UP_WRITE_QUEUE_PAUSE;
	if (want == c->reading)
		return;
	if (want) {
		/* Lines that arrived while paused go first. */
		conn_process(c);
		if (c->closing || c->close_on_flush || c->inflight >= UP_MAX_INFLIGHT_PER_CONN)
			return;
		if (uv_read_start((uv_stream_t *)&c->pipe, up_loop_read_alloc, on_read) == 0)
			c->reading = true;
	} else {
		(void)uv_read_stop((uv_stream_t *)&c->pipe);
		c->reading = false;
	}
}

static void refuse(struct up_conn *c, enum up_error e, const char *why)
{
	json_t *msg = up_jsonrpc_error(NULL, e, why);

	c->server->stats.refused++;
	c->close_on_flush = true;
	if (msg)
		(void)up_conn_send(c, msg);
	json_decref(msg);
	if (!c->closing && c->writes_pending == 0)
		conn_close(c);
}

static int peer_credentials(struct up_conn *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uv_os_fd_t fd;

	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
		return -EBADF;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	c->uid = cred.uid;
	c->pid = cred.pid;
	return 0;
}

static void admit(struct up_conn *c)
{
	struct up_server *s = c->server;
	char why[256];
	int r;

	r = peer_credentials(c);
	if (r < 0) {
		log_warning_errno(r, "Cannot read the credentials of a new client, refusing it");
		refuse(c, UP_ERR_PERMISSION_DENIED, "uplinkd could not verify who you are");
		return;
	}
	if (c->uid != getuid()) {
		log_warning(
			"Refused a client with uid %u (pid %d): only uid %u may use this daemon",
			(unsigned)c->uid, (int)c->pid, (unsigned)getuid());
		(void)snprintf(why, sizeof(why),
			       "this uplinkd belongs to uid %u; uid %u must use its own "
			       "(systemctl --user start uplinkd.socket as that user)",
			       (unsigned)getuid(), (unsigned)c->uid);
		refuse(c, UP_ERR_PERMISSION_DENIED, why);
		return;
	}
	if (s->shutting_down) {
		refuse(c, UP_ERR_SHUTTING_DOWN, "uplinkd is shutting down; try again in a moment");
		return;
	}
	if (s->stats.clients > UP_MAX_CLIENTS) {
		log_warning("Refused client pid %d: already %d clients", (int)c->pid,
			    UP_MAX_CLIENTS);
		(void)snprintf(why, sizeof(why),
			       "uplinkd already serves %d clients, its limit; close some and retry",
			       UP_MAX_CLIENTS);
		refuse(c, UP_ERR_TOO_MANY_CLIENTS, why);
		return;
	}
	log_debug("Client %" PRIu64 " connected (pid %d)", c->serial, (int)c->pid);
	up_conn_update_reading(c);
}

static struct up_conn *conn_new(struct up_server *s);

static void on_connection(uv_stream_t *listener, int status)
{
	struct up_server *s = listener->data;
	struct up_conn *c;
	int r;

	if (status < 0) {
		log_warning("Accepting a client failed: %s, ignoring", uv_strerror(status));
		return;
	}
	c = conn_new(s);
	if (!c) {
		log_error("Out of memory accepting a client");
		return;
	}
	r = uv_accept(listener, (uv_stream_t *)&c->pipe);
	if (r < 0) {
		log_warning("Accepting a client failed: %s, ignoring", uv_strerror(r));
		conn_close(c);
		return;
	}
	admit(c);
}

static struct up_conn *conn_new(struct up_server *s)
{
	struct up_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->server = s;
	c->serial = ++s->next_serial;
	up_frame_init(&c->frame, UP_MAX_FRAME_SIZE);
	up_list_init(&c->requests);
	if (uv_pipe_init(s->loop, &c->pipe, 0) < 0) {
		free(c);
		return NULL;
	}
	c->pipe.data = c;
	up_list_insert_tail(&s->conns, &c->link);
	s->stats.clients++;
	s->stats.accepted++;
	return c;
}

int up_server_adopt_fd(struct up_server *s, int fd)
{
	struct up_conn *c = conn_new(s);
	int r;

	if (!c)
		return -ENOMEM;
	r = uv_pipe_open(&c->pipe, fd);
	if (r < 0) {
		conn_close(c);
		return r;
	}
	admit(c);
	return 0;
}

int up_server_listen_fd(struct up_server *s, int fd)
{
	int r = uv_pipe_open(&s->listener, fd);

	if (r < 0)
		return r;
	r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
	if (r < 0)
		return r;
	s->listening = true;
	return 0;
}

int up_server_listen_path(struct up_server *s, const char *path)
{
	mode_t old = umask(0177);
	int r;

	r = uv_pipe_bind(&s->listener, path);
	umask(old);
	if (r < 0)
		return r;
	if (chmod(path, 0600) < 0)
		return -errno;
	r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
	if (r < 0)
		return r;
	s->listening = true;
	return 0;
}

static void on_listener_close(uv_handle_t *h)
{
	struct up_server *s = h->data;

	s->listener_closed = true;
}

void up_server_shutdown(struct up_server *s)
{
	struct up_list *pos, *tmp;

	if (s->shutting_down)
		return;
	s->shutting_down = true;
	if (!uv_is_closing((uv_handle_t *)&s->listener))
		uv_close((uv_handle_t *)&s->listener, on_listener_close);
	up_list_for_each_safe (pos, tmp, &s->conns) {
		struct up_conn *c = up_container_of(pos, struct up_conn, link);

		up_rpc_conn_cancel_all(c);
		up_conn_close_after_flush(c);
	}
}

void up_server_close_all(struct up_server *s)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &s->conns)
		conn_close(up_container_of(pos, struct up_conn, link));
}

struct up_server *up_server_free(struct up_server *s)
{
	if (!s)
		return NULL;
	free(s);
	return NULL;
}
