/* SPDX-License-Identifier: Apache-2.0 */
/* --kube-context: refusal order, the agent's kubeconfig, the rules, escaping, PEM joining. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-expose.h"
#include "kubeconfig.h"
#include "rules.h"

#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClEwRUsKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define CA_PEM "-----BEGIN CERTIFICATE-----\nQ0EK\n-----END CERTIFICATE-----\n"
/* A certificate without its last newline, and a key. */
#define CERT_B64 \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClEwVlNWQW89Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0="
#define KEY_B64 \
	"LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tClMwVlpDZz09Ci0tLS0tRU5EIFBSSVZBVEUgS0VZLS0tLS0K"
#define TOKEN	   "uplink-sentinel-kube-token"
#define SESSION_CA "-----BEGIN CERTIFICATE-----\nU0VTU0lPTgo=\n-----END CERTIFICATE-----\n"

/* One kubeconfig: context "c" (body `ctx`, "" = cluster cl, user u) and "other". */
static char *kc(const char *cluster, const char *user, const char *ctx)
{
	char *t;

	assert_true(asprintf(&t,
			     "clusters:\n- name: cl\n  cluster: {%s}\n"
			     "users:\n- name: u\n  user: {%s}\n"
			     "contexts:\n- name: c\n  context: {%s}\n"
			     "- name: other\n  context: {cluster: cl, user: u}\n",
			     cluster, user, *ctx ? ctx : "cluster: cl, user: u") > 0);
	return t;
}

/* Adds context `name` of `text` to `k`: the result, and the message in `why`. */
static int add(struct up_kube_exposed *k, const char *text, const char *name, char *why, size_t len)
{
	struct up_kube_context *c = NULL;
	char err[1024];
	int r;

	why[0] = '\0';
	r = up_kubeconfig_from_text(text, strlen(text), name, true, &c, err, sizeof(err));
	if (r < 0) {
		/* A message cut short would make the tests below compare the wrong text. */
		assert_true(snprintf(why, len, "--kube-context %s: %s", name, err) < (int)len);
		return r;
	}
	r = up_kube_expose_add(k, c, why, len);
	up_kube_context_free(c);
	return r;
}

static const struct {
	const char *cluster, *user, *extra, *want;
} refusals[] = {
	/*
	 * Where a case breaks several checks, the earliest in the order of check_cluster() and
	 * take_credential() must win.
	 */
	{"server: https://a.test", "exec: {command: x}", "cluster: nowhere, user: u",
	 "no cluster found in kubeconfig"},
	{"insecure-skip-tls-verify: true", "exec: {command: x}", "cluster: cl, user: nobody",
	 "no user found in kubeconfig"},
	{"insecure-skip-tls-verify: true", "exec: {command: x}", "", "cluster has no server URL"},
	{"server: https://a.test, insecure-skip-tls-verify: true", "exec: {command: x}", "",
	 "insecure-skip-tls-verify is not supported"},
	{"server: https://a.test", "exec: {command: x}, username: a", "",
	 "cluster has no certificate-authority-data"},
	{"server: https://a.test, certificate-authority-data: " CA_B64,
	 "exec: {command: x}, username: a", "",
	 "exec and auth-provider credentials are not supported: uplink cannot run the plugin"},
	{"server: https://a.test, certificate-authority-data: " CA_B64,
	 "auth-provider: {name: oidc}", "", "exec and auth-provider credentials are not supported"},
	{"server: https://a.test, certificate-authority-data: " CA_B64,
	 "username: a, password: " TOKEN, "", "username/password credentials are not supported"},
	{"server: https://a.test, certificate-authority-data: " CA_B64,
	 "client-certificate-data: " CERT_B64, "",
	 "no supported credentials found; expected token, tokenFile, or client-certificate-data"},
	{"server: https://a.test, certificate-authority-data: " CA_B64,
	 "tokenFile: /nonexistent/tok", "", "tokenFile '/nonexistent/tok' not found"},
	{"server: 'http://a.test', certificate-authority-data: " CA_B64, "token: " TOKEN, "",
	 "is not https"},
	{"server: 'https://admin:" TOKEN "@a.test', certificate-authority-data: " CA_B64,
	 "token: x", "", "the server URL has a user name or password in it"},
	{"server: 'http://admin:" TOKEN "@a.test', certificate-authority-data: " CA_B64, "token: x",
	 "", "the server URL has a user name or password in it"},
	{"server: 'https://a.test:99999', certificate-authority-data: " CA_B64, "token: x", "",
	 "has a bad port; write it as https://HOST[:PORT]"},
	{"server: 'https://a_b.test', certificate-authority-data: " CA_B64, "token: x", "",
	 "the server's host 'a_b.test' is not a DNS name or an IP address"},
	{"server: 'https://a.test', tls-server-name: b.test, certificate-authority-data: " CA_B64,
	 "token: x", "", "tls-server-name is not supported"},
	{"server: 'https://[::1]:6443', certificate-authority-data: " CA_B64,
	 "client-certificate-data: " CERT_B64 ", client-key-data: " KEY_B64, "",
	 "IPv6 API server address"},
};

static void test_refusal_order(void **state)
{
	char why[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		struct up_kube_exposed *k = up_kube_exposed_new();
		char *text = kc(refusals[i].cluster, refusals[i].user, refusals[i].extra);
		int r = add(k, text, "c", why, sizeof(why));
		if (r >= 0 || !strstr(why, refusals[i].want) ||
		    strncmp(why, "--kube-context c: ", 18) != 0)
			fail_msg("case %zu: got %d '%s', want '%s'", i, r, why, refusals[i].want);
		assert_null(strstr(why, TOKEN));
		assert_int_equal(k->n, 0);
		free(text);
		up_kube_exposed_free(k);
	}
}

static void test_unknown_context_lists_known(void **state)
{
	struct up_kube_exposed *k = up_kube_exposed_new();
	char *text = kc("server: https://a.test", "token: " TOKEN, "");
	char why[1024];

	(void)state;
	assert_true(add(k, text, "nope", why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "--kube-context nope: "));
	assert_non_null(strstr(why, "known contexts: c, other"));
	free(text);
	up_kube_exposed_free(k);
}

static void test_same_api_host(void **state)
{
	struct up_kube_exposed *k = up_kube_exposed_new();
	char *text = kc("server: 'https://API.a.test:6443/x', certificate-authority-data: " CA_B64,
			"token: " TOKEN, "");
	char why[1024];

	(void)state;
	assert_int_equal(add(k, text, "c", why, sizeof(why)), 0);
	assert_true(add(k, text, "other", why, sizeof(why)) < 0);
	assert_string_equal(why,
			    "--kube-context other: contexts 'other' and 'c' both resolve to API "
			    "server host 'api.a.test'; they cannot both be selected");
	assert_int_equal(k->n, 1);
	assert_string_equal(k->ctx[0].host, "api.a.test");
	free(text);
	up_kube_exposed_free(k);
}

static struct up_kube_exposed *two_contexts(void)
{
	const char *text =
		"clusters:\n"
		"- {name: bear, cluster: {server: 'https://api.bear-1.test:6443', "
		"certificate-authority-data: " CA_B64 "}}\n"
		"- {name: crt, cluster: {server: 'https://10.0.0.1', "
		"certificate-authority-data: " CA_B64 "}}\n"
		"users:\n"
		"- {name: ub, user: {token: " TOKEN ", client-certificate-data: " CERT_B64
		", client-key-data: " KEY_B64 "}}\n"
		"- {name: uc, user: {client-certificate-data: " CERT_B64
		", client-key-data: " KEY_B64 "}}\n"
		"contexts:\n"
		"- {name: b, context: {cluster: bear, user: ub, namespace: team}}\n"
		"- {name: x, context: {cluster: crt, user: uc}}\n";
	struct up_kube_exposed *k = up_kube_exposed_new();
	char why[1024];

	assert_int_equal(add(k, text, "b", why, sizeof(why)), 0);
	assert_int_equal(add(k, text, "x", why, sizeof(why)), 0);
	return k;
}

static void test_credentials_taken(void **state)
{
	struct up_kube_exposed *k = two_contexts();

	(void)state;
	/* A token wins over a client certificate (0.4.1). */
	assert_string_equal(k->ctx[0].token, TOKEN);
	assert_null(k->ctx[0].client_pem);
	assert_null(k->ctx[1].token);
	assert_string_equal(k->ctx[1].client_pem,
			    "-----BEGIN CERTIFICATE-----\nQ0VSVAo=\n-----END CERTIFICATE-----\n"
			    "-----BEGIN PRIVATE KEY-----\nS0VZCg==\n-----END PRIVATE KEY-----\n");
	assert_int_equal(k->ctx[1].client_len, strlen(k->ctx[1].client_pem));
	up_kube_exposed_free(k);
}

static void test_agent_kubeconfig(void **state)
{
	struct up_kube_exposed *k = two_contexts();
	json_t *doc = up_kube_expose_kubeconfig(k, SESSION_CA), *want;
	char *text;

	(void)state;
	assert_non_null(doc);
	want = json_pack("{s:s, s:s, s:s, s:{}, s:[{s:s, s:{s:s, s:s}}, {s:s, s:{s:s, s:s}}],"
			 " s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}],"
			 " s:[{s:s, s:{s:s, s:s, s:s}}, {s:s, s:{s:s, s:s}}]}",
			 "apiVersion", "v1", "kind", "Config", "current-context", "b",
			 "preferences", "clusters", "name", "bear", "cluster", "server",
			 "https://api.bear-1.test:6443", "certificate-authority-data",
			 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClUwVlRVMGxQVGdvPQotLS0tLUVORCBDRVJUS"
			 "UZJQ0FURS0tLS0tCg==",
			 "name", "crt", "cluster", "server", "https://10.0.0.1",
			 "certificate-authority-data",
			 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClUwVlRVMGxQVGdvPQotLS0tLUVORCBDRVJUS"
			 "UZJQ0FURS0tLS0tCg==",
			 "users", "name", "ub", "user", "token", UP_KUBE_PLACEHOLDER_TOKEN, "name",
			 "uc", "user", "token", UP_KUBE_PLACEHOLDER_TOKEN, "contexts", "name", "b",
			 "context", "cluster", "bear", "user", "ub", "namespace", "team", "name",
			 "x", "context", "cluster", "crt", "user", "uc");
	assert_non_null(want);
	text = json_dumps(doc, JSON_SORT_KEYS);
	if (!json_equal(doc, want))
		fail_msg("got %s", text);
	/* No credential of the host's, not even the cluster CA (the agent trusts the mitm). */
	assert_null(strstr(text, TOKEN));
	assert_null(strstr(text, KEY_B64));
	assert_null(strstr(text, CERT_B64));
	assert_null(strstr(text, CA_B64));
	free(text);
	json_decref(want);
	json_decref(doc);
	up_kube_exposed_free(k);
}

static void test_rules(void **state)
{
	struct up_kube_exposed *k = two_contexts();
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array(), *doc, *want;
	/* every method kubectl uses, never TRACE (its answer would echo the token) */
	json_t *methods = json_pack("[s,s,s,s,s,s,s]", "GET", "POST", "PUT", "DELETE", "PATCH",
				    "HEAD", "OPTIONS");

	(void)state;
	assert_int_equal(up_kube_expose_rules(k, rs), 0);
	assert_int_equal(up_ruleset_finish(rs, true, problems), 0);
	doc = up_ruleset_render(rs, true);
	/* Each rule carries its API server's port: the token reaches no other port. */
	want = json_pack("{s:i, s:[{s:s, s:s, s:s, s:[s], s:O, s:i, s:{s:{s:s}}}, {s:s, s:s, s:s, "
			 "s:[s], s:O, s:i, s:{s:[s]}}]}",
			 "version", 1, "rules", "name", "kube-b", "layer", "kube", "source",
			 "kubeconfig:b", "hosts", "api\\.bear\\-1\\.test", "methods", methods,
			 "port", 6443, "inject", "headers", "Authorization", "Bearer " TOKEN,
			 "name", "kube-x", "layer", "kube", "source", "kubeconfig:x", "hosts",
			 "10\\.0\\.0\\.1", "methods", methods, "port", 443, "inject", "remove",
			 "Authorization");
	if (!json_equal(doc, want))
		fail_msg("got %s", json_dumps(doc, 0));
	/* Matches the API host only, any method and path; shown redacted. */
	assert_non_null(up_ruleset_match(rs, "DELETE", "api.bear-1.test", "/api/v1/x?y=1"));
	assert_null(up_ruleset_match(rs, "GET", "api.bear-1.test.evil", "/"));
	assert_null(up_ruleset_match(rs, "GET", "apixbear-1.test", "/"));
	json_decref(doc);
	doc = up_ruleset_render(rs, false);
	char *text = json_dumps(doc, 0);
	assert_null(strstr(text, TOKEN));
	free(text);
	json_decref(doc);
	json_decref(want);
	json_decref(methods);
	json_decref(problems);
	up_ruleset_free(rs);
	up_kube_exposed_free(k);
}

static void test_server_port(void **state)
{
	(void)state;
	assert_int_equal(up_kube_server_port("https://a.test"), 443);
	assert_int_equal(up_kube_server_port("https://a.test/"), 443);
	assert_int_equal(up_kube_server_port("https://a.test:6443/x"), 6443);
	assert_int_equal(up_kube_server_port("https://[::1]:8443"), 8443);
	assert_int_equal(up_kube_server_port("https://[::1]"), 443);
	assert_int_equal(up_kube_server_port("https://u:p@a.test"), -EINVAL);
	assert_int_equal(up_kube_server_port("https://a.test:"), -EINVAL);
	assert_int_equal(up_kube_server_port("https://a.test:0"), -EINVAL);
	assert_int_equal(up_kube_server_port("https://a.test:65536"), -EINVAL);
	assert_int_equal(up_kube_server_port("https://a.test:64x"), -EINVAL);
	assert_int_equal(up_kube_server_port("http://a.test"), -EINVAL);
}

static void test_escape_and_pem(void **state)
{
	char *e = up_regex_escape("api.x-1_y.test");
	size_t n;

	(void)state;
	assert_string_equal(e, "api\\.x\\-1_y\\.test");
	free(e);
	/* a server that is a cluster IP: the addon reads these as naming the IP
	 * (test_addon_connections) */
	e = up_regex_escape("10.43.0.1");
	assert_string_equal(e, "10\\.43\\.0\\.1");
	free(e);
	e = up_regex_escape("fd00:43::1");
	assert_string_equal(e, "fd00\\:43\\:\\:1");
	free(e);
	e = up_pem_concat("CERT", 4, "KEY\n", 4, &n);
	assert_string_equal(e, "CERT\nKEY\n");
	assert_int_equal(n, 9);
	free(e);
	e = up_pem_concat("CERT\n", 5, "KEY", 3, &n);
	assert_string_equal(e, "CERT\nKEY\n");
	free(e);
}

static void test_ca_bundle_appends(void **state)
{
	struct up_kube_exposed *k = two_contexts();
	char *bundle = strdup("MITM-CA-CERT"), *none = NULL;

	(void)state;
	assert_int_equal(up_kube_expose_ca_bundle(k, &bundle), 0);
	assert_string_equal(bundle, "MITM-CA-CERT\n" CA_PEM CA_PEM);
	assert_int_equal(up_kube_expose_ca_bundle(k, &none), 0);
	assert_string_equal(none, CA_PEM CA_PEM);
	free(bundle);
	free(none);
	up_kube_exposed_free(k);
}

static void test_no_proxy(void **state)
{
	(void)state;
	static const char list[] = "localhost,127.0.0.1, ::1,.local";

	assert_true(up_kube_host_no_proxy("127.0.0.1", list));
	assert_true(up_kube_host_no_proxy("::1", list));
	assert_true(up_kube_host_no_proxy("k3s.local", list));
	assert_true(up_kube_host_no_proxy("local", list));
	assert_true(up_kube_host_no_proxy("localhost", list));
	assert_false(up_kube_host_no_proxy("api.example.com", list));
	assert_false(up_kube_host_no_proxy("10.0.0.1", list));
	assert_false(up_kube_host_no_proxy("127.0.0.10", list));
	assert_false(up_kube_host_no_proxy("notlocal", list));
	assert_false(up_kube_host_no_proxy("127.0.0.1", NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusal_order),
		cmocka_unit_test(test_unknown_context_lists_known),
		cmocka_unit_test(test_same_api_host),
		cmocka_unit_test(test_credentials_taken),
		cmocka_unit_test(test_agent_kubeconfig),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_server_port),
		cmocka_unit_test(test_escape_and_pem),
		cmocka_unit_test(test_ca_bundle_appends),
		cmocka_unit_test(test_no_proxy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
