/* SPDX-License-Identifier: Apache-2.0 */
/* Rules once loaded: layering, matching, the decision's trace, rendering for the addon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "rules.h"

static struct up_ruleset *finished(const char *user, bool no_defaults, int *ret)
{
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p = json_array();

	assert_int_equal(up_ruleset_load_agent(rs, "claude", "bedrock", p), 0);
	if (user)
		assert_int_equal(
			up_ruleset_load_string(rs, UP_LAYER_USER, "u.yaml", user, strlen(user), p),
			0);
	*ret = up_ruleset_finish(rs, no_defaults, p);
	json_decref(p);
	return rs;
}

static void test_layering(void **state)
{
	int r;
	struct up_ruleset *rs =
		finished("rules:\n  - name: aws\n    hosts: ['.*\\.amazonaws\\.com']\n", false, &r);
	const char *order[] = {"bedrock-auth", "aws", "claude-logs", "default-readonly"};
	const struct up_rule *m;

	assert_int_equal(r, 0);
	assert_int_equal(up_ruleset_count(rs), 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(up_ruleset_get(rs, i)->name, order[i]);
	/* a broad user rule does not shadow the auth rule */
	m = up_ruleset_match(rs, "POST", "bedrock-runtime.us-east-1.amazonaws.com",
			     "/model/x/invoke");
	assert_string_equal(m->name, "bedrock-auth");
	assert_int_equal(m->layer, UP_LAYER_AUTH);
	m = up_ruleset_match(rs, "POST", "s3.amazonaws.com", "/");
	assert_string_equal(m->name, "aws");
	assert_string_equal(m->source, "u.yaml:2");
	m = up_ruleset_match(rs, "GET", "example.org", "/");
	assert_string_equal(m->name, "default-readonly");
	assert_null(up_ruleset_match(rs, "POST", "example.org", "/"));
	up_ruleset_free(rs);

	rs = finished("rules:\n  - hosts: [x]\n", true, &r);
	assert_int_equal(r, 0);
	assert_int_equal(up_ruleset_count(rs), 1);
	assert_string_equal(up_ruleset_get(rs, 0)->name, "<rule[0]>");
	up_ruleset_free(rs);

	rs = finished("replace_defaults: true\nrules:\n  - name: only\n    hosts: [x]\n", false,
		      &r);
	assert_int_equal(r, 0);
	assert_int_equal(up_ruleset_count(rs), 1);
	assert_null(up_ruleset_match(rs, "GET", "example.org", "/"));
	up_ruleset_free(rs);
}

static void test_no_rules(void **state)
{
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p = json_array();

	assert_int_equal(up_ruleset_finish(rs, true, p), -ENOENT);
	assert_string_equal(json_string_value(json_array_get(p, 0)),
			    "no rules loaded; uplink would deny everything. Give a rules file with "
			    "--rules, or drop --no-default-rules / replace_defaults");
	json_decref(p);
	up_ruleset_free(rs);
	/* replace_defaults with an empty user layer: the same */
	rs = up_ruleset_new();
	p = json_array();
	assert_int_equal(
		up_ruleset_load_string(rs, UP_LAYER_USER, "t", "replace_defaults: true\n", 23, p),
		0);
	assert_int_equal(up_ruleset_finish(rs, false, p), -ENOENT);
	json_decref(p);
	up_ruleset_free(rs);
}

static void test_matching(void **state)
{
	int r;
	struct up_ruleset *rs =
		finished("rules:\n"
			 "  - name: api\n    host: 'api\\.example\\.com'\n    methods: [POST]\n"
			 "    paths: ['/v1/items(\\?.*)?']\n"
			 "  - name: alt\n    hosts: ['a|ab']\n    methods: []\n",
			 true, &r);

	assert_int_equal(r, 0);
	assert_non_null(up_ruleset_match(rs, "POST", "api.example.com", "/v1/items"));
	assert_non_null(up_ruleset_match(rs, "POST", "API.Example.COM", "/v1/items?x=1"));
	assert_null(up_ruleset_match(rs, "POST", "api.example.com.evil.net", "/v1/items"));
	assert_null(up_ruleset_match(rs, "POST", "xapi.example.com", "/v1/items"));
	assert_null(up_ruleset_match(rs, "POST", "api.example.com", "/v1/items/2"));
	assert_null(up_ruleset_match(rs, "POST", "api.example.com", "/x/v1/items"));
	assert_null(up_ruleset_match(rs, "GET", "api.example.com", "/v1/items"));
	/* full match tries every alternative, like Python's fullmatch */
	assert_non_null(up_ruleset_match(rs, "DELETE", "ab", "/"));
	assert_non_null(up_ruleset_match(rs, "PROPFIND", "a", "/"));
	assert_null(up_ruleset_match(rs, "GET", "abc", "/"));
	up_ruleset_free(rs);
}

static void test_unsafe_paths(void **state)
{
	static const char *const unsafe[] = {
		"/ok/../x",  "/ok/%2e%2e/x", "/ok/%2E./x", "/ok/..%2fx", "/ok/..%2Fx",
		"/ok/a%5cx", "/ok/a\\x",     "/ok/./x",	   "/ok/..;/x",	 "/ok/.;a/x",
		"/ok/x/..",  "/..",	     ".",
	};
	static const char *const safe[] = {
		"/",	   "/ok/x",  "/ok/.well-known/a", "/ok/...", "/ok/a..b", "/ok/x?y=../z%2f",
		"/ok/%25", "/ok/%2", "/ok/x%2",		  "/ok/%20",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
		if (!up_path_unsafe(unsafe[i]))
			fail_msg("%s taken as safe", unsafe[i]);
	for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++)
		if (up_path_unsafe(safe[i]))
			fail_msg("%s refused", safe[i]);
}

static void test_overrides_and_trace(void **state)
{
	int r;
	struct up_ruleset *rs =
		finished("rules:\n"
			 "  - name: post\n    host: 'p\\.example'\n    methods: [POST]\n"
			 "  - name: ok\n    host: 'o\\.example'\n    paths: ['/ok/.*']\n"
			 "  - name: inj\n    host: 'i\\.example'\n"
			 "    inject: {headers: {Authorization: 'Bearer x'}}\n"
			 "  - name: plain\n    host: 't\\.example'\n",
			 true, &r);
	const char *const del[] = {"DELETE", NULL}, *const post[] = {" post\t", NULL};
	const char *const track[] = {"track", NULL}, *const long_v[] = {"POSTPOSTPOSTPOSTPOST",
									NULL};

	(void)state;
	assert_int_equal(r, 0);
	assert_null(up_ruleset_match_overrides(rs, "POST", "p.example", 0, "/", del));
	assert_null(up_ruleset_match_overrides(rs, "POST", "p.example", 0, "/", long_v));
	assert_non_null(up_ruleset_match_overrides(rs, "POST", "p.example", 0, "/", post));
	assert_non_null(up_ruleset_match(rs, "POST", "p.example", "/"));
	/* a rule without methods ignores overrides, but an injecting one never takes TRACE */
	assert_non_null(up_ruleset_match_overrides(rs, "GET", "o.example", 0, "/ok/x", del));
	assert_null(up_ruleset_match(rs, "GET", "o.example", "/ok/../x"));
	assert_null(up_ruleset_match(rs, "TRACE", "i.example", "/"));
	assert_null(up_ruleset_match(rs, "trace", "i.example", "/"));
	assert_null(up_ruleset_match_overrides(rs, "GET", "i.example", 0, "/", track));
	assert_non_null(up_ruleset_match(rs, "GET", "i.example", "/"));
	assert_non_null(up_ruleset_match(rs, "TRACE", "t.example", "/"));
	up_ruleset_free(rs);
}

static void test_l4_and_connect(void **state)
{
	int r;
	const struct up_rule *rule;
	struct up_ruleset *rs =
		finished("rules:\n"
			 "  - name: db\n    l4_forward: true\n    cidrs: [192.168.149.50/24, "
			 "'2001:db8::1/32']\n"
			 "  - name: git\n    l4_forward: true\n    hosts: ['git\\.example\\.com']\n"
			 "  - name: any\n    hosts: ['.*']\n",
			 true, &r);

	assert_int_equal(r, 0);
	assert_string_equal(up_ruleset_get(rs, 0)->cidrs[0], "192.168.149.0/24");
	assert_string_equal(up_ruleset_get(rs, 0)->cidrs[1], "2001:db8::/32");
	assert_int_equal(up_ruleset_evaluate(rs, "GET", true, "192.168.149.9", 0, "/", &rule),
			 UP_DECISION_L4);
	assert_string_equal(rule->name, "db");
	assert_int_equal(up_ruleset_evaluate(rs, "GET", true, "[2001:db8::5]", 0, "/", &rule),
			 UP_DECISION_L4);
	assert_int_equal(up_ruleset_evaluate(rs, "GET", true, "GIT.example.com", 0, "/", &rule),
			 UP_DECISION_L4);
	assert_string_equal(rule->name, "git");
	/* plain http never tunnels: L4 rules do not apply */
	assert_int_equal(up_ruleset_evaluate(rs, "GET", false, "git.example.com", 0, "/", &rule),
			 UP_DECISION_ALLOW);
	assert_string_equal(rule->name, "any");
	assert_int_equal(up_ruleset_evaluate(rs, "GET", true, "10.1.1.1", 0, "/", &rule),
			 UP_DECISION_ALLOW);
	up_ruleset_free(rs);
}

static void test_render(void **state)
{
	int r;
	struct up_ruleset *rs = finished(
		"rules:\n  - name: gh\n    hosts: [x]\n    methods: [GET, POST]\n    paths: "
		"['/a']\n"
		"    inject:\n      headers:\n        Authorization: 'Bearer {{keyring:s:u}}'\n"
		"  - name: t\n    l4_forward: true\n    cidrs: [10.1.2.3/8]\n",
		true, &r);
	json_t *doc;
	char *s;

	assert_int_equal(r, 0);
	doc = up_ruleset_render(rs, false);
	s = json_dumps(doc, JSON_COMPACT);
	assert_string_equal(
		s, "{\"version\":1,\"rules\":[{\"name\":\"gh\",\"layer\":\"user\",\"source\":\"u."
		   "yaml:2\","
		   "\"hosts\":[\"x\"],\"methods\":[\"GET\",\"POST\"],\"paths\":[\"/"
		   "a\"],\"inject\":{\"headers\":"
		   "{\"Authorization\":\"Bearer "
		   "{{keyring:s:u}}\"}}},{\"name\":\"t\",\"layer\":\"user\","
		   "\"source\":\"u.yaml:9\",\"l4_forward\":true,\"cidrs\":[\"10.0.0.0/8\"]}]}");
	free(s);
	json_decref(doc);
	assert_int_equal(
		up_rule_header_set_value(&up_ruleset_get(rs, 0)->headers[0], "Bearer S3CRET"), 0);
	doc = up_ruleset_render(rs, false);
	s = json_dumps(doc, JSON_COMPACT);
	assert_null(strstr(s, "S3CRET"));
	assert_non_null(strstr(s, "\"Authorization\":\"<redacted>\""));
	free(s);
	json_decref(doc);
	doc = up_ruleset_render(rs, true);
	s = json_dumps(doc, JSON_COMPACT);
	assert_non_null(strstr(s, "\"Authorization\":\"Bearer S3CRET\""));

	/* and back: the JSON reads into the same set */
	{
		struct up_ruleset *back = up_ruleset_new();
		json_t *p = json_array();
		json_t *again;
		char *s2;
		assert_int_equal(up_ruleset_load_json(back, doc, p), 0);
		again = up_ruleset_render(back, true);
		s2 = json_dumps(again, JSON_COMPACT);
		assert_string_equal(s, s2);
		free(s2);
		json_decref(again);
		json_decref(p);
		up_ruleset_free(back);
	}
	free(s);
	json_decref(doc);
	up_ruleset_free(rs);
}

/* inject.remove (kube client-certificate rules) renders and reads back; bad entries are refused. */
static void test_render_remove_round_trip(void **state)
{
	const char *text = "{\"version\":1,\"rules\":[{\"name\":\"kube-x\",\"layer\":\"kube\","
			   "\"source\":\"kubeconfig:x\",\"hosts\":[\"10\\\\.0\\\\.0\\\\.1\"],"
			   "\"inject\":{\"remove\":[\"Authorization\"]}}]}";
	json_t *doc = json_loads(text, 0, NULL), *p = json_array(), *again;
	struct up_ruleset *rs = up_ruleset_new();
	char *s;

	(void)state;
	assert_non_null(doc);
	assert_int_equal(up_ruleset_load_json(rs, doc, p), 0);
	assert_int_equal(up_ruleset_get(rs, 0)->n_remove, 1);
	assert_int_equal(up_ruleset_get(rs, 0)->n_headers, 0);
	again = up_ruleset_render(rs, false);
	s = json_dumps(again, JSON_COMPACT);
	assert_string_equal(s, text);
	free(s);
	json_decref(again);
	up_ruleset_free(rs);
	json_decref(doc);
	static const char *const bad[] = {"{\"remove\":\"Authorization\"}",
					  "{\"remove\":[\"a b\"]}", "{\"remove\":[1]}", "{}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t;
		assert_true(asprintf(&t,
				     "{\"version\":1,\"rules\":[{\"name\":\"r\",\"layer\":\"user\","
				     "\"hosts\":[\"a\"],\"inject\":%s}]}",
				     bad[i]) > 0);
		doc = json_loads(t, 0, NULL);
		rs = up_ruleset_new();
		assert_true(up_ruleset_load_json(rs, doc, p) < 0);
		up_ruleset_free(rs);
		json_decref(doc);
		free(t);
	}
	json_decref(p);
}

static void test_aws_sign_render(void **state)
{
	int r;
	struct up_ruleset *rs =
		finished("rules:\n  - name: sts\n    hosts: ['sts\\.amazonaws\\.com', "
			 "'sts\\.[a-z0-9-]+\\.amazonaws\\.com$']\n    methods: [POST]\n"
			 "    aws_allow_credential_actions: [AssumeRole]\n"
			 "  - name: mixed\n    hosts: ['s3\\.amazonaws\\.com', 'minio\\.example']\n"
			 "  - name: any\n    hosts: ['.*']\n    methods: [PUT]\n",
			 false, &r);
	json_t *doc, *v;
	size_t i, n_sign = 0;

	assert_int_equal(r, 0);
	doc = up_ruleset_render(rs, false);
	json_array_foreach (json_object_get(doc, "rules"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *layer = json_string_value(json_object_get(v, "layer"));
		bool sign = json_is_true(json_object_get(v, "aws_sign"));
		if (streq(layer, "generic"))
			assert_false(sign);
		if (streq(name, "sts")) {
			assert_true(sign);
			assert_string_equal(
				json_string_value(json_array_get(
					json_object_get(v, "aws_allow_credential_actions"), 0)),
				"AssumeRole");
		}
		if (streq(name, "mixed") || streq(name, "any"))
			assert_false(sign);
		if (!streq(name, "sts"))
			assert_null(json_object_get(v, "aws_allow_credential_actions"));
		n_sign += sign;
	}
	/* sts, and the agent's own bedrock auth rule (it names bedrock-runtime hosts) */
	assert_int_equal(n_sign, 2);
	{ /* and back: the actions survive the proxy's JSON */
		struct up_ruleset *back = up_ruleset_new();
		json_t *p = json_array(), *again;
		char *a = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS), *b;
		assert_int_equal(up_ruleset_load_json(back, doc, p), 0);
		again = up_ruleset_render(back, true); /* values read back count as resolved */
		b = json_dumps(again, JSON_COMPACT | JSON_SORT_KEYS);
		assert_string_equal(a, b);
		free(a);
		free(b);
		json_decref(again);
		json_decref(p);
		up_ruleset_free(back);
	}
	json_decref(doc);
	up_ruleset_free(rs);
	/* a generic-layer rule never re-signs, whatever its hosts */
	{
		struct up_rule g = {.layer = UP_LAYER_GENERIC,
				    .n_hosts = 1,
				    .hosts = (char *[]){"x\\.amazonaws\\.com"}};
		assert_false(up_rule_aws_sign(&g));
		g.layer = UP_LAYER_USER;
		assert_true(up_rule_aws_sign(&g));
		g.l4 = true;
		assert_false(up_rule_aws_sign(&g));
	}
}

/* A rule's port is part of the decision: evaluate, as the proxy, takes the URL's port. */
static void test_port(void **state)
{
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p = json_array();
	json_t *doc = json_pack("{s:i, s:[{s:s, s:s, s:[s], s:i}, {s:s, s:s, s:[s], s:[s]}]}",
				"version", 1, "rules", "name", "kube-dev", "layer", "kube", "hosts",
				"api\\.k8s\\.test", "port", 6443, "name", "ro", "layer", "generic",
				"hosts", ".*", "methods", "GET");
	const struct up_rule *rule;

	assert_int_equal(up_ruleset_load_json(rs, doc, p), 0);
	assert_int_equal(up_ruleset_evaluate(rs, "POST", true, "api.k8s.test", 6443, "/x", &rule),
			 UP_DECISION_ALLOW);
	assert_string_equal(rule->name, "kube-dev");
	assert_int_equal(up_ruleset_evaluate(rs, "POST", true, "api.k8s.test", 443, "/x", &rule),
			 UP_DECISION_DENY);
	assert_int_equal(up_ruleset_evaluate(rs, "POST", true, "api.k8s.test", 0, "/x", &rule),
			 UP_DECISION_DENY); /* 0: https's 443 */
	assert_int_equal(up_ruleset_evaluate(rs, "GET", true, "api.k8s.test", 8443, "/x", &rule),
			 UP_DECISION_ALLOW);
	assert_string_equal(rule->name, "ro");
	assert_non_null(up_ruleset_match(rs, "POST", "api.k8s.test", "/x")); /* ports left out */
	assert_null(up_ruleset_match_port(rs, "POST", "api.k8s.test", 443, "/x"));
	assert_int_equal(up_url_port("https://a.test/x"), 443);
	assert_int_equal(up_url_port("http://a.test?x"), 80);
	assert_int_equal(up_url_port("https://u@a.test:6443/x"), 6443);
	assert_int_equal(up_url_port("https://[::1]:8443"), 8443);
	assert_int_equal(up_url_port("https://[::1]/"), 443);
	assert_int_equal(up_url_port("https://a.test:0/"), -EINVAL);
	assert_int_equal(up_url_port("https://a.test:65536/"), -EINVAL);
	assert_int_equal(up_url_port("https://a.test:+1/"), -EINVAL);
	assert_int_equal(up_url_port("https://a.test:/"), -EINVAL);
	json_decref(doc);
	json_decref(p);
	up_ruleset_free(rs);
}

static void test_url_split(void **state)
{
	char host[256], path[1024], why[128];
	bool https;

	assert_int_equal(up_url_split("https://User@API.Example.com:8443/a/b?c=d#frag", &https,
				      host, sizeof(host), path, sizeof(path), why, sizeof(why)),
			 0);
	assert_true(https);
	assert_string_equal(host, "api.example.com");
	assert_string_equal(path, "/a/b?c=d");
	assert_int_equal(up_url_split("http://[::1]:80?x", &https, host, sizeof(host), path,
				      sizeof(path), why, sizeof(why)),
			 0);
	assert_false(https);
	assert_string_equal(host, "::1");
	assert_string_equal(path, "/?x");
	assert_int_equal(up_url_split("ftp://x/", &https, host, sizeof(host), path, sizeof(path),
				      why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "the URL must start with http:// or https://");
	assert_int_equal(up_url_split("https:///x", &https, host, sizeof(host), path, sizeof(path),
				      why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "the URL has no host");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layering),
		cmocka_unit_test(test_no_rules),
		cmocka_unit_test(test_matching),
		cmocka_unit_test(test_l4_and_connect),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_render_remove_round_trip),
		cmocka_unit_test(test_aws_sign_render),
		cmocka_unit_test(test_port),
		cmocka_unit_test(test_url_split),
		cmocka_unit_test(test_unsafe_paths),
		cmocka_unit_test(test_overrides_and_trace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
