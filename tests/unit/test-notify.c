/* SPDX-License-Identifier: Apache-2.0 */
/* The notifier's pure parts (rate limiter, bodies) and its backend choice on a real loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "notify.h"
#include "knobs.h"

static void test_limiter_once_a_minute(void **state)
{
	struct up_notify_limiter *l = malloc(sizeof(*l));
	uint64_t count = 0, total = 0;

	(void)state;
	up_notify_limiter_init(l, 60000);
	assert_true(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 1000, &count, &total));
	assert_int_equal(count, 1);
	assert_int_equal(total, 1);
	for (uint64_t t = 1001; t < 1005; t++)
		assert_false(up_notify_limiter_hit(l, "aaaaaaaaaaaa", t, &count, &total));
	assert_int_equal(total, 5);
	/* Just under a minute: still quiet. */
	assert_false(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 60999, &count, &total));
	/* A minute on: one more, covering the muted ones and this one. */
	assert_true(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 61000, &count, &total));
	assert_int_equal(count, 6);
	assert_int_equal(total, 7);
	assert_int_equal(up_notify_limiter_total(l, "aaaaaaaaaaaa"), 7);
	free(l);
}

static void test_limiter_per_session(void **state)
{
	struct up_notify_limiter *l = malloc(sizeof(*l));
	uint64_t count = 0, total = 0;

	(void)state;
	up_notify_limiter_init(l, 60000);
	assert_true(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 0, &count, &total));
	assert_true(up_notify_limiter_hit(l, "bbbbbbbbbbbb", 1, &count, &total));
	assert_false(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 2, &count, &total));
	assert_int_equal(up_notify_limiter_total(l, "bbbbbbbbbbbb"), 1);
	assert_int_equal(up_notify_limiter_total(l, "cccccccccccc"), 0);
	/* A forgotten session starts over. */
	up_notify_limiter_forget(l, "aaaaaaaaaaaa");
	assert_int_equal(up_notify_limiter_total(l, "aaaaaaaaaaaa"), 0);
	assert_true(up_notify_limiter_hit(l, "aaaaaaaaaaaa", 3, &count, &total));
	assert_int_equal(total, 1);
	assert_int_equal(up_notify_limiter_total(l, "bbbbbbbbbbbb"), 1);
	up_notify_limiter_forget(l, "never-seen");
	free(l);
}

static void test_limiter_bounded(void **state)
{
	struct up_notify_limiter *l = malloc(sizeof(*l));
	uint64_t count = 0, total = 0;
	char id[32], longid[100];

	(void)state;
	up_notify_limiter_init(l, 60000);
	for (int i = 0; i < UP_MAX_NOTIFY_SESSIONS; i++) {
		(void)snprintf(id, sizeof(id), "s%d", i);
		assert_true(up_notify_limiter_hit(l, id, 0, &count, &total));
	}
	/* One more session than fits: never counted, never notified. */
	assert_false(up_notify_limiter_hit(l, "one-too-many", 0, &count, &total));
	assert_int_equal(up_notify_limiter_total(l, "one-too-many"), 0);
	up_notify_limiter_forget(l, "s7");
	assert_true(up_notify_limiter_hit(l, "one-too-many", 0, &count, &total));
	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	up_notify_limiter_forget(l, "s8");
	assert_false(up_notify_limiter_hit(l, longid, 0, &count, &total));
	free(l);
}

static int fmt(const char *json, uint64_t denied, char *summary, char *body,
	       enum up_notify_urgency *u)
{
	json_t *s = json_loads(json, 0, NULL);
	int r;

	assert_non_null(s);
	r = up_notify_format_ended(s, 10000, denied, summary, 256, body, 1024, u);
	json_decref(s);
	return r;
}

static void test_format_exited(void **state)
{
	char summary[256], body[1024];
	enum up_notify_urgency u;

	(void)state;
	assert_int_equal(fmt("{\"id\":\"aaaaaaaaaaaa\",\"agent\":\"claude\",\"cwd\":\"/src/p\","
			     "\"state\":\"EXITED\",\"created_at\":6275,\"exit_code\":3}",
			     2, summary, body, &u),
			 0);
	assert_string_equal(summary, "claude finished");
	assert_string_equal(body,
			    "Session aaaaaaaaaaaa in /src/p\nExited with code 3 after 1h02m.\n"
			    "2 requests were denied.");
	assert_int_equal(u, UP_NOTIFY_NORMAL);
	/* "denied" in the object wins; one is singular; none says nothing. */
	assert_int_equal(fmt("{\"id\":\"a\",\"cwd\":\"/\",\"state\":\"EXITED\",\"created_at\":9958,"
			     "\"exit_code\":0,\"denied\":1}",
			     9, summary, body, &u),
			 0);
	assert_string_equal(body,
			    "Session a in /\nExited with code 0 after 42s.\n1 request was denied.");
	assert_string_equal(summary, "agent finished");
	assert_int_equal(fmt("{\"id\":\"a\",\"cwd\":\"/\",\"state\":\"EXITED\",\"created_at\":0,"
			     "\"ended_at\":90000,\"exit_code\":137}",
			     0, summary, body, &u),
			 0);
	assert_string_equal(body, "Session a in /\nExited with code 137 after 1d01h.");
	/* No exit code, no start time. */
	assert_int_equal(
		fmt("{\"id\":\"a\",\"cwd\":\"/\",\"state\":\"EXITED\"}", 0, summary, body, &u), 0);
	assert_string_equal(body, "Session a in /\nExited after an unknown time.");
}

static void test_format_failed_and_stopped(void **state)
{
	char summary[256], body[1024];
	enum up_notify_urgency u;

	(void)state;
	assert_int_equal(
		fmt("{\"id\":\"b\",\"agent\":\"claude\",\"cwd\":\"/w\",\"state\":\"FAILED\","
		    "\"created_at\":9400,\"reason\":\"the pod was evicted\"}",
		    0, summary, body, &u),
		0);
	assert_string_equal(summary, "claude session failed");
	assert_string_equal(body, "Session b in /w\nFailed after 10m: the pod was evicted");
	assert_int_equal(u, UP_NOTIFY_CRITICAL);
	assert_int_equal(fmt("{\"id\":\"b\",\"state\":\"FAILED\",\"created_at\":9400}", 0, summary,
			     body, &u),
			 0);
	assert_string_equal(body, "Session b in ?\nFailed after 10m: no reason was recorded");
	assert_int_equal(
		fmt("{\"id\":\"c\",\"cwd\":\"/w\",\"state\":\"STOPPED\",\"created_at\":10000,"
		    "\"reason\":\"stopped by the user\"}",
		    3, summary, body, &u),
		0);
	assert_string_equal(summary, "agent session stopped");
	assert_string_equal(body, "Session c in /w\nStopped after 0s: stopped by the user.\n"
				  "3 requests were denied.");
	assert_int_equal(u, UP_NOTIFY_NORMAL);
	assert_int_equal(fmt("{\"id\":\"c\",\"state\":\"RUNNING\"}", 0, summary, body, &u),
			 -EINVAL);
}

static void test_format_denied(void **state)
{
	char body[256];

	(void)state;
	up_notify_format_denied("aaaaaaaaaaaa", "GET evil.example/", 1, body, sizeof(body));
	assert_string_equal(body, "Session aaaaaaaaaaaa: a request was denied: GET evil.example/");
	up_notify_format_denied("aaaaaaaaaaaa", "CONNECT x:443", 12, body, sizeof(body));
	assert_string_equal(body,
			    "Session aaaaaaaaaaaa: 12 requests were denied in the last minute; "
			    "the latest: CONNECT x:443");
}

/* The backends on a real loop: every handle closed, nothing leaked. */
static void test_backends(void **state)
{
	struct up_notifier *n = NULL;
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(setenv(UP_NOTIFY_ENV, "0", 1), 0);
	up_knobs_load();
	assert_int_equal(up_notifier_new(&loop, &n), 0);
	assert_null(n);
	assert_string_equal(up_notifier_backend(n), "off");
	up_notify_session_ended(n, json_pack("{s:s}", "state", "FAILED")); /* takes NULL, frees */
	assert_false(up_notify_denied(n, "a", "x"));
	assert_int_equal(unsetenv(UP_NOTIFY_ENV), 0);
	up_knobs_load();

	assert_int_equal(setenv(UP_NOTIFIER_ENV, "log", 1), 0);
	up_knobs_load();
	assert_int_equal(up_notifier_new(&loop, &n), 0);
	assert_string_equal(up_notifier_backend(n), "log");
	up_notify_session_ended(n, json_pack("{s:s, s:s}", "id", "a", "state", "FAILED"));
	up_notify_session_expiring(n, json_pack("{s:s}", "id", "a"), "idle", 600);
	up_notify_credential_failed(n, "claude", NULL, "401");
	assert_true(up_notify_denied(n, "a", "GET x/"));
	assert_false(up_notify_denied(n, "a", "GET x/"));
	n = up_notifier_free(n);
	assert_int_equal(unsetenv(UP_NOTIFIER_ENV), 0);
	up_knobs_load();

	/* No bus at all: the D-Bus backend hands over to the log. */
	assert_int_equal(setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1), 0);
	assert_int_equal(up_notifier_new(&loop, &n), 0);
	assert_string_equal(up_notifier_backend(n), "log");
	up_notify_credential_failed(n, NULL, "aaaaaaaaaaaa", "401");
	n = up_notifier_free(n);

	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limiter_once_a_minute),
		cmocka_unit_test(test_limiter_per_session),
		cmocka_unit_test(test_limiter_bounded),
		cmocka_unit_test(test_format_exited),
		cmocka_unit_test(test_format_failed_and_stopped),
		cmocka_unit_test(test_format_denied),
		cmocka_unit_test(test_backends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
