/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Gemini CLI's Google login on the host: ~/.gemini/oauth_creds.json (what the CLI's
 * OAuth client caches: access_token, refresh_token, expiry_date in milliseconds, scope,
 * token_type, id_token) read, its access token refreshed at Google's token endpoint when it
 * is near its expiry and the file rewritten as the CLI rewrites it, the auth rules that make
 * the mitm inject the real token, and the pod's fake login. --api-key: the keyring entry
 * gemini/key injected as x-goog-api-key.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/gemini/gemini.h"
#include "bounds.h"
#include "fileio.h"
#include "hex.h"
#include "jsonrpc.h"

#define CREDS "~/.gemini/oauth_creds.json"
#define RELOGIN \
	"log in again by running `gemini` on this machine (Login with Google), or use --api-key"

struct oauth {
	json_t *doc; /* the whole file; strings wiped before it is freed */
	const char *access, *refresh;
	long long expires_ms;
};

static void oauth_done(struct oauth *o)
{
	up_json_wipe_decref(o->doc);
	*o = (struct oauth){0};
}

static int parse_oauth(struct oauth *o, char *err, size_t len)
{
	json_t *exp;

	o->access = json_string_value(json_object_get(o->doc, "access_token"));
	if (!o->access || !*o->access)
		return up_agent_failf(err, len, -EINVAL, CREDS " has no 'access_token': " RELOGIN);
	if (!up_agent_is_token(o->access))
		return up_agent_failf(err, len, -EINVAL,
				      CREDS ": 'access_token' is not a bearer token (unexpected "
					    "characters): " RELOGIN);
	o->refresh = json_string_value(json_object_get(o->doc, "refresh_token"));
	if (o->refresh && !up_agent_is_token(o->refresh))
		o->refresh = NULL;
	exp = json_object_get(o->doc, "expiry_date");
	if (!json_is_integer(exp) && !json_is_real(exp))
		return up_agent_failf(err, len, -EINVAL,
				      CREDS
				      " has no 'expiry_date' (milliseconds since 1970): " RELOGIN);
	o->expires_ms = (long long)json_number_value(exp);
	return 0;
}

/* ---------------------------------------------------------------- refresh */

/* grant_type=refresh_token&refresh_token=...&client_id=...&client_secret=..., form-encoded. */
static char *request_body(const char *refresh)
{
	char *tok = curl_easy_escape(NULL, refresh, 0),
	     *id = curl_easy_escape(NULL, GEMINI_OAUTH_CLIENT_ID, 0);
	char *body = NULL;

	if (tok && id &&
	    asprintf(&body,
		     "grant_type=refresh_token&refresh_token=%s&client_id=%s&client_secret=%s", tok,
		     id, GEMINI_OAUTH_CLIENT_SECRET) < 0)
		body = NULL;
	if (tok)
		up_free_secret(tok, strlen(tok) + 1), tok = NULL;
	curl_free(id);
	return body;
}

/* The fields of a token answer the CLI's OAuth client keeps (it drops expires_in for
 * expiry_date); refresh_token only when Google sent a new one. */
static const char *const kept_fields[] = {"access_token", "refresh_token", "scope", "token_type",
					  "id_token"};

/* Puts the new tokens into o->doc; 0 or -EIO with why. */
static int take_tokens(struct oauth *o, const struct up_agent_body *b, time_t now, char *err,
		       size_t len)
{
	json_t *ans = up_agent_body_json(b);
	json_t *in = json_object_get(ans, "expires_in");
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	const char *refresh = json_string_value(json_object_get(ans, "refresh_token"));
	int r = 0;

	if (!up_agent_is_token(access) || (refresh && !up_agent_is_token(refresh)) ||
	    !json_is_integer(in) || json_integer_value(in) <= 0)
		r = up_agent_failf(err, len, -EIO,
				   "the token endpoint's answer lacks access_token or expires_in");
	for (size_t i = 0; r == 0 && i < ELEMENTSOF(kept_fields); i++) {
		json_t *v = json_object_get(ans, kept_fields[i]);
		/* a copy: the answer's strings are wiped when it is freed */
		if (json_is_string(v) && json_object_set_new(o->doc, kept_fields[i],
							     json_string(json_string_value(v))) < 0)
			r = -ENOMEM;
	}
	if (r == 0 && json_object_set_new(o->doc, "expiry_date",
					  json_integer((json_int_t)now * 1000 +
						       json_integer_value(in) * 1000)) < 0)
		r = -ENOMEM;
	up_json_wipe_decref(ans);
	return r;
}

/* Refreshes in place: o->doc gets the new tokens and is written back to the host file with
 * the CLI's own layout (2-space JSON, 0600). 0, or -EIO with why. */
static int refresh(const char *path, const char *url, const char *ca, struct oauth *o, time_t now,
		   char *err, size_t len)
{
	struct up_agent_body b = {0};
	char *body;
	int r;

	if (!url || !*url)
		url = GEMINI_TOKEN_URL_DEFAULT;
	if (!o->refresh)
		return up_agent_failf(err, len, -EIO, CREDS " has no usable 'refresh_token'");
	if (!(body = request_body(o->refresh)))
		return -ENOMEM;
	r = up_agent_post(url, ca, "application/x-www-form-urlencoded", body, &b, err, len);
	up_free_secret(body, strlen(body));
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

/*
 * The pod's oauth_creds.json: fake tokens the CLI parses as its own (access_token,
 * refresh_token, token_type, the host's scope) and an expiry ten years out, so its OAuth
 * client never refreshes (it would only when the expiry is within five minutes, or on a 401
 * when there is no expiry). No id_token: it names the user and is signed by Google.
 */
static int fake_credentials(const struct oauth *o, time_t now, struct up_agent_prepared *p,
			    const char **out, size_t *out_len)
{
	char access[sizeof(GEMINI_FAKE_ACCESS_PREFIX) + 32] = GEMINI_FAKE_ACCESS_PREFIX;
	char refresh_tok[sizeof(GEMINI_FAKE_REFRESH_PREFIX) + 32] = GEMINI_FAKE_REFRESH_PREFIX;
	const char *scope = json_string_value(json_object_get(o->doc, "scope"));
	json_t *doc;

	if (up_random_hex(access + strlen(access), 16) < 0 ||
	    up_random_hex(refresh_tok + strlen(refresh_tok), 16) < 0)
		return -EIO;
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

static int inject_token(struct up_agent_prepared *p, const struct oauth *o)
{
	size_t n = strlen("Bearer ") + strlen(o->access) + 1;
	char *value = malloc(n);
	int r;

	if (!value)
		return -ENOMEM;
	(void)snprintf(value, n, "Bearer %s", o->access);
	r = google_rules(p, value);
	up_free_secret(value, n);
	p->expires_at = (time_t)(o->expires_ms / 1000);
	return r;
}

/* Refreshes when the token expires within the margin; a failure with time left is a warning. */
static int maybe_refresh(const struct up_agent_input *in, const char *path, struct oauth *o,
			 time_t now, struct up_agent_prepared *p, char *err, size_t err_len)
{
	long long left = o->expires_ms / 1000 - (long long)now;
	char why[512];

	if (left >= GEMINI_REFRESH_MARGIN_S)
		return 0;
	if (refresh(path, in->google_token_url, in->ca_bundle, o, now, why, sizeof(why)) >= 0)
		return 0;
	if (left > 0)
		return up_agent_warn(p,
				     "refreshing the Gemini CLI's Google token failed (%s); the "
				     "current token works for %lld more seconds: run `gemini` on "
				     "this machine to renew it",
				     why, left);
	return up_agent_failf(err, err_len, -EIO,
			      "the Google token in " CREDS " has expired and refreshing it failed "
			      "(%s): " RELOGIN,
			      why);
}

int gemini_google_auth(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	struct oauth o = {0};
	time_t now = c->in->now ? c->in->now : time(NULL);
	int r;

	if (asprintf(&path, "%s/.gemini/oauth_creds.json", c->in->home) < 0)
		return -ENOMEM;
	r = up_agent_read_json(path, CREDS, "gemini",
			       "run `gemini` once on this machine and choose Login with Google, "
			       "or use --api-key",
			       &o.doc, c->err, c->err_len);
	if (r == 0)
		r = parse_oauth(&o, c->err, c->err_len);
	if (r == 0)
		r = maybe_refresh(c->in, path, &o, now, c->p, c->err, c->err_len);
	if (r == 0)
		r = o.access ? inject_token(c->p, &o) : -ENOMEM;
	if (r == 0 && !c->in->rules_only)
		r = fake_credentials(&o, now, c->p, &c->fake, &c->fake_len);
	oauth_done(&o);
	return r;
}

/* ---------------------------------------------------------------- doctor */

#define DOCTOR_NAME "gemini login"
#define DOCTOR_FIX  "run `gemini` on this machine and choose Login with Google (or use --api-key)"

size_t gemini_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
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
	if (asprintf(&path, "%s/.gemini/oauth_creds.json", in->home) < 0) {
		up_agent_check_set(out, DOCTOR_NAME, "skip", NULL, "out of memory");
		return 1;
	}
	r = up_agent_read_json(path, CREDS, "gemini", "", &o.doc, why, sizeof(why));
	if (r == 0)
		r = parse_oauth(&o, why, sizeof(why));
	left = r == 0 ? o.expires_ms / 1000 - (long long)(in->now ? in->now : time(NULL)) : 0;
	if (r == -ENOENT)
		up_agent_check_set(out, DOCTOR_NAME, "warn", DOCTOR_FIX,
				   "no Gemini CLI Google login: %s is missing (a login kept in the "
				   "system keychain is not read)",
				   CREDS);
	else if (r < 0)
		up_agent_check_set(out, DOCTOR_NAME, "warn", DOCTOR_FIX, "%s", why);
	else if (left <= 0 && !o.refresh)
		up_agent_check_set(out, DOCTOR_NAME, "warn", DOCTOR_FIX,
				   "the Google login in %s has expired and has no refresh token",
				   CREDS);
	else if (left > 0)
		up_agent_check_set(out, DOCTOR_NAME, "ok", NULL,
				   "%s: the token lasts %lld more minutes%s", CREDS, left / 60,
				   o.refresh ? "; uplink refreshes it before it expires" : "");
	else
		up_agent_check_set(out, DOCTOR_NAME, "ok", NULL,
				   "%s: the token expired %lld minutes ago; uplink refreshes it "
				   "when a session starts",
				   CREDS, -left / 60);
	oauth_done(&o);
	return 1;
}
