/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "kubeconfig.h"
#include "util.h"

/*
 * The Kubernetes API over HTTPS on the daemon's loop. Every call is asynchronous and
 * ends in exactly one callback (unless cancelled). Idempotent calls retry on
 * connection errors, 429 and 5xx with capped exponential backoff and jitter.
 */
struct up_kube;
struct up_kube_call;

/* Why a call failed: a transport error (r < 0, code 0) or an API Status (code > 0). */
struct up_kube_error {
	int r;
	long code;
	char reason[64];    /* the Status reason: NotFound, AlreadyExists, Expired, ... */
	char message[1024]; /* a sentence: the API server's own message, with what we asked */
};

typedef void (*up_kube_fn)(const struct up_kube_error *err, json_t *obj, void *ud);
/* Streams (watch, logs): one line; returning < 0 ends the stream with that error. */
typedef int (*up_kube_line_fn)(const char *line, size_t len, void *ud);

struct up_kube_resource {
	const char *kind;
	const char *api_version;
	const char *plural;
	bool namespaced;
};

const struct up_kube_resource *up_kube_resource_find(const char *kind);
/* "/api/v1/namespaces/NS/pods/NAME" and friends; NULL ns/name for collections. */
int up_kube_path(char *buf, size_t len, const char *kind, const char *ns, const char *name) _wur_;
/* Appends "?k=v&..." with the values URL-encoded; NULL values are skipped. */
int up_kube_query(char *buf, size_t len, const char *path, ...) _wur_;

/* Takes ownership of `ctx`. */
int up_kube_new(uv_loop_t *loop, struct up_kube_context *ctx, struct up_kube **ret) _wur_;
/* Cancels every call without callbacks; handles finish closing on the loop. */
struct up_kube *up_kube_free(struct up_kube *k);
const struct up_kube_context *up_kube_get_context(const struct up_kube *k);

int up_kube_get(struct up_kube *k, const char *path, up_kube_fn cb, void *ud,
		struct up_kube_call **ret) _wur_;
int up_kube_list(struct up_kube *k, const char *path, const char *label_selector,
		 const char *field_selector, up_kube_fn cb, void *ud,
		 struct up_kube_call **ret) _wur_;
/* Server-side apply (fieldManager=uplinkd, force, strict field validation). */
int up_kube_apply(struct up_kube *k, json_t *obj, bool dry_run, up_kube_fn cb, void *ud,
		  struct up_kube_call **ret) _wur_;
/* Background propagation; an object already gone is success (obj NULL). */
int up_kube_delete(struct up_kube *k, const char *path, up_kube_fn cb, void *ud,
		   struct up_kube_call **ret) _wur_;
/* A long-lived GET whose body arrives line by line (watch=1, or follow=true for logs). */
int up_kube_stream(struct up_kube *k, const char *path, up_kube_line_fn line, up_kube_fn end,
		   void *ud, struct up_kube_call **ret) _wur_;
/*
 * Any request, answered as it came: for subresources that relay another server's answers
 * (pods/proxy). `err` is set only for a transport failure or timeout (status 0) or when
 * the API server refuses our credentials; otherwise `status` and `body` (borrowed for the
 * callback) are the answer, whoever gave it. Never retried; the body is JSON.
 */
typedef void (*up_kube_raw_fn)(const struct up_kube_error *err, long status, const char *body,
			       size_t len, void *ud);
struct up_kube_raw_opts {
	const char *method;
	const char *path;
	const char *body; /* copied (and wiped when freed: it may hold credentials); NULL: none */
	size_t body_len;
	long timeout_ms; /* the whole request */
	size_t max_body; /* of the answer; 0 = UP_MAX_KUBE_BODY */
	/* One more header, e.g. a token for the server behind the proxy (copied, wiped). */
	const char *header_name, *header_value;
};
int up_kube_raw(struct up_kube *k, const struct up_kube_raw_opts *o, up_kube_raw_fn cb, void *ud,
		struct up_kube_call **ret) _wur_;
/* Whether an answer's body is a Kubernetes Status object. */
bool up_kube_is_status(const char *body, size_t len);
void up_kube_cancel(struct up_kube_call *c);

uv_loop_t *up_kube_loop(const struct up_kube *k);

/* An error answer as the error callers get: the Status's reason and message, or a sentence. */
void up_kube_status_parse(const char *body, size_t len, long status, const char *method,
			  const char *path, const char *server, struct up_kube_error *e);

/* For tests and benchmarks: how many HTTP requests were sent (retries included). */
unsigned long up_kube_requests_sent(const struct up_kube *k);
