/* SPDX-License-Identifier: Apache-2.0 */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "frame.h"
#include "list.h"
#include "log.h"

struct up_http {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	struct up_list active;	/* up_http_req::link, running */
	struct up_list waiting; /* up_http_req::link, queued behind the cap */
	unsigned n_active;	/* ordinary (not stream) requests running */
	bool closing;
};

struct up_http_req {
	struct up_http *http;
	struct up_list link;
	CURL *easy;
	struct curl_slist *headers;
	char *body;
	char *resp;
	size_t resp_len, resp_cap, max_body;
	struct up_frame lines;
	bool stream, running, body_too_big;
	bool status_seen,
		stream_ok; /* streams: whether the answer is 2xx (lines) or not (a Status) */
	int line_error;
	long retry_after;
	char errbuf[CURL_ERROR_SIZE];
	up_http_done_fn done;
	up_http_line_fn line;
	void *ud;
};

/* One per socket libcurl watches; freed in its close callback. */
struct sock_ctx {
	uv_poll_t poll;
	struct up_http *http;
	curl_socket_t fd;
};

static void check_done(struct up_http *h);
static void start_waiting(struct up_http *h);

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct sock_ctx *s = p->data;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	(void)curl_multi_socket_action(s->http->multi, s->fd, flags, &running);
	check_done(s->http);
}

static void on_sock_close(uv_handle_t *h)
{
	free(h->data);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct up_http *h = userp;
	struct sock_ctx *s = socketp;
	int events = 0;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			(void)uv_poll_stop(&s->poll);
			uv_close((uv_handle_t *)&s->poll, on_sock_close);
			(void)curl_multi_assign(h->multi, fd, NULL);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -1;
		s->http = h;
		s->fd = fd;
		if (uv_poll_init_socket(h->loop, &s->poll, fd) < 0) {
			free(s);
			return -1;
		}
		s->poll.data = s;
		(void)curl_multi_assign(h->multi, fd, s);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	return uv_poll_start(&s->poll, events, on_poll) < 0 ? -1 : 0;
}

static void on_timer(uv_timer_t *t)
{
	struct up_http *h = t->data;
	int running;

	(void)curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(h);
}

static int on_timer_change(CURLM *multi, long timeout_ms, void *userp)
{
	struct up_http *h = userp;

	(void)multi;
	if (timeout_ms < 0)
		return uv_timer_stop(&h->timer) < 0 ? -1 : 0;
	/* 0 means "now": let the loop call us back on its next turn, never recurse. */
	return uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
}

int up_http_new(uv_loop_t *loop, struct up_http **ret)
{
	static bool global_done;
	struct up_http *h;

	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -EIO;
		global_done = true;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->loop = loop;
	up_list_init(&h->active);
	up_list_init(&h->waiting);
	h->multi = curl_multi_init();
	if (!h->multi) {
		free(h);
		return -ENOMEM;
	}
	(void)uv_timer_init(loop, &h->timer);
	h->timer.data = h;
	(void)curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	(void)curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	(void)curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_timer_change);
	(void)curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	(void)curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	/*
	 * No per-host connection cap: under HTTP/1.1 every watch or log stream holds a
	 * connection for good, and a cap would let streams starve ordinary requests. Those
	 * are bounded by UP_HTTP_MAX_ACTIVE instead; over HTTP/2 all of it shares one.
	 */
	(void)curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
	*ret = h;
	return 0;
}

static void req_free(struct up_http_req *r)
{
	up_list_remove(&r->link);
	if (r->easy) {
		if (r->running)
			(void)curl_multi_remove_handle(r->http->multi, r->easy);
		curl_easy_cleanup(r->easy);
	}
	if (r->running && !r->stream)
		r->http->n_active--;
	for (struct curl_slist *l = r->headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data)); /* a bearer token among them */
	curl_slist_free_all(r->headers);
	free(r->body);
	free(r->resp);
	up_frame_done(&r->lines);
	free(r);
}

static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
	struct up_http_req *r = ud;
	size_t len = size * n;

	if (r->stream && !r->status_seen) {
		long code = 0;
		(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		r->status_seen = true;
		/* An error answer is a Status document, not a stream of lines: keep it whole. */
		r->stream_ok = code >= 200 && code < 300;
	}
	if (r->stream && r->stream_ok) {
		char *line;
		size_t l;
		int k;

		if (up_frame_feed(&r->lines, data, len) < 0) {
			r->body_too_big = true;
			return 0;
		}
		while ((k = up_frame_next(&r->lines, &line, &l)) > 0) {
			r->line_error = r->line(r, line, l, r->ud);
			if (r->line_error < 0)
				return 0;
		}
		if (k < 0) {
			r->body_too_big = true;
			return 0;
		}
		return len;
	}
	if (r->resp_len + len > r->max_body) {
		r->body_too_big = true;
		return 0; /* libcurl ends the transfer with CURLE_WRITE_ERROR */
	}
	if (r->resp_len + len + 1 > r->resp_cap) {
		size_t cap = r->resp_cap ? r->resp_cap : 16384;
		while (cap < r->resp_len + len + 1)
			cap *= 2;
		char *p = realloc(r->resp, cap);
		if (!p)
			return 0;
		r->resp = p;
		r->resp_cap = cap;
	}
	memcpy(r->resp + r->resp_len, data, len);
	r->resp_len += len;
	r->resp[r->resp_len] = '\0';
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	struct up_http_req *r = ud;
	size_t len = size * n;

	if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0)
		r->retry_after = strtol(data + 12, NULL, 10);
	return len;
}

static int curl_to_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OK: return 0;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE: return -EPROTO;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM: return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	default: return -EIO;
	}
}

static void finish(struct up_http_req *r, CURLcode code)
{
	struct up_http_result res = {.retry_after = r->retry_after, .error = r->errbuf};

	(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res.status);
	res.r = curl_to_errno(code);
	if (r->body_too_big) {
		res.r = -EFBIG;
		(void)snprintf(r->errbuf, sizeof(r->errbuf),
			       "the answer is over the limit of %zu bytes",
			       r->stream ? (size_t)UP_MAX_WATCH_EVENT : r->max_body);
	} else if (r->line_error < 0) {
		res.r = r->line_error;
	} else if (code != CURLE_OK && !r->errbuf[0]) {
		(void)snprintf(r->errbuf, sizeof(r->errbuf), "%s", curl_easy_strerror(code));
	}
	res.body = r->resp ? r->resp : "";
	res.body_len = r->resp_len;
	/* Detached first: the callback may free the whole client, and up_http_free() must not free
	 * r too. */
	up_list_remove(&r->link);
	r->done(r, &res, r->ud);
	req_free(r);
}

static void check_done(struct up_http *h)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(h->multi, &left))) {
		struct up_http_req *r = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		finish(r, msg->data.result);
	}
	start_waiting(h);
}

static int launch(struct up_http_req *r)
{
	struct up_http *h = r->http;

	if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
		return -ENOMEM;
	r->running = true;
	if (!r->stream)
		h->n_active++;
	up_list_remove(&r->link);
	up_list_insert_tail(&h->active, &r->link);
	return 0;
}

static void start_waiting(struct up_http *h)
{
	while (!h->closing && h->n_active < UP_HTTP_MAX_ACTIVE && !up_list_empty(&h->waiting)) {
		struct up_http_req *r = up_container_of(h->waiting.next, struct up_http_req, link);

		if (launch(r) < 0) {
			struct up_http_result res = {.r = -ENOMEM,
						     .body = "",
						     .retry_after = -1,
						     .error = "out of memory"};
			r->done(r, &res, r->ud);
			req_free(r);
		}
	}
}

static int set_tls(CURL *e, const struct up_http_tls *tls)
{
	struct curl_blob b = {.flags = CURL_BLOB_COPY};
	CURLcode c = CURLE_OK;

	if (!tls)
		return 0;
#if LIBCURL_VERSION_NUM >= 0x075700
	/* No CA store cached across connections: libcurl (7.87+) keeps the store it built for
	 * later connections of the multi handle, while each API server here has a CA blob of
	 * its own; an intermittent "unable to get local issuer certificate" against fakekube
	 * was seen under load, and a store per connection rules the cache out. A blob is a few
	 * certificates: parsing it per connection costs nothing that matters. */
	(void)curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif
	/* Each PEM given, as a blob curl copies; the client's certificate and key say so. */
	const struct {
		const char *pem;
		size_t len;
		CURLoption blob, type;
		bool typed;
	} pems[] = {
		{tls->ca_pem, tls->ca_len, CURLOPT_CAINFO_BLOB, CURLOPT_SSLCERTTYPE, false},
		{tls->cert_pem, tls->cert_len, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE, true},
		{tls->key_pem, tls->key_len, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE, true},
	};
	for (size_t i = 0; i < ELEMENTSOF(pems) && c == CURLE_OK; i++) {
		if (!pems[i].pem)
			continue;
		b.data = (void *)pems[i].pem;
		b.len = pems[i].len;
		c = curl_easy_setopt(e, pems[i].blob, &b);
		if (c == CURLE_OK && pems[i].typed)
			c = curl_easy_setopt(e, pems[i].type, "PEM");
	}
	if (c == CURLE_OK && tls->insecure) {
		(void)curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		(void)curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return c == CURLE_OK ? 0 : -EINVAL;
}

static int add_header(struct up_http_req *r, const char *name, const char *value)
{
	char line[UP_MAX_HEADER_LINE];
	struct curl_slist *l;

	/* "Name:" alone tells libcurl to drop a header it would add by itself. */
	if (snprintf(line, sizeof(line), "%s:%s%s", name, *value ? " " : "", value) >=
	    (int)sizeof(line))
		return -E2BIG;
	l = curl_slist_append(r->headers, line);
	explicit_bzero(line, sizeof(line));
	if (!l)
		return -ENOMEM;
	r->headers = l;
	return 0;
}

static int configure(struct up_http_req *r, const struct up_http_opts *o)
{
	CURL *e = r->easy;
	int k = 0;

	(void)curl_easy_setopt(e, CURLOPT_URL, o->url);
	(void)curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
	(void)curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	(void)curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	(void)curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	(void)curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	(void)curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	(void)curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	(void)curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	(void)curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)UP_HTTP_CONNECT_TIMEOUT_MS);
	(void)curl_easy_setopt(e, CURLOPT_USERAGENT, "uplinkd/" UPLINK_VERSION);
	if (o->timeout_ms > 0)
		(void)curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	if (o->stream) {
		/* A stream that goes silent for this long is dead: watches send bookmarks. */
		(void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		(void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)UP_HTTP_STREAM_IDLE_S);
	}
	if (o->method && strcmp(o->method, "HEAD") == 0)
		(void)curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (o->method && strcmp(o->method, "GET") != 0)
		(void)curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, o->method);
	if (o->body) {
		r->body = malloc(o->body_len + 1);
		if (!r->body)
			return -ENOMEM;
		memcpy(r->body, o->body, o->body_len);
		(void)curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
		(void)curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
	}
	k = add_header(r, "Accept", o->accept ? o->accept : "application/json");
	if (k >= 0 && o->content_type)
		k = add_header(r, "Content-Type", o->content_type);
	if (k >= 0 && o->bearer) {
		char auth[UP_MAX_HEADER_LINE];
		if (snprintf(auth, sizeof(auth), "Bearer %s", o->bearer) >= (int)sizeof(auth))
			k = -E2BIG;
		else
			k = add_header(r, "Authorization", auth);
		explicit_bzero(auth, sizeof(auth));
	}
	if (k >= 0 && o->header_name)
		k = add_header(r, o->header_name, o->header_value);
	if (k >= 0 && o->body)
		k = add_header(r, "Expect", ""); /* no 100-continue round trip */
	if (k < 0)
		return k;
	(void)curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	return set_tls(e, o->tls);
}

int up_http_start(struct up_http *h, const struct up_http_opts *o, up_http_done_fn done,
		  up_http_line_fn line, void *ud, struct up_http_req **ret)
{
	struct up_http_req *r;
	int k;

	if (h->closing)
		return -ESHUTDOWN;
	if (o->stream && !line)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	*r = (struct up_http_req){.http = h,
				  .done = done,
				  .line = line,
				  .ud = ud,
				  .stream = o->stream,
				  .retry_after = -1,
				  .max_body = o->max_body ? o->max_body : UP_MAX_KUBE_BODY};
	up_list_init(&r->link);
	up_frame_init(&r->lines, UP_MAX_WATCH_EVENT);
	r->easy = curl_easy_init();
	if (!r->easy) {
		req_free(r);
		return -ENOMEM;
	}
	k = configure(r, o);
	if (k < 0) {
		req_free(r);
		return k;
	}
	up_list_insert_tail(&h->waiting, &r->link);
	if (r->stream || h->n_active < UP_HTTP_MAX_ACTIVE) {
		k = launch(r);
		if (k < 0) {
			req_free(r);
			return k;
		}
	}
	if (ret)
		*ret = r;
	return 0;
}

void up_http_cancel(struct up_http_req *req)
{
	struct up_http *h = req->http;

	req_free(req);
	start_waiting(h);
}

unsigned up_http_active(const struct up_http *h)
{
	return h->n_active;
}

static void on_timer_close(uv_handle_t *t)
{
	struct up_http *h = t->data;

	(void)curl_multi_cleanup(h->multi);
	free(h);
}

struct up_http *up_http_free(struct up_http *h)
{
	struct up_list *pos, *tmp;

	if (!h)
		return NULL;
	h->closing = true;
	up_list_for_each_safe (pos, tmp, &h->waiting)
		req_free(up_container_of(pos, struct up_http_req, link));
	up_list_for_each_safe (pos, tmp, &h->active)
		req_free(up_container_of(pos, struct up_http_req, link));
	(void)uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, on_timer_close);
	return NULL;
}
