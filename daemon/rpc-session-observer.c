/* SPDX-License-Identifier: Apache-2.0 */
/* session.start's side of a session: the observer over the request and its connection. */
#include "rpc-session-observer.h"

#include "rpc.h"
#include "server.h"

static void obs_progress(void *starter, json_t *params)
{
	struct up_request *req = starter;

	(void)up_conn_notify(req->conn, "session.progress", params);
}

static void obs_state(void *starter, json_t *params)
{
	struct up_request *req = starter;

	(void)up_conn_notify(req->conn, "session.state", params);
}

static void obs_reply(void *starter, json_t *result)
{
	up_request_reply(starter, result);
}

static void obs_error(void *starter, enum up_error e, const char *msg)
{
	up_request_error(starter, e, msg);
}

const struct up_session_observer up_rpc_start_observer = {
	.progress = obs_progress,
	.state = obs_state,
	.reply = obs_reply,
	.error = obs_error,
};

/* The client that started the session went away before it was answered. */
static void start_cancelled(struct up_request *req, void *ud)
{
	(void)req;
	up_session_starter_gone(ud);
}

void up_rpc_start_watch(struct up_request *req, struct up_session *s)
{
	up_request_set_cancel(req, start_cancelled, s);
}
