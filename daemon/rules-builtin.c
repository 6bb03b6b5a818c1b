/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' built-in rules, as YAML read by the same parser as users' files.
 * TODO(agents issue): take these from agents/<name>/default-rules.yaml and the
 * agent's prepare() (which also makes the anthropic OAuth rule from the host's
 * credentials) once agents/agent.h exists.
 */
#include <errno.h>
#include <string.h>

#include "rules.h"

static const char claude_defaults[] =
	"rules:\n"
	"  - name: claude-logs\n"
	"    hosts: ['.*\\.datadoghq\\.com']\n"
	"    methods: [POST]\n"
	"    paths: ['/api/v2/logs']\n";

static const char bedrock_auth[] =
	"rules:\n"
	"  - name: bedrock-auth\n"
	"    hosts: ['bedrock-runtime\\.[a-z0-9-]+\\.amazonaws\\.com']\n"
	"    inject:\n"
	"      headers:\n"
	"        Authorization: 'Bearer {{keyring:bedrock:key}}'\n";

static const struct {
	const char *agent, *mode;
	const char *auth, *defaults;
} agents[] = {
	{ "claude", "anthropic", NULL, claude_defaults },
	{ "claude", "bedrock", bedrock_auth, claude_defaults },
};

int up_ruleset_load_agent(struct up_ruleset *rs, const char *agent, const char *mode,
			  json_t *problems)
{
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(agents); i++) {
		if (!streq(agent, agents[i].agent) || !streq(mode ? mode : "anthropic", agents[i].mode))
			continue;
		if (agents[i].auth)
			r = up_ruleset_load_string(rs, UP_LAYER_AUTH, "builtin:auth", agents[i].auth,
						   strlen(agents[i].auth), problems);
		if (r >= 0 && agents[i].defaults)
			r = up_ruleset_load_string(rs, UP_LAYER_AGENT, "builtin:agent-default",
						   agents[i].defaults, strlen(agents[i].defaults),
						   problems);
		return r;
	}
	(void)json_array_append_new(problems, json_sprintf(
		"unknown agent '%s' or mode '%s'; known: claude (modes anthropic, bedrock)", agent,
		mode ? mode : "anthropic"));
	return -ENOENT;
}
