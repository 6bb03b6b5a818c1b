/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "frame.h"
#include "list.h"
#include "util.h"

struct up_rpc;

/*
 * The listening socket and every client connection. A connection owns its read
 * buffer, its queued writes and the list of its in-flight requests; it is freed
 * only in its uv_close() callback.
 */
struct up_server;

struct up_conn {
	struct up_server *server;
	uv_pipe_t pipe;
	struct up_list link; /* up_server::conns */
	struct up_frame frame;
	struct up_list requests; /* up_request::link, in-flight requests */
	unsigned inflight;
	unsigned writes_pending;
	uint64_t serial;
	uid_t uid;
	pid_t pid;
	bool reading;
	bool processing;     /* inside conn_process(), which must not nest */
	bool closing;	     /* uv_close() has been called */
	bool close_on_flush; /* close once every queued write is done */
};

struct up_server_stats {
	unsigned clients;
	uint64_t accepted;
	uint64_t refused;
	uint64_t requests;
};

/* Takes the listening socket from systemd (fd 3) or binds `path`. */
int up_server_new(uv_loop_t *loop, struct up_rpc *rpc, struct up_server **ret) _wur_;
int up_server_listen_fd(struct up_server *s, int fd) _wur_;
int up_server_listen_path(struct up_server *s, const char *path) _wur_;
/* Serves an already connected socket as a client (tests, and inherited connections). */
int up_server_adopt_fd(struct up_server *s, int fd) _wur_;
/* Stops accepting, cancels in-flight work, flushes answers and closes every connection. */
void up_server_shutdown(struct up_server *s);
/* Closes every connection now, whatever is still queued. */
void up_server_close_all(struct up_server *s);
/* Frees the server after shutdown and after the loop has run the close callbacks. */
struct up_server *up_server_free(struct up_server *s);
const struct up_server_stats *up_server_stats(const struct up_server *s);
bool up_server_closed(const struct up_server *s);

/* Queues one JSON value as a line on the connection. Returns 0 or -errno. */
int up_conn_send(struct up_conn *c, const json_t *msg);
/* Pushes a notification (a request without id) to the client. */
int up_conn_notify(struct up_conn *c, const char *method, json_t *params_steal);
/* Re-evaluates whether to read from the client (in-flight and write-queue limits). */
void up_conn_update_reading(struct up_conn *c);
/* Writes what is queued, then closes. */
void up_conn_close_after_flush(struct up_conn *c);
