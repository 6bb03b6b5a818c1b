/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agents' OAuth logins share: the refresh request (JSON or a form), its POST and
 * the host file written back, what is said when it fails (a warning while the token still
 * works), the placeholders of the pod's fake login and the doctor's words for a login.
 * The logins' own fields and files stay with each agent.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/agent.h"
#include "fileio.h"
#include "hex.h"
#include "jsonrpc.h"

/* ---------------------------------------------------------------- the request */

static char *json_request(const char *const *fields)
{
	json_t *req = json_object();
	char *s = NULL;
	bool ok = req != NULL;

	for (size_t i = 0; ok && fields[i]; i += 2)
		ok = json_object_set_new(req, fields[i], json_string(fields[i + 1])) == 0;
	if (ok)
		s = json_dumps(req, JSON_COMPACT);
	up_json_wipe_decref(req);
	return s;
}

/* name=value&...: the values escaped as libcurl escapes them; the copies wiped. */
static char *form_request(const char *const *fields)
{
	size_t len = 1, used = 0;
	char *esc[32] = {NULL}, *s = NULL;
	size_t n = 0;
	bool ok = true;

	for (; ok && fields[2 * n]; n++) {
		ok = n < ELEMENTSOF(esc) && fields[2 * n + 1] &&
		     (esc[n] = curl_easy_escape(NULL, fields[2 * n + 1], 0));
		if (ok)
			len += strlen(fields[2 * n]) + 1 + strlen(esc[n]) + 1;
	}
	if (ok && (s = malloc(len)))
		for (size_t i = 0; i < n; i++)
			used += (size_t)snprintf(s + used, len - used, "%s%s=%s", i ? "&" : "",
						 fields[2 * i], esc[i]);
	for (size_t i = 0; i < ELEMENTSOF(esc) && esc[i]; i++) {
		explicit_bzero(esc[i], strlen(esc[i]));
		curl_free(esc[i]);
	}
	return s;
}

char *up_agent_token_request(const char *const *fields, bool form)
{
	return form ? form_request(fields) : json_request(fields);
}

char *up_agent_bearer(const char *token)
{
	size_t n = strlen("Bearer ") + (token ? strlen(token) : 0) + 1;
	char *v = token ? malloc(n) : NULL;

	if (v)
		(void)snprintf(v, n, "Bearer %s", token);
	return v;
}

int up_agent_fake_token(struct up_agent_prepared *p, const char *prefix, const char **out)
{
	char hex[33];

	if (up_random_hex(hex, 16) < 0)
		return -EIO;
	*out = up_agent_printf(p, "%s%s", prefix, hex);
	return *out ? 0 : -ENOMEM;
}

/* ---------------------------------------------------------------- the refresh */

int up_agent_refresh(const struct up_agent_refresh *rf, time_t now, char *err, size_t len)
{
	const char *url = rf->url && *rf->url ? rf->url : rf->default_url;
	struct up_agent_body b = {0};
	char *req;
	int r;

	if (!rf->refresh)
		return up_agent_failf(err, len, -EIO, "%s has no usable '%s'", rf->what, rf->field);
	if (!(req = up_agent_token_request(rf->request, rf->form)))
		return -ENOMEM;
	r = up_agent_post(url, rf->ca,
			  rf->form ? "application/x-www-form-urlencoded" : "application/json", req,
			  &b, err, len);
	up_free_secret(req, strlen(req));
	if (r == 0)
		r = rf->take(rf->login, &b, now, err, len);
	up_agent_body_done(&b);
	if (r == 0 && (r = up_agent_write_json(rf->path, rf->doc)) < 0)
		r = up_agent_failf(err, len, r, "cannot write %s to %s: %s", rf->written, rf->what,
				   strerror(-r));
	return r;
}

int up_agent_renew(struct up_agent_prepared *p, const struct up_agent_refresh *rf,
		   const struct up_agent_renewal *say, long long left, time_t now, char *err,
		   size_t len)
{
	char why[512] = "";

	if (left >= UP_AGENT_REFRESH_MARGIN_S)
		return 0;
	if (up_agent_refresh(rf, now, why, sizeof(why)) >= 0)
		return 0;
	if (left > 0)
		return up_agent_warn(p,
				     "refreshing %s failed (%s); the current token works for %lld "
				     "more seconds: %s to renew it",
				     say->token, why, left, say->renew);
	return up_agent_failf(err, len, -EIO,
			      "%s in %s has expired and refreshing it failed (%s): %s",
			      say->expired, rf->what, why, say->relogin);
}

/* ---------------------------------------------------------------- doctor */

void up_agent_doctor_login(struct up_agent_check *out, const struct up_agent_login_doctor *d,
			   const char *what, int r, const char *why, long long left, bool refresh)
{
	if (r == -ENOENT)
		up_agent_check_set(out, d->name, "warn", d->missing_fix, "%s: %s is missing%s",
				   d->missing, what, d->missing_note);
	else if (r < 0)
		up_agent_check_set(out, d->name, "warn", d->fix, "%s", why);
	else if (left <= 0 && !refresh)
		up_agent_check_set(out, d->name, "warn", d->fix,
				   "%s in %s has expired and has no refresh token", d->login, what);
	else if (left > 0)
		up_agent_check_set(out, d->name, "ok", NULL, "%s: %s lasts %lld more minutes%s",
				   what, d->token, left / 60,
				   refresh ? "; uplink refreshes it before it expires" : "");
	else
		up_agent_check_set(out, d->name, "ok", NULL,
				   "%s: %s expired %lld minutes ago; uplink refreshes it when a "
				   "session starts",
				   what, d->token, -left / 60);
}

/* ---------------------------------------------------------------- a login file */

int up_agent_oauth_parse(const struct up_agent_oauth_file *f, struct up_agent_oauth *o, char *err,
			 size_t len)
{
	/* "claudeAiOauth." before each field's name in messages */
	const char *in = f->object ? f->object : "", *dot = f->object ? "." : "";
	json_t *exp;

	o->access = o->refresh = NULL;
	o->obj = f->object ? json_object_get(o->doc, f->object) : o->doc;
	if (!json_is_object(o->obj))
		return up_agent_failf(err, len, -EINVAL, "%s has no '%s' object: %s", f->what, in,
				      f->relogin);
	o->access = json_string_value(json_object_get(o->obj, f->access));
	if (!o->access || !*o->access)
		return up_agent_failf(err, len, -EINVAL, "%s has no '%s%s%s': %s", f->what, in, dot,
				      f->access, f->relogin);
	if (!up_agent_is_token(o->access))
		return up_agent_failf(err, len, -EINVAL,
				      "%s: '%s%s%s' is not a bearer token (unexpected "
				      "characters): %s",
				      f->what, in, dot, f->access, f->relogin);
	o->refresh = json_string_value(json_object_get(o->obj, f->refresh));
	if (o->refresh && !up_agent_is_token(o->refresh))
		o->refresh = NULL;
	exp = json_object_get(o->obj, f->expires);
	if (!json_is_integer(exp) && !json_is_real(exp))
		return up_agent_failf(err, len, -EINVAL,
				      "%s has no '%s%s%s' (milliseconds since 1970): %s", f->what,
				      in, dot, f->expires, f->relogin);
	o->expires_ms = (long long)json_number_value(exp);
	return 0;
}

int up_agent_oauth_read(const struct up_agent_oauth_file *f, const char *home,
			struct up_agent_oauth *o, char *err, size_t len)
{
	int r;

	*o = (struct up_agent_oauth){0};
	if (asprintf(&o->path, "%s/%s", home, f->file) < 0) {
		o->path = NULL;
		return -ENOMEM;
	}
	r = up_agent_read_json(o->path, f->what, f->tool, f->missing_hint, &o->doc, err, len);
	return r < 0 ? r : up_agent_oauth_parse(f, o, err, len);
}

void up_agent_oauth_done(struct up_agent_oauth *o)
{
	up_json_wipe_decref(o->doc);
	free(o->path);
	*o = (struct up_agent_oauth){0};
}

/* Refreshes o in place when it is near its expiry, writing the host file back. */
static int oauth_renew(const struct up_agent_oauth_file *f, struct up_agent_oauth *o,
		       const char *url, const char *ca, struct up_agent_prepared *p, time_t now,
		       char *err, size_t len)
{
	/* the standard order (RFC 6749 6); no client_secret when there is none */
	const char *request[] = {"grant_type",	  "refresh_token",  "refresh_token",
				 o->refresh,	  "client_id",	    f->client_id,
				 "client_secret", f->client_secret, NULL};
	char field[128];
	const struct up_agent_refresh rf = {
		.path = o->path,
		.what = f->what,
		.field = field,
		.written = "the refreshed token",
		.refresh = o->refresh,
		.url = url,
		.default_url = f->token_url,
		.ca = ca,
		.form = f->form,
		.request = request,
		.take = f->take,
		.login = o,
		.doc = o->doc,
	};

	if (!f->client_secret)
		request[6] = NULL;
	(void)snprintf(field, sizeof(field), "%s%s%s", f->object ? f->object : "",
		       f->object ? "." : "", f->refresh);
	return up_agent_renew(p, &rf, f->say, o->expires_ms / 1000 - (long long)now, now, err, len);
}

static int oauth_inject(const struct up_agent_oauth_file *f, struct up_agent_prepared *p,
			const struct up_agent_oauth *o)
{
	char *value = up_agent_bearer(o->access);
	int r;

	if (!value)
		return -ENOMEM;
	r = f->rules(p, value);
	up_free_secret(value, strlen(value) + 1);
	p->expires_at = (time_t)(o->expires_ms / 1000);
	return r;
}

int up_agent_oauth_login(struct up_agent_ctx *c, const struct up_agent_oauth_file *f,
			 const char *url)
{
	struct up_agent_oauth o;
	time_t now = c->in->now ? c->in->now : time(NULL);
	int r = up_agent_oauth_read(f, c->in->home, &o, c->err, c->err_len);

	if (r == 0)
		r = oauth_renew(f, &o, url, c->in->ca_bundle, c->p, now, c->err, c->err_len);
	if (r == 0)
		r = o.access ? oauth_inject(f, c->p, &o) : -ENOMEM;
	if (r == 0 && !c->in->rules_only)
		r = f->fake(&o, now, c->p, &c->fake, &c->fake_len);
	up_agent_oauth_done(&o);
	return r;
}

size_t up_agent_oauth_doctor(const struct up_agent_oauth_file *f,
			     const struct up_agent_login_doctor *d, const struct up_agent_input *in,
			     struct up_agent_check *out, size_t max)
{
	struct up_agent_oauth o;
	char why[512] = "";
	long long left;
	int r;

	if (max < 1)
		return 0;
	r = up_agent_oauth_read(f, in->home, &o, why, sizeof(why));
	if (r == -ENOMEM && !o.path) {
		up_agent_check_set(out, d->name, "skip", NULL, "out of memory");
		return 1;
	}
	left = r == 0 ? o.expires_ms / 1000 - (long long)(in->now ? in->now : time(NULL)) : 0;
	up_agent_doctor_login(out, d, f->what, r, why, left, o.refresh);
	up_agent_oauth_done(&o);
	return 1;
}
