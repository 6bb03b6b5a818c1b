/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Gemini CLI agent's prepare() against homes made here: the errors in full, the
 * settings.json transform rule by rule (comments, secret-named strings, the forced keys), the
 * fake login as the CLI's OAuth client parses it, both modes' auth rules, and the rendered
 * session: the sentinels of the host login only in the mitm's rules Secret, never in an
 * object the agent pod mounts.
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
#include "agents/gemini/gemini.h"
#include "ca.h"
#include "manifests.h"
#include "rules.h"

#define MANIFESTS UP_TEST_DATA_DIR "/../../manifests"
#define SENTINEL  "uplink-sentinel"
#define NOW	  1700000000
#define CREDS_OK                                                                                \
	"{\"access_token\": \"ya29." SENTINEL "-access\", \"refresh_token\": \"1//" SENTINEL    \
	"-refresh\", \"scope\": \"s\", \"token_type\": \"Bearer\", \"id_token\": \"e." SENTINEL \
	"\", \"expiry_date\": 1700003600000}"

struct home {
	char dir[64];
};

static void put(struct home *h, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/.gemini/%s", h->dir, name);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void home_new(struct home *h, const char *creds, const char *settings)
{
	char path[128];

	(void)snprintf(h->dir, sizeof(h->dir), "/tmp/test-gemini-XXXXXX");
	assert_non_null(mkdtemp(h->dir));
	(void)snprintf(path, sizeof(path), "%s/.gemini", h->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	if (creds)
		put(h, "oauth_creds.json", creds);
	if (settings)
		put(h, "settings.json", settings);
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
	struct up_agent_input in = {
		.mode = mode,
		.home = h->dir,
		.uid = 1000,
		.gid = 1000,
		.user = "u",
		.cwd = h->dir,
		.session_id = "0123456789ab",
		.now = NOW,
		.rules_only = rules_only,
		/* never reached: the tests' tokens are fresh, or the refresh fails first */
		.token_url = "http://127.0.0.1:1/token",
	};

	return up_agent_prepare(&up_agent_gemini, &in, p, err, len);
}

static const struct up_agent_file *file_named(const struct up_agent_prepared *p, const char *key)
{
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		for (size_t j = 0; j < p->contrib.volumes[i].n_files; j++)
			if (strcmp(p->contrib.volumes[i].files[j].key, key) == 0)
				return &p->contrib.volumes[i].files[j];
	return NULL;
}

static const char *env_named(const struct up_agent_prepared *p, const char *name)
{
	for (size_t i = 0; i < p->contrib.n_env; i++)
		if (strcmp(p->contrib.env[i].name, name) == 0)
			return p->contrib.env[i].value;
	return NULL;
}

/* ---------------------------------------------------------------- the registry, errors */

static void test_registry(void **state)
{
	(void)state;
	assert_ptr_equal(up_agent_find("gemini"), &up_agent_gemini);
	assert_string_equal(up_agent_find_mode(&up_agent_gemini, NULL)->name, "google");
	assert_string_equal(up_agent_find_mode(&up_agent_gemini, "api_key")->flag, "--api-key");
	assert_null(up_agent_find_mode(&up_agent_gemini, "vertex"));
	assert_non_null(up_agent_gemini.doctor);
}

static void expect_error(const char *creds, const char *settings, int code, const char *msg)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[1024] = "";

	home_new(&h, creds, settings);
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), code);
	assert_null(p);
	assert_string_equal(err, msg);
	assert_null(strstr(err, SENTINEL));
	home_done(&h);
}

#define RELOGIN \
	"log in again by running `gemini` on this machine (Login with Google), or use --api-key"

static void test_errors(void **state)
{
	(void)state;
	expect_error(NULL, NULL, -ENOENT,
		     "~/.gemini/oauth_creds.json not found: run `gemini` once on this machine and "
		     "choose Login with Google, or use --api-key");
	expect_error("{\"access_token\": \"" SENTINEL "\"", NULL, -EINVAL,
		     "~/.gemini/oauth_creds.json is not valid JSON (line 1, column 34): fix it, or "
		     "move it aside and run `gemini` again");
	expect_error("{\"access_token\": \"ya29.x\"}", NULL, -EINVAL,
		     "~/.gemini/oauth_creds.json has no 'expiry_date' (milliseconds since 1970): "
		     "" RELOGIN);
	/* expired, and the refresh cannot reach its endpoint */
	expect_error("{\"access_token\": \"ya29.x\", \"expiry_date\": 1}", NULL, -EIO,
		     "the Google token in ~/.gemini/oauth_creds.json has expired and refreshing it "
		     "failed (~/.gemini/oauth_creds.json has no usable 'refresh_token'): " RELOGIN);
	expect_error(CREDS_OK, "{\"a\": [1, 2,]}", -EINVAL,
		     "~/.gemini/settings.json is not valid JSON (line 1, column 13): fix it, or "
		     "move it aside");
	expect_error(CREDS_OK, "[]", -EINVAL,
		     "~/.gemini/settings.json does not hold a JSON object");
}

/* ---------------------------------------------------------------- settings */

static const struct {
	const char *host, *pod;
	size_t warnings;
} settings_cases[] = {
	{"{}",
	 "{\"security\": {\"auth\": {\"selectedType\": \"oauth-personal\"}}, \"general\": "
	 "{\"enableAutoUpdate\": false, \"enableAutoUpdateNotification\": false}}",
	 0},
	/* comments, and comment-like text in strings kept */
	{"// c\n{\"u\": \"http://x//y\", /* b */ \"v\": \"/*no*/\"}",
	 "{\"u\": \"http://x//y\", \"v\": \"/*no*/\", \"security\": {\"auth\": {\"selectedType\": "
	 "\"oauth-personal\"}}, \"general\": {\"enableAutoUpdate\": false, "
	 "\"enableAutoUpdateNotification\": false}}",
	 0},
	/* secret-named strings dropped at any depth, numbers under such names kept */
	{"{\"mcpServers\": {\"a\": {\"env\": {\"API_KEY\": \"" SENTINEL "\", \"X\": \"1\"}, "
	 "\"headers\": {\"authorization\": \"" SENTINEL
	 "\"}, \"oauth\": {\"clientSecret\": \"" SENTINEL
	 "\"}}}, \"model\": {\"maxTokens\": 5, \"sessionTokenLimit\": 7}, \"general\": "
	 "{\"vimMode\": true, \"enableAutoUpdate\": true}, \"security\": {\"auth\": "
	 "{\"enforcedType\": \"vertex-ai\", \"useExternal\": true}}}",
	 "{\"mcpServers\": {\"a\": {\"env\": {\"X\": \"1\"}, \"headers\": {}, \"oauth\": {}}}, "
	 "\"model\": {\"maxTokens\": 5, \"sessionTokenLimit\": 7}, \"general\": {\"vimMode\": "
	 "true, "
	 "\"enableAutoUpdate\": false, \"enableAutoUpdateNotification\": false}, \"security\": "
	 "{\"auth\": {\"selectedType\": \"oauth-personal\"}}}",
	 3},
	/* the old flat key dropped; a non-object "security" replaced */
	{"{\"selectedAuthType\": \"vertex-ai\", \"security\": 3}",
	 "{\"security\": {\"auth\": {\"selectedType\": \"oauth-personal\"}}, \"general\": "
	 "{\"enableAutoUpdate\": false, \"enableAutoUpdateNotification\": false}}",
	 0},
};

static void test_settings(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(settings_cases) / sizeof(settings_cases[0]); i++) {
		struct up_agent_prepared *p = NULL;
		const struct up_agent_file *f;
		json_t *got, *want;
		struct home h;
		char err[512] = "";

		home_new(&h, CREDS_OK, settings_cases[i].host);
		if (run(&h, NULL, false, &p, err, sizeof(err)) < 0)
			fail_msg("case %zu: %s", i, err);
		assert_non_null(f = file_named(p, "settings.json"));
		got = json_loadb(f->data, f->len, 0, NULL);
		want = json_loads(settings_cases[i].pod, 0, NULL);
		assert_non_null(want);
		if (!json_equal(got, want))
			fail_msg("case %zu: %.*s", i, (int)f->len, f->data);
		assert_int_equal(p->n_warnings, settings_cases[i].warnings);
		for (size_t w = 0; w < p->n_warnings; w++)
			assert_null(strstr(p->warnings[w], SENTINEL));
		json_decref(got);
		json_decref(want);
		up_agent_prepared_free(p);
		home_done(&h);
	}
}

/* ---------------------------------------------------------------- the two modes */

static void test_google(void **state)
{
	struct up_agent_prepared *p = NULL;
	const struct up_agent_file *f;
	struct home h;
	char err[512] = "";
	json_t *doc;

	(void)state;
	home_new(&h, CREDS_OK, NULL);
	assert_int_equal(run(&h, "google", false, &p, err, sizeof(err)), 0);
	assert_int_equal(p->expires_at, NOW + 3600);
	assert_non_null(strstr(p->auth_rules, "Bearer ya29." SENTINEL "-access"));
	/* the fake login: what the OAuth client reads, far from its 5-minute refresh margin */
	assert_non_null(f = file_named(p, "oauth_creds.json"));
	assert_null(memmem(f->data, f->len, SENTINEL, strlen(SENTINEL)));
	doc = json_loadb(f->data, f->len, 0, NULL);
	assert_int_equal(json_object_size(doc), 5);
	assert_int_equal(strncmp(json_string_value(json_object_get(doc, "access_token")),
				 GEMINI_FAKE_ACCESS_PREFIX, strlen(GEMINI_FAKE_ACCESS_PREFIX)),
			 0);
	assert_non_null(json_string_value(json_object_get(doc, "refresh_token")));
	assert_string_equal(json_string_value(json_object_get(doc, "token_type")), "Bearer");
	assert_true(json_integer_value(json_object_get(doc, "expiry_date")) >=
		    (json_int_t)(NOW + GEMINI_FAKE_LIFETIME_S) * 1000);
	json_decref(doc);
	assert_string_equal(env_named(p, "GOOGLE_GENAI_USE_GCA"), "true");
	assert_null(env_named(p, "GEMINI_API_KEY"));
	/* nothing the pod gets holds the host's tokens */
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		for (size_t j = 0; j < p->contrib.volumes[i].n_files; j++)
			assert_null(memmem(p->contrib.volumes[i].files[j].data,
					   p->contrib.volumes[i].files[j].len, SENTINEL,
					   strlen(SENTINEL)));
	for (size_t i = 0; i < p->contrib.n_env; i++)
		assert_null(strstr(p->contrib.env[i].value, SENTINEL));
	assert_string_equal(p->contrib.command[2], "exec gemini --yolo");
	up_agent_prepared_free(p);
	home_done(&h);
}

static void test_api_key(void **state)
{
	struct up_agent_prepared *p = NULL;
	struct home h;
	char err[512] = "";

	(void)state;
	home_new(&h, NULL, NULL);
	assert_int_equal(run(&h, "api_key", false, &p, err, sizeof(err)), 0);
	assert_string_equal(p->auth_rules,
			    "{\"rules\":[{\"name\":\"gemini-api-key\",\"hosts\":"
			    "[\"generativelanguage\\\\.googleapis\\\\.com\"],\"methods\":[\"GET\","
			    "\"POST\"],\"inject\":{\"headers\":{\"x-goog-api-key\":"
			    "\"{{keyring:gemini:key}}\"}}}]}");
	assert_int_equal(p->expires_at, 0);
	assert_string_equal(env_named(p, "GEMINI_API_KEY"), GEMINI_KEY_PLACEHOLDER);
	assert_null(file_named(p, "oauth_creds.json"));
	up_agent_prepared_free(p);
	/* rules only: nothing for the pod */
	assert_int_equal(run(&h, "api_key", true, &p, err, sizeof(err)), 0);
	assert_int_equal(p->contrib.n_volumes, 0);
	up_agent_prepared_free(p);
	home_done(&h);
}

/* ---------------------------------------------------------------- the rendered session */

static bool object_holds(const json_t *o, const char *needle)
{
	json_t *data = json_object_get(o, "data"), *v;
	bool secret = strcmp(json_string_value(json_object_get(o, "kind")), "Secret") == 0;
	const char *k;

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

/* Fails when a Secret or ConfigMap the agent pod mounts holds `needle`. */
static void agent_mounts_lack(const json_t *objects, const char *needle)
{
	const json_t *pod = find_object(objects, "Pod", "agent");
	json_t *vol;
	size_t i;

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
		if (object_holds(o, needle))
			fail_msg("the agent pod mounts %s, which holds a real credential",
				 json_string_value(json_object_get(vol, "name")));
	}
}

static void test_render(void **state)
{
	struct up_manifests *tpl = NULL;
	struct up_agent_prepared *p = NULL;
	struct up_ruleset *rs = up_ruleset_new();
	struct up_ca *ca = NULL;
	json_t *problems = json_array(), *objects = NULL, *doc;
	struct home h;
	char err[512] = "";

	(void)state;
	home_new(&h, CREDS_OK,
		 "{\"mcpServers\": {\"a\": {\"env\": {\"TOKEN\": \"" SENTINEL "\"}}}}");
	assert_int_equal(run(&h, NULL, false, &p, err, sizeof(err)), 0);
	assert_int_equal(up_ruleset_load_agent_prepared(rs, &up_agent_gemini, p, problems), 0);
	assert_int_equal(up_ruleset_finish(rs, false, problems), 0);
	for (size_t i = 0; i < up_ruleset_count(rs); i++)
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
		.agent = "gemini",
		.mode = "google",
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
				 "ya29." SENTINEL "-access"));
	agent_mounts_lack(objects, SENTINEL);
	json_decref(objects);
	json_decref(doc);
	json_decref(problems);
	up_ca_free(ca);
	up_manifests_free(tpl);
	up_ruleset_free(rs);
	up_agent_prepared_free(p);
	home_done(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_settings), cmocka_unit_test(test_google),
		cmocka_unit_test(test_api_key),	 cmocka_unit_test(test_render),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
