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
#include <unistd.h>

#include "session-state.h"

#define S(x) UP_SESSION_##x

static const char *const names[] = {
	"PREPARING", "BUILDING", "DEPLOYING", "STARTING", "RUNNING",
	"EXITED",    "FAILED",	 "STOPPED",   "TEARDOWN", "GONE",
};

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(_UP_SESSION_STATE_MAX, 10);
	assert_int_equal(_UP_SESSION_STATE_INVALID, -EINVAL);
	for (int i = 0; i < _UP_SESSION_STATE_MAX; i++) {
		assert_string_equal(up_session_state_to_name((enum up_session_state)i), names[i]);
		assert_int_equal(up_session_state_from_name(names[i]), i);
	}
	assert_null(up_session_state_to_name(_UP_SESSION_STATE_MAX));
	assert_null(up_session_state_to_name(_UP_SESSION_STATE_INVALID));
	assert_null(up_session_state_to_name((enum up_session_state) - 1));
	assert_int_equal(up_session_state_from_name("running"), _UP_SESSION_STATE_INVALID);
	assert_int_equal(up_session_state_from_name("RUNNING "), _UP_SESSION_STATE_INVALID);
	assert_int_equal(up_session_state_from_name(""), _UP_SESSION_STATE_INVALID);
	assert_int_equal(up_session_state_from_name(NULL), _UP_SESSION_STATE_INVALID);
}

static void test_classes(void **state)
{
	static const bool terminal[] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
	static const bool starting[] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0};

	(void)state;
	for (int i = 0; i < _UP_SESSION_STATE_MAX; i++) {
		assert_int_equal(up_session_state_is_terminal((enum up_session_state)i),
				 terminal[i]);
		assert_int_equal(up_session_state_is_starting((enum up_session_state)i),
				 starting[i]);
	}
	assert_false(up_session_state_is_terminal(_UP_SESSION_STATE_INVALID));
	assert_false(up_session_state_is_starting(_UP_SESSION_STATE_INVALID));
	assert_false(up_session_state_is_terminal(_UP_SESSION_STATE_MAX));
}

/* Every legal move; every pair not listed must be refused. */
static const struct {
	enum up_session_state from, to;
} legal[] = {
	{S(PREPARING), S(BUILDING)}, {S(PREPARING), S(DEPLOYING)}, {S(PREPARING), S(FAILED)},
	{S(PREPARING), S(STOPPED)},  {S(BUILDING), S(DEPLOYING)},  {S(BUILDING), S(FAILED)},
	{S(BUILDING), S(STOPPED)},   {S(DEPLOYING), S(STARTING)},  {S(DEPLOYING), S(FAILED)},
	{S(DEPLOYING), S(STOPPED)},  {S(STARTING), S(RUNNING)},	   {S(STARTING), S(EXITED)},
	{S(STARTING), S(FAILED)},    {S(STARTING), S(STOPPED)},	   {S(RUNNING), S(EXITED)},
	{S(RUNNING), S(FAILED)},     {S(RUNNING), S(STOPPED)},	   {S(RUNNING), S(GONE)},
	{S(EXITED), S(TEARDOWN)},    {S(FAILED), S(TEARDOWN)},	   {S(STOPPED), S(TEARDOWN)},
	{S(TEARDOWN), S(GONE)},
};

static bool listed(int from, int to)
{
	for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
		if ((int)legal[i].from == from && (int)legal[i].to == to)
			return true;
	return false;
}

static void test_transitions(void **state)
{
	int n = 0;

	(void)state;
	for (int from = 0; from < _UP_SESSION_STATE_MAX; from++)
		for (int to = 0; to < _UP_SESSION_STATE_MAX; to++) {
			bool ok = up_session_state_can_move((enum up_session_state)from,
							    (enum up_session_state)to);
			if (ok != listed(from, to))
				fail_msg("%s -> %s: table says %d", names[from], names[to], ok);
			n += ok;
		}
	assert_int_equal(n, (int)(sizeof(legal) / sizeof(legal[0])));
}

static void test_transition_spot_checks(void **state)
{
	(void)state;
	/* No way back, no way out of GONE, no skipping teardown, no standing still. */
	assert_false(up_session_state_can_move(S(RUNNING), S(STARTING)));
	assert_false(up_session_state_can_move(S(GONE), S(PREPARING)));
	assert_false(up_session_state_can_move(S(EXITED), S(GONE)));
	assert_false(up_session_state_can_move(S(EXITED), S(RUNNING)));
	assert_false(up_session_state_can_move(S(PREPARING), S(RUNNING)));
	assert_false(up_session_state_can_move(S(RUNNING), S(RUNNING)));
	assert_false(up_session_state_can_move(S(TEARDOWN), S(FAILED)));
	assert_false(up_session_state_can_move(_UP_SESSION_STATE_INVALID, S(FAILED)));
	assert_false(up_session_state_can_move(S(RUNNING), _UP_SESSION_STATE_MAX));
	/* Every state can reach GONE, and every non-terminal one FAILED. */
	for (int i = 0; i < _UP_SESSION_STATE_MAX; i++) {
		int s = i, steps = 0;
		while (s != S(GONE) && steps++ < 10) {
			int next = s == S(TEARDOWN) ? S(GONE)
				   : up_session_state_is_terminal((enum up_session_state)s)
					   ? S(TEARDOWN)
					   : S(FAILED);
			assert_true(up_session_state_can_move((enum up_session_state)s,
							      (enum up_session_state)next));
			s = next;
		}
		assert_int_equal(s, S(GONE));
	}
}

static bool hex12(const char *id)
{
	if (strlen(id) != 12)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static void test_ids(void **state)
{
	char a[UP_SESSION_ID_LEN + 1], b[UP_SESSION_ID_LEN + 1];

	(void)state;
	assert_int_equal(up_session_id_new(a), 0);
	assert_int_equal(up_session_id_new(b), 0);
	assert_true(hex12(a));
	assert_true(up_session_id_valid(a));
	assert_string_not_equal(a, b);
	assert_true(up_session_id_valid("0123456789ab"));
	assert_false(up_session_id_valid("0123456789AB"));
	assert_false(up_session_id_valid("0123456789a"));
	assert_false(up_session_id_valid("0123456789abc"));
	assert_false(up_session_id_valid("0123456789ag"));
	assert_false(up_session_id_valid("../../etc/pa"));
	assert_false(up_session_id_valid(""));
	assert_false(up_session_id_valid(NULL));
	assert_int_equal(UP_NAMESPACE_MAX, sizeof("agent-uplink-0123456789ab"));
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void test_owner_hash(void **state)
{
	char dir[] = "/tmp/test-session-state-XXXXXX", path[128], h1[17], h2[17], h3[17];

	(void)state;
	assert_non_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/machine-id", dir);
	write_file(path, "0123456789abcdef0123456789abcdef\n");
	assert_int_equal(up_owner_hash(path, 1000, h1), 0);
	/* printf '0123456789abcdef0123456789abcdef:1000' | sha256sum | cut -c1-16 */
	assert_string_equal(h1, "0457dce01f5a8247");
	assert_int_equal(up_owner_hash(path, 1001, h2), 0);
	assert_string_not_equal(h1, h2);
	write_file(path, "fedcba9876543210fedcba9876543210");
	assert_int_equal(up_owner_hash(path, 1000, h3), 0);
	assert_string_not_equal(h1, h3);

	write_file(path, "");
	assert_int_equal(up_owner_hash(path, 1000, h3), -EBADMSG);
	write_file(path, "uninitialized\n");
	assert_int_equal(up_owner_hash(path, 1000, h3), -EBADMSG);
	write_file(path, "0123456789ABCDEF0123456789ABCDEF\n");
	assert_int_equal(up_owner_hash(path, 1000, h3), -EBADMSG);
	write_file(path, "0123456789abcdef0123456789abcdef0\n");
	assert_int_equal(up_owner_hash(path, 1000, h3), -EBADMSG);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(up_owner_hash(path, 1000, h3), -ENOENT);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),	    cmocka_unit_test(test_classes),
		cmocka_unit_test(test_transitions), cmocka_unit_test(test_transition_spot_checks),
		cmocka_unit_test(test_ids),	    cmocka_unit_test(test_owner_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
