/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Questions (notify.h): the actions and their answers, the body's markup, and on a real loop
 * with the log backend: each answer comes once, later, never from inside up_notify_ask(); a
 * closed question never answers; a notifier freed answers its open questions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "knobs.h"
#include "notify-private.h"

static void test_actions(void **state)
{
	static const char *const want[] = {
		"allow-once", "Allow once",    "allow-session", "Allow for this session",
		"always",     "Always (save)", "deny",		"Deny",
	};
	size_t i;

	(void)state;
	for (i = 0; up_notify_question_actions[i]; i++) {
		assert_true(i < 8);
		assert_string_equal(up_notify_question_actions[i], want[i]);
	}
	assert_int_equal(i, 8);
	assert_int_equal(up_notify_answer_of_action("allow-once"), UP_NOTIFY_ALLOW_ONCE);
	assert_int_equal(up_notify_answer_of_action("allow-session"), UP_NOTIFY_ALLOW_SESSION);
	assert_int_equal(up_notify_answer_of_action("always"), UP_NOTIFY_ALWAYS);
	assert_int_equal(up_notify_answer_of_action("deny"), UP_NOTIFY_DENY);
	assert_int_equal(up_notify_answer_of_action("default"), -EINVAL);
	assert_int_equal(up_notify_answer_of_action("show-log"), -EINVAL);
	assert_int_equal(up_notify_answer_of_action(NULL), -EINVAL);
	assert_string_equal(up_notify_answer_name(UP_NOTIFY_ALLOW_ONCE), "once");
	assert_string_equal(up_notify_answer_name(UP_NOTIFY_ALLOW_SESSION), "session");
	assert_string_equal(up_notify_answer_name(UP_NOTIFY_ALWAYS), "always");
	assert_string_equal(up_notify_answer_name(UP_NOTIFY_DENY), "deny");
	assert_string_equal(up_notify_answer_name(UP_NOTIFY_NO_ANSWER), "none");
}

static void test_markup(void **state)
{
	char *s = up_notify_markup_escape("POST a.example/<b>?x=1&y=<i>'\"");

	(void)state;
	assert_string_equal(s, "POST a.example/&lt;b&gt;?x=1&amp;y=&lt;i&gt;'\"");
	free(s);
	s = up_notify_markup_escape("");
	assert_string_equal(s, "");
	free(s);
}

struct seen {
	int calls;
	enum up_notify_answer last;
};

static void on_answer(enum up_notify_answer a, void *ud)
{
	struct seen *s = ud;

	s->calls++;
	s->last = a;
}

static struct up_notifier *log_notifier(uv_loop_t *loop)
{
	struct up_notifier *n = NULL;

	assert_int_equal(setenv(UP_NOTIFIER_ENV, "log", 1), 0);
	up_knobs_load();
	assert_int_equal(up_notifier_new(loop, &n), 0);
	assert_string_equal(up_notifier_backend(n), "log");
	return n;
}

static void test_log_backend_answers_later_once(void **state)
{
	struct seen a = {0}, b = {0}, c = {0};
	struct up_notify_question *qa, *qb, *qc;
	struct up_notifier *n;
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	n = log_notifier(&loop);
	qa = up_notify_ask(n, "claude wants POST x.example/a", "Session a", on_answer, &a);
	qb = up_notify_ask(n, "claude wants POST x.example/b", "Session a", on_answer, &b);
	assert_non_null(qa);
	assert_non_null(qb);
	assert_int_equal(a.calls, 0); /* never from inside up_notify_ask() */
	assert_null(up_notify_question_close(qb));
	assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.last, UP_NOTIFY_NO_ANSWER);
	assert_int_equal(b.calls, 0); /* closed: never answered */
	/* open when the notifier goes: answered then */
	qc = up_notify_ask(n, "claude wants GET y.example/", "", on_answer, &c);
	assert_non_null(qc);
	n = up_notifier_free(n);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.last, UP_NOTIFY_NO_ANSWER);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(unsetenv(UP_NOTIFIER_ENV), 0);
	up_knobs_load();
}

static void test_off_and_no_bus(void **state)
{
	struct seen a = {0};
	struct up_notifier *n = NULL;
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_null(up_notify_ask(NULL, "s", "b", on_answer, &a));
	assert_null(up_notify_question_close(NULL));
	/* no bus: the D-Bus backend hands over to the log, which answers NO_ANSWER */
	assert_int_equal(setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1), 0);
	up_knobs_load();
	assert_int_equal(up_notifier_new(&loop, &n), 0);
	assert_non_null(up_notify_ask(n, "s", "b", on_answer, &a));
	assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.last, UP_NOTIFY_NO_ANSWER);
	n = up_notifier_free(n);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* A backend that shows nothing and keeps what it is given, to answer by hand. */
static struct up_notify_question *shown;
static int withdrawn;

static void keep_ask(struct up_notifier *n, struct up_notify_question *q)
{
	(void)n;
	shown = q;
}

static void keep_withdraw(struct up_notifier *n, struct up_notify_question *q)
{
	(void)n;
	(void)q;
	withdrawn++;
}

static const struct up_notifier_impl keep = {
	.name = "keep", .ask = keep_ask, .withdraw = keep_withdraw};

static void test_first_answer_counts(void **state)
{
	struct seen a = {0}, b = {0};
	struct up_notify_question *qb;
	struct up_notifier *n;
	uv_loop_t loop;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	n = log_notifier(&loop);
	n->impl = &keep;
	assert_non_null(up_notify_ask(n, "a", "", on_answer, &a));
	up_notify_question_answer(shown, UP_NOTIFY_ALLOW_SESSION);
	up_notify_question_answer(shown, UP_NOTIFY_NO_ANSWER); /* the server closes it after */
	up_notify_question_answer(shown, UP_NOTIFY_DENY);
	assert_int_equal(a.calls, 0);
	assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.last, UP_NOTIFY_ALLOW_SESSION);
	assert_int_equal(withdrawn, 1); /* told the question goes (a Notify may be in flight) */
	/* the bus goes: every open question is answered NO_ANSWER, once */
	qb = up_notify_ask(n, "b", "", on_answer, &b);
	assert_ptr_equal(qb, shown);
	up_notify_questions_unanswerable(n);
	up_notify_questions_unanswerable(n);
	assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.last, UP_NOTIFY_NO_ANSWER);
	/* closed: withdrawn, never answered, even with an answer on its way */
	b = (struct seen){0};
	qb = up_notify_ask(n, "c", "", on_answer, &b);
	up_notify_question_answer(qb, UP_NOTIFY_DENY);
	assert_null(up_notify_question_close(qb));
	assert_int_equal(withdrawn, 3);
	n->impl = &up_notifier_log;
	n = up_notifier_free(n);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(b.calls, 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(unsetenv(UP_NOTIFIER_ENV), 0);
	up_knobs_load();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_actions),
		cmocka_unit_test(test_markup),
		cmocka_unit_test(test_log_backend_answers_later_once),
		cmocka_unit_test(test_off_and_no_bus),
		cmocka_unit_test(test_first_answer_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
