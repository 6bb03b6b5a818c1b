/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An agent image's tag covers its own folder and agents/common/ of the agents' folder (the
 * build context every agent image shares), nothing else: a change in another agent's folder
 * leaves it alone, a change in common/ or its own folder moves it, and its Dockerfile must be
 * in its folder.
 */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

static char tmp[64];

static void sh(const char *fmt, ...) _printf_(1, 2);
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	(void)state;
	(void)snprintf(tmp, sizeof(tmp), "/tmp/test-image-scope-XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	sh("cd %s && mkdir common one two && echo entry >common/entrypoint.sh && "
	   "echo 'FROM x' >one/Dockerfile && echo 'FROM y' >two/Dockerfile && "
	   "echo '*/*.c' >.dockerignore",
	   tmp);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", tmp);
	return 0;
}

static int hash_one(char hex[65], char *err, size_t len)
{
	static const char *const only[] = {"common", "one", NULL};
	const struct up_image_scope scope = {.dockerfile = "one/Dockerfile", .only = only};

	return up_image_context_hash(tmp, &scope, NULL, NULL, hex, err, len);
}

static void test_scope_covers_common_and_own(void **state)
{
	char before[65], after[65], err[256];
	static const char *const elsewhere[] = {
		"echo z >two/Dockerfile",     "echo more >two/new-file",
		"echo more >top-level-file",  "mkdir three && echo q >three/Dockerfile",
		"echo 'int x;' >one/agent.c", /* ignored by the root's .dockerignore */
	};
	static const char *const inside[] = {
		"echo changed >common/entrypoint.sh", "echo new >common/gitconfig",
		"echo 'FROM z' >one/Dockerfile",      "echo rules >one/default-rules.yaml",
		"echo '*.c' >.dockerignore",
	};

	(void)state;
	assert_int_equal(hash_one(before, err, sizeof(err)), 0);
	for (size_t i = 0; i < ELEMENTSOF(elsewhere); i++) {
		sh("cd %s && %s", tmp, elsewhere[i]);
		assert_int_equal(hash_one(after, err, sizeof(err)), 0);
		if (strcmp(before, after))
			fail_msg("'%s' changed the tag of agent one", elsewhere[i]);
	}
	for (size_t i = 0; i < ELEMENTSOF(inside); i++) {
		sh("cd %s && %s", tmp, inside[i]);
		assert_int_equal(hash_one(after, err, sizeof(err)), 0);
		if (!strcmp(before, after))
			fail_msg("'%s' did not change the tag of agent one", inside[i]);
		memcpy(before, after, sizeof(before));
	}
}

static void test_scope_needs_its_dockerfile(void **state)
{
	char hex[65], err[256];

	(void)state;
	sh("rm %s/one/Dockerfile", tmp);
	assert_int_equal(hash_one(hex, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "it has no one/Dockerfile");
	/* without a scope the root's Dockerfile is the one that counts */
	assert_int_equal(up_image_context_hash(tmp, NULL, NULL, NULL, hex, err, sizeof(err)),
			 -ENOENT);
	assert_string_equal(err, "it has no Dockerfile");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_scope_covers_common_and_own, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scope_needs_its_dockerfile, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
