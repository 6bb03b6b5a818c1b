/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "util.h"

/*
 * HTTP(S) on the daemon's loop: one libcurl multi handle (one connection pool,
 * HTTP/2 where offered) whose sockets and timer are libuv handles. Requests are
 * asynchronous; at most UP_HTTP_MAX_ACTIVE ordinary requests run at once (streams
 * do not count), the rest wait in order.
 */
struct up_http;
struct up_http_req;

/* What to trust and what to present. Blobs are copied by libcurl. */
struct up_http_tls {
	const char *ca_pem;
	size_t ca_len;
	const char *cert_pem;
	size_t cert_len;
	const char *key_pem;
	size_t key_len;
	bool insecure;
};

struct up_http_opts {
	const char *method; /* "GET" when NULL; "HEAD" asks for no body */
	const char *url;
	const char *content_type;
	const char *accept; /* "application/json" when NULL */
	const char *body;   /* copied */
	size_t body_len;
	const char *bearer; /* "Authorization: Bearer ..." (never logged) */
	/* One more header (its value may be a secret: never logged, wiped when freed). */
	const char *header_name, *header_value;
	const struct up_http_tls *tls;
	long timeout_ms; /* whole request; 0: none (streams) */
	size_t max_body; /* the answer's limit; past it the request fails with -EFBIG */
	bool stream;	 /* hand the body over line by line as it arrives */
};

/*
 * Called once when the request ends: r is 0 (status and body valid) or -errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EFBIG, -EPROTO for TLS, -EIO ...) with `error`
 * saying what happened. `retry_after` is the Retry-After header in seconds, or -1.
 */
struct up_http_result {
	int r;
	long status;
	const char *body;
	size_t body_len;
	long retry_after;
	const char *error;
};
typedef void (*up_http_done_fn)(struct up_http_req *req, const struct up_http_result *res,
				void *ud);
/* For streams: one line of the body; returning < 0 ends the request with that error. */
typedef int (*up_http_line_fn)(struct up_http_req *req, const char *line, size_t len, void *ud);

int up_http_new(uv_loop_t *loop, struct up_http **ret) _wur_;
/*
 * Cancels every request (no callbacks) and closes the handles; the loop finishes the
 * job. It may be called from a request's done callback, not from a line callback.
 */
struct up_http *up_http_free(struct up_http *h);
int up_http_start(struct up_http *h, const struct up_http_opts *o, up_http_done_fn done,
		  up_http_line_fn line, void *ud, struct up_http_req **ret) _wur_;
/* Ends a request without calling its callbacks. */
void up_http_cancel(struct up_http_req *req);
unsigned up_http_active(const struct up_http *h);
