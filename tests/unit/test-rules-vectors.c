/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays tests/data/rules-vectors.json, the cases the mitm addon also runs through
 * a real mitmproxy: the C matcher must give the same decision, rule, layer, injected
 * header names and deny stage on every one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rules.h"

static json_t *vectors;

static int setup(void **state)
{
	char path[PATH_MAX];
	json_error_t err;

	(void)snprintf(path, sizeof(path), "%s/rules-vectors.json", UP_TEST_DATA_DIR);
	vectors = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
	if (!vectors)
		fprintf(stderr, "cannot read %s: %s (line %d)\n", path, err.text, err.line);
	return vectors ? 0 : -1;
}

static int teardown(void **state)
{
	json_decref(vectors);
	return 0;
}

static const char *const decisions[] = {
	[UP_DECISION_DENY] = "deny",
	[UP_DECISION_ALLOW] = "allow",
	[UP_DECISION_L4] = "l4",
};

/* Header names equal as the addon compares them: ASCII case aside, '_' for '-'. */
static bool same_name(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a == '_' ? '-' : (char)tolower((unsigned char)*a);
		char y = *b == '_' ? '-' : (char)tolower((unsigned char)*b);
		if (x != y)
			return false;
	}
	return !*a && !*b;
}

/* The values of the method-override headers among the case's [name, value] pairs. */
static void collect_overrides(const json_t *headers, const char **out, size_t cap)
{
	static const char *const names[] = {"x-http-method-override", "x-http-method",
					    "x-method-override"};
	const json_t *h;
	size_t i, n = 0;

	json_array_foreach (headers, i, h) {
		const char *name = json_string_value(json_array_get(h, 0));
		for (size_t j = 0; name && j < sizeof(names) / sizeof(names[0]) && n + 1 < cap; j++)
			if (same_name(name, names[j]))
				out[n++] = json_string_value(json_array_get(h, 1));
	}
	out[n] = NULL;
}

/* Returns NULL when the case agrees, else what differs. */
static char *run_case(const json_t *c, char *buf, size_t len)
{
	const json_t *req = json_object_get(c, "request"), *exp = json_object_get(c, "expect");
	const char *scheme = json_string_value(json_object_get(req, "scheme"));
	const char *host = json_string_value(json_object_get(req, "host"));
	const char *method = json_string_value(json_object_get(req, "method"));
	const char *path = json_string_value(json_object_get(req, "path"));
	const char *want_stage = json_string_value(json_object_get(exp, "stage"));
	json_t *doc = json_pack("{s:i, s:O}", "version", 1, "rules", json_object_get(c, "rules"));
	json_t *problems = json_array(), *names = json_array(), *want_names;
	struct up_ruleset *rs = up_ruleset_new();
	const struct up_rule *rule;
	enum up_decision d;
	bool https = streq(scheme, "https"), same;
	const char *stage, *overrides[8];

	if (up_ruleset_load_json(rs, doc, problems) < 0) {
		(void)snprintf(buf, len, "rules do not load: %s",
			       json_string_value(json_array_get(problems, 0)));
		goto out;
	}
	collect_overrides(json_object_get(req, "headers"), overrides, 8);
	d = up_ruleset_evaluate_overrides(
		rs, method, https, host, (unsigned)json_integer_value(json_object_get(req, "port")),
		path, overrides, &rule);
	stage = d != UP_DECISION_DENY			       ? NULL
		: https && !up_ruleset_match_connect(rs, host) ? "connect"
							       : "request";
	for (size_t i = 0; rule && d == UP_DECISION_ALLOW && i < rule->n_headers; i++)
		(void)json_array_append_new(names, json_string(rule->headers[i].name));
	want_names = json_object_get(exp, "inject");
	same = streq(decisions[d], json_string_value(json_object_get(exp, "decision"))) &&
	       (rule ? json_is_string(json_object_get(exp, "rule")) &&
				streq(rule->name,
				      json_string_value(json_object_get(exp, "rule"))) &&
				streq(up_rule_layer_name(rule->layer),
				      json_string_value(json_object_get(exp, "layer")))
		     : json_is_null(json_object_get(exp, "rule"))) &&
	       json_equal(names, want_names) &&
	       ((!stage && !want_stage) || (stage && want_stage && streq(stage, want_stage)));
	if (same)
		buf = NULL;
	else
		(void)snprintf(buf, len, "got %s rule=%s layer=%s stage=%s", decisions[d],
			       rule ? rule->name : "null",
			       rule ? up_rule_layer_name(rule->layer) : "null",
			       stage ? stage : "-");
out:
	json_decref(doc);
	json_decref(problems);
	json_decref(names);
	up_ruleset_free(rs);
	return buf;
}

static void test_vectors(void **state)
{
	const json_t *cases = json_object_get(vectors, "cases"), *c;
	char buf[512];
	size_t i, failed = 0;

	assert_int_equal(json_integer_value(json_object_get(vectors, "version")), 1);
	assert_true(json_array_size(cases) >= 80);
	json_array_foreach (cases, i, c) {
		const char *why = run_case(c, buf, sizeof(buf));
		if (why) {
			char *want = json_dumps(json_object_get(c, "expect"), JSON_COMPACT);
			fprintf(stderr, "case %s: %s; expected %s\n",
				json_string_value(json_object_get(c, "id")), why, want);
			free(want);
			failed++;
		}
	}
	fprintf(stderr, "%zu vectors, %zu disagree\n", json_array_size(cases), failed);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
