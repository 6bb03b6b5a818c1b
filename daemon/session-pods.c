/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the watches tell a session: its pods becoming Ready (STARTING -> RUNNING), the
 * agent's exit (its code and reason), the agent pod vanishing; and, after a restart,
 * what the last run left (reconciliation). Also what a client needs to attach.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "cluster.h"
#include "knobs.h"
#include "kube.h"
#include "log.h"
#include "manifests.h"
#include "notify.h"
#include "session-audit.h"
#include "session-private.h"
#include "store.h"

/* ---- STARTING: both pods Ready, as the pod watch reports ---- */

static bool pod_ready(json_t *pod)
{
	json_t *conds = json_object_get(json_object_get(pod, "status"), "conditions"), *c;
	size_t i;

	json_array_foreach (conds, i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *status = json_string_value(json_object_get(c, "status"));
		if (type && status && !strcmp(type, "Ready"))
			return !strcmp(status, "True");
	}
	return false;
}

/* The agent container's end, if it has ended: its exit code and reason. */
static bool agent_terminated(json_t *pod, int *code, const char **reason)
{
	json_t *sts = json_object_get(json_object_get(pod, "status"), "containerStatuses"), *c;
	size_t i;

	json_array_foreach (sts, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		json_t *term = json_object_get(json_object_get(c, "state"), "terminated");
		if (!name || strcmp(name, UP_AGENT_CONTAINER) != 0 || !term)
			continue;
		*code = (int)json_integer_value(json_object_get(term, "exitCode"));
		*reason = json_string_value(json_object_get(term, "reason"));
		return true;
	}
	return false;
}

/* Remembers why a pod is not starting, for the message if it never does. */
static void note_waiting(struct up_session *s, const char *pod_name, json_t *pod)
{
	json_t *st = json_object_get(pod, "status"),
	       *sts = json_object_get(st, "containerStatuses"), *c;
	const char *phase = json_string_value(json_object_get(st, "phase"));
	size_t i;

	json_array_foreach (sts, i, c) {
		json_t *w = json_object_get(json_object_get(c, "state"), "waiting");
		const char *reason = json_string_value(json_object_get(w, "reason"));
		const char *msg = json_string_value(json_object_get(w, "message"));
		if (reason) {
			(void)snprintf(s->waiting, sizeof(s->waiting),
				       "pod %s is %s, container %s waiting: %s%s%s", pod_name,
				       phase ? phase : "?",
				       json_string_value(json_object_get(c, "name")), reason,
				       msg ? " (" : "", msg ? msg : "");
			if (msg)
				(void)strncat(s->waiting, ")",
					      sizeof(s->waiting) - strlen(s->waiting) - 1);
			return;
		}
	}
	if (phase)
		(void)snprintf(s->waiting, sizeof(s->waiting), "pod %s is %s", pod_name, phase);
}

static void running(struct up_session *s)
{
	if (s->timer)
		(void)uv_timer_stop(s->timer);
	session_set_state(s, UP_SESSION_RUNNING, NULL); /* its entry actions: session.c */
}

/*
 * RUNNING: the proxy or the ssh-agent holder stopped being Ready (Kubernetes restarts it).
 * The agent reaches nothing (or no SSH key) meanwhile: said once per outage, in the log and
 * on the desktop, and its end in the log.
 */
static void side_pod(struct up_session *s, const char *name, bool ready, json_t *pod)
{
	bool mitm = !strcmp(name, "mitm");
	bool *was = mitm ? &s->mitm_ready : &s->ssh_agent_ready,
	     *down = mitm ? &s->mitm_down : &s->ssh_agent_down;
	const char *fails = mitm ? "the agent reaches no host until it is back"
				 : "the agent cannot use its SSH keys until it is back";

	if (!mitm && strcmp(name, UP_MANIFEST_SSH_AGENT) != 0)
		return;
	if (*was && !ready && !*down) {
		s->waiting[0] = '\0';
		if (pod)
			note_waiting(s, name, pod);
		log_warning("Session %s: pod %s is no longer Ready (%s); %s", s->id, name,
			    s->waiting[0] ? s->waiting : "not ready", fails);
		up_notify_pod_down(session_notifier(s),
				   s->o.agent ? s->o.agent : up_record_agent(s->record), s->id,
				   name, s->waiting[0] ? s->waiting : "not ready", fails);
		*down = true;
	} else if (ready && *down) {
		log_info("Session %s: pod %s is Ready again", s->id, name);
		*down = false;
	}
	*was = ready;
}

void up_session_on_pod(struct up_session *s, enum up_watch_event ev, json_t *pod)
{
	const char *name =
		json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
	const char *reason = NULL;
	int code;

	if (!name || up_session_state_is_terminal(s->state))
		return;
	if (strcmp(name, "agent") == 0 && ev != UP_WATCH_DELETED &&
	    agent_terminated(pod, &code, &reason)) {
		char why[256];
		session_cancel_work(s);
		if (up_record_set_exit_code(s->record, code, session_now()) < 0)
			log_warning("Session %s: cannot record exit code %d, ignoring", s->id,
				    code);
		(void)snprintf(why, sizeof(why), "the agent exited with code %d%s%s%s", code,
			       reason ? " (" : "", reason ? reason : "", reason ? ")" : "");
		if (s->starter)
			session_answer_error(s, UP_ERR_SESSION_STOPPED, why);
		session_set_state(s, UP_SESSION_EXITED, why);
		session_teardown(s);
		return;
	}
	if (ev == UP_WATCH_DELETED && s->state == UP_SESSION_RUNNING && !strcmp(name, "agent")) {
		session_set_state(s, UP_SESSION_FAILED,
				  "the agent pod was deleted or evicted from outside uplink");
		session_teardown(s);
		return;
	}
	if (s->state == UP_SESSION_RUNNING && ev != UP_WATCH_ADDED)
		side_pod(s, name, ev != UP_WATCH_DELETED && pod_ready(pod), pod);
	if (s->state != UP_SESSION_STARTING)
		return;
	if (!strcmp(name, "agent"))
		s->agent_ready = pod_ready(pod);
	else if (!strcmp(name, "mitm"))
		s->mitm_ready = pod_ready(pod);
	else if (!strcmp(name, UP_MANIFEST_SSH_AGENT))
		s->ssh_agent_ready = pod_ready(pod);
	if (!pod_ready(pod))
		note_waiting(s, name, pod);
	if (s->agent_ready && s->mitm_ready && (!s->need_ssh_agent || s->ssh_agent_ready))
		running(s);
}

static long start_timeout_s(void)
{
	const char *env = up_knobs()->start_timeout_s;
	long t = env ? strtol(env, NULL, 10) : 0;

	return t > 0 ? t : UP_SESSION_START_TIMEOUT_S;
}

static void on_events(struct up_session *s, const struct up_kube_error *err, json_t *list)
{
	char events[1024] = "";
	json_t *items = json_object_get(list, "items"), *e;
	size_t i, n = json_array_size(items), used = 0;

	(void)err;
	/* The last few events say the most: image pulls, scheduling, admission. */
	for (i = n > 5 ? n - 5 : 0; i < n && used < sizeof(events); i++) {
		e = json_array_get(items, i);
		used += (size_t)snprintf(events + used, sizeof(events) - used, "%s%s: %s",
					 used ? "; " : "",
					 json_string_value(json_object_get(e, "reason")),
					 json_string_value(json_object_get(e, "message")));
	}
	session_fail(
		s, UP_ERR_POD_NOT_READY,
		"the session's pods did not become ready within %ld s: %s%s%s. Check the cluster "
		"(uplink doctor) or raise UPLINK_START_TIMEOUT_S",
		start_timeout_s(), s->waiting[0] ? s->waiting : "no pod reported why",
		events[0] ? "; recent events: " : "", events);
}

static void on_start_timeout(uv_timer_t *t)
{
	struct up_session *s = t->data;
	char path[256];

	/* Fetch the namespace's events for the message, then fail. */
	if (up_kube_path(path, sizeof(path), "Event", s->ns, NULL) < 0 ||
	    session_get(s, path, on_events) < 0)
		on_events(s, NULL, NULL);
}

void session_start_waiting(struct up_session *s)
{
	json_t *p;

	session_set_state(s, UP_SESSION_STARTING, NULL);
	if (s->need_ssh_agent)
		session_progress(s, "start", 0, 3,
				 "waiting for the mitm, ssh-agent and agent pods");
	else
		session_progress(s, "start", 0, 2, "waiting for the mitm and agent pods");
	session_start_timer(s, on_start_timeout, (uint64_t)start_timeout_s() * 1000);
	/* Events may have come before we listened: look at the cache too. */
	if ((p = s->ops->pod(s, "mitm")))
		up_session_on_pod(s, UP_WATCH_MODIFIED, p);
	if (s->need_ssh_agent && s->state == UP_SESSION_STARTING &&
	    (p = s->ops->pod(s, UP_MANIFEST_SSH_AGENT)))
		up_session_on_pod(s, UP_WATCH_MODIFIED, p);
	if (s->state == UP_SESSION_STARTING && (p = s->ops->pod(s, "agent")))
		up_session_on_pod(s, UP_WATCH_MODIFIED, p);
}

json_t *up_session_attach_info(const struct up_session *s, char *err, size_t err_len)
{
	const char *const *argv = session_agent_attach_argv(s);
	const struct up_kube_context *ctx = s->ops->context(s);
	const char *kubeconfig = up_knobs()->kubeconfig;
	json_t *cmd;

	if (s->state != UP_SESSION_RUNNING) {
		(void)snprintf(err, err_len, "session %s is %s, not running", s->id,
			       up_session_state_to_name(s->state));
		return NULL;
	}
	if (!ctx) {
		(void)snprintf(err, err_len, "the deploy cluster of session %s is not available",
			       s->id);
		return NULL;
	}
	cmd = json_pack("[s, s, s, s, s, s, s, s, s, s, s, s, s]", "kubectl", "--kubeconfig",
			kubeconfig && *kubeconfig ? kubeconfig : ctx->file, "--context", ctx->name,
			"exec", "-it", "-n", s->ns, "agent", "-c", UP_AGENT_CONTAINER, "--");
	for (size_t i = 0; argv && argv[i]; i++)
		(void)json_array_append_new(cmd, json_string(argv[i]));
	if (!argv)
		(void)json_array_extend(
			cmd, json_pack("[s, s, s, s]", "tmux", "attach-session", "-t", "agent"));
	return json_pack("{s:s, s:s, s:o}", "id", s->id, "namespace", s->ns, "argv", cmd);
}
