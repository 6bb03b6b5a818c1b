/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Claude's credentials on the host: ~/.claude/.credentials.json read, its OAuth access
 * token refreshed when it is near its expiry (libcurl easy: this runs on a worker
 * thread), the auth rule that makes the mitm inject the real token, and the fake
 * credentials file that lets Claude Code in the pod believe it is logged in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/claude/claude.h"
#include "bounds.h"
#include "fileio.h"
#include "hex.h"

#define CREDS	"~/.claude/.credentials.json"
#define RELOGIN "log in again by running `claude` on this machine, or use --bedrock"

static const char auth_source_hosts[] = "api\\.anthropic\\.com";
static const char bedrock_hosts[] = "bedrock-runtime\\.[a-z0-9-]+\\.amazonaws\\.com";

struct oauth {
	json_t *doc;   /* the whole file; strings wiped before it is freed */
	json_t *oauth; /* doc.claudeAiOauth (borrowed) */
	const char *access, *refresh;
	long long expires_ms;
};

static void oauth_done(struct oauth *o)
{
	up_json_wipe(o->doc);
	json_decref(o->doc);
	*o = (struct oauth){0};
}

static int parse_oauth(struct oauth *o, char *err, size_t len)
{
	json_t *exp;

	o->access = o->refresh = NULL;
	o->oauth = json_object_get(o->doc, "claudeAiOauth");
	if (!json_is_object(o->oauth))
		return up_agent_failf(err, len, -EINVAL,
				      CREDS " has no 'claudeAiOauth' object: " RELOGIN);
	o->access = json_string_value(json_object_get(o->oauth, "accessToken"));
	if (!o->access || !*o->access)
		return up_agent_failf(err, len, -EINVAL,
				      CREDS " has no 'claudeAiOauth.accessToken': " RELOGIN);
	if (!up_agent_is_token(o->access))
		return up_agent_failf(err, len, -EINVAL,
				      CREDS ": 'claudeAiOauth.accessToken' is not a bearer "
					    "token (unexpected characters): " RELOGIN);
	o->refresh = json_string_value(json_object_get(o->oauth, "refreshToken"));
	if (o->refresh && !up_agent_is_token(o->refresh))
		o->refresh = NULL;
	exp = json_object_get(o->oauth, "expiresAt");
	if (!json_is_integer(exp) && !json_is_real(exp))
		return up_agent_failf(err, len, -EINVAL,
				      CREDS " has no 'claudeAiOauth.expiresAt' (milliseconds "
					    "since 1970): " RELOGIN);
	o->expires_ms = (long long)json_number_value(exp);
	return 0;
}

/* ---------------------------------------------------------------- refresh */

static char *request_body(const char *refresh)
{
	json_t *req = json_pack("{s:s, s:s, s:s}", "grant_type", "refresh_token", "refresh_token",
				refresh, "client_id", CLAUDE_OAUTH_CLIENT_ID);
	char *s = req ? json_dumps(req, JSON_COMPACT) : NULL;

	up_json_wipe(req);
	json_decref(req);
	return s;
}

/* POSTs the refresh grant, trusting `ca` (a PEM file; NULL: the system's CAs); 0 with the
 * answer's body in *b, or -EIO with why. */
static int post_refresh(const char *url, const char *ca, const char *refresh,
			struct up_agent_body *b, char *err, size_t len)
{
	char *req = request_body(refresh);
	int r;

	if (!req)
		return -ENOMEM;
	r = up_agent_post(url, ca, "application/json", req, b, err, len);
	up_free_secret(req, strlen(req));
	return r;
}

/* Puts the new tokens into o->doc; 0 or -EIO with why. */
static int take_tokens(struct oauth *o, const struct up_agent_body *b, time_t now, char *err,
		       size_t len)
{
	json_t *ans = up_agent_body_json(b);
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	const char *refresh = json_string_value(json_object_get(ans, "refresh_token"));
	json_t *in = json_object_get(ans, "expires_in");
	int r = 0;

	if (!up_agent_is_token(access) || (refresh && !up_agent_is_token(refresh)) ||
	    !json_is_integer(in) || json_integer_value(in) <= 0)
		r = up_agent_failf(err, len, -EIO,
				   "the token endpoint's answer lacks access_token or expires_in");
	if (r == 0 &&
	    (json_object_set_new(o->oauth, "accessToken", json_string(access)) < 0 ||
	     (refresh && json_object_set_new(o->oauth, "refreshToken", json_string(refresh)) < 0) ||
	     json_object_set_new(
		     o->oauth, "expiresAt",
		     json_integer((json_int_t)now * 1000 + json_integer_value(in) * 1000)) < 0))
		r = -ENOMEM;
	up_json_wipe(ans);
	json_decref(ans);
	return r;
}

/*
 * Refreshes in place: o->doc gets the new tokens and is written back to the host file
 * (the old refresh token stops working once used). 0, or -EIO with why.
 */
static int refresh(const char *path, const struct up_agent_input *in, struct oauth *o, time_t now,
		   char *err, size_t len)
{
	const char *url = in->token_url;
	struct up_agent_body b = {0};
	int r;

	if (!url || !*url)
		url = CLAUDE_TOKEN_URL_DEFAULT;
	if (!o->refresh)
		return up_agent_failf(err, len, -EIO,
				      CREDS " has no usable 'claudeAiOauth.refreshToken'");
	r = post_refresh(url, in->ca_bundle, o->refresh, &b, err, len);
	if (r == 0) {
		r = take_tokens(o, &b, now, err, len);
		/* the borrowed pointers may name replaced strings now */
		int k = parse_oauth(o, err, len);
		r = r < 0 ? r : k;
	}
	up_agent_body_done(&b);
	if (r == 0 && (r = up_agent_write_json(path, o->doc)) < 0)
		r = up_agent_failf(err, len, r, "cannot write the refreshed token to " CREDS ": %s",
				   strerror(-r));
	return r;
}

/* ---------------------------------------------------------------- products */

static bool looks_secret_key(const char *k)
{
	return strcasestr(k, "token") || strcasestr(k, "secret") || strcasestr(k, "key");
}

/*
 * The pod's .credentials.json: only claudeAiOauth (other top-level keys, such as MCP
 * servers' OAuth tokens, are real credentials and stay home), with fake tokens and an
 * expiry ten years out; its other fields (scopes, subscriptionType, ...) are kept.
 */
static int fake_credentials(const struct oauth *o, time_t now, struct up_agent_prepared *p,
			    const char **out, size_t *out_len)
{
	char access[sizeof(CLAUDE_FAKE_ACCESS_PREFIX) + 32] = CLAUDE_FAKE_ACCESS_PREFIX;
	char refresh_tok[sizeof(CLAUDE_FAKE_REFRESH_PREFIX) + 32] = CLAUDE_FAKE_REFRESH_PREFIX;
	json_t *copy = json_object(), *doc, *v;
	const char *k;
	char *text;

	if (up_random_hex(access + strlen(access), 16) < 0 ||
	    up_random_hex(refresh_tok + strlen(refresh_tok), 16) < 0) {
		json_decref(copy);
		return -EIO;
	}
	json_object_foreach (o->oauth, k, v)
		if (copy && !looks_secret_key(k) && !streq(k, "expiresAt"))
			(void)json_object_set_new(copy, k, json_deep_copy(v));
	if (copy)
		(void)json_object_set_new(copy, "accessToken", json_string(access));
	if (copy)
		(void)json_object_set_new(copy, "refreshToken", json_string(refresh_tok));
	if (copy)
		(void)json_object_set_new(
			copy, "expiresAt",
			json_integer(((json_int_t)now + CLAUDE_FAKE_LIFETIME_S) * 1000));
	doc = copy ? json_pack("{s:o}", "claudeAiOauth", copy) : NULL;
	text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
	json_decref(doc);
	if (!(text = up_agent_keep(p, text, text ? strlen(text) : 0)))
		return -ENOMEM;
	*out = text;
	*out_len = strlen(text);
	return 0;
}

/*
 * The methods the auth rules allow: those the APIs use (the Messages, Models, Files and
 * Batches APIs: GET, POST, DELETE; HEAD for probes; Bedrock: GET and POST), never TRACE,
 * whose answer would echo the injected token.
 */
static const char anthropic_methods[] = "[\"GET\", \"HEAD\", \"POST\", \"DELETE\"]";
static const char bedrock_methods[] = "[\"GET\", \"POST\"]";

/* The auth layer's document: one rule injecting `value` as Authorization on `hosts`. */
static int auth_rule(struct up_agent_prepared *p, const char *name, const char *hosts,
		     const char *methods, const char *value)
{
	json_t *m = json_loads(methods, 0, NULL);
	json_t *doc = m ? json_pack("{s:[{s:s, s:[s], s:o, s:{s:{s:s}}}]}", "rules", "name", name,
				    "hosts", hosts, "methods", m, "inject", "headers",
				    "Authorization", value)
			: NULL;

	return up_agent_set_auth_rules(p, doc);
}

int claude_bedrock_auth(struct up_agent_ctx *c)
{
	c->p->expires_at = 0;
	return auth_rule(c->p, "bedrock-auth", bedrock_hosts, bedrock_methods,
			 "Bearer {{keyring:bedrock:key}}");
}

static int inject_token(struct up_agent_prepared *p, const struct oauth *o)
{
	size_t n = strlen("Bearer ") + strlen(o->access) + 1;
	char *value = malloc(n);
	int r;

	if (!value)
		return -ENOMEM;
	(void)snprintf(value, n, "Bearer %s", o->access);
	r = auth_rule(p, "anthropic-auth", auth_source_hosts, anthropic_methods, value);
	up_free_secret(value, n);
	p->expires_at = (time_t)(o->expires_ms / 1000);
	return r;
}

int claude_anthropic_auth(struct up_agent_ctx *c)
{
	const struct up_agent_input *in = c->in;
	struct up_agent_prepared *p = c->p;
	char *err = c->err;
	size_t err_len = c->err_len;
	_cleanup_(freep) char *path = NULL;
	struct oauth o = {0};
	time_t now = in->now ? in->now : time(NULL);
	long long left;
	int r;

	if (asprintf(&path, "%s/.claude/.credentials.json", in->home) < 0)
		return -ENOMEM;
	r = up_agent_read_json(path, CREDS, "claude",
			       "run `claude` once on this machine and log in, or use "
			       "--bedrock",
			       &o.doc, err, err_len);
	if (r == 0)
		r = parse_oauth(&o, err, err_len);
	left = r == 0 ? o.expires_ms / 1000 - (long long)now : 0;
	if (r == 0 && left < CLAUDE_REFRESH_MARGIN_S) {
		char why[512];
		int k = refresh(path, in, &o, now, why, sizeof(why));
		if (k >= 0)
			r = 0;
		else if (left > 0)
			r = up_agent_warn(
				p,
				"refreshing the Claude OAuth token failed (%s); the current "
				"token works for %lld more seconds: run `claude` on this "
				"machine to renew it",
				why, left);
		else
			r = up_agent_failf(err, err_len, -EIO,
					   "the Claude OAuth token in " CREDS " has expired "
					   "and refreshing it failed (%s): " RELOGIN,
					   why);
	}
	if (r == 0)
		r = o.access ? inject_token(p, &o) : -ENOMEM;
	if (r == 0 && !in->rules_only)
		r = fake_credentials(&o, now, p, &c->fake, &c->fake_len);
	oauth_done(&o);
	return r;
}

/* ---------------------------------------------------------------- doctor */

size_t claude_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		     struct up_agent_check *out, size_t max)
{
	_cleanup_(freep) char *path = NULL;
	struct oauth o = {0};
	char why[512];
	long long left;
	int r;

	(void)impl;
	if (max < 1)
		return 0;
	if (asprintf(&path, "%s/.claude/.credentials.json", in->home) < 0) {
		up_agent_check_set(out, "claude login", "skip", NULL, "out of memory");
		return 1;
	}
	r = up_agent_read_json(path, CREDS, "claude",
			       "run `claude` once on this machine and log in", &o.doc, why,
			       sizeof(why));
	if (r == 0)
		r = parse_oauth(&o, why, sizeof(why));
	left = r == 0 ? o.expires_ms / 1000 - (long long)(in->now ? in->now : time(NULL)) : 0;
	if (r == -ENOENT)
		up_agent_check_set(out, "claude login", "warn",
				   "run `claude` on this machine and log in (or use --bedrock)",
				   "no Claude login: %s is missing", CREDS);
	else if (r < 0)
		up_agent_check_set(out, "claude login", "warn", "run `claude` and log in again",
				   "%s", why);
	else if (left <= 0 && !o.refresh)
		up_agent_check_set(out, "claude login", "warn", "run `claude` and log in again",
				   "the Claude login in %s has expired and has no refresh token",
				   CREDS);
	else if (left > 0)
		up_agent_check_set(out, "claude login", "ok", NULL,
				   "%s: the token lasts %lld more minutes%s", CREDS, left / 60,
				   o.refresh ? "; uplink refreshes it before it expires" : "");
	else
		up_agent_check_set(out, "claude login", "ok", NULL,
				   "%s: the token expired %lld minutes ago; uplink refreshes it "
				   "when a session starts",
				   CREDS, -left / 60);
	oauth_done(&o);
	return 1;
}
