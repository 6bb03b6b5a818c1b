/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bounds.h"
#include "util.h"

/*
 * Desktop notifications: what a user should hear about without watching a terminal
 * (a session ended or failed, a limit is near, credentials broke, requests are being
 * denied). The notifier formats them and hands them to a backend, a const vtable:
 * sd-bus (org.freedesktop.Notifications on the user bus, on the daemon's loop) or the
 * log. No bus or no notification server is said once in the log, never an error;
 * UPLINK_NOTIFICATIONS=0 turns them off. Every up_notify_*() takes a NULL notifier
 * (off, or the daemon is stopping) and then does nothing.
 */
struct up_notifier;
struct up_notify_question;

enum up_notify_urgency {
	UP_NOTIFY_LOW = 0,
	UP_NOTIFY_NORMAL = 1,
	UP_NOTIFY_CRITICAL = 2, /* failures */
};

/* One notification as the backends take it; strings are borrowed for the call. */
struct up_notification {
	const char *summary;
	const char *body;
	const char *icon;
	enum up_notify_urgency urgency;
	int32_t timeout_ms;	/* -1: the server's default; 0: until dismissed */
	const char *session_id; /* with show_log: "Show log" opens `uplink logs ID` */
	bool show_log;
};

struct up_notifier_impl {
	const char *name;
	/* Sets up the backend's state in n; < 0 (said by the backend) falls back to the log. */
	int (*open)(struct up_notifier *n);
	/* Sends, or queues, one notification; never fails (falls back to the log itself). */
	void (*send)(struct up_notifier *n, const struct up_notification *msg);
	/* Shows a question (notify-private.h); its answer comes through
	 * up_notify_question_answer(), from the loop, never from inside ask(). */
	void (*ask)(struct up_notifier *n, struct up_notify_question *q);
	/* The question goes: forget any call in flight for it, and take it off the screen if
	 * it is shown and not answered; NULL: nothing to do. */
	void (*withdraw)(struct up_notifier *n, struct up_notify_question *q);
};

extern const struct up_notifier_impl up_notifier_dbus;
extern const struct up_notifier_impl up_notifier_log;

#define UP_NOTIFY_ENV	"UPLINK_NOTIFICATIONS" /* "0": off */
#define UP_NOTIFIER_ENV "UPLINK_NOTIFIER"      /* "dbus" (the default) or "log" */

/* Creates the notifier (NULL in *ret when turned off). Fails only for -ENOMEM. */
int up_notifier_new(uv_loop_t *loop, struct up_notifier **ret) _wur_;
/* Closes the backend; memory goes in the loop's close callbacks. Returns NULL. */
struct up_notifier *up_notifier_free(struct up_notifier *n);
/* The backend in use ("dbus", "log"), for doctor and tests. */
const char *up_notifier_backend(const struct up_notifier *n);

/*
 * A session reached EXITED, FAILED or STOPPED. `session` is up_session_describe()'s
 * object (id, agent, cwd, state, created_at, exit_code, reason; optional "denied" and
 * "ended_at"), stolen. Other states are ignored. FAILED is critical.
 */
void up_notify_session_ended(struct up_notifier *n, json_t *session);
/* A limit is near: `limit` is "ttl" or "idle", `in_s` seconds ahead. `session` stolen. */
void up_notify_session_expiring(struct up_notifier *n, json_t *session, const char *limit,
				int64_t in_s);
/* An agent's credentials could not be refreshed (session_id may be NULL). Critical. */
void up_notify_credential_failed(struct up_notifier *n, const char *agent, const char *session_id,
				 const char *why);
/* After uplinkd restarted: a running session's `what` (e.g. "exec placeholder values") are
 * no longer renewed; start a new session to have them renewed. Critical. */
void up_notify_renewal_stopped(struct up_notifier *n, const char *agent, const char *session_id,
			       const char *what);
/*
 * One request of a session was denied (`what`, e.g. "GET evil.example/x"). At most
 * one notification a minute per session, counting those in between. Returns true
 * when one went out now.
 */
/* A pod the session needs (the proxy, the ssh-agent holder) stopped being Ready while it runs. */
void up_notify_pod_down(struct up_notifier *n, const char *agent, const char *session_id,
			const char *pod, const char *why, const char *fails);
bool up_notify_denied(struct up_notifier *n, const char *session_id, const char *what);
/* A rule the user approved from a question is not kept where a restarted proxy finds it
 * (`why`, a sentence: the session's rules Secret did not take it). Critical. */
void up_notify_rule_not_kept(struct up_notifier *n, const char *agent, const char *session_id,
			     const char *why);

/*
 * Questions: a notification with the actions Allow once, Allow for this session, Always
 * (save) and Deny (org.freedesktop.Notifications actions, their ActionInvoked and
 * NotificationClosed signals matched by notification id and by the server that showed it).
 * The answer always comes later, from the loop, never from inside up_notify_ask(). A server
 * without the "actions" capability, the log backend, and a bus that is gone answer
 * NO_ANSWER at once (the user answers in the terminal: uplink approvals); so does a
 * notifier being freed, for the questions still open. After fn has run, or after
 * up_notify_question_close(), q is gone. A question is shown as critical and without a
 * timeout: its owner withdraws it when the held request stops waiting.
 */
enum up_notify_answer {
	UP_NOTIFY_ALLOW_ONCE,
	UP_NOTIFY_ALLOW_SESSION,
	UP_NOTIFY_ALWAYS,
	UP_NOTIFY_DENY,
	UP_NOTIFY_NO_ANSWER
};
typedef void (*up_notify_answer_fn)(enum up_notify_answer a, void *userdata);
struct up_notify_question;
/* A question with the four actions; `fn` is called once (NO_ANSWER when the user
 * dismissed it, the server closed it, or it has no actions); NULL when off. */
struct up_notify_question *up_notify_ask(struct up_notifier *n, const char *summary,
					 const char *body, up_notify_answer_fn fn, void *userdata);
/* Withdraws it (CloseNotification) without calling fn. Returns NULL. */
struct up_notify_question *up_notify_question_close(struct up_notify_question *q);
/* "once", "session", "always", "deny", "none": for logs and the debug methods. */
const char *up_notify_answer_name(enum up_notify_answer a);

/* ---- pure parts, for the backends and the unit tests ---- */

/* Per-session denied counts and the once-a-minute limit on their notifications. */
struct up_notify_limiter_entry {
	char id[64];
	uint64_t total;	  /* denied since the session was first seen */
	uint64_t unsent;  /* denied since the last notification */
	uint64_t last_ms; /* when the last notification went out */
	bool sent;
};

struct up_notify_limiter {
	uint64_t interval_ms;
	size_t n;
	struct up_notify_limiter_entry e[UP_MAX_NOTIFY_SESSIONS];
};

void up_notify_limiter_init(struct up_notify_limiter *l, uint64_t interval_ms);
/*
 * Counts one denial of `id` at `now_ms`. Returns true when a notification may go out,
 * with *count the denials it covers (this one included) and *total since the start.
 * A session that no longer fits is counted nowhere and never notified.
 */
bool up_notify_limiter_hit(struct up_notify_limiter *l, const char *id, uint64_t now_ms,
			   uint64_t *count, uint64_t *total);
uint64_t up_notify_limiter_total(const struct up_notify_limiter *l, const char *id);
void up_notify_limiter_forget(struct up_notify_limiter *l, const char *id);

/*
 * Summary, body and urgency for an ended session at `now_s`; `denied` is used when
 * the object has no "denied". Returns 0, or -EINVAL for a state that is not an end.
 */
int up_notify_format_ended(const json_t *session, int64_t now_s, uint64_t denied, char *summary,
			   size_t summary_len, char *body, size_t body_len,
			   enum up_notify_urgency *urgency) _wur_;
/* Body of a denied-burst notification. */
void up_notify_format_denied(const char *id, const char *what, uint64_t count, char *body,
			     size_t len);
/* A question's actions as Notify lists them: key, label, key, label, ..., NULL. */
extern const char *const up_notify_question_actions[];
/* The answer an ActionInvoked key stands for, or -EINVAL for a key of no question's. */
int up_notify_answer_of_action(const char *key);
/* `s` with &, < and > escaped for a server that reads body markup (caller frees), or NULL. */
char *up_notify_markup_escape(const char *s);
