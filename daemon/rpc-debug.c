/* SPDX-License-Identifier: Apache-2.0 */
/*
 * debug.*: methods for tests only, registered only when UPLINK_DEBUG_RPC=1.
 * debug.notify sends each kind of desktop notification as the sessions would;
 * debug.block blocks the loop on purpose, so a test sees the watchdog pings stop;
 * debug.ask asks a question (notify.h) and answers with the user's answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bounds.h"
#include "knobs.h"
#include "log.h"
#include "manager.h"
#include "notify.h"
#include "rpc.h"

#define UP_DEBUG_RPC_ENV "UPLINK_DEBUG_RPC"

struct notify_params {
	const char *kind;
	const char *id, *agent, *cwd, *reason, *what, *limit;
	int64_t exit_code, duration, denied, in;
};

static int check_kind(const char *name, json_t *v, void *field, char *why, size_t why_len)
{
	static const char *const kinds[] = {"exited",	"failed",     "stopped",
					    "expiring", "credential", "denied"};

	(void)field;
	for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
		if (streq(json_string_value(v), kinds[i]))
			return 0;
	(void)snprintf(why, why_len,
		       "%s must be one of exited, failed, stopped, expiring, "
		       "credential, denied",
		       name);
	return -EINVAL;
}

static const struct up_param notify_params[] = {
	{"kind", UP_PARAM_STRING, offsetof(struct notify_params, kind), UP_PARAM_MANDATORY,
	 check_kind},
	{"id", UP_PARAM_STRING, offsetof(struct notify_params, id), 0, NULL},
	{"agent", UP_PARAM_STRING, offsetof(struct notify_params, agent), 0, NULL},
	{"cwd", UP_PARAM_STRING, offsetof(struct notify_params, cwd), 0, NULL},
	{"reason", UP_PARAM_STRING, offsetof(struct notify_params, reason), 0, NULL},
	{"what", UP_PARAM_STRING, offsetof(struct notify_params, what), 0, NULL},
	{"limit", UP_PARAM_STRING, offsetof(struct notify_params, limit), 0, NULL},
	{"exit_code", UP_PARAM_INT, offsetof(struct notify_params, exit_code), 0, NULL},
	{"duration", UP_PARAM_INT, offsetof(struct notify_params, duration), 0, NULL},
	{"denied", UP_PARAM_INT, offsetof(struct notify_params, denied), 0, NULL},
	{"in", UP_PARAM_INT, offsetof(struct notify_params, in), 0, NULL},
	{0},
};

/* A session as up_session_describe() shows it, made up from the params. */
static json_t *fake_session(const struct notify_params *p, const char *state, json_t *raw)
{
	json_t *s = json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", p->id ? p->id : "0123456789ab",
			      "agent", p->agent ? p->agent : "claude", "cwd",
			      p->cwd ? p->cwd : "/home/user/src", "state", state, "created_at",
			      (json_int_t)(time(NULL) - p->duration));

	if (p->reason)
		(void)json_object_set_new(s, "reason", json_string(p->reason));
	if (json_object_get(raw, "exit_code"))
		(void)json_object_set_new(s, "exit_code", json_integer(p->exit_code));
	if (json_object_get(raw, "denied"))
		(void)json_object_set_new(s, "denied", json_integer(p->denied));
	return s;
}

static int rpc_notify(struct up_request *req, void *params, void *userdata)
{
	struct notify_params *p = params;
	struct up_notifier *n = up_manager_notifier(userdata);
	bool sent = true;

	if (streq(p->kind, "exited") || streq(p->kind, "failed") || streq(p->kind, "stopped")) {
		char state[16];
		size_t i;

		for (i = 0; p->kind[i] && i + 1 < sizeof(state); i++)
			state[i] = (char)(p->kind[i] - 'a' + 'A');
		state[i] = '\0';
		up_notify_session_ended(n, fake_session(p, state, req->params));
	} else if (streq(p->kind, "expiring")) {
		up_notify_session_expiring(n, fake_session(p, "RUNNING", req->params),
					   p->limit ? p->limit : "ttl", p->in ? p->in : 600);
	} else if (streq(p->kind, "credential")) {
		up_notify_credential_failed(n, p->agent ? p->agent : "claude", p->id,
					    p->reason ? p->reason : "the token endpoint said 401");
	} else {
		sent = up_notify_denied(n, p->id ? p->id : "0123456789ab",
					p->what ? p->what : "GET evil.example/");
	}
	up_request_reply(
		req, json_pack("{s:b, s:s}", "sent", n && sent, "backend", up_notifier_backend(n)));
	return 0;
}

struct ask_params {
	const char *summary, *body;
};

static const struct up_param ask_params[] = {
	{"summary", UP_PARAM_STRING, offsetof(struct ask_params, summary), UP_PARAM_MANDATORY,
	 NULL},
	{"body", UP_PARAM_STRING, offsetof(struct ask_params, body), 0, NULL},
	{0},
};

/* One debug.ask: answered when the question is; a client that leaves withdraws it. */
struct ask_job {
	struct up_request *req;
	struct up_notify_question *q;
	struct up_notifier *n;
};

static void on_answer(enum up_notify_answer a, void *ud)
{
	struct ask_job *j = ud;

	log_info("debug.ask: the answer is %s", up_notify_answer_name(a));
	if (j->req)
		up_request_reply(j->req, json_pack("{s:s, s:s}", "answer", up_notify_answer_name(a),
						   "backend", up_notifier_backend(j->n)));
	free(j);
}

static void on_ask_cancelled(struct up_request *req, void *ud)
{
	struct ask_job *j = ud;

	(void)req;
	log_info("debug.ask: the client left; the question is withdrawn");
	up_notify_question_close(j->q);
	free(j);
}

static int rpc_ask(struct up_request *req, void *params, void *userdata)
{
	struct ask_params *p = params;
	struct ask_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->req = req;
	j->n = up_manager_notifier(userdata);
	j->q = up_notify_ask(j->n, p->summary, p->body ? p->body : "", on_answer, j);
	if (!j->q) {
		free(j);
		up_request_reply(req,
				 json_pack("{s:n, s:s}", "answer", "backend",
					   up_notifier_backend(up_manager_notifier(userdata))));
		return 0;
	}
	up_request_set_cancel(req, on_ask_cancelled, j);
	return 0;
}

struct block_params {
	int64_t ms;
};

static int check_ms(const char *name, json_t *v, void *field, char *why, size_t why_len)
{
	(void)field;
	if (json_integer_value(v) >= 0 && json_integer_value(v) <= UP_DEBUG_BLOCK_MAX_MS)
		return 0;
	(void)snprintf(why, why_len, "%s must be between 0 and %d", name, UP_DEBUG_BLOCK_MAX_MS);
	return -EINVAL;
}

static const struct up_param block_params[] = {
	{"ms", UP_PARAM_INT, offsetof(struct block_params, ms), UP_PARAM_MANDATORY, check_ms},
	{0},
};

/* Blocks the loop on purpose: nothing else runs, the watchdog pings included. */
static int rpc_block(struct up_request *req, void *params, void *userdata)
{
	struct block_params *p = params;
	struct timespec ts = {.tv_sec = p->ms / 1000, .tv_nsec = (p->ms % 1000) * 1000000};

	(void)userdata;
	log_warning("debug.block: blocking the loop for %lld ms", (long long)p->ms);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	up_request_reply(req, json_pack("{s:I}", "blocked_ms", (json_int_t)p->ms));
	return 0;
}

static const struct up_method debug_methods[] = {
	{"debug.notify", notify_params, sizeof(struct notify_params), rpc_notify},
	{"debug.block", block_params, sizeof(struct block_params), rpc_block},
	{"debug.ask", ask_params, sizeof(struct ask_params), rpc_ask},
	{0},
};

int up_rpc_debug_register(struct up_rpc *rpc, struct up_manager *m)
{
	const char *on = up_knobs()->debug_rpc;

	if (!on || !streq(on, "1"))
		return 0;
	log_warning("%s=1: the debug.* methods are on; they are for tests only", UP_DEBUG_RPC_ENV);
	return up_rpc_register(rpc, debug_methods, m);
}
