/* SPDX-License-Identifier: Apache-2.0 */
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

/* tests/data/../../manifests: the source tree's templates. */
#define MANIFESTS  UP_TEST_DATA_DIR "/../../manifests"
#define ID	   "0123456789ab"
#define NS	   "agent-uplink-" ID
#define CREATED	   ((time_t)1795942800) /* 2026-11-29T09:00:00Z */
#define EXPIRES	   (CREATED + 86400)
#define SENTINEL   "uplink-sentinel"
#define CLUSTER_IP "10.43.12.34"

static struct up_manifests *tpl;
static struct up_ca *ca;
static json_t *rules;

static const struct up_env agent_env[] = {{"CLAUDE_CONFIG_DIR", "/home/u/.claude"}};
static const struct up_agent_file settings_files[] = {
	{"settings.json", "{\"theme\":\"dark\"}", 16, "/home/u/.claude/settings.json"},
};
static const struct up_agent_file md_files[] = {{"CLAUDE.md", "# sandbox\n", 10, NULL}};
static const struct up_agent_volume agent_volumes[] = {
	{.kind = UP_AGENT_VOL_SECRET,
	 .name = "claude-settings",
	 .files = settings_files,
	 .n_files = 1,
	 .read_only = true},
	{.kind = UP_AGENT_VOL_CONFIGMAP,
	 .name = "claude-md",
	 .files = md_files,
	 .n_files = 1,
	 .mount_path = "/etc/claude-md",
	 .read_only = true},
	{.kind = UP_AGENT_VOL_HOSTPATH,
	 .name = "cwd",
	 .host_path = "/home/u/src/p",
	 .host_path_type = "Directory",
	 .mount_path = "/home/u/src/p"},
	{.kind = UP_AGENT_VOL_EMPTYDIR,
	 .name = "docker-lib",
	 .medium = "Memory",
	 .size_limit = "2Gi",
	 .mount_path = "/var/lib/docker"},
};
static const char *const agent_cmd[] = {"claude", "--allow-dangerously-skip-permissions", NULL};

static struct up_session_spec base_spec(void)
{
	return (struct up_session_spec){
		.id = ID,
		.owner = "5f3c2a1b9d8e7f60",
		.created_at = CREATED,
		.expires_at = EXPIRES,
		.cwd = "/home/u/src/p",
		.agent = "claude",
		.mode = "anthropic",
		.uid = 1000,
		.gid = 1001,
		.user = "u",
		.home = "/home/u",
		.agent_image = "localhost:5000/agent-uplink-claude:abc123",
		.mitm_image = "mitmproxy/mitmproxy:12.1.1",
		.rules = rules,
		.ca_cert_pem = ca->cert_pem,
		.ca_key_pem = ca->key_pem,
		.mitm_cluster_ip = CLUSTER_IP,
		.contrib = {.env = agent_env,
			    .n_env = 1,
			    .volumes = agent_volumes,
			    .n_volumes = 4,
			    .command = agent_cmd},
	};
}

static int setup(void **state)
{
	char err[512] = "";

	if (up_manifests_load(MANIFESTS, &tpl, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	if (up_ca_new(ID, CREATED, EXPIRES, &ca, err, sizeof(err)) < 0)
		fail_msg("ca: %s", err);
	rules = json_loads("{\"version\":1,\"rules\":[{\"name\":\"claude-auth\",\"layer\":\"auth\","
			   "\"hosts\":[\"api\\\\.anthropic\\\\.com\"],\"inject\":{\"headers\":"
			   "{\"Authorization\":\"Bearer " SENTINEL "-oauth\"}}}]}",
			   0, NULL);
	assert_non_null(rules);
	return 0;
}

static int teardown(void **state)
{
	tpl = up_manifests_free(tpl);
	ca = up_ca_free(ca);
	json_decref(rules);
	return 0;
}

static json_t *render(const struct up_session_spec *s)
{
	json_t *objs = NULL;
	char err[512] = "";

	if (up_manifests_render(tpl, s, &objs, err, sizeof(err)) < 0)
		fail_msg("render: %s", err);
	return objs;
}

/* ---------------------------------------------------------------- paths */

/*
 * "spec.containers[name=main].env[name=HOME].value": keys split on '.', with '~' standing
 * for a '.' inside a key (uplink~dev/session); [N] indexes, [k=v] picks the element whose
 * k is the string v.
 */
static json_t *at(json_t *v, const char *path)
{
	char buf[512];

	(void)snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = buf, *next; v && t; t = next) {
		int depth = 0;
		for (next = t; *next && (*next != '.' || depth); next++)
			depth += *next == '[' ? 1 : *next == ']' ? -1 : 0;
		if (*next)
			*next++ = '\0';
		else
			next = NULL;
		char *br = strchr(t, '[');
		if (br != t) {
			if (br)
				*br = '\0';
			for (char *p = t; *p; p++)
				if (*p == '~')
					*p = '.';
			v = json_object_get(v, t);
			if (br)
				*br = '[';
		}
		for (; v && br; br = strchr(br + 1, '[')) {
			char sel[128], *eq;
			(void)snprintf(sel, sizeof(sel), "%.*s", (int)(strchr(br, ']') - br - 1),
				       br + 1);
			if (!(eq = strchr(sel, '='))) {
				v = json_array_get(v, strtoul(sel, NULL, 10));
				continue;
			}
			*eq = '\0';
			json_t *e, *found = NULL;
			size_t i;
			json_array_foreach (v, i, e) {
				const char *s = json_string_value(json_object_get(e, sel));
				if (s && streq(s, eq + 1))
					found = e;
			}
			v = found;
		}
	}
	return v;
}

static json_t *find(json_t *objs, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach (objs, i, o)
		if (streq(json_string_value(json_object_get(o, "kind")), kind) &&
		    streq(json_string_value(at(o, "metadata.name")), name))
			return o;
	return NULL;
}

/* ---------------------------------------------------------------- the posture table */

enum check { STR, INT, TRUE_, FALSE_, ABSENT, EMPTY, SIZE, NO_PORT_53 };

struct row {
	const char *kind, *name, *path;
	enum check check;
	const char *str;
	long long num;
};

#define A "containers[name=main]."
static const struct row posture[] = {
	/* Namespace: crash-proof GC labels and annotations */
	{"Namespace", NS, "metadata.labels.managed-by", STR, "agent-uplink", 0},
	{"Namespace", NS, "metadata.labels.uplink~dev/session", STR, ID, 0},
	{"Namespace", NS, "metadata.labels.uplink~dev/owner", STR, "5f3c2a1b9d8e7f60", 0},
	{"Namespace", NS, "metadata.labels.pod-security~kubernetes~io/enforce", STR, "privileged",
	 0},
	{"Namespace", NS, "metadata.annotations.uplink~dev/created-at", STR, "2026-11-29T09:00:00Z",
	 0},
	{"Namespace", NS, "metadata.annotations.uplink~dev/expires-at", STR, "2026-11-30T09:00:00Z",
	 0},
	{"Namespace", NS, "metadata.annotations.uplink~dev/cwd", STR, "/home/u/src/p", 0},
	{"Namespace", NS, "metadata.annotations.uplink~dev/agent", STR, "claude", 0},
	{"Namespace", NS, "metadata.namespace", ABSENT, NULL, 0},
	/* default-deny: every pod, both directions, nothing allowed */
	{"NetworkPolicy", "default-deny", "spec.podSelector", EMPTY, NULL, 0},
	{"NetworkPolicy", "default-deny", "spec.policyTypes[0]", STR, "Ingress", 0},
	{"NetworkPolicy", "default-deny", "spec.policyTypes[1]", STR, "Egress", 0},
	{"NetworkPolicy", "default-deny", "spec.ingress", EMPTY, NULL, 0},
	{"NetworkPolicy", "default-deny", "spec.egress", EMPTY, NULL, 0},
	/* the agent: egress to mitm:8080 only, no DNS */
	{"NetworkPolicy", "agent-egress", "spec.podSelector.matchLabels.app", STR, "agent", 0},
	{"NetworkPolicy", "agent-egress", "spec.policyTypes", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.policyTypes[0]", STR, "Egress", 0},
	{"NetworkPolicy", "agent-egress", "spec.egress", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].to", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].to[0].podSelector.matchLabels.app", STR,
	 "mitm", 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].to[0].namespaceSelector", ABSENT, NULL,
	 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].to[0].ipBlock", ABSENT, NULL, 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].ports", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].ports[0].port", INT, NULL, 8080},
	{"NetworkPolicy", "agent-egress", "spec.egress[0].ports[0].protocol", STR, "TCP", 0},
	{"NetworkPolicy", "agent-egress", "spec", NO_PORT_53, NULL, 0},
	/* the mitm: from the agent on 8080; out anywhere but link-local */
	{"NetworkPolicy", "mitm-policy", "spec.podSelector.matchLabels.app", STR, "mitm", 0},
	{"NetworkPolicy", "mitm-policy", "spec.policyTypes", SIZE, NULL, 2},
	{"NetworkPolicy", "mitm-policy", "spec.ingress", SIZE, NULL, 1},
	{"NetworkPolicy", "mitm-policy", "spec.ingress[0].from[0].podSelector.matchLabels.app", STR,
	 "agent", 0},
	{"NetworkPolicy", "mitm-policy", "spec.ingress[0].ports[0].port", INT, NULL, 8080},
	{"NetworkPolicy", "mitm-policy", "spec.egress", SIZE, NULL, 1},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].ports", ABSENT, NULL, 0},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].to", SIZE, NULL, 2},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].to[0].ipBlock.cidr", STR, "0.0.0.0/0", 0},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].to[0].ipBlock.except", SIZE, NULL, 12},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].to[1].ipBlock.cidr", STR, "::/0", 0},
	{"NetworkPolicy", "mitm-policy", "spec.egress[0].to[1].ipBlock.except", SIZE, NULL, 10},
	/* the mitm pod: hardened */
	{"Pod", "mitm", "spec.automountServiceAccountToken", FALSE_, NULL, 0},
	{"Pod", "mitm", "spec.runtimeClassName", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.hostNetwork", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.containers", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.containers[0].image", STR, "mitmproxy/mitmproxy:12.1.1", 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.capabilities.drop", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.containers[0].securityContext.capabilities.drop[0]", STR, "ALL", 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.capabilities.add", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.readOnlyRootFilesystem", TRUE_, NULL,
	 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.runAsNonRoot", TRUE_, NULL, 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.allowPrivilegeEscalation", FALSE_, NULL,
	 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.privileged", FALSE_, NULL, 0},
	{"Pod", "mitm", "spec.containers[0].securityContext.seccompProfile.type", STR,
	 "RuntimeDefault", 0},
	{"Pod", "mitm", "spec.securityContext.seccompProfile.type", STR, "RuntimeDefault", 0},
	{"Pod", "mitm", "spec.containers[0].volumeMounts[mountPath=/tmp].name", STR, "tmp", 0},
	{"Pod", "mitm", "spec.volumes[name=tmp].emptyDir.sizeLimit", STR, "32Mi", 0},
	{"Pod", "mitm", "spec.containers[0].volumeMounts[mountPath=/mitm-confdir].readOnly", TRUE_,
	 NULL, 0},
	{"Pod", "mitm", "spec.volumes[name=certs].secret.secretName", STR, "mitm-certs", 0},
	{"Pod", "mitm", "spec.volumes[name=rules].secret.secretName", STR, "rules-json", 0},
	{"Pod", "mitm", "spec.containers[0].ports[0].containerPort", INT, NULL, 8080},
	{"Pod", "mitm", "metadata.labels.app", STR, "mitm", 0},
	{"Service", "mitm", "spec.selector.app", STR, "mitm", 0},
	{"Service", "mitm", "spec.ports[0].port", INT, NULL, 8080},
	{"Service", "mitm", "spec.clusterIP", ABSENT, NULL, 0},
	/* the agent pod: privileged in Kata, no DNS, proxy and CA by env */
	{"Pod", "agent", "spec.automountServiceAccountToken", FALSE_, NULL, 0},
	{"Pod", "agent", "spec.runtimeClassName", STR, "kata-clh", 0},
	{"Pod", "agent", "spec.restartPolicy", STR, "Never", 0},
	{"Pod", "agent", "spec.hostNetwork", ABSENT, NULL, 0},
	{"Pod", "agent", "spec.dnsPolicy", STR, "None", 0},
	{"Pod", "agent", "spec.dnsConfig.nameservers", SIZE, NULL, 1},
	{"Pod", "agent", "spec.dnsConfig.nameservers[0]", STR, "127.0.0.1", 0},
	{"Pod", "agent", "spec.dnsConfig.searches", ABSENT, NULL, 0},
	{"Pod", "agent", "spec.hostAliases", SIZE, NULL, 1},
	{"Pod", "agent", "spec.hostAliases[0].ip", STR, CLUSTER_IP, 0},
	{"Pod", "agent", "spec.hostAliases[0].hostnames[0]", STR, "mitm", 0},
	{"Pod", "agent", "spec.securityContext.fsGroup", INT, NULL, 1001},
	{"Pod", "agent", "metadata.labels.app", STR, "agent", 0},
	{"Pod", "agent", "spec." A "image", STR, "localhost:5000/agent-uplink-claude:abc123", 0},
	{"Pod", "agent", "spec." A "imagePullPolicy", STR, "Always", 0},
	{"Pod", "agent", "spec." A "securityContext.privileged", TRUE_, NULL, 0},
	{"Pod", "agent", "spec." A "args[0]", STR, "claude", 0},
	{"Pod", "agent", "spec." A "args[1]", STR, "--allow-dangerously-skip-permissions", 0},
	{"Pod", "agent", "spec." A "command", ABSENT, NULL, 0},
	{"Pod", "agent", "spec." A "resources.limits.memory", STR, "4Gi", 0},
	{"Pod", "agent", "spec." A "resources.limits.cpu", ABSENT, NULL, 0},
	{"Pod", "agent", "spec." A "env[name=HTTPS_PROXY].value", STR, "http://mitm:8080", 0},
	{"Pod", "agent", "spec." A "env[name=HTTP_PROXY].value", STR, "http://mitm:8080", 0},
	{"Pod", "agent", "spec." A "env[name=https_proxy].value", STR, "http://mitm:8080", 0},
	{"Pod", "agent", "spec." A "env[name=http_proxy].value", STR, "http://mitm:8080", 0},
	{"Pod", "agent", "spec." A "env[name=NO_PROXY].value", STR,
	 "localhost,127.0.0.1,::1,.local", 0},
	{"Pod", "agent", "spec." A "env[name=no_proxy].value", STR,
	 "localhost,127.0.0.1,::1,.local", 0},
	{"Pod", "agent", "spec." A "env[name=NODE_EXTRA_CA_CERTS].value", STR,
	 UP_MANIFEST_AGENT_CA_PATH, 0},
	{"Pod", "agent", "spec." A "env[name=SSL_CERT_FILE].value", STR, UP_MANIFEST_AGENT_CA_PATH,
	 0},
	{"Pod", "agent", "spec." A "env[name=REQUESTS_CA_BUNDLE].value", STR,
	 UP_MANIFEST_AGENT_CA_PATH, 0},
	{"Pod", "agent", "spec." A "env[name=AWS_CA_BUNDLE].value", STR, UP_MANIFEST_AGENT_CA_PATH,
	 0},
	{"Pod", "agent", "spec." A "env[name=GIT_SSL_CAINFO].value", STR, UP_MANIFEST_AGENT_CA_PATH,
	 0},
	{"Pod", "agent", "spec." A "env[name=UPLINK_CA_CERT].value", STR, UP_MANIFEST_AGENT_CA_PATH,
	 0},
	{"Pod", "agent", "spec." A "env[name=WORKDIR].value", STR, "/home/u/src/p", 0},
	{"Pod", "agent", "spec." A "env[name=USERNAME].value", STR, "u", 0},
	{"Pod", "agent", "spec." A "env[name=UPLINK_UID].value", STR, "1000", 0},
	{"Pod", "agent", "spec." A "env[name=UPLINK_GID].value", STR, "1001", 0},
	{"Pod", "agent", "spec." A "env[name=CLAUDE_CONFIG_DIR].value", STR, "/home/u/.claude", 0},
	{"Pod", "agent", "spec." A "volumeMounts[mountPath=/etc/uplink/ca].name", STR, "uplink-ca",
	 0},
	{"Pod", "agent", "spec.volumes[name=uplink-ca].configMap.name", STR, "uplink-ca", 0},
	{"Pod", "agent", "spec." A "volumeMounts[mountPath=/home/u/.claude/settings.json].subPath",
	 STR, "settings.json", 0},
	{"Pod", "agent", "spec.volumes[name=claude-settings].secret.secretName", STR,
	 "claude-settings", 0},
	{"Pod", "agent", "spec.volumes[name=cwd].hostPath.type", STR, "Directory", 0},
	{"Pod", "agent", "spec.volumes[name=docker-lib].emptyDir.medium", STR, "Memory", 0},
	{"Pod", "agent", "spec.volumes[name=rules]", ABSENT, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=certs]", ABSENT, NULL, 0},
	/* the CA: certificate alone for the agent, key + cert for the mitm */
	{"ConfigMap", "uplink-ca", "data", SIZE, NULL, 1},
	{"Secret", "mitm-certs", "data", SIZE, NULL, 3},
	{"Secret", "mitm-certs", "type", STR, "Opaque", 0},
	{"Secret", "rules-json", "data", SIZE, NULL, 1},
	{"ConfigMap", "mitm-addon", "data", SIZE, NULL, 5},
	{"Secret", "claude-settings", "data", SIZE, NULL, 1},
	{"ConfigMap", "claude-md", "data.CLAUDE~md", STR, "# sandbox\n", 0},
};
#undef A

static void check_row(json_t *objs, const struct row *w)
{
	json_t *o = find(objs, w->kind, w->name);
	json_t *v = o ? at(o, w->path) : NULL;
	char *dump = NULL;

	if (!o)
		fail_msg("%s/%s not rendered", w->kind, w->name);
	switch (w->check) {
	case STR:
		if (!json_is_string(v) || !streq(json_string_value(v), w->str))
			fail_msg("%s/%s %s: want \"%s\", got %s", w->kind, w->name, w->path, w->str,
				 v ? (dump = json_dumps(v, JSON_ENCODE_ANY)) : "nothing");
		break;
	case INT:
		if (!json_is_integer(v) || json_integer_value(v) != w->num)
			fail_msg("%s/%s %s: want %lld", w->kind, w->name, w->path, w->num);
		break;
	case TRUE_:
	case FALSE_:
		if (!json_is_boolean(v) || json_is_true(v) != (w->check == TRUE_))
			fail_msg("%s/%s %s: want %s", w->kind, w->name, w->path,
				 w->check == TRUE_ ? "true" : "false");
		break;
	case ABSENT:
		if (v)
			fail_msg("%s/%s %s: want absent", w->kind, w->name, w->path);
		break;
	case EMPTY:
		if (!(json_is_object(v) && json_object_size(v) == 0) &&
		    !(json_is_array(v) && json_array_size(v) == 0))
			fail_msg("%s/%s %s: want empty", w->kind, w->name, w->path);
		break;
	case SIZE:
		if ((json_is_array(v) ? json_array_size(v) : json_object_size(v)) != (size_t)w->num)
			fail_msg("%s/%s %s: want %lld entries", w->kind, w->name, w->path, w->num);
		break;
	case NO_PORT_53:
		dump = json_dumps(v, JSON_COMPACT);
		if (strstr(dump, "\"port\":53") || strstr(dump, "kube-dns"))
			fail_msg("%s/%s: DNS is open: %s", w->kind, w->name, dump);
		break;
	}
	free(dump);
}

static void test_posture_table(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);

	for (size_t i = 0; i < sizeof(posture) / sizeof(posture[0]); i++)
		check_row(objs, &posture[i]);
	json_decref(objs);
}

/* ---------------------------------------------------------------- uplink run's extras */

#define CA_PEM	"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define GIT_INC "[user]\n\tname = \"u\"\n"
#define AWS_INI "[dev]\naws_access_key_id = AKIAEF260E9AA3C673AF\naws_secret_access_key = x\n\n"
#define AWS_MAP                                                                             \
	"{\"AKIAEF260E9AA3C673AF\": {\"access_key_id\": \"ASIA1\", \"secret_access_key\": " \
	"\"s1\"}}"

static struct up_session_extras *extras_new(void)
{
	static struct up_session_extras x;

	x = (struct up_session_extras){
		.mounts = json_pack("[{s:s, s:b, s:b}, {s:s, s:b, s:b}]", "path", "/home/u/src/q",
				    "dir", 1, "read_only", 0, "path", "/home/u/.npmrc", "dir", 0,
				    "read_only", 1),
		.ssh_cidrs = json_pack("[s, s]", "10.1.0.0/16", "2001:db8::/32"),
		.gitconfig = strdup(GIT_INC),
		.mitm_ca_pem = strdup(CA_PEM),
		.mitm_insecure = true,
		.mitm_debug = true,
		.aws_ini = strdup(AWS_INI),
		.aws_creds_json = strdup(AWS_MAP),
	};
	return &x;
}

static void extras_done(struct up_session_extras *x)
{
	json_decref(x->mounts);
	json_decref(x->ssh_cidrs);
	free(x->gitconfig);
	free(x->mitm_ca_pem);
	free(x->aws_ini);
	free(x->aws_creds_json);
}

#define A "containers[name=main]."
#define M "containers[name=mitm]."
static const struct row extras_rows[] = {
	/* --add-dir / --mount-rw / --mount-ro: hostPath at the same path, readOnly explicit */
	{"Pod", "agent", "spec.volumes[name=mount-0].hostPath.path", STR, "/home/u/src/q", 0},
	{"Pod", "agent", "spec.volumes[name=mount-0].hostPath.type", STR, "Directory", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-0].mountPath", STR, "/home/u/src/q", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-0].readOnly", FALSE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=mount-1].hostPath.type", STR, "File", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-1].mountPath", STR, "/home/u/.npmrc",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-1].readOnly", TRUE_, NULL, 0},
	/* --ssh-cidr: one more egress rule, TCP 22 to exactly those blocks; still no DNS */
	{"NetworkPolicy", "agent-egress", "spec.egress", SIZE, NULL, 2},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to", SIZE, NULL, 2},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[0].ipBlock.cidr", STR, "10.1.0.0/16",
	 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[1].ipBlock.cidr", STR, "2001:db8::/32",
	 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[0].ipBlock.except", ABSENT, NULL, 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports[0].port", INT, NULL, 22},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports[0].protocol", STR, "TCP", 0},
	{"NetworkPolicy", "agent-egress", "spec", NO_PORT_53, NULL, 0},
	/* git: the overlay Secret at the image's include path, read-only */
	{"Secret", "git-config", "data", SIZE, NULL, 1},
	{"Pod", "agent", "spec.volumes[name=git-config].secret.secretName", STR, "git-config", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].mountPath", STR,
	 "/etc/gitconfig.d/agent-uplink.inc", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].subPath", STR, "agent-uplink.inc",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].readOnly", TRUE_, NULL, 0},
	/* mitm: the extra CAs next to the public roots, insecure and debug options */
	{"Secret", "upstream-ca", "data", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.volumes[name=upstream-ca].secret.secretName", STR, "upstream-ca", 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=upstream-ca].mountPath", STR, "/upstream-ca",
	 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=upstream-ca].readOnly", TRUE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=upstream-ca]", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.volumes[name=git-config]", ABSENT, NULL, 0},
	/* --aws-profiles: the dummies for the agent (no secret: a ConfigMap), the real keys
	 * mounted whole in the mitm only (so that a renewal reaches the file) */
	{"ConfigMap", "agent-aws-creds", "data.credentials", STR, AWS_INI, 0},
	{"Pod", "agent", "spec.volumes[name=agent-aws-creds].configMap.name", STR,
	 "agent-aws-creds", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].mountPath", STR,
	 "/home/u/.aws/credentials", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].subPath", STR, "credentials",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].readOnly", TRUE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=aws-sigv4-creds]", ABSENT, NULL, 0},
	{"Secret", "aws-sigv4-creds", "data", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.volumes[name=aws-sigv4-creds].secret.secretName", STR,
	 "aws-sigv4-creds", 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=aws-sigv4-creds].mountPath", STR, "/aws-creds",
	 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=aws-sigv4-creds].subPath", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.volumes[name=agent-aws-creds]", ABSENT, NULL, 0},
};
#undef A
#undef M

static bool has_arg(json_t *objs, const char *arg)
{
	json_t *args = at(find(objs, "Pod", "mitm"), "spec.containers[name=mitm].args"), *v;
	size_t i;

	json_array_foreach (args, i, v)
		if (streq(json_string_value(v), arg))
			return i > 0 &&
			       streq(json_string_value(json_array_get(args, i - 1)), "--set");
	return false;
}

static bool in_list(json_t *list, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach (list, i, v)
		if (streq(json_string_value(v), s))
			return true;
	return false;
}

/* Metadata services and special-purpose ranges are out of the mitm's reach; private ones
 * (API servers, corporate hosts) are not. */
static void test_mitm_egress_excludes_special_ranges(void **state)
{
	static const char *const out4[] = {
		"0.0.0.0/8",	  "127.0.0.0/8",  "169.254.0.0/16", "100.100.100.200/32",
		"192.0.0.0/24",	  "192.0.2.0/24", "198.18.0.0/15",  "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4",  "240.0.0.0/4"};
	static const char *const out6[] = {"::1/128",  "fe80::/10",	"fd00:ec2::254/128",
					   "ff00::/8", "2001:db8::/32", "::ffff:0:0/96",
					   "100::/64"};
	static const char *const open[] = {"10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16",
					   "100.64.0.0/10", "fc00::/7",	     "fd00::/8",
					   "64:ff9b::/96"};
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s), *np = find(objs, "NetworkPolicy", "mitm-policy");
	json_t *v4 = at(np, "spec.egress[0].to[0].ipBlock.except");
	json_t *v6 = at(np, "spec.egress[0].to[1].ipBlock.except");

	(void)state;
	for (size_t i = 0; i < sizeof(out4) / sizeof(out4[0]); i++)
		assert_true(in_list(v4, out4[i]));
	for (size_t i = 0; i < sizeof(out6) / sizeof(out6[0]); i++)
		assert_true(in_list(v6, out6[i]));
	for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++)
		assert_false(in_list(v4, open[i]) || in_list(v6, open[i]));
	json_decref(objs);
}

static size_t count_prefix(json_t *objs, const char *prefix)
{
	json_t *args = at(find(objs, "Pod", "mitm"), "spec.containers[name=mitm].args"), *v;
	size_t i, n = 0;

	json_array_foreach (args, i, v)
		n += strncmp(json_string_value(v), prefix, strlen(prefix)) == 0;
	return n;
}

/* The mitm decides before connecting, serves no onboarding app and prints no flow (the
 * audit lines share its log); --mitm-debug replaces those values, never repeats them
 * (mitmdump refuses an option given twice). */
static void test_mitm_quiet_and_lazy(void **state)
{
	struct up_session_spec s = base_spec();
	struct up_session_extras *x = extras_new();
	json_t *objs = render(&s);

	(void)state;
	assert_true(has_arg(objs, "connection_strategy=lazy"));
	assert_true(has_arg(objs, "upstream_cert=false"));
	assert_true(has_arg(objs, "onboarding=false"));
	assert_true(has_arg(objs, "flow_detail=0"));
	assert_true(has_arg(objs, "termlog_verbosity=error"));
	json_decref(objs);
	x->mitm_debug = true;
	s.extras = x;
	objs = render(&s);
	assert_true(has_arg(objs, "flow_detail=3") && has_arg(objs, "termlog_verbosity=debug"));
	assert_int_equal(count_prefix(objs, "flow_detail="), 1);
	assert_int_equal(count_prefix(objs, "termlog_verbosity="), 1);
	json_decref(objs);
	extras_done(x);
}

/* The cluster's Service ranges (daemon/cluster-ranges.h) become uplink_refuse_cidrs, once
 * and normalised; unknown ones set nothing; a value that is no CIDR is refused. */
static void test_mitm_refuse_cidrs(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *cidrs = json_pack("[s, s]", "10.43.0.0/16", "fd00:43::/112");
	json_t *objs = render(&s);
	char err[512] = "";

	(void)state;
	assert_int_equal(count_prefix(objs, "uplink_refuse_cidrs="), 0);
	json_decref(objs);
	s.refuse_cidrs = cidrs;
	objs = render(&s);
	assert_true(has_arg(objs, "uplink_refuse_cidrs=10.43.0.0/16,fd00:43::/112"));
	assert_int_equal(count_prefix(objs, "uplink_refuse_cidrs="), 1);
	json_decref(objs);
	objs = NULL;
	assert_int_equal(json_array_append_new(cidrs, json_string("10.0.0.0/8,--x")), 0);
	assert_int_equal(up_manifests_render(tpl, &s, &objs, err, sizeof(err)), -EINVAL);
	assert_null(objs);
	assert_string_equal(err, "refuse_cidrs[2] is not one of up to 16 CIDRs");
	json_decref(cidrs);
}

static void test_extras_table(void **state)
{
	struct up_session_spec s = base_spec();
	struct up_session_extras *x = extras_new();
	json_t *objs;

	s.extras = x;
	objs = render(&s);
	for (size_t i = 0; i < sizeof(extras_rows) / sizeof(extras_rows[0]); i++)
		check_row(objs, &extras_rows[i]);
	assert_true(has_arg(objs, "uplink_extra_ca=/upstream-ca/bundle.pem"));
	assert_true(has_arg(objs, "ssl_insecure=true"));
	assert_true(has_arg(objs, "termlog_verbosity=debug"));
	assert_true(has_arg(objs, "flow_detail=3"));
	assert_true(has_arg(objs, "uplink_aws_creds=/aws-creds/creds.json"));
	/* a renewal: the Secret found and its key replaced */
	json_t *sec = up_manifests_find(objs, "Secret", "aws-sigv4-creds");
	assert_ptr_equal(sec, find(objs, "Secret", "aws-sigv4-creds"));
	assert_null(up_manifests_find(objs, "ConfigMap", "aws-sigv4-creds"));
	assert_int_equal(up_manifests_secret_put(sec, "creds.json", "{}", 2), 0);
	assert_string_equal(json_string_value(at(sec, "data.creds~json")), "e30=");
	json_decref(objs);
	/* none of it without the flags */
	x->mitm_insecure = x->mitm_debug = false;
	free(x->mitm_ca_pem);
	x->mitm_ca_pem = NULL;
	objs = render(&s);
	assert_false(has_arg(objs, "ssl_insecure=true"));
	assert_false(has_arg(objs, "flow_detail=3"));
	assert_false(has_arg(objs, "uplink_extra_ca=/upstream-ca/bundle.pem"));
	assert_null(find(objs, "Secret", "upstream-ca"));
	json_decref(objs);
	/* no profiles, no AWS objects */
	free(x->aws_ini);
	free(x->aws_creds_json);
	x->aws_ini = x->aws_creds_json = NULL;
	objs = render(&s);
	assert_null(find(objs, "Secret", "aws-sigv4-creds"));
	assert_null(find(objs, "ConfigMap", "agent-aws-creds"));
	assert_false(has_arg(objs, "uplink_aws_creds=/aws-creds/creds.json"));
	json_decref(objs);
	extras_done(x);
}

/* After a restart: a Secret as the API server returns it, read back and made fit to apply. */
static void test_secret_read_back(void **state)
{
	json_t *got =
		json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:i, s:{s:s}, s:[{s:s}], s:s}, "
			  "s:s, s:{s:s, s:s}}",
			  "apiVersion", "v1", "kind", "Secret", "metadata", "name", "rules-json",
			  "namespace", "agent-uplink-0123456789ab", "uid", "u-1", "resourceVersion",
			  "42", "generation", 1, "labels", "uplink.dev/owner", "o", "managedFields",
			  "manager", "uplinkd", "creationTimestamp", "2026-01-01T00:00:00Z", "type",
			  "Opaque", "data", "rules.json", "eyJ2ZXJzaW9uIjogMX0=", "bad", "!!!");
	json_t *o = up_manifests_secret_reapply(got), *bad;
	char *text = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(o);
	assert_null(at(o, "metadata.uid"));
	assert_null(at(o, "metadata.resourceVersion"));
	assert_null(at(o, "metadata.managedFields"));
	assert_null(at(o, "metadata.creationTimestamp"));
	assert_null(at(o, "metadata.generation"));
	assert_string_equal(json_string_value(at(o, "metadata.name")), "rules-json");
	assert_string_equal(json_string_value(at(o, "metadata.namespace")),
			    "agent-uplink-0123456789ab");
	assert_string_equal(json_string_value(at(o, "metadata.labels.uplink~dev/owner")), "o");
	assert_string_equal(json_string_value(at(o, "type")), "Opaque");
	/* the original is left alone */
	assert_string_equal(json_string_value(at(got, "metadata.uid")), "u-1");
	assert_int_equal(up_manifests_secret_get(o, "rules.json", &text, &len), 0);
	assert_int_equal(len, 14);
	assert_string_equal(text, "{\"version\": 1}");
	up_free_secret(text, len);
	assert_int_equal(up_manifests_secret_get(o, "none", &text, &len), -ENOENT);
	assert_int_equal(up_manifests_secret_get(o, "bad", &text, &len), -EINVAL);
	/* not a Secret with data: refused */
	bad = json_pack("{s:s, s:{s:s}}", "kind", "ConfigMap", "metadata", "name", "x");
	assert_null(up_manifests_secret_reapply(bad));
	json_decref(bad);
	json_decref(o);
	json_decref(got);
}

/* ---------------------------------------------------------------- invariants over all objects */

static void test_order_labels_and_pods(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s), *o;
	size_t i, n = json_array_size(objs);

	assert_true(n >= 12);
	assert_string_equal(json_string_value(at(json_array_get(objs, 0), "kind")), "Namespace");
	assert_string_equal(json_string_value(at(json_array_get(objs, n - 1), "metadata.name")),
			    "agent");
	json_array_foreach (objs, i, o) {
		const char *kind = json_string_value(at(o, "kind"));
		assert_string_equal(json_string_value(at(o, "metadata.labels.managed-by")),
				    "agent-uplink");
		assert_string_equal(json_string_value(at(o, "metadata.labels.uplink~dev/session")),
				    ID);
		assert_non_null(at(o, "metadata.labels.uplink~dev/owner"));
		if (!streq(kind, "Namespace"))
			assert_string_equal(json_string_value(at(o, "metadata.namespace")), NS);
		if (!streq(kind, "Pod"))
			continue;
		assert_true(json_is_false(at(o, "spec.automountServiceAccountToken")));
		/* every mount names a volume, every Secret/ConfigMap volume an object we render */
		json_t *m, *vol;
		size_t j;
		json_array_foreach (at(o, "spec.containers[0].volumeMounts"), j, m) {
			char p[128];
			(void)snprintf(p, sizeof(p), "spec.volumes[name=%s]",
				       json_string_value(json_object_get(m, "name")));
			assert_non_null(at(o, p));
		}
		json_array_foreach (at(o, "spec.volumes"), j, vol) {
			json_t *sec = at(vol, "secret.secretName"), *cm = at(vol, "configMap.name");
			if (sec)
				assert_non_null(find(objs, "Secret", json_string_value(sec)));
			if (cm)
				assert_non_null(find(objs, "ConfigMap", json_string_value(cm)));
		}
	}
	json_decref(objs);
}

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
	assert_int_equal(n_files, 5);
	assert_int_equal(json_object_size(addon), n_files);
	free(h);
	free(r);
	json_decref(objs);
}

/* ---------------------------------------------------------------- variants */

static void test_allow_dns_and_runtime_classes(void **state)
{
	struct up_session_spec s = base_spec();
	s.allow_dns = true;
	s.agent_runtime_class = "kata-qemu";
	s.mitm_runtime_class = "kata-clh";
	json_t *objs = render(&s);
	json_t *np = find(objs, "NetworkPolicy", "agent-egress"), *pod = find(objs, "Pod", "agent");

	assert_int_equal(json_array_size(at(np, "spec.egress")), 2);
	assert_string_equal(
		json_string_value(at(np, "spec.egress[1].to[0].podSelector.matchLabels.k8s-app")),
		"kube-dns");
	assert_int_equal(json_integer_value(at(np, "spec.egress[1].ports[0].port")), 53);
	assert_null(at(pod, "spec.dnsPolicy"));
	assert_null(at(pod, "spec.dnsConfig"));
	assert_string_equal(json_string_value(at(pod, "spec.runtimeClassName")), "kata-qemu");
	assert_string_equal(
		json_string_value(at(find(objs, "Pod", "mitm"), "spec.runtimeClassName")),
		"kata-clh");
	json_decref(objs);
	s.agent_runtime_class = ""; /* none */
	objs = render(&s);
	assert_null(at(find(objs, "Pod", "agent"), "spec.runtimeClassName"));
	json_decref(objs);
}

static void test_mitm_ip_later(void **state)
{
	struct up_session_spec s = base_spec();
	char err[256] = "";

	s.mitm_cluster_ip = NULL;
	json_t *objs = render(&s);
	assert_null(at(find(objs, "Pod", "agent"), "spec.hostAliases"));
	assert_int_equal(up_manifests_set_mitm_ip(objs, "10.0.0.x", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "mitm cluster IP '10.0.0.x' is not an IP address");
	assert_int_equal(up_manifests_set_mitm_ip(objs, "fd00::1", err, sizeof(err)), 0);
	assert_string_equal(
		json_string_value(at(find(objs, "Pod", "agent"), "spec.hostAliases[0].ip")),
		"fd00::1");
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

/* ---------------------------------------------------------------- dry run, system, loading */

static void test_list_redacts(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);
	json_t *list = up_manifests_list(objs, false), *shown = up_manifests_list(objs, true);
	char *rules_text = json_dumps(rules, JSON_COMPACT), want[64];

	assert_string_equal(json_string_value(at(list, "kind")), "List");
	assert_string_equal(json_string_value(at(list, "apiVersion")), "v1");
	assert_int_equal(json_array_size(at(list, "items")), json_array_size(objs));
	(void)snprintf(want, sizeof(want), "<redacted: %zu bytes>", strlen(rules_text));
	assert_string_equal(json_string_value(at(find(at(list, "items"), "Secret", "rules-json"),
						 "data.rules~json")),
			    want);
	char *dump = json_dumps(list, JSON_COMPACT);
	assert_null(strstr(dump, SENTINEL));
	free(dump);
	/* ConfigMaps stay readable; shown secrets stay base64 */
	assert_string_equal(json_string_value(at(find(at(list, "items"), "ConfigMap", "uplink-ca"),
						 "data.ca~crt")),
			    ca->cert_pem);
	assert_true(json_equal(at(shown, "items"), objs));
	free(rules_text);
	json_decref(list);
	json_decref(shown);
	json_decref(objs);
}

static void test_system_objects(void **state)
{
	json_t *objs = NULL;
	char err[256];

	assert_int_equal(up_manifests_render_system(tpl, NULL, &objs, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(objs), 3);
	json_t *ns = json_array_get(objs, 0), *dep = json_array_get(objs, 1);
	assert_string_equal(json_string_value(at(ns, "metadata.name")), "agent-uplink-system");
	assert_null(at(ns, "metadata.labels")); /* never matched by the reaper */
	assert_string_equal(json_string_value(at(dep, "kind")), "Deployment");
	assert_string_equal(json_string_value(at(dep, "spec.template.spec.containers[0].image")),
			    "registry:2");
	assert_true(json_is_true(at(dep, "spec.template.spec.hostNetwork")));
	assert_false(json_is_true(at(dep, "spec.template.spec.automountServiceAccountToken")));
	assert_string_equal(
		json_string_value(
			at(dep,
			   "spec.template.spec.containers[0].env[name=REGISTRY_HTTP_ADDR].value")),
		"127.0.0.1:5000");
	assert_int_equal(
		json_integer_value(at(dep, "spec.template.spec.containers[0].ports[0].hostPort")),
		5000);
	json_decref(objs);
	struct up_system_spec sys = {.registry_image = "localhost/registry:2.8"};
	assert_int_equal(up_manifests_render_system(tpl, &sys, &objs, err, sizeof(err)), 0);
	assert_string_equal(json_string_value(at(json_array_get(objs, 1),
						 "spec.template.spec.containers[0].image")),
			    "localhost/registry:2.8");
	json_decref(objs);
}

static void test_load_errors(void **state)
{
	struct up_manifests *m = NULL;
	char err[512] = "", dir[4096];

	assert_int_equal(up_manifests_load("/nonexistent", &m, err, sizeof(err)), -ENOENT);
	assert_null(m);
	assert_string_equal(
		err, "cannot read template /nonexistent/namespace.yaml: No such file or directory");
	/* a folder whose template is the wrong kind */
	char tmp[] = "/tmp/test-manifests-XXXXXX";
	assert_non_null(mkdtemp(tmp));
	const char *files[] = {"namespace.yaml"};
	for (size_t i = 0; i < 1; i++) {
		(void)snprintf(dir, sizeof(dir), "%s/%s", tmp, files[i]);
		FILE *f = fopen(dir, "w");
		fputs("apiVersion: v1\nkind: Pod\nmetadata: {labels: {}}\n", f);
		fclose(f);
	}
	assert_int_equal(up_manifests_load(tmp, &m, err, sizeof(err)), -EINVAL);
	(void)snprintf(dir, sizeof(dir), "template %s/namespace.yaml is not a Namespace", tmp);
	assert_string_equal(err, dir);
	(void)snprintf(dir, sizeof(dir), "%s/namespace.yaml", tmp);
	(void)unlink(dir);
	(void)rmdir(tmp);
	/* the default folder follows $UPLINK_DATA_DIR */
	setenv("UPLINK_DATA_DIR", "/opt/x", 1);
	up_knobs_load();
	assert_int_equal(up_manifests_default_dir(dir, sizeof(dir)), 0);
	assert_string_equal(dir, "/opt/x/manifests");
	unsetenv("UPLINK_DATA_DIR");
	up_knobs_load();
	assert_int_equal(up_manifests_default_dir(dir, sizeof(dir)), 0);
	assert_true(strstr(dir, "/uplink/manifests") != NULL);
	assert_null(up_manifests_free(NULL));
}

/* Removes a folder of symbolic links (and its empty subfolders). */
static void remove_links(const char *dir)
{
	char p[4096];
	struct dirent *e;
	DIR *d = opendir(dir);

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			(void)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			assert_true(unlink(p) == 0 || rmdir(p) == 0);
		}
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
}

/* A copy of the templates whose mitm/ lacks one of the addon's modules. */
static void test_load_needs_every_addon_file(void **state)
{
	char tmp[] = "/tmp/test-manifests-XXXXXX", a[4096], b[4096], err[512] = "", want[4096];
	struct up_manifests *m = NULL;
	const char *name;
	struct dirent *e;
	DIR *d;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	assert_non_null(d = opendir(MANIFESTS));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && strcmp(e->d_name, "mitm") != 0) {
			(void)snprintf(a, sizeof(a), "%s/%s", MANIFESTS, e->d_name);
			(void)snprintf(b, sizeof(b), "%s/%s", tmp, e->d_name);
			assert_int_equal(symlink(a, b), 0);
		}
	closedir(d);
	(void)snprintf(b, sizeof(b), "%s/mitm", tmp);
	assert_int_equal(mkdir(b, 0700), 0);
	for (size_t i = 0; up_manifests_addon_file(tpl, i, &name); i++)
		if (strcmp(name, "uplink_net.py") != 0) {
			(void)snprintf(a, sizeof(a), "%s/mitm/%s", MANIFESTS, name);
			(void)snprintf(b, sizeof(b), "%s/mitm/%s", tmp, name);
			assert_int_equal(symlink(a, b), 0);
		}
	(void)snprintf(b, sizeof(b), "%s/mitm", tmp);
	assert_int_equal(up_manifests_load(tmp, &m, err, sizeof(err)), -ENOENT);
	assert_null(m);
	(void)snprintf(want, sizeof(want),
		       "cannot read the mitm addon %s/mitm/uplink_net.py: No such file or "
		       "directory; reinstall uplink (its files ship together)",
		       tmp);
	assert_string_equal(err, want);
	remove_links(b);
	remove_links(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posture_table),
		cmocka_unit_test(test_load_needs_every_addon_file),
		cmocka_unit_test(test_extras_table),
		cmocka_unit_test(test_mitm_egress_excludes_special_ranges),
		cmocka_unit_test(test_mitm_quiet_and_lazy),
		cmocka_unit_test(test_mitm_refuse_cidrs),
		cmocka_unit_test(test_order_labels_and_pods),
		cmocka_unit_test(test_ca_key_only_in_mitm_secret),
		cmocka_unit_test(test_sentinels_only_in_rules_secret),
		cmocka_unit_test(test_mitm_secrets_content),
		cmocka_unit_test(test_allow_dns_and_runtime_classes),
		cmocka_unit_test(test_mitm_ip_later),
		cmocka_unit_test(test_bad_specs_refused),
		cmocka_unit_test(test_ssh_holder),
		cmocka_unit_test(test_list_redacts),
		cmocka_unit_test(test_system_objects),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_secret_read_back),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
