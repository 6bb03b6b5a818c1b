/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Questions: a notification whose actions answer a held request (notify.h). The backend
 * shows it and reports the answer; this file keeps the questions, delivers each answer
 * exactly once on the loop's next turn, and withdraws a question its owner closes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "notify-private.h"

struct action {
	const char *key, *label;
	enum up_notify_answer answer;
	const char *name;
};

static const struct action actions[] = {
	{"allow-once", "Allow once", UP_NOTIFY_ALLOW_ONCE, "once"},
	{"allow-session", "Allow for this session", UP_NOTIFY_ALLOW_SESSION, "session"},
	{"always", "Always (save)", UP_NOTIFY_ALWAYS, "always"},
	{"deny", "Deny", UP_NOTIFY_DENY, "deny"},
};

const char *const up_notify_question_actions[] = {
	"allow-once", "Allow once",    "allow-session", "Allow for this session",
	"always",     "Always (save)", "deny",		"Deny",
	NULL,
};

int up_notify_answer_of_action(const char *key)
{
	for (size_t i = 0; key && i < ELEMENTSOF(actions); i++)
		if (streq(actions[i].key, key))
			return (int)actions[i].answer;
	return -EINVAL;
}

const char *up_notify_answer_name(enum up_notify_answer a)
{
	for (size_t i = 0; i < ELEMENTSOF(actions); i++)
		if (actions[i].answer == a)
			return actions[i].name;
	return "none";
}

char *up_notify_markup_escape(const char *s)
{
	size_t o = 0;
	char *out = malloc(strlen(s) * 5 + 1);

	if (!out)
		return NULL;
	for (; *s; s++) {
		const char *esc = *s == '&'   ? "&amp;"
				  : *s == '<' ? "&lt;"
				  : *s == '>' ? "&gt;"
					      : NULL;

		if (esc) {
			memcpy(out + o, esc, strlen(esc));
			o += strlen(esc);
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
	return out;
}

static void on_question_closed(uv_handle_t *h)
{
	struct up_notify_question *q = h->data;

	free(q->summary);
	free(q->body);
	free(q);
}

/* Off the list (if on it) and on its way to be freed; no callback after this. */
static void question_drop(struct up_notify_question *q)
{
	up_list_remove(&q->link);
	q->fn = NULL;
	(void)uv_timer_stop(&q->deliver);
	uv_close((uv_handle_t *)&q->deliver, on_question_closed);
}

static void on_deliver(uv_timer_t *t)
{
	struct up_notify_question *q = t->data;
	up_notify_answer_fn fn = q->fn;
	void *ud = q->userdata;
	enum up_notify_answer a = q->answer;

	if (q->n && q->shown_by->withdraw)
		q->shown_by->withdraw(q->n, q); /* answered: only forgets a Notify in flight */
	question_drop(q);
	if (fn)
		fn(a, ud);
}

void up_notify_question_answer(struct up_notify_question *q, enum up_notify_answer a)
{
	if (q->answered)
		return;
	q->answered = true;
	q->answer = a;
	log_debug("Question '%s': %s", q->summary, up_notify_answer_name(a));
	(void)uv_timer_start(&q->deliver, on_deliver, 0, 0);
}

void up_notify_questions_unanswerable(struct up_notifier *n)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &n->questions)
		up_notify_question_answer(up_container_of(pos, struct up_notify_question, link),
					  UP_NOTIFY_NO_ANSWER);
}

void up_notify_questions_end(struct up_notifier *n)
{
	n->ending = true;
	/* fn may close other questions: take the first one each time */
	while (!up_list_empty(&n->questions)) {
		struct up_notify_question *q =
			up_container_of(n->questions.next, struct up_notify_question, link);
		up_notify_answer_fn fn = q->fn;
		void *ud = q->userdata;
		enum up_notify_answer a = q->answered ? q->answer : UP_NOTIFY_NO_ANSWER;

		if (q->shown_by->withdraw)
			q->shown_by->withdraw(n, q);
		q->n = NULL;
		question_drop(q);
		if (fn)
			fn(a, ud);
	}
}

struct up_notify_question *up_notify_ask(struct up_notifier *n, const char *summary,
					 const char *body, up_notify_answer_fn fn, void *userdata)
{
	struct up_notify_question *q;

	if (!n || n->ending)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->summary = strdup(summary ? summary : "");
	q->body = strdup(body ? body : "");
	if (!q->summary || !q->body || uv_timer_init(n->loop, &q->deliver) < 0) {
		free(q->summary);
		free(q->body);
		free(q);
		return NULL;
	}
	q->n = n;
	q->fn = fn;
	q->userdata = userdata;
	q->deliver.data = q;
	q->shown_by = n->impl;
	up_list_insert_tail(&n->questions, &q->link);
	if (n->impl->ask)
		n->impl->ask(n, q);
	else
		up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
	return q;
}

struct up_notify_question *up_notify_question_close(struct up_notify_question *q)
{
	if (!q)
		return NULL;
	if (q->n && q->shown_by->withdraw)
		q->shown_by->withdraw(q->n, q);
	question_drop(q);
	return NULL;
}
