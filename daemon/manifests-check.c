/* SPDX-License-Identifier: Apache-2.0 */
/* Checking a session spec before rendering it (manifests.h): every field the objects take. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "manifests-private.h"

static bool is_hex_id(const char *s)
{
	if (!s || strlen(s) != UP_SESSION_ID_LEN)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
			return false;
	return true;
}

#define LOWER_DIGITS "abcdefghijklmnopqrstuvwxyz0123456789"

/* 1 to `max` characters of `chars`, the first and the last a letter or a digit. */
static bool is_name(const char *s, size_t max, const char *chars)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= max && isalnum((unsigned char)s[0]) &&
	       isalnum((unsigned char)s[n - 1]) && strspn(s, chars) == n;
}

/* DNS-1123 label: what volume, Secret and ConfigMap names here must be. */
static bool is_dns_label(const char *s)
{
	return is_name(s, 63, LOWER_DIGITS "-");
}

/* DNS-1123 subdomain (runtime class names). */
static bool is_dns_subdomain(const char *s)
{
	return is_name(s, 253, LOWER_DIGITS "-.");
}

static bool is_label_value(const char *s)
{
	return is_name(s, 63, LOWER_DIGITS "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.");
}

/* Env names and config keys as the API server takes them: [-._a-zA-Z0-9]+. */
static bool is_key(const char *s, bool env)
{
	if (!s || !*s || strlen(s) > 253 || (env && isdigit((unsigned char)*s)))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-._", *s))
			return false;
	return true;
}

static bool is_abs(const char *p)
{
	return p && p[0] == '/' && !strstr(p, "/../") && strlen(p) < PATH_MAX;
}

static bool reserved_volume(const char *n)
{
	static const char *const names[] = {"uplink-ca",
					    UP_MANIFEST_ADDON_CONFIGMAP,
					    UP_MANIFEST_RULES_SECRET,
					    UP_MANIFEST_CERTS_SECRET,
					    GIT_SECRET,
					    UPSTREAM_CA_SECRET,
					    UP_KUBE_CONFIGMAP,
					    UP_KUBE_CERTS_SECRET,
					    UP_MANIFEST_SSH_KEYS_SECRET,
					    UP_MANIFEST_SSH_PUB_SECRET,
					    SSH_SOCK_VOLUME,
					    AWS_AGENT_CONFIGMAP,
					    AWS_MITM_SECRET};

	if (startswith(n, MOUNT_PREFIX))
		return true;

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (streq(n, names[i]))
			return true;
	return false;
}

static int check_volume(const struct up_session_spec *s, size_t i, char *err, size_t len)
{
	const struct up_agent_volume *v = &s->contrib.volumes[i];

	if (!is_dns_label(v->name) || reserved_volume(v->name))
		return manifests_failf(err, len,
				       "agent volume %zu: name '%s' is not a DNS label or is taken",
				       i, v->name ? v->name : "(null)");
	for (size_t j = 0; j < i; j++)
		if (streq(s->contrib.volumes[j].name, v->name))
			return manifests_failf(err, len, "agent volume '%s' is given twice",
					       v->name);
	if (v->mount_path && !is_abs(v->mount_path))
		return manifests_failf(err, len,
				       "agent volume '%s': mount path '%s' is not absolute",
				       v->name, v->mount_path);
	if (v->kind == UP_AGENT_VOL_HOSTPATH && (!is_abs(v->host_path) || !v->mount_path))
		return manifests_failf(
			err, len,
			"agent volume '%s': a hostPath needs an absolute host path and a "
			"mount path",
			v->name);
	if (v->kind == UP_AGENT_VOL_EMPTYDIR && !v->mount_path)
		return manifests_failf(
			err, len, "agent volume '%s': an emptyDir needs a mount path", v->name);
	for (size_t j = 0; j < v->n_files; j++) {
		const struct up_agent_file *f = &v->files[j];
		if (!is_key(f->key, false) || streq(f->key, ".") || streq(f->key, ".."))
			return manifests_failf(err, len,
					       "agent volume '%s': '%s' is not a valid key",
					       v->name, f->key ? f->key : "(null)");
		if (f->mount_path && !is_abs(f->mount_path))
			return manifests_failf(err, len,
					       "agent volume '%s': mount path '%s' is not absolute",
					       v->name, f->mount_path);
	}
	return 0;
}

static int check_contrib(const struct up_session_spec *s, char *err, size_t len)
{
	int r;

	for (size_t i = 0; i < s->contrib.n_env; i++)
		if (!is_key(s->contrib.env[i].name, true) || !s->contrib.env[i].value)
			return manifests_failf(
				err, len, "agent env %zu: '%s' is not a valid variable", i,
				s->contrib.env[i].name ? s->contrib.env[i].name : "(null)");
	for (size_t i = 0; i < s->contrib.n_volumes; i++)
		if ((r = check_volume(s, i, err, len)) < 0)
			return r;
	return 0;
}

/* "10.0.0.0/8", "fd00::/64": an address and a prefix length that fits it. */
static bool is_cidr(const char *s)
{
	char buf[64], *slash, *end;
	unsigned char addr[16];
	long bits;
	int max;

	if (!s || (size_t)snprintf(buf, sizeof(buf), "%s", s) >= sizeof(buf) ||
	    !(slash = strchr(buf, '/')))
		return false;
	*slash = '\0';
	max = inet_pton(AF_INET, buf, addr) == 1    ? 32
	      : inet_pton(AF_INET6, buf, addr) == 1 ? 128
						    : -1;
	bits = strtol(slash + 1, &end, 10);
	return max > 0 && isdigit((unsigned char)slash[1]) && !*end && bits >= 0 && bits <= max;
}

static int check_extras(const struct up_session_extras *x, char *err, size_t len)
{
	json_t *v;
	size_t i;

	json_array_foreach (x->mounts, i, v) {
		const char *p = json_string_value(json_object_get(v, "path"));
		if (!is_abs(p) || !json_is_boolean(json_object_get(v, "dir")) ||
		    !json_is_boolean(json_object_get(v, "read_only")))
			return manifests_failf(err, len,
					       "host mount %zu: '%s' is not an absolute path", i,
					       p ? p : "(null)");
	}
	json_array_foreach (x->ssh_cidrs, i, v)
		if (!is_cidr(json_string_value(v)))
			return manifests_failf(err, len, "SSH CIDR %zu is not a network address",
					       i);
	if (x->mitm_ca_pem && !strstr(x->mitm_ca_pem, "-----BEGIN CERTIFICATE-----"))
		return manifests_failf(err, len,
				       "the mitm's extra upstream CAs hold no PEM certificate");
	for (size_t k = 0; x->kube && k < x->kube->n; k++) {
		char key[300];
		(void)snprintf(key, sizeof(key), "%s.pem", x->kube->ctx[k].host);
		if (x->kube->ctx[k].client_pem && !is_key(key, false))
			return manifests_failf(err, len,
					       "kube context '%s': '%s' is not a valid Secret key",
					       x->kube->ctx[k].name, key);
	}
	for (size_t j = 0; j < x->ssh.n_keys + x->ssh.n_pub; j++) {
		const struct up_ssh_file *f =
			j < x->ssh.n_keys ? &x->ssh.keys[j] : &x->ssh.pub[j - x->ssh.n_keys];
		if (!is_key(f->name, false) || streq(f->name, ".") || streq(f->name, "..") ||
		    !f->data)
			return manifests_failf(err, len, "SSH file '%s' is not a valid key",
					       f->name ? f->name : "(null)");
	}
	if (x->ssh.n_pub > 0 && x->ssh.n_keys == 0)
		return manifests_failf(err, len, "SSH public files without a private key");
	return 0;
}

/* The spec's names: each its check and the sentence that quotes it when wrong. */
static int check_names(const struct up_session_spec *s, char *err, size_t len)
{
	const struct {
		const char *what, *value;
		bool (*ok)(const char *v);
		const char *wrong;
	} names[] = {
		{"session id", s->id, is_hex_id, "is not 12 lowercase hex digits"},
		{"owner", s->owner, is_label_value, "is not a valid label value"},
		{"cwd", s->cwd, is_abs, "is not an absolute path"},
		{"agent name", s->agent, is_label_value, "is not valid"},
	};

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (!names[i].ok(names[i].value))
			return manifests_failf(err, len, "%s '%s' %s", names[i].what,
					       names[i].value ? names[i].value : "(null)",
					       names[i].wrong);
	return 0;
}

int manifests_check_spec(const struct up_session_spec *s, char *err, size_t len)
{
	const char *rc = s->agent_runtime_class;

	if (check_names(s, err, len) < 0)
		return -EINVAL;
	if (s->created_at <= 0 || s->expires_at <= s->created_at)
		return manifests_failf(err, len, "the session must expire after it was created");
	if (!s->user || !*s->user || !is_abs(s->home))
		return manifests_failf(err, len, "the host user and an absolute home are required");
	if (!s->agent_image || !*s->agent_image || !s->mitm_image || !*s->mitm_image)
		return manifests_failf(err, len, "the agent and mitmproxy images are required");
	if ((rc && *rc && !is_dns_subdomain(rc)) ||
	    (s->mitm_runtime_class && *s->mitm_runtime_class &&
	     !is_dns_subdomain(s->mitm_runtime_class)))
		return manifests_failf(err, len, "a runtime class name is not a DNS subdomain");
	if (!json_is_object(s->rules))
		return manifests_failf(err, len, "the proxy rules document is missing");
	if (!s->ca_cert_pem || !startswith(s->ca_cert_pem, "-----BEGIN CERTIFICATE-----") ||
	    !s->ca_key_pem || !strstr(s->ca_key_pem, "PRIVATE KEY-----"))
		return manifests_failf(err, len, "the session CA certificate and key are required");
	if (s->mitm_cluster_ip && !manifests_is_ip(s->mitm_cluster_ip))
		return manifests_failf(err, len, "mitm cluster IP '%s' is not an IP address",
				       s->mitm_cluster_ip);
	if (s->ssh_agent_cluster_ip && !manifests_is_ip(s->ssh_agent_cluster_ip))
		return manifests_failf(err, len, "ssh-agent cluster IP '%s' is not an IP address",
				       s->ssh_agent_cluster_ip);
	if (manifests_has_ssh(s) && s->uid == 0)
		return manifests_failf(err, len, "the ssh-agent holder pod cannot run as root");
	if (s->extras && check_extras(s->extras, err, len) < 0)
		return -EINVAL;
	return check_contrib(s, err, len);
}
