/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubeconfig.h"
#include "knobs.h"

#define D UP_TEST_DATA_DIR "/kubeconfig/"

static struct up_kube_context *load_ok(const char *paths, const char *ctx)
{
	struct up_kube_context *c = NULL;
	char err[1024] = "";
	int r = up_kubeconfig_load(paths, ctx, &c, err, sizeof(err));

	if (r < 0)
		fail_msg("unexpected error: %s", err);
	assert_non_null(c);
	return c;
}

static void load_err(const char *paths, const char *ctx, const char *want)
{
	struct up_kube_context *c = NULL;
	char err[1024] = "";

	assert_true(up_kubeconfig_load(paths, ctx, &c, err, sizeof(err)) < 0);
	assert_null(c);
	assert_string_equal(err, want);
}

static void test_client_cert_data(void **state)
{
	struct up_kube_context *c = load_ok(D "cert.yaml", NULL); /* default: local-k8s-admin */

	(void)state;
	assert_string_equal(c->name, "local-k8s-admin");
	assert_string_equal(c->file, D "cert.yaml");
	assert_string_equal(c->server, "https://127.0.0.1:6443");
	assert_string_equal(c->ca_pem,
			    "-----BEGIN CERTIFICATE-----\nFAKE-CA\n-----END CERTIFICATE-----\n");
	assert_int_equal(c->ca_len, strlen(c->ca_pem));
	assert_non_null(strstr(c->cert_pem, "FAKE-CLIENT"));
	assert_non_null(strstr(c->key_pem, "FAKE-KEY"));
	assert_false(c->insecure);
	assert_null(c->token);
	assert_null(c->exec);
	assert_null(c->namespace);
	up_kube_context_free(c);
}

static void test_token_and_namespace(void **state)
{
	struct up_kube_context *c = load_ok(D "token.yaml", "remote");

	(void)state;
	assert_string_equal(c->token, "sekret-token");
	assert_string_equal(c->namespace, "team-a");
	assert_string_equal(c->tls_server_name, "api.internal");
	assert_null(c->ca_pem); /* the system's roots */
	up_kube_context_free(c);
	c = load_ok(D "token.yaml", "anon");
	assert_null(c->user);
	assert_null(c->token);
	up_kube_context_free(c);
}

static void test_files_resolved_next_to_kubeconfig(void **state)
{
	struct up_kube_context *c = load_ok(D "files.yaml", "good");

	(void)state;
	assert_non_null(strstr(c->ca_pem, "FAKE-CA"));
	assert_non_null(strstr(c->cert_pem, "FAKE-CLIENT"));
	assert_non_null(strstr(c->key_pem, "FAKE-KEY"));
	assert_string_equal(c->token_file, UP_TEST_DATA_DIR "/kubeconfig/token.txt");
	up_kube_context_free(c);
	load_err(D "files.yaml", "bad-key",
		 "kubeconfig " D
		 "files.yaml: user 'u': cannot read client-key /nonexistent/abs/key.pem: "
		 "No such file or directory");
}

static void test_exec(void **state)
{
	struct up_kube_context *c = load_ok(D "exec.yaml", "v1");

	(void)state;
	assert_true(c->insecure);
	assert_string_equal(c->exec->api_version, "client.authentication.k8s.io/v1");
	assert_string_equal(c->exec->argv[0], UP_TEST_DATA_DIR "/kubeconfig/./bin/plugin.sh");
	assert_string_equal(c->exec->argv[1], "token");
	assert_string_equal(c->exec->argv[3], "eks");
	assert_null(c->exec->argv[4]);
	assert_string_equal(c->exec->env[0], "AWS_PROFILE=dev");
	assert_null(c->exec->env[1]);
	assert_true(c->exec->provide_cluster_info);
	assert_string_equal(c->exec->install_hint, "install the plugin");
	up_kube_context_free(c);
	c = load_ok(D "exec.yaml", "v1beta1");
	assert_string_equal(c->exec->argv[0], "aws"); /* a bare name is looked up in PATH */
	up_kube_context_free(c);
	load_err(D "exec.yaml", "alpha",
		 "kubeconfig " D "exec.yaml: user 'alpha': exec apiVersion "
		 "'client.authentication.k8s.io/v1alpha1' is not supported; use "
		 "client.authentication.k8s.io/v1 or v1beta1");
	load_err(D "exec.yaml", "nocmd",
		 "kubeconfig " D "exec.yaml: user 'nocmd': exec has no command");
	load_err(D "exec.yaml", "badargs",
		 "kubeconfig " D "exec.yaml: user 'badargs': exec args must be strings");
}

static void test_merge_first_file_wins(void **state)
{
	struct up_kube_context *c = load_ok(D "merge-a.yaml:" D "merge-b.yaml", "x");

	(void)state;
	assert_string_equal(c->server, "https://a.example");
	assert_string_equal(c->token, "ta");
	assert_string_equal(c->file, D "merge-a.yaml");
	up_kube_context_free(c);
	c = load_ok(D "merge-b.yaml:" D "merge-a.yaml", "x");
	assert_string_equal(c->server, "https://b.example");
	assert_string_equal(c->token, "tb");
	up_kube_context_free(c);
	/* A context of one file may name a user of another. */
	c = load_ok(D "merge-a.yaml:" D "merge-b.yaml", "y");
	assert_string_equal(c->server, "https://only-b.example");
	assert_string_equal(c->token, "ta");
	up_kube_context_free(c);
	/* current-context comes from the first file that sets one. */
	c = load_ok(D "merge-a.yaml:" D "merge-b.yaml", "");
	assert_string_equal(c->name, "from-a");
	up_kube_context_free(c);
	c = load_ok(D "merge-b.yaml:" D "merge-a.yaml", "");
	assert_string_equal(c->name, "from-b");
	up_kube_context_free(c);
}

static void test_missing_and_empty_files_skipped(void **state)
{
	struct up_kube_context *c =
		load_ok("/nonexistent/kubeconfig::" D "empty.yaml:" D "merge-b.yaml", "y");

	(void)state;
	assert_string_equal(c->server, "https://only-b.example");
	up_kube_context_free(c);
	load_err("/nonexistent/one:/nonexistent/two", "x",
		 "no kubeconfig found at /nonexistent/one, /nonexistent/two; point KUBECONFIG at "
		 "one, or copy your cluster's (k3s writes /etc/rancher/k3s/k3s.yaml) to "
		 "~/.kube/config");
}

static void test_env_and_home(void **state)
{
	struct up_kube_context *c;

	(void)state;
	setenv("KUBECONFIG", D "token.yaml", 1);
	up_knobs_load();
	c = load_ok(NULL, "remote");
	assert_string_equal(c->token, "sekret-token");
	up_kube_context_free(c);
	unsetenv("KUBECONFIG");
	setenv("HOME", "/nonexistent-home", 1);
	up_knobs_load();
	load_err(NULL, NULL,
		 "no kubeconfig found at /nonexistent-home/.kube/config; point KUBECONFIG at one, "
		 "or "
		 "copy your cluster's (k3s writes /etc/rancher/k3s/k3s.yaml) to ~/.kube/config");
}

static void test_context_errors(void **state)
{
	(void)state;
	load_err(D "merge-a.yaml:" D "merge-b.yaml", "nope",
		 "kubeconfig " D "merge-a.yaml, " D "merge-b.yaml has no context 'nope'; known "
		 "contexts: x, from-a, y, from-b");
	load_err(D "no-current.yaml", "",
		 "kubeconfig " D "no-current.yaml sets no current-context; name one with "
		 "--deploy-context (known contexts: one, two)");
	load_err(D "no-current.yaml", NULL,
		 "kubeconfig " D
		 "no-current.yaml has no context 'local-k8s-admin'; known contexts: one, two");
}

static void test_malformed(void **state)
{
	(void)state;
	load_err(D "malformed.yaml", "c",
		 "kubeconfig " D "malformed.yaml is not valid YAML: line 4, column 1: did not find "
		 "expected ',' or '}'");
	load_err(D "list.yaml", "c",
		 "kubeconfig " D "list.yaml is not a mapping of clusters, users and contexts");
	load_err(D "anchors.yaml", "one",
		 "kubeconfig " D
		 "anchors.yaml is not valid YAML: line 2, column 3: anchors (&name) "
		 "are not supported");
}

static void test_broken_entries(void **state)
{
	(void)state;
	load_err(D "broken.yaml", "noserver",
		 "kubeconfig " D "broken.yaml: cluster 'noserver' has no server");
	load_err(D "broken.yaml", "ftp",
		 "kubeconfig " D
		 "broken.yaml: cluster 'ftp': server 'ftp://x' is not an http(s) URL");
	load_err(D "broken.yaml", "both-ca",
		 "kubeconfig " D
		 "broken.yaml: cluster 'both-ca' sets both certificate-authority-data "
		 "and certificate-authority; keep one");
	load_err(D "broken.yaml", "insecure-ca",
		 "kubeconfig " D
		 "broken.yaml: cluster 'insecure-ca' sets both a certificate authority "
		 "and insecure-skip-tls-verify; keep one");
	load_err(D "broken.yaml", "missing-cluster",
		 "kubeconfig " D
		 "broken.yaml: context 'missing-cluster' names cluster 'nope', which no "
		 "file defines");
	load_err(D "broken.yaml", "missing-user",
		 "kubeconfig " D
		 "broken.yaml: context 'missing-user' names user 'ghost', which no file "
		 "defines");
	load_err(D "broken.yaml", "no-cluster",
		 "kubeconfig " D "broken.yaml: context 'no-cluster' names no cluster");
	load_err(D "broken.yaml", "cert-only",
		 "kubeconfig " D
		 "broken.yaml: user 'cert-only' has a client certificate but no client key");
	load_err(D "broken.yaml", "bad64",
		 "kubeconfig " D "broken.yaml: user 'bad64': client-key-data is not valid base64");
	load_err(D "broken.yaml", "gcp",
		 "kubeconfig " D
		 "broken.yaml: user 'gcp' uses auth-provider 'gcp', which uplink does "
		 "not support; switch it to an exec plugin (for GKE: gke-gcloud-auth-plugin)");
	load_err(D "broken.yaml", "basic",
		 "kubeconfig " D
		 "broken.yaml: user 'basic' uses basic auth (username/password), which "
		 "Kubernetes removed; use a token or a client certificate");
}

static void test_contexts_listing(void **state)
{
	json_t *names = NULL;
	char *current = NULL, err[512];

	(void)state;
	assert_int_equal(up_kubeconfig_contexts(D "merge-a.yaml:" D "merge-b.yaml", &names,
						&current, err, sizeof(err)),
			 0);
	/* x is listed once: the second file's x is shadowed. */
	assert_int_equal(json_array_size(names), 4);
	assert_string_equal(json_string_value(json_array_get(names, 0)), "x");
	assert_string_equal(json_string_value(json_array_get(names, 3)), "from-b");
	assert_string_equal(current, "from-a");
	json_decref(names);
	free(current);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_cert_data),
		cmocka_unit_test(test_token_and_namespace),
		cmocka_unit_test(test_files_resolved_next_to_kubeconfig),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_merge_first_file_wins),
		cmocka_unit_test(test_missing_and_empty_files_skipped),
		cmocka_unit_test(test_env_and_home),
		cmocka_unit_test(test_context_errors),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_broken_entries),
		cmocka_unit_test(test_contexts_listing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
