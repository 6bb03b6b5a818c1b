/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Gemini CLI's Google login on the host: ~/.gemini/oauth_creds.json (what the CLI's
 * OAuth client caches: access_token, refresh_token, expiry_date in milliseconds, scope,
 * token_type, id_token) read, its access token refreshed at Google's token endpoint when it
 * is near its expiry and the file rewritten as the CLI rewrites it, the auth rules that make
 * the mitm inject the real token, and the pod's fake login. --api-key: the keyring entry
 * gemini/key injected as x-goog-api-key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/gemini/gemini.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"

#define CREDS "~/.gemini/oauth_creds.json"
#define RELOGIN \
	"log in again by running `gemini` on this machine (Login with Google), or use --api-key"

static const struct up_agent_oauth_file login_file;

/* ---------------------------------------------------------------- refresh */

/* The fields of a token answer the CLI's OAuth client keeps (it drops expires_in for
 * expiry_date); refresh_token only when Google sent a new one. */
static const char *const kept_fields[] = {"access_token", "refresh_token", "scope", "token_type",
					  "id_token"};

/* Puts the new tokens into o->doc and reads them back; 0 or -EIO with why. */
static int take_tokens(void *login, const struct up_agent_body *b, time_t now, char *err,
		       size_t len)
{
	struct up_agent_oauth *o = login;
	json_t *ans = up_agent_body_json(b);
	json_t *in = json_object_get(ans, "expires_in");
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	const char *refresh = json_string_value(json_object_get(ans, "refresh_token"));
	int r = 0, k;

	if (!up_agent_is_token(access) || (refresh && !up_agent_is_token(refresh)) ||
	    !json_is_integer(in) || json_integer_value(in) <= 0)
		r = up_agent_failf(err, len, -EIO,
				   "the token endpoint's answer lacks access_token or expires_in");
	for (size_t i = 0; r == 0 && i < ELEMENTSOF(kept_fields); i++) {
		json_t *v = json_object_get(ans, kept_fields[i]);
		/* a copy: the answer's strings are wiped when it is freed */
		if (json_is_string(v) && up_agent_set_secret(o->doc, kept_fields[i],
							     json_string(json_string_value(v))) < 0)
			r = -ENOMEM;
	}
	if (r == 0 && json_object_set_new(o->doc, "expiry_date",
					  json_integer((json_int_t)now * 1000 +
						       json_integer_value(in) * 1000)) < 0)
		r = -ENOMEM;
	up_json_wipe_decref(ans);
	/* the borrowed pointers may name replaced strings now */
	k = up_agent_oauth_parse(&login_file, o, err, len);
	return r < 0 ? r : k;
}

static const struct up_agent_renewal renewal = {
	.token = "the Gemini CLI's Google token",
	.expired = "the Google token",
	.renew = "run `gemini` on this machine",
	.relogin = RELOGIN,
};

/* ---------------------------------------------------------------- products */

/*
 * The pod's oauth_creds.json: fake tokens the CLI parses as its own (access_token,
 * refresh_token, token_type, the host's scope) and an expiry ten years out, so its OAuth
 * client never refreshes (it would only when the expiry is within five minutes, or on a 401
 * when there is no expiry). No id_token: it names the user and is signed by Google.
 */
static int fake_credentials(const struct up_agent_oauth *o, time_t now, struct up_agent_prepared *p,
			    const char **out, size_t *out_len)
{
	const char *scope = json_string_value(json_object_get(o->doc, "scope"));
	const char *access = NULL, *refresh_tok = NULL;
	json_t *doc;
	int r;

	if ((r = up_agent_fake_token(p, GEMINI_FAKE_ACCESS_PREFIX, &access)) < 0 ||
	    (r = up_agent_fake_token(p, GEMINI_FAKE_REFRESH_PREFIX, &refresh_tok)) < 0)
		return r;
	doc = json_pack("{s:s, s:s, s:s, s:I}", "access_token", access, "refresh_token",
			refresh_tok, "token_type", "Bearer", "expiry_date",
			((json_int_t)now + GEMINI_FAKE_LIFETIME_S) * 1000);
	if (doc && scope && json_object_set_new(doc, "scope", json_string(scope)) < 0)
		return json_decref(doc), -ENOMEM;
	if (!(*out = up_agent_dump_json(p, doc, out_len)))
		return -ENOMEM;
	return 0;
}

/*
 * The auth layer. --google: the real token on Code Assist (cloudcode-pa, the CLI's API:
 * GET and POST), on the token check the CLI makes at start-up (POST oauth2.../tokeninfo) and
 * on its user-info lookup (GET www.googleapis.com/oauth2/v2/userinfo). Never TRACE, whose
 * answer would echo the token. --api-key: the key on the Gemini API.
 */
static int google_rules(struct up_agent_prepared *p, const char *value)
{
	json_t *doc = json_pack(
		"{s:[{s:s, s:[s], s:[s,s], s:{s:{s:s}}},"
		"    {s:s, s:[s], s:[s], s:[s], s:{s:{s:s}}},"
		"    {s:s, s:[s], s:[s], s:[s], s:{s:{s:s}}}]}",
		"rules", "name", "gemini-code-assist", "hosts", "cloudcode-pa\\.googleapis\\.com",
		"methods", "GET", "POST", "inject", "headers", "Authorization", value, "name",
		"gemini-tokeninfo", "hosts", "oauth2\\.googleapis\\.com", "methods", "POST",
		"paths", "/tokeninfo", "inject", "headers", "Authorization", value, "name",
		"gemini-userinfo", "hosts", "www\\.googleapis\\.com", "methods", "GET", "paths",
		"/oauth2/v2/userinfo", "inject", "headers", "Authorization", value);

	return doc ? up_agent_set_auth_rules(p, doc) : -ENOMEM;
}

int gemini_api_key_auth(struct up_agent_ctx *c)
{
	json_t *doc = json_pack("{s:[{s:s, s:[s], s:[s,s], s:{s:{s:s}}}]}", "rules", "name",
				"gemini-api-key", "hosts", "generativelanguage\\.googleapis\\.com",
				"methods", "GET", "POST", "inject", "headers", "x-goog-api-key",
				"{{keyring:gemini:key}}");

	c->p->expires_at = 0;
	return doc ? up_agent_set_auth_rules(c->p, doc) : -ENOMEM;
}

/* Written back with the CLI's own layout (2-space JSON, 0600); the refresh is a form:
 * grant_type=refresh_token&refresh_token=...&client_id=...&client_secret=... */
static const struct up_agent_oauth_file login_file = {
	.file = ".gemini/oauth_creds.json",
	.what = CREDS,
	.tool = "gemini",
	.missing_hint = "run `gemini` once on this machine and choose Login with Google, or use "
			"--api-key",
	.access = "access_token",
	.refresh = "refresh_token",
	.expires = "expiry_date",
	.relogin = RELOGIN,
	.token_url = GEMINI_TOKEN_URL_DEFAULT,
	.client_id = GEMINI_OAUTH_CLIENT_ID,
	.client_secret = GEMINI_OAUTH_CLIENT_SECRET,
	.form = true,
	.take = take_tokens,
	.say = &renewal,
	.rules = google_rules,
	.fake = fake_credentials,
};

int gemini_google_auth(struct up_agent_ctx *c)
{
	return up_agent_oauth_login(c, &login_file, c->in->google_token_url);
}

/* ---------------------------------------------------------------- doctor */

#define DOCTOR_FIX "run `gemini` on this machine and choose Login with Google (or use --api-key)"

static const struct up_agent_login_doctor doctor = {
	.name = "gemini login",
	.missing = "no Gemini CLI Google login",
	.missing_note = " (a login kept in the system keychain is not read)",
	.missing_fix = DOCTOR_FIX,
	.fix = DOCTOR_FIX,
	.login = "the Google login",
	.token = "the token",
};

size_t gemini_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		     struct up_agent_check *out, size_t max)
{
	(void)impl;
	return up_agent_oauth_doctor(&login_file, &doctor, in, out, max);
}
