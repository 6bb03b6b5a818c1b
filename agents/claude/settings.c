/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Claude Code's host files as the pod sees them (agent-util.c has the helpers every agent
 * shares):
 *  - settings.json: `sandbox` and `apiKeyHelper` dropped, credential-looking env values
 *    replaced by the placeholder, the Bedrock env added in that mode, and the permissions
 *    set to auto mode without the dangerous-mode prompt;
 *  - ~/.claude.json: every MCP server's Authorization header (top level and per project)
 *    replaced by a placeholder, primaryApiKey dropped;
 *  - CLAUDE.md with the sandbox section appended.
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

/* ---------------------------------------------------------------- settings.json */

/*
 * An AWS profile name: 1 to 127 letters, digits, '.', '_' or '-'. It ends up as an INI
 * section name in the pod's ~/.aws/credentials, so it must not be able to start another.
 */
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
		if (r == 0 && up_agent_secret_name(k) && json_is_string(v) &&
		    !streq(json_string_value(v), CLAUDE_PLACEHOLDER)) {
			up_json_wipe(v);
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
		up_json_wipe(s);
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
			up_json_wipe(v);
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
	up_json_wipe(key);
	(void)json_object_del(doc, "primaryApiKey");
	return up_agent_warn(p, "~/.claude.json: primaryApiKey is left out of the pod's copy");
}

/* ---------------------------------------------------------------- CLAUDE.md */

const char *claude_md(const char *host, size_t host_len, struct up_agent_prepared *p)
{
	return up_agent_instructions(host, host_len, p);
}
