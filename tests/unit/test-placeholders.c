/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placeholders: parsing, and resolution on a real loop with real children and the
 * file secret store (the libsecret one is exercised by the integration tests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "bounds.h"
#include "placeholders.h"
#include "rules.h"
#include "secret-store.h"
#include "knobs.h"

static char secret_file[] = "/tmp/test-placeholders-XXXXXX";

static void write_store(bool locked)
{
	FILE *f = fopen(secret_file, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"locked\": %s, \"entries\": ["
		"{\"service\": \"svc\", \"username\": \"us:er\", \"value\": \"s3cr3t\"},"
		"{\"service\": \"tricky\", \"username\": \"u\", \"value\": \"{{exec:touch "
		"%s.ran}}\"},"
		"{\"service\": \"nl\", \"username\": \"u\", \"value\": \"a\\nb\"}]}",
		locked ? "true" : "false", secret_file);
	fclose(f);
}

static int setup(void **state)
{
	int fd = mkstemp(secret_file);

	if (fd < 0)
		return -1;
	close(fd);
	setenv(UP_SECRET_FILE_ENV, secret_file, 1);
	up_knobs_load();
	return 0;
}

static int teardown(void **state)
{
	char ran[sizeof(secret_file) + 8];

	(void)snprintf(ran, sizeof(ran), "%s.ran", secret_file);
	(void)unlink(ran);
	(void)unlink(secret_file);
	return 0;
}

static void test_parse(void **state)
{
	struct up_ph_template t;
	char why[256];

	assert_int_equal(up_ph_parse("Bearer {{keyring:svc:us:er}}-{{exec:echo }} }}x{{y}}", &t,
				     why, sizeof(why)),
			 0);
	assert_int_equal(t.n, 5);
	assert_true(t.has_exec);
	assert_int_equal(t.segs[0].kind, UP_PH_LITERAL);
	assert_string_equal(t.segs[0].a, "Bearer ");
	assert_int_equal(t.segs[1].kind, UP_PH_KEYRING);
	assert_string_equal(t.segs[1].a, "svc");
	assert_string_equal(t.segs[1].b, "us:er");
	assert_string_equal(t.segs[2].a, "-");
	assert_int_equal(t.segs[3].kind, UP_PH_EXEC);
	assert_string_equal(t.segs[3].a, "echo ");
	assert_string_equal(t.segs[4].a, " }}x{{y}}");
	up_ph_template_done(&t);
	assert_int_equal(up_ph_parse("", &t, why, sizeof(why)), 0);
	assert_int_equal(t.n, 0);
	assert_int_equal(up_ph_parse("{{keyring::u}}", &t, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "malformed keyring placeholder; write {{keyring:SERVICE:USER}}");
	assert_int_equal(up_ph_parse("{{keyring:s:u}", &t, why, sizeof(why)), -EINVAL);
	assert_int_equal(up_ph_parse("{{exec:a\nb}}", &t, why, sizeof(why)),
			 0); /* a command may span lines */
	up_ph_template_done(&t);
}

struct result {
	bool done;
	int r;
	enum up_error e;
	char msg[1024];
};

static void on_done(int r, enum up_error e, const char *message, void *userdata)
{
	struct result *res = userdata;

	res->done = true;
	res->r = r;
	res->e = e;
	(void)snprintf(res->msg, sizeof(res->msg), "%s", message ? message : "");
}

static struct up_ruleset *rules_with(const char *value)
{
	struct up_ruleset *rs = up_ruleset_new();
	json_t *p = json_array();
	char yaml[4096], quoted[2048], *q = quoted;

	for (const char *v = value; *v; v++) /* single-quoted YAML: '' is a quote */
		q += sprintf(q, *v == '\'' ? "''" : "%c", *v);
	(void)snprintf(yaml, sizeof(yaml),
		       "rules:\n  - name: r\n    hosts: [x]\n    inject:\n      headers:\n        "
		       "X-A: '%s'\n",
		       quoted);
	assert_int_equal(up_ruleset_load_string(rs, UP_LAYER_USER, "t.yaml", yaml, strlen(yaml), p),
			 0);
	assert_int_equal(up_ruleset_finish(rs, true, p), 0);
	json_decref(p);
	return rs;
}

/* Resolves one value; returns the rule set (for the resolved value) and fills res. */
static struct up_ruleset *resolve(const char *value, bool allow_exec, unsigned timeout_ms,
				  struct result *res)
{
	struct up_resolve_options o = {.allow_exec = allow_exec,
				       .exec_timeout_ms = timeout_ms,
				       .store = &up_secret_store_file};
	struct up_ruleset *rs = rules_with(value);
	struct up_resolve *job;
	uv_loop_t loop;

	*res = (struct result){0};
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_resolve_start(&loop, rs, &o, on_done, res, &job), 0);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(res->done);
	assert_int_equal(uv_loop_close(&loop), 0);
	return rs;
}

static const char *resolved(struct up_ruleset *rs)
{
	return up_ruleset_get(rs, 0)->headers[0].resolved;
}

static void test_keyring(void **state)
{
	struct result res;
	struct up_ruleset *rs;

	write_store(false);
	rs = resolve("Bearer {{keyring:svc:us:er}}!", false, 0, &res);
	assert_int_equal(res.r, 0);
	assert_string_equal(resolved(rs), "Bearer s3cr3t!");
	up_ruleset_free(rs);

	rs = resolve("{{keyring:svc:nobody}}", false, 0, &res);
	assert_int_equal(res.r, -EINVAL);
	assert_int_equal(res.e, UP_ERR_SECRET_NOT_FOUND);
	assert_string_equal(
		res.msg,
		"rule 'r' (t.yaml:2), header 'X-A': keyring entry not found: service='svc' "
		"username='nobody'; create it with: keyring set 'svc' 'nobody'  (or: secret-tool "
		"store "
		"--label=uplink service 'svc' username 'nobody')");
	assert_null(resolved(rs));
	up_ruleset_free(rs);

	rs = resolve("{{keyring:nl:u}}", false, 0, &res);
	assert_int_equal(res.e, UP_ERR_RULES_INVALID);
	assert_string_equal(res.msg,
			    "rule 'r' (t.yaml:2), header 'X-A': the resolved value holds a "
			    "line break, another control character, or a character outside "
			    "Latin-1; a header value is one line of Latin-1 text");
	up_ruleset_free(rs);

	write_store(true);
	rs = resolve("{{keyring:svc:us:er}}", false, 0, &res);
	assert_int_equal(res.e, UP_ERR_KEYRING_LOCKED);
	assert_string_equal(
		res.msg,
		"rule 'r' (t.yaml:2), header 'X-A': the keyring holding service='svc' "
		"username='us:er' "
		"is locked; unlock it (log in to the desktop session, or run: gnome-keyring-daemon "
		"--unlock) and retry");
	assert_null(strstr(res.msg, "s3cr3t"));
	up_ruleset_free(rs);
}

static void test_single_pass(void **state)
{
	char ran[sizeof(secret_file) + 8];
	struct result res;
	struct up_ruleset *rs;

	write_store(false);
	(void)snprintf(ran, sizeof(ran), "%s.ran", secret_file);
	rs = resolve("{{keyring:tricky:u}}{{exec:printf '\\173\\173keyring:svc:us:er\\175\\175'}}",
		     true, 0, &res);
	assert_int_equal(res.r, 0);
	/* neither the keyring value nor the command's output is scanned again */
	(void)snprintf(res.msg, sizeof(res.msg), "{{exec:touch %s.ran}}{{keyring:svc:us:er}}",
		       secret_file);
	assert_string_equal(resolved(rs), res.msg);
	assert_int_equal(access(ran, F_OK), -1);
	up_ruleset_free(rs);
}

static void test_exec(void **state)
{
	struct result res;
	struct up_ruleset *rs;

	rs = resolve("a{{exec:echo '  tok  '; echo >&2 noise}}b", true, 0, &res);
	assert_int_equal(res.r, 0);
	assert_string_equal(resolved(rs), "atokb");
	up_ruleset_free(rs);

	rs = resolve("{{exec:echo out; echo bad thing >&2; exit 3}}", true, 0, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	assert_string_equal(res.msg,
			    "rule 'r' (t.yaml:2), header 'X-A': exec placeholder failed "
			    "(exit 3): 'echo out; echo bad thing >&2; exit 3': bad thing\n");
	assert_null(strstr(res.msg, "out;x"));
	up_ruleset_free(rs);

	rs = resolve("{{exec:printf \"a\\nb\"}}", true, 0, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	up_ruleset_free(rs);
	rs = resolve("{{exec:printf \"\\377\"}}", true, 0, &res); /* not UTF-8 */
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	up_ruleset_free(rs);
	rs = resolve("x{{exec:printf \"caf\\303\\251\"}}", true, 0, &res); /* Latin-1 in UTF-8 */
	assert_int_equal(res.r, 0);
	assert_string_equal(resolved(rs), "xcaf\xc3\xa9");
	up_ruleset_free(rs);
}

static void test_exec_not_allowed(void **state)
{
	struct result res;
	struct up_ruleset *rs;

	/* refused before anything runs, even before a failing keyring look-up */
	rs = resolve("{{keyring:svc:nobody}}{{exec:echo x}}", false, 0, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_NOT_ALLOWED);
	assert_string_equal(res.msg, "rule 'r' (t.yaml:2), header 'X-A': uses an {{exec:...}} "
				     "placeholder, and commands from rules run only when you allow "
				     "them: re-run with --allow-exec if you trust this rule");
	up_ruleset_free(rs);
}

static void test_exec_timeout(void **state)
{
	struct result res;
	struct up_ruleset *rs;
	uint64_t t0 = uv_hrtime();

	/* a grandchild holding the pipe open dies with the group */
	rs = resolve("{{exec:sleep 20 & sleep 20}}", true, 300, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	assert_string_equal(res.msg,
			    "rule 'r' (t.yaml:2), header 'X-A': exec placeholder timed out "
			    "after 300 ms: 'sleep 20 & sleep 20'");
	assert_true(uv_hrtime() - t0 < 5000000000ull);
	up_ruleset_free(rs);
}

static void test_exec_huge_output(void **state)
{
	struct result res;
	struct up_ruleset *rs;
	char msg[512];

	rs = resolve("{{exec:yes}}", true, 10000, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	(void)snprintf(msg, sizeof(msg),
		       "rule 'r' (t.yaml:2), header 'X-A': exec placeholder printed "
		       "more than %d bytes: 'yes'",
		       UP_EXEC_OUTPUT_MAX);
	assert_string_equal(res.msg, msg);
	up_ruleset_free(rs);

	/* under the cap, but the whole value is too long: the same bound */
	rs = resolve("{{exec:head -c 20000 /dev/zero | tr \"\\\\0\" x}}", true, 10000, &res);
	assert_int_equal(res.e, UP_ERR_EXEC_FAILED);
	up_ruleset_free(rs);
}

static void test_cancel(void **state)
{
	struct up_resolve_options o = {.allow_exec = true, .store = &up_secret_store_file};
	struct up_ruleset *rs = rules_with("{{exec:sleep 30}}");
	struct result res = {0};
	struct up_resolve *job;
	uv_loop_t loop;
	uint64_t t0 = uv_hrtime();

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_resolve_start(&loop, rs, &o, on_done, &res, &job), 0);
	(void)uv_run(&loop, UV_RUN_NOWAIT);
	up_resolve_cancel(job);
	up_ruleset_free(rs); /* the caller may drop the set at once */
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	assert_false(res.done);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_true(uv_hrtime() - t0 < 5000000000ull);

	/* a keyring worker cannot be stopped; the job waits for it and frees itself */
	write_store(false);
	rs = rules_with("{{keyring:svc:us:er}}");
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_resolve_start(&loop, rs, &o, on_done, &res, &job), 0);
	up_resolve_cancel(job);
	up_ruleset_free(rs);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	assert_false(res.done);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_no_placeholders(void **state)
{
	struct result res;
	struct up_ruleset *rs = resolve("plain", false, 0, &res);

	assert_int_equal(res.r, 0);
	assert_string_equal(resolved(rs), "plain");
	up_ruleset_free(rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_keyring),
		cmocka_unit_test(test_single_pass),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_exec_not_allowed),
		cmocka_unit_test(test_exec_timeout),
		cmocka_unit_test(test_exec_huge_output),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_no_placeholders),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
