/* SPDX-License-Identifier: Apache-2.0 */
/* session.clean (0.4.1's `clean`, foreign sessions included). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "cluster.h"
#include "duration.h"
#include "kube.h"
#include "log.h"
#include "manager.h"
#include "manifests.h"
#include "rpc-clean.h"
#include "server.h"
#include "session-audit.h"
#include "session.h"
#include "store.h"

#define CLEAN_POLL_MS 200

const struct up_param up_clean_params[] = {
	{"ids", UP_PARAM_STRV, offsetof(struct up_clean_params, ids), UP_PARAM_NULLABLE, NULL},
	{"older_than", UP_PARAM_STRING, offsetof(struct up_clean_params, older_than),
	 UP_PARAM_NULLABLE, NULL},
	{"deploy_context", UP_PARAM_STRING, offsetof(struct up_clean_params, deploy_context),
	 UP_PARAM_NULLABLE, NULL},
	{"all", UP_PARAM_BOOL, offsetof(struct up_clean_params, all), 0, NULL},
	{"dry_run", UP_PARAM_BOOL, offsetof(struct up_clean_params, dry_run), 0, NULL},
	{"wait", UP_PARAM_BOOL, offsetof(struct up_clean_params, wait), 0, NULL},
	{0},
};

/* ---- what clean may delete ---- */

static int64_t created_at(json_t *ns)
{
	const char *ts = json_string_value(
		json_object_get(json_object_get(ns, "metadata"), "creationTimestamp"));
	struct tm tm = {0};

	if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

/* {id, namespace, age, phase, foreign, state?}: one namespace (or starting session). */
static json_t *candidate(struct up_session *s, json_t *ns, const char *name, int64_t now)
{
	const char *phase =
		json_string_value(json_object_get(json_object_get(ns, "status"), "phase"));
	int64_t born = s && up_session_created_at(s) ? up_session_created_at(s) : created_at(ns);
	json_t *c;

	if (!ns)
		phase = up_session_state_to_name(up_session_get_state(s));
	c = json_pack("{s:s, s:s, s:I, s:s, s:b}", "id", name + strlen(UP_SESSION_NS_PREFIX),
		      "namespace", name, "age",
		      (json_int_t)(born > 0 && born <= now ? now - born : 0), "phase",
		      phase ? phase : "Unknown", "foreign", !s);
	if (c && s)
		(void)json_object_set_new(
			c, "state", json_string(up_session_state_to_name(up_session_get_state(s))));
	return c;
}

/* namespace -> candidate, from the cluster's cache and our sessions not yet in it. */
static json_t *candidates(struct up_sessions *all, struct up_cluster *c, bool any_cluster)
{
	json_t *out = json_object(), *cache = up_kube_watch_cache(up_cluster_namespaces(c)), *ns;
	int64_t now = (int64_t)time(NULL);
	const char *key;

	json_object_foreach (cache, key, ns) {
		const char *name =
			json_string_value(json_object_get(json_object_get(ns, "metadata"), "name"));
		if (!name ||
		    strncmp(name, UP_SESSION_NS_PREFIX, strlen(UP_SESSION_NS_PREFIX)) != 0 ||
		    !strcmp(name, UP_SYSTEM_NAMESPACE) || !name[strlen(UP_SESSION_NS_PREFIX)])
			continue;
		(void)json_object_set_new(out, name,
					  candidate(up_sessions_find(all, name), ns, name, now));
	}
	for (struct up_session *s = up_sessions_next(all, NULL); s; s = up_sessions_next(all, s)) {
		const char *name = up_session_namespace(s);
		if (up_session_state_is_terminal(up_session_get_state(s)) ||
		    json_object_get(out, name) || (up_session_cluster(s) != c && !any_cluster))
			continue;
		(void)json_object_set_new(out, name, candidate(s, NULL, name, now));
	}
	return out;
}

static int check_selectors(const struct up_clean_params *p, uint64_t *older, char *why, size_t len)
{
	int n = (json_array_size(p->ids) > 0) + (p->older_than != NULL) + p->all;
	char err[256];

	if (n == 0)
		return snprintf(why, len, "clean needs SESSION id(s), --all, or --older-than"),
		       -EINVAL;
	if (n > 1)
		return snprintf(why, len,
				"clean takes exactly one of SESSION id(s), --all, or --older-than"),
		       -EINVAL;
	if (p->older_than && up_duration_parse(p->older_than, older, err, sizeof(err)) < 0)
		return snprintf(why, len, "--older-than: %s", err), -EINVAL;
	return 0;
}

/* The targets, oldest first, and the tokens nothing matched. */
static void select_targets(const struct up_clean_params *p, uint64_t older, json_t *cands,
			   json_t *targets, json_t *unmatched)
{
	json_t *c, *v;
	const char *key;
	size_t i;

	if (json_array_size(p->ids) == 0) {
		json_object_foreach (cands, key, c)
			if (p->all ||
			    (uint64_t)json_integer_value(json_object_get(c, "age")) >= older)
				(void)json_array_append(targets, c);
	}
	json_array_foreach (p->ids, i, v) {
		const char *t = json_string_value(v);
		bool hit = false;
		json_object_foreach (cands, key, c)
			if (!strcmp(t, key) ||
			    !strcmp(t, json_string_value(json_object_get(c, "id")))) {
				hit = true;
				if (!json_object_get(c, "picked")) {
					(void)json_object_set_new(c, "picked", json_true());
					(void)json_array_append(targets, c);
				}
			}
		if (!hit)
			(void)json_array_append_new(unmatched, json_string(t));
	}
	json_array_foreach (targets, i, c)
		(void)json_object_del(c, "picked");
	/* Oldest first, as 0.4.1 lists them: a few entries, a simple insertion sort. */
	for (i = 1; i < json_array_size(targets); i++)
		for (size_t j = i; j > 0; j--) {
			json_t *a = json_array_get(targets, j - 1), *b = json_array_get(targets, j);
			if (json_integer_value(json_object_get(a, "age")) >=
			    json_integer_value(json_object_get(b, "age")))
				break;
			json_incref(a);
			(void)json_array_set(targets, j - 1, b);
			(void)json_array_set_new(targets, j, a);
		}
}

/* ---- the deletion ---- */

struct clean_job;
struct clean_call {
	struct clean_job *job;
	struct up_kube_call *call;
};

struct clean_job {
	struct up_request *req;
	struct up_sessions *all;
	struct up_cluster *cluster;
	json_t *result;		  /* {targets, unmatched, errors, waiting} */
	struct clean_call *calls; /* one per target */
	size_t ncalls;
	unsigned pending;
	uv_timer_t *timer;
	uint64_t deadline;
	bool wait;
};

static void clean_job_free(struct clean_job *j)
{
	json_decref(j->result);
	free(j->calls);
	free(j);
}

static void clean_timer_closed(uv_handle_t *h)
{
	struct clean_job *j = h->data;

	free(h);
	clean_job_free(j);
}

static void clean_end(struct clean_job *j)
{
	if (j->req) {
		struct up_request *req = j->req;
		j->req = NULL;
		up_request_reply(req, json_incref(j->result));
	}
	if (j->timer)
		uv_close((uv_handle_t *)j->timer, clean_timer_closed);
	else
		clean_job_free(j);
}

/* The namespaces of the targets that the cluster still has. */
static json_t *still_there(struct clean_job *j)
{
	struct up_kube_watch *w = up_cluster_namespaces(j->cluster);
	json_t *left = json_array(), *t;
	size_t i;

	json_array_foreach (json_object_get(j->result, "targets"), i, t) {
		const char *ns = json_string_value(json_object_get(t, "namespace"));
		struct up_session *s = up_sessions_find(j->all, ns);
		if ((w && up_kube_watch_get(w, NULL, ns)) ||
		    (s && up_session_get_state(s) == UP_SESSION_TEARDOWN))
			(void)json_array_append_new(left, json_string(ns));
	}
	return left;
}

static void on_poll(uv_timer_t *t)
{
	struct clean_job *j = t->data;
	json_t *left = still_there(j);

	if (json_array_size(left) == 0 || uv_now(t->loop) >= j->deadline) {
		(void)json_object_set_new(j->result, "waiting", left);
		(void)uv_timer_stop(t);
		clean_end(j);
		return;
	}
	json_decref(left);
}

static void deletes_done(struct clean_job *j)
{
	if (!j->wait) {
		clean_end(j);
		return;
	}
	j->deadline = uv_now(up_sessions_loop(j->all)) + (uint64_t)UP_CLEAN_WAIT_MAX_S * 1000;
	(void)uv_timer_start(j->timer, on_poll, 0, CLEAN_POLL_MS);
}

static void on_deleted(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct clean_call *cc = ud;
	struct clean_job *j = cc->job;

	(void)obj;
	cc->call = NULL;
	if (err)
		(void)json_array_append_new(json_object_get(j->result, "errors"),
					    json_string(err->message));
	if (--j->pending == 0)
		deletes_done(j);
}

static void on_clean_cancelled(struct up_request *req, void *ud)
{
	struct clean_job *j = ud;

	(void)req;
	j->req = NULL;
	for (size_t i = 0; i < j->ncalls; i++)
		if (j->calls[i].call) {
			up_kube_cancel(j->calls[i].call);
			j->calls[i].call = NULL;
		}
	if (j->timer)
		(void)uv_timer_stop(j->timer);
	clean_end(j);
}

/* A foreign namespace: deleted directly. */
static void delete_foreign(struct clean_job *j, struct up_kube *k, const char *ns, size_t i)
{
	char path[128];
	int r = -ENOTCONN;

	j->calls[i].job = j;
	j->pending++;
	if (k && up_kube_path(path, sizeof(path), "Namespace", NULL, ns) >= 0)
		r = up_kube_delete(k, path, on_deleted, &j->calls[i], &j->calls[i].call);
	if (r < 0) {
		j->pending--;
		j->calls[i].call = NULL;
		(void)json_array_append_new(
			json_object_get(j->result, "errors"),
			json_sprintf("cannot delete namespace %s: %s", ns, strerror(-r)));
		return;
	}
	log_info("Deleting namespace %s (foreign) as uplink clean asked", ns);
}

static void run_clean(struct clean_job *j)
{
	json_t *targets = json_object_get(j->result, "targets"), *t;
	struct up_kube *k = up_cluster_kube(j->cluster);
	size_t i;

	j->pending = 1; /* held until every delete is sent: a quick answer must not end the job */
	json_array_foreach (targets, i, t) {
		const char *ns = json_string_value(json_object_get(t, "namespace"));
		struct up_session *s = up_sessions_find(j->all, ns);
		if (s) {
			if (up_session_stop(s, "removed by uplink clean") == 0)
				log_info("Session %s: stopped by uplink clean", up_session_id(s));
		} else {
			delete_foreign(j, k, ns, i);
		}
	}
	if (--j->pending == 0)
		deletes_done(j);
}

int up_rpc_session_clean(struct up_request *req, void *params, void *userdata)
{
	struct up_clean_params *p = params;
	struct up_sessions *all = up_manager_sessions(userdata);
	struct up_cluster *c = up_sessions_cluster(all, p->deploy_context);
	struct clean_job *j;
	uint64_t older = 0;
	json_t *cands;
	char why[1280];

	if (check_selectors(p, &older, why, sizeof(why)) < 0) {
		up_request_error(req, UP_ERR_INVALID_PARAMS, why);
		return 0;
	}
	if (!c || !up_cluster_namespaces(c) || !up_kube_watch_synced(up_cluster_namespaces(c))) {
		up_cluster_why_not_ready(c, why, sizeof(why));
		up_request_errorf(
			req, UP_ERR_CLUSTER_UNREACHABLE,
			"%s, so its session namespaces are not known and nothing was deleted; "
			"uplink status shows the cluster's state, uplink doctor checks it; "
			"run clean again once it answers",
			why);
		return 0;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct clean_job){.all = all, .cluster = c, .wait = p->wait};
	j->result =
		json_pack("{s:[], s:[], s:[], s:[]}", "targets", "unmatched", "errors", "waiting");
	cands = candidates(all, c, json_array_size(p->ids) > 0);
	if (j->result && cands)
		select_targets(p, older, cands, json_object_get(j->result, "targets"),
			       json_object_get(j->result, "unmatched"));
	json_decref(cands);
	j->ncalls = json_array_size(json_object_get(j->result, "targets"));
	j->calls = calloc(j->ncalls + 1, sizeof(*j->calls));
	j->timer = malloc(sizeof(*j->timer));
	if (!j->result || !cands || !j->calls || !j->timer) {
		free(j->timer);
		j->timer = NULL;
		clean_job_free(j);
		return -ENOMEM;
	}
	(void)uv_timer_init(up_sessions_loop(all), j->timer);
	j->timer->data = j;
	j->req = req;
	if (p->dry_run || j->ncalls == 0) {
		clean_end(j);
		return 0;
	}
	up_request_set_cancel(req, on_clean_cancelled, j);
	run_clean(j);
	return 0;
}
