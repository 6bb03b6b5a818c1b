/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/ssh-keys.c: the classification of --ssh-key-dir, names, ssh-keygen's reasons, and
 * the refusals that need no ssh-keygen (the rest runs for real in test_session_flags.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "ssh-keys.h"

#define PRIV \
	"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----\n"

static void test_classify_table(void **state)
{
	static const struct {
		const char *name, *data;
		enum up_ssh_class want;
	} cases[] = {
		{"id_ed25519", PRIV, UP_SSH_PRIVATE},
		{"deploy", "-----BEGIN RSA PRIVATE KEY-----\nx\n", UP_SSH_PRIVATE},
		{"id_ed25519-cert.pub", "ssh-ed25519-cert-v01@openssh.com AAAA", UP_SSH_CERT},
		{"id_ed25519.pub", "ssh-ed25519 AAAA", UP_SSH_IGNORE},
		/* another .pub stays home, whatever it holds */
		{"weird.pub", PRIV, UP_SSH_IGNORE},
		/* content first for what would reach the agent: a key named as a cert is a key */
		{"x-cert.pub", PRIV, UP_SSH_PRIVATE},
		{"x-cert.pub", "-----BEGIN RSA PRIVATE KEY-----\nx\n", UP_SSH_PRIVATE},
		{"config", "Host *\n", UP_SSH_CONFIG},
		/* a private key named config goes to the holder, not the agent */
		{"config", PRIV, UP_SSH_PRIVATE},
		{"known_hosts", "host ssh-ed25519 AAAA\n", UP_SSH_IGNORE},
		{"authorized_keys", "ssh-rsa AAAA\n", UP_SSH_IGNORE},
		{"notes", "PRIVATE KEY", UP_SSH_IGNORE}, /* the marker needs its dashes */
		{"config.bak", "Host *\n", UP_SSH_IGNORE},
		{".hidden", PRIV, UP_SSH_PRIVATE},
		{"empty", "", UP_SSH_IGNORE},
	};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		enum up_ssh_class got =
			up_ssh_classify(cases[i].name, cases[i].data, strlen(cases[i].data));
		if (got != cases[i].want)
			fail_msg("case %zu (%s): got %d, want %d", i, cases[i].name, got,
				 cases[i].want);
	}
	/* the marker may sit anywhere, even past a NUL */
	static const char bin[] = "\0\0PRIVATE KEY-----";
	assert_int_equal(up_ssh_classify("k", bin, sizeof(bin) - 1), UP_SSH_PRIVATE);
	assert_int_equal(up_ssh_classify("k", NULL, 0), UP_SSH_IGNORE);
	/* unread (too large): by name alone, so a large certificate is still refused */
	assert_int_equal(up_ssh_classify("x-cert.pub", NULL, 0), UP_SSH_CERT);
}

static void test_names(void **state)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{"id_ed25519", true}, {"id_ed25519-cert.pub", true},
		{"config", true},     {"a.b-c_D9", true},
		{".hidden", true}, /* a valid key; refused for private keys */
		{"", false},	      {".", false},
		{"..", false},	      {"has space", false},
		{"a/b", false},	      {"ümlaut", false},
		{"tab\t", false},     {NULL, false},
	};
	char longest[251];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		if (up_ssh_name_ok(cases[i].name) != cases[i].ok)
			fail_msg("case %zu (%s)", i, cases[i].name ? cases[i].name : "NULL");
	memset(longest, 'k', sizeof(longest) - 1);
	longest[249] = '\0'; /* "<249>.pub" is 253, the longest Secret key */
	assert_true(up_ssh_name_ok(longest));
	longest[249] = 'k';
	longest[250] = '\0';
	assert_false(up_ssh_name_ok(longest));
}

static void test_keygen_reason(void **state)
{
	static const struct {
		const char *out, *want;
	} cases[] = {
		{"Enter passphrase: Load key \"/k\": incorrect passphrase supplied to decrypt "
		 "private key\r\n",
		 "Load key \"/k\": incorrect passphrase supplied to decrypt private key"},
		{"@@@@@@@@\n@ WARNING: UNPROTECTED PRIVATE KEY FILE! @\n@@@@@@@@\nPermissions 0644 "
		 "for "
		 "'/k' are too open.\nIt is required...\n",
		 "Permissions 0644 for '/k' are too open."},
		{"\n\nLoad key \"/k\": invalid format\n", "Load key \"/k\": invalid format"},
		{"Enter passphrase: Enter passphrase: \n", "ssh-keygen failed without saying why"},
		{"", "ssh-keygen failed without saying why"},
	};
	char buf[128];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		up_ssh_keygen_reason(cases[i].out, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].want);
	}
	up_ssh_keygen_reason("a long line that does not fit", buf, 8);
	assert_string_equal(buf, "a long ");
}

/* ---------------------------------------------------------------- the folder */

static char dir[64];

static void put(const char *name, const char *data, size_t len)
{
	char path[256];
	int fd;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static int setup(void **state)
{
	(void)state;
	(void)snprintf(dir, sizeof(dir), "/tmp/up-ssh-keys-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int load(uid_t uid, struct up_ssh_keys *k, bool *no_keys, char *why, size_t len)
{
	why[0] = '\0';
	return up_ssh_keys_load(dir, uid, k, no_keys, why, len);
}

static void test_no_private_keys(void **state)
{
	struct up_ssh_keys k;
	bool no_keys;
	char why[512];

	(void)state;
	put("config", "Host *\n", 7);
	put("id_old.pub", "ssh-ed25519 AAAA\n", 17);
	put("id-cert.pub", "ssh-ed25519-cert-v01@openssh.com AAAA\n", 38);
	(void)snprintf(why, sizeof(why), "%s/sub", dir);
	assert_int_equal(mkdir(why, 0700), 0);
	assert_int_equal(load(0, &k, &no_keys, why, sizeof(why)),
			 0); /* root is fine without keys */
	assert_true(no_keys);
	assert_int_equal(k.n_keys + k.n_pub, 0);
	assert_null(k.keys);
	up_ssh_keys_done(&k);
}

/* A private key named as a certificate or as the config is a key: never one of the agent's. */
static void test_private_key_under_an_agent_name(void **state)
{
	struct up_ssh_keys k;
	bool no_keys;
	char why[512];

	(void)state;
	put("id-cert.pub", PRIV, strlen(PRIV));
	/* counted as a private key: refused for root before ssh-keygen runs (not "no keys") */
	assert_int_equal(load(0, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_false(no_keys);
	assert_non_null(strstr(why, "--ssh-key-dir is unsupported when running uplinkd as root"));
	assert_int_equal(k.n_pub, 0);
	/* and a name the holder cannot take is refused, not sent to the agent */
	put("bad name-cert.pub", PRIV, strlen(PRIV));
	assert_int_equal(load(1000, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "the file name 'bad name-cert.pub' cannot be used"));
	assert_int_equal(k.n_pub, 0);
}

static void test_refusals(void **state)
{
	struct up_ssh_keys k;
	bool no_keys;
	char why[512], big[UP_MAX_SSH_FILE_SIZE + 1], name[128];

	(void)state;
	/* root, with a key: before ssh-keygen is ever run */
	put("id_ed25519", PRIV, strlen(PRIV));
	assert_int_equal(load(0, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_string_equal(
		why, "--ssh-key-dir is unsupported when running uplinkd as root: the "
		     "ssh-agent holder pod runs as your uid and must not be root; run uplinkd "
		     "as your own user");
	/* a hidden private key */
	put(".old_key", PRIV, strlen(PRIV));
	assert_int_equal(load(1000, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "--ssh-key-dir: the private key .old_key starts with '.', and the "
				 "ssh-agent holder skips hidden files; rename it");
	(void)snprintf(name, sizeof(name), "%s/.old_key", dir);
	assert_int_equal(unlink(name), 0);
	/* a name that cannot be a Secret key */
	put("my key", PRIV, strlen(PRIV));
	assert_int_equal(load(1000, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "the file name 'my key' cannot be used"));
	(void)snprintf(name, sizeof(name), "%s/my key", dir);
	assert_int_equal(unlink(name), 0);
	/* a config too large to be one; a large other file is only ignored */
	memset(big, '#', sizeof(big));
	put("known_hosts", big, sizeof(big));
	put("config", big, sizeof(big));
	assert_int_equal(load(0, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "--ssh-key-dir: config is larger than 64 KiB");
	put("config", "Host *\n", 7);
	/* more than UP_MAX_SSH_FILES taken */
	for (int i = 0; i < UP_MAX_SSH_FILES; i++) {
		(void)snprintf(name, sizeof(name), "c%02d-cert.pub", i);
		put(name, "x", 1);
	}
	assert_int_equal(load(1000, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "holds more than 32 keys, certificates and configs"));
	assert_null(k.keys);
	/* not a folder */
	(void)snprintf(name, sizeof(name), "%s/config", dir);
	why[0] = '\0';
	assert_int_equal(up_ssh_keys_load(name, 1000, &k, &no_keys, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "/config does not exist or is not a directory"));
	assert_int_equal(up_ssh_keys_load("/nonexistent/x", 1000, &k, &no_keys, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why,
			    "--ssh-key-dir /nonexistent/x does not exist or is not a directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify_table),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_keygen_reason),
		cmocka_unit_test_setup_teardown(test_no_private_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_private_key_under_an_agent_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
