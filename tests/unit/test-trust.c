/* SPDX-License-Identifier: Apache-2.0 */
/* The trust store (daemon/trust.c): hashes, adding, replacing, removing, refusing a bad store. */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "trust.h"

#define SHA_A "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" /* "abc" */
#define SHA_B "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" /* "" */

struct fixture {
	char dir[64];  /* the state folder */
	char path[96]; /* dir/trusted.json */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	size_t n;

	assert_non_null(f);
	(void)snprintf(f->dir, sizeof(f->dir), "/tmp/test-trust-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	/* a folder below it that does not exist yet: the store makes it */
	n = strlen(f->dir);
	assert_true(snprintf(f->dir + n, sizeof(f->dir) - n, "/uplink") <
		    (int)(sizeof(f->dir) - n));
	(void)snprintf(f->path, sizeof(f->path), "%s/" UP_TRUST_FILE, f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", (int)(strlen(f->dir) - strlen("/uplink")),
		       f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static json_t *entries(const char *file, const char *sha)
{
	json_t *a = json_pack("[{s:s, s:s}]", "file", file, "sha256", sha);

	assert_non_null(a);
	return a;
}

static json_t *load(const struct fixture *f)
{
	json_t *files = NULL;
	char err[512];

	assert_int_equal(up_trust_load(f->dir, &files, err, sizeof(err)), 0);
	return files;
}

static void test_sha256(void **state)
{
	char out[UP_SHA256_HEX_LEN + 1];

	(void)state;
	up_sha256_hex("abc", 3, out);
	assert_string_equal(out, SHA_A);
	up_sha256_hex("", 0, out);
	assert_string_equal(out, SHA_B);
}

static void test_missing_store_trusts_nothing(void **state)
{
	struct fixture *f = *state;
	json_t *files = load(f);

	assert_int_equal(json_object_size(files), 0);
	assert_false(up_trust_has(files, "/p/.uplink.yaml", SHA_A));
	json_decref(files);
}

static void test_add_replace_remove(void **state)
{
	struct fixture *f = *state;
	json_t *e = entries("/p/.uplink.yaml", SHA_A), *files, *removed = NULL, *paths;
	struct stat st;
	char err[512];
	DIR *d;

	assert_int_equal(up_trust_add(f->dir, e, 1700000000, err, sizeof(err)), 0);
	json_decref(e);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	files = load(f);
	assert_true(up_trust_has(files, "/p/.uplink.yaml", SHA_A));
	assert_false(up_trust_has(files, "/p/.uplink.yaml", SHA_B)); /* a changed file */
	assert_false(up_trust_has(files, "/q/.uplink.yaml", SHA_A)); /* the same bytes elsewhere */
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(files, "/p/.uplink.yaml"), "trusted_at")),
			 1700000000);
	json_decref(files);

	/* trusting it again at another hash replaces the entry */
	e = json_pack("[{s:s, s:s}, {s:s, s:s}]", "file", "/p/.uplink.yaml", "sha256", SHA_B,
		      "file", "/p/rules.yaml", "sha256", SHA_A);
	assert_int_equal(up_trust_add(f->dir, e, 1700000100, err, sizeof(err)), 0);
	json_decref(e);
	files = load(f);
	assert_int_equal(json_object_size(files), 2);
	assert_false(up_trust_has(files, "/p/.uplink.yaml", SHA_A));
	assert_true(up_trust_has(files, "/p/.uplink.yaml", SHA_B));
	json_decref(files);

	/* no temp file is left beside it */
	d = opendir(f->dir);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		assert_true(de->d_name[0] != '.' || streq(de->d_name, ".") ||
			    streq(de->d_name, "..") || streq(de->d_name, ".trusted.json.lock"));
	closedir(d);

	paths = json_pack("[s, s]", "/p/.uplink.yaml", "/never/.uplink.yaml");
	assert_int_equal(up_trust_remove(f->dir, paths, &removed, err, sizeof(err)), 0);
	json_decref(paths);
	assert_int_equal(json_array_size(removed), 1);
	assert_string_equal(json_string_value(json_array_get(removed, 0)), "/p/.uplink.yaml");
	json_decref(removed);
	files = load(f);
	assert_int_equal(json_object_size(files), 1);
	assert_false(up_trust_has(files, "/p/.uplink.yaml", SHA_B));
	assert_true(up_trust_has(files, "/p/rules.yaml", SHA_A));
	json_decref(files);
}

static void write_store(const struct fixture *f, const char *text, mode_t mode)
{
	json_t *e = entries("/p/.uplink.yaml", SHA_A);
	char err[512];
	FILE *out;

	if (access(f->path, F_OK) != 0) /* the first time: the store makes its folder */
		assert_int_equal(up_trust_add(f->dir, e, 1, err, sizeof(err)), 0);
	json_decref(e);
	out = fopen(f->path, "w");
	assert_non_null(out);
	assert_true(fputs(text, out) >= 0);
	assert_int_equal(fclose(out), 0);
	assert_int_equal(chmod(f->path, mode), 0);
}

static void test_a_broken_store_is_refused_not_overwritten(void **state)
{
	struct fixture *f = *state;
	json_t *files = NULL, *e = entries("/p/.uplink.yaml", SHA_A);
	char err[512], text[64] = "";
	FILE *in;

	write_store(f, "{\"version\": 1, \"files\": {\"/p/.uplink.yaml\": {\"sha256\": \"x\"}}}",
		    0600);
	assert_int_equal(up_trust_load(f->dir, &files, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is broken"));
	assert_non_null(strstr(err, "move it away"));
	write_store(f, "not json", 0600);
	assert_int_equal(up_trust_load(f->dir, &files, err, sizeof(err)), -EINVAL);
	assert_int_equal(up_trust_add(f->dir, e, 1, err, sizeof(err)), -EINVAL);
	json_decref(e);
	in = fopen(f->path, "r");
	assert_non_null(in);
	assert_non_null(fgets(text, sizeof(text), in));
	(void)fclose(in);
	assert_string_equal(text, "not json");
}

static void test_a_store_others_may_write_is_refused(void **state)
{
	struct fixture *f = *state;
	json_t *files = NULL;
	char err[512];

	write_store(f, "{\"version\": 1, \"files\": {}}\n", 0622);
	assert_int_equal(up_trust_load(f->dir, &files, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "chmod 600"));
}

static void test_bad_entries_and_limits(void **state)
{
	struct fixture *f = *state;
	json_t *e = entries("relative/.uplink.yaml", SHA_A), *files;
	char err[512], path[64];

	assert_int_equal(up_trust_add(f->dir, e, 1, err, sizeof(err)), -EINVAL);
	json_decref(e);
	e = entries("/p/.uplink.yaml", "abc");
	assert_int_equal(up_trust_add(f->dir, e, 1, err, sizeof(err)), -EINVAL);
	json_decref(e);
	e = json_array();
	for (int i = 0; i <= UP_MAX_TRUSTED_FILES; i++) {
		(void)snprintf(path, sizeof(path), "/p%d/.uplink.yaml", i);
		assert_int_equal(json_array_append_new(
					 e, json_pack("{s:s, s:s}", "file", path, "sha256", SHA_A)),
				 0);
	}
	assert_int_equal(up_trust_add(f->dir, e, 1, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "uplink untrust"));
	json_decref(e);
	files = load(f);
	assert_int_equal(json_object_size(files), 0); /* nothing half-written */
	json_decref(files);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test_setup_teardown(test_missing_store_trusts_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_replace_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_broken_store_is_refused_not_overwritten,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_store_others_may_write_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_entries_and_limits, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
