/* SPDX-License-Identifier: Apache-2.0 */
#include "kube.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "bounds.h"
#include "fileio.h"
#include "http.h"
#include "kube-exec-credential.h"
#include "list.h"
#include "log.h"
#include "loop-timer.h"

enum call_state { CALL_NEW, CALL_WAIT_AUTH, CALL_RUNNING, CALL_BACKOFF };

struct up_kube {
	uv_loop_t *loop;
	struct up_http *http;
	struct up_kube_context *ctx;
	struct up_exec_cred *cred; /* from the exec plugin */
	char *file_token;	   /* from tokenFile */
	bool refreshing, refreshed_once, freed;
	struct up_list calls; /* up_kube_call::link, every live call */
	unsigned long sent;
	uint32_t rng;
};

struct up_kube_call {
	struct up_kube *k;
	struct up_list link;
	enum call_state state;
	char method[8];
	char *path, *body;
	size_t body_len;
	const char *content_type;
	bool idempotent, missing_ok, stream, auth_retried;
	unsigned attempt;
	uv_timer_t *timer;
	struct up_http_req *http;
	up_kube_fn cb;
	up_kube_raw_fn raw; /* instead of cb: any answer, as it came (up_kube_raw) */
	up_kube_line_fn line;
	void *ud;
	long timeout_ms;		  /* 0: UP_KUBE_TIMEOUT_MS */
	char *header_name, *header_value; /* the value may be a secret */
	size_t max_body;		  /* 0: UP_MAX_KUBE_BODY */
};

int up_kube_new(uv_loop_t *loop, struct up_kube_context *ctx, struct up_kube **ret)
{
	struct up_kube *k = calloc(1, sizeof(*k));
	int r;

	if (!k)
		return -ENOMEM;
	r = up_http_new(loop, &k->http);
	if (r < 0) {
		free(k);
		return r;
	}
	k->loop = loop;
	k->ctx = ctx;
	k->rng = (uint32_t)uv_hrtime() | 1;
	up_list_init(&k->calls);
	*ret = k;
	return 0;
}

const struct up_kube_context *up_kube_get_context(const struct up_kube *k)
{
	return k->ctx;
}

uv_loop_t *up_kube_loop(const struct up_kube *k)
{
	return k->loop;
}

unsigned long up_kube_requests_sent(const struct up_kube *k)
{
	return k->sent;
}

static uint32_t next_rand(struct up_kube *k)
{
	/* xorshift32: jitter needs spread, not secrecy. */
	k->rng ^= k->rng << 13;
	k->rng ^= k->rng >> 17;
	k->rng ^= k->rng << 5;
	return k->rng;
}

static void call_free(struct up_kube_call *c)
{
	up_list_remove(&c->link);
	if (c->http)
		up_http_cancel(c->http);
	c->timer = up_loop_timer_free(c->timer);
	free(c->path);
	free(c->header_name);
	if (c->header_value)
		up_free_secret(c->header_value, strlen(c->header_value));
	if (c->body) /* an applied Secret: its data are credentials */
		up_free_secret(c->body, c->body_len);
	free(c);
}

/* Ends a call: frees it first, so the callback may free the client itself. */
static void call_finish(struct up_kube_call *c, const struct up_kube_error *err, json_t *obj)
{
	up_kube_fn cb = c->cb;
	up_kube_raw_fn raw = c->raw;
	void *ud = c->ud;

	call_free(c);
	if (raw)
		raw(err, 0, NULL, 0, ud);
	else if (cb)
		cb(err, obj, ud);
	json_decref(obj);
}

static void call_fail(struct up_kube_call *c, int r, long code, const char *reason, const char *fmt,
		      ...) _printf_(5, 6);
static void call_fail(struct up_kube_call *c, int r, long code, const char *reason, const char *fmt,
		      ...)
{
	struct up_kube_error e = {.r = r, .code = code};
	va_list ap;

	(void)snprintf(e.reason, sizeof(e.reason), "%s", reason ? reason : "");
	va_start(ap, fmt);
	(void)vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	call_finish(c, &e, NULL);
}

static bool creds_stale(struct up_kube *k)
{
	struct timespec ts;

	if (k->ctx->exec) {
		if (!k->cred)
			return true;
		if (!k->cred->expiry_ms)
			return false;
		clock_gettime(CLOCK_REALTIME, &ts);
		return (int64_t)ts.tv_sec * 1000 + UP_KUBE_CRED_SKEW_MS >= k->cred->expiry_ms;
	}
	return k->ctx->token_file && !k->file_token;
}

static void send_call(struct up_kube_call *c);
static void send_call_now(struct up_kube_call *c);
static void refresh_creds(struct up_kube *k);

static void resume_waiting(struct up_kube *k, const char *error, int r)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &k->calls) {
		struct up_kube_call *c = up_container_of(pos, struct up_kube_call, link);

		if (c->state != CALL_WAIT_AUTH)
			continue;
		if (error)
			call_fail(c, r, 0, "CredentialsUnavailable", "%s", error);
		else
			send_call_now(
				c); /* even a credential about to expire is the newest there is */
	}
}

static void really_free(struct up_kube *k)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &k->calls) {
		struct up_kube_call *c = up_container_of(pos, struct up_kube_call, link);
		c->cb = NULL;
		c->raw = NULL;
		call_free(c);
	}
	up_http_free(k->http);
	up_exec_cred_free(k->cred);
	if (k->file_token)
		up_free_secret(k->file_token, strlen(k->file_token));
	up_kube_context_free(k->ctx);
	free(k);
}

static void on_exec_cred(int r, const char *error, struct up_exec_cred *cred, void *ud)
{
	struct up_kube *k = ud;

	k->refreshing = false;
	if (k->freed) {
		up_exec_cred_free(cred);
		really_free(k);
		return;
	}
	if (r == 0) {
		up_exec_cred_free(k->cred);
		k->cred = cred;
		log_debug("Exec credential plugin of context %s gave a %s", k->ctx->name,
			  cred->token ? "token" : "client certificate");
	}
	resume_waiting(k, r < 0 ? error : NULL, r);
}

struct token_work {
	uv_work_t work;
	struct up_kube *k;
	char *path, *token;
	int r;
};

static void token_read(uv_work_t *w)
{
	struct token_work *t = w->data;
	size_t len;

	t->r = up_read_file(t->path, UP_MAX_KUBE_CREDENTIAL_FILE, &t->token, &len);
	if (t->r == 0) {
		while (len > 0 && (t->token[len - 1] == '\n' || t->token[len - 1] == '\r' ||
				   t->token[len - 1] == ' '))
			t->token[--len] = '\0';
		if (len == 0)
			t->r = -ENODATA;
	}
}

static void token_done(uv_work_t *w, int status)
{
	struct token_work *t = w->data;
	struct up_kube *k = t->k;
	char msg[768];

	(void)status;
	k->refreshing = false;
	if (k->freed) {
		really_free(k);
	} else if (t->r == 0) {
		if (k->file_token)
			up_free_secret(k->file_token, strlen(k->file_token));
		k->file_token = TAKE_PTR(t->token);
		resume_waiting(k, NULL, 0);
	} else {
		(void)snprintf(msg, sizeof(msg),
			       "cannot read the token file %s of context %s (%s): %s", t->path,
			       k->ctx->name, k->ctx->file,
			       t->r == -ENODATA ? "it is empty" : strerror(-t->r));
		resume_waiting(k, msg, t->r);
	}
	if (t->token)
		up_free_secret(t->token, strlen(t->token));
	free(t->path);
	free(t);
}

static void refresh_creds(struct up_kube *k)
{
	char msg[256];
	int r;

	if (k->refreshing)
		return;
	k->refreshing = true;
	k->refreshed_once = true;
	if (k->ctx->exec) {
		r = up_kube_exec_run(k->loop, k->ctx, on_exec_cred, k);
	} else {
		struct token_work *t = calloc(1, sizeof(*t));
		if (!t || !(t->path = strdup(k->ctx->token_file))) {
			free(t);
			r = -ENOMEM;
		} else {
			t->k = k;
			t->work.data = t;
			r = uv_queue_work(k->loop, &t->work, token_read, token_done);
		}
	}
	if (r < 0) {
		k->refreshing = false;
		(void)snprintf(msg, sizeof(msg), "cannot refresh the credentials of context %s: %s",
			       k->ctx->name, strerror(-r));
		resume_waiting(k, msg, r);
	}
}

static bool retryable(const struct up_kube_call *c, int r, long status)
{
	if (!c->idempotent || c->stream || c->attempt + 1 >= UP_KUBE_MAX_ATTEMPTS)
		return false;
	if (r < 0)
		return r == -ECONNREFUSED || r == -ECONNRESET || r == -ETIMEDOUT ||
		       r == -EHOSTUNREACH || r == -EIO;
	return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

static void on_backoff(uv_timer_t *t)
{
	struct up_kube_call *c = t->data;

	c->attempt++;
	send_call(c);
}

static void backoff(struct up_kube_call *c, long retry_after)
{
	uint64_t ms = up_backoff_ms(c->attempt, UP_KUBE_BACKOFF_BASE_MS, UP_KUBE_BACKOFF_CAP_MS,
				    next_rand(c->k), retry_after);

	if (!c->timer) {
		c->timer = up_loop_timer_new(c->k->loop, c);
		if (!c->timer) {
			call_fail(c, -ENOMEM, 0, NULL, "out of memory");
			return;
		}
	}
	c->state = CALL_BACKOFF;
	log_debug("%s %s: retrying in %llu ms (attempt %u)", c->method, c->path,
		  (unsigned long long)ms, c->attempt + 2);
	(void)uv_timer_start(c->timer, on_backoff, ms, 0);
}

void up_kube_status_parse(const char *body, size_t len, long status, const char *method,
			  const char *path, const char *server, struct up_kube_error *e)
{
	json_t *st = json_loadb(body, len, 0, NULL);
	const char *kind = json_string_value(json_object_get(st, "kind"));
	const char *msg = json_string_value(json_object_get(st, "message"));
	const char *reason = json_string_value(json_object_get(st, "reason"));

	*e = (struct up_kube_error){.r = -EREMOTEIO, .code = status};
	if (kind && strcmp(kind, "Status") == 0 && msg) {
		(void)snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
		(void)snprintf(e->message, sizeof(e->message), "%s %s: %s (%s, HTTP %ld)", method,
			       path, msg, reason ? reason : "no reason", status);
	} else {
		(void)snprintf(
			e->message, sizeof(e->message),
			"%s %s: HTTP %ld from the API server at %s, with %zu bytes that are not a "
			"Kubernetes Status",
			method, path, status, server, len);
	}
	json_decref(st);
}

static void status_error(struct up_kube_call *c, const struct up_http_result *res)
{
	struct up_kube_error e;

	up_kube_status_parse(res->body, res->body_len, res->status, c->method, c->path,
			     c->k->ctx->server, &e);
	call_finish(c, &e, NULL);
}

static void transport_error(struct up_kube_call *c, const struct up_http_result *res)
{
	const struct up_kube_context *ctx = c->k->ctx;

	if (retryable(c, res->r, 0))
		backoff(c, -1);
	else if (res->r == -EFBIG)
		call_fail(c, res->r, 0, "TooLarge", "%s %s: %s", c->method, c->path, res->error);
	else
		call_fail(c, res->r, 0, "Unreachable",
			  "cannot reach the Kubernetes API at %s (context %s from %s): %s",
			  ctx->server, ctx->name, ctx->file, res->error);
}

static void unauthorized(struct up_kube_call *c)
{
	struct up_kube *k = c->k;

	if (!c->auth_retried && (k->ctx->exec || k->ctx->token_file)) {
		/* The credential expired or was revoked: fetch a new one and try once more. */
		c->auth_retried = true;
		c->state = CALL_WAIT_AUTH;
		k->cred = up_exec_cred_free(k->cred);
		refresh_creds(k);
		return;
	}
	call_fail(c, -EACCES, 401, "Unauthorized",
		  "the API server at %s refused the credentials of context %s (user %s in %s): "
		  "401 Unauthorized; renew them or pick another context",
		  k->ctx->server, k->ctx->name, k->ctx->user ? k->ctx->user : "(none)",
		  k->ctx->file);
}

static void success(struct up_kube_call *c, const struct up_http_result *res)
{
	json_error_t jerr;
	json_t *obj;

	if (c->stream || res->body_len == 0) {
		call_finish(c, NULL, NULL);
		return;
	}
	obj = json_loadb(res->body, res->body_len, 0, &jerr);
	if (!obj)
		call_fail(c, -EBADMSG, res->status, "BadAnswer",
			  "%s %s: the API server's answer is not JSON (%s)", c->method, c->path,
			  jerr.text);
	else
		call_finish(c, NULL, obj);
}

/*
 * The API server answers a server-side apply with an undeclared field with a 500
 * (kubernetes/kubernetes#122480), which no retry can cure.
 */
static bool deterministic_500(const struct up_http_result *res)
{
	return res->status == 500 &&
	       memmem(res->body, res->body_len, "failed to create typed patch object", 35) != NULL;
}

/* A raw call's answer, unless it is the API server refusing our own credentials. */
static bool raw_answer(struct up_kube_call *c, const struct up_http_result *res)
{
	up_kube_raw_fn raw = c->raw;
	void *ud = c->ud;

	if (!raw || res->r < 0 ||
	    (res->status == 401 && up_kube_is_status(res->body, res->body_len)))
		return false;
	call_free(c);
	raw(NULL, res->status, res->body, res->body_len, ud);
	return true;
}

static void on_http_done(struct up_http_req *req, const struct up_http_result *res, void *ud)
{
	struct up_kube_call *c = ud;

	(void)req;
	c->http = NULL;
	if (raw_answer(c, res))
		return;
	if (res->r < 0)
		transport_error(c, res);
	else if (res->status == 401)
		unauthorized(c);
	else if (res->status == 404 && c->missing_ok)
		call_finish(c, NULL, NULL);
	else if (res->status >= 200 && res->status < 300)
		success(c, res);
	else if (retryable(c, 0, res->status) && !deterministic_500(res))
		backoff(c, res->retry_after);
	else
		status_error(c, res);
}

static int on_http_line(struct up_http_req *req, const char *line, size_t len, void *ud)
{
	struct up_kube_call *c = ud;

	(void)req;
	return c->line(line, len, c->ud);
}

static void send_call(struct up_kube_call *c)
{
	if (creds_stale(c->k)) {
		c->state = CALL_WAIT_AUTH;
		refresh_creds(c->k);
		return;
	}
	send_call_now(c);
}

static void send_call_now(struct up_kube_call *c)
{
	struct up_kube *k = c->k;
	const struct up_kube_context *ctx = k->ctx;
	const struct up_exec_cred *cred = k->cred;
	char url[UP_MAX_KUBE_URL];
	size_t sl = strlen(ctx->server);
	int r;

	if (ctx->exec && !cred) {
		call_fail(c, -EACCES, 0, "CredentialsUnavailable", "no credential for context %s",
			  ctx->name);
		return;
	}
	/* A server URL may end in '/': never send "//api". */
	if (snprintf(url, sizeof(url), "%.*s%s",
		     (int)(sl && ctx->server[sl - 1] == '/' ? sl - 1 : sl), ctx->server,
		     c->path) >= (int)sizeof(url)) {
		call_fail(c, -ENAMETOOLONG, 0, NULL, "%s %s: the URL is too long", c->method,
			  c->path);
		return;
	}
	bool exec_cert = cred && cred->cert_pem;
	struct up_http_tls tls = {
		.ca_pem = ctx->ca_pem,
		.ca_len = ctx->ca_len,
		.insecure = ctx->insecure,
		.cert_pem = exec_cert ? cred->cert_pem : ctx->cert_pem,
		.cert_len = exec_cert ? cred->cert_len : ctx->cert_len,
		.key_pem = exec_cert ? cred->key_pem : ctx->key_pem,
		.key_len = exec_cert ? cred->key_len : ctx->key_len,
	};
	struct up_http_opts o = {
		.method = c->method,
		.url = url,
		.content_type = c->content_type,
		.body = c->body,
		.body_len = c->body_len,
		.tls = &tls,
		.stream = c->stream,
		.bearer = cred && cred->token ? cred->token
			  : k->file_token     ? k->file_token
					      : ctx->token,
		.timeout_ms = c->stream	      ? 0
			      : c->timeout_ms ? c->timeout_ms
					      : UP_KUBE_TIMEOUT_MS,
		.max_body = c->max_body,
		.header_name = c->header_name,
		.header_value = c->header_value,
	};
	c->state = CALL_RUNNING;
	r = up_http_start(k->http, &o, on_http_done, c->stream ? on_http_line : NULL, c, &c->http);
	if (r < 0) {
		call_fail(c, r, 0, NULL, "%s %s: cannot start the request: %s", c->method, c->path,
			  strerror(-r));
		return;
	}
	k->sent++;
}

static int call_new(struct up_kube *k, const char *method, const char *path, up_kube_fn cb,
		    void *ud, struct up_kube_call **ret)
{
	struct up_kube_call *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->k = k;
	c->cb = cb;
	c->ud = ud;
	(void)snprintf(c->method, sizeof(c->method), "%s", method);
	c->path = strdup(path);
	if (!c->path) {
		free(c);
		return -ENOMEM;
	}
	c->idempotent = true;
	up_list_insert_tail(&k->calls, &c->link);
	if (ret)
		*ret = c;
	return 0;
}

/* Starts on the next turn of the loop so that no callback runs before the caller returns. */
static void on_start(uv_timer_t *t)
{
	send_call(t->data);
}

/* `*ret` is set only when the call is under way: a failed start frees it. */
static int call_go(struct up_kube_call *c, struct up_kube_call **ret)
{
	c->timer = up_loop_timer_new(c->k->loop, c);
	if (!c->timer) {
		c->cb = NULL;
		c->raw = NULL;
		call_free(c);
		return -ENOMEM;
	}
	(void)uv_timer_start(c->timer, on_start, 0, 0);
	if (ret)
		*ret = c;
	return 0;
}

int up_kube_get(struct up_kube *k, const char *path, up_kube_fn cb, void *ud,
		struct up_kube_call **ret)
{
	struct up_kube_call *c;
	int r = call_new(k, "GET", path, cb, ud, &c);

	if (r < 0)
		return r;
	return call_go(c, ret);
}

int up_kube_list(struct up_kube *k, const char *path, const char *label_selector,
		 const char *field_selector, up_kube_fn cb, void *ud, struct up_kube_call **ret)
{
	char full[UP_MAX_KUBE_URL];
	int r = up_kube_query(full, sizeof(full), path, "labelSelector", label_selector,
			      "fieldSelector", field_selector, NULL);

	return r < 0 ? r : up_kube_get(k, full, cb, ud, ret);
}

int up_kube_apply(struct up_kube *k, json_t *obj, bool dry_run, up_kube_fn cb, void *ud,
		  struct up_kube_call **ret)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *api = json_string_value(json_object_get(obj, "apiVersion"));
	json_t *meta = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const char *ns = json_string_value(json_object_get(meta, "namespace"));
	const struct up_kube_resource *res = kind ? up_kube_resource_find(kind) : NULL;
	char path[UP_MAX_KUBE_URL], full[UP_MAX_KUBE_URL];
	struct up_kube_call *c;
	int r;

	if (!res || !api || strcmp(api, res->api_version) != 0 || !name || (res->namespaced && !ns))
		return -EINVAL;
	r = up_kube_path(path, sizeof(path), kind, res->namespaced ? ns : NULL, name);
	if (r >= 0)
		r = up_kube_query(full, sizeof(full), path, "fieldManager", "uplinkd", "force",
				  "true", "fieldValidation", "Strict", "dryRun",
				  dry_run ? "All" : NULL, NULL);
	if (r >= 0)
		r = call_new(k, "PATCH", full, cb, ud, &c);
	if (r < 0)
		return r;
	c->body = json_dumps(obj, JSON_COMPACT);
	if (!c->body) {
		c->cb = NULL;
		call_free(c);
		return -ENOMEM;
	}
	c->body_len = strlen(c->body);
	c->content_type = "application/apply-patch+yaml";
	return call_go(c, ret);
}

int up_kube_delete(struct up_kube *k, const char *path, up_kube_fn cb, void *ud,
		   struct up_kube_call **ret)
{
	static const char opts[] = "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\","
				   "\"propagationPolicy\":\"Background\"}";
	struct up_kube_call *c;
	int r = call_new(k, "DELETE", path, cb, ud, &c);

	if (r < 0)
		return r;
	c->missing_ok = true;
	c->body = strdup(opts);
	if (!c->body) {
		c->cb = NULL;
		call_free(c);
		return -ENOMEM;
	}
	c->body_len = sizeof(opts) - 1;
	c->content_type = "application/json";
	return call_go(c, ret);
}

int up_kube_stream(struct up_kube *k, const char *path, up_kube_line_fn line, up_kube_fn end,
		   void *ud, struct up_kube_call **ret)
{
	struct up_kube_call *c;
	int r = call_new(k, "GET", path, end, ud, &c);

	if (r < 0)
		return r;
	c->stream = true;
	c->line = line;
	return call_go(c, ret);
}

int up_kube_raw(struct up_kube *k, const struct up_kube_raw_opts *o, up_kube_raw_fn cb, void *ud,
		struct up_kube_call **ret)
{
	struct up_kube_call *c;
	int r = call_new(k, o->method, o->path, NULL, ud, &c);

	if (r < 0)
		return r;
	c->raw = cb;
	c->idempotent = false; /* the caller decides: it has a deadline */
	c->timeout_ms = o->timeout_ms;
	c->max_body = o->max_body;
	if (o->header_name && (!(c->header_name = strdup(o->header_name)) ||
			       !(c->header_value = strdup(o->header_value)))) {
		c->raw = NULL;
		call_free(c);
		return -ENOMEM;
	}
	if (o->body && !(c->body = malloc(o->body_len + 1))) {
		c->raw = NULL;
		call_free(c);
		return -ENOMEM;
	}
	if (o->body) {
		memcpy(c->body, o->body, o->body_len);
		c->body[o->body_len] = '\0';
		c->body_len = o->body_len;
		c->content_type = "application/json";
	}
	return call_go(c, ret);
}

bool up_kube_is_status(const char *body, size_t len)
{
	json_t *st = json_loadb(body, len, 0, NULL);
	const char *kind = json_string_value(json_object_get(st, "kind"));
	bool is = kind && strcmp(kind, "Status") == 0;

	json_decref(st);
	return is;
}

void up_kube_cancel(struct up_kube_call *c)
{
	if (c)
		call_free(c);
}

struct up_kube *up_kube_free(struct up_kube *k)
{
	if (!k)
		return NULL;
	if (k->refreshing) {
		/* A plugin or a token read is under way: free when it reports back. */
		struct up_list *pos, *tmp;
		k->freed = true;
		up_list_for_each_safe (pos, tmp, &k->calls) {
			struct up_kube_call *c = up_container_of(pos, struct up_kube_call, link);
			c->cb = NULL;
			c->raw = NULL;
			call_free(c);
		}
		return NULL;
	}
	really_free(k);
	return NULL;
}
