/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-cluster registry the agent images go to: agent-uplink-system (a Deployment on
 * the node's network, bound to its loopback, and a Service), applied by the daemon and
 * waited for before a push. On a local k3s, the node must also know to pull
 * localhost:5000 over plain HTTP: /etc/rancher/k3s/registries.yaml says so, or sessions
 * cannot start, and the message gives the exact file to write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "k3s-registries.h"
#include "kube.h"
#include "manifests.h"
#include "session-private.h"
#include "yaml-json.h"

void session_registry_check(const char *server, char *problem, size_t len)
{
	struct up_k3s_check c;

	problem[0] = '\0';
	up_k3s_registries_check(server, &c);
	if (c.verdict == UP_K3S_SKIPPED || c.verdict == UP_K3S_OK)
		return;
	(void)snprintf(problem, len,
		       "the local k3s cannot pull agent images: %s %s a mirror for localhost:5000. "
		       "Write this to it, then restart k3s (sudo systemctl restart k3s):\n%s",
		       c.path,
		       c.verdict == UP_K3S_MISSING	? "does not exist, so it lacks"
		       : c.verdict == UP_K3S_UNREADABLE ? "cannot be read, so it lacks"
							: "lacks",
		       UP_K3S_REGISTRIES_YAML);
}

static void poll_registry(struct up_session *s);

static void on_registry_timer(uv_timer_t *t)
{
	poll_registry(t->data);
}

static void on_registry(struct up_session *s, const struct up_kube_error *err, json_t *dep)
{
	if (!err && json_integer_value(json_object_get(json_object_get(dep, "status"),
						       "availableReplicas")) >= 1) {
		session_registry_ready(s);
		return;
	}
	if (++s->attempts > UP_REGISTRY_READY_TIMEOUT_S) {
		session_fail(s, UP_ERR_PREREQ_MISSING,
			     "the image registry in agent-uplink-system did not become available "
			     "within %d s; see: kubectl -n agent-uplink-system describe deployment "
			     "registry (or push elsewhere with --registry)",
			     UP_REGISTRY_READY_TIMEOUT_S);
		return;
	}
	session_start_timer(s, on_registry_timer, 1000);
}

static void poll_registry(struct up_session *s)
{
	if (session_get(s, UP_REGISTRY_DEPLOYMENT_PATH, on_registry) < 0)
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "the deploy cluster is not available");
}

static void on_system_object(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	(void)obj;
	if (err) {
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE,
			     "setting up agent-uplink-system failed: %s", err->message);
		return;
	}
	if (--s->pending > 0)
		return;
	s->attempts = 0;
	poll_registry(s);
}

static void on_system_namespace(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	(void)obj;
	if (err) {
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE,
			     "creating namespace agent-uplink-system "
			     "failed: %s",
			     err->message);
		return;
	}
	if (session_apply_rest(s, s->system, NULL, on_system_object) && s->pending == 0)
		poll_registry(s);
}

int session_registry_ensure(struct up_session *s, char *err, size_t len)
{
	struct up_system_spec sys = {.registry_image = s->o.registry_image};
	int r;

	json_decref(s->system);
	s->system = NULL;
	r = up_manifests_render_system(s->all->tpl, &sys, &s->system, err, len);
	if (r < 0)
		return r;
	/* The namespace first; the registry's Deployment and Service then together. */
	r = session_apply(s, json_array_get(s->system, 0), on_system_namespace);
	if (r < 0)
		(void)snprintf(err, len, "the deploy cluster is not available");
	return r;
}
