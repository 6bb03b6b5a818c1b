/* SPDX-License-Identifier: Apache-2.0 */
/* approvals.list and approvals.decide: what waits for the user, across sessions. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approvals.h"
#include "bounds.h"
#include "control.h"
#include "knobs.h"
#include "log.h"
#include "manager.h"
#include "paths.h"
#include "rpc.h"
#include "rules-save.h"
#include "session.h"

struct decide_params {
	const char *id;
	const char *decision;
	const char *file; /* "save": the rules file (absolute); NULL: the user's own */
};

static const struct up_param decide_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct decide_params, id), UP_PARAM_MANDATORY, NULL},
	{"decision", UP_PARAM_STRING, offsetof(struct decide_params, decision), UP_PARAM_MANDATORY,
	 NULL},
	{"file", UP_PARAM_STRING, offsetof(struct decide_params, file), 0, NULL},
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
	struct up_request *req; /* NULL once the client went away (a save still completes) */
	struct up_control_call *call;
	struct up_sessions *all;
	char session[UP_MAX_APPROVAL_ID], n[UP_MAX_APPROVAL_ID];
	bool saving;	/* the rules file is being written */
	bool keeping;	/* the rules Secret is being rewritten with the rule */
	json_t *result; /* {id, decision, rule?, file?, line?, released?, warning?} */
};

static void decision_free(struct decision *d)
{
	json_decref(d->result);
	free(d);
}

/* The answer, once the rules Secret has the rule or not (`warning`, an optional field). */
static void kept(const char *warning, void *userdata)
{
	struct decision *d = userdata;

	d->keeping = false;
	if (warning)
		(void)json_object_set_new(d->result, "warning", json_string(warning));
	if (d->req)
		up_request_reply(d->req, json_incref(d->result));
	decision_free(d);
}

/* The rule goes in the rules Secret too (a restarted mitm pod keeps it); true: kept() answers
 * once it is written, else a warning (not kept) may be in the result. */
static bool keep_rule(struct decision *d, struct up_session *s, const json_t *rule)
{
	char warn[UP_APPROVED_WARNING_MAX] = "";
	int r = up_session_add_approved_rule(s, rule, warn, sizeof(warn), kept, d);

	if (r > 0)
		return d->keeping = true;
	if (r < 0 && *warn)
		(void)json_object_set_new(d->result, "warning", json_string(warn));
	return false;
}

static void decided(int r, long http_status, json_t *reply, const char *err, void *userdata)
{
	struct decision *d = userdata;
	const char *id = json_string_value(json_object_get(d->result, "id"));
	const char *file = json_string_value(json_object_get(d->result, "file"));

	d->call = NULL;
	if (r >= 0) {
		struct up_session *s = up_sessions_find(d->all, d->session);
		const json_t *rule = json_object_get(d->result, "rule");

		log_info("Approval %s: %s", id,
			 json_string_value(json_object_get(d->result, "decision")));
		(void)json_object_set(d->result, "released", json_object_get(reply, "released"));
		if (s && rule && keep_rule(d, s, rule))
			return;
	}
	if (!d->req)
		; /* the client went away: the proxy has the decision all the same */
	else if (r < 0 && http_status == 404)
		up_request_errorf(
			d->req, UP_ERR_APPROVAL_NOT_FOUND,
			"request %s no longer waits: it was answered or timed out (uplink "
			"approvals lists what waits)%s%s",
			id, file ? "; the rule is saved in " : "", file ? file : "");
	else if (r < 0)
		up_request_errorf(d->req, UP_ERR_CLUSTER_UNREACHABLE,
				  "cannot tell the proxy the decision on %s: %s; the request waits "
				  "until it times out%s%s",
				  id, err ? err : "no answer",
				  file ? "; the rule is saved in " : "", file ? file : "");
	else
		up_request_reply(d->req, json_incref(d->result));
	decision_free(d);
}

/* Sends the decision on request d->n of session `s` ("session" for a save). */
static int send_decision(struct decision *d, struct up_session *s, const char *decision,
			 const json_t *rule)
{
	json_t *body = json_pack("{s:s}", "decision", decision);
	char path[sizeof("/v1/held/") + UP_MAX_APPROVAL_ID];

	if (body && rule)
		(void)json_object_set(body, "rule", (json_t *)rule);
	(void)snprintf(path, sizeof(path), "/v1/held/%s", d->n);
	d->call = body ? up_control_call(s, "POST", path, body, UP_CONTROL_TIMEOUT_MS, decided, d)
		       : NULL;
	json_decref(body);
	return d->call ? 0 : -ENOMEM;
}

static void saved(int r, const struct up_rules_save *res, void *userdata)
{
	struct decision *d = userdata;
	struct up_session *s = up_sessions_find(d->all, d->session);
	const json_t *rule = json_object_get(d->result, "rule");

	d->saving = false;
	if (r < 0) {
		if (d->req)
			up_request_errorf(d->req, res->e,
					  "%s; the request still waits (uplink approve %s "
					  "--session lets it through without saving)",
					  res->err,
					  json_string_value(json_object_get(d->result, "id")));
	} else if (json_object_set_new(d->result, "line", json_integer((json_int_t)res->line)) <
			   0 ||
		   json_object_set_new(d->result, "trusted_again", json_boolean(res->trusted)) <
			   0) {
		if (d->req)
			up_request_error(d->req, UP_ERR_INTERNAL_ERROR, "out of memory");
	} else if (!s || send_decision(d, s, "session", rule) < 0) {
		if (d->req)
			up_request_errorf(d->req, UP_ERR_SESSION_ENDED,
					  "saved the rule to %s:%zu, but session %s %s", res->path,
					  res->line, d->session,
					  s ? "cannot be told: its request waits until it times out"
					    : "ended before its request could go");
	} else {
		return; /* decided() answers */
	}
	decision_free(d);
}
static void decide_cancelled(struct up_request *req, void *userdata)
{
	struct decision *d = userdata;
	(void)req;

	d->req = NULL;
	if (d->saving || d->keeping)
		return; /* saved() or kept() goes on: the file, the request, the Secret */
	up_control_call_cancel(d->call);
	decision_free(d);
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

/* "save": the rules file is written off the loop (saved() goes on); the answer names it. */
static int start_save(struct decision *d, struct up_session *s, const char *file, const char *what)
{
	char own[PATH_MAX];
	const char *shown = file;
	int r;

	if (!file && up_rules_save_default(up_knobs()->home, up_knobs()->xdg_config_home, own,
					   sizeof(own)) >= 0)
		shown = own;
	if (shown && json_object_set_new(d->result, "file", json_string(shown)) < 0)
		return -ENOMEM;
	r = up_approvals_save(s, json_object_get(d->result, "rule"), file, what, "uplink approve",
			      saved, d);
	if (r >= 0)
		d->saving = true;
	return r;
}

static int rpc_decide(struct up_request *req, void *params, void *userdata)
{
	static const char *const decisions[] = {"once", "session", "save", "deny"};
	struct decide_params *p = params;
	struct up_session *s = NULL;
	bool known = false, save;
	json_t *held;
	struct decision *d;
	char what[UP_MAX_APPROVAL_ID + 512];
	int r;

	for (size_t i = 0; i < ELEMENTSOF(decisions); i++)
		known = known || streq(p->decision, decisions[i]);
	if (!known) {
		up_request_error(req, UP_ERR_INVALID_PARAMS,
				 "decision must be once, session, save or deny");
		return 0;
	}
	save = streq(p->decision, "save");
	if (p->file && (!save || !up_path_is_normal_abs(p->file))) {
		up_request_error(req, UP_ERR_INVALID_PARAMS,
				 save ? "file must be an absolute path without . or .. in it"
				      : "file goes with the decision save only");
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
	if (d) {
		d->req = req;
		d->all = up_manager_sessions(userdata);
		(void)snprintf(d->session, sizeof(d->session), "%s", up_session_id(s));
		(void)snprintf(d->n, sizeof(d->n), "%s", strrchr(p->id, '-') + 1);
		d->result = json_pack("{s:s, s:s}", "id", p->id, "decision", p->decision);
	}
	if (d && d->result && !streq(p->decision, "once") && !streq(p->decision, "deny"))
		(void)json_object_set(d->result, "rule", json_object_get(held, "rule"));
	(void)snprintf(what, sizeof(what), "%s %s%s",
		       json_string_value(json_object_get(held, "method")),
		       json_string_value(json_object_get(held, "host")),
		       json_string_value(json_object_get(held, "path")));
	json_decref(held);
	if (!d || !d->result) {
		if (d)
			decision_free(d);
		return -ENOMEM;
	}
	if (save) {
		r = start_save(d, s, p->file, what);
		if (r < 0) {
			decision_free(d);
			return r;
		}
	} else if (send_decision(d, s, p->decision, json_object_get(d->result, "rule")) < 0) {
		decision_free(d);
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
