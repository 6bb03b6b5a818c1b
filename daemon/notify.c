/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The notifier: picks a backend, formats what happened into a summary and a body,
 * and limits how often denied requests are told.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"
#include "knobs.h"
#include "log.h"
#include "notify-private.h"

#define ICON_OK	   "dialog-information"
#define ICON_WARN  "dialog-warning"
#define ICON_ERROR "dialog-error"

/* ---- the denied-request limiter ---- */

void up_notify_limiter_init(struct up_notify_limiter *l, uint64_t interval_ms)
{
	memset(l, 0, sizeof(*l));
	l->interval_ms = interval_ms;
}

static struct up_notify_limiter_entry *limiter_find(const struct up_notify_limiter *l,
						    const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (streq(l->e[i].id, id))
			return (struct up_notify_limiter_entry *)&l->e[i];
	return NULL;
}

bool up_notify_limiter_hit(struct up_notify_limiter *l, const char *id, uint64_t now_ms,
			   uint64_t *count, uint64_t *total)
{
	struct up_notify_limiter_entry *e = limiter_find(l, id);

	if (!e) {
		if (l->n >= ELEMENTSOF(l->e) || strlen(id) >= sizeof(e->id))
			return false;
		e = &l->e[l->n++];
		memset(e, 0, sizeof(*e));
		memcpy(e->id, id, strlen(id) + 1);
	}
	e->total++;
	e->unsent++;
	*total = e->total;
	if (e->sent && now_ms - e->last_ms < l->interval_ms)
		return false;
	*count = e->unsent;
	e->unsent = 0;
	e->last_ms = now_ms;
	e->sent = true;
	return true;
}

uint64_t up_notify_limiter_total(const struct up_notify_limiter *l, const char *id)
{
	const struct up_notify_limiter_entry *e = limiter_find(l, id);

	return e ? e->total : 0;
}

void up_notify_limiter_forget(struct up_notify_limiter *l, const char *id)
{
	struct up_notify_limiter_entry *e = limiter_find(l, id);

	if (!e)
		return;
	*e = l->e[--l->n];
}

/* ---- formatting ---- */

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v && *v ? v : dflt;
}

static void format_duration(const json_t *session, int64_t now_s, char *buf, size_t len)
{
	json_t *created = json_object_get(session, "created_at");
	json_t *ended = json_object_get(session, "ended_at");
	int64_t end = json_is_integer(ended) ? (int64_t)json_integer_value(ended) : now_s;

	if (!json_is_integer(created) ||
	    up_duration_format(end - (int64_t)json_integer_value(created), buf, len) < 0)
		(void)snprintf(buf, len, "an unknown time");
}

int up_notify_format_ended(const json_t *session, int64_t now_s, uint64_t denied, char *summary,
			   size_t summary_len, char *body, size_t body_len,
			   enum up_notify_urgency *urgency)
{
	const char *state = str_or(session, "state", ""),
		   *agent = str_or(session, "agent", "agent");
	const char *id = str_or(session, "id", "?"), *cwd = str_or(session, "cwd", "?");
	const char *reason = str_or(session, "reason", NULL);
	json_t *code = json_object_get(session, "exit_code"),
	       *d = json_object_get(session, "denied");
	char dur[UP_DURATION_FORMAT_MAX], what[1200], den[96] = "";

	if (json_is_integer(d))
		denied = (uint64_t)json_integer_value(d);
	format_duration(session, now_s, dur, sizeof(dur));
	if (denied > 0)
		(void)snprintf(den, sizeof(den), "\n%llu request%s denied.",
			       (unsigned long long)denied, denied == 1 ? " was" : "s were");
	*urgency = UP_NOTIFY_NORMAL;
	if (streq(state, "EXITED")) {
		(void)snprintf(summary, summary_len, "%s finished", agent);
		if (json_is_integer(code))
			(void)snprintf(what, sizeof(what), "Exited with code %lld after %s.",
				       (long long)json_integer_value(code), dur);
		else
			(void)snprintf(what, sizeof(what), "Exited after %s.", dur);
	} else if (streq(state, "FAILED")) {
		*urgency = UP_NOTIFY_CRITICAL;
		(void)snprintf(summary, summary_len, "%s session failed", agent);
		(void)snprintf(what, sizeof(what), "Failed after %s: %s", dur,
			       reason ? reason : "no reason was recorded");
	} else if (streq(state, "STOPPED")) {
		(void)snprintf(summary, summary_len, "%s session stopped", agent);
		(void)snprintf(what, sizeof(what), "Stopped after %s%s%s.", dur, reason ? ": " : "",
			       reason ? reason : "");
	} else {
		return -EINVAL;
	}
	(void)snprintf(body, body_len, "Session %s in %s\n%s%s", id, cwd, what, den);
	return 0;
}

void up_notify_format_denied(const char *id, const char *what, uint64_t count, char *body,
			     size_t len)
{
	if (count <= 1)
		(void)snprintf(body, len, "Session %s: a request was denied: %s", id, what);
	else
		(void)snprintf(body, len,
			       "Session %s: %llu requests were denied in the last "
			       "minute; the latest: %s",
			       id, (unsigned long long)count, what);
}

/* ---- the notifier ---- */

static const struct up_notifier_impl *const impls[] = {
	&up_notifier_dbus,
	&up_notifier_log,
};

void up_notifier_fall_back(struct up_notifier *n)
{
	n->impl = &up_notifier_log;
}

int up_notifier_new(uv_loop_t *loop, struct up_notifier **ret)
{
	const char *off = up_knobs()->notifications, *want = up_knobs()->notifier;
	struct up_notifier *n;

	*ret = NULL;
	if (off && (streq(off, "0") || streq(off, "false") || streq(off, "no"))) {
		log_info("Desktop notifications are off (%s=%s)", UP_NOTIFY_ENV, off);
		return 0;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->loop = loop;
	up_list_init(&n->questions);
	up_notify_limiter_init(&n->denied, UP_NOTIFY_DENIED_INTERVAL_MS);
	n->impl = impls[0];
	for (size_t i = 0; want && *want && i < ELEMENTSOF(impls); i++)
		if (streq(impls[i]->name, want))
			n->impl = impls[i];
	if (n->impl->open(n) < 0)
		up_notifier_fall_back(n);
	log_debug("Desktop notifications through %s", n->impl->name);
	*ret = n;
	return 0;
}

struct up_notifier *up_notifier_free(struct up_notifier *n)
{
	if (!n)
		return NULL;
	up_notify_questions_end(n);
	if (n->release)
		n->release(n);
	else
		free(n);
	return NULL;
}

const char *up_notifier_backend(const struct up_notifier *n)
{
	return n ? n->impl->name : "off";
}

static void send_one(struct up_notifier *n, const struct up_notification *msg)
{
	n->impl->send(n, msg);
}

void up_notify_session_ended(struct up_notifier *n, json_t *session)
{
	char summary[256], body[2048];
	enum up_notify_urgency urgency;
	const char *id = str_or(session, "id", "");

	if (n && up_notify_format_ended(session, (int64_t)time(NULL),
					up_notify_limiter_total(&n->denied, id), summary,
					sizeof(summary), body, sizeof(body), &urgency) == 0) {
		send_one(n, &(struct up_notification){
				    .summary = summary,
				    .body = body,
				    .urgency = urgency,
				    .icon = urgency == UP_NOTIFY_CRITICAL ? ICON_ERROR : ICON_OK,
				    .timeout_ms = urgency == UP_NOTIFY_CRITICAL ? 0 : -1,
				    .session_id = id,
				    .show_log = *id != '\0'});
		up_notify_limiter_forget(&n->denied, id);
	}
	json_decref(session);
}

void up_notify_session_expiring(struct up_notifier *n, json_t *session, const char *limit,
				int64_t in_s)
{
	const char *id = str_or(session, "id", "?"), *agent = str_or(session, "agent", "agent");
	char in[UP_DURATION_FORMAT_MAX], summary[256], body[1024];
	bool idle = limit && streq(limit, "idle");

	if (!n)
		goto done;
	if (up_duration_format(in_s, in, sizeof(in)) < 0)
		(void)snprintf(in, sizeof(in), "soon");
	(void)snprintf(summary, sizeof(summary), "%s session stops in %s", agent, in);
	if (idle)
		(void)snprintf(
			body, sizeof(body),
			"Session %s in %s has been detached and idle; it reaches its idle limit "
			"(--idle-timeout) in %s and is then stopped. Attach to keep it: uplink "
			"attach %s",
			id, str_or(session, "cwd", "?"), in, id);
	else
		(void)snprintf(
			body, sizeof(body),
			"Session %s in %s reaches its lifetime limit (--ttl) in %s and is then "
			"stopped.",
			id, str_or(session, "cwd", "?"), in);
	send_one(n, &(struct up_notification){.summary = summary,
					      .body = body,
					      .icon = ICON_WARN,
					      .urgency = UP_NOTIFY_NORMAL,
					      .timeout_ms = 0});
done:
	json_decref(session);
}

/* A critical notification that stays until dismissed. */
static void send_critical(struct up_notifier *n, const char *summary, const char *body)
{
	send_one(n, &(struct up_notification){.summary = summary,
					      .body = body,
					      .icon = ICON_ERROR,
					      .urgency = UP_NOTIFY_CRITICAL,
					      .timeout_ms = 0});
}

/* A critical notice about an agent's credentials: "<agent> credentials <what>". */
static void send_credentials_notice(struct up_notifier *n, const char *agent, const char *what,
				    const char *body)
{
	char summary[256];

	(void)snprintf(summary, sizeof(summary), "%s credentials %s", agent ? agent : "agent",
		       what);
	send_critical(n, summary, body);
}

void up_notify_credential_failed(struct up_notifier *n, const char *agent, const char *session_id,
				 const char *why)
{
	char body[1536];

	if (!n)
		return;
	(void)snprintf(body, sizeof(body), "%s%s%s%s", session_id ? "Session " : "",
		       session_id ? session_id : "", session_id ? ": " : "", why ? why : "");
	send_credentials_notice(n, agent, "could not be refreshed", body);
}

void up_notify_renewal_stopped(struct up_notifier *n, const char *agent, const char *session_id,
			       const char *what)
{
	char body[1536];

	if (!n)
		return;
	(void)snprintf(
		body, sizeof(body),
		"Session %s: uplinkd restarted and cannot renew its %s; "
		"they stop working when they expire. Start a new session to have them renewed.",
		session_id ? session_id : "?", what ? what : "credentials");
	send_credentials_notice(n, agent, "are no longer renewed", body);
}

void up_notify_rule_not_kept(struct up_notifier *n, const char *agent, const char *session_id,
			     const char *why)
{
	char summary[256], body[2048];

	if (!n)
		return;
	(void)snprintf(summary, sizeof(summary), "%s: an approved rule is not kept",
		       agent ? agent : "agent");
	(void)snprintf(body, sizeof(body), "Session %s: %s.", session_id ? session_id : "?",
		       why ? why : "the rules Secret did not take it");
	send_critical(n, summary, body);
}

void up_notify_pod_down(struct up_notifier *n, const char *agent, const char *session_id,
			const char *pod, const char *why, const char *fails)
{
	char summary[256], body[1536];

	if (!n)
		return;
	(void)snprintf(summary, sizeof(summary), "%s: pod %s is down", agent ? agent : "agent",
		       pod);
	(void)snprintf(body, sizeof(body),
		       "Session %s: %s; %s. Kubernetes restarts it; if it stays "
		       "down, see kubectl -n agent-uplink-%s describe pod %s.",
		       session_id ? session_id : "?", why ? why : "not ready", fails ? fails : "",
		       session_id ? session_id : "?", pod);
	send_critical(n, summary, body);
}

bool up_notify_denied(struct up_notifier *n, const char *session_id, const char *what)
{
	uint64_t count = 0, total = 0;
	char summary[128], body[1536];

	if (!n || !session_id ||
	    !up_notify_limiter_hit(&n->denied, session_id, uv_now(n->loop), &count, &total))
		return false;
	(void)snprintf(summary, sizeof(summary), "Requests denied in session %s", session_id);
	up_notify_format_denied(session_id, what ? what : "?", count, body, sizeof(body));
	send_one(n, &(struct up_notification){.summary = summary,
					      .body = body,
					      .icon = ICON_WARN,
					      .urgency = UP_NOTIFY_NORMAL,
					      .timeout_ms = -1});
	return true;
}
