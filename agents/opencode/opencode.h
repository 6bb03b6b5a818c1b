/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "agents/agent.h"

/*
 * OpenCode (agents/opencode/): the pieces agent.c puts together. auth.c reads the host's
 * login file (auth.json in opencode's data folder), refreshes an OAuth login on the host
 * as opencode would, and makes the auth rule and the pod's fake login; config.c carries
 * the host's opencode.json into the pod minus its secrets, and writes AGENTS.md.
 *
 * Facts of opencode-ai 1.18 (its own source): the login file is
 * $XDG_DATA_HOME/opencode/auth.json (~/.local/share/opencode/auth.json), an object of
 * provider id -> {"type": "api", "key"} or {"type": "oauth", "refresh", "access",
 * "expires" (ms since 1970), "accountId"?}; its config is $XDG_CONFIG_HOME/opencode/
 * (config.json, opencode.json, opencode.jsonc). Anthropic: x-api-key to api.anthropic.com
 * with a key; an OAuth login (opencode-anthropic-auth) is Bearer with the oauth beta, and
 * is refreshed at console.anthropic.com/v1/oauth/token (JSON). OpenAI: Bearer key to
 * api.openai.com; its ChatGPT login is Bearer plus ChatGPT-Account-Id to
 * chatgpt.com/backend-api/codex/..., refreshed at auth.openai.com/oauth/token (a form).
 */

#define OC_ANTHROPIC_TOKEN_URL	"https://console.anthropic.com/v1/oauth/token"
#define OC_ANTHROPIC_CLIENT_ID	"9d1c250a-e61b-44d9-88ed-5944d1962f5e"
#define OC_OPENAI_TOKEN_URL	"https://auth.openai.com/oauth/token"
#define OC_OPENAI_CLIENT_ID	"app_EMoamEEZ73f0CkXaXp7hrann"
/* The beta opencode-anthropic-auth adds to every request of an OAuth login. */
#define OC_ANTHROPIC_OAUTH_BETA "oauth-2025-04-20,interleaved-thinking-2025-05-14"
/* The fake OAuth login's lifetime in the pod: opencode there never refreshes it. */
#define OC_FAKE_LIFETIME_S	(3650LL * 86400)
/* What the pod's login holds instead of the real secrets (+ 32 random hex digits). */
#define OC_FAKE_PREFIX		"uplink-placeholder-"

enum oc_mode {
	OC_ANTHROPIC,
	OC_OPENAI,
};

/* What auth.c hands on to the pod's contribution. */
struct oc_login {
	enum oc_mode mode;
	bool oauth;	  /* the host's entry is an OAuth login */
	const char *fake; /* the pod's auth.json (owned by p), NULL with rules_only */
	size_t fake_len;
	const char *fake_access; /* the fake access token in it (OAuth), owned by p */
};

/* The provider id of a mode in auth.json and opencode.json ("anthropic", "openai"). */
const char *oc_provider(enum oc_mode mode);
/* <data>/opencode/auth.json on the host ($XDG_DATA_HOME or ~/.local/share); malloc'd. */
char *oc_auth_path(const char *home);
/* <config>/opencode on the host ($XDG_CONFIG_HOME or ~/.config); malloc'd. */
char *oc_config_dir(const char *home);

/*
 * Reads the mode's entry of the host's auth.json, refreshes an OAuth login near its
 * expiry (writing auth.json back as opencode does), and stores in `p` the auth rule and
 * the expiry. Unless in->rules_only, login->fake is the pod's auth.json.
 */
int oc_auth(const struct up_agent_input *in, enum oc_mode mode, struct up_agent_prepared *p,
	    struct oc_login *login, char *err, size_t err_len) _wur_;

/* `uplink doctor`: the Anthropic and OpenAI logins of auth.json, read only. */
size_t oc_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		 struct up_agent_check *out, size_t max);

/*
 * The pod's opencode.json (a new object) from the host's merged config: secret-looking
 * keys dropped (a warning names each), the permissions set to run without asking,
 * autoupdate and sharing off, and for an Anthropic OAuth login the fake token as
 * provider.anthropic.options.authToken. `what` names the file in warnings.
 */
json_t *oc_config_transform(const json_t *host, const struct oc_login *login, const char *what,
			    struct up_agent_prepared *p);
/*
 * The host's config: config.json, opencode.json and opencode.jsonc of `dir` merged in
 * that order (comments and trailing commas of JSONC allowed). 0 with *doc (an empty
 * object when there is none), -EINVAL with a sentence naming the file.
 */
int oc_config_read(const char *dir, json_t **doc, char *err, size_t err_len) _wur_;
/* JSONC -> JSON in place: comments become spaces, trailing commas go. */
void oc_jsonc_strip(char *text, size_t len);
