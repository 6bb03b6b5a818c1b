/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An approval's rule saved to a rules file: the text added to each shape of file (and the
 * old bytes kept), the shapes refused with a reason, what counts as a project's file, and
 * the whole save with its trust checks, symlinks and modes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "errors.h"
#include "fileio.h"
#include "rules-save.h"
#include "rules.h"
#include "trust.h"

static json_t *rule(void)
{
	return json_pack("{s:s, s:[s], s:[s], s:[s]}", "name", "approved-api.example.com", "hosts",
			 "api\\.example\\.com", "methods", "POST", "paths",
			 "/repos/acme(/[^?]*)?(\\?.*)?");
}

static const char *const ITEM2 = "  # saved today\n"
				 "  - name: 'approved-api.example.com'\n"
				 "    hosts: ['api\\.example\\.com']\n"
				 "    methods: ['POST']\n"
				 "    paths: ['/repos/acme(/[^?]*)?(\\?.*)?']\n";

static int save(const char *old, char **out, size_t *line, char *err)
{
	json_t *r = rule();
	size_t len = 0;
	int rc = up_rules_save_text(old, old ? strlen(old) : 0, "f.yaml", r, "saved today", out,
				    &len, line, err, 512);

	json_decref(r);
	if (rc == 0)
		assert_int_equal(len, strlen(*out));
	return rc;
}

static void test_new_file(void **state)
{
	char *out = NULL, err[512] = "";
	size_t line = 0;
	char want[1024];

	(void)state;
	assert_int_equal(save(NULL, &out, &line, err), 0);
	(void)snprintf(want, sizeof(want), "rules:\n%s", ITEM2);
	assert_string_equal(out, want);
	assert_int_equal(line, 3);
	free(out);
	/* a file of comments alone takes rules: after them */
	assert_int_equal(save("# mine\n\n", &out, &line, err), 0);
	(void)snprintf(want, sizeof(want), "# mine\n\nrules:\n%s", ITEM2);
	assert_string_equal(out, want);
	assert_int_equal(line, 5);
	free(out);
}

static void test_appended_keeping_the_old_bytes(void **state)
{
	static const char old[] = "# my rules\n"
				  "rules:\n"
				  "  - name: gh   # the API\n"
				  "    hosts: [\"api\\\\.github\\\\.com\"]\n"
				  "    methods: [GET, POST]\n"
				  "\n"
				  "# the end"; /* no newline at the end */
	char *out = NULL, err[512] = "";
	size_t line = 0;

	(void)state;
	assert_int_equal(save(old, &out, &line, err), 0);
	assert_memory_equal(out, old, strlen(old));
	assert_string_equal(out + strlen(old),
			    "\n  # saved today\n  - name: 'approved-api.example.com'\n"
			    "    hosts: ['api\\.example\\.com']\n"
			    "    methods: ['POST']\n"
			    "    paths: ['/repos/acme(/[^?]*)?(\\?.*)?']\n");
	assert_int_equal(line, 9);
	free(out);
}

static void test_list_at_column_zero_and_empty_rules(void **state)
{
	char *out = NULL, err[512] = "";
	size_t line = 0;

	(void)state;
	assert_int_equal(save("rules:\n- name: a\n  hosts: [a\\.example]\n", &out, &line, err), 0);
	assert_non_null(
		strstr(out, "\n# saved today\n- name: 'approved-api.example.com'\n  hosts: "));
	free(out);
	assert_int_equal(save("rules:\n", &out, &line, err), 0);
	assert_non_null(strstr(out, "rules:\n  # saved today\n  - name: "));
	free(out);
}

static void test_shapes_refused_with_a_reason(void **state)
{
	static const struct {
		const char *text, *says;
	} cases[] = {
		{"rules: []\n", "not a block list"},
		{"rules: [{name: a, hosts: [a]}]\n", "not a block list"},
		{"rules: ~\n", "not a block list"},
		{"rules:\n  - name: a\n    hosts: [a]\nother: 1\n", "not the file's last key"},
		{"- a\n- b\n", "not a block mapping"},
		{"{rules: []}\n", "not a block mapping"},
		{"rules:\n  - name: a\n   bad: [\n", "not valid YAML"},
		{"rules:\n  - name: a\n", "has problems already"},
		{"rules:\n  - name: a\n    hosts: [a]\n...\n", "add it by hand"},
		{"rules:\n  - name: a\n    hosts: [a]\n---\nrules:\n",
		 "more than one YAML document"},
	};
	char *out = NULL, err[512];
	size_t line = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(save(cases[i].text, &out, &line, err), -EINVAL);
		assert_null(out);
		if (!strstr(err, cases[i].says))
			fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].says);
		assert_non_null(strstr(err, "f.yaml"));
	}
}

static void test_values_quoted_and_comments_tamed(void **state)
{
	json_t *r = json_pack("{s:s, s:[s], s:[s, s], s:[s]}", "name", "it's", "hosts",
			      "a\\.example", "methods", "GET", "PUT", "paths", "/o'brien/.*");
	char *out = NULL, err[512] = "";
	size_t len, line;

	(void)state;
	assert_int_equal(up_rules_save_text(NULL, 0, "f", r, "one\ntwo\x1b[31m", &out, &len, &line,
					    err, sizeof(err)),
			 0);
	assert_non_null(strstr(out, "  # one\n  # two?[31m\n  - name: 'it''s'\n"));
	assert_non_null(strstr(out, "methods: ['GET', 'PUT']\n"));
	assert_non_null(strstr(out, "paths: ['/o''brien/.*']\n"));
	free(out);
	/* a control character in a value, an unknown key, an empty list: not written */
	json_array_set_new(json_object_get(r, "paths"), 0, json_string("/a\nb"));
	assert_int_equal(
		up_rules_save_text(NULL, 0, "f", r, "", &out, &len, &line, err, sizeof(err)),
		-EINVAL);
	json_object_set_new(r, "paths", json_array());
	assert_int_equal(
		up_rules_save_text(NULL, 0, "f", r, "", &out, &len, &line, err, sizeof(err)),
		-EINVAL);
	json_object_del(r, "paths");
	json_object_set_new(r, "inject", json_object());
	assert_int_equal(
		up_rules_save_text(NULL, 0, "f", r, "", &out, &len, &line, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "inject"));
	json_decref(r);
}

/* ---- the file ---- */

struct tree {
	char root[64], own[128], trust[128], proj[128], plain[128];
};

static void put_file(const char *path, const char *text, unsigned mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void make_tree(struct tree *t)
{
	char p[256];

	(void)snprintf(t->root, sizeof(t->root), "/tmp/uplink-rules-save-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	(void)snprintf(t->own, sizeof(t->own), "%s/config/uplink", t->root);
	(void)snprintf(t->trust, sizeof(t->trust), "%s/state", t->root);
	(void)snprintf(t->proj, sizeof(t->proj), "%s/code/app", t->root);
	(void)snprintf(t->plain, sizeof(t->plain), "%s/notes", t->root);
	assert_int_equal(mkdir(t->trust, 0700), 0);
	(void)snprintf(p, sizeof(p), "%s/code", t->root);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(mkdir(t->proj, 0700), 0);
	(void)snprintf(p, sizeof(p), "%s/.git", t->proj);
	assert_int_equal(mkdir(p, 0700), 0);
	(void)snprintf(p, sizeof(p), "%s/sub", t->proj);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(mkdir(t->plain, 0700), 0);
}

static void remove_tree(struct tree *t)
{
	char cmd[128];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
	assert_int_equal(system(cmd), 0);
}

static void test_what_is_a_project_file(void **state)
{
	struct tree t;
	char p[256];

	(void)state;
	make_tree(&t);
	(void)snprintf(p, sizeof(p), "%s/sub/rules.yaml", t.proj);
	assert_true(up_rules_save_in_project(p, t.own));
	(void)snprintf(p, sizeof(p), "%s/rules.yaml", t.plain);
	assert_false(up_rules_save_in_project(p, t.own));
	/* your own folder is yours even inside a repository (dotfiles) */
	(void)snprintf(p, sizeof(p), "%s/rules.yaml", t.proj);
	assert_true(up_rules_save_in_project(p, NULL));
	assert_false(up_rules_save_in_project(p, t.proj));
	/* a project's config file marks one too */
	(void)snprintf(p, sizeof(p), "%s/.uplink.yaml", t.plain);
	put_file(p, "ask: true\n", 0644);
	(void)snprintf(p, sizeof(p), "%s/rules.yaml", t.plain);
	assert_true(up_rules_save_in_project(p, t.own));
	remove_tree(&t);
}

static int run_save(struct tree *t, const char *path, struct up_rules_save *s)
{
	static json_t *r;

	json_decref(r);
	r = rule();
	*s = (struct up_rules_save){.path = path,
				    .own_dir = t->own,
				    .trust_dir = t->trust,
				    .rule = r,
				    .comment = "saved today",
				    .now = 1700000000};
	return up_rules_save(s);
}

static void test_save_own_file(void **state)
{
	struct up_rules_save s;
	struct tree t;
	char p[256], *text = NULL;
	size_t len = 0;
	struct stat st;

	(void)state;
	make_tree(&t);
	(void)snprintf(p, sizeof(p), "%s/rules.yaml", t.own);
	assert_int_equal(run_save(&t, p, &s), 0); /* the folders are made */
	assert_int_equal(s.line, 3);
	assert_false(s.trusted);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(run_save(&t, p, &s), 0);
	assert_int_equal(s.line, 8);
	assert_int_equal(up_read_file(p, 1 << 20, &text, &len), 0);
	assert_non_null(strstr(text, ITEM2));
	assert_ptr_not_equal(strstr(text, ITEM2), strstr(text + strlen("rules:\n") + 1, ITEM2));
	free(text);
	remove_tree(&t);
}

static void test_save_elsewhere(void **state)
{
	struct up_rules_save s;
	struct tree t;
	char p[256], link[256], sha[UP_SHA256_HEX_LEN + 1], err[512];
	const char *old = "rules:\n  - name: a\n    hosts: [a\\.example]\n";
	json_t *entries, *store = NULL;
	char *text = NULL;
	size_t len = 0;
	struct stat st;

	(void)state;
	make_tree(&t);
	/* a file outside any project: yours, its mode kept */
	(void)snprintf(p, sizeof(p), "%s/rules.yaml", t.plain);
	put_file(p, old, 0644);
	assert_int_equal(run_save(&t, p, &s), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* a symlink to it, a folder, a relative path: refused */
	(void)snprintf(link, sizeof(link), "%s/link.yaml", t.plain);
	assert_int_equal(symlink(p, link), 0);
	assert_int_equal(run_save(&t, link, &s), -ELOOP);
	assert_non_null(strstr(s.err, "symbolic link"));
	assert_int_not_equal(run_save(&t, t.plain, &s), 0);
	assert_int_equal(run_save(&t, "rules.yaml", &s), -EINVAL);
	assert_int_equal(s.e, UP_ERR_INVALID_PARAMS);
	/* a file that cannot take it: the reason, and the file as it was */
	(void)snprintf(link, sizeof(link), "%s/flow.yaml", t.plain);
	put_file(link, "rules: []\n", 0644);
	assert_int_equal(run_save(&t, link, &s), -EINVAL);
	assert_int_equal(s.e, UP_ERR_RULES_INVALID);
	assert_non_null(strstr(s.err, "not a block list"));
	assert_int_equal(up_read_file(link, 1 << 20, &text, &len), 0);
	assert_string_equal(text, "rules: []\n");
	free(text);

	/* a project's file: refused until trusted as it is, then trusted again as written */
	(void)snprintf(p, sizeof(p), "%s/sub/rules.yaml", t.proj);
	assert_int_equal(run_save(&t, p, &s), -EPERM); /* not there yet: never created */
	assert_int_equal(s.e, UP_ERR_UNTRUSTED_CONFIG);
	assert_int_not_equal(access(p, F_OK), 0);
	put_file(p, old, 0644);
	assert_int_equal(run_save(&t, p, &s), -EPERM);
	assert_non_null(strstr(s.err, "uplink trust"));
	up_sha256_hex(old, strlen(old), sha);
	entries = json_pack("[{s:s, s:s}]", "file", p, "sha256", sha);
	assert_int_equal(up_trust_add(t.trust, entries, 1, err, sizeof(err)), 0);
	json_decref(entries);
	assert_int_equal(run_save(&t, p, &s), 0);
	assert_true(s.trusted);
	assert_int_equal(up_read_file(p, 1 << 20, &text, &len), 0);
	up_sha256_hex(text, len, sha);
	free(text);
	assert_int_equal(up_trust_load(t.trust, &store, err, sizeof(err)), 0);
	assert_true(up_trust_has(store, p, sha));
	json_decref(store);
	/* changed behind the store's back: refused again */
	put_file(p, "rules:\n  - name: b\n    hosts: [b\\.example]\n", 0644);
	assert_int_equal(run_save(&t, p, &s), -EPERM);
	remove_tree(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_file),
		cmocka_unit_test(test_appended_keeping_the_old_bytes),
		cmocka_unit_test(test_list_at_column_zero_and_empty_rules),
		cmocka_unit_test(test_shapes_refused_with_a_reason),
		cmocka_unit_test(test_values_quoted_and_comments_tamed),
		cmocka_unit_test(test_what_is_a_project_file),
		cmocka_unit_test(test_save_own_file),
		cmocka_unit_test(test_save_elsewhere),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
