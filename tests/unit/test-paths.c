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
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "util.h"

/* common/util.h: the prefix and suffix tests, on their edges. */
static void test_affixes(void **state)
{
	(void)state;
	assert_true(startswith("id_ed25519", "id_"));
	assert_true(startswith("x", ""));
	assert_false(startswith("id", "id_"));
	assert_true(endswith("id-cert.pub", "-cert.pub"));
	assert_true(endswith("-cert.pub", "-cert.pub"));
	assert_true(endswith("x", ""));
	assert_false(endswith("cert.pub", "-cert.pub"));
	assert_false(endswith("a.pub.bak", ".pub"));
	assert_false(endswith("", ".pub"));
}

static void test_socket_env(void **state)
{
	char buf[128];

	(void)state;
	setenv("UPLINK_SOCKET", "/tmp/x/y.sock", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	assert_int_equal(up_socket_path(buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/tmp/x/y.sock");
	unsetenv("UPLINK_SOCKET");
	assert_int_equal(up_socket_path(buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/run/user/1000/uplink/uplinkd.sock");
	setenv("XDG_RUNTIME_DIR", "relative", 1);
	assert_int_equal(up_socket_path(buf, sizeof(buf)), 0);
	snprintf(buf + 64, 64, "/run/user/%u/uplink/uplinkd.sock", (unsigned)getuid());
	assert_string_equal(buf, buf + 64);
	unsetenv("XDG_RUNTIME_DIR");
}

static void test_too_long(void **state)
{
	char buf[512], env[300];

	(void)state;
	memset(env, 'a', sizeof(env) - 1);
	env[0] = '/';
	env[sizeof(env) - 1] = '\0';
	setenv("UPLINK_SOCKET", env, 1);
	assert_int_equal(up_socket_path(buf, sizeof(buf)), -ENAMETOOLONG);
	unsetenv("UPLINK_SOCKET");
}

static void test_lock_path(void **state)
{
	char buf[128];

	(void)state;
	assert_int_equal(up_lock_path("/run/user/1/uplink/uplinkd.sock", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/run/user/1/uplink/uplinkd.lock");
	assert_int_equal(up_lock_path("sock", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "uplinkd.lock");
	assert_int_equal(up_lock_path("/a/sock", buf, 5), -ENAMETOOLONG);
}

static void test_path_under(void **state)
{
	(void)state;
	assert_true(up_path_under("/home/u", "/home/u"));
	assert_true(up_path_under("/home/u/src", "/home/u"));
	assert_false(up_path_under("/home/user", "/home/u"));
	assert_false(up_path_under("/home", "/home/u"));
	assert_true(up_path_under("/etc", "/"));
}

static void test_path_is_normal_abs(void **state)
{
	(void)state;
	assert_true(up_path_is_normal_abs("/home/u/src"));
	assert_true(up_path_is_normal_abs("/"));
	assert_false(up_path_is_normal_abs("home/u"));
	assert_false(up_path_is_normal_abs("/home/u/../v"));
	assert_false(up_path_is_normal_abs("/home/./u"));
}

static void test_mkdir_parents(void **state)
{
	char tmpl[] = "/tmp/uplink-paths-XXXXXX", path[256];
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(tmpl));
	snprintf(path, sizeof(path), "%s/a/b/c.sock", tmpl);
	assert_int_equal(up_mkdir_parents(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/a/b", tmpl);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/a/b/c.sock", tmpl);
	assert_int_equal(up_mkdir_parents(path, 0700), 0); /* idempotent */
	snprintf(path, sizeof(path), "%s/a/b", tmpl);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a", tmpl);
	rmdir(path);
	rmdir(tmpl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_affixes),
		cmocka_unit_test(test_socket_env),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_lock_path),
		cmocka_unit_test(test_mkdir_parents),
		cmocka_unit_test(test_path_under),
		cmocka_unit_test(test_path_is_normal_abs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
