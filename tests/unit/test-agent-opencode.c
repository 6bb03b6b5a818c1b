/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OpenCode agent's prepare() against homes the tests write: every error message, the
 * auth rule of each mode and login type, the pod's fake auth.json (parsed as opencode
 * parses it), the config without its secrets, JSONC, the doctor line, and sentinels: no
 * real secret (every one holds "uplink-sentinel") in anything the agent pod mounts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/agent.h"
#include "agents/opencode/opencode.h"
#include "ca.h"
#include "manifests.h"
#include "rules.h"

#define MANIFESTS UP_TEST_DATA_DIR "/../../manifests"
#define SENTINEL  "uplink-sentinel"
#define NOW	  1700000000LL
#define AUTH_FILE ".local/share/opencode/auth.json"
#define CONF_DIR  ".config/opencode"

static const char api_keys[] =
	"{\"anthropic\": {\"type\": \"api\", \"key\": \"sk-ant-api03-uplink-sentinel-key\"},"
	" \"openai\": {\"type\": \"api\", \"key\": \"sk-proj-uplink-sentinel-key\"},"
	" \"github-copilot\": {\"type\": \"oauth\", \"refresh\": \"gho-uplink-sentinel\","
	" \"access\": \"x\", \"expires\": 0}}";
static const char oauth[] =
	"{\"anthropic\": {\"type\": \"oauth\", \"refresh\": \"sk-ant-ort01-uplink-sentinel-r\","
	" \"access\": \"sk-ant-oat01-uplink-sentinel-a\", \"expires\": 1700003600000},"
	" \"openai\": {\"type\": \"oauth\", \"refresh\": \"rt-uplink-sentinel-r\","
	" \"access\": \"at-uplink-sentinel-a\", \"expires\": 1700007200000,"
	" \"accountId\": \"acct-42\"}}";

struct home {
	char dir[64];
};

static void put(struct home *h, const char *rel, const char *text)
{
	char path[256], cmd[512];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/%s", h->dir, rel);
	(void)snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void home_new(struct home *h, const char *auth)
{
	(void)snprintf(h->dir, sizeof(h->dir), "/tmp/test-opencode-XXXXXX");
	assert_non_null(mkdtemp(h->dir));
	if (auth)
		put(h, AUTH_FILE, auth);
}

static void home_done(struct home *h)
{
	char cmd[128];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
	assert_int_equal(system(cmd), 0);
}

static int run(struct home *h, const char *mode, bool rules_only, struct up_agent_prepared **p,
	       char *err, size_t len)
{
	const char *const args[] = {"run", "it's fine", NULL};
	struct up_agent_input in = {
		.mode = mode,
		.home = h->dir,
		.uid = 1000,
		.gid = 1000,
		.user = "u",
		.cwd = h->dir,
		.args = args,
		.session_id = "0123456789ab",
		.rules_only = rules_only,
		.now = (time_t)NOW,
		/* nothing here may be refreshed for real */
		.token_url = "http://127.0.0.1:9/v1/oauth/token",
	};

	return up_agent_prepare(&up_agent_opencode, &in, p, err, len);
}

static void expect_error(const char *auth, const char *mode, int code, const char *msg)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[1024] = "";

	home_new(&h, auth);
	assert_int_equal(run(&h, mode, false, &p, err, sizeof(err)), code);
	assert_null(p);
	assert_string_equal(err, msg);
	assert_null(strstr(err, SENTINEL));
	home_done(&h);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error(NULL, NULL, -ENOENT,
		     "~/.local/share/opencode/auth.json not found: run `opencode auth login` on "
		     "this machine and log in");
	expect_error("{\"openai\": {\"type\": \"api\", \"key\": \"k\"}}", NULL, -ENOENT,
		     "~/.local/share/opencode/auth.json has no 'anthropic' login: run `opencode "
		     "auth login` on this machine and choose Anthropic");
	expect_error("{\"anthropic\": {\"type\": \"api\", \"key\": \"k\"}}", "openai", -ENOENT,
		     "~/.local/share/opencode/auth.json has no 'openai' login: run `opencode "
		     "auth login` on this machine and choose OpenAI");
	expect_error("{\"anthropic\": {\"type\": \"wellknown\"}}", NULL, -EINVAL,
		     "~/.local/share/opencode/auth.json: 'anthropic' is neither an API key nor an "
		     "OAuth login (type \"api\" or \"oauth\"): run `opencode auth login` on this "
		     "machine");
	expect_error("{\"anthropic\": {\"type\": \"api\", \"key\": \"a b uplink-sentinel\"}}", NULL,
		     -EINVAL,
		     "~/.local/share/opencode/auth.json: 'anthropic.key' is missing or not an API "
		     "key (unexpected characters): run `opencode auth login` on this machine");
	expect_error("{\"anthropic\": {\"type\": \"oauth\", \"access\": \"a\"}}", NULL, -EINVAL,
		     "~/.local/share/opencode/auth.json: 'anthropic.expires' (milliseconds since "
		     "1970) is missing: run `opencode auth login` on this machine");
	expect_error("{\"anthropic\": \"uplink-sentinel\",", NULL, -EINVAL,
		     "~/.local/share/opencode/auth.json is not valid JSON (line 1, column 32): "
		     "fix it, or move it aside and run `opencode` again");
	/* an expired OAuth login whose refresh fails: the sentence says what to do */
	{
		struct up_agent_prepared *p = NULL;
		struct home h;
		char err[1024] = "";

		home_new(&h, "{\"anthropic\": {\"type\": \"oauth\", \"access\": \"a\", "
			     "\"refresh\": \"r\", \"expires\": 1600000000000}}");
		assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), -EIO);
		assert_non_null(
			strstr(err, "opencode's Anthropic login in "
				    "~/.local/share/opencode/auth.json has expired and "
				    "refreshing it failed (http://127.0.0.1:9/v1/oauth/token: "));
		assert_non_null(strstr(err, "): run `opencode auth login` on this machine"));
		home_done(&h);
	}
}

/* The volume `name`'s one file. */
static const struct up_agent_file *file_of(const struct up_agent_prepared *p, const char *name)
{
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		if (strcmp(p->contrib.volumes[i].name, name) == 0) {
			assert_int_equal(p->contrib.volumes[i].n_files, 1);
			return &p->contrib.volumes[i].files[0];
		}
	fail_msg("no volume %s", name);
	return NULL;
}

static json_t *file_json(const struct up_agent_prepared *p, const char *name)
{
	const struct up_agent_file *f = file_of(p, name);
	json_t *doc = json_loadb(f->data, f->len, JSON_REJECT_DUPLICATES, NULL);

	assert_non_null(doc);
	return doc;
}

/* No real secret anywhere in the contribution: env, files, command, warnings. */
static void assert_no_sentinel(const struct up_agent_prepared *p)
{
	for (size_t i = 0; i < p->contrib.n_env; i++)
		assert_null(strstr(p->contrib.env[i].value, SENTINEL));
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		for (size_t j = 0; j < p->contrib.volumes[i].n_files; j++)
			assert_null(memmem(p->contrib.volumes[i].files[j].data,
					   p->contrib.volumes[i].files[j].len, SENTINEL,
					   strlen(SENTINEL)));
	for (size_t i = 0; p->contrib.command && p->contrib.command[i]; i++)
		assert_null(strstr(p->contrib.command[i], SENTINEL));
	for (size_t i = 0; i < p->n_warnings; i++)
		assert_null(strstr(p->warnings[i], SENTINEL));
}

/* The one auth rule, parsed. */
static json_t *auth_rule(const struct up_agent_prepared *p)
{
	json_t *doc = json_loadb(p->auth_rules, p->auth_rules_len, 0, NULL);
	json_t *rules = json_object_get(doc, "rules"), *r;

	assert_int_equal(json_array_size(rules), 1);
	r = json_incref(json_array_get(rules, 0));
	json_decref(doc);
	assert_string_equal(json_string_value(json_object_get(r, "name")), "opencode-auth");
	return r;
}

static const char *header(const json_t *rule, const char *name)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(rule, "inject"), "headers"), name));
}

static const char *host_of(const json_t *rule)
{
	return json_string_value(json_array_get(json_object_get(rule, "hosts"), 0));
}

/* The fake entry of the pod's auth.json: the only one, shaped as opencode parses it. */
static json_t *fake_entry(const struct up_agent_prepared *p, const char *provider, const char *type)
{
	json_t *doc = file_json(p, "opencode-fake-auth"), *e;

	assert_int_equal(json_object_size(doc), 1);
	e = json_incref(json_object_get(doc, provider));
	json_decref(doc);
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "type")), type);
	return e;
}

static void test_anthropic_key(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";
	json_t *rule, *e;

	(void)state;
	home_new(&h, api_keys);
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), 0);
	rule = auth_rule(p);
	assert_string_equal(host_of(rule), "api\\.anthropic\\.com");
	assert_string_equal(header(rule, "x-api-key"), "sk-ant-api03-uplink-sentinel-key");
	assert_null(header(rule, "Authorization"));
	assert_null(json_object_get(rule, "paths"));
	assert_int_equal(json_array_size(json_object_get(rule, "methods")), 4);
	assert_int_equal(p->expires_at, 0);
	e = fake_entry(p, "anthropic", "api");
	assert_int_equal(strncmp(json_string_value(json_object_get(e, "key")), OC_FAKE_PREFIX,
				 strlen(OC_FAKE_PREFIX)),
			 0);
	assert_int_equal(json_string_length(json_object_get(e, "key")),
			 strlen(OC_FAKE_PREFIX) + 32);
	assert_string_equal(file_of(p, "opencode-fake-auth")->mount_path,
			    strcat(strcpy((char[128]){0}, h.dir), "/" AUTH_FILE));
	assert_no_sentinel(p);
	json_decref(e);
	json_decref(rule);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_anthropic_oauth(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";
	json_t *rule, *e, *conf;

	(void)state;
	home_new(&h, oauth);
	assert_int_equal(run(&h, "anthropic", false, &p, err, sizeof(err)), 0);
	rule = auth_rule(p);
	assert_string_equal(host_of(rule), "api\\.anthropic\\.com");
	assert_string_equal(header(rule, "Authorization"), "Bearer sk-ant-oat01-uplink-sentinel-a");
	assert_string_equal(header(rule, "anthropic-beta"), OC_ANTHROPIC_OAUTH_BETA);
	assert_null(header(rule, "x-api-key"));
	assert_int_equal(p->expires_at, NOW + 3600);
	e = fake_entry(p, "anthropic", "oauth");
	assert_int_equal(json_integer_value(json_object_get(e, "expires")),
			 (NOW + OC_FAKE_LIFETIME_S) * 1000);
	assert_non_null(json_string_value(json_object_get(e, "refresh")));
	/* opencode sends it as Bearer from the provider's authToken option (no plugin needed) */
	conf = file_json(p, "opencode-config");
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(
				json_object_get(json_object_get(conf, "provider"), "anthropic"),
				"options"),
			"authToken")),
		json_string_value(json_object_get(e, "access")));
	assert_no_sentinel(p);
	json_decref(conf);
	json_decref(e);
	json_decref(rule);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_openai(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";
	json_t *rule, *e;

	(void)state;
	home_new(&h, api_keys);
	assert_int_equal(run(&h, "openai", false, &p, err, sizeof(err)), 0);
	rule = auth_rule(p);
	assert_string_equal(host_of(rule), "api\\.openai\\.com");
	assert_string_equal(header(rule, "Authorization"), "Bearer sk-proj-uplink-sentinel-key");
	e = fake_entry(p, "openai", "api");
	assert_no_sentinel(p);
	json_decref(e);
	json_decref(rule);
	up_agent_prepared_free(p);
	home_done(&h);

	/* the ChatGPT login: the codex backend only, with the account header */
	home_new(&h, oauth);
	assert_int_equal(run(&h, "openai", false, &p, err, sizeof(err)), 0);
	rule = auth_rule(p);
	assert_string_equal(host_of(rule), "chatgpt\\.com");
	assert_string_equal(json_string_value(json_array_get(json_object_get(rule, "paths"), 0)),
			    "/backend-api/codex/.*");
	assert_string_equal(header(rule, "Authorization"), "Bearer at-uplink-sentinel-a");
	assert_string_equal(header(rule, "ChatGPT-Account-Id"), "acct-42");
	assert_int_equal(p->expires_at, NOW + 7200);
	e = fake_entry(p, "openai", "oauth");
	assert_null(json_object_get(e, "accountId"));
	assert_no_sentinel(p);
	json_decref(e);
	json_decref(rule);
	up_agent_prepared_free(p);
	home_done(&h);
}

static bool warned(const struct up_agent_prepared *p, const char *words)
{
	for (size_t i = 0; i < p->n_warnings; i++)
		if (strstr(p->warnings[i], words))
			return true;
	return false;
}

static void test_config(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";
	json_t *conf, *perm;

	(void)state;
	home_new(&h, api_keys);
	put(&h, CONF_DIR "/config.json",
	    "{\"model\": \"old\", \"theme\": \"dark\", \"provider\": {\"anthropic\": "
	    "{\"options\": {\"baseURL\": \"https://api.anthropic.com/v1\", \"timeout\": 5}}}}");
	put(&h, CONF_DIR "/opencode.json", "{\"model\": \"anthropic/claude-sonnet-4-6\"}");
	put(&h, CONF_DIR "/opencode.jsonc",
	    "{\n  // the keys: \"apiKey\": \"x\"\n"
	    "  \"provider\": {\"anthropic\": {\"options\": {\"apiKey\": \"uplink-sentinel-1\"}}},\n"
	    "  \"mcp\": {\"gh\": {\"type\": \"remote\", \"url\": \"https://a//b\", /* c */\n"
	    "    \"headers\": {\"Authorization\": \"Bearer uplink-sentinel-2\"},\n"
	    "    \"environment\": {\"GITHUB_TOKEN\": \"uplink-sentinel-3\", \"DEBUG\": \"1\"}}},\n"
	    "  \"permission\": {\"bash\": {\"*\": \"ask\", \"rm *\": \"deny\"}, \"edit\": "
	    "\"ask\"},\n"
	    "  \"plugin\": [\"opencode-foo\"],\n"
	    "  \"autoupdate\": true,\n}\n");
	put(&h, CONF_DIR "/AGENTS.md", "Be brief.");
	put(&h, CONF_DIR "/commands/x.md", "x");
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), 0);
	conf = file_json(p, "opencode-config");
	/* merged in opencode's order: opencode.json wins over config.json */
	assert_string_equal(json_string_value(json_object_get(conf, "model")),
			    "anthropic/claude-sonnet-4-6");
	assert_string_equal(json_string_value(json_object_get(conf, "theme")), "dark");
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(
				json_object_get(json_object_get(conf, "provider"), "anthropic"),
				"options"),
			"baseURL")),
		"https://api.anthropic.com/v1");
	/* each secret-looking key is gone, and named in a warning */
	assert_true(warned(p, "~/.config/opencode/opencode.json: "
			      "provider.anthropic.options.apiKey looks like a credential"));
	assert_true(warned(p, "mcp.gh.headers.Authorization looks like a credential"));
	assert_true(warned(p, "mcp.gh.environment.GITHUB_TOKEN looks like a credential"));
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(json_object_get(conf, "mcp"), "gh"),
					"environment"),
			"DEBUG")),
		"1");
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(json_object_get(conf, "mcp"), "gh"), "url")),
			    "https://a//b");
	/* runs without asking, but what the host denies stays denied */
	perm = json_object_get(conf, "permission");
	assert_string_equal(json_string_value(json_object_get(perm, "*")), "allow");
	assert_string_equal(json_string_value(json_object_get(perm, "external_directory")),
			    "allow");
	assert_string_equal(json_string_value(json_object_get(perm, "edit")), "allow");
	assert_string_equal(json_string_value(json_object_get(json_object_get(perm, "bash"), "*")),
			    "allow");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(perm, "bash"), "rm *")), "deny");
	assert_true(json_is_false(json_object_get(conf, "autoupdate")));
	assert_string_equal(json_string_value(json_object_get(conf, "share")), "disabled");
	/* AGENTS.md: the host's, then the sandbox note with the 403 JSON */
	assert_int_equal(
		strncmp(file_of(p, "opencode-agents-md")->data, "Be brief.\n\n## Sandbox", 21), 0);
	assert_non_null(strstr(file_of(p, "opencode-agents-md")->data, "denied by uplink"));
	assert_no_sentinel(p);
	json_decref(conf);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_config_errors(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";

	(void)state;
	home_new(&h, api_keys);
	put(&h, CONF_DIR "/opencode.json", "{\"a\": \"uplink-sentinel\",\n  oops}");
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "~/.config/opencode/opencode.json is not a JSON object (line 2, "
				 "column 6): fix it, or move it aside");
	home_done(&h);
}

static void test_jsonc(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"{\"a\": 1, }", "{\"a\": 1  }"},
		{"[1, 2,\n]", "[1, 2 \n]"},
		{"{\"u\": \"http://x\"} // c", "{\"u\": \"http://x\"}     "},
		{"{\"s\": \"a\\\"//b\"}", "{\"s\": \"a\\\"//b\"}"},
		{"{/* x\n y */\"a\": [1, /* z */]}", "{    \n     \"a\": [1         ]}"},
		{"{\"a\": \",}\"}", "{\"a\": \",}\"}"},
		{"/* open", "       "},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[128];
		(void)snprintf(buf, sizeof(buf), "%s", cases[i].in);
		oc_jsonc_strip(buf, strlen(buf));
		assert_string_equal(buf, cases[i].out);
	}
}

static void test_rules_only(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array();
	struct home h;
	char err[256];
	const struct up_rule *r;

	(void)state;
	home_new(&h, oauth);
	assert_int_equal(run(&h, "openai", true, &p, err, sizeof(err)), 0);
	assert_int_equal(p->contrib.n_volumes, 0);
	assert_null(p->contrib.command);
	assert_int_equal(up_ruleset_load_agent_prepared(rs, &up_agent_opencode, p, problems), 0);
	assert_int_equal(up_ruleset_finish(rs, false, problems), 0);
	assert_int_equal(json_array_size(problems), 0);
	r = up_ruleset_match(rs, "POST", "chatgpt.com", "/backend-api/codex/responses");
	assert_string_equal(r->name, "opencode-auth");
	assert_int_equal(r->layer, UP_LAYER_AUTH);
	/* the rest of chatgpt.com is not the auth rule's */
	r = up_ruleset_match(rs, "POST", "chatgpt.com", "/backend-api/conversation");
	assert_true(!r || strcmp(r->name, "opencode-auth") != 0);
	json_decref(problems);
	up_ruleset_free(rs);
	up_agent_prepared_free(p);
	home_done(&h);
}

/* The contribution through the real renderer: only the mitm's rules Secret holds a real
 * credential; no Secret or ConfigMap the agent pod mounts does. */
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

static void render_one(const char *auth, const char *mode, const char *secret)
{
	struct up_manifests *tpl = NULL;
	struct up_agent_prepared *p = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	struct up_ca *ca = NULL;
	json_t *problems = json_array(), *objects = NULL, *doc, *vol;
	const json_t *pod;
	struct home h;
	char err[512] = "";
	size_t i, mounted = 0;

	home_new(&h, auth);
	assert_int_equal(run(&h, mode, false, &p, err, sizeof(err)), 0);
	assert_int_equal(up_ruleset_load_agent_prepared(rs, &up_agent_opencode, p, problems), 0);
	assert_int_equal(up_ruleset_finish(rs, false, problems), 0);
	for (i = 0; i < up_ruleset_count(rs); i++)
		for (size_t j = 0; j < up_ruleset_get(rs, i)->n_headers; j++) {
			struct up_rule_header *hd = &up_ruleset_get(rs, i)->headers[j];
			assert_int_equal(up_rule_header_set_value(hd, hd->value), 0);
		}
	doc = up_ruleset_render(rs, true);
	if (up_manifests_load(MANIFESTS, &tpl, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	assert_int_equal(
		up_ca_new("0123456789ab", (time_t)NOW, (time_t)NOW + 86400, &ca, err, sizeof(err)),
		0);
	struct up_session_spec spec = {
		.id = "0123456789ab",
		.owner = "5f3c2a1b9d8e7f60",
		.created_at = (time_t)NOW,
		.expires_at = (time_t)NOW + 86400,
		.cwd = h.dir,
		.agent = "opencode",
		.mode = mode,
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
	assert_true(object_holds(find_object(objects, "Secret", UP_MANIFEST_RULES_SECRET), secret));
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
		mounted++;
		if (object_holds(o, SENTINEL))
			fail_msg("the agent pod mounts %s, which holds a real credential",
				 json_string_value(json_object_get(vol, "name")));
	}
	assert_true(mounted >= 3); /* the fake auth.json, opencode.json, AGENTS.md */
	json_decref(objects);
	json_decref(doc);
	json_decref(problems);
	up_ca_free(ca);
	up_manifests_free(tpl);
	up_ruleset_free(rs);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_render(void **state)
{
	(void)state;
	render_one(api_keys, "anthropic", "sk-ant-api03-uplink-sentinel-key");
	render_one(api_keys, "openai", "sk-proj-uplink-sentinel-key");
	render_one(oauth, "anthropic", "sk-ant-oat01-uplink-sentinel-a");
	render_one(oauth, "openai", "at-uplink-sentinel-a");
}

static void test_command(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[256];
	bool dirs = false;

	(void)state;
	home_new(&h, api_keys);
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), 0);
	assert_string_equal(p->contrib.entrypoint[0], UP_AGENT_ENTRYPOINT);
	assert_string_equal(p->contrib.command[2], "exec opencode run 'it'\\''s fine'");
	for (size_t i = 0; i < p->contrib.n_env; i++)
		if (strcmp(p->contrib.env[i].name, "UPLINK_AGENT_DIRS") == 0)
			dirs = strstr(p->contrib.env[i].value, ".local/share/opencode") != NULL;
	assert_true(dirs);
	up_agent_prepared_free(p);
	home_done(&h);
}

static void doctor_case(const char *auth, const char *status, const char *words)
{
	struct up_agent_check c[UP_AGENT_MAX_CHECKS];
	struct home h;
	struct up_agent_input in = {.now = (time_t)NOW};

	home_new(&h, auth);
	in.home = h.dir;
	assert_int_equal(up_agent_opencode.doctor(&up_agent_opencode, &in, c, UP_AGENT_MAX_CHECKS),
			 1);
	assert_string_equal(c[0].name, "opencode login");
	assert_string_equal(c[0].status, status);
	if (!strstr(c[0].detail, words))
		fail_msg("'%s' not in '%s'", words, c[0].detail);
	assert_null(strstr(c[0].detail, SENTINEL));
	assert_int_equal(strcmp(status, "ok") == 0, c[0].fix[0] == '\0');
	home_done(&h);
}

static void test_doctor(void **state)
{
	(void)state;
	doctor_case(NULL, "warn", "auth.json is missing");
	doctor_case("{}", "warn", "has neither an Anthropic nor an OpenAI login");
	doctor_case(api_keys, "ok", "anthropic: an API key; openai: an API key");
	doctor_case(oauth, "ok", "anthropic: an OAuth login whose token lasts 60 more minutes");
	doctor_case("{\"openai\": {\"type\": \"oauth\", \"access\": \"a\", \"expires\": 0}}",
		    "warn", "openai: the OAuth login has expired and has no refresh token");
}

static void test_registry(void **state)
{
	(void)state;
	assert_ptr_equal(up_agent_find("opencode"), &up_agent_opencode);
	assert_string_equal(up_agent_find_mode(&up_agent_opencode, NULL)->name, "anthropic");
	assert_string_equal(up_agent_find_mode(&up_agent_opencode, "openai")->flag, "--openai");
	assert_null(up_agent_find_mode(&up_agent_opencode, "bedrock"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),      cmocka_unit_test(test_errors),
		cmocka_unit_test(test_anthropic_key), cmocka_unit_test(test_anthropic_oauth),
		cmocka_unit_test(test_openai),	      cmocka_unit_test(test_config),
		cmocka_unit_test(test_config_errors), cmocka_unit_test(test_jsonc),
		cmocka_unit_test(test_rules_only),    cmocka_unit_test(test_render),
		cmocka_unit_test(test_command),	      cmocka_unit_test(test_doctor),
	};

	unsetenv("XDG_DATA_HOME");
	unsetenv("XDG_CONFIG_HOME");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
