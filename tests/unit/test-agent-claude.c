/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Claude agent's prepare() against fixture homes (tests/data/agents/claude/): every
 * error message in full, the settings.json transform rule by rule, the fake credentials,
 * the pod contribution, shell quoting of the passthrough args, and sentinels: no real
 * secret (every one in the fixtures holds "uplink-sentinel") in anything the pod gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/agent.h"
#include "agents/claude/claude.h"
#include "ca.h"
#include "manifests.h"
#include "rules.h"

#define FIXTURES  UP_TEST_DATA_DIR "/agents/claude"
#define MANIFESTS UP_TEST_DATA_DIR "/../../manifests"
#define SENTINEL  "uplink-sentinel"
#define NOW	  1700000000
#define RELOGIN	  "log in again by running `claude` on this machine, or use --bedrock"

/* A fixture home copied into a fresh folder (prepare() writes under it). */
struct home {
	char dir[64];
	char state[96];
};

static void home_new(struct home *h, const char *fixture)
{
	char cmd[512];

	(void)snprintf(h->dir, sizeof(h->dir), "/tmp/test-agent-XXXXXX");
	assert_non_null(mkdtemp(h->dir));
	(void)snprintf(h->state, sizeof(h->state), "%s/state", h->dir);
	assert_int_equal(mkdir(h->state, 0700), 0);
	(void)snprintf(cmd, sizeof(cmd), "cp -a '%s/%s/.' '%s/'", FIXTURES, fixture, h->dir);
	assert_int_equal(system(cmd), 0);
}

static void home_done(struct home *h)
{
	char cmd[128];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
	assert_int_equal(system(cmd), 0);
}

/* Where an expired token is refreshed: the agent's default unless a test points it away. */
static const char *token_url;

static int run(struct home *h, const char *mode, const char *const *args, bool state,
	       struct up_agent_prepared **p, char *err, size_t len)
{
	struct up_agent_input in = {
		.mode = mode,
		.home = h->dir,
		.uid = 1000,
		.gid = 1000,
		.user = "u",
		.cwd = h->dir,
		.args = args,
		.session_id = "0123456789ab",
		.state_dir = state ? h->state : NULL,
		.base_dir = FIXTURES "/system",
		.now = NOW,
		.token_url = token_url,
	};

	return up_agent_prepare(&up_agent_claude, &in, p, err, len);
}

/* prepare() of a fixture that must fail: the message, in full. */
static void expect_error(const char *fixture, const char *mode, int code, const char *msg)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[1024] = "";

	home_new(&h, fixture);
	assert_int_equal(run(&h, mode, NULL, true, &p, err, sizeof(err)), code);
	assert_null(p);
	assert_string_equal(err, msg);
	assert_null(strstr(err, SENTINEL));
	home_done(&h);
}

static void test_errors(void **state)
{
	expect_error("no-credentials", NULL, -ENOENT,
		     "~/.claude/.credentials.json not found: run `claude` once on this machine and "
		     "log in, or use --bedrock");
	expect_error(
		"malformed", "anthropic", -EINVAL,
		"~/.claude/.credentials.json is not valid JSON (line 4, column 15): fix it, or "
		"move it aside and run `claude` again");
	expect_error("not-object", NULL, -EINVAL,
		     "~/.claude/.credentials.json does not hold a JSON object");
	expect_error("no-oauth", NULL, -EINVAL,
		     "~/.claude/.credentials.json has no 'claudeAiOauth' object: " RELOGIN);
	expect_error("no-access-token", NULL, -EINVAL,
		     "~/.claude/.credentials.json has no 'claudeAiOauth.accessToken': " RELOGIN);
	expect_error("no-expiry", NULL, -EINVAL,
		     "~/.claude/.credentials.json has no 'claudeAiOauth.expiresAt' (milliseconds "
		     "since 1970): " RELOGIN);
	expect_error("no-settings", NULL, -ENOENT,
		     "~/.claude/settings.json not found: run `claude` once on this machine so that "
		     "it writes one (a file holding {} will do)");
	expect_error("no-settings", "bedrock", -ENOENT,
		     "~/.claude/settings.json not found: run `claude` once on this machine so that "
		     "it writes one (a file holding {} will do)");
	expect_error(
		"bad-settings", NULL, -EINVAL,
		"~/.claude/settings.json is not valid JSON (line 1, column 18): fix it, or move "
		"it aside and run `claude` again");
	expect_error("valid", "vertex", -EINVAL,
		     "agent claude has no mode 'vertex'; known: claude (modes anthropic, bedrock); "
		     "codex (modes chatgpt, api_key); gemini (modes google, api_key); "
		     "opencode (modes anthropic, openai)");
}

/* An expired token whose refresh cannot reach the token endpoint. */
static void test_refresh_fails(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[1024] = "";
	const char *head = "the Claude OAuth token in ~/.claude/.credentials.json has expired and "
			   "refreshing it failed (http://127.0.0.1:1/v1/oauth/token: ";

	home_new(&h, "expired");
	token_url = "http://127.0.0.1:1/v1/oauth/token";
	assert_int_equal(run(&h, NULL, NULL, true, &p, err, sizeof(err)), -EIO);
	token_url = NULL;
	assert_true(strncmp(err, head, strlen(head)) == 0);
	assert_non_null(strstr(err, "): " RELOGIN));
	assert_null(strstr(err, SENTINEL));
	home_done(&h);
}

/* ---------------------------------------------------------------- settings.json */

static const struct settings_case {
	const char *what;
	enum claude_mode mode;
	const char *host, *expect;
	const char *warning; /* the one warning expected, or NULL for none */
	const char *profile; /* the AWS profile noted, or NULL */
} settings_cases[] = {
	{"sandbox dropped, permissions forced, prompt skipped", CLAUDE_ANTHROPIC,
	 "{\"theme\":\"dark\",\"sandbox\":{\"enabled\":true},\"permissions\":{\"allow\":[\"Bash\"]}"
	 "}",
	 "{\"theme\":\"dark\",\"env\":{},\"permissions\":{\"defaultMode\":\"auto\","
	 "\"skipDangerousModePermissionPrompt\":true},\"skipDangerousModePermissionPrompt\":true}",
	 NULL, NULL},
	{"anthropic adds no env; plain env passes", CLAUDE_ANTHROPIC,
	 "{\"env\":{\"AWS_REGION\":\"us-east-1\",\"MAX_THINKING_TOKENS\":\"99\"}}",
	 "{\"env\":{\"AWS_REGION\":\"us-east-1\",\"MAX_THINKING_TOKENS\":\"99\"},"
	 "\"permissions\":{\"defaultMode\":\"auto\",\"skipDangerousModePermissionPrompt\":true},"
	 "\"skipDangerousModePermissionPrompt\":true}",
	 NULL, NULL},
	{"bedrock env merged, placeholder wins over the host's token", CLAUDE_BEDROCK,
	 "{\"env\":{\"AWS_REGION\":\"us-east-1\",\"AWS_BEARER_TOKEN_BEDROCK\":\"placeholder\"}}",
	 "{\"env\":{\"AWS_REGION\":\"us-east-1\",\"AWS_BEARER_TOKEN_BEDROCK\":\"placeholder\","
	 "\"CLAUDE_CODE_USE_BEDROCK\":\"1\",\"CLAUDE_CODE_ENABLE_AUTO_MODE\":\"1\"},"
	 "\"permissions\":{\"defaultMode\":\"auto\",\"skipDangerousModePermissionPrompt\":true},"
	 "\"skipDangerousModePermissionPrompt\":true}",
	 NULL, NULL},
	{"bedrock: env.AWS_PROFILE noted", CLAUDE_BEDROCK,
	 "{\"env\":{\"AWS_PROFILE\":\"dev-1\"},\"skipDangerousModePermissionPrompt\":false}",
	 "{\"env\":{\"AWS_PROFILE\":\"dev-1\",\"AWS_BEARER_TOKEN_BEDROCK\":\"placeholder\","
	 "\"CLAUDE_CODE_USE_BEDROCK\":\"1\",\"CLAUDE_CODE_ENABLE_AUTO_MODE\":\"1\"},"
	 "\"skipDangerousModePermissionPrompt\":true,"
	 "\"permissions\":{\"defaultMode\":\"auto\",\"skipDangerousModePermissionPrompt\":true}}",
	 NULL, "dev-1"},
	{"bedrock: a bad AWS_PROFILE is ignored", CLAUDE_BEDROCK,
	 "{\"env\":{\"AWS_PROFILE\":\"a]b\"}}",
	 "{\"env\":{\"AWS_PROFILE\":\"a]b\",\"AWS_BEARER_TOKEN_BEDROCK\":\"placeholder\","
	 "\"CLAUDE_CODE_USE_BEDROCK\":\"1\",\"CLAUDE_CODE_ENABLE_AUTO_MODE\":\"1\"},"
	 "\"permissions\":{\"defaultMode\":\"auto\",\"skipDangerousModePermissionPrompt\":true},"
	 "\"skipDangerousModePermissionPrompt\":true}",
	 "S: env.AWS_PROFILE is not a valid AWS profile name; ignoring it", NULL},
	{"anthropic: AWS_PROFILE is not noted", CLAUDE_ANTHROPIC,
	 "{\"env\":{\"AWS_PROFILE\":\"dev\"}}",
	 "{\"env\":{\"AWS_PROFILE\":\"dev\"},\"permissions\":{\"defaultMode\":\"auto\","
	 "\"skipDangerousModePermissionPrompt\":true},\"skipDangerousModePermissionPrompt\":true}",
	 NULL, NULL},
	{"a secret-looking env value is replaced", CLAUDE_ANTHROPIC,
	 "{\"env\":{\"ANTHROPIC_API_KEY\":\"uplink-sentinel-k\"}}",
	 "{\"env\":{\"ANTHROPIC_API_KEY\":\"placeholder\"},\"permissions\":{\"defaultMode\":"
	 "\"auto\",\"skipDangerousModePermissionPrompt\":true},"
	 "\"skipDangerousModePermissionPrompt\":true}",
	 "S: env.ANTHROPIC_API_KEY looks like a credential; the pod gets 'placeholder' (inject it "
	 "with a rule instead)",
	 NULL},
	{"bedrock: the host's real bearer token never passes", CLAUDE_BEDROCK,
	 "{\"env\":{\"AWS_BEARER_TOKEN_BEDROCK\":\"uplink-sentinel-b\"}}",
	 "{\"env\":{\"AWS_BEARER_TOKEN_BEDROCK\":\"placeholder\",\"CLAUDE_CODE_USE_BEDROCK\":\"1\","
	 "\"CLAUDE_CODE_ENABLE_AUTO_MODE\":\"1\"},\"permissions\":{\"defaultMode\":\"auto\","
	 "\"skipDangerousModePermissionPrompt\":true},\"skipDangerousModePermissionPrompt\":true}",
	 "S: env.AWS_BEARER_TOKEN_BEDROCK looks like a credential; the pod gets 'placeholder' "
	 "(inject it with a rule instead)",
	 NULL},
	{"apiKeyHelper dropped", CLAUDE_ANTHROPIC, "{\"apiKeyHelper\":\"~/bin/key\"}",
	 "{\"env\":{},\"permissions\":{\"defaultMode\":\"auto\","
	 "\"skipDangerousModePermissionPrompt\":true},\"skipDangerousModePermissionPrompt\":true}",
	 "S: apiKeyHelper is left out of the pod's copy: the proxy injects the credentials", NULL},
	{"env that is not an object", CLAUDE_ANTHROPIC, "{\"env\":[1]}",
	 "{\"env\":{},\"permissions\":{\"defaultMode\":\"auto\","
	 "\"skipDangerousModePermissionPrompt\":true},\"skipDangerousModePermissionPrompt\":true}",
	 "S: 'env' is not an object; the pod's copy leaves it out", NULL},
};

static void test_settings_table(void **state)
{
	for (size_t i = 0; i < sizeof(settings_cases) / sizeof(settings_cases[0]); i++) {
		const struct settings_case *t = &settings_cases[i];
		struct up_agent_prepared *p = up_agent_prepared_new();
		json_t *host = json_loads(t->host, 0, NULL), *want = json_loads(t->expect, 0, NULL);
		json_t *got = claude_settings_transform(host, t->mode, "S", p);
		char *dump = json_dumps(got, JSON_SORT_KEYS);

		assert_non_null(host);
		assert_non_null(want);
		if (!json_equal(got, want))
			fail_msg("%s: got %s", t->what, dump);
		assert_int_equal(p->n_warnings, t->warning ? 1 : 0);
		if (t->warning)
			assert_string_equal(p->warnings[0], t->warning);
		assert_int_equal(p->n_aws_profiles, t->profile ? 1 : 0);
		if (t->profile)
			assert_string_equal(p->aws_profiles[0], t->profile);
		assert_null(strstr(dump, SENTINEL));
		free(dump);
		json_decref(host);
		json_decref(want);
		json_decref(got);
		up_agent_prepared_free(p);
	}
}

static void test_mcp_redaction(void **state)
{
	json_t *doc = json_loads(
		"{\"mcpServers\":{\"a\":{\"headers\":{\"authorization\":\"s1\",\"X\":\"keep\"},"
		"\"env\":{\"T\":\"keep\"}},\"b\":{\"url\":\"u\"}},"
		"\"projects\":{\"/"
		"p\":{\"mcpServers\":{\"c\":{\"headers\":{\"AuThOrIzAtIoN\":\"s2\"}}}},"
		"\"/q\":{}},\"other\":{\"headers\":{\"Authorization\":\"kept\"}}}",
		0, NULL);
	json_t *want = json_loads(
		"{\"mcpServers\":{\"a\":{\"headers\":{\"authorization\":\"PLACEHOLDER\",\"X\":"
		"\"keep\"},"
		"\"env\":{\"T\":\"keep\"}},\"b\":{\"url\":\"u\"}},"
		"\"projects\":{\"/p\":{\"mcpServers\":{\"c\":{\"headers\":{\"AuThOrIzAtIoN\":"
		"\"PLACEHOLDER\"}}}},\"/"
		"q\":{}},\"other\":{\"headers\":{\"Authorization\":\"kept\"}}}",
		0, NULL);

	assert_int_equal(claude_redact_mcp(doc), 2);
	assert_true(json_equal(doc, want));
	json_decref(doc);
	json_decref(want);
}

static void test_claude_md(void **state)
{
	struct up_agent_prepared *p = up_agent_prepared_new();
	const char *a = claude_md("# mine", 6, p), *b = claude_md("# mine\n", 7, p);
	const char *c = claude_md(NULL, 0, p);

	assert_true(strncmp(a, "# mine\n\n## Sandbox\n", 19) == 0);
	assert_true(strncmp(b, "# mine\n\n## Sandbox\n", 19) == 0);
	assert_true(strncmp(c, "## Sandbox\n", 11) == 0);
	/* the body filter.py's _refusal sends */
	assert_non_null(strstr(c, "\"error\": \"denied by uplink\""));
	assert_non_null(strstr(c, "X-Uplink-Denied: 1"));
	assert_null(strstr(c, "request not permitted"));
	assert_non_null(strstr(c, "do not retry it"));
	assert_non_null(strstr(c, "waiting for the user"));
	assert_non_null(strstr(c, "\"answer\": \"no answer\""));
	up_agent_prepared_free(p);
}

/* ---------------------------------------------------------------- the contribution */

static const struct up_agent_volume *volume(const struct up_agent_prepared *p, const char *name)
{
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		if (strcmp(p->contrib.volumes[i].name, name) == 0)
			return &p->contrib.volumes[i];
	return NULL;
}

static bool has(const char *s, size_t len, const char *needle)
{
	return memmem(s, len, needle, strlen(needle)) != NULL;
}

/* Nothing the pod gets holds a real secret. */
static void assert_no_sentinel(const struct up_agent_prepared *p)
{
	const struct up_agent_contrib *c = &p->contrib;

	for (size_t i = 0; i < c->n_env; i++)
		assert_null(strstr(c->env[i].value, SENTINEL));
	for (size_t i = 0; i < c->n_volumes; i++)
		for (size_t j = 0; j < c->volumes[i].n_files; j++)
			if (has(c->volumes[i].files[j].data, c->volumes[i].files[j].len, SENTINEL))
				fail_msg("volume %s, file %s holds a sentinel", c->volumes[i].name,
					 c->volumes[i].files[j].key);
	for (size_t i = 0; c->command && c->command[i]; i++)
		assert_null(strstr(c->command[i], SENTINEL));
	for (size_t i = 0; i < p->n_warnings; i++)
		assert_null(strstr(p->warnings[i], SENTINEL));
}

static void check_file(const struct up_agent_volume *v, enum up_agent_volume_kind kind,
		       const char *key, const char *mount)
{
	assert_non_null(v);
	assert_int_equal(v->kind, kind);
	assert_int_equal(v->n_files, 1);
	assert_string_equal(v->files[0].key, key);
	assert_string_equal(v->files[0].mount_path, mount);
	assert_null(v->mount_path);
	assert_true(v->read_only);
}

static void check_host(const struct up_agent_volume *v, const char *path, const char *type,
		       const char *mount, bool ro)
{
	assert_non_null(v);
	assert_int_equal(v->kind, UP_AGENT_VOL_HOSTPATH);
	assert_string_equal(v->host_path, path);
	assert_string_equal(v->host_path_type, type);
	assert_string_equal(v->mount_path, mount);
	assert_int_equal(v->read_only, ro);
}

static void test_anthropic_contribution(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512], path[256], mount[256];
	const struct up_agent_volume *v;
	json_t *fake, *oauth, *settings;
	struct stat st;

	home_new(&h, "valid");
	assert_int_equal(run(&h, NULL, NULL, true, &p, err, sizeof(err)), 0);
	/* the auth rule holds the real token, and only the access token */
	assert_non_null(strstr(p->auth_rules, "\"Bearer sk-ant-oat01-uplink-sentinel-access\""));
	assert_non_null(strstr(p->auth_rules, "\"anthropic-auth\""));
	assert_non_null(strstr(p->auth_rules, "api\\\\.anthropic\\\\.com"));
	assert_null(strstr(p->auth_rules, "refresh"));
	assert_int_equal(p->expires_at, 4102444800);
	assert_no_sentinel(p);

	/* the fake credentials: fake tokens, far expiry, other fields kept, nothing else */
	(void)snprintf(mount, sizeof(mount), "%s/.claude/.credentials.json", h.dir);
	v = volume(p, "claude-fake-creds");
	check_file(v, UP_AGENT_VOL_SECRET, "credentials.json", mount);
	fake = json_loadb(v->files[0].data, v->files[0].len, 0, NULL);
	assert_int_equal(json_object_size(fake), 1);
	oauth = json_object_get(fake, "claudeAiOauth");
	assert_true(strncmp(json_string_value(json_object_get(oauth, "accessToken")),
			    "sk-ant-oat01-agent-uplink-", 26) == 0);
	assert_int_equal(strlen(json_string_value(json_object_get(oauth, "accessToken"))), 26 + 32);
	assert_true(strncmp(json_string_value(json_object_get(oauth, "refreshToken")),
			    "sk-ant-ort01-agent-uplink-", 26) == 0);
	assert_int_equal(json_integer_value(json_object_get(oauth, "expiresAt")),
			 (NOW + 3650LL * 86400) * 1000);
	assert_string_equal(json_string_value(json_object_get(oauth, "subscriptionType")), "max");
	assert_int_equal(json_array_size(json_object_get(oauth, "scopes")), 2);
	json_decref(fake);

	(void)snprintf(mount, sizeof(mount), "%s/.claude/settings.json", h.dir);
	v = volume(p, "claude-settings");
	check_file(v, UP_AGENT_VOL_SECRET, "settings.json", mount);
	settings = json_loadb(v->files[0].data, v->files[0].len, 0, NULL);
	assert_null(json_object_get(settings, "sandbox"));
	assert_string_equal(json_string_value(json_object_get(settings, "model")), "opus");
	json_decref(settings);
	assert_int_equal(p->n_warnings, 3); /* apiKeyHelper, ANTHROPIC_API_KEY, primaryApiKey */

	(void)snprintf(mount, sizeof(mount), "%s/.claude/CLAUDE.md", h.dir);
	v = volume(p, "claude-md");
	check_file(v, UP_AGENT_VOL_CONFIGMAP, "CLAUDE.md", mount);
	assert_true(strncmp(v->files[0].data, "# My rules\nBe terse.\n\n## Sandbox\n", 32) == 0);

	v = volume(p, "claude-managed-settings");
	check_file(v, UP_AGENT_VOL_SECRET, "managed-settings.json",
		   "/etc/claude-code/managed-settings.json");
	assert_true(has(v->files[0].data, v->files[0].len, "\"AUTHORIZATION\": \"PLACEHOLDER\""));
	assert_false(has(v->files[0].data, v->files[0].len, "sandbox"));

	check_host(volume(p, "workdir"), h.dir, "Directory", h.dir, false);
	(void)snprintf(path, sizeof(path), "%s/.claude/projects/", h.dir);
	for (char *s = path + strlen(path), *c = h.dir; *c; c++)
		*s++ = *c == '/' || *c == '-' ? '-' : *c, *s = '\0';
	check_host(volume(p, "claude-project"), path, "DirectoryOrCreate", path, false);
	assert_int_equal(stat(path, &st), 0); /* made on the host */
	assert_true(S_ISDIR(st.st_mode));
	(void)snprintf(path, sizeof(path), "%s/claude.json", h.state);
	(void)snprintf(mount, sizeof(mount), "%s/.claude.json", h.dir);
	check_host(volume(p, "claude-json"), path, "File", mount, false);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	(void)snprintf(path, sizeof(path), "%s/.claude/commands", h.dir);
	check_host(volume(p, "claude-commands"), path, "Directory", path, true);
	(void)snprintf(path, sizeof(path), "%s/.claude/skills", h.dir);
	check_host(volume(p, "claude-skills"), path, "Directory", path, true);
	assert_null(volume(p, "claude-plugins")); /* not on the host */
	(void)snprintf(path, sizeof(path), "%s/.claude/history.jsonl", h.dir);
	check_host(volume(p, "claude-history-jsonl"), path, "File", path, false);
	v = volume(p, "docker-lib");
	assert_int_equal(v->kind, UP_AGENT_VOL_EMPTYDIR);
	assert_string_equal(v->mount_path, "/var/lib/docker");
	assert_string_equal(v->medium, "Memory");
	assert_string_equal(v->size_limit, "2Gi");
	assert_string_equal(volume(p, "run")->mount_path, "/run");
	assert_int_equal(p->contrib.n_volumes, 12);

	assert_int_equal(p->contrib.n_env, 2);
	assert_string_equal(p->contrib.env[0].name, "DISABLE_AUTOUPDATER");
	/* the entrypoint makes ~/.claude the user's, so the mounts under it can be written */
	assert_string_equal(p->contrib.env[1].name, "UPLINK_AGENT_DIRS");
	assert_string_equal(p->contrib.env[1].value, ".claude");
	assert_string_equal(p->contrib.entrypoint[0], "/usr/local/bin/uplink-entrypoint");
	assert_null(p->contrib.entrypoint[1]);
	assert_string_equal(p->contrib.command[0], "bash");
	assert_string_equal(p->contrib.command[1], "-lc");
	assert_string_equal(p->contrib.command[2],
			    "exec claude --allow-dangerously-skip-permissions");
	assert_null(p->contrib.command[3]);
	assert_string_equal(p->contrib.memory_limit, "4Gi");
	assert_string_equal(up_agent_claude.attach_argv[1], "--attach");
	up_agent_prepared_free(p);

	/* the host's .claude.json copy: MCP headers and the API key gone, the rest kept */
	(void)snprintf(path, sizeof(path), "%s/claude.json", h.state);
	json_t *cj = json_load_file(path, 0, NULL);
	char *dump = json_dumps(cj, 0);
	assert_null(strstr(dump, SENTINEL));
	assert_non_null(strstr(dump, "\"X-Other\": \"keep\""));
	assert_non_null(strstr(dump, "\"oauthAccount\""));
	free(dump);
	json_decref(cj);
	home_done(&h);
}

static void test_bedrock_contribution(void **state)
{
	struct up_agent_prepared *p = NULL;
	const char *const args[] = {"-p", "hi there", NULL};
	struct home h;
	char err[512];

	home_new(&h, "no-credentials"); /* bedrock needs no Claude login */
	assert_int_equal(run(&h, "bedrock", args, false, &p, err, sizeof(err)), 0);
	assert_string_equal(
		p->auth_rules,
		"{\"rules\":[{\"name\":\"bedrock-auth\",\"hosts\":"
		"[\"bedrock-runtime\\\\.[a-z0-9-]+\\\\.amazonaws\\\\.com\"],\"methods\":[\"GET\","
		"\"POST\"],\"inject\":"
		"{\"headers\":{\"Authorization\":\"Bearer {{keyring:bedrock:key}}\"}}}]}");
	assert_int_equal(p->expires_at, 0);
	assert_null(volume(p, "claude-fake-creds"));
	assert_null(volume(p, "claude-json")); /* no state folder */
	assert_non_null(volume(p, "claude-managed-settings"));
	assert_string_equal(p->contrib.command[2],
			    "exec claude --allow-dangerously-skip-permissions -p 'hi there'");
	up_agent_prepared_free(p);
	home_done(&h);
}

/* rules_only reads nothing but the credentials; the auth rule loads into the AUTH layer. */
static void test_rules_only(void **state)
{
	struct up_agent_input in = {
		.home = FIXTURES "/no-settings", .user = "u", .rules_only = true, .now = NOW};
	struct up_agent_prepared *p = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array();
	char err[256];
	const struct up_rule *r;

	assert_int_equal(up_agent_prepare(&up_agent_claude, &in, &p, err, sizeof(err)), 0);
	assert_int_equal(p->contrib.n_volumes, 0);
	assert_null(p->contrib.command);
	assert_int_equal(up_ruleset_load_agent_prepared(rs, &up_agent_claude, p, problems), 0);
	assert_int_equal(up_ruleset_finish(rs, false, problems), 0);
	r = up_ruleset_match(rs, "POST", "api.anthropic.com", "/v1/messages");
	assert_string_equal(r->name, "anthropic-auth");
	assert_int_equal(r->layer, UP_LAYER_AUTH);
	assert_string_equal(r->headers[0].name, "Authorization");
	r = up_ruleset_match(rs, "POST", "http-intake.logs.datadoghq.com", "/api/v2/logs");
	assert_string_equal(r->name, "claude-logs");
	assert_string_equal(r->source, "agents/claude/default-rules.yaml:3");
	assert_int_equal(json_array_size(problems), 0);
	json_decref(problems);
	up_ruleset_free(rs);
	up_agent_prepared_free(p);
}

/*
 * The contribution through the real renderer: the objects are accepted, and no Secret or
 * ConfigMap the agent pod mounts holds a real credential; the rules Secret (mitm only)
 * holds the token.
 */
static bool object_holds(const json_t *o, const char *needle)
{
	json_t *data = json_object_get(o, "data"), *v;
	const char *k;
	bool secret = strcmp(json_string_value(json_object_get(o, "kind")), "Secret") == 0;

	json_object_foreach (data, k, v) {
		unsigned char buf[16384];
		const char *s = json_string_value(v);
		int n = (int)strlen(s);
		if (!secret) {
			if (strstr(s, needle))
				return true;
			continue;
		}
		assert_true(n / 4 * 3 < (int)sizeof(buf));
		n = EVP_DecodeBlock(buf, (const unsigned char *)s, n);
		assert_true(n >= 0);
		if (memmem(buf, (size_t)n, needle, strlen(needle)))
			return true;
	}
	return false;
}

static const json_t *find_object(const json_t *objects, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach (objects, i, o)
		if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
		    strcmp(json_string_value(
				   json_object_get(json_object_get(o, "metadata"), "name")),
			   name) == 0)
			return o;
	return NULL;
}

static void test_render(void **state)
{
	struct up_manifests *tpl = NULL;
	struct up_agent_prepared *p = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	struct up_ca *ca = NULL;
	json_t *problems = json_array(), *objects = NULL, *doc, *vol;
	const json_t *pod;
	struct home h;
	char err[512] = "";
	size_t i;

	home_new(&h, "valid");
	assert_int_equal(run(&h, NULL, NULL, true, &p, err, sizeof(err)), 0);
	assert_int_equal(up_ruleset_load_agent_prepared(rs, &up_agent_claude, p, problems), 0);
	assert_int_equal(up_ruleset_finish(rs, false, problems), 0);
	/* header values are taken as written: the token is literal, nothing to resolve */
	for (i = 0; i < up_ruleset_count(rs); i++)
		for (size_t j = 0; j < up_ruleset_get(rs, i)->n_headers; j++) {
			struct up_rule_header *hd = &up_ruleset_get(rs, i)->headers[j];
			assert_int_equal(up_rule_header_set_value(hd, hd->value), 0);
		}
	doc = up_ruleset_render(rs, true);
	if (up_manifests_load(MANIFESTS, &tpl, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	assert_int_equal(up_ca_new("0123456789ab", NOW, NOW + 86400, &ca, err, sizeof(err)), 0);
	struct up_session_spec spec = {
		.id = "0123456789ab",
		.owner = "5f3c2a1b9d8e7f60",
		.created_at = NOW,
		.expires_at = NOW + 86400,
		.cwd = h.dir,
		.agent = "claude",
		.mode = "anthropic",
		.uid = 1000,
		.gid = 1000,
		.user = "u",
		.home = h.dir,
		.agent_image = "a:1",
		.mitm_image = "m:1",
		.rules = doc,
		.ca_cert_pem = ca->cert_pem,
		.ca_key_pem = ca->key_pem,
		.contrib = p->contrib,
	};
	if (up_manifests_render(tpl, &spec, &objects, err, sizeof(err)) < 0)
		fail_msg("render: %s", err);
	assert_true(object_holds(find_object(objects, "Secret", UP_MANIFEST_RULES_SECRET),
				 "sk-ant-oat01-" SENTINEL "-access"));
	pod = find_object(objects, "Pod", "agent");
	assert_non_null(pod);
	json_array_foreach (json_object_get(json_object_get(pod, "spec"), "volumes"), i, vol) {
		json_t *sec = json_object_get(vol, "secret"),
		       *cm = json_object_get(vol, "configMap");
		const json_t *o =
			sec  ? find_object(objects, "Secret",
					   json_string_value(json_object_get(sec, "secretName")))
			: cm ? find_object(objects, "ConfigMap",
					   json_string_value(json_object_get(cm, "name")))
			     : NULL;
		if (!sec && !cm)
			continue;
		assert_non_null(o);
		if (object_holds(o, SENTINEL))
			fail_msg("the agent pod mounts %s, which holds a real credential",
				 json_string_value(json_object_get(vol, "name")));
	}
	json_decref(objects);
	json_decref(doc);
	json_decref(problems);
	up_ca_free(ca);
	up_manifests_free(tpl);
	up_ruleset_free(rs);
	up_agent_prepared_free(p);
	home_done(&h);
}

/* ---------------------------------------------------------------- quoting */

static const struct {
	const char *arg, *quoted;
} quote_cases[] = {
	{"plain", "plain"},
	{"--flag=a/b.c:d,e+f@g%h^i", "--flag=a/b.c:d,e+f@g%h^i"},
	{"", "''"},
	{"two words", "'two words'"},
	{"it's", "'it'\\''s'"},
	{"'", "''\\'''"},
	{"\"double\"", "'\"double\"'"},
	{"$(rm -rf /)", "'$(rm -rf /)'"},
	{"`id`", "'`id`'"},
	{"a\nb", "'a\nb'"},
	{"explain this; rm -rf / && echo $HOME | cat > x",
	 "'explain this; rm -rf / && echo $HOME | cat > x'"},
	{"*?[]{}~!#&", "'*?[]{}~!#&'"},
	{"\\", "'\\'"},
	{"tab\there", "'tab\there'"},
};

/* Runs `printf '%s\0' QUOTED` through /bin/sh and returns what it printed. */
static size_t shell_roundtrip(const char *quoted, char *out, size_t len)
{
	char *cmd = NULL;
	FILE *f;
	size_t n;

	assert_true(asprintf(&cmd, "printf '%%s\\0' %s", quoted) > 0);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, len, f);
	assert_int_equal(pclose(f), 0);
	free(cmd);
	return n;
}

static void test_quoting(void **state)
{
	const char *all[sizeof(quote_cases) / sizeof(quote_cases[0]) + 1];
	char out[4096], *q;
	size_t n, i, off = 0;

	for (i = 0; i < sizeof(quote_cases) / sizeof(quote_cases[0]); i++) {
		const char *one[] = {quote_cases[i].arg, NULL};
		assert_int_equal(up_shell_quote_argv(one, &q), 0);
		assert_string_equal(q, quote_cases[i].quoted);
		free(q);
		all[i] = quote_cases[i].arg;
	}
	all[i] = NULL;
	/* all of them at once, through a real shell: each comes back as one argument */
	assert_int_equal(up_shell_quote_argv(all, &q), 0);
	n = shell_roundtrip(q, out, sizeof(out));
	free(q);
	for (i = 0; all[i]; i++) {
		assert_true(off < n);
		assert_string_equal(out + off, all[i]);
		off += strlen(all[i]) + 1;
	}
	assert_int_equal(off, n);
}

static void test_quoting_limits(void **state)
{
	const char *many[UP_AGENT_MAX_ARGS + 2];
	char *q = NULL, *big = malloc(UP_AGENT_MAX_ARGS_LEN + 1);
	const char *one[] = {big, NULL};

	for (size_t i = 0; i <= UP_AGENT_MAX_ARGS; i++)
		many[i] = "x";
	many[UP_AGENT_MAX_ARGS + 1] = NULL;
	assert_int_equal(up_shell_quote_argv(many, &q), -E2BIG);
	memset(big, 'a', UP_AGENT_MAX_ARGS_LEN);
	big[UP_AGENT_MAX_ARGS_LEN] = '\0';
	assert_int_equal(up_shell_quote_argv(one, &q), -E2BIG);
	free(big);
}

/* The passthrough args in the pod's command: `-d` first, then the skip flag, then them. */
static void test_command_args(void **state)
{
	const char *const args[] = {"-p", "explain this; rm -rf /", "it's $(x)", "a\nb", NULL};
	struct up_agent_input in = {
		.home = NULL, .user = "u", .args = args, .debug = true, .now = NOW};
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512], out[1024];
	size_t n;

	home_new(&h, "valid");
	in.home = in.cwd = h.dir;
	in.session_id = "0123456789ab";
	assert_int_equal(up_agent_prepare(&up_agent_claude, &in, &p, err, sizeof(err)), 0);
	assert_string_equal(p->contrib.command[2],
			    "exec claude -d --allow-dangerously-skip-permissions -p "
			    "'explain this; rm -rf /' 'it'\\''s $(x)' 'a\nb'");
	assert_non_null(volume(p, "claude-debug"));
	/* what bash -lc would run, minus exec: through sh, each argument intact */
	n = shell_roundtrip(p->contrib.command[2] + strlen("exec claude "), out, sizeof(out));
	assert_string_equal(out, "-d");
	assert_string_equal(out + 3, "--allow-dangerously-skip-permissions");
	assert_int_equal(n, 3 + 37 + 3 + strlen(args[1]) + 1 + strlen(args[2]) + 1 + 4);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_registry(void **state)
{
	char buf[256];

	assert_ptr_equal(up_agent_find("claude"), &up_agent_claude);
	assert_ptr_equal(up_agent_find("codex"), &up_agent_codex);
	assert_null(up_agent_find("cursor"));
	assert_null(up_agent_find(NULL));
	assert_string_equal(up_agent_find_mode(&up_agent_claude, NULL)->name, "anthropic");
	assert_string_equal(up_agent_find_mode(&up_agent_claude, "bedrock")->name, "bedrock");
	assert_null(up_agent_find_mode(&up_agent_claude, "vertex"));
	assert_int_equal(up_agent_describe_all(buf, sizeof(buf)), 0);
	assert_string_equal(buf,
			    "claude (modes anthropic, bedrock); codex (modes chatgpt, api_key); "
			    "gemini (modes google, api_key); opencode (modes anthropic, openai)");
	assert_int_equal(up_agent_rules_path(&up_agent_claude, "/opt/x", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/opt/x/agents/claude/default-rules.yaml");
	assert_null(up_agent_prepared_free(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_refresh_fails),
		cmocka_unit_test(test_settings_table),
		cmocka_unit_test(test_mcp_redaction),
		cmocka_unit_test(test_claude_md),
		cmocka_unit_test(test_anthropic_contribution),
		cmocka_unit_test(test_bedrock_contribution),
		cmocka_unit_test(test_rules_only),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_quoting),
		cmocka_unit_test(test_quoting_limits),
		cmocka_unit_test(test_command_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
