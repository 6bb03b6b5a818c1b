/* SPDX-License-Identifier: Apache-2.0 */
/* Rendered objects after the fact (manifests.h): the Services' IPs, --dry-run's List, and
 * the Secrets a renewal reads and writes. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "fileio.h"
#include "manifests-private.h"

/* The agent pod's hostAliases entry for `host`, added or replaced; the others stay. `ip` is
 * an address or, for --dry-run, the host's placeholder. */
static int set_alias(json_t *objects, const char *host, const char *placeholder, const char *ip,
		     char *err, size_t err_len)
{
	json_t *pod = json_array_get(objects, json_array_size(objects) - 1), *aliases, *a;
	const char *name = json_string_value(manifests_dig(pod, "metadata.name"));
	size_t i;

	if (!name || !streq(name, "agent"))
		return manifests_failf(err, err_len, "the last object is not the agent pod");
	if (!manifests_is_ip(ip) && !(ip && streq(ip, placeholder)))
		return manifests_failf(err, err_len, "%s cluster IP '%s' is not an IP address",
				       host, ip ? ip : "(null)");
	aliases = manifests_dig(pod, "spec.hostAliases");
	if (!aliases &&
	    manifests_put(json_object_get(pod, "spec"), "hostAliases", aliases = json_array()) < 0)
		return -ENOMEM;
	json_array_foreach (aliases, i, a)
		if (streq(json_string_value(manifests_dig(a, "hostnames.0")), host))
			return manifests_put(a, "ip", json_string(ip));
	return manifests_push(aliases, json_pack("{s:s, s:[s]}", "ip", ip, "hostnames", host));
}

int up_manifests_set_mitm_ip(json_t *objects, const char *ip, char *err, size_t err_len)
{
	return set_alias(objects, "mitm", UP_MANIFEST_MITM_IP_PLACEHOLDER, ip, err, err_len);
}

int up_manifests_set_ssh_agent_ip(json_t *objects, const char *ip, char *err, size_t err_len)
{
	return set_alias(objects, UP_MANIFEST_SSH_AGENT, UP_MANIFEST_SSH_AGENT_IP_PLACEHOLDER, ip,
			 err, err_len);
}

/* "<redacted: N bytes>" for base64 text of N bytes. */
static json_t *redacted(const char *b64text)
{
	size_t n = strlen(b64text), bytes = n / 4 * 3;
	char buf[64];

	if (n >= 1 && b64text[n - 1] == '=')
		bytes--;
	if (n >= 2 && b64text[n - 2] == '=')
		bytes--;
	(void)snprintf(buf, sizeof(buf), "<redacted: %zu bytes>", bytes);
	return json_string(buf);
}

json_t *up_manifests_list(const json_t *objects, bool show_secrets)
{
	json_t *items = json_deep_copy(objects), *o, *v;
	const char *k;
	size_t i;

	if (!items)
		return NULL;
	json_array_foreach (items, i, o) {
		json_t *data = json_object_get(o, "data");
		const char *kind = json_string_value(json_object_get(o, "kind"));
		if (show_secrets || !kind || !streq(kind, "Secret"))
			continue;
		json_object_foreach (data, k, v)
			if (json_object_set_new(
				    data, k,
				    redacted(json_is_string(v) ? json_string_value(v) : "")) < 0)
				return json_decref(items), NULL;
	}
	return json_pack("{s:s, s:s, s:{}, s:o}", "apiVersion", "v1", "kind", "List", "metadata",
			 "items", items);
}

json_t *up_manifests_find(const json_t *objects, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach (objects, i, o) {
		const char *k = json_string_value(json_object_get(o, "kind"));
		const char *n = json_string_value(manifests_dig(o, "metadata.name"));
		if (k && n && streq(k, kind) && streq(n, name))
			return o;
	}
	return NULL;
}

int up_manifests_secret_get(const json_t *secret, const char *key, char **ret, size_t *len)
{
	const char *in = json_string_value(json_object_get(json_object_get(secret, "data"), key));

	if (!in)
		return -ENOENT;
	return up_base64_decode(in, strlen(in), ret, len);
}

json_t *up_manifests_secret_reapply(const json_t *secret)
{
	static const char *const server_owned[] = {
		"resourceVersion", "uid",      "managedFields",	    "creationTimestamp",
		"generation",	   "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"};
	const char *kind = json_string_value(json_object_get(secret, "kind"));
	json_t *o, *md;

	if ((kind && !streq(kind, "Secret")) || !json_is_object(json_object_get(secret, "data")) ||
	    !json_is_object(json_object_get(secret, "metadata")))
		return NULL;
	o = json_deep_copy(secret);
	md = json_object_get(o, "metadata");
	if (!o || json_object_set_new(o, "apiVersion", json_string("v1")) < 0 ||
	    json_object_set_new(o, "kind", json_string("Secret")) < 0) {
		json_decref(o);
		return NULL;
	}
	for (size_t i = 0; i < ELEMENTSOF(server_owned); i++)
		(void)json_object_del(md, server_owned[i]);
	(void)json_object_del(o, "status");
	return o;
}

int up_manifests_secret_put(json_t *secret, const char *key, const char *data, size_t len)
{
	json_t *d = json_object_get(secret, "data");
	json_t *old = json_object_get(d, key);

	/* The old value held a credential too: wiped before it goes. */
	if (json_is_string(old))
		explicit_bzero((char *)json_string_value(old), json_string_length(old));
	return d ? manifests_data_put(secret, true, key, data, len) : -EINVAL;
}
