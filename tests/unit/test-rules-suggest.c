/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rule suggestions: what reads as an id, the path patterns, and whole suggestions whose
 * YAML the rules parser takes and whose rules allow exactly the denied requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bounds.h"
#include "rules-suggest.h"
#include "rules.h"

static bool id(const char *s)
{
	return up_suggest_segment_is_id(s, strlen(s));
}

static void test_ids(void **state)
{
	static const char *const ids[] = {
		"42",
		"1700000000",
		"9fceb02",
		"0123456789abcdef0123456789abcdef01234567",
		"3F2504E0-4F89-11D3-9A0C-0305E82C3301",
		"release-2024-01-15",
		"ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
		"aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH", /* 32+ of the token set */
		"foo%40bar",
		"user@example",
		"a:b",
	};
	static const char *const names[] = {
		"repos",    "api",   "v4",	 "issues", "deadbeef", "cafe12", "raw.git",
		"comments", "pulls", "pkg-name", "_ga",	   "x~y",      "v1.2.3",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		assert_true(id(ids[i]));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_false(id(names[i]));
	assert_false(up_suggest_segment_is_id("", 0));
}

static bool rnd(const char *s)
{
	return up_suggest_label_random(s, strlen(s));
}

static void test_random_labels(void **state)
{
	(void)state;
	assert_true(rnd("a8f3k2j9x7q1w5e4"));
	assert_true(rnd("kqzxvbnmwplrtyhg"));
	assert_true(rnd("nrwvg4dfmfzgc3thnfxgo"));
	assert_true(rnd("12345"));
	assert_true(rnd("5f3c9a1b"));
	assert_false(rnd("api"));
	assert_false(rnd("githubusercontent"));
	assert_false(rnd("objects-origin"));
	assert_false(rnd("s3-us-west-2"));
	assert_false(rnd("vscode-sync-insiders"));
	assert_false(rnd("xn--bcher-kva"));
	assert_false(rnd("production-eu-west"));
}

static void pattern(const char *path, const char *want)
{
	char buf[512];

	assert_int_equal(up_suggest_path_pattern(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

static void test_path_patterns(void **state)
{
	char small[8];

	(void)state;
	pattern("/repos/o/r/issues/123/comments", "/repos/o/r/issues" UP_SUGGEST_TAIL);
	pattern("/repos/o/r/pulls", "/repos/o/r/pulls");
	pattern("/repos/o/r/pulls?state=open&token=x", "/repos/o/r/pulls");
	pattern("/v1/files/3F2504E0-4F89-11D3-9A0C-0305E82C3301", "/v1/files" UP_SUGGEST_TAIL);
	pattern("/42", UP_SUGGEST_TAIL);
	pattern("/", "/");
	pattern("/a.b/c_d~e/", "/a\\.b/c_d~e/");
	pattern("/a.b/c+d(e)/x", "/a\\.b" UP_SUGGEST_TAIL);
	pattern("/api/v4/projects/123/", "/api/v4/projects" UP_SUGGEST_TAIL);
	assert_int_equal(up_suggest_path_pattern("x/y", small, sizeof(small)), -EINVAL);
	assert_int_equal(up_suggest_path_pattern("/abcdefghij", small, sizeof(small)),
			 -ENAMETOOLONG);
}

static json_t *ev(const char *decision, const char *method, const char *host, const char *path)
{
	json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:n, s:n}", "uplink", "audit", "ts",
			      "2026-11-29T09:02:13.031Z", "decision", decision, "method", method,
			      "host", host, "port", 443, "rule", "reason");

	json_object_set_new(e, "path", path ? json_string(path) : json_null());
	return e;
}

/* The suggestion's YAML as a rule set (no defaults), failing on any problem. */
static struct up_ruleset *load(const json_t *res)
{
	const char *yaml = json_string_value(json_object_get(res, "yaml"));
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array();

	assert_non_null(yaml);
	assert_int_equal(up_ruleset_load_string(rs, UP_LAYER_USER, "suggested.yaml", yaml,
						strlen(yaml), problems),
			 0);
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(up_ruleset_finish(rs, true, problems), 0);
	json_decref(problems);
	return rs;
}

static bool allows(const struct up_ruleset *rs, const char *method, const char *host,
		   const char *path)
{
	const struct up_rule *r;

	return up_ruleset_evaluate(rs, method, true, host, 443, path, &r) == UP_DECISION_ALLOW;
}

static void test_suggestion_allows_exactly_the_denials(void **state)
{
	json_t *events = json_array(), *res = NULL;
	struct up_ruleset *rs;
	const char *yaml;
	char *all;

	(void)state;
	json_array_append_new(
		events, ev("deny", "POST", "api.github.com", "/repos/o/r/issues/12/comments"));
	json_array_append_new(events, ev("deny", "POST", "api.github.com",
					 "/repos/o/r/issues/99/comments?access_token=s3cr3t"));
	json_array_append_new(
		events, ev("deny", "DELETE", "api.github.com", "/repos/o/r/git/refs/heads/x"));
	json_array_append_new(events, ev("allow", "GET", "api.github.com", "/user"));
	json_array_append_new(events, ev("connect-refused", "CONNECT", "pastebin.com", NULL));
	assert_int_equal(up_rules_suggest(events, "0123456789ab", &res), 0);
	assert_int_equal(json_integer_value(json_object_get(res, "denied")), 4);
	assert_int_equal(json_integer_value(json_object_get(res, "covered")), 4);
	assert_int_equal(json_array_size(json_object_get(res, "rules")), 3);
	yaml = json_string_value(json_object_get(res, "yaml"));
	assert_null(strstr(yaml, "s3cr3t"));
	all = json_dumps(res, 0);
	assert_null(strstr(all, "s3cr3t"));
	free(all);
	assert_non_null(strstr(yaml, "# api.github.com: 2 denied requests, e.g.\n"));
	assert_non_null(strstr(yaml, "#   POST /repos/o/r/issues/<id>/comments?...\n"));
	assert_non_null(strstr(yaml, "# pastebin.com: 1 refused CONNECT;"));
	rs = load(res);
	assert_true(allows(rs, "POST", "api.github.com", "/repos/o/r/issues/12/comments"));
	assert_true(allows(rs, "POST", "api.github.com", "/repos/o/r/issues/7/x?y=1"));
	assert_true(allows(rs, "DELETE", "api.github.com", "/repos/o/r/git/refs/heads/x"));
	assert_true(allows(rs, "GET", "pastebin.com", "/raw/abc"));
	/* nothing broader: another method, host, prefix or an exact path's sibling */
	assert_false(allows(rs, "GET", "api.github.com", "/repos/o/r/issues/12/comments"));
	assert_false(allows(rs, "DELETE", "api.github.com", "/repos/o/r/issues/12"));
	assert_false(allows(rs, "POST", "api.github.com", "/repos/o/r/issues"));
	assert_false(allows(rs, "POST", "api.github.com", "/repos/o/other/issues/1"));
	assert_false(allows(rs, "DELETE", "api.github.com", "/repos/o/r/git/refs/heads/y"));
	assert_false(
		allows(rs, "POST", "api.github.com.evil.example", "/repos/o/r/issues/12/comments"));
	assert_false(allows(rs, "POST", "apixgithub.com", "/repos/o/r/issues/12/comments"));
	assert_false(allows(rs, "POST", "pastebin.com", "/"));
	assert_false(allows(rs, "GET", "example.com", "/"));
	up_ruleset_free(rs);
	json_decref(res);
	json_decref(events);
}

static json_t *warnings_of_kind(const json_t *res, const char *kind)
{
	json_t *out = json_array(), *w;
	size_t i;

	json_array_foreach (json_object_get(res, "warnings"), i, w)
		if (strcmp(json_string_value(json_object_get(w, "kind")), kind) == 0)
			json_array_append(out, json_object_get(w, "host"));
	return out;
}

static void test_warnings_and_skipped(void **state)
{
	json_t *events = json_array(), *res = NULL, *w;
	char host[64];
	struct up_ruleset *rs;

	(void)state;
	json_array_append_new(events, ev("deny", "POST", "10.1.2.3", "/x"));
	json_array_append_new(events, ev("deny", "POST", "2001:db8::1", "/x"));
	json_array_append_new(events, ev("deny", "GET", "a8f3k2j9x7q1w5e4.evil.example", "/"));
	for (int i = 0; i < UP_SUGGEST_SUBDOMAINS_WARN - 1; i++) {
		(void)snprintf(host, sizeof(host), "n%d.evil.example", i);
		json_array_append_new(events, ev("deny", "GET", host, "/"));
	}
	json_array_append_new(events, ev("deny", "PROPFIND", "dav.example", "/"));
	json_array_append_new(events, ev("deny", "POST", "api.example", "/a/../admin"));
	json_array_append_new(events, ev("deny", "CONNECT", "git.example", NULL));
	json_array_append_new(events, ev("deny", "GET", "bad host", "/"));
	json_object_set_new(json_array_get(events, 0), "reason", json_string("by design"));
	json_array_append_new(events, ev("deny", "POST", "10.1.2.3", "/y"));
	assert_int_equal(up_rules_suggest(events, "0123456789ab", &res), 0);
	w = warnings_of_kind(res, "ip-literal");
	assert_int_equal(json_array_size(w), 2);
	json_decref(w);
	w = warnings_of_kind(res, "random-subdomain");
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(json_string_value(json_array_get(w, 0)),
			    "a8f3k2j9x7q1w5e4.evil.example");
	json_decref(w);
	w = warnings_of_kind(res, "many-subdomains");
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(json_string_value(json_array_get(w, 0)), "evil.example");
	json_decref(w);
	assert_int_equal(json_array_size(json_object_get(res, "skipped")), 5);
	assert_int_equal(json_integer_value(json_object_get(res, "denied")), 12);
	assert_int_equal(json_integer_value(json_object_get(res, "covered")), 7);
	assert_non_null(strstr(json_string_value(json_object_get(res, "yaml")), "# WARNING: "));
	rs = load(res);
	assert_true(allows(rs, "POST", "10.1.2.3", "/y"));
	assert_false(allows(rs, "POST", "10.1.2.3", "/x")); /* that one was denied by design */
	assert_true(allows(rs, "POST", "2001:db8::1", "/x"));
	assert_false(allows(rs, "GET", "n9.evil.example", "/"));
	up_ruleset_free(rs);
	json_decref(res);
	json_decref(events);
}

/* A token in a path (chat and webhook APIs put them there) stays out of the examples. */
static void test_examples_hide_ids(void **state)
{
	static const char token[] = "123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
	char path[UP_SUGGEST_PATH_MAX + 1];
	json_t *events = json_array(), *res = NULL, *ex;
	char *all;

	(void)state;
	(void)snprintf(path, sizeof(path), "/bot%s/sendMessage", token);
	json_array_append_new(events, ev("deny", "POST", "api.telegram.org", path));
	/* the longest path taken, all one-character ids: its example is cut, not overflowed */
	for (size_t i = 0; i + 2 <= UP_SUGGEST_PATH_MAX; i += 2)
		memcpy(path + i, "/1", 2);
	path[UP_SUGGEST_PATH_MAX] = '\0';
	json_array_append_new(events, ev("deny", "PUT", "api.telegram.org", path));
	assert_int_equal(up_rules_suggest(events, "0123456789ab", &res), 0);
	all = json_dumps(res, 0);
	assert_null(strstr(all, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"));
	free(all);
	ex = json_object_get(json_array_get(json_object_get(res, "rules"), 0), "examples");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ex, 0), "path")),
			    "/<id>/sendMessage");
	assert_int_equal(json_integer_value(json_object_get(res, "covered")), 2);
	json_decref(res);
	json_decref(events);
}

static void test_nothing_denied(void **state)
{
	json_t *events = json_array(), *res = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array();
	const char *yaml;

	(void)state;
	json_array_append_new(events, ev("allow", "GET", "api.github.com", "/user"));
	json_array_append_new(events, json_string("not an event"));
	assert_int_equal(up_rules_suggest(events, "0123456789ab", &res), 0);
	assert_int_equal(json_integer_value(json_object_get(res, "denied")), 0);
	yaml = json_string_value(json_object_get(res, "yaml"));
	assert_int_equal(
		up_ruleset_load_string(rs, UP_LAYER_USER, "s.yaml", yaml, strlen(yaml), problems),
		0);
	assert_int_equal(up_ruleset_count(rs), 0);
	up_ruleset_free(rs);
	json_decref(problems);
	json_decref(res);
	json_decref(events);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_random_labels),
		cmocka_unit_test(test_path_patterns),
		cmocka_unit_test(test_suggestion_allows_exactly_the_denials),
		cmocka_unit_test(test_warnings_and_skipped),
		cmocka_unit_test(test_examples_hide_ids),
		cmocka_unit_test(test_nothing_denied),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
