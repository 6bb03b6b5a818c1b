/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Claude Code's host files as the pod sees them: settings.json transformed (reference
 * §5.3), ~/.claude.json with MCP servers' Authorization headers replaced (§5.4), and
 * CLAUDE.md with the sandbox section appended. Plus the JSON file helpers the agent
 * shares.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/claude/claude.h"
#include "bounds.h"
#include "fileio.h"

/* ---------------------------------------------------------------- files */

void claude_json_wipe(json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;

	if (json_is_string(v)) {
		/* jansson keeps the value in its own buffer; overwrite it in place */
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
	} else if (json_is_object(v)) {
		json_object_foreach (v, k, e)
			claude_json_wipe(e);
	} else if (json_is_array(v)) {
		json_array_foreach (v, i, e)
			claude_json_wipe(e);
	}
}

int claude_read_json(const char *path, const char *what, const char *missing_hint, json_t **doc,
		     char *err, size_t err_len)
{
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;
	int r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &text, &len);

	*doc = NULL;
	if (r == -ENOENT)
		return snprintf(err, err_len, "%s not found: %s", what, missing_hint), r;
	if (r == -EFBIG)
		return snprintf(err, err_len, "%s is larger than %d bytes", what,
				UP_AGENT_MAX_HOST_FILE),
		       -EINVAL;
	if (r < 0)
		return snprintf(err, err_len, "cannot read %s: %s", what, strerror(-r)), r;
	/* jerr.text may quote the file, which may hold a secret: only its position is used */
	*doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	up_free_secret(text, len);
	if (!*doc)
		return snprintf(err, err_len,
				"%s is not valid JSON (line %d, column %d): fix it, or "
				"move it aside and run `claude` again",
				what, jerr.line, jerr.column),
		       -EINVAL;
	if (!json_is_object(*doc)) {
		claude_json_wipe(*doc);
		json_decref(*doc);
		*doc = NULL;
		return snprintf(err, err_len, "%s does not hold a JSON object", what), -EINVAL;
	}
	return 0;
}

int claude_write_private(const char *path, const char *text, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (!slash)
		return up_write_file_atomic(".", path, text, len, NULL);
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	(void)snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
	return up_write_file_atomic(dir, slash + 1, text, len, NULL);
}

/* ---------------------------------------------------------------- settings.json */

/*
 * An env name that looks like it holds a credential: one of its words (split at '_')
 * is TOKEN, SECRET, PASSWORD, PASSWD, KEY, APIKEY, CREDENTIAL(S) or BEARER. So
 * ANTHROPIC_API_KEY is one and CLAUDE_CODE_MAX_OUTPUT_TOKENS is not.
 */
static bool secret_env_name(const char *name)
{
	static const char *const words[] = {"TOKEN",  "SECRET",	    "PASSWORD",	   "PASSWD", "KEY",
					    "APIKEY", "CREDENTIAL", "CREDENTIALS", "BEARER"};
	const char *s = name;

	while (*s) {
		size_t n = strcspn(s, "_");
		for (size_t i = 0; i < ELEMENTSOF(words); i++)
			if (strlen(words[i]) == n && strncasecmp(s, words[i], n) == 0)
				return true;
		s += n;
		s += *s == '_';
	}
	return false;
}

/* AWS profile names as reference §6.1 allows them (they end up in INI section names). */
static bool aws_profile_ok(const char *s)
{
	return s && *s && strlen(s) < 128 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
		       strlen(s);
}

static const struct up_env bedrock_env[] = {
	{"AWS_BEARER_TOKEN_BEDROCK", CLAUDE_PLACEHOLDER},
	{"CLAUDE_CODE_USE_BEDROCK", "1"},
	{"CLAUDE_CODE_ENABLE_AUTO_MODE", "1"},
};

static int transform_env(json_t *s, enum claude_mode mode, const char *what,
			 struct up_agent_prepared *p)
{
	json_t *env = json_object_get(s, "env"), *v;
	const char *k;
	int r = 0;

	if (env && !json_is_object(env)) {
		r = up_agent_warn(p, "%s: 'env' is not an object; the pod's copy leaves it out",
				  what);
		env = NULL;
	}
	env = env ? json_deep_copy(env) : json_object();
	if (!env || r < 0)
		return json_decref(env), -ENOMEM;
	if (mode == CLAUDE_BEDROCK && json_is_string(json_object_get(env, "AWS_PROFILE"))) {
		const char *prof = json_string_value(json_object_get(env, "AWS_PROFILE"));
		r = aws_profile_ok(prof) ? up_agent_add_aws_profile(p, prof)
					 : up_agent_warn(p,
							 "%s: env.AWS_PROFILE is not a valid AWS "
							 "profile name; ignoring it",
							 what);
	}
	json_object_foreach (env, k, v)
		if (r == 0 && secret_env_name(k) && json_is_string(v) &&
		    !streq(json_string_value(v), CLAUDE_PLACEHOLDER)) {
			claude_json_wipe(v);
			r = json_object_set_new(env, k, json_string(CLAUDE_PLACEHOLDER)) < 0
				    ? -ENOMEM
				    : up_agent_warn(
					      p,
					      "%s: env.%s looks like a credential; the pod gets "
					      "'placeholder' (inject it with a rule instead)",
					      what, k);
		}
	for (size_t i = 0; r == 0 && mode == CLAUDE_BEDROCK && i < ELEMENTSOF(bedrock_env); i++)
		if (json_object_set_new(env, bedrock_env[i].name,
					json_string(bedrock_env[i].value)) < 0)
			r = -ENOMEM;
	if (r == 0 && json_object_set_new(s, "env", env) < 0)
		return -ENOMEM;
	if (r < 0)
		json_decref(env);
	return r;
}

json_t *claude_settings_transform(const json_t *host, enum claude_mode mode, const char *what,
				  struct up_agent_prepared *p)
{
	json_t *s = json_deep_copy(host);
	int r = s ? 0 : -ENOMEM;

	if (r == 0)
		(void)json_object_del(s, "sandbox");
	if (r == 0 && json_object_get(s, "apiKeyHelper")) {
		/* a host command the pod lacks, and the mitm injects the credential anyway */
		(void)json_object_del(s, "apiKeyHelper");
		r = up_agent_warn(p,
				  "%s: apiKeyHelper is left out of the pod's copy: the proxy "
				  "injects the credentials",
				  what);
	}
	if (r == 0)
		r = transform_env(s, mode, what, p);
	if (r == 0 &&
	    (json_object_set_new(s, "permissions",
				 json_pack("{s:s, s:b}", "defaultMode", "auto",
					   "skipDangerousModePermissionPrompt", 1)) < 0 ||
	     json_object_set_new(s, "skipDangerousModePermissionPrompt", json_true()) < 0))
		r = -ENOMEM;
	if (r < 0) {
		claude_json_wipe(s);
		json_decref(s);
		return NULL;
	}
	return s;
}

/* ---------------------------------------------------------------- ~/.claude.json */

static size_t redact_servers(json_t *servers)
{
	json_t *srv, *h, *v;
	const char *name, *k;
	void *tmp;
	size_t n = 0;

	json_object_foreach (servers, name, srv) {
		h = json_object_get(srv, "headers");
		json_object_foreach_safe(h, tmp, k, v)
		{
			if (strcasecmp(k, "authorization") != 0)
				continue;
			claude_json_wipe(v);
			if (json_object_set_new(h, k, json_string(CLAUDE_MCP_PLACEHOLDER)) == 0)
				n++;
		}
	}
	return n;
}

size_t claude_redact_mcp(json_t *doc)
{
	json_t *proj, *projects = json_object_get(doc, "projects");
	const char *path;
	size_t n = redact_servers(json_object_get(doc, "mcpServers"));

	json_object_foreach (projects, path, proj)
		n += redact_servers(json_object_get(proj, "mcpServers"));
	return n;
}

int claude_sanitize_claude_json(json_t *doc, struct up_agent_prepared *p)
{
	json_t *key = json_object_get(doc, "primaryApiKey");

	(void)claude_redact_mcp(doc);
	if (!key)
		return 0;
	claude_json_wipe(key);
	(void)json_object_del(doc, "primaryApiKey");
	return up_agent_warn(p, "~/.claude.json: primaryApiKey is left out of the pod's copy");
}

/* ---------------------------------------------------------------- CLAUDE.md */

static const char sandbox_md[] =
	"## Sandbox\n"
	"\n"
	"You are running inside uplink: a Kata Containers microVM on Kubernetes whose only way "
	"out is an HTTPS proxy that allows requests by an allow-list of rules.\n"
	"\n"
	"- A request answered with the header `X-Uplink-Denied: 1` (status 403, or 400/431 for a "
	"malformed request) and a JSON body like {\"error\": \"denied by uplink\", \"method\": "
	"\"POST\", \"host\": \"api.example.com\", \"path\": \"/v1/x\", \"hint\": \"add a rule "
	"...\"} was blocked by the proxy. Stop: do not retry it, and do not try to work around the "
	"block (other hosts, other tools, other protocols, other spellings of the path). Tell the "
	"user which request was blocked (method, host, path); the body's \"hint\" names the rule "
	"that would allow it.\n"
	"- Most credentials are injected by the proxy: API keys and tokens in this environment are "
	"placeholders, and that is expected. Do not look for real ones.\n"
	"- There is no DNS: tools must use the proxy (HTTPS_PROXY is set).\n"
	"- If anything else about the sandbox stops you, stop and report it rather than working "
	"around it.\n"
	"- Docker works (a dockerd of your own runs in the VM). A Python virtualenv is at "
	"/opt/venv.\n";

const char *claude_md(const char *host, size_t host_len, struct up_agent_prepared *p)
{
	bool nl = host && host_len && host[host_len - 1] != '\n';

	if (!host || !host_len)
		return up_agent_strdup(p, sandbox_md);
	return up_agent_printf(p, "%.*s%s\n%s", (int)host_len, host, nl ? "\n" : "", sandbox_md);
}
