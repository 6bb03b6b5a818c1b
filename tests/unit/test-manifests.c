/* SPDX-License-Identifier: Apache-2.0 */
/* The objects of a session as the renderer fills them: the posture every pod keeps, the
 * variants, the dry run's List, the system objects and loading the templates. */
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
	/* the proxy port alone: no pod reaches the control listener (8081) */
	{"NetworkPolicy", "mitm-policy", "spec.ingress[0].ports", SIZE, NULL, 1},
	{"NetworkPolicy", "mitm-policy", "spec.ingress[0].from", SIZE, NULL, 1},
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
	{"ConfigMap", "mitm-addon", "data", SIZE, NULL, 7},
	{"Secret", "claude-settings", "data", SIZE, NULL, 1},
	{"ConfigMap", "claude-md", "data.CLAUDE~md", STR, "# sandbox\n", 0},
};
#undef A

static void test_posture_table(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s);

	for (size_t i = 0; i < sizeof(posture) / sizeof(posture[0]); i++)
		check_row(objs, &posture[i]);
	json_decref(objs);
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

/* ---------------------------------------------------------------- variants */

static void test_allow_dns_and_runtime_classes(void **state)
{
	struct up_session_spec s = base_spec();
	s.asked.allow_dns = true;
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
		cmocka_unit_test(test_order_labels_and_pods),
		cmocka_unit_test(test_allow_dns_and_runtime_classes),
		cmocka_unit_test(test_mitm_ip_later),
		cmocka_unit_test(test_list_redacts),
		cmocka_unit_test(test_system_objects),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_secret_read_back),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
