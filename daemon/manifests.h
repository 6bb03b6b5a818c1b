/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "session-spec.h"
#include "util.h"

/*
 * A session's Kubernetes objects, from the YAML templates in manifests/ (parsed once at
 * start-up into jansson trees) filled in by code, field by field: never by substituting
 * strings. The objects carry the labels and annotations the reaper relies on
 * (docs/architecture.md, "The reaper's invariants"; manifests/namespace.yaml) and the
 * security posture (default-deny, agent egress only to mitm:8080, no DNS for the agent, a
 * hardened mitm, the CA key and the rules only in the mitm's Secrets).
 *
 * Names of the objects uplinkd itself adds to a session:
 */
#define UP_MANIFEST_ADDON_CONFIGMAP "mitm-addon" /* one key per addon file; mounted by the mitm */
#define UP_MANIFEST_RULES_SECRET    "rules-json" /* key rules.json; mitm only */
#define UP_MANIFEST_CONTROL_KEY	    "control-token"   /* of rules-json: the control listener's */
#define UP_MANIFEST_CERTS_SECRET    "mitm-certs"      /* mitmproxy's confdir; mitm only */
#define UP_MANIFEST_AWS_SECRET	    "aws-sigv4-creds" /* key creds.json; mitm only */
#define UP_MANIFEST_AWS_KEY	    "creds.json"
#define UP_MANIFEST_CA_CONFIGMAP    "uplink-ca" /* key ca.crt, the certificate alone; agent */
#define UP_MANIFEST_AGENT_CA_PATH   "/etc/uplink/ca/ca.crt"
/* --ssh-key-dir: the holder Pod and Service, also the agent's hostAliases name */
#define UP_MANIFEST_SSH_AGENT	    "ssh-agent"
#define UP_MANIFEST_SSH_KEYS_SECRET "ssh-agent-keys" /* the private keys; the holder pod only */
#define UP_MANIFEST_SSH_PUB_SECRET  "ssh-pub"	     /* <key>.pub, config, certificates; agent */

#define UP_AGENT_RUNTIME_CLASS_DEFAULT "kata-clh"
#define UP_AGENT_MEMORY_LIMIT_DEFAULT  "4Gi"
#define UP_REGISTRY_IMAGE_DEFAULT      "registry:2"
#define UP_SYSTEM_NAMESPACE	       "agent-uplink-system"
/* The registry Deployment, which the daemon and doctor poll. */
#define UP_REGISTRY_DEPLOYMENT_PATH \
	"/apis/apps/v1/namespaces/" UP_SYSTEM_NAMESPACE "/deployments/registry"

struct up_manifests;

/*
 * Where the templates live: $UPLINK_DATA_DIR/manifests when set (tests, running from the
 * source tree with UPLINK_DATA_DIR=<source root>), else <datadir>/uplink/manifests.
 */
int up_manifests_default_dir(char *buf, size_t len) _wur_;

/* Reads and checks every template, and the addon's files in mitm/, from `dir` (NULL = the
 * default). */
int up_manifests_load(const char *dir, struct up_manifests **ret, char *err, size_t err_len) _wur_;
struct up_manifests *up_manifests_free(struct up_manifests *m);
void up_manifests_freep(struct up_manifests **m);

/* The addon source read at load time (manifests/mitm/filter.py). */
const char *up_manifests_addon(const struct up_manifests *m);
/* The addon's i-th file (0 = filter.py; the modules it loads from its folder follow) and its
 * name in `*name`, or NULL past the last. */
const char *up_manifests_addon_file(const struct up_manifests *m, size_t i, const char **name);
/* The agent container's NO_PROXY (manifests/agent-pod.yaml), or NULL. */
const char *up_manifests_agent_no_proxy(const struct up_manifests *m);

/*
 * Renders a session: `*objects` becomes a new array, in apply order: the Namespace first,
 * then ConfigMaps and Secrets, NetworkPolicies, the mitm Pod and Service, with SSH keys the
 * ssh-agent holder Pod and Service, and the agent Pod last. A spec that does not hold up (a bad id,
 * a relative cwd, a clash of names) is refused with -EINVAL and a sentence in `err` naming the
 * field.
 */
int up_manifests_render(const struct up_manifests *tpl, const struct up_session_spec *spec,
			json_t **objects, char *err, size_t err_len) _wur_;

/* agent-uplink-system: its Namespace, the registry Deployment and Service. */
int up_manifests_render_system(const struct up_manifests *tpl, const struct up_system_spec *sys,
			       json_t **objects, char *err, size_t err_len) _wur_;

/*
 * What --dry-run shows where a run puts a value only the cluster gives (README, `uplink run`):
 * the agent pod's hostAliases entries, filled once the Services have their cluster IPs.
 */
#define UP_MANIFEST_MITM_IP_PLACEHOLDER	     "<mitm-cluster-ip>"
#define UP_MANIFEST_SSH_AGENT_IP_PLACEHOLDER "<ssh-agent-cluster-ip>"

/* Adds (or replaces) the agent pod's hostAliases entry mapping "mitm" to `ip`: an IP
 * address, or UP_MANIFEST_MITM_IP_PLACEHOLDER. */
int up_manifests_set_mitm_ip(json_t *objects, const char *ip, char *err, size_t err_len) _wur_;
/* The same for "ssh-agent", the holder's Service (only with --ssh-key-dir keys); its
 * placeholder is UP_MANIFEST_SSH_AGENT_IP_PLACEHOLDER. */
int up_manifests_set_ssh_agent_ip(json_t *objects, const char *ip, char *err, size_t err_len) _wur_;

/*
 * The objects as one Kubernetes List (what --dry-run prints): a new reference. Unless
 * `show_secrets`, every Secret's data value reads "<redacted: N bytes>".
 */
json_t *up_manifests_list(const json_t *objects, bool show_secrets);
/* The rendered object of that kind and name (borrowed), or NULL. */
json_t *up_manifests_find(const json_t *objects, const char *kind, const char *name);
/* Replaces one key of a rendered Secret's data (base64 of `data`); for refreshes. */
int up_manifests_secret_put(json_t *secret, const char *key, const char *data, size_t len) _wur_;
/* One key of a Secret's data, decoded and NUL-terminated (*ret freed with up_free_secret(*ret,
 * *len)); -ENOENT without it, -EINVAL when it is not base64. */
int up_manifests_secret_get(const json_t *secret, const char *key, char **ret, size_t *len) _wur_;
/*
 * A Secret read back from the cluster, made fit to be applied again (server-side apply):
 * a copy without what the server owns (resourceVersion, uid, managedFields,
 * creationTimestamp, ...); labels, annotations and data stay. NULL if it is not a Secret.
 */
json_t *up_manifests_secret_reapply(const json_t *secret);
