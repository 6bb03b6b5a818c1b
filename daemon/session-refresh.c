/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Credentials renewed while a session runs (README.md, "What the daemon does on its own"):
 *
 *  - AWS: the profiles' exports, a little before the earliest expires; the mitm's
 *    aws-sigv4-creds Secret gets the new map.
 *  - The agent's login (the Anthropic OAuth token): its prepare() again with rules_only,
 *    shortly before the token expires (prepare() refreshes it on the host when it is that
 *    near its end); the auth rules' header values are swapped for the new ones.
 *  - {{exec:...}} values of rules that say `refresh: DURATION`, that often: the set's
 *    placeholders are resolved again (every one of them: the resolver works on whole sets).
 *
 * Work runs on the threadpool (exports, prepare) or through the async resolver; then the
 * rendered Secret is updated and applied again (server-side apply), Kubernetes updates
 * the mounted file, and the addon reloads it when it changes; new rules also go to the
 * proxy at once over the control channel (control.c). A failure is retried with
 * capped backoff; if the credential expires anyway the user gets one desktop notification
 * per kind (again only after a success).
 *
 * One timer per session, armed for the next thing due; one round of work at a time. The
 * state is its own object so that a round in flight when the session goes can finish: the
 * session detaches it (s = NULL) and the round's last step frees it.
 *
 * After a daemon restart: an adopted session has its record, not its options, and
 * re-reading the rules' sources could give a different set than the one deployed. So when
 * the refresh is armed the record gets what was renewed ("renews") and what an adopting
 * daemon needs (store.h: the AWS profile names, the expiries, the exec period; no secret).
 * The adopting daemon, once the cluster answers, reads the mitm's Secrets back (rules-json,
 * aws-sigv4-creds): the rules from rules.json (values already resolved) become s->rs, the
 * Secrets (without what the server owns) s->objects, the record fills s->o; then the same
 * timers are armed and the rounds run as above. {{exec:...}} values cannot go on (the
 * Secret holds their values, not the commands): the log and one desktop notification say
 * so, as for a record of an older uplinkd without the keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approvals.h"
#include "agents/agent.h"
#include "aws.h"
#include "backoff.h"
#include "bounds.h"
#include "control.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "log.h"
#include "loop-timer.h"
#include "manager.h"
#include "manifests.h"
#include "notify.h"
#include "placeholders.h"
#include "rules.h"
#include "secret-store.h"
#include "session-private.h"
#include "store.h"

enum cred { CRED_AWS, CRED_LOGIN, CRED_EXEC, _CRED_MAX };

static const char *const cred_what[_CRED_MAX] = {
	[CRED_AWS] = "AWS credentials",
	[CRED_LOGIN] = "the agent's login token",
	[CRED_EXEC] = "exec placeholder values",
};

/* The agent's token is renewed this long before it expires (its prepare() refreshes it
 * when less than 5 minutes are left). */
#define LOGIN_RENEW_BEFORE_S 120

struct cred_state {
	bool on;
	uint64_t due_ms;     /* uv_now() of the next renewal */
	uint64_t expires_ms; /* uv_now() when the value in the Secret stops working; 0 unknown */
	unsigned attempt;
	bool notified;
};

struct session_refresh {
	struct up_session *s; /* NULL once the session has gone: the round in flight frees this */
	uv_timer_t *timer;    /* up_loop_timer_new() */
	uv_work_t work;
	bool busy;    /* a round is under way */
	bool in_work; /* its threadpool job is queued or running: job_after() frees a detached rf */
	unsigned pending; /* its steps still in flight (threadpool, resolver, applies) */
	unsigned doing;	  /* 1 << enum cred: the kinds in this round */
	unsigned rules;	  /* the kinds whose new values await the rules Secret */
	long divisor;	  /* UPLINK_DEBUG_TIME_DIVISOR: tests make minutes seconds */
	struct cred_state c[_CRED_MAX];
	uint64_t exec_every_ms;
	struct up_resolve *resolve;
	json_t *aws_profiles; /* the names, as armed */

	/* The threadpool job: its input (copied on the loop) and its results. */
	json_t *profiles;
	char *agent, *mode, *home, *user, *cwd;
	char *creds_json; /* secret */
	int64_t aws_expires;
	int aws_r;
	char aws_why[1024];
	struct up_ruleset *auth; /* the agent's new auth rules */
	time_t login_at;	 /* when the token in the rules Secret expires */
	time_t login_expires;	 /* the new one's */
	int login_r;
	char login_why[1024];
};

static long time_divisor(void)
{
	const char *div = up_knobs()->time_divisor;
	long d = div ? strtol(div, NULL, 10) : 1;

	return d > 1 ? d : 1;
}

static void job_clear(struct session_refresh *rf)
{
	char **strs[] = {&rf->agent, &rf->mode, &rf->home, &rf->user, &rf->cwd};

	if (rf->creds_json)
		up_free_secret(rf->creds_json, strlen(rf->creds_json));
	rf->creds_json = NULL;
	json_decref(rf->profiles);
	rf->profiles = NULL;
	for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	rf->auth = up_ruleset_free(rf->auth);
}

static void rf_free(struct session_refresh *rf)
{
	job_clear(rf);
	json_decref(rf->aws_profiles);
	free(rf);
}

static void on_timer(uv_timer_t *t);

static uint64_t now_ms(const struct session_refresh *rf)
{
	return uv_now(rf->s->all->loop);
}

/* Seconds of wall-clock time as the loop's milliseconds, divided in tests. */
static uint64_t scaled_ms(const struct session_refresh *rf, int64_t seconds)
{
	return seconds > 0 ? (uint64_t)seconds * 1000 / (uint64_t)rf->divisor : 0;
}

static void rearm(struct session_refresh *rf)
{
	uint64_t next = UINT64_MAX, now;

	if (!rf->s || rf->busy || rf->s->all->closing)
		return;
	for (int k = 0; k < _CRED_MAX; k++)
		if (rf->c[k].on && rf->c[k].due_ms < next)
			next = rf->c[k].due_ms;
	if (next == UINT64_MAX)
		return;
	now = now_ms(rf);
	(void)uv_timer_start(rf->timer, on_timer, next > now ? next - now : 0, 0);
}

/* The value now in the Secret stops working at `expires` (Unix time; 0 never). */
static void set_expiry(struct session_refresh *rf, enum cred k, int64_t expires)
{
	int64_t now = (int64_t)time(NULL), ms;

	rf->c[k].expires_ms = expires ? now_ms(rf) + scaled_ms(rf, expires - now) : 0;
	switch (k) {
	case CRED_AWS: ms = up_refresh_delay_ms(now, expires, rf->divisor); break;
	case CRED_LOGIN:
		ms = expires ? (int64_t)scaled_ms(rf, expires - now - LOGIN_RENEW_BEFORE_S) : -1;
		break;
	default:
		ms = (int64_t)rf->exec_every_ms;
		rf->c[k].expires_ms = now_ms(rf) + 2 * rf->exec_every_ms; /* a period overdue */
		break;
	}
	/* Never sooner than a retry would be: a value that is already at its end must not
	 * make the daemon spawn the aws CLI in a loop. */
	if (ms >= 0 && ms < (int64_t)(UP_REFRESH_RETRY_BASE_MS / rf->divisor))
		ms = (int64_t)(UP_REFRESH_RETRY_BASE_MS / rf->divisor);
	rf->c[k].on = ms >= 0;
	rf->c[k].due_ms = now_ms(rf) + (uint64_t)ms;
	if (ms >= 0)
		log_debug("Session %s: %s next renewed in %lld ms", rf->s->id, cred_what[k],
			  (long long)ms);
}

static void renewed(struct session_refresh *rf, enum cred k, int64_t expires)
{
	struct up_session *s = rf->s;
	int r = 0;

	log_info("Session %s: %s renewed", s->id, cred_what[k]);
	rf->c[k].attempt = 0;
	rf->c[k].notified = false;
	set_expiry(rf, k, expires);
	/* The record follows, for a daemon that adopts the session after a restart. */
	if (k == CRED_AWS)
		r = up_record_set_aws_expires_at(s->record, expires);
	else if (k == CRED_LOGIN)
		r = up_record_set_login_expires_at(s->record, expires);
	else
		return;
	if (r >= 0)
		session_save(s);
}

static void failed(struct session_refresh *rf, enum cred k, const char *why)
{
	struct up_session *s = rf->s;
	uint64_t ms = up_backoff_ms(
		rf->c[k].attempt++, UP_REFRESH_RETRY_BASE_MS / (uint64_t)rf->divisor,
		UP_REFRESH_RETRY_CAP_MS / (uint64_t)rf->divisor, (uint32_t)uv_hrtime(), -1);

	log_warning("Session %s: cannot renew %s: %s; again in %llu ms", s->id, cred_what[k], why,
		    (unsigned long long)ms);
	if (rf->c[k].expires_ms && now_ms(rf) >= rf->c[k].expires_ms && !rf->c[k].notified) {
		rf->c[k].notified = true;
		up_notify_credential_failed(session_notifier(s), s->o.agent, s->id, why);
	}
	rf->c[k].due_ms = now_ms(rf) + ms;
}

/* One step of the round is over; the last one ends it. */
static void step_done(struct session_refresh *rf)
{
	if (--rf->pending > 0)
		return;
	rf->busy = false;
	rf->doing = rf->rules = 0;
	job_clear(rf);
	rearm(rf);
}

/* ---- the Secrets ---- */

static int put_and_apply(struct session_refresh *rf, const char *name, const char *key,
			 const char *text, session_done_fn done)
{
	json_t *secret = up_manifests_find(rf->s->objects, "Secret", name);
	int r = secret ? up_manifests_secret_put(secret, key, text, strlen(text)) : -ENOENT;

	if (r >= 0)
		r = session_apply(rf->s, secret, done);
	if (r >= 0)
		rf->pending++;
	return r;
}

static void on_aws_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	struct session_refresh *rf = s->refresh;

	(void)obj;
	if (!rf)
		return;
	if (err)
		failed(rf, CRED_AWS, err->message);
	else
		renewed(rf, CRED_AWS, rf->aws_expires);
	step_done(rf);
}

static void on_rules_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	struct session_refresh *rf = s->refresh;

	(void)obj;
	if (!rf)
		return;
	for (int k = 0; k < _CRED_MAX; k++) {
		if (!(rf->rules & (1u << k)))
			continue;
		if (err)
			failed(rf, k, err->message);
		else
			renewed(rf, k, k == CRED_LOGIN ? (int64_t)rf->login_expires : 0);
		if (!err && k == CRED_LOGIN)
			rf->login_at = rf->login_expires;
	}
	step_done(rf);
}

static void apply_rules(struct session_refresh *rf)
{
	json_t *rules = up_ruleset_render(rf->s->rs, true);
	char *text = rules ? json_dumps(rules, JSON_COMPACT) : NULL;
	int r = text ? put_and_apply(rf, UP_MANIFEST_RULES_SECRET, "rules.json", text,
				     on_rules_applied)
		     : -ENOMEM;

	if (text)
		up_free_secret(text, strlen(text));
	/* The proxy gets them at once over the control channel; the Secret (source of truth
	 * after a restart) reaches it when the kubelet updates the volume, push or no push. */
	if (r >= 0)
		up_control_push_rules(rf->s, rules);
	up_json_wipe(rules);
	json_decref(rules);
	for (int k = 0; r < 0 && k < _CRED_MAX; k++)
		if (rf->rules & (1u << k))
			failed(rf, k, "cannot update the rules Secret");
}

/* ---- the agent's login: new header values for the auth rules ---- */

static int swap_auth_values(struct session_refresh *rf)
{
	struct up_ruleset *rs = rf->s->rs;

	for (size_t i = 0; i < up_ruleset_count(rf->auth); i++) {
		const struct up_rule *nr = up_ruleset_get(rf->auth, i);
		for (size_t j = 0; j < up_ruleset_count(rs); j++) {
			struct up_rule *r = up_ruleset_get(rs, j);
			if (r->layer != UP_LAYER_AUTH || !streq(r->name, nr->name))
				continue;
			for (size_t h = 0; h < r->n_headers && h < nr->n_headers; h++)
				/* Placeholders (the keyring) are the resolver's; literal tokens are
				 * ours. */
				if (streq(r->headers[h].name, nr->headers[h].name) &&
				    !strstr(nr->headers[h].value, "{{") &&
				    up_rule_header_replace(&r->headers[h], nr->headers[h].value) <
					    0)
					return -ENOMEM;
		}
	}
	return 0;
}

/* ---- exec placeholders: the set resolved again ---- */

static void on_resolved(int r, enum up_error e, const char *message, void *ud)
{
	struct session_refresh *rf = ud;

	(void)e;
	rf->resolve = NULL;
	if (r < 0)
		failed(rf, CRED_EXEC, message);
	else
		rf->rules |= 1u << CRED_EXEC;
	if (rf->rules)
		apply_rules(rf);
	step_done(rf);
}

static void start_resolve(struct session_refresh *rf)
{
	struct up_resolve_options o = {.allow_exec = rf->s->o.asked.allow_exec,
				       .store = up_secret_store_pick()};

	rf->pending++;
	if (up_resolve_start(rf->s->all->loop, rf->s->rs, &o, on_resolved, rf, &rf->resolve) < 0)
		on_resolved(-ENOMEM, UP_ERR_INTERNAL_ERROR, "out of memory", rf);
}

/* ---- the round ---- */

static void job_run(uv_work_t *w)
{
	struct session_refresh *rf = w->data;

	if (rf->doing & (1u << CRED_AWS))
		rf->aws_r = up_aws_export_all(rf->profiles, &rf->creds_json, &rf->aws_expires,
					      rf->aws_why, sizeof(rf->aws_why));
	if (rf->doing & (1u << CRED_LOGIN)) {
		const struct up_agent_impl *a = up_agent_find(rf->agent);
		struct up_agent_input in = {.mode = rf->mode,
					    .home = rf->home,
					    .uid = getuid(),
					    .gid = getgid(),
					    .user = rf->user,
					    .cwd = rf->cwd,
					    .rules_only = true,
					    .token_url = up_knobs()->token_url,
					    .ca_bundle = up_knobs()->ca_bundle,
					    .openai_token_url = up_knobs()->openai_token_url,
					    .google_token_url = up_knobs()->google_token_url};
		struct up_agent_prepared *p = NULL;
		json_t *problems = json_array();

		rf->login_r = a ? up_agent_prepare(a, &in, &p, rf->login_why, sizeof(rf->login_why))
				: -ENOENT;
		if (rf->login_r >= 0 && p && p->auth_rules && problems &&
		    (rf->auth = up_ruleset_new()))
			rf->login_r =
				up_ruleset_load_string(rf->auth, UP_LAYER_AUTH, "agent auth",
						       p->auth_rules, p->auth_rules_len, problems);
		else if (rf->login_r >= 0)
			rf->login_r = -ENOMEM;
		if (rf->login_r < 0 && !rf->login_why[0])
			(void)snprintf(rf->login_why, sizeof(rf->login_why),
				       "the agent's new auth rules "
				       "are not valid");
		rf->login_expires = p ? p->expires_at : 0;
		json_decref(problems);
		up_agent_prepared_free(p);
	}
}

static void job_after(uv_work_t *w, int status)
{
	struct session_refresh *rf = w->data;
	struct up_session *s = rf->s;

	(void)status;
	rf->in_work = false;
	if (!s) { /* the session went while the job ran */
		rf_free(rf);
		return;
	}
	if (s->state != UP_SESSION_RUNNING || s->all->closing) {
		step_done(rf);
		return;
	}
	if (rf->doing & (1u << CRED_AWS)) {
		if (rf->aws_r < 0)
			failed(rf, CRED_AWS, rf->aws_why);
		else if (put_and_apply(rf, UP_MANIFEST_AWS_SECRET, UP_MANIFEST_AWS_KEY,
				       rf->creds_json, on_aws_applied) < 0)
			failed(rf, CRED_AWS, "cannot update the Secret " UP_MANIFEST_AWS_SECRET);
	}
	if (rf->doing & (1u << CRED_LOGIN)) {
		if (rf->login_r < 0)
			failed(rf, CRED_LOGIN, rf->login_why);
		else if (rf->login_expires <= rf->login_at) /* the same token: no progress */
			failed(rf, CRED_LOGIN,
			       "the token was not renewed on the host; run the agent's "
			       "CLI on this machine to log in again");
		else if (swap_auth_values(rf) < 0)
			failed(rf, CRED_LOGIN, "out of memory");
		else
			rf->rules |= 1u << CRED_LOGIN;
	}
	if (rf->doing & (1u << CRED_EXEC))
		start_resolve(rf); /* the rules Secret once it is done */
	else if (rf->rules)
		apply_rules(rf);
	step_done(rf);
}

static int job_inputs(struct session_refresh *rf)
{
	const struct up_session_opts *o = &rf->s->o;

	if (rf->doing & (1u << CRED_AWS) && !(rf->profiles = json_deep_copy(rf->aws_profiles)))
		return -ENOMEM;
	if (!(rf->doing & (1u << CRED_LOGIN)))
		return 0;
	rf->agent = strdup(o->agent);
	rf->mode = o->mode ? strdup(o->mode) : NULL;
	rf->home = strdup(o->home);
	rf->user = strdup(o->user);
	rf->cwd = strdup(o->cwd);
	return rf->agent && (rf->mode || !o->mode) && rf->home && rf->user && rf->cwd ? 0 : -ENOMEM;
}

static void on_timer(uv_timer_t *t)
{
	struct session_refresh *rf = t->data;
	uint64_t now = now_ms(rf);
	int r;

	if (rf->busy || rf->s->state != UP_SESSION_RUNNING)
		return;
	for (int k = 0; k < _CRED_MAX; k++)
		if (rf->c[k].on && rf->c[k].due_ms <= now)
			rf->doing |= 1u << k;
	if (!rf->doing) {
		rearm(rf);
		return;
	}
	rf->busy = true;
	rf->pending = 1;
	if (!(rf->doing & ((1u << CRED_AWS) | (1u << CRED_LOGIN)))) {
		start_resolve(rf);
		step_done(rf);
		return;
	}
	r = job_inputs(rf);
	rf->work.data = rf;
	if (r >= 0)
		r = uv_queue_work(rf->s->all->loop, &rf->work, job_run, job_after);
	rf->in_work = r >= 0;
	if (r < 0) {
		for (int k = 0; k < _CRED_MAX; k++)
			if (rf->doing & (1u << k))
				failed(rf, k, "cannot start the renewal");
		step_done(rf);
	}
}

static uint64_t exec_every_s(const struct up_ruleset *rs)
{
	uint64_t every = 0;

	for (size_t i = 0; rs && i < up_ruleset_count(rs); i++) {
		uint64_t r = up_ruleset_get(rs, i)->refresh_s;
		if (r && (!every || r < every))
			every = r;
	}
	return every;
}

/* In the record, for a daemon that adopts the session: "renews": ["AWS credentials", ...]
 * and what it needs to go on (store.h; no secret). */
static void record_renews(struct up_session *s, const struct session_refresh *rf, int64_t aws,
			  int64_t login, uint64_t exec)
{
	json_t *what = json_array();

	for (int k = 0; what && k < _CRED_MAX; k++)
		if (rf->c[k].on)
			(void)json_array_append_new(what, json_string(cred_what[k]));
	if (!what || !s->record || json_object_set_new(s->record, "renews", what) < 0 ||
	    up_record_set_renewal(s->record, rf->aws_profiles, rf->c[CRED_AWS].on ? aws : 0,
				  rf->c[CRED_LOGIN].on ? login : 0,
				  rf->c[CRED_EXEC].on ? exec : 0) < 0)
		log_warning("Session %s: out of memory; a restarted uplinkd will not renew its "
			    "credentials",
			    s->id);
	else
		session_save(s);
}

/* The timers, for what expires (Unix times; 0: not renewed). */
static void arm(struct up_session *s, const json_t *profiles, int64_t aws, int64_t login,
		uint64_t exec)
{
	struct session_refresh *rf;

	if (s->refresh || (!aws && !login && !exec))
		return; /* nothing that expires */
	rf = calloc(1, sizeof(*rf));
	if (rf && aws && !(rf->aws_profiles = json_deep_copy(profiles))) {
		free(rf);
		rf = NULL;
	}
	if (rf && !(rf->timer = up_loop_timer_new(s->all->loop, rf))) {
		json_decref(rf->aws_profiles);
		free(rf);
		rf = NULL;
	}
	if (!rf) {
		log_warning("Session %s: out of memory; its credentials will not be renewed",
			    s->id);
		return;
	}
	rf->s = s;
	rf->divisor = time_divisor();
	rf->exec_every_ms = exec * 1000 / (uint64_t)rf->divisor;
	s->refresh = rf;
	if (aws)
		set_expiry(rf, CRED_AWS, aws);
	if (login)
		set_expiry(rf, CRED_LOGIN, login);
	rf->login_at = (time_t)login;
	if (exec)
		set_expiry(rf, CRED_EXEC, 0);
	rearm(rf);
	record_renews(s, rf, aws, login, exec);
}

void session_refresh_arm(struct up_session *s)
{
	const struct up_session_extra *x = s->o.extra;
	int64_t aws = x && json_array_size(x->aws_profiles) ? x->aws_expires_at : 0;

	arm(s, x ? x->aws_profiles : NULL, aws, (int64_t)session_agent_expires_at(s),
	    exec_every_s(s->rs));
}

/* ---- after a restart: the Secrets in the cluster stand for the options ---- */

static bool record_renews_kind(const json_t *rec, enum cred k)
{
	json_t *what = json_object_get(rec, "renews"), *v;
	size_t i;

	json_array_foreach (what, i, v)
		if (json_is_string(v) && streq(json_string_value(v), cred_what[k]))
			return true;
	return false;
}

static void say_stopped(struct up_session *s, unsigned kinds, const char *why)
{
	char list[256] = "";

	for (int k = 0; k < _CRED_MAX; k++)
		if (kinds & (1u << k))
			(void)snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				       list[0] ? ", " : "", cred_what[k]);
	if (!list[0])
		return;
	log_warning("Session %s was picked up after a restart, and these of its credentials are no "
		    "longer renewed (%s): %s; they stop working when they expire, so start a new "
		    "session to have them renewed",
		    s->id, why, list);
	up_notify_renewal_stopped(session_notifier(s), up_record_agent(s->record), s->id, list);
}

/* Both Secrets are in (or could not be had): the timers, as session_refresh_arm() sets them. */
static void adopted_arm(struct up_session *s)
{
	const char *mode = up_record_mode(s->record);
	unsigned kinds = s->rearm_kinds;
	char **strs[] = {&s->o.agent, &s->o.mode, &s->o.cwd, &s->o.user, &s->o.home};
	const char *from[] = {up_record_agent(s->record), mode && *mode ? mode : NULL,
			      up_record_cwd(s->record), s->all->user, s->all->home};

	if (s->state != UP_SESSION_RUNNING || s->all->closing || s->refresh || !kinds)
		return;
	for (size_t i = 0; i < ELEMENTSOF(strs); i++)
		if (!*strs[i] && from[i] && !(*strs[i] = strdup(from[i]))) {
			say_stopped(s, kinds, "out of memory");
			return;
		}
	arm(s, up_record_aws_profiles(s->record),
	    kinds & (1u << CRED_AWS) ? up_record_aws_expires_at(s->record) : 0,
	    kinds & (1u << CRED_LOGIN) ? up_record_login_expires_at(s->record) : 0, 0);
	if (s->refresh)
		log_info("Session %s was picked up after a restart: it goes on renewing %s%s%s",
			 s->id, kinds & (1u << CRED_AWS) ? cred_what[CRED_AWS] : "",
			 kinds == ((1u << CRED_AWS) | (1u << CRED_LOGIN)) ? " and " : "",
			 kinds & (1u << CRED_LOGIN) ? cred_what[CRED_LOGIN] : "");
}

/* The rules Secret's rules.json as the set the login renewal swaps values in: what was
 * deployed, placeholders already resolved. */
static int load_rules(struct up_session *s, const json_t *secret)
{
	char *text = NULL;
	size_t len = 0;
	json_t *doc, *problems = json_array();
	int r = up_manifests_secret_get(secret, "rules.json", &text, &len);

	doc = r >= 0 ? json_loadb(text, len, 0, NULL) : NULL;
	if (text)
		up_free_secret(text, len);
	if (r >= 0 && !doc)
		r = -EINVAL;
	if (r >= 0 && (!problems || !(s->rs = up_ruleset_new())))
		r = -ENOMEM;
	if (r >= 0 && up_ruleset_load_json(s->rs, doc, problems) < 0) {
		s->rs = up_ruleset_free(s->rs);
		r = -EINVAL;
	}
	up_json_wipe(doc); /* the injected values */
	json_decref(doc);
	json_decref(problems);
	return r;
}

/* Ask mode goes on after a restart: the control token back from the rules Secret. */
static void ask_adopted(struct up_session *s, const json_t *secret)
{
	char *token = NULL;
	size_t len = 0;
	int r = up_manifests_secret_get(secret, UP_MANIFEST_CONTROL_KEY, &token, &len);

	if (r >= 0 && len == UP_CONTROL_TOKEN_LEN) {
		memcpy(s->control_token, token, len + 1);
		log_info("Session %s was picked up after a restart: its ask mode goes on", s->id);
		up_approvals_start(s);
	} else {
		log_warning(
			"Session %s was picked up after a restart, but its rules Secret holds no "
			"control token: requests no rule allows wait unanswered until they time "
			"out",
			s->id);
	}
	if (token)
		up_free_secret(token, len);
}

static void fetched(struct up_session *s, enum cred k, const struct up_kube_error *err, json_t *obj)
{
	const char *name = k == CRED_AWS ? UP_MANIFEST_AWS_SECRET : UP_MANIFEST_RULES_SECRET;
	json_t *secret = err ? NULL : up_manifests_secret_reapply(obj);
	const char *why = err ? err->message : secret ? NULL : "it is not a Secret with data";

	s->rearm_pending--;
	if (!why && k == CRED_LOGIN && load_rules(s, secret) < 0)
		why = "its rules.json cannot be read back";
	if (!why && k == CRED_LOGIN && s->o.asked.ask)
		ask_adopted(s, secret);
	else if (k == CRED_LOGIN && s->o.asked.ask)
		log_warning(
			"Session %s was picked up after a restart, but its rules Secret cannot be "
			"read (%s): requests no rule allows wait unanswered until they time out",
			s->id, why);
	if (!why && (!s->objects && !(s->objects = json_array())))
		why = "out of memory";
	if (!why) {
		int r = json_array_append_new(s->objects,
					      secret); /* takes it, even when it fails */
		secret = NULL;
		if (r < 0)
			why = "out of memory";
	}
	json_decref(secret);
	if (why) {
		char msg[1200];
		(void)snprintf(msg, sizeof(msg), "cannot read its Secret %s: %s", name, why);
		say_stopped(s, s->rearm_kinds & (1u << k), msg);
		s->rearm_kinds &= ~(1u << k);
	}
	if (!s->rearm_pending)
		adopted_arm(s);
}

static void on_aws_fetched(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	fetched(s, CRED_AWS, err, obj);
}

static void on_rules_fetched(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	fetched(s, CRED_LOGIN, err, obj);
}

static void fetch(struct up_session *s, enum cred k)
{
	const char *name = k == CRED_AWS ? UP_MANIFEST_AWS_SECRET : UP_MANIFEST_RULES_SECRET;
	char path[256];
	int r = up_kube_path(path, sizeof(path), "Secret", s->ns, name);

	if (r >= 0)
		r = session_get(s, path, k == CRED_AWS ? on_aws_fetched : on_rules_fetched);
	if (r >= 0) {
		s->rearm_pending++;
		return;
	}
	say_stopped(s, s->rearm_kinds & (1u << k), "cannot ask the cluster for its Secrets");
	s->rearm_kinds &= ~(1u << k);
}

void session_refresh_adopted(struct up_session *s)
{
	const json_t *rec = s->record;
	unsigned kinds = 0;

	if (s->rearm_tried || s->state != UP_SESSION_RUNNING || s->refresh)
		return;
	s->rearm_tried = true;
	for (int k = 0; k < _CRED_MAX; k++)
		if (record_renews_kind(rec, k))
			kinds |= 1u << k;
	if (!up_record_has_renewal(rec)) {
		say_stopped(s, kinds, "its record, from an older uplinkd, does not say how");
		kinds = 0;
	} else {
		/* The Secret holds the values the exec commands gave, not the rules that run
		 * them. */
		say_stopped(s, kinds & (1u << CRED_EXEC),
			    "the commands that give them are not known to it");
	}
	s->rearm_kinds = kinds & ((1u << CRED_AWS) | (1u << CRED_LOGIN));
	if (s->rearm_kinds & (1u << CRED_AWS))
		fetch(s, CRED_AWS);
	/* the rules Secret: the login's rules, and ask mode's control token */
	if ((s->rearm_kinds & (1u << CRED_LOGIN)) || s->o.asked.ask)
		fetch(s, CRED_LOGIN);
	if (!s->rearm_pending)
		adopted_arm(s);
}

void session_refresh_free(struct up_session *s)
{
	struct session_refresh *rf = TAKE_PTR(s->refresh);

	if (!rf)
		return;
	rf->timer = up_loop_timer_free(rf->timer);
	rf->s = NULL;
	/* Kubernetes calls in flight see s->refresh NULL and leave rf alone; the resolver is
	 * cancelled; only a threadpool job must come back, and it frees rf. */
	if (rf->resolve) {
		up_resolve_cancel(rf->resolve);
		rf->resolve = NULL;
	}
	if (!rf->in_work)
		rf_free(rf);
}
