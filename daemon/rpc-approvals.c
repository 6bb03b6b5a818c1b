/* SPDX-License-Identifier: Apache-2.0 */
/* approvals.list and approvals.decide: what waits for the user, across sessions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approvals.h"
#include "bounds.h"
#include "control.h"
#include "log.h"
#include "manager.h"
#include "rpc.h"
#include "session.h"

struct decide_params {
	const char *id;
	const char *decision;
};

static const struct up_param decide_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct decide_params, id), UP_PARAM_MANDATORY, NULL},
	{"decision", UP_PARAM_STRING, offsetof(struct decide_params, decision), UP_PARAM_MANDATORY,
	 NULL},
	{0},
};

static int rpc_list(struct up_request *req, void *params, void *userdata)
{
	struct up_sessions *all = up_manager_sessions(userdata);
	json_t *out = json_array();
	(void)params;

	for (struct up_session *s = up_sessions_next(all, NULL); s && out;
	     s = up_sessions_next(all, s)) {
		json_t *held = up_approvals_held(s);

		if (!held || json_array_extend(out, held) < 0)
			json_decref(out), out = NULL;
		json_decref(held);
	}
	if (!out)
		return -ENOMEM;
	up_request_reply(req, json_pack("{s:o}", "held", out));
	return 0;
}

struct decision {
	struct up_request *req;
	struct up_control_call *call;
	json_t *result; /* {id, decision, rule?} */
};

static void decided(int r, long http_status, json_t *reply, const char *err, void *userdata)
{
	struct decision *d = userdata;
	const char *id = json_string_value(json_object_get(d->result, "id"));

	if (r < 0 && http_status == 404)
		up_request_errorf(
			d->req, UP_ERR_APPROVAL_NOT_FOUND,
			"request %s no longer waits: it was answered or timed out (uplink "
			"approvals lists what waits)",
			id);
	else if (r < 0)
		up_request_errorf(d->req, UP_ERR_CLUSTER_UNREACHABLE,
				  "cannot tell the proxy the decision on %s: %s; the request waits "
				  "until it times out",
				  id, err ? err : "no answer");
	else {
		(void)json_object_set(d->result, "released", json_object_get(reply, "released"));
		log_info("Approval %s: %s", id,
			 json_string_value(json_object_get(d->result, "decision")));
		up_request_reply(d->req, json_incref(d->result));
	}
	json_decref(d->result);
	free(d);
}

static void decide_cancelled(struct up_request *req, void *userdata)
{
	struct decision *d = userdata;
	(void)req;

	up_control_call_cancel(d->call);
	json_decref(d->result);
	free(d);
}

/* The waiting request `id` ("<session>-<n>") names, with its session; NULL: answered. */
static json_t *find_held(struct up_sessions *all, const char *id, struct up_session **sp)
{
	const char *dash = strrchr(id, '-');
	char sid[UP_MAX_APPROVAL_ID];
	json_t *held, *e, *hit = NULL;
	size_t i;

	if (!dash || dash == id || (size_t)(dash - id) >= sizeof(sid))
		return NULL;
	(void)snprintf(sid, sizeof(sid), "%.*s", (int)(dash - id), id);
	*sp = up_sessions_find(all, sid);
	held = *sp ? up_approvals_held(*sp) : NULL;
	json_array_foreach (held, i, e)
		if (!hit && strcmp(json_string_value(json_object_get(e, "id")), id) == 0)
			hit = json_incref(e);
	json_decref(held);
	return hit;
}

static int rpc_decide(struct up_request *req, void *params, void *userdata)
{
	struct decide_params *p = params;
	struct up_session *s = NULL;
	json_t *held, *body;
	struct decision *d;
	char path[64];

	if (strcmp(p->decision, "once") && strcmp(p->decision, "session") &&
	    strcmp(p->decision, "deny")) {
		up_request_error(req, UP_ERR_INVALID_PARAMS,
				 "decision must be once, session or deny");
		return 0;
	}
	held = find_held(up_manager_sessions(userdata), p->id, &s);
	if (!held) {
		up_request_errorf(req, UP_ERR_APPROVAL_NOT_FOUND,
				  "no request %s waits for the user (uplink approvals lists what "
				  "waits)",
				  p->id);
		return 0;
	}
	d = calloc(1, sizeof(*d));
	body = json_pack("{s:s}", "decision", p->decision);
	if (d)
		d->result = json_pack("{s:s, s:s}", "id", p->id, "decision", p->decision);
	if (body && d && d->result && strcmp(p->decision, "session") == 0) {
		(void)json_object_set(body, "rule", json_object_get(held, "rule"));
		(void)json_object_set(d->result, "rule", json_object_get(held, "rule"));
	}
	(void)snprintf(path, sizeof(path), "/v1/held/%s", strrchr(p->id, '-') + 1);
	if (d && d->result && body) {
		d->req = req;
		d->call = up_control_call(s, "POST", path, body, UP_CONTROL_TIMEOUT_MS, decided, d);
	}
	json_decref(body);
	json_decref(held);
	if (!d || !d->call) {
		if (d)
			json_decref(d->result);
		free(d);
		up_request_errorf(req, UP_ERR_CLUSTER_UNREACHABLE,
				  "cannot reach session %s's proxy; the request waits until it "
				  "times out",
				  up_session_id(s));
		return 0;
	}
	up_request_set_cancel(req, decide_cancelled, d);
	return 0;
}

static const struct up_method approvals_methods[] = {
	{"approvals.list", NULL, 0, rpc_list},
	{"approvals.decide", decide_params, sizeof(struct decide_params), rpc_decide},
	{0},
};

int up_rpc_approvals_register(struct up_rpc *rpc, struct up_manager *m)
{
	return up_rpc_register(rpc, approvals_methods, m);
}
