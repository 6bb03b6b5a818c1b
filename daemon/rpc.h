/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "list.h"
#include "params.h"
#include "util.h"

struct up_conn;
struct up_rpc;
struct up_request;
struct up_batch;

/*
 * A method handler. It answers with up_request_reply() or up_request_error(), now or
 * later; until then the request stays in flight. `params` is the handler's own
 * struct, filled by the method's parameter table and alive as long as the request.
 * A negative return means the handler failed without answering: the client gets
 * INTERNAL_ERROR.
 */
typedef int (*up_method_fn)(struct up_request *req, void *params, void *userdata);

/*
 * Called once when the client of an in-flight request goes away or the daemon stops:
 * the owner stops the work and forgets the request, which the RPC layer then answers
 * (or drops) and frees. A handler that answers asynchronously must set one.
 */
typedef void (*up_request_cancel_fn)(struct up_request *req, void *userdata);

struct up_method {
	const char *name;
	const struct up_param *params; /* NULL: takes no params */
	size_t params_size;
	up_method_fn fn;
};

struct up_request {
	struct up_rpc *rpc;
	struct up_conn *conn; /* NULL once the client has gone */
	struct up_list link;  /* up_conn::requests */
	struct up_batch *batch;
	json_t *id;	/* NULL for a notification */
	json_t *params; /* the request's params, kept alive for `pstruct` */
	const struct up_method *method;
	up_request_cancel_fn cancel;
	void *cancel_userdata;
	bool answered;
	_Alignas(max_align_t) unsigned char pstruct[]; /* the method's params struct */
};

struct up_rpc *up_rpc_new(void);
struct up_rpc *up_rpc_free(struct up_rpc *rpc);
/* Registers a table of methods (ended by a NULL name) for one domain. */
int up_rpc_register(struct up_rpc *rpc, const struct up_method *methods, void *userdata) _wur_;
const struct up_method *up_rpc_find(const struct up_rpc *rpc, const char *name, void **userdata);

/* Handles one framed line from a client: a request, a notification or a batch. */
void up_rpc_handle_line(struct up_rpc *rpc, struct up_conn *conn, const char *line, size_t len);
/* Detaches a connection's requests (the client is gone): their cancel hooks run. */
void up_rpc_conn_gone(struct up_conn *conn);
/* Answers every in-flight request of a connection with SHUTTING_DOWN. */
void up_rpc_conn_cancel_all(struct up_conn *conn);
uint64_t up_rpc_requests_total(const struct up_rpc *rpc);
unsigned up_rpc_inflight(const struct up_rpc *rpc);

void up_request_set_cancel(struct up_request *req, up_request_cancel_fn fn, void *userdata);
/* Each answers once and frees the request; the result is stolen. */
void up_request_reply(struct up_request *req, json_t *result_steal);
void up_request_error(struct up_request *req, enum up_error e, const char *message);
void up_request_errorf(struct up_request *req, enum up_error e, const char *fmt, ...)
	_printf_(3, 4);
