/* SPDX-License-Identifier: Apache-2.0 */
/* session.logs: the audit log of a session, then (with follow) its new lines. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "log.h"
#include "manager.h"
#include "rpc-logs.h"
#include "server.h"
#include "session-audit.h"
#include "session.h"

const struct up_param up_logs_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct up_logs_params, id), UP_PARAM_MANDATORY, NULL},
	{"follow", UP_PARAM_BOOL, offsetof(struct up_logs_params, follow), 0, NULL},
	{"denied_only", UP_PARAM_BOOL, offsetof(struct up_logs_params, denied_only), 0, NULL},
	{0},
};

struct logs_job {
	struct up_request *req;
	char id[16];
	bool follow, denied, history_sent, ended;
	struct up_audit_read *rd;
	struct up_audit_sub *sub;
	json_t *early;	     /* [[index, event]...]: live lines that came before the history */
	uint64_t next_index; /* the first index not sent yet */
	json_int_t sent;
	struct up_list link; /* followers, with follow only */
};

/* The follow jobs, which also hear of requests waiting for the user (ask mode). */
static struct up_list followers = {&followers, &followers};

static void logs_job_free(struct logs_job *j)
{
	if (j->follow)
		up_list_remove(&j->link);
	up_audit_sub_free(j->sub);
	up_audit_read_cancel(j->rd);
	json_decref(j->early);
	free(j);
}

static void logs_reply(struct logs_job *j)
{
	struct up_request *req = j->req;

	j->req = NULL;
	up_request_reply(req, json_pack("{s:s, s:I, s:I}", "id", j->id, "count", j->sent, "total",
					(json_int_t)j->next_index));
	logs_job_free(j);
}

static void send_event(struct logs_job *j, json_t *ev, uint64_t index)
{
	if (index < j->next_index)
		return;
	j->next_index = index + 1;
	if (!ev || (j->denied && !up_audit_event_denied(ev)) || !j->req || !j->req->conn)
		return;
	j->sent++;
	(void)up_conn_notify(
		j->req->conn, "audit.event",
		json_pack("{s:s, s:I, s:O}", "id", j->id, "index", (json_int_t)index, "event", ev));
}

static void on_live(json_t *event, uint64_t index, void *ud)
{
	struct logs_job *j = ud;

	if (j->history_sent)
		send_event(j, event, index);
	else if (json_array_size(j->early) < UP_MAX_INFLIGHT_PER_CONN * 1024)
		(void)json_array_append_new(j->early,
					    json_pack("[I, O]", (json_int_t)index, event));
}

static void on_live_end(void *ud)
{
	struct logs_job *j = ud;

	j->sub = NULL; /* freed by the follower */
	j->ended = true;
	if (j->history_sent)
		logs_reply(j);
}

static void on_history(int r, json_t *lines, uint64_t first, uint64_t total, void *ud)
{
	struct logs_job *j = ud;
	json_t *ev;
	size_t i;

	j->rd = NULL;
	if (r < 0) {
		struct up_request *req = j->req;
		j->req = NULL;
		up_request_errorf(req, UP_ERR_INTERNAL_ERROR,
				  "cannot read the audit log of session %s: %s", j->id,
				  strerror(-r));
		logs_job_free(j);
		return;
	}
	j->next_index = first;
	json_array_foreach (lines, i, ev)
		send_event(j, json_is_object(ev) ? ev : NULL, first + i);
	if (j->next_index < total)
		j->next_index = total;
	json_array_foreach (j->early, i, ev)
		send_event(j, json_array_get(ev, 1),
			   (uint64_t)json_integer_value(json_array_get(ev, 0)));
	json_array_clear(j->early);
	j->history_sent = true;
	if (!j->sub || j->ended)
		logs_reply(j);
}

static void on_logs_cancelled(struct up_request *req, void *ud)
{
	struct logs_job *j = ud;

	(void)req;
	j->req = NULL;
	logs_job_free(j);
}

struct up_session *up_rpc_audit_session(struct up_request *req, void *userdata, const char *id,
					char *path, size_t len, int *r)
{
	struct up_session *s = up_sessions_find(up_manager_sessions(userdata), id);

	*r = 0;
	if (!s) {
		up_request_errorf(
			req, UP_ERR_SESSION_NOT_FOUND,
			"no session '%s' (uplink list --all shows them; ids are 12 hex digits "
			"or the namespace name)",
			id);
		return NULL;
	}
	if (up_session_audit_path(s, path, len) < 0) {
		*r = -ENAMETOOLONG;
		return NULL;
	}
	return s;
}

int up_rpc_session_logs(struct up_request *req, void *params, void *userdata)
{
	struct up_logs_params *p = params;
	char path[PATH_MAX];
	struct logs_job *j;
	int r;
	struct up_session *s = up_rpc_audit_session(req, userdata, p->id, path, sizeof(path), &r);

	if (!s)
		return r;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->early = json_array())) {
		free(j);
		return -ENOMEM;
	}
	j->req = req;
	(void)snprintf(j->id, sizeof(j->id), "%s", up_session_id(s));
	j->follow = p->follow;
	if (j->follow)
		up_list_insert_tail(&followers, &j->link);
	j->denied = p->denied_only;
	if (p->follow)
		j->sub = up_session_audit_subscribe(up_session_id(s), on_live, on_live_end, j);
	r = up_audit_read_start(up_sessions_loop(up_manager_sessions(userdata)), path, on_history,
				j, &j->rd);
	if (r < 0) {
		j->req = NULL;
		logs_job_free(j);
		return r;
	}
	up_request_set_cancel(req, on_logs_cancelled, j);
	return 0;
}

void up_rpc_logs_waiting(const char *session_id, const json_t *held)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &followers) {
		struct logs_job *j = up_container_of(pos, struct logs_job, link);

		if (!strcmp(j->id, session_id) && j->history_sent && j->req && j->req->conn)
			(void)up_conn_notify(j->req->conn, "approvals.waiting",
					     json_pack("{s:s, s:O}", "id", j->id, "held", held));
	}
}
