/* SPDX-License-Identifier: Apache-2.0 */
/* The log backend: each notification becomes one line of uplinkd's log. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "notify-private.h"

static int log_open(struct up_notifier *n)
{
	(void)n;
	return 0;
}

/* One line each: the body's line breaks become " / ". */
static void log_send(struct up_notifier *n, const struct up_notification *msg)
{
	char body[2048];
	size_t o = 0;

	(void)n;
	for (const char *p = msg->body; *p && o + 4 < sizeof(body); p++) {
		if (*p == '\n') {
			memcpy(body + o, " / ", 3);
			o += 3;
		} else {
			body[o++] = *p;
		}
	}
	body[o] = '\0';
	log_msg(msg->urgency == UP_NOTIFY_CRITICAL ? LOG_WARNING : LOG_NOTICE,
		"Notification: %s: %s", msg->summary, body);
}

/* No buttons in a log: said once each, answered NO_ANSWER (the terminal asks instead). */
static void log_ask(struct up_notifier *n, struct up_notify_question *q)
{
	char summary[512];

	(void)snprintf(summary, sizeof(summary),
		       "question, no buttons in a log (uplink approvals "
		       "answers it): %s",
		       q->summary);
	log_send(n, &(struct up_notification){
			    .summary = summary, .body = q->body, .urgency = UP_NOTIFY_NORMAL});
	up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
}

const struct up_notifier_impl up_notifier_log = {
	.name = "log",
	.open = log_open,
	.send = log_send,
	.ask = log_ask,
};
