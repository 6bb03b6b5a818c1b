/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "util.h"

/*
 * The client side of the protocol: one connection, blocking calls with a timeout.
 * It is for the CLI and tests; the daemon never uses it.
 */
struct up_rpc_client;

struct up_rpc_error {
	int code;
	char name[64];
	char message[1024];
	json_t *data; /* owned, may be NULL */
};

/* Called for each notification that arrives while a call waits for its answer. */
typedef void (*up_rpc_notify_cb)(const char *method, json_t *params, void *userdata);

/* 0, or -errno from connect() (-ENOENT and -ECONNREFUSED mean "no daemon"). */
int up_rpc_client_connect(const char *path, struct up_rpc_client **ret) _wur_;
struct up_rpc_client *up_rpc_client_free(struct up_rpc_client *c);
void up_rpc_client_freep(struct up_rpc_client **c);
void up_rpc_error_done(struct up_rpc_error *e);

/*
 * Sends one request and waits up to timeout_ms (-1: forever) for its answer.
 * Returns 0 with *result set (owned by the caller), 1 with *err filled when the
 * daemon answered with an error, or -errno when the connection failed
 * (-ECONNRESET: closed by the daemon, -ETIMEDOUT, -EBADMSG: unparseable answer).
 */
int up_rpc_client_call(struct up_rpc_client *c, const char *method, json_t *params_steal,
		       int timeout_ms, up_rpc_notify_cb cb, void *userdata, json_t **result,
		       struct up_rpc_error *err) _wur_;

/*
 * Sends a request and does not wait for its answer (which later calls skip). For
 * requests held open for the connection's lifetime, such as session.hold.
 */
int up_rpc_client_send(struct up_rpc_client *c, const char *method, json_t *params_steal) _wur_;

/* The file descriptor, for callers that poll it together with other things. */
int up_rpc_client_fd(const struct up_rpc_client *c);
