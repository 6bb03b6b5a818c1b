/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "list.h"
#include "notify.h"

/* A question (notify.h) between up_notify_ask() and its answer's delivery or its close. */
struct up_notify_question {
	struct up_notifier *n;
	struct up_list link; /* up_notifier::questions, until delivered or closed */
	up_notify_answer_fn fn;
	void *userdata;
	char *summary, *body;
	uv_timer_t deliver; /* the answer goes out on the loop's next turn */
	enum up_notify_answer answer;
	bool answered;				 /* an answer is on its way: nothing else counts */
	const struct up_notifier_impl *shown_by; /* the backend that asked: it withdraws */
	/* the D-Bus backend's */
	bool waiting;	  /* for the server's capabilities */
	void *call;	  /* the Notify in flight, or NULL */
	uint32_t id;	  /* the server's notification id once Notify answered; 0 before */
	char sender[128]; /* the unique name that answered Notify: only its signals count */
};

/* The answer (the first one counts); fn gets it on the loop's next turn. */
void up_notify_question_answer(struct up_notify_question *q, enum up_notify_answer a);
/* Answers every open question NO_ANSWER (the bus is gone). */
void up_notify_questions_unanswerable(struct up_notifier *n);
/* At the notifier's end: each open question's fn gets its answer (NO_ANSWER if none) now. */
void up_notify_questions_end(struct up_notifier *n);

/* The notifier, shared by notify.c and its backends. */
struct up_notifier {
	uv_loop_t *loop;
	const struct up_notifier_impl *impl;
	void *backend; /* the state of the backend that opened, kept after a fall-back */
	/* Frees that state and then n, now or in a uv_close() callback; NULL: free(n). */
	void (*release)(struct up_notifier *n);
	struct up_notify_limiter denied;
	struct up_list questions; /* up_notify_question::link */
	bool ending;		  /* up_notifier_free() runs: no new questions */
};

/* A backend that cannot go on hands over to the log backend (said once, by the caller). */
void up_notifier_fall_back(struct up_notifier *n);
