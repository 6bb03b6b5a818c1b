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

#define CREDS	"~/.claude/.credentials.json"
#define RELOGIN "log in again by running `claude` on this machine, or use --bedrock"

static const char auth_source_hosts[] = "api\\.anthropic\\.com";
static const char bedrock_hosts[] = "bedrock-runtime\\.[a-z0-9-]+\\.amazonaws\\.com";

static const struct up_agent_oauth_file login_file;

/* ---------------------------------------------------------------- refresh */

/* Puts the new tokens into o->doc and reads them back; 0 or -EIO with why. */
static int take_tokens(void *login, const struct up_agent_body *b, time_t now, char *err,
		       size_t len)
{
	struct up_agent_oauth *o = login;
	json_t *ans = up_agent_body_json(b);
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	const char *refresh = json_string_value(json_object_get(ans, "refresh_token"));
	json_t *in = json_object_get(ans, "expires_in");
	int r = 0, k;

	if (!up_agent_is_token(access) || (refresh && !up_agent_is_token(refresh)) ||
	    !json_is_integer(in) || json_integer_value(in) <= 0)
		r = up_agent_failf(err, len, -EIO,
				   "the token endpoint's answer lacks access_token or expires_in");
	if (r == 0 &&
	    (up_agent_set_secret(o->obj, "accessToken", json_string(access)) < 0 ||
	     (refresh && up_agent_set_secret(o->obj, "refreshToken", json_string(refresh)) < 0) ||
	     json_object_set_new(
		     o->obj, "expiresAt",
		     json_integer((json_int_t)now * 1000 + json_integer_value(in) * 1000)) < 0))
		r = -ENOMEM;
	up_json_wipe(ans);
	json_decref(ans);
	/* the borrowed pointers may name replaced strings now */
	k = up_agent_oauth_parse(&login_file, o, err, len);
	return r < 0 ? r : k;
}

static const struct up_agent_renewal renewal = {
	.token = "the Claude OAuth token",
	.expired = "the Claude OAuth token",
	.renew = "run `claude` on this machine",
	.relogin = RELOGIN,
};

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
static int fake_credentials(const struct up_agent_oauth *o, time_t now, struct up_agent_prepared *p,
			    const char **out, size_t *out_len)
{
	const char *access = NULL, *refresh_tok = NULL, *k;
	json_t *copy, *doc, *v;
	char *text;
	int r;

	if ((r = up_agent_fake_token(p, CLAUDE_FAKE_ACCESS_PREFIX, &access)) < 0 ||
	    (r = up_agent_fake_token(p, CLAUDE_FAKE_REFRESH_PREFIX, &refresh_tok)) < 0)
		return r;
	copy = json_object();
	json_object_foreach (o->obj, k, v)
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

static int anthropic_rules(struct up_agent_prepared *p, const char *value)
{
	return auth_rule(p, "anthropic-auth", auth_source_hosts, anthropic_methods, value);
}

static const struct up_agent_oauth_file login_file = {
	.file = ".claude/.credentials.json",
	.what = CREDS,
	.tool = "claude",
	.missing_hint = "run `claude` once on this machine and log in, or use --bedrock",
	.object = "claudeAiOauth",
	.access = "accessToken",
	.refresh = "refreshToken",
	.expires = "expiresAt",
	.relogin = RELOGIN,
	.token_url = CLAUDE_TOKEN_URL_DEFAULT,
	.client_id = CLAUDE_OAUTH_CLIENT_ID,
	.take = take_tokens,
	.say = &renewal,
	.rules = anthropic_rules,
	.fake = fake_credentials,
};

int claude_anthropic_auth(struct up_agent_ctx *c)
{
	return up_agent_oauth_login(c, &login_file, c->in->token_url);
}

/* ---------------------------------------------------------------- doctor */

static const struct up_agent_login_doctor doctor = {
	.name = "claude login",
	.missing = "no Claude login",
	.missing_note = "",
	.missing_fix = "run `claude` on this machine and log in (or use --bedrock)",
	.fix = "run `claude` and log in again",
	.login = "the Claude login",
	.token = "the token",
};

size_t claude_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		     struct up_agent_check *out, size_t max)
{
	(void)impl;
	return up_agent_oauth_doctor(&login_file, &doctor, in, out, max);
}
