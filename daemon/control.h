/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "util.h"

/*
 * The control channel to a session's proxy: calls to the control listener in its mitm pod
 * (manifests/mitm/uplink_control.py) through the API server's pods/proxy subresource
 * (.../namespaces/NS/pods/mitm:UP_CONTROL_PORT/proxy/PATH) with the daemon's own
 * Kubernetes credentials, over the session's up_kube client; the session's token
 * (UP_CONTROL_TOKEN_HEADER) from memory, or after a restart read back from the rules
 * Secret. Non-blocking, each call with a deadline.
 */
struct up_session;
struct up_control_call;

/*
 * r is 0 when the listener answered 2xx (http_status, reply: its JSON object), else -errno
 * with `err` a sentence saying what failed (the listener's own "error", the API server's
 * Status, or the transport), http_status 0 when there was no answer. `reply` and `err` are
 * borrowed for the callback.
 */
typedef void (*up_control_done_fn)(int r, long http_status, json_t *reply, const char *err,
				   void *userdata);

/* One call; `body` (may be NULL) is serialised at once (not kept). NULL when it cannot start
 * (no cluster, bad path, out of memory); otherwise `done` runs exactly once, never before
 * this returns, unless cancelled. Cancel every call before its session goes. */
struct up_control_call *up_control_call(struct up_session *s, const char *method, const char *path,
					json_t *body, uint64_t timeout_ms, up_control_done_fn done,
					void *userdata);
void up_control_call_cancel(struct up_control_call *c); /* no callback after */

/* A new token: UP_CONTROL_TOKEN_LEN lowercase hex digits and a NUL, from getrandom(). */
int up_control_token_new(char *buf) _wur_;

/*
 * The session's rules pushed to its proxy (PUT /v1/rules): `rules` is the document the rules
 * Secret was just given (borrowed). One push in flight per session; a newer document asked
 * for meanwhile goes next (only the newest). A failure is logged; the Secret, still
 * written, is how the proxy gets the rules then.
 */
void up_control_push_rules(struct up_session *s, const json_t *rules);
/* Cancels the session's push (when the session goes). */
void up_control_push_free(struct up_session *s);
