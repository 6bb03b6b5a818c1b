/* SPDX-License-Identifier: Apache-2.0 */
/* The templates (manifests.h): read once at start-up, each checked for the paths code fills. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "fileio.h"
#include "knobs.h"
#include "manifests-private.h"
#include "yaml-json.h"

/* filter.py loads the others by path from its own folder (manifests/mitm/README.md). */
const char *const manifests_addon_files[MANIFESTS_ADDON_FILES] = {
	"filter.py",	 "uplink_rules.py",   "uplink_aws.py", "uplink_io.py",
	"uplink_net.py", "uplink_control.py", "uplink_ask.py",
};

const struct manifests_template manifests_templates[_TPL_MAX] = {
	[TPL_NAMESPACE] = {"namespace.yaml", "Namespace", {"metadata.labels"}},
	[TPL_SECRET] = {"secret.yaml", "Secret", {"metadata.labels"}},
	[TPL_CONFIGMAP] = {"configmap.yaml", "ConfigMap", {"metadata.labels"}},
	[TPL_NP_DENY] = {"netpol-default-deny.yaml", "NetworkPolicy", {"metadata.labels"}},
	[TPL_NP_AGENT] = {"netpol-agent-egress.yaml",
			  "NetworkPolicy",
			  {"metadata.labels", "spec.egress"}},
	[TPL_NP_AGENT_DNS] = {"agent-egress-dns.yaml", NULL, {"to", "ports"}},
	[TPL_NP_MITM] = {"netpol-mitm.yaml", "NetworkPolicy", {"metadata.labels"}},
	[TPL_MITM_POD] = {"mitm-pod.yaml",
			  "Pod",
			  {"metadata.labels", "spec.containers.0.volumeMounts", "spec.volumes"}},
	[TPL_MITM_SVC] = {"mitm-service.yaml", "Service", {"metadata.labels"}},
	[TPL_AGENT_POD] = {"agent-pod.yaml",
			   "Pod",
			   {"metadata.labels", "spec.containers.0.env",
			    "spec.containers.0.volumeMounts", "spec.volumes"}},
	[TPL_SSH_POD] = {"ssh-agent-pod.yaml",
			 "Pod",
			 {"metadata.labels", "spec.securityContext",
			  "spec.containers.0.securityContext"}},
	[TPL_SSH_SVC] = {"ssh-agent-service.yaml", "Service", {"metadata.labels"}},
	[TPL_NP_SSH] = {"netpol-ssh-agent.yaml", "NetworkPolicy", {"metadata.labels"}},
	[TPL_NP_AGENT_SSH] = {"agent-egress-ssh-agent.yaml", NULL, {"to", "ports"}},
	[TPL_SSH_RELAY] = {"ssh-agent-relay.yaml",
			   NULL,
			   {"name", "securityContext", "volumeMounts"}},
	[TPL_SYS_NAMESPACE] = {"system-namespace.yaml", "Namespace", {"metadata"}},
	[TPL_REGISTRY] = {"registry-deployment.yaml",
			  "Deployment",
			  {"spec.template.spec.containers.0"}},
	[TPL_REGISTRY_SVC] = {"registry-service.yaml", "Service", {"metadata"}},
};

int up_manifests_default_dir(char *buf, size_t len)
{
	const char *env = up_knobs()->data_dir;
	int n = snprintf(buf, len, "%s/manifests", env && *env ? env : UP_PKGDATADIR);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static int load_one(struct up_manifests *m, const char *dir, enum tpl t, char *err, size_t len)
{
	_cleanup_(freep) char *text = NULL;
	char path[PATH_MAX], yerr[256];
	size_t n;
	int r;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, manifests_templates[t].file) >=
	    sizeof(path))
		return manifests_failf(err, len, "template folder %s: path too long", dir);
	r = up_read_file(path, UP_MAX_TEMPLATE_SIZE, &text, &n);
	if (r < 0)
		return snprintf(err, len, "cannot read template %s: %s", path, strerror(-r)), r;
	r = up_yaml_load(text, n, &m->tpl[t], yerr, sizeof(yerr));
	if (r < 0)
		return manifests_failf(err, len, "template %s is not valid YAML: %s", path, yerr);
	const char *kind = json_string_value(json_object_get(m->tpl[t], "kind"));
	if (!json_is_object(m->tpl[t]) ||
	    (manifests_templates[t].kind && (!kind || !streq(kind, manifests_templates[t].kind))))
		return manifests_failf(err, len, "template %s is not a %s", path,
				       manifests_templates[t].kind ? manifests_templates[t].kind
								   : "mapping");
	for (size_t i = 0;
	     i < ELEMENTSOF(manifests_templates[t].need) && manifests_templates[t].need[i]; i++)
		if (!manifests_dig(m->tpl[t], manifests_templates[t].need[i]))
			return manifests_failf(err, len, "template %s lacks %s", path,
					       manifests_templates[t].need[i]);
	return 0;
}

static int load_addon_file(struct up_manifests *m, const char *dir, size_t i, char *err,
			   size_t err_len)
{
	char path[PATH_MAX];
	size_t n;
	int r;

	if ((size_t)snprintf(path, sizeof(path), "%s/mitm/%s", dir, manifests_addon_files[i]) >=
	    sizeof(path))
		return manifests_failf(err, err_len, "template folder %s: path too long", dir);
	r = up_read_file(path, UP_MAX_ADDON_SOURCE, &m->addon[i], &n);
	if (r < 0)
		return snprintf(err, err_len,
				"cannot read the mitm addon %s: %s; reinstall uplink (its files "
				"ship together)",
				path, strerror(-r)),
		       r;
	return 0;
}

int up_manifests_load(const char *dir, struct up_manifests **ret, char *err, size_t err_len)
{
	_cleanup_(up_manifests_freep) struct up_manifests *m = NULL;
	char def[PATH_MAX];
	int r;

	if (!dir) {
		if (up_manifests_default_dir(def, sizeof(def)) < 0)
			return manifests_failf(err, err_len, "$UPLINK_DATA_DIR is too long");
		dir = def;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (int t = 0; t < _TPL_MAX; t++)
		if ((r = load_one(m, dir, (enum tpl)t, err, err_len)) < 0)
			return r;
	for (size_t i = 0; i < MANIFESTS_ADDON_FILES; i++)
		if ((r = load_addon_file(m, dir, i, err, err_len)) < 0)
			return r;
	*ret = TAKE_PTR(m);
	return 0;
}

struct up_manifests *up_manifests_free(struct up_manifests *m)
{
	if (!m)
		return NULL;
	for (int t = 0; t < _TPL_MAX; t++)
		json_decref(m->tpl[t]);
	for (size_t i = 0; i < MANIFESTS_ADDON_FILES; i++)
		free(m->addon[i]);
	free(m);
	return NULL;
}

UP_DEFINE_FREEP(struct up_manifests, up_manifests_free)

const char *up_manifests_addon(const struct up_manifests *m)
{
	return m->addon[0];
}

const char *up_manifests_addon_file(const struct up_manifests *m, size_t i, const char **name)
{
	if (i >= MANIFESTS_ADDON_FILES)
		return NULL;
	*name = manifests_addon_files[i];
	return m->addon[i];
}

const char *up_manifests_agent_no_proxy(const struct up_manifests *m)
{
	json_t *e;
	size_t i;

	json_array_foreach (manifests_dig(m->tpl[TPL_AGENT_POD], "spec.containers.0.env"), i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		if (name && streq(name, "NO_PROXY"))
			return json_string_value(json_object_get(e, "value"));
	}
	return NULL;
}
