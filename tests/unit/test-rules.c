/* SPDX-License-Identifier: Apache-2.0 */
/* The rules parser (every validation message, in full), layering, matching and rendering. */
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

/* Loads text as a user file "t.yaml"; returns the problems (owned). */
static json_t *load(struct up_ruleset *rs, const char *text, int *ret)
{
	json_t *problems = json_array();

	*ret = up_ruleset_load_string(rs, UP_LAYER_USER, "t.yaml", text, strlen(text), problems);
	return problems;
}

static void expect_problems(const char *text, const char *const *expected)
{
	struct up_ruleset *rs = up_ruleset_new();
	int r;
	json_t *p = load(rs, text, &r);
	size_t n = 0;

	for (; expected[n]; n++) {
		const char *got = json_string_value(json_array_get(p, n));
		if (!got || strcmp(got, expected[n]) != 0)
			fail_msg("problem %zu:\n  got:      %s\n  expected: %s", n,
				 got ? got : "(none)", expected[n]);
	}
	if (json_array_size(p) != n)
		fail_msg("%zu problems, expected %zu; extra: %s", json_array_size(p), n,
			 json_string_value(json_array_get(p, n)));
	assert_int_equal(r, n ? -EINVAL : 0);
	assert_int_equal(up_ruleset_count(rs), n ? 0 : up_ruleset_count(rs));
	json_decref(p);
	up_ruleset_free(rs);
}

#define EXPECT(text, ...)                                     \
	do {                                                  \
		const char *const e_[] = {__VA_ARGS__, NULL}; \
		expect_problems(text, e_);                    \
	} while (0)

static void test_top_level_errors(void **state)
{
	EXPECT("- a\n- b\n",
	       "t.yaml:1:1: expected a YAML mapping at the top level, with a 'rules' list");
	EXPECT("just text\n",
	       "t.yaml:1:1: expected a YAML mapping at the top level, with a 'rules' list");
	EXPECT("42\n", "t.yaml:1:1: expected a YAML mapping at the top level, with a 'rules' list");
	EXPECT("rule: []\n", "t.yaml:1:1: unknown key 'rule' at the top level; expected 'rules' or "
			     "'replace_defaults'");
	EXPECT("rules: {a: 1}\n",
	       "t.yaml:1:8: 'rules' must be a list of rules (each item starting with '- ')");
	EXPECT("replace_defaults: maybe\n",
	       "t.yaml:1:19: 'replace_defaults' must be true or false");
	EXPECT("rules: []\nrules: []\n", "t.yaml:2:1: duplicate key 'rules'; keep only one");
	EXPECT("rules: [\n", "t.yaml:2:1: YAML syntax error: did not find expected node content "
			     "while parsing a flow node");
	EXPECT("a: &x 1\nb: *x\n",
	       "t.yaml:2:4: YAML aliases (*name) are not supported in rules files; "
	       "write the value out");
	EXPECT("rules: []\n---\nrules: []\n",
	       "t.yaml:2:1: a rules file holds one YAML document; remove the second '---'");
	EXPECT("rules:\n  - 42\n",
	       "t.yaml:2:5: rule #1 must be a mapping with 'name', 'hosts' and so on");
}

static void test_empty_files(void **state)
{
	EXPECT("", NULL);
	EXPECT("# nothing\n", NULL);
	EXPECT("rules:\n", NULL);
	EXPECT("rules: []\nreplace_defaults: false\n", NULL);
}

static void test_host_errors(void **state)
{
	EXPECT("rules:\n  - name: a\n    methods: [GET]\n",
	       "t.yaml:2:5: rule 'a': missing required field 'hosts'; list the host regexes this "
	       "rule allows, e.g. hosts: ['api\\.example\\.com']");
	EXPECT("rules:\n  - name: a\n    host: x\n    hosts: [y]\n",
	       "t.yaml:4:5: rule 'a': both 'host' and 'hosts' are set; keep only 'hosts'");
	EXPECT("rules:\n  - name: a\n    host: [x]\n",
	       "t.yaml:3:11: rule 'a': 'host' must be a string regex");
	EXPECT("rules:\n  - name: a\n    hosts: x\n",
	       "t.yaml:3:12: rule 'a': 'hosts' must be a list of regex strings, e.g. hosts: "
	       "['api\\.example\\.com']");
	EXPECT("rules:\n  - name: a\n    hosts: []\n",
	       "t.yaml:3:12: rule 'a': 'hosts' is an empty list; list at least one host");
	EXPECT("rules:\n  - name: a\n    hosts: [ok, [x]]\n",
	       "t.yaml:3:17: rule 'a': 'hosts' must be a list of regex strings; this entry is not "
	       "a string");
	EXPECT("rules:\n  - name: a\n    hosts: ['a(b']\n",
	       "t.yaml:3:13: rule 'a': invalid host regex 'a(b': missing closing parenthesis at "
	       "offset 3");
	EXPECT("rules:\n  - name: a\n    host: 'a[b'\n",
	       "t.yaml:3:11: rule 'a': invalid host regex 'a[b': missing terminating ] for "
	       "character "
	       "class at offset 3");
	EXPECT("rules:\n  - hosts: ['*']\n", "t.yaml:2:13: rule #1 (unnamed): invalid host regex "
					     "'*': quantifier does not follow a "
					     "repeatable item at offset 0");
}

static void test_rule_key_errors(void **state)
{
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    method: [GET]\n",
	       "t.yaml:4:5: rule 'a': unknown key 'method'; did you mean 'methods'?");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    path: [/]\n",
	       "t.yaml:4:5: rule 'a': unknown key 'path'; did you mean 'paths'?");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    headers: {}\n",
	       "t.yaml:4:5: rule 'a': unknown key 'headers'; did you mean 'inject'?");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    colour: red\n",
	       "t.yaml:4:5: rule 'a': unknown key 'colour'; a rule has name, hosts (or host), "
	       "methods, "
	       "paths, inject, refresh, aws_allow_credential_actions, l4_forward and cidrs");
	EXPECT("rules:\n  - name: [a]\n    hosts: [x]\n",
	       "t.yaml:2:11: rule #1 (unnamed): 'name' must be a string");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    hosts: [y]\n",
	       "t.yaml:4:5: rule 'a': duplicate key 'hosts'; keep only one");
}

static void test_method_path_errors(void **state)
{
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    methods: GET\n",
	       "t.yaml:4:14: rule 'a': 'methods' must be a list of strings, e.g. methods: [GET, "
	       "POST]");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    methods: [GET, get, FETCH]\n",
	       "t.yaml:4:20: rule 'a': invalid method 'get'; methods are uppercase HTTP verbs: "
	       "GET, "
	       "POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE",
	       "t.yaml:4:25: rule 'a': invalid method 'FETCH'; methods are uppercase HTTP verbs: "
	       "GET, "
	       "POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    methods: [[GET]]\n",
	       "t.yaml:4:15: rule 'a': 'methods' must be a list of strings; this entry is not a "
	       "string");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    paths: []\n",
	       "t.yaml:4:12: rule 'a': 'paths' is an empty list, which would match no path; omit "
	       "'paths' entirely to allow any path");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    paths: /x\n",
	       "t.yaml:4:12: rule 'a': 'paths' must be a list of regex strings, e.g. paths: "
	       "['/v1/.*']");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    paths: ['/(x']\n",
	       "t.yaml:4:13: rule 'a': invalid path regex '/(x': missing closing parenthesis at "
	       "offset 3");
}

static void test_inject_errors(void **state)
{
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: [x]\n",
	       "t.yaml:4:13: rule 'a': 'inject' must be a mapping with a 'headers' mapping");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {header: {}}\n",
	       "t.yaml:4:14: rule 'a': unknown key 'header' under 'inject'; expected 'headers'");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: [x]}\n",
	       "t.yaml:4:23: rule 'a': 'inject.headers' must be a mapping of header names to "
	       "strings");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {X-A: [1]}}\n",
	       "t.yaml:4:29: rule 'a': header 'X-A' must be a string; quote the value");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {'a b': v}}\n",
	       "t.yaml:4:24: rule 'a': 'a b' is not a valid HTTP header name (letters, digits and "
	       "!#$%&'*+-.^_`|~)");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: "
	       "'{{keyring:svc}}'}}\n",
	       "t.yaml:4:27: rule 'a': header 'A': malformed keyring placeholder; write "
	       "{{keyring:SERVICE:USER}}");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: 'x {{exec:date'}}\n",
	       "t.yaml:4:27: rule 'a': header 'A': unterminated exec placeholder; end it with }}");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: '{{exec:}}'}}\n",
	       "t.yaml:4:27: rule 'a': header 'A': empty exec placeholder; write {{exec:COMMAND}}");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: \"x\\ny\"}}\n",
	       "t.yaml:4:27: rule 'a': header 'A': a header value cannot hold a line break, "
	       "another "
	       "control character, or a character outside Latin-1");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: 'caf\xc3\xa9 "
	       "\xe2\x82\xac'}}\n",
	       "t.yaml:4:27: rule 'a': header 'A': a header value cannot hold a line break, "
	       "another "
	       "control character, or a character outside Latin-1");
}

static void test_refresh(void **state)
{
	static const char ok[] =
		"rules:\n  - name: a\n    hosts: [x]\n    refresh: 30m\n"
		"    inject:\n      headers:\n        X-T: 'Bearer {{exec:get-token}}'\n";
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p;
	int r;

	(void)state;
	p = load(rs, ok, &r);
	assert_int_equal(r, 0);
	assert_int_equal(json_array_size(p), 0);
	assert_int_equal(up_ruleset_get(rs, 0)->refresh_s, 1800);
	json_decref(p);
	up_ruleset_free(rs);
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    refresh: soon\n"
	       "    inject: {headers: {X: '{{exec:t}}'}}\n",
	       "t.yaml:4:14: rule 'a': 'refresh': invalid duration 'soon'; use forms like 30m, 2h, "
	       "1d");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    refresh: 30s\n"
	       "    inject: {headers: {X: '{{exec:t}}'}}\n",
	       "t.yaml:4:14: rule 'a': 'refresh' must be at least 1m, not 30s");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    refresh: [1h]\n"
	       "    inject: {headers: {X: '{{exec:t}}'}}\n",
	       "t.yaml:4:14: rule 'a': 'refresh' must be a duration such as 30m or 12h");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    refresh: 1h\n"
	       "    inject: {headers: {X: '{{keyring:s:u}}'}}\n",
	       "t.yaml:4:5: rule 'a': 'refresh' renews {{exec:...}} values, and this rule's "
	       "inject.headers have none; remove it");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    refresh: 1h\n",
	       "t.yaml:4:5: rule 'a': 'refresh' renews {{exec:...}} values, and this rule's "
	       "inject.headers have none; remove it");
	EXPECT("rules:\n  - name: a\n    l4_forward: true\n    hosts: [x]\n    refresh: 1h\n",
	       "t.yaml:5:5: rule 'a': l4_forward rule cannot set 'refresh': an L4 rule forwards "
	       "whole "
	       "connections, so there is no method, path or header to act on; remove it or write "
	       "a separate HTTP rule");
}

static void test_l4_errors(void **state)
{
	static const char *const why =
		"an L4 rule forwards whole connections, so there is no method, "
		"path or header to act on; remove it or write a separate HTTP rule";
	char e1[512], e2[512];

	EXPECT("rules:\n  - name: t\n    l4_forward: true\n",
	       "t.yaml:2:5: rule 't': l4_forward rule needs 'hosts' and/or 'cidrs'");
	(void)snprintf(e1, sizeof(e1),
		       "t.yaml:4:5: rule 't': l4_forward rule cannot set 'methods': %s", why);
	(void)snprintf(e2, sizeof(e2),
		       "t.yaml:5:5: rule 't': l4_forward rule cannot set 'inject': %s", why);
	{
		const char *const e[] = {e1, e2, NULL};
		expect_problems("rules:\n  - name: t\n    l4_forward: true\n    methods: [GET]\n"
				"    inject: {}\n    hosts: [x]\n",
				e);
	}
	EXPECT("rules:\n  - name: t\n    l4_forward: yes\n    hosts: [x]\n",
	       "t.yaml:3:17: rule 't': 'l4_forward' must be true or false");
	EXPECT("rules:\n  - name: t\n    hosts: [x]\n    cidrs: [10.0.0.0/8]\n",
	       "t.yaml:4:5: rule 't': 'cidrs' is only for l4_forward rules; add 'l4_forward: true' "
	       "or "
	       "remove 'cidrs'");
	EXPECT("rules:\n  - name: t\n    l4_forward: true\n    cidrs: []\n",
	       "t.yaml:4:12: rule 't': 'cidrs' is an empty list; omit it instead");
	EXPECT("rules:\n  - name: t\n    l4_forward: true\n    cidrs: 10.0.0.0/8\n",
	       "t.yaml:4:12: rule 't': 'cidrs' must be a list of CIDR strings, e.g. cidrs: "
	       "['10.0.0.0/8']");
	EXPECT("rules:\n  - name: t\n    l4_forward: true\n    cidrs: [10.0.0.0/33, nope]\n",
	       "t.yaml:4:13: rule 't': invalid CIDR '10.0.0.0/33'; write an address with an "
	       "optional "
	       "prefix length, e.g. 10.0.0.0/8 or 2001:db8::/32",
	       "t.yaml:4:26: rule 't': invalid CIDR 'nope'; write an address with an optional "
	       "prefix "
	       "length, e.g. 10.0.0.0/8 or 2001:db8::/32");
}

static void test_problems_sorted_and_bounded(void **state)
{
	char *big = malloc(64 * 1024), *p = big;
	struct up_ruleset *rs = up_ruleset_new();
	json_t *pr;
	int r;

	p += sprintf(p, "rules:\n");
	for (int i = 0; i < 2 * UP_MAX_RULES_PROBLEMS; i++)
		p += sprintf(p, "  - hosts: ['(']\n");
	pr = load(rs, big, &r);
	assert_int_equal(r, -EINVAL);
	assert_int_equal(json_array_size(pr), UP_MAX_RULES_PROBLEMS);
	assert_string_equal(
		json_string_value(json_array_get(pr, 0)),
		"t.yaml:2:13: rule #1 (unnamed): invalid host regex '(': missing closing "
		"parenthesis at offset 1");
	json_decref(pr);
	up_ruleset_free(rs);
	free(big);
}

/* Builds "rules:\n  - name: a\n    hosts: [x]\n" with one key's value made big. */
static char *big_rule(const char *key, const char *item, size_t count, size_t item_len)
{
	char *t = malloc(64 + count * (item_len + 4) + 1024), *p = t;

	p += sprintf(p, "rules:\n  - name: a\n%s    %s: [",
		     streq(key, "hosts") ? "" : "    hosts: [x]\n", key);
	for (size_t i = 0; i < count; i++) {
		p += sprintf(p, "%s'", i ? ", " : "");
		for (size_t j = 0; j < item_len; j++)
			*p++ = item[j % strlen(item)];
		*p++ = '\'';
	}
	strcpy(p, "]\n");
	return t;
}

static void test_limits(void **state)
{
	char msg[256], *t;

	t = big_rule("hosts", "h", UP_MAX_RULE_ITEMS + 1, 1);
	(void)snprintf(msg, sizeof(msg),
		       "t.yaml:3:12: rule 'a': hosts has %d entries; at most %d are allowed",
		       UP_MAX_RULE_ITEMS + 1, UP_MAX_RULE_ITEMS);
	EXPECT(t, msg);
	free(t);
	t = big_rule("hosts", "a", 1, UP_MAX_REGEX_LEN + 1);
	(void)snprintf(msg, sizeof(msg),
		       "t.yaml:3:13: rule 'a': host regex is longer than %d characters",
		       UP_MAX_REGEX_LEN);
	EXPECT(t, msg);
	free(t);
	t = big_rule("paths", "/", 1, UP_MAX_REGEX_LEN + 1);
	(void)snprintf(msg, sizeof(msg),
		       "t.yaml:4:13: rule 'a': path regex is longer than %d characters",
		       UP_MAX_REGEX_LEN);
	EXPECT(t, msg);
	free(t);
	t = malloc(UP_MAX_HEADER_VALUE + 256);
	(void)sprintf(t,
		      "rules:\n  - name: a\n    hosts: [x]\n    inject: {headers: {A: '%0*d'}}\n",
		      UP_MAX_HEADER_VALUE + 1, 0);
	(void)snprintf(msg, sizeof(msg),
		       "t.yaml:4:27: rule 'a': header 'A' is longer than %d bytes",
		       UP_MAX_HEADER_VALUE);
	EXPECT(t, msg);
	free(t);
	t = malloc((UP_MAX_RULES + 1) * 16 + 16);
	{
		char *q = t + sprintf(t, "rules:\n");
		for (int i = 0; i <= UP_MAX_RULES; i++)
			q += sprintf(q, "- {hosts: [x]}\n");
	}
	(void)snprintf(msg, sizeof(msg), "t.yaml:2:1: 'rules' has %d rules; at most %d are allowed",
		       UP_MAX_RULES + 1, UP_MAX_RULES);
	EXPECT(t, msg);
	free(t);
	EXPECT("rules:\n  - {[a]: 1, hosts: [x]}\n",
	       "t.yaml:2:6: rule #1 (unnamed): rule keys must be strings");
}

static void test_file_too_large(void **state)
{
	char path[] = "/tmp/test-rules-XXXXXX", msg[256];
	int fd = mkstemp(path);
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p = json_array();

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, UP_MAX_RULES_FILE_SIZE + 1), 0);
	close(fd);
	assert_int_equal(up_ruleset_load_file(rs, UP_LAYER_USER, path, "big.yaml", p), -EINVAL);
	(void)snprintf(msg, sizeof(msg), "big.yaml: larger than %d bytes; split it",
		       UP_MAX_RULES_FILE_SIZE);
	assert_string_equal(json_string_value(json_array_get(p, 0)), msg);
	unlink(path);
	json_decref(p);
	up_ruleset_free(rs);
}

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

/* aws_allow_credential_actions: every problem located; only on a rule the proxy re-signs under. */
static void test_aws_actions_errors(void **state)
{
	EXPECT("rules:\n  - name: a\n    hosts: ['sts\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: [AssumeRole, GetSessionToken]\n",
	       NULL);
	EXPECT("rules:\n  - name: a\n    hosts: ['sts\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: AssumeRole\n",
	       "t.yaml:4:35: rule 'a': 'aws_allow_credential_actions' must be a non-empty list of "
	       "AWS "
	       "action names, e.g. aws_allow_credential_actions: [AssumeRole]");
	EXPECT("rules:\n  - name: a\n    hosts: ['sts\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: []\n",
	       "t.yaml:4:35: rule 'a': 'aws_allow_credential_actions' must be a non-empty list of "
	       "AWS "
	       "action names, e.g. aws_allow_credential_actions: [AssumeRole]");
	EXPECT("rules:\n  - name: a\n    hosts: ['sts\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: [Assume-Role, 'sts:AssumeRole']\n",
	       "t.yaml:4:36: rule 'a': 'Assume-Role' is not an AWS action name; write it as the "
	       "API "
	       "names it, letters and digits (at most 128), e.g. AssumeRole",
	       "t.yaml:4:49: rule 'a': 'sts:AssumeRole' is not an AWS action name; write it as the "
	       "API "
	       "names it, letters and digits (at most 128), e.g. AssumeRole");
	EXPECT("rules:\n  - name: a\n    hosts: ['.*']\n    aws_allow_credential_actions: "
	       "[AssumeRole]\n",
	       "t.yaml:4:5: rule 'a': 'aws_allow_credential_actions' needs a rule the proxy "
	       "re-signs "
	       "under: every host regex must end in '\\.amazonaws\\.com' (with no '|'), e.g. "
	       "hosts: "
	       "['sts\\.amazonaws\\.com']");
	EXPECT("rules:\n  - name: a\n    hosts: ['sts\\.amazonaws\\.com', 'evil\\.example']\n"
	       "    aws_allow_credential_actions: [AssumeRole]\n",
	       "t.yaml:4:5: rule 'a': 'aws_allow_credential_actions' needs a rule the proxy "
	       "re-signs "
	       "under: every host regex must end in '\\.amazonaws\\.com' (with no '|'), e.g. "
	       "hosts: "
	       "['sts\\.amazonaws\\.com']");
	EXPECT("rules:\n  - name: a\n    hosts: ['.*|sts\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: [AssumeRole]\n",
	       "t.yaml:4:5: rule 'a': 'aws_allow_credential_actions' needs a rule the proxy "
	       "re-signs "
	       "under: every host regex must end in '\\.amazonaws\\.com' (with no '|'), e.g. "
	       "hosts: "
	       "['sts\\.amazonaws\\.com']");
	EXPECT("rules:\n  - name: a\n    l4_forward: true\n    hosts: ['x\\.amazonaws\\.com']\n"
	       "    aws_allow_credential_actions: [AssumeRole]\n",
	       "t.yaml:5:5: rule 'a': l4_forward rule cannot set 'aws_allow_credential_actions': "
	       "an L4 "
	       "rule forwards whole connections, so there is no method, path or header to act on; "
	       "remove it or write a separate HTTP rule");
	EXPECT("rules:\n  - name: a\n    hosts: [x]\n    aws_credential_actions: [AssumeRole]\n",
	       "t.yaml:4:5: rule 'a': unknown key 'aws_credential_actions'; did you mean "
	       "'aws_allow_credential_actions'?");
}

/* Re-signing is for rules outside the generic layer that name AWS hosts, and is rendered. */
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

static void test_files(void **state)
{
	static const char *const examples[] = {"atlassian",    "gitlab",	 "git", "ecr",
					       "codeartifact", "l4-passthrough", "aws"};
	char path[PATH_MAX];

	for (size_t i = 0; i < ELEMENTSOF(examples); i++) {
		struct up_ruleset *rs = up_ruleset_new();
		json_t *p = json_array();
		(void)snprintf(path, sizeof(path), "%s/../../examples/rules/%s.yaml",
			       UP_TEST_DATA_DIR, examples[i]);
		if (up_ruleset_load_file(rs, UP_LAYER_USER, path, NULL, p) != 0)
			fail_msg("%s: %s", path, json_string_value(json_array_get(p, 0)));
		assert_true(up_ruleset_count(rs) > 0);
		/* the AWS examples name AWS hosts: the proxy re-signs under them */
		for (size_t j = 0; j < up_ruleset_count(rs); j++)
			assert_int_equal(up_rule_aws_sign(up_ruleset_get(rs, j)),
					 !strcmp(examples[i], "ecr") ||
						 !strcmp(examples[i], "codeartifact") ||
						 !strcmp(examples[i], "aws"));
		json_decref(p);
		up_ruleset_free(rs);
	}
	{
		struct up_ruleset *rs = up_ruleset_new();
		json_t *p = json_array();
		assert_int_equal(
			up_ruleset_load_file(rs, UP_LAYER_USER, "/nonexistent/r.yaml", "r.yaml", p),
			-EINVAL);
		assert_string_equal(
			json_string_value(json_array_get(p, 0)),
			"r.yaml: cannot read the rules file: No such file or directory");
		assert_int_equal(up_ruleset_load_file(rs, UP_LAYER_USER, "/", NULL, p), -EINVAL);
		assert_string_equal(json_string_value(json_array_get(p, 1)),
				    "/: not a regular file");
		json_decref(p);
		up_ruleset_free(rs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_level_errors),
		cmocka_unit_test(test_empty_files),
		cmocka_unit_test(test_host_errors),
		cmocka_unit_test(test_rule_key_errors),
		cmocka_unit_test(test_method_path_errors),
		cmocka_unit_test(test_inject_errors),
		cmocka_unit_test(test_l4_errors),
		cmocka_unit_test(test_refresh),
		cmocka_unit_test(test_problems_sorted_and_bounded),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_file_too_large),
		cmocka_unit_test(test_layering),
		cmocka_unit_test(test_no_rules),
		cmocka_unit_test(test_matching),
		cmocka_unit_test(test_l4_and_connect),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_render_remove_round_trip),
		cmocka_unit_test(test_aws_actions_errors),
		cmocka_unit_test(test_aws_sign_render),
		cmocka_unit_test(test_port),
		cmocka_unit_test(test_url_split),
		cmocka_unit_test(test_unsafe_paths),
		cmocka_unit_test(test_overrides_and_trace),
		cmocka_unit_test(test_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
