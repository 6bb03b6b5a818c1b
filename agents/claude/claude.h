/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "agents/agent.h"
#include "jsonrpc.h"

/*
 * Claude Code (agents/claude/): the pieces agent.c puts together. credentials.c reads and
 * refreshes the host's OAuth credentials and writes the pod's fake ones; settings.c
 * transforms settings.json, ~/.claude.json and CLAUDE.md for the pod.
 */

#define CLAUDE_TOKEN_URL_ENV	   "UPLINK_ANTHROPIC_TOKEN_URL"
#define CLAUDE_TOKEN_URL_DEFAULT   "https://console.anthropic.com/v1/oauth/token"
/* Claude Code's public OAuth client id (the one its own /login uses). */
#define CLAUDE_OAUTH_CLIENT_ID	   "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
/* The fake token's lifetime in the pod: the pod never needs to refresh it. */
#define CLAUDE_FAKE_LIFETIME_S	   (3650LL * 86400)
#define CLAUDE_FAKE_ACCESS_PREFIX  "sk-ant-oat01-agent-uplink-"
#define CLAUDE_FAKE_REFRESH_PREFIX "sk-ant-ort01-agent-uplink-"
/* What the pod's copies hold where the host had a secret. */
#define CLAUDE_PLACEHOLDER	   "placeholder"
#define CLAUDE_MCP_PLACEHOLDER	   "PLACEHOLDER"

enum claude_mode {
	CLAUDE_ANTHROPIC,
	CLAUDE_BEDROCK,
};

/*
 * The auth parts (struct up_agent_parts). --anthropic: reads ~/.claude/.credentials.json,
 * refreshes the token when it is near its expiry (writing the new tokens back to the host
 * file), and stores in c->p the auth rule injecting the real token and its expiry; unless
 * rules_only, c->fake becomes the pod's credentials file (no real token in it). --bedrock:
 * the auth rule with {{keyring:bedrock:key}}; nothing is read.
 */
int claude_anthropic_auth(struct up_agent_ctx *c) _wur_;
int claude_bedrock_auth(struct up_agent_ctx *c) _wur_;
/* `uplink doctor`: whether ~/.claude/.credentials.json holds a login and how long it lasts. */
size_t claude_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		     struct up_agent_check *out, size_t max);

/*
 * settings.json for the pod (a new object): `sandbox` and `apiKeyHelper` dropped, env
 * values that look like secrets replaced, the mode's auth env merged in (it wins), the
 * permissions forced. Warnings go to `p`; env.AWS_PROFILE is noted in `p` (bedrock).
 * `what` names the file in warnings ("~/.claude/settings.json").
 */
json_t *claude_settings_transform(const json_t *host, enum claude_mode mode, const char *what,
				  struct up_agent_prepared *p);
/* Replaces every MCP server's Authorization header (any case) in `doc` with PLACEHOLDER:
 * top-level mcpServers and each projects.<path>.mcpServers. Returns how many. */
size_t claude_redact_mcp(json_t *doc);
/* ~/.claude.json for the pod: MCP Authorization headers and primaryApiKey removed. */
int claude_sanitize_claude_json(json_t *doc, struct up_agent_prepared *p);
/* The pod's CLAUDE.md: the host's (may be NULL) and the sandbox section. Owned by `p`. */
const char *claude_md(const char *host, size_t host_len, struct up_agent_prepared *p);
