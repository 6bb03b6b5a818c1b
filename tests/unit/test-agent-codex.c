/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Codex agent's pieces that need no server: JWT payloads as codex decodes them,
 * config.toml less its secret-bearing keys (and still TOML where it was), the secret-name
 * check the agents share, and `uplink doctor`'s lines about ~/.codex/auth.json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/agent.h"
#include "agents/codex/codex.h"

#define NOW 1700000000

/* {"alg":"none"} . {"exp":1700003600,"email":"a@b"} . sig */
#define JWT_OK	   "eyJhbGciOiJub25lIn0.eyJleHAiOjE3MDAwMDM2MDAsImVtYWlsIjoiYUBiIn0.sig"
/* payload {"email":"a@b"}: no expiry */
#define JWT_NO_EXP "eyJhbGciOiJub25lIn0.eyJlbWFpbCI6ImFAYiJ9.sig"

static void test_jwt(void **state)
{
	json_t *c;

	(void)state;
	assert_int_equal(up_agent_jwt_exp(JWT_OK), 1700003600);
	assert_int_equal(up_agent_jwt_exp(JWT_NO_EXP), 0);
	assert_int_equal(up_agent_jwt_exp("not-a-jwt"), 0);
	assert_int_equal(up_agent_jwt_exp("a.b"), 0);
	assert_int_equal(up_agent_jwt_exp("a..c"), 0);
	assert_int_equal(up_agent_jwt_exp("eyJhbGciOiJub25lIn0.e$$$.sig"), 0);
	assert_int_equal(up_agent_jwt_exp(NULL), 0);
	c = up_agent_jwt_claims(JWT_OK);
	assert_non_null(c);
	assert_string_equal(json_string_value(json_object_get(c, "email")), "a@b");
	json_decref(c);
	/* a payload that is JSON but no object */
	assert_null(up_agent_jwt_claims("eyJhbGciOiJub25lIn0.WzFd.sig"));
}

static void test_secret_names(void **state)
{
	static const struct {
		const char *name;
		bool secret;
	} cases[] = {
		{"ANTHROPIC_API_KEY", true},
		{"apiKey", true},
		{"bearer_token", true},
		{"experimental_bearer_token", true},
		{"Authorization", true},
		{"GITHUB_TOKEN", true},
		{"session-cookie", true},
		{"CLAUDE_CODE_MAX_OUTPUT_TOKENS", false},
		{"model", false},
		{"keyboard", false},
		{"monkey", false},
		{"model_reasoning_effort", false},
		{"clientSecret", true},
		{"PASSWD", true},
		{"max_tokens", false},
		{"", false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (up_agent_secret_name(cases[i].name) != cases[i].secret)
			fail_msg("%s: expected %d", cases[i].name, cases[i].secret);
	}
}

static const char *filtered(const char *host, enum codex_mode mode, struct up_agent_prepared *p)
{
	const char *t = codex_config_toml(host, host ? strlen(host) : 0, mode, NULL, "C", p);

	assert_non_null(t);
	return t;
}

static void test_config_forced_first(void **state)
{
	struct up_agent_prepared *p = up_agent_prepared_new();
	const char *t;

	(void)state;
	t = filtered(NULL, CODEX_CHATGPT, p);
	assert_non_null(strstr(t, "\ncli_auth_credentials_store = \"file\"\n"));
	assert_non_null(strstr(t, "\nforced_login_method = \"chatgpt\"\n"));
	assert_non_null(strstr(t, "\ncheck_for_update_on_startup = false\n"));
	t = filtered("forced_login_method = \"chatgpt\"\ncli_auth_credentials_store = \"keyring\"\n"
		     "model = \"o3\"\n[profiles.x]\nforced_login_method = \"api\"\n",
		     CODEX_API_KEY, p);
	/* the host's top-level ones are left out (no duplicate keys), a table's stay */
	assert_null(strstr(t, "\"keyring\""));
	assert_null(strstr(t, "forced_login_method = \"chatgpt\""));
	assert_non_null(strstr(t, "\nforced_login_method = \"api\"\nc"));
	assert_non_null(
		strstr(t, "\nmodel = \"o3\"\n[profiles.x]\nforced_login_method = \"api\"\n"));
	assert_int_equal(p->n_warnings, 0);
	up_agent_prepared_free(p);
}

static void test_config_drops_secrets(void **state)
{
	static const char host[] = "model = \"gpt-5\"\n"
				   "# a comment = kept\n"
				   "\n"
				   "[model_providers.corp]\n"
				   "base_url = \"https://x\"\n"
				   "experimental_bearer_token = \"S1\"\n"
				   "env_key = \"CORP_KEY\"\n"
				   "http_headers = {\n"
				   "  \"X-A\" = \"S2\",\n"
				   "}\n"
				   "auth = { command = \"get-token\" }\n"
				   "[mcp_servers.a.env]\n"
				   "TOKEN = \"S3\"\n"
				   "[mcp_servers.a]\n"
				   "args = [\n"
				   "  \"[x]\",\n"
				   "  \"]\",\n"
				   "]\n"
				   "note = '''\n"
				   "[not.a.table]\n"
				   "'''\n"
				   "\"quoted.key_token\" = \"S4\"\n"
				   "api_key = \"S5\" # trailing\n"
				   "model_auto_compact_token_limit = 1\n";
	struct up_agent_prepared *p = up_agent_prepared_new();
	const char *t;

	(void)state;
	t = filtered(host, CODEX_CHATGPT, p);
	for (const char *s = "S1\0S2\0S3\0S4\0S5\0get-token\0"; *s; s += strlen(s) + 1)
		if (strstr(t, s))
			fail_msg("%s reached the pod's config.toml:\n%s", s, t);
	assert_non_null(strstr(t, "\nmodel = \"gpt-5\"\n# a comment = kept\n\n"));
	assert_non_null(strstr(t, "[model_providers.corp]\nbase_url = \"https://x\"\n"
				  "env_key = \"CORP_KEY\"\n[mcp_servers.a]\n"));
	assert_non_null(strstr(t, "args = [\n  \"[x]\",\n  \"]\",\n]\nnote = '''\n"
				  "[not.a.table]\n'''\nmodel_auto_compact_token_limit = 1\n"));
	assert_int_equal(p->n_warnings, 6);
	assert_string_equal(p->warnings[0],
			    "C: model_providers.corp.experimental_bearer_token looks like a "
			    "credential; the pod's copy leaves it out (inject it with a rule "
			    "instead)");
	assert_non_null(strstr(p->warnings[1], "C: model_providers.corp.http_headers looks"));
	assert_non_null(strstr(p->warnings[2], "C: model_providers.corp.auth looks"));
	assert_string_equal(p->warnings[3],
			    "C: the table [mcp_servers.a.env] may hold credentials; the pod's copy "
			    "leaves it out (inject them with a rule instead)");
	assert_non_null(strstr(p->warnings[4], "C: mcp_servers.a.\"quoted.key_token\" looks"));
	assert_non_null(strstr(p->warnings[5], "C: mcp_servers.a.api_key looks"));
	up_agent_prepared_free(p);
}

static void test_config_trusts_the_cwd(void **state)
{
	static const char host[] = "[projects.\"/w/p\"]\ntrust_level = \"untrusted\"\n"
				   "[projects.\"/w/other\"]\ntrust_level = \"trusted\"\n";
	struct up_agent_prepared *p = up_agent_prepared_new();
	const char *t;

	(void)state;
	t = codex_config_toml(host, strlen(host), CODEX_CHATGPT, "/w/p", "C", p);
	assert_non_null(t);
	assert_null(strstr(t, "untrusted"));
	assert_non_null(strstr(t, "[projects.\"/w/other\"]\ntrust_level = \"trusted\"\n"
				  "[projects.\"/w/p\"]\ntrust_level = \"trusted\"\n"));
	t = codex_config_toml(NULL, 0, CODEX_CHATGPT, "/w/a \"b\"\\c", "C", p);
	assert_non_null(
		strstr(t, "\n[projects.\"/w/a \\\"b\\\"\\\\c\"]\ntrust_level = \"trusted\"\n"));
	t = codex_config_toml(NULL, 0, CODEX_CHATGPT, "/w/new\nline", "C", p);
	assert_null(strstr(t, "[projects."));
	assert_int_equal(p->n_warnings, 0);
	up_agent_prepared_free(p);
}

/* ---------------------------------------------------------------- doctor */

static char home[64];

static void write_auth(const char *text)
{
	char path[128];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/.codex", home);
	(void)mkdir(path, 0700);
	(void)snprintf(path, sizeof(path), "%s/.codex/auth.json", home);
	f = fopen(path, "w");
	assert_non_null(f);
	(void)fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static const struct up_agent_check *doctor(struct up_agent_check *c)
{
	struct up_agent_input in = {.home = home, .now = NOW};

	assert_int_equal(up_agent_codex.doctor(&up_agent_codex, &in, c, 1), 1);
	return c;
}

static void test_doctor(void **state)
{
	struct up_agent_check c;
	char cmd[128];

	(void)state;
	(void)snprintf(home, sizeof(home), "/tmp/test-codex-XXXXXX");
	assert_non_null(mkdtemp(home));
	doctor(&c);
	assert_string_equal(c.status, "warn");
	assert_string_equal(c.detail, "no Codex login: ~/.codex/auth.json is missing");
	assert_non_null(strstr(c.fix, "codex login"));
	write_auth("{\"tokens\": {\"access_token\": \"" JWT_OK "\", \"refresh_token\": \"r\"}}");
	doctor(&c);
	assert_string_equal(c.status, "ok");
	assert_string_equal(c.detail, "~/.codex/auth.json: the access token lasts 60 more minutes; "
				      "uplink refreshes it before it expires");
	write_auth("{\"tokens\": {\"access_token\": \"" JWT_NO_EXP "\"}}");
	doctor(&c);
	assert_string_equal(c.status, "warn");
	assert_string_equal(c.detail,
			    "~/.codex/auth.json: 'tokens.access_token' is not a JWT with "
			    "an expiry: run `codex login` on this machine, or use --api-key");
	write_auth("{\"OPENAI_API_KEY\": \"sk-uplink-sentinel\"}");
	doctor(&c);
	assert_string_equal(c.status, "ok");
	assert_null(strstr(c.detail, "sentinel"));
	write_auth("{\"tokens\": ");
	doctor(&c);
	assert_string_equal(c.status, "warn");
	assert_non_null(strstr(c.detail, "is not valid JSON (line 1, column 11)"));
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jwt),
		cmocka_unit_test(test_secret_names),
		cmocka_unit_test(test_config_forced_first),
		cmocka_unit_test(test_config_drops_secrets),
		cmocka_unit_test(test_config_trusts_the_cwd),
		cmocka_unit_test(test_doctor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
