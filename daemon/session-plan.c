/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --dry-run: what a run would do, found by reading only. Where a run applies
 * agent-uplink-system, a dry run GETs its namespace, registry Deployment and Service; where a
 * run builds the image, it hashes the build context and asks the registry (when there is one
 * to ask); no docker, no write to the cluster or the state folder. Each finding is a line of
 * the plan the answer carries next to the objects (session_plan_answer). Also the one place
 * where what only the cluster knows goes into the agent pod, for a run and a dry run alike,
 * so that the dry run's List is the run's objects with placeholders in.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "image.h"
#include "jsonrpc.h"
#include "kube.h"
#include "log.h"
#include "manifests.h"
#include "session-private.h"

/* Used by a run (session.c: apply_agent_pod) and a dry run alike: session-private.h. */
int session_fill_cluster_values(struct up_session *s, const char *mitm_ip, const char *ssh_agent_ip,
				char *err, size_t len)
{
	if (up_manifests_set_mitm_ip(s->objects, mitm_ip, err, len) < 0)
		return -EINVAL;
	if (s->need_ssh_agent &&
	    up_manifests_set_ssh_agent_ip(s->objects, ssh_agent_ip, err, len) < 0)
		return -EINVAL;
	return 0;
}

void session_plan_add(struct up_session *s, const char *fmt, ...)
{
	char line[2048];

	up_vformat(line, sizeof(line), fmt);
	if (!s->plan)
		s->plan = json_array();
	if (!s->plan || json_array_append_new(s->plan, json_string(line)) < 0)
		log_warning("Session %s: cannot keep the dry run's line '%s', ignoring", s->id,
			    line);
}

/* agent-uplink-system's objects, as a run applies them (manifests/registry*.yaml). */
enum { PART_NAMESPACE, PART_DEPLOYMENT, PART_SERVICE, _PART_MAX };

static const struct {
	const char *kind, *ns, *name, *label;
} parts[_PART_MAX] = {
	[PART_NAMESPACE] = {"Namespace", NULL, UP_SYSTEM_NAMESPACE, "namespace"},
	[PART_DEPLOYMENT] = {"Deployment", UP_SYSTEM_NAMESPACE, "registry", "Deployment"},
	[PART_SERVICE] = {"Service", UP_SYSTEM_NAMESPACE, "registry", "Service"},
};

static void registry_read(struct up_session *s);

static void on_part(struct up_session *s, unsigned part, const struct up_kube_error *err,
		    json_t *obj)
{
	if (err && err->code == 404) {
		s->plan_missing |= 1u << part;
	} else if (err) {
		s->plan_unread = true;
		session_plan_add(s, "registry: cannot read %s %s: %s", parts[part].kind,
				 parts[part].name, err->message);
	}
	if (part == PART_DEPLOYMENT && !err)
		s->plan_available =
			json_integer_value(json_object_get(json_object_get(obj, "status"),
							   "availableReplicas")) >= 1;
	if (--s->pending == 0)
		registry_read(s);
}

static void on_namespace(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	on_part(s, PART_NAMESPACE, err, obj);
}

static void on_deployment(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	on_part(s, PART_DEPLOYMENT, err, obj);
}

static void on_service(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	on_part(s, PART_SERVICE, err, obj);
}

static const session_done_fn part_done[_PART_MAX] = {
	[PART_NAMESPACE] = on_namespace,
	[PART_DEPLOYMENT] = on_deployment,
	[PART_SERVICE] = on_service,
};

/* What was found, said; then the image, asked for only where a run would push it now. */
static void registry_read(struct up_session *s)
{
	char missing[128] = "";
	size_t o = 0;

	for (unsigned i = 0; i < _PART_MAX; i++)
		if (s->plan_missing & (1u << i))
			o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%s",
					      o ? ", " : "", parts[i].label);
	if (s->plan_unread) {
		session_plan_add(s,
				 "registry: a run would apply " UP_SYSTEM_NAMESPACE " (namespace, "
				 "Deployment, Service), and stop if the cluster refuses");
		s->plan_unasked = "the registry could not be looked up";
	} else if (s->plan_missing) {
		session_plan_add(s, "registry: would set up " UP_SYSTEM_NAMESPACE " (%s)", missing);
		s->plan_unasked = "the registry is not set up yet";
	} else if (!s->plan_available) {
		session_plan_add(s,
				 "registry: " UP_SYSTEM_NAMESPACE
				 " is set up but the registry is not "
				 "available; a run would wait up to %d s for it",
				 UP_REGISTRY_READY_TIMEOUT_S);
		s->plan_unasked = "the registry is not available to ask";
	} else {
		session_plan_add(s, "registry: " UP_SYSTEM_NAMESPACE
				    " is set up and the registry is available");
	}
	session_start_image(s, s->plan_unasked == NULL);
}

void session_plan_registry(struct up_session *s)
{
	char path[256];

	if (s->registry_problem[0])
		session_plan_add(s, "registry: a real run would stop here: %s",
				 s->registry_problem);
	s->pending = 0;
	for (unsigned i = 0; i < _PART_MAX; i++) {
		if (up_kube_path(path, sizeof(path), parts[i].kind, parts[i].ns, parts[i].name) <
			    0 ||
		    session_get(s, path, part_done[i]) < 0) {
			/* Those asked answer later and count down to registry_read(); the rest is
			 * unread. */
			session_plan_add(s,
					 "registry: cannot read %s %s: the deploy cluster is not "
					 "available",
					 parts[i].kind, parts[i].name);
			s->plan_unread = true;
			if (s->pending == 0)
				registry_read(s);
			return;
		}
		s->pending++;
	}
}

bool session_plan_image(struct up_session *s, const struct up_image_result *res)
{
	if (!res->ref) { /* the context could not be hashed: no image, no List */
		session_fail(s, res->e, "%s", res->error);
		return false;
	}
	free(s->image_ref);
	s->image_ref = strdup(res->ref);
	if (!s->image_ref) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "out of memory");
		return false;
	}
	if (res->r < 0)
		session_plan_add(s, "image %s: a real run would stop here: %s", res->ref,
				 res->error);
	else if (res->present)
		session_plan_add(s, "image %s: present in the registry; nothing to build",
				 res->ref);
	else if (s->o.asked.force_rebuild)
		session_plan_add(s, "image %s: would rebuild and push it (--force-rebuild)",
				 res->ref);
	else if (res->asked)
		session_plan_add(s, "image %s: would build and push it: the registry lacks it",
				 res->ref);
	else
		session_plan_add(s, "image %s: would build and push it: %s", res->ref,
				 s->plan_unasked ? s->plan_unasked : "the registry was not asked");
	return true;
}

/* A dry run's answer: the plan and the objects as a run would apply them. */
void session_plan_answer(struct up_session *s)
{
	char err[512];

	if (session_fill_cluster_values(s, UP_MANIFEST_MITM_IP_PLACEHOLDER,
					UP_MANIFEST_SSH_AGENT_IP_PLACEHOLDER, err,
					sizeof(err)) < 0) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "%s", err);
		return;
	}
	if (s->need_ssh_agent)
		session_plan_add(
			s,
			"nothing was written to the cluster or the state folder, and docker "
			"did not run; in the List, " UP_MANIFEST_MITM_IP_PLACEHOLDER
			" and " UP_MANIFEST_SSH_AGENT_IP_PLACEHOLDER
			" stand for the mitm and ssh-agent "
			"Services' cluster IPs, which a run fills in once the Services have them");
	else
		session_plan_add(
			s,
			"nothing was written to the cluster or the state folder, and docker "
			"did not run; in the List, " UP_MANIFEST_MITM_IP_PLACEHOLDER " stands for "
			"the mitm Service's cluster IP, which a run fills in once the Service has "
			"one");
	session_answer(s, json_pack("{s:s, s:o, s:o}", "id", s->id, "objects",
				    up_manifests_list(s->objects, s->o.asked.show_secrets), "plan",
				    s->plan ? json_incref(s->plan) : json_array()));
	session_set_state(s, UP_SESSION_STOPPED, "dry run");
	session_teardown(s);
}

/* A dry run leaves nothing behind, in memory neither: it is forgotten on the next turn of
 * the loop, once whatever called session_teardown() has returned. */
static void on_forget(uv_timer_t *t)
{
	up_session_free(t->data);
}

void session_plan_forget(struct up_session *s)
{
	session_start_timer(s, on_forget, 0);
}
