/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reaper: records reconciled against the cluster (docs/architecture.md, "The reaper's
 * invariants"). At start-up the records are adopted; on every namespace or pod event, and on
 * the slow resync, an owned namespace without a record is an orphan and deleted, an ended
 * session's namespace is deleted (again), a session found starting after a restart fails, and
 * a running session whose namespace vanished becomes GONE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "kube-watch.h"
#include "kube.h"
#include "log.h"
#include "manifests.h"
#include "session-private.h"

static const char *ns_of(json_t *obj)
{
	json_t *meta = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(meta, "namespace"));

	return ns ? ns : json_string_value(json_object_get(meta, "name"));
}

/* ---- orphans and the whole cluster ---- */

static void delete_orphan_done(const struct up_kube_error *err, json_t *obj, void *ud)
{
	char *name = ud;

	(void)obj;
	if (err)
		log_warning("Cannot delete orphaned namespace %s: %s; the next resync retries",
			    name, err->message);
	free(name);
}

/* An owned namespace without a record: its session's record was lost, so it is an orphan. */
static void reap_orphan(struct up_sessions *all, struct up_cluster *c, json_t *ns)
{
	const char *name = ns_of(ns);
	json_t *labels = json_object_get(json_object_get(ns, "metadata"), "labels");
	const char *owner = json_string_value(json_object_get(labels, UP_LABEL_OWNER));
	const char *phase =
		json_string_value(json_object_get(json_object_get(ns, "status"), "phase"));
	struct up_kube *k = up_cluster_kube(c);
	char path[128], *copy;

	if (!name || !owner || strcmp(owner, all->owner) != 0 || !k || up_sessions_find(all, name))
		return;
	if (phase && !strcmp(phase, "Terminating"))
		return;
	log_info("Namespace %s is ours but has no session record: deleting the orphan", name);
	copy = strdup(name);
	if (!copy || up_kube_path(path, sizeof(path), "Namespace", NULL, name) < 0 ||
	    up_kube_delete(k, path, delete_orphan_done, copy, NULL) < 0)
		free(copy);
}

void reaper_reconcile(struct up_sessions *all, struct up_cluster *c)
{
	json_t *cache =
		up_cluster_namespaces(c) ? up_kube_watch_cache(up_cluster_namespaces(c)) : NULL;
	struct up_list *pos, *tmp;
	const char *key;
	json_t *ns;

	json_object_foreach (cache, key, ns)
		reap_orphan(all, c, ns);
	up_list_for_each_safe (pos, tmp, &all->sessions) {
		struct up_session *s = up_container_of(pos, struct up_session, link);
		if (s->cluster == c)
			up_session_reconcile(s, cache ? json_object_get(cache, s->ns) : NULL);
	}
}

void reaper_on_cluster_event(const char *kind, enum up_watch_event ev, json_t *obj, void *ud)
{
	struct up_cluster **pc = ud;
	struct up_sessions *all = (struct up_sessions *)(void *)pc[1];
	struct up_session *s;

	if (!kind) {
		reaper_reconcile(all, pc[0]);
		return;
	}
	s = up_sessions_find(all, ns_of(obj));
	if (!s) {
		if (!strcmp(kind, "Namespace") && ev == UP_WATCH_ADDED && up_cluster_ready(pc[0]))
			reap_orphan(all, pc[0], obj);
		return;
	}
	if (!strcmp(kind, "Namespace"))
		up_session_on_namespace(s, ev, obj);
	else
		up_session_on_pod(s, ev, obj);
}

/* Every cluster already ready, at start-up and on the resync. */
void reaper_reconcile_ready(struct up_sessions *all)
{
	const char *key;
	json_t *entry;

	json_object_foreach (all->clusters, key, entry) {
		struct up_cluster **pc = (struct up_cluster **)(uintptr_t)json_integer_value(entry);
		if (up_cluster_ready(pc[0]))
			reaper_reconcile(all, pc[0]);
	}
}

/* ---- one session: after a restart, and its namespace's events ---- */

void up_session_adopt(struct up_session *s)
{
	/* Whatever the last run managed to create, the namespace is the handle on all of it. */
	s->applied_anything = true;
	/* A running session's limits go on; the idle clock restarts with the daemon. */
	s->idle_since = session_now();
	session_life_arm(s);
}

void up_session_reconcile(struct up_session *s, json_t *ns)
{
	json_t *agent = s->ops->pod(s, "agent");

	if (up_session_state_is_starting(s->state) && !s->starter && !s->in_work && !s->image &&
	    !s->resolve && s->pending == 0 && !s->calls[0]) {
		session_fail(s, UP_ERR_INTERNAL_ERROR,
			     "uplinkd restarted while the session was starting");
	} else if (s->state == UP_SESSION_RUNNING) {
		if (ns)
			s->ops->audit_start(s); /* picked up again after a restart; idempotent */
		if (!ns)
			session_set_state(s, UP_SESSION_GONE,
					  "its namespace vanished while uplinkd was not looking");
		else if (agent)
			up_session_on_pod(s, UP_WATCH_MODIFIED, agent);
		if (ns && s->state == UP_SESSION_RUNNING)
			session_refresh_adopted(s); /* once; its renewals go on */
	} else if (s->state == UP_SESSION_TEARDOWN || s->state == UP_SESSION_EXITED ||
		   s->state == UP_SESSION_FAILED || s->state == UP_SESSION_STOPPED) {
		if (!ns) {
			if (s->state != UP_SESSION_TEARDOWN)
				session_set_state(s, UP_SESSION_TEARDOWN, NULL);
			session_set_state(s, UP_SESSION_GONE, NULL);
		} else {
			if (s->state != UP_SESSION_TEARDOWN)
				session_set_state(s, UP_SESSION_TEARDOWN, NULL);
			session_delete_namespace(s);
		}
	}
}

void up_session_on_namespace(struct up_session *s, enum up_watch_event ev, json_t *ns)
{
	const char *phase =
		json_string_value(json_object_get(json_object_get(ns, "status"), "phase"));

	if (ev != UP_WATCH_DELETED) {
		/* An ended session's namespace has no business existing: delete it (again). */
		if ((s->state == UP_SESSION_GONE ||
		     (up_session_state_is_terminal(s->state) && s->state != UP_SESSION_TEARDOWN)) &&
		    !(phase && !strcmp(phase, "Terminating")) && !s->all->closing) {
			log_info("Session %s has ended but namespace %s exists: deleting it", s->id,
				 s->ns);
			session_delete_namespace(s);
		}
		return;
	}
	if (s->state == UP_SESSION_TEARDOWN) {
		if (s->timer)
			(void)uv_timer_stop(s->timer);
		session_set_state(s, UP_SESSION_GONE, NULL);
	} else if (s->state == UP_SESSION_RUNNING) {
		session_set_state(s, UP_SESSION_GONE,
				  "its namespace was deleted from outside uplink");
	} else if (up_session_state_is_starting(s->state) && s->applied_anything) {
		session_fail(s, UP_ERR_INTERNAL_ERROR,
			     "namespace %s was deleted while the session was starting", s->ns);
	}
}
