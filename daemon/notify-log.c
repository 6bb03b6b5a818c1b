/* SPDX-License-Identifier: Apache-2.0 */
/* The log backend: each notification becomes one line of uplinkd's log. */
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

const struct up_notifier_impl up_notifier_log = {
	.name = "log",
	.open = log_open,
	.send = log_send,
};
