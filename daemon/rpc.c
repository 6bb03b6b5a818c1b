/* SPDX-License-Identifier: Apache-2.0 */
#include "rpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jsonrpc.h"
#include "bounds.h"
#include "log.h"
#include "server.h"

#define UP_MAX_DOMAINS 16

struct up_rpc {
	struct {
		const struct up_method *methods;
		void *userdata;
	} domains[UP_MAX_DOMAINS];
	size_t n_domains;
	uint64_t total;
	unsigned inflight;
};

/* The answers of one batch, sent as one array once its last request is answered. */
struct up_batch {
	struct up_conn *conn; /* NULL once the client has gone */
	json_t *answers;
	unsigned pending;
	bool dispatching;
};

struct up_rpc *up_rpc_new(void)
{
	return calloc(1, sizeof(struct up_rpc));
}

struct up_rpc *up_rpc_free(struct up_rpc *rpc)
{
	free(rpc);
	return NULL;
}

int up_rpc_register(struct up_rpc *rpc, const struct up_method *methods, void *userdata)
{
	if (rpc->n_domains >= UP_MAX_DOMAINS)
		return -E2BIG;
	rpc->domains[rpc->n_domains].methods = methods;
	rpc->domains[rpc->n_domains].userdata = userdata;
	rpc->n_domains++;
	return 0;
}

const struct up_method *up_rpc_find(const struct up_rpc *rpc, const char *name, void **userdata)
{
	for (size_t d = 0; d < rpc->n_domains; d++)
		for (const struct up_method *m = rpc->domains[d].methods; m->name; m++)
			if (strcmp(m->name, name) == 0) {
				*userdata = rpc->domains[d].userdata;
				return m;
			}
	return NULL;
}

uint64_t up_rpc_requests_total(const struct up_rpc *rpc)
{
	return rpc->total;
}

unsigned up_rpc_inflight(const struct up_rpc *rpc)
{
	return rpc->inflight;
}

static void batch_finish(struct up_batch *b)
{
	if (b->conn && json_array_size(b->answers) > 0)
		(void)up_conn_send(b->conn, b->answers);
	json_decref(b->answers);
	free(b);
}

/* Delivers one answer: to the batch, to the client, or nowhere for notifications. */
static void deliver(struct up_conn *conn, struct up_batch *b, json_t *answer)
{
	if (!answer)
		return;
	if (b)
		(void)json_array_append(b->answers, answer);
	else if (conn)
		(void)up_conn_send(conn, answer);
	json_decref(answer);
}

static void batch_release(struct up_batch *b)
{
	if (b && --b->pending == 0 && !b->dispatching)
		batch_finish(b);
}

static void request_free(struct up_request *req)
{
	struct up_conn *conn = req->conn;

	if (conn) {
		up_list_remove(&req->link);
		conn->inflight--;
		up_conn_update_reading(conn);
	}
	req->rpc->inflight--;
	batch_release(req->batch);
	json_decref(req->id);
	json_decref(req->params);
	free(req);
}

static void answer(struct up_request *req, json_t *msg)
{
	if (req->answered) {
		json_decref(msg);
		return;
	}
	req->answered = true;
	if (req->id)
		deliver(req->conn, req->batch, msg);
	else
		json_decref(msg);
	request_free(req);
}

void up_request_reply(struct up_request *req, json_t *result_steal)
{
	if (!req->id) {
		json_decref(result_steal);
		answer(req, NULL);
		return;
	}
	answer(req, up_jsonrpc_result(req->id, result_steal));
}

void up_request_error(struct up_request *req, enum up_error e, const char *message)
{
	answer(req, req->id ? up_jsonrpc_error(req->id, e, message) : NULL);
}

void up_request_errorf(struct up_request *req, enum up_error e, const char *fmt, ...)
{
	char buf[1024];

	up_vformat(buf, sizeof(buf), fmt);
	up_request_error(req, e, buf);
}

void up_request_set_cancel(struct up_request *req, up_request_cancel_fn fn, void *userdata)
{
	req->cancel = fn;
	req->cancel_userdata = userdata;
}

static void reply_now(struct up_conn *conn, struct up_batch *b, json_t *id, enum up_error e,
		      const char *msg)
{
	/* Notifications get no answer, not even an error (JSON-RPC 2.0, section 4.1). */
	if (!id && e != UP_ERR_PARSE_ERROR && e != UP_ERR_INVALID_REQUEST)
		return;
	deliver(conn, b, up_jsonrpc_error(id, e, msg));
}

static void dispatch_one(struct up_rpc *rpc, struct up_conn *conn, struct up_batch *b, json_t *msg)
{
	const struct up_method *m;
	struct up_request *req;
	const char *method;
	json_t *params, *id;
	void *userdata;
	char why[512];
	int r;

	rpc->total++;
	if (up_jsonrpc_check_request(msg, &method, &params, &id, why, sizeof(why)) < 0) {
		json_t *raw = json_object_get(msg, "id");
		reply_now(conn, b, json_is_string(raw) || json_is_integer(raw) ? raw : NULL,
			  UP_ERR_INVALID_REQUEST, why);
		return;
	}
	m = up_rpc_find(rpc, method, &userdata);
	if (!m) {
		char text[256];
		(void)snprintf(text, sizeof(text),
			       "no method '%.100s'; this uplinkd may be older than the client",
			       method);
		reply_now(conn, b, id, UP_ERR_METHOD_NOT_FOUND, text);
		return;
	}
	req = calloc(1, sizeof(*req) + m->params_size);
	if (!req) {
		reply_now(conn, b, id, UP_ERR_INTERNAL_ERROR, "out of memory");
		return;
	}
	*req = (struct up_request){.rpc = rpc,
				   .conn = conn,
				   .batch = b,
				   .method = m,
				   .id = json_incref(id),
				   .params = json_incref(params)};
	up_list_insert_tail(&conn->requests, &req->link);
	conn->inflight++;
	rpc->inflight++;
	if (b)
		b->pending++;

	static const struct up_param none[] = {{0}};
	r = up_params_dispatch(m->params ? m->params : none, params, req->pstruct, why,
			       sizeof(why));
	if (r < 0) {
		up_request_error(req, UP_ERR_INVALID_PARAMS, why);
		return;
	}
	r = m->fn(req, req->pstruct, userdata);
	if (r < 0) {
		/* The handler has not answered and will not: it failed. */
		log_errno(LOG_ERR, r, "Method %s failed", m->name);
		up_request_error(req, UP_ERR_INTERNAL_ERROR, NULL);
	}
}

static void dispatch_batch(struct up_rpc *rpc, struct up_conn *conn, json_t *arr)
{
	struct up_batch *b;
	size_t i;
	json_t *e;

	if (json_array_size(arr) == 0) {
		reply_now(conn, NULL, NULL, UP_ERR_INVALID_REQUEST,
			  "an empty batch is not a request");
		return;
	}
	if (json_array_size(arr) > UP_MAX_BATCH) {
		char text[128];
		(void)snprintf(text, sizeof(text),
			       "a batch of %zu requests is over the limit of %d",
			       json_array_size(arr), UP_MAX_BATCH);
		reply_now(conn, NULL, NULL, UP_ERR_INVALID_REQUEST, text);
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b || !(b->answers = json_array())) {
		free(b);
		reply_now(conn, NULL, NULL, UP_ERR_INTERNAL_ERROR, "out of memory");
		return;
	}
	b->conn = conn;
	b->dispatching = true;
	b->pending = 1; /* held by the loop below until every entry is dispatched */
	json_array_foreach (arr, i, e)
		dispatch_one(rpc, conn, b, e);
	b->dispatching = false;
	batch_release(b);
}

void up_rpc_handle_line(struct up_rpc *rpc, struct up_conn *conn, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);

	if (!msg) {
		char text[300];
		rpc->total++;
		(void)snprintf(text, sizeof(text), "the request is not valid JSON: %s (column %d)",
			       jerr.text, jerr.column);
		reply_now(conn, NULL, NULL, UP_ERR_PARSE_ERROR, text);
		return;
	}
	if (json_is_array(msg))
		dispatch_batch(rpc, conn, msg);
	else
		dispatch_one(rpc, conn, NULL, msg);
	json_decref(msg);
}

static void detach(struct up_request *req)
{
	struct up_conn *conn = req->conn;

	up_list_remove(&req->link);
	conn->inflight--;
	req->conn = NULL;
	if (req->batch)
		req->batch->conn = NULL;
}

void up_rpc_conn_gone(struct up_conn *conn)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &conn->requests) {
		struct up_request *req = up_container_of(pos, struct up_request, link);

		detach(req);
		if (req->cancel) {
			req->cancel(req, req->cancel_userdata);
			answer(req, NULL);
		}
		/* Without a hook the handler answers later, into the void. */
	}
}

void up_rpc_conn_cancel_all(struct up_conn *conn)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &conn->requests) {
		struct up_request *req = up_container_of(pos, struct up_request, link);

		if (!req->cancel)
			continue;
		req->cancel(req, req->cancel_userdata);
		up_request_error(req, UP_ERR_SHUTTING_DOWN,
				 "uplinkd is shutting down; the request was not finished");
	}
}
