/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rules.suggest: a session's audit log read by the reader `uplink logs` uses (so it works
 * after the session ended: the file stays on the host), then the suggestion built on the
 * thread pool (a long log is many events).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bounds.h"
#include "manager.h"
#include "rpc-logs.h"
#include "rules-suggest.h"
#include "session-audit.h"
#include "session.h"

const struct up_param up_suggest_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct up_suggest_params, id), UP_PARAM_MANDATORY, NULL},
	{0},
};

struct suggest_job {
	struct up_request *req; /* NULL once the client has gone */
	uv_loop_t *loop;
	char id[16];
	struct up_audit_read *rd;
	uv_work_t work;
	bool in_work;
	json_t *events; /* the reader's lines, read only by the worker */
	uint64_t first, total;
	json_t *result; /* the worker's */
	int r;
};

static void job_free(struct suggest_job *j)
{
	up_audit_read_cancel(j->rd);
	json_decref(j->events);
	json_decref(j->result);
	free(j);
}

static void suggest_run(uv_work_t *w)
{
	struct suggest_job *j = w->data;

	j->r = up_rules_suggest(j->events, j->id, &j->result);
}

/* The reader gives the file's last UP_AUDIT_HISTORY_MAX bytes: say when that was not all. */
static void note_truncated(struct suggest_job *j)
{
	json_t *w = json_object_get(j->result, "warnings");

	if (j->first == 0)
		return;
	(void)json_array_insert_new(
		w, 0,
		json_pack("{s:s, s:s, s:o}", "host", "", "kind", "log-truncated", "message",
			  json_sprintf("only the last %llu of the %llu lines of the audit log "
				       "were read (at most %d MiB); earlier denials are not in "
				       "this suggestion",
				       (unsigned long long)(j->total - j->first),
				       (unsigned long long)j->total,
				       UP_AUDIT_HISTORY_MAX / (1024 * 1024))));
}

static void suggest_after(uv_work_t *w, int status)
{
	struct suggest_job *j = w->data;

	(void)status;
	j->in_work = false;
	if (!j->req) {
		job_free(j);
		return;
	}
	if (j->r < 0) {
		up_request_errorf(j->req, UP_ERR_INTERNAL_ERROR,
				  "cannot build the suggestion for session %s: %s", j->id,
				  strerror(-j->r));
	} else {
		note_truncated(j);
		up_request_reply(j->req, TAKE_PTR(j->result));
	}
	job_free(j);
}

static void on_history(int r, json_t *lines, uint64_t first, uint64_t total, void *ud)
{
	struct suggest_job *j = ud;

	j->rd = NULL;
	if (r >= 0) {
		j->events = json_incref(lines); /* the reader lets go of its reference */
		j->first = first;
		j->total = total;
		r = uv_queue_work(j->loop, &j->work, suggest_run, suggest_after);
	}
	if (r >= 0) {
		j->in_work = true;
		return;
	}
	up_request_errorf(j->req, UP_ERR_INTERNAL_ERROR,
			  "cannot read the audit log of session %s: %s", j->id, strerror(-r));
	job_free(j);
}

static void on_cancelled(struct up_request *req, void *ud)
{
	struct suggest_job *j = ud;

	(void)req;
	j->req = NULL;
	if (!j->in_work)
		job_free(j); /* else the worker's completion frees it */
}

int up_rpc_rules_suggest(struct up_request *req, void *params, void *userdata)
{
	struct up_suggest_params *p = params;
	struct up_sessions *all = up_manager_sessions(userdata);
	char path[PATH_MAX];
	struct suggest_job *j;
	int r;
	struct up_session *s = up_rpc_audit_session(req, userdata, p->id, path, sizeof(path), &r);

	if (!s)
		return r;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->req = req;
	j->loop = up_sessions_loop(all);
	j->work.data = j;
	(void)snprintf(j->id, sizeof(j->id), "%s", up_session_id(s));
	r = up_audit_read_start(j->loop, path, on_history, j, &j->rd);
	if (r < 0) {
		free(j);
		return r;
	}
	up_request_set_cancel(req, on_cancelled, j);
	return 0;
}
