/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's side of a session's objects: the agent pod (its user, environment, the
 * agent's own volumes and files, the run extras' mounts, the SSH relay's socket) and the
 * ssh-agent pod that holds --ssh-key-dir's keys. manifests.c renders the rest.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "kube-expose.h"
#include "manifests-private.h"
#include "manifests.h"

/* runAsUser and runAsGroup of the host user: on a pod or container security context. */
static int host_ids(const struct up_session_spec *s, json_t *ctx, bool fs_group)
{
	if (!ctx || manifests_put(ctx, "runAsUser", json_integer((json_int_t)s->uid)) < 0 ||
	    manifests_put(ctx, "runAsGroup", json_integer((json_int_t)s->gid)) < 0 ||
	    (fs_group && manifests_put(ctx, "fsGroup", json_integer((json_int_t)s->gid)) < 0))
		return -ENOMEM;
	return 0;
}

/* --ssh-key-dir: the holder pod and its Service (manifests/ssh-agent-pod.yaml). */
int manifests_render_ssh_agent(struct render *c)
{
	json_t *pod = manifests_object(c, TPL_SSH_POD, UP_MANIFEST_SSH_AGENT);
	json_t *svc = manifests_object(c, TPL_SSH_SVC, UP_MANIFEST_SSH_AGENT);
	const char *rc = c->s->mitm_runtime_class;
	int r = pod && svc ? 0 : -ENOMEM;

	if (r == 0)
		r = manifests_put(manifests_dig(pod, "spec.containers.0"), "image",
				  json_string(c->s->agent_image));
	if (r == 0)
		r = host_ids(c->s, manifests_dig(pod, "spec.securityContext"), true);
	if (r == 0)
		r = host_ids(c->s, manifests_dig(pod, "spec.containers.0.securityContext"), false);
	if (r == 0 && rc && *rc)
		r = manifests_put(json_object_get(pod, "spec"), "runtimeClassName",
				  json_string(rc));
	return manifests_add_pod_and_service(c, pod, svc, r);
}

/* The agent pod's side of the relay: ~/.ssh files, the socket volume, the sidecar. */
static int agent_ssh(struct render *c, json_t *pod)
{
	const struct up_ssh_keys *k = &c->s->extras->ssh;
	json_t *spec = json_object_get(pod, "spec"),
	       *main = manifests_dig(pod, "spec.containers.0");
	json_t *mounts = json_object_get(main, "volumeMounts"),
	       *vols = json_object_get(spec, "volumes");
	json_t *relay = json_deep_copy(c->m->tpl[TPL_SSH_RELAY]);
	char path[PATH_MAX];
	int r = relay ? 0 : -ENOMEM;

	if (r == 0)
		r = manifests_env_add(json_object_get(main, "env"), "SSH_AUTH_SOCK", SSH_AUTH_SOCK);
	if (r == 0)
		r = manifests_push(vols,
				   json_pack("{s:s, s:{s:s}}", "name", UP_MANIFEST_SSH_PUB_SECRET,
					     "secret", "secretName", UP_MANIFEST_SSH_PUB_SECRET));
	if (r == 0)
		r = manifests_push(vols,
				   json_pack("{s:s, s:{s:s, s:s}}", "name", SSH_SOCK_VOLUME,
					     "emptyDir", "medium", "Memory", "sizeLimit", "8Mi"));
	/* File by file: ~/.ssh itself stays the agent's, for known_hosts. */
	for (size_t i = 0; r == 0 && i < k->n_pub; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/.ssh/%s", c->s->home,
				     k->pub[i].name) >= sizeof(path))
			return json_decref(relay), -ENAMETOOLONG;
		r = manifests_push(mounts, json_pack("{s:s, s:s, s:s, s:b}", "name",
						     UP_MANIFEST_SSH_PUB_SECRET, "mountPath", path,
						     "subPath", k->pub[i].name, "readOnly", 1));
	}
	if (r == 0)
		r = manifests_push(mounts, json_pack("{s:s, s:s}", "name", SSH_SOCK_VOLUME,
						     "mountPath", SSH_SOCK_DIR));
	if (r == 0)
		r = manifests_put(relay, "image", json_string(c->s->agent_image));
	if (r == 0)
		r = host_ids(c->s, json_object_get(relay, "securityContext"), false);
	if (r < 0)
		return json_decref(relay), r;
	return manifests_push(json_object_get(spec, "containers"), relay);
}

static int agent_env(struct render *c, json_t *env)
{
	const struct up_session_spec *s = c->s;
	char uid[16], gid[16];
	int r;

	(void)snprintf(uid, sizeof(uid), "%u", (unsigned)s->uid);
	(void)snprintf(gid, sizeof(gid), "%u", (unsigned)s->gid);
	const struct up_env ours[] = {
		{"WORKDIR", s->cwd},	    {"USERNAME", s->user},
		{"UPLINK_SESSION", s->id},  {"UPLINK_UID", uid},
		{"UPLINK_GID", gid},	    {"UPLINK_HOME", s->home},
		{"UPLINK_AGENT", s->agent}, {"UPLINK_AGENT_MODE", s->mode ? s->mode : ""},
	};
	for (size_t i = 0; i < ELEMENTSOF(ours); i++)
		if ((r = manifests_env_add(env, ours[i].name, ours[i].value)) < 0)
			return r;
	if (manifests_has_kube(s->extras) &&
	    (r = manifests_env_add(env, "KUBECONFIG", UP_KUBE_AGENT_CONFIG)) < 0)
		return r;
	for (size_t i = 0; i < s->contrib.n_env; i++) {
		r = manifests_env_add(env, s->contrib.env[i].name, s->contrib.env[i].value);
		if (r == -EEXIST)
			return manifests_failf(c->err, c->err_len,
					       "agent env %s would replace uplink's own",
					       s->contrib.env[i].name);
		if (r < 0)
			return r;
	}
	return 0;
}

static json_t *volume_json(const struct up_agent_volume *v)
{
	switch (v->kind) {
	case UP_AGENT_VOL_SECRET:
		return json_pack("{s:s, s:{s:s}}", "name", v->name, "secret", "secretName",
				 v->name);
	case UP_AGENT_VOL_CONFIGMAP:
		return json_pack("{s:s, s:{s:s}}", "name", v->name, "configMap", "name", v->name);
	case UP_AGENT_VOL_HOSTPATH:
		return json_pack("{s:s, s:{s:s, s:s}}", "name", v->name, "hostPath", "path",
				 v->host_path, "type", v->host_path_type ? v->host_path_type : "");
	case UP_AGENT_VOL_EMPTYDIR: {
		json_t *ed = json_object();
		if (ed && v->medium)
			(void)json_object_set_new(ed, "medium", json_string(v->medium));
		if (ed && v->size_limit)
			(void)json_object_set_new(ed, "sizeLimit", json_string(v->size_limit));
		return json_pack("{s:s, s:o}", "name", v->name, "emptyDir", ed);
	}
	}
	return NULL;
}

static int agent_volumes(struct render *c, json_t *volumes, json_t *mounts)
{
	for (size_t i = 0; i < c->s->contrib.n_volumes; i++) {
		const struct up_agent_volume *v = &c->s->contrib.volumes[i];
		int r = manifests_push(volumes, volume_json(v));
		if (r == 0 && v->mount_path)
			r = manifests_push(mounts, json_pack("{s:s, s:s, s:b}", "name", v->name,
							     "mountPath", v->mount_path, "readOnly",
							     v->read_only));
		for (size_t j = 0; r == 0 && j < v->n_files; j++)
			if (v->files[j].mount_path)
				r = manifests_push(mounts, json_pack("{s:s, s:s, s:s, s:b}", "name",
								     v->name, "mountPath",
								     v->files[j].mount_path,
								     "subPath", v->files[j].key,
								     "readOnly", v->read_only));
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The agent pod's volumes for the extras: the kubeconfig of --kube-context, the git overlay
 * at the include path, the dummy AWS credentials as ~/.aws/credentials, and each host mount
 * at its own path (a hostPath of type Directory or File, read-only as asked).
 */
static int extras_volumes(struct render *c, json_t *volumes, json_t *mounts)
{
	const struct up_session_extras *x = c->s->extras;
	char name[32];
	json_t *v;
	size_t i;
	int r = 0;

	if (!x)
		return 0;
	if (manifests_has_kube(x)) {
		r = manifests_push(volumes, json_pack("{s:s, s:{s:s}}", "name", UP_KUBE_CONFIGMAP,
						      "configMap", "name", UP_KUBE_CONFIGMAP));
		if (r == 0)
			r = manifests_push(mounts, json_pack("{s:s, s:s, s:b}", "name",
							     UP_KUBE_CONFIGMAP, "mountPath",
							     UP_KUBE_AGENT_DIR, "readOnly", 1));
	}
	if (r == 0 && x->gitconfig && *x->gitconfig) {
		r = manifests_push(volumes, json_pack("{s:s, s:{s:s}}", "name", GIT_SECRET,
						      "secret", "secretName", GIT_SECRET));
		if (r == 0)
			r = manifests_push(mounts, json_pack("{s:s, s:s, s:s, s:b}", "name",
							     GIT_SECRET, "mountPath", GIT_INCLUDE,
							     "subPath", GIT_KEY, "readOnly", 1));
	}
	if (r == 0 && x->aws_creds_json && x->aws_ini) {
		char at[4200];
		(void)snprintf(at, sizeof(at), "%s/.aws/" AWS_AGENT_KEY, c->s->home);
		r = manifests_push(volumes, json_pack("{s:s, s:{s:s}}", "name", AWS_AGENT_CONFIGMAP,
						      "configMap", "name", AWS_AGENT_CONFIGMAP));
		if (r == 0)
			r = manifests_push(mounts,
					   json_pack("{s:s, s:s, s:s, s:b}", "name",
						     AWS_AGENT_CONFIGMAP, "mountPath", at,
						     "subPath", AWS_AGENT_KEY, "readOnly", 1));
	}
	json_array_foreach (x->mounts, i, v) {
		const char *path = json_string_value(json_object_get(v, "path"));
		bool dir = json_is_true(json_object_get(v, "dir"));
		(void)snprintf(name, sizeof(name), MOUNT_PREFIX "%zu", i);
		if (r == 0)
			r = manifests_push(volumes, json_pack("{s:s, s:{s:s, s:s}}", "name", name,
							      "hostPath", "path", path, "type",
							      dir ? "Directory" : "File"));
		if (r == 0)
			r = manifests_push(
				mounts, json_pack("{s:s, s:s, s:b}", "name", name, "mountPath",
						  path, "readOnly",
						  json_is_true(json_object_get(v, "read_only"))));
	}
	return r;
}

static int agent_pod_fill(struct render *c, json_t *pod)
{
	const struct up_session_spec *s = c->s;
	json_t *spec = json_object_get(pod, "spec"),
	       *main = manifests_dig(pod, "spec.containers.0");
	const char *rc =
		s->agent_runtime_class ? s->agent_runtime_class : UP_AGENT_RUNTIME_CLASS_DEFAULT;
	int r;

	if ((r = agent_env(c, json_object_get(main, "env"))) < 0)
		return r;
	if ((r = agent_volumes(c, json_object_get(spec, "volumes"),
			       json_object_get(main, "volumeMounts"))) < 0)
		return r;
	if ((r = extras_volumes(c, json_object_get(spec, "volumes"),
				json_object_get(main, "volumeMounts"))) < 0)
		return r;
	if (manifests_put(main, "image", json_string(s->agent_image)) < 0 ||
	    (s->contrib.entrypoint &&
	     manifests_put(main, "command", manifests_strv(s->contrib.entrypoint)) < 0) ||
	    (s->contrib.command &&
	     manifests_put(main, "args", manifests_strv(s->contrib.command)) < 0) ||
	    manifests_put(json_object_get(main, "resources"), "limits",
			  json_pack("{s:s}", "memory",
				    s->contrib.memory_limit ? s->contrib.memory_limit
							    : UP_AGENT_MEMORY_LIMIT_DEFAULT)) < 0 ||
	    manifests_put(spec, "securityContext",
			  json_pack("{s:I}", "fsGroup", (json_int_t)s->gid)) < 0 ||
	    (*rc && manifests_put(spec, "runtimeClassName", json_string(rc)) < 0))
		return -ENOMEM;
	if (manifests_has_ssh(s) && (r = agent_ssh(c, pod)) < 0)
		return r == -EEXIST ? manifests_failf(c->err, c->err_len,
						      "agent env SSH_AUTH_SOCK would replace "
						      "uplink's own")
				    : r;
	if (s->asked.allow_dns) { /* back to the cluster's DNS */
		(void)json_object_del(spec, "dnsPolicy");
		(void)json_object_del(spec, "dnsConfig");
	}
	return 0;
}

int manifests_render_agent(struct render *c)
{
	json_t *pod = manifests_object(c, TPL_AGENT_POD, "agent");
	int r = pod ? agent_pod_fill(c, pod) : -ENOMEM;

	if (r < 0)
		return json_decref(pod), r;
	if ((r = manifests_add(c, pod)) < 0)
		return r;
	if (c->s->mitm_cluster_ip &&
	    (r = up_manifests_set_mitm_ip(c->objects, c->s->mitm_cluster_ip, c->err, c->err_len)) <
		    0)
		return r;
	if (c->s->ssh_agent_cluster_ip && manifests_has_ssh(c->s))
		return up_manifests_set_ssh_agent_ip(c->objects, c->s->ssh_agent_cluster_ip, c->err,
						     c->err_len);
	return 0;
}
