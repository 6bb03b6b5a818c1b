/* SPDX-License-Identifier: Apache-2.0 */
/* Ask mode: what a session's proxy holds for the user, and the user's decisions on it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approvals.h"
#include "bounds.h"
#include "control.h"
#include "log.h"
#include "manager.h"
#include "notify.h"
#include "params.h"
#include "rpc-logs.h"
#include "rpc.h"
#include "rules-save.h"
#include "session-private.h"
#include "session.h"

struct up_approvals {
	struct up_session *s;
	struct up_control_call *call; /* the long poll in flight */
	uv_timer_t *timer;	      /* the pause after a failed poll */
	json_t *held;		      /* the proxy's last listing (an array) */
	json_int_t seq;
	bool failing; /* the last poll failed (said once until one succeeds) */
	/* the desktop question about the latest new request, and the answer going back */
	struct up_notify_question *question;
	char question_id[32];
	struct up_control_call *answer;
	json_t *answer_rule; /* the rule the answer on its way adds for the session */
	uint64_t asked_ms;   /* when the last question went out (0: never) */
};

static const char *const answer_decision[] = {
	[UP_NOTIFY_ALLOW_ONCE] = "once", [UP_NOTIFY_ALLOW_SESSION] = "session",
	[UP_NOTIFY_ALWAYS] = "session", /* after the rule is saved (always_saved()) */
	[UP_NOTIFY_DENY] = "deny",	 [UP_NOTIFY_NO_ANSWER] = NULL,
};

static void poll_held(struct up_approvals *a);

static void timer_closed(uv_handle_t *h)
{
	struct up_approvals *a = h->data;

	json_decref(a->held);
	free(a);
	free(h);
}

static void retry_fired(uv_timer_t *t)
{
	poll_held(t->data);
}

/* Who approved from a notification hears it there when the rules Secret did not take the
 * rule (the log has it too); the session is looked up again: it may have gone meanwhile. */
struct keeping {
	struct up_sessions *all;
	char session[UP_MAX_APPROVAL_ID];
};

static void tell_not_kept(struct up_sessions *all, const char *session, const char *warning)
{
	struct up_session *s = up_sessions_find(all, session);

	if (s)
		up_notify_rule_not_kept(session_notifier(s), s->o.agent, session, warning);
}

static void kept(const char *warning, void *userdata)
{
	struct keeping *k = userdata;

	if (warning)
		tell_not_kept(k->all, k->session, warning);
	free(k);
}

static void keep_rule(struct up_approvals *a, const json_t *rule)
{
	struct keeping *k = up_new(struct keeping, .all = a->s->all);
	char warn[UP_APPROVED_WARNING_MAX] = "";
	int r;

	if (k)
		(void)snprintf(k->session, sizeof(k->session), "%s", up_session_id(a->s));
	r = up_session_add_approved_rule(a->s, rule, warn, sizeof(warn), k ? kept : NULL, k);
	if (r <= 0)
		free(k);
	if (r < 0 && *warn)
		tell_not_kept(a->s->all, up_session_id(a->s), warn);
}

static void answer_sent(int r, long http_status, json_t *reply, const char *err, void *userdata)
{
	struct up_approvals *a = userdata;
	json_t *rule = a->answer_rule;
	(void)reply;

	a->answer = NULL;
	a->answer_rule = NULL;
	if (r < 0)
		log_warning("Session %s: the answer from the notification did not reach the proxy "
			    "(%ld: %s); uplink approvals shows what still waits",
			    up_session_id(a->s), http_status, err ? err : "no answer");
	else if (rule)
		keep_rule(a, rule);
	json_decref(rule);
}

/* Sends `decision` on request `n` (with the rule for "session"), the notification's answer. */
static void send_answer(struct up_approvals *a, const char *n, const char *decision,
			const json_t *rule)
{
	json_t *body = json_pack("{s:s}", "decision", decision);
	char path[64];

	if (a->answer) {
		log_warning("Session %s: an answer to request %s from the notification is still on "
			    "its way; uplink approve %s-%s decides this one",
			    up_session_id(a->s), n, up_session_id(a->s), n);
		json_decref(body);
		return;
	}
	if (body && rule)
		(void)json_object_set(body, "rule", (json_t *)rule);
	(void)snprintf(path, sizeof(path), "/v1/held/%.32s", n);
	log_info("Approval %s-%s: %s (from the notification)", up_session_id(a->s), n, decision);
	if (body)
		a->answer = up_control_call(a->s, "POST", path, body, UP_CONTROL_TIMEOUT_MS,
					    answer_sent, a);
	if (a->answer && rule)
		a->answer_rule = json_incref((json_t *)rule);
	json_decref(body);
}

static void ask_again(struct up_approvals *a, const char *n, const char *why);

/* "Always" from the notification: the rule is saved to the user's own rules file, then the
 * request goes as for the session. When the file cannot take it, nothing is decided (as with
 * uplink approve --save): the request waits on and the user is asked again, told why. */
struct always {
	struct up_sessions *all;
	char session[UP_MAX_APPROVAL_ID], n[32];
	json_t *rule;
};

static void always_saved(int r, const struct up_rules_save *res, void *userdata)
{
	struct always *w = userdata;
	struct up_session *s = up_sessions_find(w->all, w->session);

	if (r < 0) {
		log_warning("Session %s: \"Always\" did not save the rule: %s; request %s still "
			    "waits (uplink approve %s-%s --session lets it through without saving)",
			    w->session, res->err, w->n, w->session, w->n);
		if (s && s->approvals)
			ask_again(s->approvals, w->n, res->err);
	} else if (s && s->approvals) {
		send_answer(s->approvals, w->n, "session", w->rule);
	}
	json_decref(w->rule);
	free(w);
}

static void answered(enum up_notify_answer ans, void *userdata)
{
	struct up_approvals *a = userdata;
	const char *decision = ans <= UP_NOTIFY_NO_ANSWER ? answer_decision[ans] : NULL;
	json_t *rule = NULL, *e;
	struct always *w;
	char what[512];
	size_t i;

	a->question = NULL;
	if (!decision)
		return;
	json_array_foreach (a->held, i, e)
		if (!rule && !strcmp(json_string_value(json_object_get(e, "id")), a->question_id)) {
			rule = up_approval_rule(json_string_value(json_object_get(e, "method")),
						json_string_value(json_object_get(e, "host")),
						json_string_value(json_object_get(e, "path")));
			(void)snprintf(what, sizeof(what), "%s %s%.300s",
				       json_string_value(json_object_get(e, "method")),
				       json_string_value(json_object_get(e, "host")),
				       json_string_value(json_object_get(e, "path")));
		}
	if (ans == UP_NOTIFY_ALWAYS && rule) {
		char why[256];
		int r = -ENOMEM;

		if ((w = calloc(1, sizeof(*w)))) {
			*w = (struct always){.all = a->s->all, .rule = rule};
			(void)snprintf(w->session, sizeof(w->session), "%s", up_session_id(a->s));
			(void)snprintf(w->n, sizeof(w->n), "%s", a->question_id);
			r = up_approvals_save(a->s, rule, NULL, what, "the notification's Always",
					      always_saved, w);
			if (r >= 0)
				return;
			free(w);
		}
		/* as when the save fails (always_saved()): nothing is let through unsaved */
		(void)snprintf(why, sizeof(why), "the rule cannot be saved: %s", strerror(-r));
		log_warning("Session %s: \"Always\": %s; request %s still waits",
			    up_session_id(a->s), why, a->question_id);
		ask_again(a, a->question_id, why);
		json_decref(rule);
		return;
	}
	send_answer(a, a->question_id, decision, streq(decision, "session") ? rule : NULL);
	json_decref(rule);
}

/* Shows the question about held request `e`, in place of the one before. */
static void question(struct up_approvals *a, const json_t *e, const char *summary, const char *body)
{
	a->asked_ms = uv_now(a->s->all->loop);
	a->question = up_notify_question_close(a->question);
	(void)snprintf(a->question_id, sizeof(a->question_id), "%s",
		       json_string_value(json_object_get(e, "id")));
	a->question = up_notify_ask(session_notifier(a->s), summary, body, answered, a);
}

/* One question for the newest request (`e`; `total` wait in all); a flood (questions closer
 * than UP_APPROVALS_NOTIFY_MS) is left to the list, whose size the next question says. */
static void ask_user(struct up_approvals *a, json_t *e, size_t total)
{
	uint64_t now = uv_now(a->s->all->loop);
	const char *n = json_string_value(json_object_get(e, "id"));
	char summary[512], body[512];

	if (a->asked_ms && now - a->asked_ms < UP_APPROVALS_NOTIFY_MS)
		return;
	(void)snprintf(summary, sizeof(summary), "%s in %s wants %s %s%.200s", a->s->o.agent,
		       a->s->o.cwd, json_string_value(json_object_get(e, "method")),
		       json_string_value(json_object_get(e, "host")),
		       json_string_value(json_object_get(e, "path")));
	(void)snprintf(body, sizeof(body),
		       "%zu waiting in all. uplink approvals lists them; uplink approve %s-%s or "
		       "uplink deny %s-%s",
		       total, up_session_id(a->s), n, up_session_id(a->s), n);
	question(a, e, summary, body);
}

/* "Always" could not save the rule (`why`): request `n`, if it still waits, is asked about
 * again at once (no flood limit: the user just answered), saying why. */
static void ask_again(struct up_approvals *a, const char *n, const char *why)
{
	json_t *e, *hit = NULL;
	char summary[512], body[1536];
	size_t i;

	json_array_foreach (a->held, i, e)
		if (!hit && streq(json_string_value(json_object_get(e, "id")), n))
			hit = e;
	if (!hit)
		return;
	(void)snprintf(summary, sizeof(summary), "%s in %s: the rule for %s %s%.200s is not saved",
		       a->s->o.agent, a->s->o.cwd,
		       json_string_value(json_object_get(hit, "method")),
		       json_string_value(json_object_get(hit, "host")),
		       json_string_value(json_object_get(hit, "path")));
	(void)snprintf(body, sizeof(body),
		       "%.900s. The request still waits: allow it here, or fix the file and choose "
		       "Always again (uplink approve %s-%s --session or --save)",
		       why, up_session_id(a->s), n);
	question(a, hit, summary, body);
}

static void tell_followers(struct up_approvals *a, json_t *e)
{
	json_t *c = json_deep_copy(e);
	char id[UP_MAX_APPROVAL_ID];

	(void)snprintf(id, sizeof(id), "%s-%s", up_session_id(a->s),
		       json_string_value(json_object_get(e, "id")));
	if (c && json_object_set_new(c, "id", json_string(id)) == 0)
		up_rpc_logs_waiting(up_session_id(a->s), c);
	json_decref(c);
}

/* Says each request that started waiting since the last listing, once, in the log, and
 * asks the user about the newest. */
static void tell_new(struct up_approvals *a, json_t *held)
{
	json_t *e, *o, *newest = NULL;
	size_t i, j;

	json_array_foreach (held, i, e) {
		const char *n = json_string_value(json_object_get(e, "id"));
		bool known = false;

		json_array_foreach (a->held, j, o)
			known = known || (n && json_equal(json_object_get(o, "id"),
							  json_object_get(e, "id")));
		if (known || !n)
			continue;
		newest = e;
		tell_followers(a, e);
		log_info("Session %s: waiting for the user: %s %s%s (uplink approve %s-%s, uplink "
			 "deny %s-%s)",
			 up_session_id(a->s), json_string_value(json_object_get(e, "method")),
			 json_string_value(json_object_get(e, "host")),
			 json_string_value(json_object_get(e, "path")), up_session_id(a->s), n,
			 up_session_id(a->s), n);
	}
	if (newest)
		ask_user(a, newest, json_array_size(held));
}

static void polled(int r, long http_status, json_t *reply, const char *err, void *userdata)
{
	struct up_approvals *a = userdata;
	json_t *held = json_object_get(reply, "held");

	a->call = NULL;
	if (r < 0 || !json_is_array(held)) {
		if (!a->failing)
			log_warning(
				"Session %s: cannot read the requests waiting for the user (%ld: "
				"%s); retrying every %d s",
				up_session_id(a->s), http_status, err ? err : "no list",
				UP_APPROVALS_RETRY_MS / 1000);
		a->failing = true;
		(void)uv_timer_start(a->timer, retry_fired, UP_APPROVALS_RETRY_MS, 0);
		return;
	}
	a->failing = false;
	while (json_array_size(held) > UP_MAX_APPROVALS_HELD)
		(void)json_array_remove(held, json_array_size(held) - 1);
	tell_new(a, held);
	json_decref(a->held);
	a->held = json_incref(held);
	a->seq = json_integer_value(json_object_get(reply, "seq"));
	poll_held(a);
}

static void poll_held(struct up_approvals *a)
{
	char path[128];

	(void)snprintf(path, sizeof(path), "/v1/held?wait=%d&after=%" JSON_INTEGER_FORMAT,
		       UP_APPROVALS_WAIT_S, a->seq);
	a->call = up_control_call(a->s, "GET", path, NULL, UP_APPROVALS_CALL_MS, polled, a);
	if (!a->call)
		(void)uv_timer_start(a->timer, retry_fired, UP_APPROVALS_RETRY_MS, 0);
}

void up_approvals_start(struct up_session *s)
{
	struct up_approvals *a;

	if (!s->o.asked.ask || !s->control_token[0] || s->approvals)
		return;
	a = calloc(1, sizeof(*a));
	if (!a || !(a->timer = calloc(1, sizeof(*a->timer))) ||
	    uv_timer_init(s->all->loop, a->timer) < 0) {
		if (a)
			free(a->timer);
		free(a);
		log_error("Session %s: out of memory for ask mode; requests no rule allows wait "
			  "until they time out",
			  s->id);
		return;
	}
	a->s = s;
	a->seq = -1;
	a->held = json_array();
	a->timer->data = a;
	s->approvals = a;
	poll_held(a);
}

void up_approvals_stop(struct up_session *s)
{
	struct up_approvals *a = s->approvals;

	if (!a)
		return;
	s->approvals = NULL;
	up_control_call_cancel(a->call);
	up_control_call_cancel(a->answer);
	a->question = up_notify_question_close(a->question);
	a->call = a->answer = NULL;
	json_decref(a->answer_rule);
	a->answer_rule = NULL;
	(void)uv_timer_stop(a->timer);
	uv_close((uv_handle_t *)a->timer, timer_closed);
}

/* ---- the rule an approval for this session adds ---- */

static bool looks_like_id(const char *seg, size_t n)
{
	size_t digits = 0, hex = 0;

	for (size_t i = 0; i < n; i++) {
		digits += isdigit((unsigned char)seg[i]) != 0;
		hex += isxdigit((unsigned char)seg[i]) != 0 || seg[i] == '-';
	}
	return n == 0 || digits == n || (n >= 8 && hex == n && digits > 0);
}

/* Appends s[0..n) to out with every regex metacharacter escaped. */
static void escape(char *out, size_t len, const char *s, size_t n)
{
	size_t o = strlen(out);

	for (size_t i = 0; i < n && o + 3 < len; i++) {
		if (strchr(".^$*+?{}[]|()\\", s[i]))
			out[o++] = '\\';
		out[o++] = s[i];
	}
	out[o] = '\0';
}

json_t *up_approval_rule(const char *method, const char *host, const char *path)
{
	char host_re[UP_MAX_KUBE_URL / 4] = "", path_re[UP_MAX_KUBE_URL] = "", name[128];
	size_t plen = strcspn(path, "?"), cut = 0, segs = 0;

	while (segs < UP_APPROVAL_PATH_SEGMENTS && cut < plen && path[cut] == '/') {
		size_t n = strcspn(path + cut + 1, "/?");

		if (looks_like_id(path + cut + 1, n))
			break;
		cut += 1 + n;
		segs++;
	}
	escape(host_re, sizeof(host_re), host, strlen(host));
	if (segs) {
		escape(path_re, sizeof(path_re), path, cut);
		(void)strncat(path_re, "(/[^?]*)?(\\?.*)?", sizeof(path_re) - strlen(path_re) - 1);
	} else {
		escape(path_re, sizeof(path_re), path, plen);
		(void)strncat(path_re, "(\\?.*)?", sizeof(path_re) - strlen(path_re) - 1);
	}
	(void)snprintf(name, sizeof(name), "approved-%.100s", host);
	return json_pack("{s:s, s:[s], s:[s], s:[s]}", "name", name, "hosts", host_re, "methods",
			 method, "paths", path_re);
}

json_t *up_approvals_held(struct up_session *s)
{
	json_t *out = json_array(), *e;
	size_t i;

	if (!out || !s->approvals)
		return out;
	json_array_foreach (s->approvals->held, i, e) {
		json_t *c = json_deep_copy(e);
		const char *n = json_string_value(json_object_get(e, "id"));
		const char *method = json_string_value(json_object_get(e, "method"));
		const char *host = json_string_value(json_object_get(e, "host"));
		const char *path = json_string_value(json_object_get(e, "path"));
		char id[UP_MAX_APPROVAL_ID];

		if (!c || !n || !method || !host || !path) {
			json_decref(c);
			continue;
		}
		(void)snprintf(id, sizeof(id), "%s-%s", up_session_id(s), n);
		(void)json_object_set_new(c, "id", json_string(id));
		(void)json_object_set_new(c, "session", json_string(up_session_id(s)));
		(void)json_object_set_new(c, "rule", up_approval_rule(method, host, path));
		(void)json_array_append_new(out, c);
	}
	return out;
}
