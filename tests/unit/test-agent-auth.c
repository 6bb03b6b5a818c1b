/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agents' OAuth logins share (agents/agent-auth.c): the refresh request in both
 * encodings, the placeholders, a refresh against a one-shot local endpoint (the request it
 * sent, the answer taken, the file written back), what a failed refresh says with and
 * without time left, and the doctor's line for each state of a login.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/agent.h"
#include "fileio.h"

#define NOW 1700000000

static const char *const json_fields[] = {
	"grant_type", "refresh_token", "refresh_token", "rt-1", "client_id", "app_X", NULL};

static void test_request_json(void **state)
{
	char *s = up_agent_token_request(json_fields, false);

	(void)state;
	assert_string_equal(s, "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"rt-1\","
			       "\"client_id\":\"app_X\"}");
	up_free_secret(s, strlen(s));
}

static void test_request_form(void **state)
{
	const char *const fields[] = {"grant_type", "refresh_token", "refresh_token",
				      "1//a+b/c=",  "client_id",     "id.apps",
				      NULL};
	char *s = up_agent_token_request(fields, true);

	(void)state;
	assert_string_equal(
		s, "grant_type=refresh_token&refresh_token=1%2F%2Fa%2Bb%2Fc%3D&client_id=id.apps");
	up_free_secret(s, strlen(s));
	/* a missing value is no request */
	assert_null(up_agent_token_request((const char *const[]){"a", NULL, NULL}, true));
}

static void test_bearer_and_fake(void **state)
{
	struct up_agent_prepared *p = up_agent_prepared_new();
	const char *a = NULL, *b = NULL;
	char *v = up_agent_bearer("tok");

	(void)state;
	assert_string_equal(v, "Bearer tok");
	up_free_secret(v, strlen(v) + 1);
	assert_null(up_agent_bearer(NULL));
	assert_int_equal(up_agent_fake_token(p, "pre-", &a), 0);
	assert_int_equal(up_agent_fake_token(p, "pre-", &b), 0);
	assert_int_equal(strlen(a), strlen("pre-") + 32);
	assert_int_equal(strncmp(a, "pre-", 4), 0);
	assert_int_equal(strspn(a + 4, "0123456789abcdef"), 32);
	assert_string_not_equal(a, b);
	up_agent_prepared_free(p);
}

/* ---------------------------------------------------------------- a token endpoint */

struct server {
	int fd;
	int port;
	const char *status; /* "200 OK" */
	const char *answer;
	char request[4096]; /* what it was sent: head and body */
	pthread_t thread;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	int c = accept(s->fd, NULL, NULL);
	size_t n = 0;
	char out[1024];

	if (c < 0)
		return NULL;
	/* the head, then the body (Content-Length) */
	while (n < sizeof(s->request) - 1) {
		ssize_t k = read(c, s->request + n, sizeof(s->request) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		s->request[n] = '\0';
		const char *end = strstr(s->request, "\r\n\r\n");
		const char *cl = strcasestr(s->request, "Content-Length:");
		if (end && cl && n >= (size_t)(end + 4 - s->request) + strtoul(cl + 15, NULL, 10))
			break;
	}
	(void)snprintf(out, sizeof(out),
		       "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		       "Connection: close\r\n\r\n%s",
		       s->status, strlen(s->answer), s->answer);
	if (write(c, out, strlen(out)) < 0)
		(void)0;
	close(c);
	return NULL;
}

static void server_start(struct server *s, const char *status, const char *answer)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	memset(s, 0, sizeof(*s));
	s->status = status;
	s->answer = answer;
	assert_true((s->fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->fd, 1), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	assert_int_equal(pthread_join(s->thread, NULL), 0);
	close(s->fd);
}

/* ---------------------------------------------------------------- refresh */

struct login {
	json_t *doc;
	const char *access;
	int taken;
};

static int take(void *arg, const struct up_agent_body *b, time_t now, char *err, size_t len)
{
	struct login *l = arg;
	json_t *ans = up_agent_body_json(b);
	const char *access = json_string_value(json_object_get(ans, "access_token"));
	int r = access ? 0 : up_agent_failf(err, len, -EIO, "no access_token");

	l->taken++;
	if (r == 0) {
		assert_int_equal(json_object_set_new(l->doc, "access", json_string(access)), 0);
		assert_int_equal(json_object_set_new(l->doc, "at", json_integer(now)), 0);
		l->access = json_string_value(json_object_get(l->doc, "access"));
	}
	up_json_wipe_decref(ans);
	return r;
}

struct fixture {
	char dir[64];
	char path[128];
	char url[64];
	struct login l;
	struct up_agent_refresh rf;
};

static void fixture_new(struct fixture *f, int port)
{
	memset(f, 0, sizeof(*f));
	(void)snprintf(f->dir, sizeof(f->dir), "/tmp/test-agent-auth-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	(void)snprintf(f->path, sizeof(f->path), "%s/login.json", f->dir);
	(void)snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/token", port);
	f->l.doc = json_pack("{s:s, s:s}", "access", "old", "refresh", "rt-1");
	f->rf = (struct up_agent_refresh){
		.path = f->path,
		.what = "~/.tool/login.json",
		.field = "refresh",
		.written = "the refreshed token",
		.refresh = "rt-1",
		.url = f->url,
		.default_url = "http://127.0.0.1:1/never",
		.request = json_fields,
		.take = take,
		.login = &f->l,
		.doc = f->l.doc,
	};
}

static void fixture_free(struct fixture *f)
{
	(void)unlink(f->path);
	(void)rmdir(f->dir);
	up_json_wipe_decref(f->l.doc);
}

static void test_refresh_ok(void **state)
{
	struct server s;
	struct fixture f;
	char err[512] = "", *text = NULL;
	size_t len = 0;

	(void)state;
	server_start(&s, "200 OK", "{\"access_token\": \"new-access\", \"expires_in\": 3600}");
	fixture_new(&f, s.port);
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), 0);
	server_stop(&s);
	/* the request: a JSON POST of the fields */
	assert_non_null(strstr(s.request, "POST /token HTTP/1.1\r\n"));
	assert_non_null(strstr(s.request, "Content-Type: application/json\r\n"));
	assert_non_null(strstr(s.request, "\r\n\r\n{\"grant_type\":\"refresh_token\","
					  "\"refresh_token\":\"rt-1\",\"client_id\":\"app_X\"}"));
	/* the answer taken, and the file written back (0600, 2-space JSON) */
	assert_int_equal(f.l.taken, 1);
	assert_string_equal(f.l.access, "new-access");
	assert_int_equal(up_read_file(f.path, 1 << 20, &text, &len), 0);
	assert_non_null(strstr(text, "\"access\": \"new-access\""));
	assert_non_null(strstr(text, "\"at\": 1700000000"));
	free(text);
	fixture_free(&f);
}

static void test_refresh_form(void **state)
{
	struct server s;
	struct fixture f;
	char err[512] = "";

	(void)state;
	server_start(&s, "200 OK", "{\"access_token\": \"new-access\"}");
	fixture_new(&f, s.port);
	f.rf.form = true;
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), 0);
	server_stop(&s);
	assert_non_null(strstr(s.request, "Content-Type: application/x-www-form-urlencoded\r\n"));
	assert_non_null(strstr(
		s.request, "\r\n\r\ngrant_type=refresh_token&refresh_token=rt-1&client_id=app_X"));
	fixture_free(&f);
}

static void test_refresh_fails(void **state)
{
	struct server s;
	struct fixture f;
	char err[512] = "";

	(void)state;
	/* no refresh token: nothing is sent */
	fixture_new(&f, 1);
	f.rf.refresh = NULL;
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), -EIO);
	assert_string_equal(err, "~/.tool/login.json has no usable 'refresh'");
	assert_int_equal(f.l.taken, 0);
	fixture_free(&f);

	/* refused: the status and the OAuth error code, and nothing taken or written */
	server_start(&s, "400 Bad Request", "{\"error\": \"invalid_grant\"}");
	fixture_new(&f, s.port);
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), -EIO);
	server_stop(&s);
	assert_non_null(strstr(err, "answered HTTP 400, invalid_grant"));
	assert_int_equal(f.l.taken, 0);
	assert_int_equal(access(f.path, F_OK), -1);
	fixture_free(&f);

	/* what take() refuses is not written either */
	server_start(&s, "200 OK", "{}");
	fixture_new(&f, s.port);
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), -EIO);
	server_stop(&s);
	assert_string_equal(err, "no access_token");
	assert_int_equal(access(f.path, F_OK), -1);
	fixture_free(&f);

	/* the file cannot be written back */
	server_start(&s, "200 OK", "{\"access_token\": \"new-access\"}");
	fixture_new(&f, s.port);
	f.rf.path = "/nonexistent/uplink/login.json";
	assert_int_equal(up_agent_refresh(&f.rf, NOW, err, sizeof(err)), -ENOENT);
	server_stop(&s);
	assert_string_equal(err, "cannot write the refreshed token to ~/.tool/login.json: No such "
				 "file or directory");
	fixture_free(&f);
}

static const struct up_agent_renewal say = {
	.token = "the Tool token",
	.expired = "the Tool login",
	.renew = "run `tool` here",
	.relogin = "log in again",
};

static void test_renew(void **state)
{
	struct up_agent_prepared *p = up_agent_prepared_new();
	struct fixture f;
	char err[512] = "";

	(void)state;
	fixture_new(&f, 1);
	f.rf.refresh = NULL;
	/* far from the expiry: no refresh tried */
	assert_int_equal(
		up_agent_renew(p, &f.rf, &say, UP_AGENT_REFRESH_MARGIN_S, NOW, err, sizeof(err)),
		0);
	assert_int_equal(p->n_warnings, 0);
	assert_string_equal(err, "");
	/* near it: a failed refresh is a warning while the token works */
	assert_int_equal(up_agent_renew(p, &f.rf, &say, 60, NOW, err, sizeof(err)), 0);
	assert_int_equal(p->n_warnings, 1);
	assert_string_equal(p->warnings[0],
			    "refreshing the Tool token failed (~/.tool/login.json has no usable "
			    "'refresh'); the current token works for 60 more seconds: run `tool` "
			    "here to renew it");
	/* past it: an error */
	assert_int_equal(up_agent_renew(p, &f.rf, &say, 0, NOW, err, sizeof(err)), -EIO);
	assert_string_equal(err, "the Tool login in ~/.tool/login.json has expired and refreshing "
				 "it failed (~/.tool/login.json has no usable 'refresh'): log in "
				 "again");
	assert_int_equal(p->n_warnings, 1);
	fixture_free(&f);
	up_agent_prepared_free(p);
}

/* ---------------------------------------------------------------- doctor */

static const struct up_agent_login_doctor doctor = {
	.name = "tool login",
	.missing = "no Tool login",
	.missing_note = " (nor elsewhere)",
	.missing_fix = "run `tool login`",
	.fix = "run `tool login` again",
	.login = "the Tool login",
	.token = "the token",
};

static void check(int r, long long left, bool refresh, const char *status, const char *fix,
		  const char *detail)
{
	struct up_agent_check c;

	up_agent_doctor_login(&c, &doctor, "~/.tool/login.json", r, "why it is broken", left,
			      refresh);
	assert_string_equal(c.name, "tool login");
	assert_string_equal(c.status, status);
	assert_string_equal(c.fix, fix);
	assert_string_equal(c.detail, detail);
}

static void test_doctor(void **state)
{
	(void)state;
	check(-ENOENT, 0, false, "warn", "run `tool login`",
	      "no Tool login: ~/.tool/login.json is missing (nor elsewhere)");
	check(-EINVAL, 0, false, "warn", "run `tool login` again", "why it is broken");
	check(0, -60, false, "warn", "run `tool login` again",
	      "the Tool login in ~/.tool/login.json has expired and has no refresh token");
	check(0, 3600, true, "ok", "",
	      "~/.tool/login.json: the token lasts 60 more minutes; uplink refreshes it before it "
	      "expires");
	check(0, 3600, false, "ok", "", "~/.tool/login.json: the token lasts 60 more minutes");
	check(0, -7200, true, "ok", "",
	      "~/.tool/login.json: the token expired 120 minutes ago; uplink refreshes it when a "
	      "session starts");
}

/* ---------------------------------------------------------------- a login file */

static const struct up_agent_oauth_file nested = {
	.file = ".tool/creds.json",
	.what = "~/.tool/creds.json",
	.tool = "tool",
	.missing_hint = "run `tool login`",
	.object = "oauth",
	.access = "accessToken",
	.refresh = "refreshToken",
	.expires = "expiresAt",
	.relogin = "log in again",
};

/* The login file's fields as `text` has them: 0, or the error in err. */
static int parse(const struct up_agent_oauth_file *f, const char *text, struct up_agent_oauth *o,
		 char *err, size_t len)
{
	json_error_t jerr;

	*o = (struct up_agent_oauth){0};
	assert_non_null(o->doc = json_loads(text, 0, &jerr));
	return up_agent_oauth_parse(f, o, err, len);
}

static void test_oauth_parse(void **state)
{
	struct up_agent_oauth_file flat = nested;
	struct up_agent_oauth o;
	char err[512];

	(void)state;
	flat.object = NULL;
	assert_int_equal(parse(&nested,
			       "{\"oauth\": {\"accessToken\": \"a\", \"refreshToken\": "
			       "\"r t\", \"expiresAt\": 1700000000000}}",
			       &o, err, sizeof(err)),
			 0);
	assert_string_equal(o.access, "a");
	assert_null(o.refresh); /* not a token */
	assert_int_equal(o.expires_ms, 1700000000000LL);
	up_agent_oauth_done(&o);
	assert_int_equal(parse(&nested, "{}", &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "~/.tool/creds.json has no 'oauth' object: log in again");
	up_agent_oauth_done(&o);
	assert_int_equal(parse(&nested, "{\"oauth\": {}}", &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "~/.tool/creds.json has no 'oauth.accessToken': log in again");
	up_agent_oauth_done(&o);
	assert_int_equal(parse(&flat, "{\"accessToken\": \"a b\"}", &o, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "~/.tool/creds.json: 'accessToken' is not a bearer token "
				 "(unexpected characters): log in again");
	up_agent_oauth_done(&o);
	assert_int_equal(parse(&flat, "{\"accessToken\": \"a\", \"refreshToken\": \"r\"}", &o, err,
			       sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "~/.tool/creds.json has no 'expiresAt' (milliseconds since 1970): "
				 "log in again");
	assert_string_equal(o.refresh, "r");
	up_agent_oauth_done(&o);
}

static void test_oauth_read_and_doctor(void **state)
{
	const struct up_agent_login_doctor d = {
		.name = "tool login",
		.missing = "no Tool login",
		.missing_note = "",
		.missing_fix = "run `tool login`",
		.fix = "run `tool login` again",
		.login = "the Tool login",
		.token = "the token",
	};
	char home[64], path[128], err[512];
	struct up_agent_input in = {.home = home, .now = NOW};
	struct up_agent_check c;
	struct up_agent_oauth o;
	FILE *f;

	(void)state;
	(void)snprintf(home, sizeof(home), "/tmp/test-agent-auth-XXXXXX");
	assert_non_null(mkdtemp(home));
	assert_int_equal(up_agent_oauth_read(&nested, home, &o, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "~/.tool/creds.json not found: run `tool login`");
	up_agent_oauth_done(&o);
	assert_int_equal(up_agent_oauth_doctor(&nested, &d, &in, &c, 0), 0);
	assert_int_equal(up_agent_oauth_doctor(&nested, &d, &in, &c, 1), 1);
	assert_string_equal(c.status, "warn");
	assert_string_equal(c.detail, "no Tool login: ~/.tool/creds.json is missing");

	(void)snprintf(path, sizeof(path), "%s/.tool", home);
	assert_int_equal(mkdir(path, 0700), 0);
	(void)snprintf(path, sizeof(path), "%s/.tool/creds.json", home);
	assert_non_null(f = fopen(path, "w"));
	assert_true(fputs("{\"oauth\": {\"accessToken\": \"a\", \"refreshToken\": \"r\", "
			  "\"expiresAt\": 1700003600000}}",
			  f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(up_agent_oauth_read(&nested, home, &o, err, sizeof(err)), 0);
	assert_string_equal(o.path, path);
	assert_string_equal(o.access, "a");
	up_agent_oauth_done(&o);
	assert_int_equal(up_agent_oauth_doctor(&nested, &d, &in, &c, 1), 1);
	assert_string_equal(c.status, "ok");
	assert_string_equal(c.detail, "~/.tool/creds.json: the token lasts 60 more minutes; uplink "
				      "refreshes it before it expires");
	assert_int_equal(unlink(path), 0);
	(void)snprintf(path, sizeof(path), "%s/.tool", home);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(home), 0);
}

/* A token replaced in a login document is wiped before the document lets go of it. */
static void test_set_secret_wipes_what_it_replaces(void **state)
{
	json_t *doc = json_pack("{s:s}", "accessToken", "old-secret-token");
	json_t *old = json_incref(json_object_get(doc, "accessToken"));

	(void)state;
	assert_int_equal(up_agent_set_secret(doc, "accessToken", json_string("new")), 0);
	assert_string_equal(json_string_value(json_object_get(doc, "accessToken")), "new");
	assert_int_equal(json_string_length(old), 16);
	for (size_t i = 0; i < 16; i++)
		assert_int_equal(json_string_value(old)[i], 0);
	assert_int_equal(up_agent_set_secret(doc, "refreshToken", json_string("r")), 0);
	json_decref(old);
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_json),
		cmocka_unit_test(test_set_secret_wipes_what_it_replaces),
		cmocka_unit_test(test_request_form),
		cmocka_unit_test(test_bearer_and_fake),
		cmocka_unit_test(test_refresh_ok),
		cmocka_unit_test(test_refresh_form),
		cmocka_unit_test(test_refresh_fails),
		cmocka_unit_test(test_renew),
		cmocka_unit_test(test_doctor),
		cmocka_unit_test(test_oauth_parse),
		cmocka_unit_test(test_oauth_read_and_doctor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
