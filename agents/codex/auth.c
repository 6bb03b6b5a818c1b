/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Codex's login on the host: ~/.codex/auth.json read (a ChatGPT login's tokens, or an API
 * key), the access token (a JWT whose exp says when it ends) refreshed on the host before
 * it expires and the file written back as codex writes it, the auth rules that make the
 * mitm inject the real credential, and the fake auth.json that lets codex in the pod start
 * logged in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/codex/codex.h"
#include "bounds.h"
#include "fileio.h"
#include "hex.h"

#define RELOGIN "run `codex login` on this machine, or use --api-key"

/* The hosts the rules name: the ChatGPT backend (its API and WebSocket) and the API. */
static const char chatgpt_hosts[] = "chatgpt\\.com";
static const char chatgpt_paths[] = "/backend-api/.*";
static const char api_hosts[] = "api\\.openai\\.com";
static const char models_path[] = "/backend-api/codex/models";
/* The methods codex uses (GET for the WebSocket upgrade and lists, POST for turns, DELETE
 * for cloud tasks; HEAD for probes), never TRACE, whose answer would echo the token. */
static const char methods[] = "[\"GET\", \"HEAD\", \"POST\", \"DELETE\"]";

struct login {
	json_t *doc;	/* the whole file; strings wiped before it is freed */
	json_t *tokens; /* doc.tokens (borrowed) */
	const char *access, *refresh, *account;
	long long exp;
};

static void login_done(struct login *l)
{
	up_json_wipe_decref(l->doc);
	*l = (struct login){0};
}

/* ---------------------------------------------------------------- JWTs */

static char *b64url_encode(const char *s, size_t n)
{
	static const char set[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *out = malloc(n * 4 / 3 + 4);
	unsigned acc = 0;
	int bits = 0;
	size_t k = 0;

	for (size_t i = 0; out && i < n; i++) {
		acc = (acc << 8) | (unsigned char)s[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[k++] = set[(acc >> bits) & 0x3f];
		}
	}
	if (out && bits > 0)
		out[k++] = set[(acc << (6 - bits)) & 0x3f];
	if (out)
		out[k] = '\0';
	return out;
}

/* An unsigned JWT of `claims` (consumed), as codex parses its tokens: it decodes the
 * payload and checks no signature. */
static char *fake_jwt(json_t *claims)
{
	static const char header[] = "{\"alg\":\"none\",\"typ\":\"JWT\"}";
	char *text = claims ? json_dumps(claims, JSON_COMPACT) : NULL;
	char *h = b64url_encode(header, strlen(header));
	char *b = text ? b64url_encode(text, strlen(text)) : NULL;
	char *jwt = NULL;

	json_decref(claims);
	if (h && b && asprintf(&jwt, "%s.%s.%s", h, b, "uplink-placeholder") < 0)
		jwt = NULL;
	free(text);
	free(h);
	free(b);
	return jwt;
}

/* ---------------------------------------------------------------- the login file */

static int read_login(const struct up_agent_input *in, struct login *l, char **path, char *err,
		      size_t len)
{
	if (asprintf(path, "%s/.codex/auth.json", in->home) < 0) {
		*path = NULL;
		(void)snprintf(err, len, "%s: out of memory", CODEX_AUTH);
		return -ENOMEM;
	}
	return up_agent_read_json(*path, CODEX_AUTH, "codex login",
				  "run `codex login` on this machine (with "
				  "cli_auth_credentials_store = \"file\" in ~/.codex/config.toml), "
				  "or use --api-key",
				  &l->doc, err, len);
}

/* The ChatGPT account id: tokens.account_id, else the id token's claim. NULL: none. */
static const char *account_id(struct login *l)
{
	const char *a = json_string_value(json_object_get(l->tokens, "account_id"));
	json_t *claims;

	if (a && *a)
		return a;
	claims = up_agent_jwt_claims(json_string_value(json_object_get(l->tokens, "id_token")));
	a = json_string_value(json_object_get(
		json_object_get(claims, "https://api.openai.com/auth"), "chatgpt_account_id"));
	if (a && up_agent_is_token(a))
		(void)json_object_set_new(l->tokens, "account_id", json_string(a));
	up_json_wipe_decref(claims);
	return json_string_value(json_object_get(l->tokens, "account_id"));
}

static int parse_login(struct login *l, char *err, size_t len)
{
	l->access = l->refresh = l->account = NULL;
	l->tokens = json_object_get(l->doc, "tokens");
	if (!json_is_object(l->tokens))
		return up_agent_failf(err, len, -EINVAL,
				      CODEX_AUTH " holds no ChatGPT login ('tokens'): " RELOGIN);
	l->access = json_string_value(json_object_get(l->tokens, "access_token"));
	if (!up_agent_is_token(l->access))
		return up_agent_failf(err, len, -EINVAL,
				      CODEX_AUTH " has no usable 'tokens.access_token': " RELOGIN);
	l->exp = up_agent_jwt_exp(l->access);
	if (!l->exp)
		return up_agent_failf(err, len, -EINVAL,
				      CODEX_AUTH ": 'tokens.access_token' is not a JWT with an "
						 "expiry: " RELOGIN);
	l->refresh = json_string_value(json_object_get(l->tokens, "refresh_token"));
	if (l->refresh && !up_agent_is_token(l->refresh))
		l->refresh = NULL;
	l->account = account_id(l);
	if (l->account && !up_agent_is_token(l->account))
		return up_agent_failf(err, len, -EINVAL,
				      CODEX_AUTH ": 'tokens.account_id' has unexpected "
						 "characters: " RELOGIN);
	return 0;
}

/* ---------------------------------------------------------------- refresh */

static int rfc3339(time_t t, char *buf, size_t len)
{
	struct tm tm;

	return gmtime_r(&t, &tm) && strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) ? 0 : -EINVAL;
}

/* The answer's tokens into l->doc, as codex's persist_tokens does, and read back; 0 or -EIO
 * with why. */
static int take_tokens(void *login, const struct up_agent_body *b, time_t now, char *err,
		       size_t len)
{
	static const char *const keys[] = {"id_token", "access_token", "refresh_token"};
	struct login *l = login;
	json_t *ans = up_agent_body_json(b);
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	char stamp[32];
	int r = 0, k;

	if (!up_agent_is_token(access) || !up_agent_jwt_exp(access))
		r = up_agent_failf(
			err, len, -EIO,
			"the token endpoint's answer has no access_token with an expiry");
	for (size_t i = 0; r == 0 && i < ELEMENTSOF(keys); i++) {
		const char *v = json_string_value(json_object_get(ans, keys[i]));
		if (v && up_agent_is_token(v) &&
		    up_agent_set_secret(l->tokens, keys[i], json_string(v)) < 0)
			r = -ENOMEM;
	}
	if (r == 0 && (rfc3339(now, stamp, sizeof(stamp)) < 0 ||
		       json_object_set_new(l->doc, "last_refresh", json_string(stamp)) < 0))
		r = -ENOMEM;
	up_json_wipe_decref(ans);
	k = parse_login(l, err, len); /* the borrowed pointers may be stale */
	return r < 0 ? r : k;
}

static const struct up_agent_renewal renewal = {
	.token = "the Codex access token",
	.expired = "the Codex access token",
	.renew = "run `codex login` on this machine",
	.relogin = RELOGIN,
};

/* Refreshes l in place when it is near its expiry, writing the host file back. */
static int maybe_refresh(const struct up_agent_input *in, const char *path, struct login *l,
			 struct up_agent_prepared *p, char *err, size_t len)
{
	time_t now = in->now ? in->now : time(NULL);
	const char *const request[] = {"client_id",
				       CODEX_OAUTH_CLIENT_ID,
				       "grant_type",
				       "refresh_token",
				       "refresh_token",
				       l->refresh,
				       NULL};
	const struct up_agent_refresh rf = {
		.path = path,
		.what = CODEX_AUTH,
		.field = "tokens.refresh_token",
		.written = "the refreshed token",
		.refresh = l->refresh,
		.url = in->openai_token_url,
		.default_url = CODEX_TOKEN_URL_DEFAULT,
		.ca = in->ca_bundle,
		.request = request,
		.take = take_tokens,
		.login = l,
		.doc = l->doc,
	};

	return up_agent_renew(p, &rf, &renewal, l->exp - (long long)now, now, err, len);
}

/* ---------------------------------------------------------------- products */

/* One rule injecting `headers` (consumed) on `hosts` (and `path` when not NULL). */
static json_t *auth_rule(const char *name, const char *hosts, const char *path,
			 const char *method_list, json_t *headers)
{
	json_t *m = json_loads(method_list, 0, NULL), *rule = NULL;

	if (m && headers) /* "o" takes m, even on failure; "O" leaves headers ours */
		rule = json_pack("{s:s, s:[s], s:o, s:{s:O}}", "name", name, "hosts", hosts,
				 "methods", m, "inject", "headers", headers);
	else
		json_decref(m);
	if (!rule) {
		up_json_wipe_decref(headers);
		return NULL;
	}
	json_decref(headers); /* the rule holds it now: not wiped */
	if (path && json_object_set_new(rule, "paths", json_pack("[s]", path)) < 0) {
		up_json_wipe_decref(rule);
		return NULL;
	}
	return rule;
}

/* "Bearer <token>" as a new JSON string; the C copy is wiped. */
static json_t *bearer(const char *token)
{
	char *v = up_agent_bearer(token);
	json_t *s = v ? json_string(v) : NULL;

	if (v)
		up_free_secret(v, strlen(v) + 1);
	return s;
}

/* The claims of the pod's id token: the host's identity (email, plan, account), which
 * codex shows and routes by, and no secret; an expiry ten years out. */
static json_t *fake_id_claims(const struct login *l, time_t now)
{
	json_t *host =
		up_agent_jwt_claims(json_string_value(json_object_get(l->tokens, "id_token")));
	json_t *auth = json_object_get(host, "https://api.openai.com/auth");
	json_t *out = json_pack("{s:I}", "exp", (json_int_t)(now + CODEX_FAKE_LIFETIME_S));
	json_t *a = json_object();
	/* copies, not references: the host's claims are wiped */
	static const char *const keep[] = {"chatgpt_plan_type", "chatgpt_user_id", "user_id",
					   "chatgpt_account_id"};

	for (size_t i = 0; a && i < ELEMENTSOF(keep); i++)
		if (json_is_string(json_object_get(auth, keep[i])))
			(void)json_object_set_new(a, keep[i],
						  json_deep_copy(json_object_get(auth, keep[i])));
	if (l->account && a)
		(void)json_object_set_new(a, "chatgpt_account_id", json_string(l->account));
	if (out && json_is_string(json_object_get(host, "email")))
		(void)json_object_set_new(out, "email",
					  json_deep_copy(json_object_get(host, "email")));
	if (out && a)
		(void)json_object_set_new(out, "https://api.openai.com/auth", a);
	else
		json_decref(a);
	up_json_wipe_decref(host);
	return out;
}

static int keep_doc(struct up_agent_prepared *p, json_t *doc, const char **out, size_t *out_len)
{
	*out = up_agent_dump_json(p, doc, out_len);
	return *out ? 0 : -ENOMEM;
}

/* The pod's auth.json for a ChatGPT login: the account id (codex checks it against the
 * backend's account list) and fake tokens that last ten years. */
static int fake_chatgpt(const struct login *l, time_t now, struct up_agent_prepared *p,
			const char **out, size_t *out_len)
{
	char hex[33], stamp[32];
	json_t *aclaims = json_pack("{s:I, s:s}", "exp", (json_int_t)(now + CODEX_FAKE_LIFETIME_S),
				    "uplink", "placeholder");
	char *id = fake_jwt(fake_id_claims(l, now)), *access = fake_jwt(aclaims), *refresh = NULL;
	json_t *doc = NULL;

	if (up_random_hex(hex, 16) == 0 && rfc3339(now, stamp, sizeof(stamp)) == 0 &&
	    asprintf(&refresh, "%s-%s", CODEX_PLACEHOLDER, hex) < 0)
		refresh = NULL;
	if (id && access && refresh)
		doc = json_pack("{s:s, s:n, s:{s:s, s:s, s:s, s:s?}, s:s}", "auth_mode", "chatgpt",
				"OPENAI_API_KEY", "tokens", "id_token", id, "access_token", access,
				"refresh_token", refresh, "account_id", l->account, "last_refresh",
				stamp);
	free(id);
	free(access);
	free(refresh);
	return doc ? keep_doc(p, doc, out, out_len) : -ENOMEM;
}

int codex_chatgpt_auth(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	struct login l = {0};
	json_t *h;
	int r = read_login(c->in, &l, &path, c->err, c->err_len);

	if (r == 0)
		r = parse_login(&l, c->err, c->err_len);
	if (r == 0)
		r = maybe_refresh(c->in, path, &l, c->p, c->err, c->err_len);
	if (r == 0) {
		h = json_pack("{s:o}", "Authorization", bearer(l.access));
		if (h && l.account &&
		    json_object_set_new(h, "ChatGPT-Account-Id", json_string(l.account)) < 0) {
			up_json_wipe_decref(h);
			r = -ENOMEM;
		}
		if (r == 0)
			r = up_agent_set_auth_rules(
				c->p, json_pack("{s:[o]}", "rules",
						auth_rule("codex-chatgpt-auth", chatgpt_hosts,
							  chatgpt_paths, methods, h)));
		c->p->expires_at = (time_t)l.exp;
	}
	if (r == 0 && !c->in->rules_only)
		r = fake_chatgpt(&l, c->in->now ? c->in->now : time(NULL), c->p, &c->fake,
				 &c->fake_len);
	login_done(&l);
	return r;
}

int codex_api_key_auth(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	struct login l = {0};
	const char *key = NULL;
	json_t *h;
	int r = read_login(c->in, &l, &path, c->err, c->err_len);

	/* no auth.json is fine here: the key comes from the keyring then */
	if (r == -ENOENT)
		r = 0;
	key = json_string_value(json_object_get(l.doc, "OPENAI_API_KEY"));
	if (r == 0 && key && !up_agent_is_token(key))
		r = up_agent_failf(c->err, c->err_len, -EINVAL,
				   CODEX_AUTH ": OPENAI_API_KEY has unexpected characters: run "
					      "`codex login --with-api-key` again");
	if (r == 0) {
		h = json_pack("{s:o}", "Authorization",
			      key ? bearer(key) : json_string("Bearer {{keyring:openai:key}}"));
		/* codex also lists its models at chatgpt.com with the key (api_key_model_discovery)
		 */
		r = up_agent_set_auth_rules(
			c->p, json_pack("{s:[o,o]}", "rules",
					auth_rule("codex-api-key-auth", api_hosts, NULL, methods,
						  json_deep_copy(h)),
					auth_rule("codex-api-key-models", chatgpt_hosts,
						  models_path, "[\"GET\"]", h)));
		c->p->expires_at = 0;
	}
	login_done(&l);
	if (r == 0 && !c->in->rules_only)
		r = keep_doc(c->p,
			     json_pack("{s:s, s:s, s:n, s:n}", "auth_mode", "apikey",
				       "OPENAI_API_KEY", CODEX_PLACEHOLDER, "tokens",
				       "last_refresh"),
			     &c->fake, &c->fake_len);
	return r;
}

/* ---------------------------------------------------------------- doctor */

static const struct up_agent_login_doctor doctor = {
	.name = "codex login",
	.missing = "no Codex login",
	.missing_note = "",
	.missing_fix = "run `codex login` on this machine (or store a key in keyring openai/key "
		       "and use --api-key)",
	.fix = "run `codex login` again",
	.login = "the Codex login",
	.token = "the access token",
};

size_t codex_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		    struct up_agent_check *out, size_t max)
{
	_cleanup_(freep) char *path = NULL;
	struct login l = {0};
	char why[512] = "";
	long long left;
	int r;

	(void)impl;
	if (max < 1)
		return 0;
	r = read_login(in, &l, &path, why, sizeof(why));
	if (r == 0 && json_is_string(json_object_get(l.doc, "OPENAI_API_KEY")) &&
	    !json_is_object(json_object_get(l.doc, "tokens"))) {
		up_agent_check_set(out, "codex login", "ok", NULL,
				   "%s holds an API key: use `uplink run codex --api-key`",
				   CODEX_AUTH);
		login_done(&l);
		return 1;
	}
	if (r == 0)
		r = parse_login(&l, why, sizeof(why));
	left = r == 0 ? l.exp - (long long)(in->now ? in->now : time(NULL)) : 0;
	up_agent_doctor_login(out, &doctor, CODEX_AUTH, r, why, left, l.refresh);
	login_done(&l);
	return 1;
}
