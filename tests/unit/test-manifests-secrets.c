/* SPDX-License-Identifier: Apache-2.0 */
/* Where secrets may go (the CA key, the rules' sentinels, the SSH key: only to the Secrets
 * the mitm or the ssh-agent holder mounts), and the specs refused because they would break
 * the pods' posture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ca.h"
#include "fileio.h"
#include "manifests.h"
#include "knobs.h"
#include "manifests-fixture.h"

/* An object's JSON plus the decoded value of every base64 field, to search for secrets. */
static char *haystack(json_t *o)
{
	char *dump = json_dumps(o, JSON_COMPACT);
	size_t len = strlen(dump) + 1;
	const char *fields[] = {"data", "binaryData"};

	for (size_t f = 0; f < 2; f++) {
		const char *k;
		json_t *v;
		if (f == 0 && !streq(json_string_value(at(o, "kind")), "Secret"))
			continue;
		json_object_foreach (json_object_get(o, fields[f]), k, v) {
			const char *b = json_string_value(v);
			size_t bl = strlen(b);
			dump = realloc(dump, len + bl + 2);
			int n = EVP_DecodeBlock((unsigned char *)dump + len,
						(const unsigned char *)b, (int)bl);
			assert_true(n >= 0);
			for (size_t pad = bl; pad > 0 && b[pad - 1] == '='; pad--)
				n--; /* EVP_DecodeBlock counts padding as zero bytes */
			dump[len + (size_t)n] = '\0';
			memset(dump + len - 1, '\n', 1);
			len += (size_t)n + 1;
		}
	}
	return dump;
}

/* Names (Kind/name) of the objects holding `needle`, comma-separated. */
static void holders(json_t *objs, const char *needle, char *out, size_t len)
{
	json_t *o;
	size_t i;

	out[0] = '\0';
	json_array_foreach (objs, i, o) {
		char *h = haystack(o);
		if (strstr(h, needle))
			(void)snprintf(out + strlen(out), len - strlen(out), "%s%s/%s",
				       out[0] ? "," : "", json_string_value(at(o, "kind")),
				       json_string_value(at(o, "metadata.name")));
		free(h);
	}
}

static void test_ca_key_only_in_mitm_secret(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);
	char where[512], line[80];
	const char *body = strchr(ca->key_pem, '\n') + 1; /* first line of the key's base64 */

	(void)snprintf(line, sizeof(line), "%.*s", (int)(strchr(body, '\n') - body), body);
	assert_true(strlen(line) > 40);
	holders(objs, line, where, sizeof(where));
	assert_string_equal(where, "Secret/mitm-certs");
	holders(objs, "PRIVATE KEY", where, sizeof(where));
	assert_string_equal(where, "Secret/mitm-certs");
	/* the certificate reaches the agent (ConfigMap) and the mitm */
	body = strchr(ca->cert_pem, '\n') + 1;
	(void)snprintf(line, sizeof(line), "%.*s", (int)(strchr(body, '\n') - body), body);
	holders(objs, line, where, sizeof(where));
	assert_string_equal(where, "Secret/mitm-certs,ConfigMap/uplink-ca");
	json_decref(objs);
}

static void test_sentinels_only_in_rules_secret(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);
	char where[512];

	holders(objs, SENTINEL, where, sizeof(where));
	assert_string_equal(where, "Secret/rules-json");
	/* and the agent pod mounts no Secret that holds one */
	json_t *vol, *pod = find(objs, "Pod", "agent");
	size_t i;
	json_array_foreach (at(pod, "spec.volumes"), i, vol) {
		json_t *sec = at(vol, "secret.secretName");
		if (!sec)
			continue;
		char *h = haystack(find(objs, "Secret", json_string_value(sec)));
		assert_null(strstr(h, SENTINEL));
		assert_null(strstr(h, "PRIVATE KEY"));
		free(h);
	}
	json_decref(objs);
}

/* The control listener's token: in the rules Secret (mounted by the mitm alone, which reads it
 * at the path its option names) and in no other object, the agent pod's included. */
static void test_control_token_only_in_rules_secret(void **state)
{
	static const char token[] =
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct up_session_spec s = base_spec();
	char where[512];
	json_t *objs, *arg, *vol;
	size_t i;
	bool set = false;

	s.control_token = token;
	objs = render(&s);
	holders(objs, token, where, sizeof(where));
	assert_string_equal(where, "Secret/rules-json");
	json_array_foreach (at(find(objs, "Pod", "mitm"), "spec.containers[0].args"), i, arg)
		set |= streq(json_string_value(arg), "uplink_control_token=/rules/control-token");
	assert_true(set);
	json_array_foreach (at(find(objs, "Pod", "agent"), "spec.volumes"), i, vol) {
		const char *name = json_string_value(at(vol, "secret.secretName"));
		assert_false(name && streq(name, "rules-json"));
	}
	json_decref(objs);
	/* without a token, no listener */
	s.control_token = NULL;
	objs = render(&s);
	json_array_foreach (at(find(objs, "Pod", "mitm"), "spec.containers[0].args"), i, arg)
		assert_null(strstr(json_string_value(arg), "uplink_control_token"));
	json_decref(objs);
}

static void test_mitm_secrets_content(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);
	char *h = haystack(find(objs, "Secret", "mitm-certs"));
	char *r = haystack(find(objs, "Secret", "rules-json"));

	assert_non_null(strstr(h, "-----BEGIN DH PARAMETERS-----"));
	/* mitmproxy-ca.pem: key first, then the certificate */
	char *key = strstr(h, "-----BEGIN PRIVATE KEY-----");
	assert_non_null(key);
	assert_non_null(strstr(key, "-----BEGIN CERTIFICATE-----"));
	assert_non_null(strstr(r, "\"Authorization\":\"Bearer " SENTINEL "-oauth\""));
	assert_string_equal(
		json_string_value(at(find(objs, "ConfigMap", "uplink-ca"), "data.ca~crt")),
		ca->cert_pem);
	assert_string_equal(
		json_string_value(at(find(objs, "ConfigMap", "mitm-addon"), "data.filter~py")),
		up_manifests_addon(tpl));
	/* every file of the addon, each under its own name, and nothing else */
	json_t *addon = json_object_get(find(objs, "ConfigMap", "mitm-addon"), "data");
	const char *name, *text;
	size_t n_files = 0;
	for (; (text = up_manifests_addon_file(tpl, n_files, &name)); n_files++)
		assert_string_equal(json_string_value(json_object_get(addon, name)), text);
	assert_int_equal(n_files, 7);
	assert_int_equal(json_object_size(addon), n_files);
	free(h);
	free(r);
	json_decref(objs);
}

struct bad {
	const char *what;
	void (*spoil)(struct up_session_spec *s);
	const char *message;
};

static const struct up_env clash_env[] = {{"HTTPS_PROXY", "http://evil:1"}};
static const struct up_agent_volume reserved_vol[] = {
	{.kind = UP_AGENT_VOL_EMPTYDIR, .name = "uplink-ca", .mount_path = "/x"},
};
static const struct up_agent_volume rel_vol[] = {
	{.kind = UP_AGENT_VOL_HOSTPATH, .name = "cwd", .host_path = "src", .mount_path = "/src"},
};

static void upper_id(struct up_session_spec *s)
{
	s->id = "0123456789AB";
}
static void short_id(struct up_session_spec *s)
{
	s->id = "0123";
}
static void bad_owner(struct up_session_spec *s)
{
	s->owner = "a b";
}
static void rel_cwd(struct up_session_spec *s)
{
	s->cwd = "src/p";
}
static void expired(struct up_session_spec *s)
{
	s->expires_at = s->created_at;
}
static void no_rules(struct up_session_spec *s)
{
	s->rules = NULL;
}
static void no_key(struct up_session_spec *s)
{
	s->ca_key_pem = NULL;
}
static void bad_ip(struct up_session_spec *s)
{
	s->mitm_cluster_ip = "mitm";
}
static void bad_rc(struct up_session_spec *s)
{
	s->agent_runtime_class = "Kata_CLH";
}
static void env_clash(struct up_session_spec *s)
{
	s->contrib.env = clash_env;
}
static void vol_reserved(struct up_session_spec *s)
{
	s->contrib.volumes = reserved_vol;
	s->contrib.n_volumes = 1;
}
static void vol_relative(struct up_session_spec *s)
{
	s->contrib.volumes = rel_vol;
	s->contrib.n_volumes = 1;
}

static const struct up_agent_volume mount_vol[] = {
	{.kind = UP_AGENT_VOL_EMPTYDIR, .name = "mount-0", .mount_path = "/x"},
};
static const struct up_agent_volume git_vol[] = {
	{.kind = UP_AGENT_VOL_EMPTYDIR, .name = "git-config", .mount_path = "/x"},
};
static struct up_session_extras bad_x;
static void vol_mount(struct up_session_spec *s)
{
	s->contrib.volumes = mount_vol;
	s->contrib.n_volumes = 1;
}
static void vol_git(struct up_session_spec *s)
{
	s->contrib.volumes = git_vol;
	s->contrib.n_volumes = 1;
}
static void rel_mount(struct up_session_spec *s)
{
	json_decref(bad_x.mounts);
	bad_x = (struct up_session_extras){
		.mounts = json_pack("[{s:s, s:b, s:b}]", "path", "src", "dir", 1, "read_only", 0)};
	s->extras = &bad_x;
}
static void bad_cidr(struct up_session_spec *s)
{
	json_decref(bad_x.mounts);
	bad_x = (struct up_session_extras){
		.ssh_cidrs = json_pack("[s, s]", "10.0.0.0/8", "10.0.0.0/33")};
	s->extras = &bad_x;
}
static void bad_ca(struct up_session_spec *s)
{
	json_decref(bad_x.ssh_cidrs);
	bad_x = (struct up_session_extras){.mitm_ca_pem = (char *)"hello"};
	s->extras = &bad_x;
}

static char ssh_key_name[] = "id_ed25519", ssh_pub_name[] = "id_ed25519.pub";
/* A line of the private key: found decoded wherever the key went, whatever its encoding. */
#define SSH_KEY_LINE "b3BlbnNzaC1rZXktdjEAAAAAc2VudGluZWwtc3NoLWtleQ"
static char ssh_key_data[] = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n" SSH_KEY_LINE "\n"
			     "-----END OPENSSH PRIVATE KEY-----\n";
static char ssh_pub_data[] = "ssh-ed25519 AAAAC3 u@h\n";
static struct up_ssh_file ssh_key_files[] = {
	{ssh_key_name, ssh_key_data, sizeof(ssh_key_data) - 1}};
static struct up_ssh_file ssh_pub_files[] = {
	{ssh_pub_name, ssh_pub_data, sizeof(ssh_pub_data) - 1}};
static struct up_session_extras ssh_x = {
	.ssh = {.keys = ssh_key_files, .n_keys = 1, .pub = ssh_pub_files, .n_pub = 1},
};
static const struct up_env ssh_clash_env[] = {{"SSH_AUTH_SOCK", "/tmp/mine"}};
static const struct up_agent_volume ssh_vol[] = {
	{.kind = UP_AGENT_VOL_EMPTYDIR, .name = "ssh-sock", .mount_path = "/x"},
};
static void ssh_root(struct up_session_spec *s)
{
	s->extras = &ssh_x;
	s->uid = 0;
}
static void ssh_env(struct up_session_spec *s)
{
	s->extras = &ssh_x;
	s->contrib.env = ssh_clash_env;
}
static void ssh_vol_taken(struct up_session_spec *s)
{
	s->contrib.volumes = ssh_vol;
	s->contrib.n_volumes = 1;
}
static void ssh_bad_name(struct up_session_spec *s)
{
	static char bad_name[] = "my key";
	static struct up_ssh_file bad[] = {{bad_name, ssh_key_data, 3}};
	static struct up_session_extras x = {.ssh = {.keys = bad, .n_keys = 1}};
	s->extras = &x;
}
static void ssh_bad_ip(struct up_session_spec *s)
{
	s->extras = &ssh_x;
	s->ssh_agent_cluster_ip = "ssh";
}

static const struct bad bad_specs[] = {
	{"SSH as root", ssh_root, "the ssh-agent holder pod cannot run as root"},
	{"SSH_AUTH_SOCK clash", ssh_env, "agent env SSH_AUTH_SOCK would replace uplink's own"},
	{"reserved ssh volume", ssh_vol_taken,
	 "agent volume 0: name 'ssh-sock' is not a DNS label or is taken"},
	{"SSH file name", ssh_bad_name, "SSH file 'my key' is not a valid key"},
	{"SSH cluster IP", ssh_bad_ip, "ssh-agent cluster IP 'ssh' is not an IP address"},
	{"reserved mount volume", vol_mount,
	 "agent volume 0: name 'mount-0' is not a DNS label or is taken"},
	{"reserved git volume", vol_git,
	 "agent volume 0: name 'git-config' is not a DNS label or is taken"},
	{"relative mount", rel_mount, "host mount 0: 'src' is not an absolute path"},
	{"bad CIDR", bad_cidr, "SSH CIDR 1 is not a network address"},
	{"CA without PEM", bad_ca, "the mitm's extra upstream CAs hold no PEM certificate"},
	{"upper-case id", upper_id, "session id '0123456789AB' is not 12 lowercase hex digits"},
	{"short id", short_id, "session id '0123' is not 12 lowercase hex digits"},
	{"owner", bad_owner, "owner 'a b' is not a valid label value"},
	{"cwd", rel_cwd, "cwd 'src/p' is not an absolute path"},
	{"expiry", expired, "the session must expire after it was created"},
	{"rules", no_rules, "the proxy rules document is missing"},
	{"CA key", no_key, "the session CA certificate and key are required"},
	{"cluster IP", bad_ip, "mitm cluster IP 'mitm' is not an IP address"},
	{"runtime class", bad_rc, "a runtime class name is not a DNS subdomain"},
	{"env clash", env_clash, "agent env HTTPS_PROXY would replace uplink's own"},
	{"reserved volume", vol_reserved,
	 "agent volume 0: name 'uplink-ca' is not a DNS label or is taken"},
	{"relative host path", vol_relative,
	 "agent volume 'cwd': a hostPath needs an absolute host path and a mount path"},
};

static void test_bad_specs_refused(void **state)
{
	for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]); i++) {
		struct up_session_spec s = base_spec();
		json_t *objs = NULL;
		char err[512] = "";
		bad_specs[i].spoil(&s);
		if (up_manifests_render(tpl, &s, &objs, err, sizeof(err)) != -EINVAL)
			fail_msg("%s: not refused", bad_specs[i].what);
		assert_null(objs);
		if (!streq(err, bad_specs[i].message))
			fail_msg("%s: got '%s'", bad_specs[i].what, err);
	}
}

static void add_ref(json_t *refs, const char *kind, json_t *name)
{
	if (json_is_string(name))
		assert_int_equal(json_array_append_new(refs, json_pack("[s, O]", kind, name)), 0);
}

/* Every Secret and ConfigMap a pod refers to, as [kind, name]: volumes (projected too), env
 * valueFrom and envFrom of every container. */
static json_t *pod_refs(json_t *pod)
{
	static const char *const lists[] = {"spec.containers", "spec.initContainers"};
	json_t *refs = json_array(), *v, *src, *c, *e;
	size_t i, j;

	json_array_foreach (at(pod, "spec.volumes"), i, v) {
		add_ref(refs, "Secret", at(v, "secret.secretName"));
		add_ref(refs, "ConfigMap", at(v, "configMap.name"));
		json_array_foreach (at(v, "projected.sources"), j, src) {
			add_ref(refs, "Secret", at(src, "secret.name"));
			add_ref(refs, "ConfigMap", at(src, "configMap.name"));
		}
	}
	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		json_array_foreach (at(pod, lists[l]), i, c) {
			json_array_foreach (json_object_get(c, "env"), j, e) {
				add_ref(refs, "Secret", at(e, "valueFrom.secretKeyRef.name"));
				add_ref(refs, "ConfigMap", at(e, "valueFrom.configMapKeyRef.name"));
			}
			json_array_foreach (json_object_get(c, "envFrom"), j, e) {
				add_ref(refs, "Secret", at(e, "secretRef.name"));
				add_ref(refs, "ConfigMap", at(e, "configMapRef.name"));
			}
		}
	return refs;
}

/* The key's line is nowhere the agent pod can read: not in the pod (env values included), not
 * decoded in any Secret or ConfigMap it refers to. The pod must refer to `must_ref`. */
static void key_unreachable_from_agent(json_t *objs, const char *must_ref)
{
	json_t *pod = find(objs, "Pod", "agent"), *refs = pod_refs(pod), *ref;
	char *h = haystack(pod);
	bool seen = false;
	size_t i;

	assert_null(strstr(h, SSH_KEY_LINE));
	free(h);
	json_array_foreach (refs, i, ref) {
		const char *kind = json_string_value(json_array_get(ref, 0));
		const char *name = json_string_value(json_array_get(ref, 1));
		json_t *o = find(objs, kind, name);
		if (!o)
			fail_msg("the agent pod refers to %s/%s, which is not rendered", kind,
				 name);
		h = haystack(o);
		if (strstr(h, SSH_KEY_LINE))
			fail_msg("the private key is in %s/%s, which the agent pod refers to", kind,
				 name);
		free(h);
		seen = seen || streq(name, must_ref);
	}
	assert_true(seen);
	json_decref(refs);
}

/* --ssh-key-dir: the key in its Secret only, mounted by the holder only; the aliases. */
static void test_ssh_holder(void **state)
{
	struct up_session_spec s = base_spec();
	char err[256] = "", where[512];
	json_t *o, *objs;
	size_t i, n_mounting = 0;

	s.extras = &ssh_x;
	s.mitm_cluster_ip = NULL;
	objs = render(&s);
	key_unreachable_from_agent(objs, "ssh-pub");
	/* the search finds the line where it is, and only there */
	holders(objs, SSH_KEY_LINE, where, sizeof(where));
	assert_string_equal(where, "Secret/ssh-agent-keys");
	json_array_foreach (objs, i, o) {
		char *text = json_dumps(o, JSON_COMPACT);
		n_mounting += strstr(text, "\"secretName\":\"ssh-agent-keys\"") != NULL;
		free(text);
	}
	assert_int_equal(n_mounting, 1);
	assert_non_null(at(find(objs, "Pod", "ssh-agent"), "spec.volumes[name=keys]"));
	assert_int_equal(json_integer_value(at(find(objs, "Pod", "ssh-agent"),
					       "spec.securityContext.runAsUser")),
			 1000);
	assert_int_equal(json_integer_value(at(find(objs, "Pod", "ssh-agent"),
					       "spec.securityContext.fsGroup")),
			 1001);
	assert_null(at(find(objs, "Pod", "ssh-agent"), "spec.runtimeClassName"));
	assert_string_equal(
		json_string_value(at(find(objs, "Pod", "agent"),
				     "spec.containers[name=main].env[name=SSH_AUTH_SOCK].value")),
		"/ssh-agent/agent.sock");
	assert_string_equal(
		json_string_value(
			at(find(objs, "Pod", "agent"),
			   "spec.containers[name=main].volumeMounts[name=ssh-pub].mountPath")),
		"/home/u/.ssh/id_ed25519.pub");
	assert_non_null(at(find(objs, "Pod", "agent"), "spec.containers[name=ssh-agent-relay]"));
	/* the aliases come later, in any order, each replaced in place */
	assert_int_equal(up_manifests_set_ssh_agent_ip(objs, "10.0.0.7", err, sizeof(err)), 0);
	assert_int_equal(up_manifests_set_mitm_ip(objs, "10.0.0.8", err, sizeof(err)), 0);
	assert_int_equal(up_manifests_set_ssh_agent_ip(objs, "10.0.0.9", err, sizeof(err)), 0);
	json_t *aliases = at(find(objs, "Pod", "agent"), "spec.hostAliases");
	assert_int_equal(json_array_size(aliases), 2);
	assert_string_equal(json_string_value(at(aliases, "[0].ip")), "10.0.0.9");
	assert_string_equal(json_string_value(at(aliases, "[0].hostnames[0]")), "ssh-agent");
	assert_string_equal(json_string_value(at(aliases, "[1].ip")), "10.0.0.8");
	assert_int_equal(up_manifests_set_ssh_agent_ip(objs, "nope", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ssh-agent cluster IP 'nope' is not an IP address");
	json_decref(objs);
	/* without keys: none of it */
	s = base_spec();
	objs = render(&s);
	assert_null(find(objs, "Pod", "ssh-agent"));
	assert_null(find(objs, "Secret", "ssh-pub"));
	assert_null(at(find(objs, "Pod", "agent"), "spec.containers[name=ssh-agent-relay]"));
	json_decref(objs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ca_key_only_in_mitm_secret),
		cmocka_unit_test(test_sentinels_only_in_rules_secret),
		cmocka_unit_test(test_control_token_only_in_rules_secret),
		cmocka_unit_test(test_mitm_secrets_content),
		cmocka_unit_test(test_bad_specs_refused),
		cmocka_unit_test(test_ssh_holder),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
