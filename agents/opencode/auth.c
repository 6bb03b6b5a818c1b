/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenCode's login on the host: the mode's entry of auth.json read, an OAuth login
 * refreshed when it is near its expiry and written back as opencode writes it, the auth
 * rule that makes the mitm inject the real credential, and the pod's fake auth.json.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/opencode/opencode.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"

#define AUTH	"~/.local/share/opencode/auth.json"
#define RELOGIN "run `opencode auth login` on this machine"

/* One mode: its provider, the hosts its rule names, and how an OAuth login refreshes. */
static const struct provider {
	const char *id, *name;
	const char *key_hosts;	 /* an API key's */
	const char *oauth_hosts; /* an OAuth login's */
	const char *oauth_paths; /* NULL: any */
	const char *token_url, *client_id;
	bool form; /* the refresh is a form (else JSON) */
} providers[] = {
	[OC_ANTHROPIC] = {"anthropic", "Anthropic", "api\\.anthropic\\.com",
			  "api\\.anthropic\\.com", NULL, OC_ANTHROPIC_TOKEN_URL,
			  OC_ANTHROPIC_CLIENT_ID, false},
	[OC_OPENAI] = {"openai", "OpenAI", "api\\.openai\\.com", "chatgpt\\.com",
		       "/backend-api/codex/.*", OC_OPENAI_TOKEN_URL, OC_OPENAI_CLIENT_ID, true},
};

struct entry {
	json_t *doc; /* the whole file; wiped before it is freed */
	const struct provider *pv;
	bool oauth;
	const char *key, *access, *refresh, *account; /* borrowed from doc */
	long long expires_ms;
};

const char *oc_provider(enum oc_mode mode)
{
	return providers[mode].id;
}

static char *xdg_path(const char *env, const char *home, const char *dflt, const char *tail)
{
	const char *base = getenv(env);
	char *s = NULL;

	if (base && base[0] == '/')
		return asprintf(&s, "%s/%s", base, tail) < 0 ? NULL : s;
	return asprintf(&s, "%s/%s/%s", home, dflt, tail) < 0 ? NULL : s;
}

char *oc_auth_path(const char *home)
{
	return xdg_path("XDG_DATA_HOME", home, ".local/share", "opencode/auth.json");
}

char *oc_config_dir(const char *home)
{
	return xdg_path("XDG_CONFIG_HOME", home, ".config", "opencode");
}

/* An account id as the ChatGPT backend takes it in a header: [-_A-Za-z0-9]. */
static bool account_ok(const char *s)
{
	return s && *s && strlen(s) < 128 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
		       strlen(s);
}

static int parse_entry(struct entry *e, char *err, size_t len)
{
	json_t *o = json_object_get(e->doc, e->pv->id), *exp;
	const char *type = json_string_value(json_object_get(o, "type"));

	e->key = e->access = e->refresh = e->account = NULL;
	if (!json_is_object(o))
		return up_agent_failf(err, len, -ENOENT,
				      AUTH " has no '%s' login: run `opencode auth login` on this "
					   "machine and choose %s",
				      e->pv->id, e->pv->name);
	e->oauth = type && streq(type, "oauth");
	if (type && streq(type, "api")) {
		e->key = json_string_value(json_object_get(o, "key"));
		if (!up_agent_is_token(e->key))
			return up_agent_failf(err, len, -EINVAL,
					      AUTH ": '%s.key' is missing or not an API key "
						   "(unexpected characters): " RELOGIN,
					      e->pv->id);
		return 0;
	}
	if (!e->oauth)
		return up_agent_failf(err, len, -EINVAL,
				      AUTH ": '%s' is neither an API key nor an OAuth login "
					   "(type \"api\" or \"oauth\"): " RELOGIN,
				      e->pv->id);
	e->access = json_string_value(json_object_get(o, "access"));
	if (!up_agent_is_token(e->access))
		return up_agent_failf(
			err, len, -EINVAL,
			AUTH ": '%s.access' is missing or not a bearer token: " RELOGIN, e->pv->id);
	e->refresh = json_string_value(json_object_get(o, "refresh"));
	if (!up_agent_is_token(e->refresh))
		e->refresh = NULL;
	e->account = json_string_value(json_object_get(o, "accountId"));
	if (!account_ok(e->account))
		e->account = NULL;
	exp = json_object_get(o, "expires");
	if (!json_is_integer(exp) && !json_is_real(exp))
		return up_agent_failf(err, len, -EINVAL,
				      AUTH ": '%s.expires' (milliseconds since 1970) is missing: "
					   "" RELOGIN,
				      e->pv->id);
	e->expires_ms = (long long)json_number_value(exp);
	return 0;
}

/* ---------------------------------------------------------------- refresh */

/* The ChatGPT account of a token answer, as opencode finds it (id_token, then access). */
static char *account_of(const json_t *ans)
{
	static const char *const tokens[] = {"id_token", "access_token"};
	char *id = NULL;

	for (size_t i = 0; !id && i < ELEMENTSOF(tokens); i++) {
		json_t *c = up_agent_jwt_claims(json_string_value(json_object_get(ans, tokens[i])));
		json_t *auth = json_object_get(c, "https://api.openai.com/auth");
		const char *v = json_string_value(json_object_get(c, "chatgpt_account_id"));
		if (!v)
			v = json_string_value(json_object_get(auth, "chatgpt_account_id"));
		if (!v)
			v = json_string_value(json_object_get(
				json_array_get(json_object_get(c, "organizations"), 0), "id"));
		if (account_ok(v))
			id = strdup(v);
		up_json_wipe_decref(c);
	}
	return id;
}

/* The new login entry from the token endpoint's answer, as opencode writes it. */
static json_t *new_entry(const struct entry *e, const json_t *ans, time_t now)
{
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	const char *refresh = json_string_value(json_object_get(ans, "refresh_token"));
	json_t *in = json_object_get(ans, "expires_in");
	json_int_t secs = json_is_integer(in) ? json_integer_value(in) : e->pv->form ? 3600 : 0;
	char *account = e->pv->form ? account_of(ans) : NULL;
	const char *acct = account ? account : e->account;
	json_t *o;

	if (!up_agent_is_token(access) || (refresh && !up_agent_is_token(refresh)) || secs <= 0) {
		free(account);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:s, s:I}", "type", "oauth", "refresh",
		      refresh ? refresh : e->refresh, "access", access, "expires",
		      (json_int_t)now * 1000 + secs * 1000);
	if (o && acct && json_object_set_new(o, "accountId", json_string(acct)) < 0)
		o = (up_json_wipe_decref(o), NULL);
	free(account);
	return o;
}

/* The answer into e->doc's entry (the spent tokens wiped), read back; 0 or -EIO with why. */
static int take_entry(void *login, const struct up_agent_body *b, time_t now, char *err, size_t len)
{
	struct entry *e = login;
	json_t *ans = up_agent_body_json(b);
	json_t *o = new_entry(e, ans, now);

	up_json_wipe_decref(ans);
	if (!o)
		return up_agent_failf(err, len, -EIO,
				      "the token endpoint's answer lacks access_token or "
				      "expires_in");
	/* the spent tokens are wiped before jansson frees them */
	up_json_wipe(json_object_get(e->doc, e->pv->id));
	if (json_object_set_new(e->doc, e->pv->id, o) < 0)
		return -ENOMEM;
	return parse_entry(e, err, len);
}

/* Refreshes an OAuth login that expires within UP_AGENT_REFRESH_MARGIN_S and writes the file
 * back (the old refresh token is spent). */
static int renew(const struct up_agent_input *in, const char *path, struct entry *e, time_t now,
		 struct up_agent_prepared *p, char *err, size_t err_len)
{
	const char *const request[] = {"grant_type", "refresh_token", "refresh_token",
				       e->refresh,   "client_id",     e->pv->client_id,
				       NULL};
	char field[64], who[64];
	/* the test's (or the knob's) token endpoint of the provider: Anthropic's or OpenAI's */
	const struct up_agent_refresh rf = {
		.path = path,
		.what = AUTH,
		.field = field,
		.written = "the refreshed login",
		.refresh = e->refresh,
		.url = e->pv == &providers[OC_OPENAI] ? in->openai_token_url : in->token_url,
		.default_url = e->pv->token_url,
		.ca = in->ca_bundle,
		.form = e->pv->form,
		.request = request,
		.take = take_entry,
		.login = e,
		.doc = e->doc,
	};
	const struct up_agent_renewal say = {
		.token = who, .expired = who, .renew = RELOGIN, .relogin = RELOGIN};

	if (!e->oauth)
		return 0;
	(void)snprintf(field, sizeof(field), "%s.refresh", e->pv->id);
	(void)snprintf(who, sizeof(who), "opencode's %s login", e->pv->name);
	return up_agent_renew(p, &rf, &say, e->expires_ms / 1000 - (long long)now, now, err,
			      err_len);
}

/* ---------------------------------------------------------------- products */

/*
 * The methods the auth rule allows: those the APIs use (GET, POST, DELETE; HEAD for
 * probes), never TRACE, whose answer would echo the injected credential.
 */
static int auth_rule(struct up_agent_prepared *p, const struct entry *e)
{
	json_t *h = json_object(), *rule;
	char *bearer = NULL;
	int r = h ? 0 : -ENOMEM;

	if (r == 0 && !e->oauth && e->pv == &providers[OC_ANTHROPIC])
		r = json_object_set_new(h, "x-api-key", json_string(e->key));
	else if (r == 0 && (bearer = up_agent_bearer(e->oauth ? e->access : e->key)))
		r = json_object_set_new(h, "Authorization", json_string(bearer));
	else
		r = -ENOMEM;
	if (r == 0 && e->oauth && e->pv == &providers[OC_ANTHROPIC])
		r = json_object_set_new(h, "anthropic-beta", json_string(OC_ANTHROPIC_OAUTH_BETA));
	if (r == 0 && e->oauth && e->account)
		r = json_object_set_new(h, "ChatGPT-Account-Id", json_string(e->account));
	if (bearer)
		up_free_secret(bearer, strlen(bearer));
	if (r < 0) {
		up_json_wipe_decref(h);
		return r;
	}
	rule = json_pack("{s:s, s:[s], s:[s,s,s,s], s:{s:o}}", "name", "opencode-auth", "hosts",
			 e->oauth ? e->pv->oauth_hosts : e->pv->key_hosts, "methods", "GET", "HEAD",
			 "POST", "DELETE", "inject", "headers", h);
	if (rule && e->oauth && e->pv->oauth_paths)
		(void)json_object_set_new(rule, "paths", json_pack("[s]", e->pv->oauth_paths));
	if (!rule)
		return -ENOMEM;
	p->expires_at = e->oauth ? (time_t)(e->expires_ms / 1000) : 0;
	return up_agent_set_auth_rules(p, json_pack("{s:[o]}", "rules", rule));
}

/*
 * The pod's auth.json: only the mode's provider (the other logins stay home), with
 * placeholders. An API key stays an API key; an OAuth login stays one, with an expiry
 * ten years out so that opencode in the pod never refreshes it, and no account id (the
 * mitm injects it).
 */
static int fake_auth(const struct entry *e, time_t now, struct up_agent_prepared *p,
		     struct oc_login *login)
{
	const char *a = NULL, *b = NULL;
	json_t *o;

	if (up_agent_fake_token(p, OC_FAKE_PREFIX, &a) < 0 ||
	    up_agent_fake_token(p, OC_FAKE_PREFIX, &b) < 0)
		return -ENOMEM;
	if (e->oauth)
		o = json_pack("{s:s, s:s, s:s, s:I}", "type", "oauth", "refresh", b, "access", a,
			      "expires", ((json_int_t)now + OC_FAKE_LIFETIME_S) * 1000);
	else
		o = json_pack("{s:s, s:s}", "type", "api", "key", a);
	login->fake = up_agent_dump_json(p, o ? json_pack("{s:o}", e->pv->id, o) : NULL,
					 &login->fake_len);
	login->fake_access = e->oauth ? a : NULL;
	return login->fake ? 0 : -ENOMEM;
}

int oc_auth(const struct up_agent_input *in, enum oc_mode mode, struct up_agent_prepared *p,
	    struct oc_login *login, char *err, size_t err_len)
{
	_cleanup_(freep) char *path = oc_auth_path(in->home);
	struct entry e = {.pv = &providers[mode]};
	time_t now = in->now ? in->now : time(NULL);
	int r;

	*login = (struct oc_login){.mode = mode};
	if (!path)
		return -ENOMEM;
	r = up_agent_read_json(path, AUTH, "opencode",
			       "run `opencode auth login` on this machine and log in", &e.doc, err,
			       err_len);
	if (r == 0)
		r = parse_entry(&e, err, err_len);
	if (r == 0)
		r = renew(in, path, &e, now, p, err, err_len);
	if (r == 0)
		r = auth_rule(p, &e);
	login->oauth = e.oauth;
	if (r == 0 && !in->rules_only)
		r = fake_auth(&e, now, p, login);
	up_json_wipe_decref(e.doc);
	return r;
}

/* ---------------------------------------------------------------- doctor */

/* One provider's part of the doctor line; false when it is stale (a warning). */
static bool doctor_entry(struct entry *e, time_t now, char *buf, size_t len)
{
	char why[512] = "";
	long long left;
	int r = parse_entry(e, why, sizeof(why));

	if (r == -ENOENT)
		return snprintf(buf, len, "%s: none", e->pv->id), true;
	if (r < 0)
		return snprintf(buf, len, "%s", why), false;
	if (!e->oauth)
		return snprintf(buf, len, "%s: an API key", e->pv->id), true;
	left = e->expires_ms / 1000 - (long long)now;
	if (left <= 0 && !e->refresh)
		return snprintf(buf, len,
				"%s: the OAuth login has expired and has no refresh token",
				e->pv->id),
		       false;
	if (left > 0)
		return snprintf(buf, len, "%s: an OAuth login whose token lasts %lld more minutes",
				e->pv->id, left / 60),
		       true;
	return snprintf(buf, len,
			"%s: an OAuth login whose token expired %lld minutes ago (uplink "
			"refreshes it when a session starts)",
			e->pv->id, -left / 60),
	       true;
}

size_t oc_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		 struct up_agent_check *out, size_t max)
{
	_cleanup_(freep) char *path = oc_auth_path(in->home);
	struct entry e = {0};
	char why[512] = "", part[2][512];
	bool ok[2], any;
	int r;

	(void)impl;
	if (max < 1)
		return 0;
	if (!path)
		return up_agent_check_set(out, "opencode login", "skip", NULL, "out of memory"), 1;
	r = up_agent_read_json(path, AUTH, "opencode", "", &e.doc, why, sizeof(why));
	if (r == -ENOENT) {
		up_agent_check_set(out, "opencode login", "warn",
				   "run `opencode auth login` on this machine",
				   "no opencode login: " AUTH " is missing");
		return 1;
	}
	if (r < 0)
		return up_agent_check_set(out, "opencode login", "warn",
					  "fix or move it aside, then "
					  "run `opencode auth login`",
					  "%s", why),
		       1;
	for (size_t i = 0; i < ELEMENTSOF(providers); i++) {
		e.pv = &providers[i];
		ok[i] = doctor_entry(&e, in->now ? in->now : time(NULL), part[i], sizeof(part[i]));
	}
	any = json_is_object(json_object_get(e.doc, "anthropic")) ||
	      json_is_object(json_object_get(e.doc, "openai"));
	up_json_wipe_decref(e.doc);
	if (!any)
		up_agent_check_set(out, "opencode login", "warn",
				   "run `opencode auth login` and choose Anthropic or OpenAI",
				   AUTH " has neither an Anthropic nor an OpenAI login");
	else
		up_agent_check_set(out, "opencode login", ok[0] && ok[1] ? "ok" : "warn",
				   ok[0] && ok[1] ? NULL : "run `opencode auth login` again",
				   AUTH ": %s; %s", part[0], part[1]);
	return 1;
}
