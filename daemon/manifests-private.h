/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* What manifests.c and manifests-check.c share: object names and small predicates. */
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kube-expose.h"
#include "manifests.h"
#include "util.h"

/* The session's own objects beyond the agent's (struct up_session_extras). */
#define GIT_SECRET	    "git-config"
#define GIT_KEY		    "agent-uplink.inc"
#define GIT_INCLUDE	    "/etc/gitconfig.d/agent-uplink.inc" /* agents/common/gitconfig includes it */
#define UPSTREAM_CA_SECRET  "upstream-ca"
#define UPSTREAM_CA_DIR	    "/upstream-ca"
#define MOUNT_PREFIX	    "mount-"
#define SSH_SOCK_VOLUME	    "ssh-sock"	 /* the relay's socket, shared with the main container */
#define SSH_SOCK_DIR	    "/ssh-agent" /* manifests/ssh-agent-relay.yaml */
#define SSH_AUTH_SOCK	    SSH_SOCK_DIR "/agent.sock"
/* --aws-profiles: the agent's dummy keys (a ConfigMap: they hold no secret, so --dry-run and
 * kubectl show them), and the mitm's real ones (a Secret mounted whole, so that Kubernetes
 * updates the file when a refresh patches it). */
#define AWS_AGENT_CONFIGMAP "agent-aws-creds"
#define AWS_AGENT_KEY	    "credentials"
#define AWS_MITM_SECRET	    UP_MANIFEST_AWS_SECRET
#define AWS_MITM_KEY	    UP_MANIFEST_AWS_KEY
#define AWS_MITM_DIR	    "/aws-creds"

int manifests_failf(char *err, size_t len, const char *fmt, ...) _printf_(3, 4);

enum tpl {
	TPL_NAMESPACE,
	TPL_SECRET,
	TPL_CONFIGMAP,
	TPL_NP_DENY,
	TPL_NP_AGENT,
	TPL_NP_AGENT_DNS,
	TPL_NP_MITM,
	TPL_MITM_POD,
	TPL_MITM_SVC,
	TPL_AGENT_POD,
	TPL_SSH_POD,
	TPL_SSH_SVC,
	TPL_NP_SSH,
	TPL_NP_AGENT_SSH,
	TPL_SSH_RELAY,
	TPL_SYS_NAMESPACE,
	TPL_REGISTRY,
	TPL_REGISTRY_SVC,
	_TPL_MAX,
};

/* A template file, its kind (NULL: a fragment) and the paths the code fills in or extends. */
struct manifests_template {
	const char *file;
	const char *kind;
	const char *need[4];
};
extern const struct manifests_template manifests_templates[_TPL_MAX];

/* The addon's files in manifests/mitm/, filter.py first; each one key of its ConfigMap. */
#define MANIFESTS_ADDON_FILES 7
extern const char *const manifests_addon_files[MANIFESTS_ADDON_FILES];

struct up_manifests {
	json_t *tpl[_TPL_MAX];
	char *addon[MANIFESTS_ADDON_FILES];
};

/* "spec.containers.0.env": objects by key, arrays by index. */
json_t *manifests_dig(json_t *v, const char *path);
int manifests_put(json_t *o, const char *key, json_t *v);
int manifests_push(json_t *a, json_t *v);
/* Sets a Secret's (base64) or ConfigMap's (text or binaryData) key. */
int manifests_data_put(json_t *o, bool secret, const char *key, const char *data, size_t len);
bool manifests_is_ip(const char *s);
/* Refuses a spec that does not hold up, with a sentence naming the field (manifests-check.c). */
int manifests_check_spec(const struct up_session_spec *s, char *err, size_t len) _wur_;

static inline bool manifests_has_kube(const struct up_session_extras *x)
{
	return x && x->kube && x->kube->n > 0;
}

static inline bool manifests_has_kube_certs(const struct up_session_extras *x)
{
	for (size_t i = 0; manifests_has_kube(x) && i < x->kube->n; i++)
		if (x->kube->ctx[i].client_pem)
			return true;
	return false;
}

static inline bool manifests_has_ssh(const struct up_session_spec *s)
{
	return s->extras && s->extras->ssh.n_keys > 0;
}

/* ---- rendering a session (manifests.c, manifests-agent.c) */

/* Rendering state: the spec, the objects so far, the error sentence. */
struct render {
	const struct up_manifests *m;
	const struct up_session_spec *s;
	char ns[UP_NAMESPACE_MAX];
	json_t *objects;
	char *err;
	size_t err_len;
};

json_t *manifests_object(struct render *c, enum tpl t, const char *name);
/* Takes o; appends it to the objects. */
int manifests_add(struct render *c, json_t *o);
int manifests_env_add(json_t *env, const char *name, const char *value);
/* A JSON array of the strings of a NULL-terminated vector. */
json_t *manifests_strv(const char *const *v);
/* `--set NAME=VALUE`, in place of the template's own NAME if it has one. */
int manifests_set_option(json_t *args, const char *opt);
/* Takes both (also when r < 0, which it returns). */
int manifests_add_pod_and_service(struct render *c, json_t *pod, json_t *svc, int r);
/* manifests-agent.c */
int manifests_render_ssh_agent(struct render *c);
int manifests_render_agent(struct render *c);
