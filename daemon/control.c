/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control channel to a session's proxy (control.h): calls through the API server's
 * pods/proxy subresource, and the session's rules push. The listener's answers come back
 * as they are (kube.h up_kube_raw); the API server's own (the pod is gone, not running, or
 * cannot be reached) are Kubernetes Status objects, told apart by their kind.
 */
#include "control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "hex.h"
#include "bounds.h"
#include "cluster.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "kube.h"
#include "log.h"
#include "manifests.h"
#include "protocol.h"
#include "session-private.h"

#define CONTROL_POD	 "mitm"
#define CONTROL_PATH_MAX 512

struct up_control_call {
	struct up_session *s;
	struct up_kube_call *kc; /* the Secret read, then the call itself */
	char method[8];
	char path[CONTROL_PATH_MAX]; /* on the listener: "/v1/rules" */
	char *body;		     /* secret: a rules document holds credentials */
	size_t body_len;
	long timeout_ms;
	up_control_done_fn done;
	void *ud;
};

/* up_session::control_push: one rules push in flight, and the newest document waiting. */
struct up_control_push {
	struct up_session *s;
	struct up_control_call *call;
	json_t *next;	/* secret */
	uint64_t start; /* uv_hrtime() when the push in flight began */
};

int up_control_token_new(char *buf)
{
	return up_random_hex(buf, UP_CONTROL_TOKEN_LEN / 2);
}

static void call_free(struct up_control_call *c)
{
	up_kube_cancel(c->kc);
	if (c->body)
		up_free_secret(c->body, c->body_len);
	free(c);
}

void up_control_call_cancel(struct up_control_call *c)
{
	if (c)
		call_free(c);
}

static void finish(struct up_control_call *c, int r, long status, json_t *reply, const char *err)
{
	up_control_done_fn done = c->done;
	void *ud = c->ud;

	c->kc = NULL; /* it ended: this callback is its last */
	call_free(c);
	done(r, status, reply, err, ud);
}

/* The API server's Status, or the listener's {"error": ...}, as one sentence. */
static void answer_error(struct up_control_call *c, long status, const char *body, size_t len,
			 json_t *reply)
{
	struct up_kube *k = up_cluster_kube(c->s->cluster);
	const char *said = json_string_value(json_object_get(reply, "error"));
	char msg[1200];

	if (up_kube_is_status(body, len)) {
		struct up_kube_error e;
		up_kube_status_parse(body, len, status, c->method, c->path,
				     k ? up_kube_get_context(k)->server : "?", &e);
		(void)snprintf(msg, sizeof(msg), "the API server could not reach the proxy: %s",
			       e.message);
	} else {
		(void)snprintf(msg, sizeof(msg),
			       "the proxy's control listener answered %s %s with "
			       "HTTP %ld: %s",
			       c->method, c->path, status, said ? said : "(no reason given)");
	}
	finish(c, status == 401 ? -EACCES : -EREMOTEIO, status, NULL, msg);
}

static void on_answer(const struct up_kube_error *err, long status, const char *body, size_t len,
		      void *ud)
{
	struct up_control_call *c = ud;
	json_t *reply;

	if (err) {
		finish(c, err->r < 0 ? err->r : -EIO, 0, NULL, err->message);
		return;
	}
	reply = json_loadb(body, len, 0, NULL);
	if (status < 200 || status >= 300) {
		answer_error(c, status, body, len, reply);
	} else if (!json_is_object(reply)) {
		finish(c, -EBADMSG, status, NULL,
		       "the proxy's control listener answered with something that is not a JSON "
		       "object; the addon in the mitm pod may be of another uplink version");
	} else {
		finish(c, 0, status, reply, NULL);
	}
	json_decref(reply);
}

static int send_call(struct up_control_call *c)
{
	struct up_kube *k = up_cluster_kube(c->s->cluster);
	char path[UP_MAX_KUBE_URL];
	struct up_kube_raw_opts o = {
		.method = c->method,
		.path = path,
		.body = c->body,
		.body_len = c->body_len,
		.timeout_ms = c->timeout_ms,
		.max_body = UP_MAX_CONTROL_ANSWER,
		.header_name = UP_CONTROL_TOKEN_HEADER,
		.header_value = c->s->control_token,
	};

	if (!k)
		return -ENOTCONN;
	if (snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s:%d/proxy%s", c->s->ns,
		     CONTROL_POD, UP_CONTROL_PORT, c->path) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return up_kube_raw(k, &o, on_answer, c, &c->kc);
}

static bool is_token(const char *t, size_t len)
{
	return len == UP_CONTROL_TOKEN_LEN && strspn(t, "0123456789abcdef") == len;
}

/* After a restart: the token read back from the rules Secret, then the call. */
static void on_secret(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct up_control_call *c = ud;
	char *text = NULL;
	size_t len = 0;
	int r;

	c->kc = NULL;
	if (err) {
		finish(c, err->r < 0 ? err->r : -EIO, 0, NULL, err->message);
		return;
	}
	r = up_manifests_secret_get(obj, UP_MANIFEST_CONTROL_KEY, &text, &len);
	if (r >= 0 && !is_token(text, len))
		r = -EINVAL;
	if (r >= 0)
		memcpy(c->s->control_token, text, UP_CONTROL_TOKEN_LEN + 1);
	if (text)
		up_free_secret(text, len);
	if (r >= 0)
		r = send_call(c);
	if (r < 0)
		finish(c, r, 0, NULL,
		       r == -ENOENT || r == -EINVAL
			       ? "the session's rules Secret holds no control token (a session "
				 "started by an older uplinkd has no control listener)"
			       : "cannot call the proxy's control listener");
}

static int fetch_token(struct up_control_call *c)
{
	struct up_kube *k = up_cluster_kube(c->s->cluster);
	char path[256];
	int r = up_kube_path(path, sizeof(path), "Secret", c->s->ns, UP_MANIFEST_RULES_SECRET);

	if (!k)
		return -ENOTCONN;
	return r < 0 ? r : up_kube_get(k, path, on_secret, c, &c->kc);
}

/* A path (and query) on the listener: nothing that could bend the pods/proxy path. */
static bool safe_path(const char *p)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "0123456789/._~-=&?";

	return p[0] == '/' && strlen(p) < CONTROL_PATH_MAX && strspn(p, ok) == strlen(p) &&
	       !strstr(p, "..") && !strstr(p, "//");
}

struct up_control_call *up_control_call(struct up_session *s, const char *method, const char *path,
					json_t *body, uint64_t timeout_ms, up_control_done_fn done,
					void *userdata)
{
	struct up_control_call *c;
	int r;

	if (!s->cluster || !path || !safe_path(path) || strlen(method) >= sizeof(c->method))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->s = s;
	c->done = done;
	c->ud = userdata;
	c->timeout_ms = (long)(timeout_ms ? timeout_ms : UP_CONTROL_TIMEOUT_MS);
	(void)snprintf(c->method, sizeof(c->method), "%s", method);
	(void)snprintf(c->path, sizeof(c->path), "%s", path);
	if (body) {
		c->body = json_dumps(body, JSON_COMPACT);
		c->body_len = c->body ? strlen(c->body) : 0;
		if (!c->body || c->body_len > UP_MAX_CONTROL_BODY) {
			call_free(c);
			return NULL;
		}
	}
	r = s->control_token[0] ? send_call(c) : fetch_token(c);
	if (r < 0) {
		call_free(c);
		return NULL;
	}
	return c;
}

/* ---- the session's rules push ---- */

static void push_start(struct up_control_push *p, json_t *doc);

static void on_pushed(int r, long status, json_t *reply, const char *err, void *ud)
{
	struct up_control_push *p = ud;
	struct up_session *s = p->s;
	unsigned long long ms = (uv_hrtime() - p->start) / 1000000;

	(void)status;
	p->call = NULL;
	if (r >= 0)
		log_info("Session %s: rules pushed to the proxy over the control channel "
			 "(generation %lld, %llu ms)",
			 s->id, (long long)json_integer_value(json_object_get(reply, "generation")),
			 ms);
	else
		log_warning("Session %s: cannot push the rules to the proxy over the control "
			    "channel (%s); it takes them from the rules Secret when the kubelet "
			    "updates the mounted file, ignoring",
			    s->id, err);
	if (p->next) {
		json_t *doc = p->next;
		p->next = NULL;
		push_start(p, doc);
	}
}

/* Takes `doc`. */
static void push_start(struct up_control_push *p, json_t *doc)
{
	p->start = uv_hrtime();
	p->call =
		up_control_call(p->s, "PUT", "/v1/rules", doc, UP_CONTROL_TIMEOUT_MS, on_pushed, p);
	up_json_wipe(doc);
	json_decref(doc);
	if (!p->call)
		log_warning("Session %s: cannot start a rules push to the proxy (no cluster "
			    "connection, or out of memory); it takes them from the rules Secret, "
			    "ignoring",
			    p->s->id);
}

void up_control_push_rules(struct up_session *s, const json_t *rules)
{
	struct up_control_push *p = s->control_push;
	json_t *doc = json_deep_copy(rules);

	if (!doc)
		return;
	if (!p && !(p = s->control_push = calloc(1, sizeof(*p)))) {
		json_decref(doc);
		return;
	}
	p->s = s;
	if (p->call) { /* the newest goes next; an older one waiting is dropped */
		if (p->next) {
			up_json_wipe(p->next);
			json_decref(p->next);
		}
		p->next = doc;
		return;
	}
	push_start(p, doc);
}

void up_control_push_free(struct up_session *s)
{
	struct up_control_push *p = s->control_push;

	if (!p)
		return;
	up_control_call_cancel(p->call);
	if (p->next) {
		up_json_wipe(p->next);
		json_decref(p->next);
	}
	free(p);
	s->control_push = NULL;
}
