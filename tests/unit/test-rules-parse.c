/* SPDX-License-Identifier: Apache-2.0 */
/* The rules parser: every validation message, in full, the limits, the example files. */
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
	EXPECT("rules: [\n", "t.yaml:2:1: invalid YAML: did not find expected node content "
			     "while parsing a flow node");
	EXPECT("a: &x 1\nb: *x\n",
	       "t.yaml:2:4: YAML aliases (*name) are not supported in rules files; write the "
	       "value out");
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
		cmocka_unit_test(test_aws_actions_errors),
		cmocka_unit_test(test_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
