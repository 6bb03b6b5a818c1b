/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "agents/agent.h"
#include "jsonrpc.h"

/*
 * Codex (agents/codex/): the pieces agent.c puts together. auth.c reads and refreshes the
 * host's ~/.codex/auth.json and writes the pod's fake one; config.c filters config.toml
 * and writes the pod's AGENTS.md. Facts from codex's own source (codex-rs/login): the
 * refresh is a JSON POST to auth.openai.com/oauth/token with codex's public client id,
 * and the answer's id_token, access_token and refresh_token replace the stored ones,
 * last_refresh becoming the time of the refresh.
 */

#define CODEX_AUTH		"~/.codex/auth.json"
#define CODEX_TOKEN_URL_DEFAULT "https://auth.openai.com/oauth/token"
/* Codex's public OAuth client id (the one `codex login` uses). */
#define CODEX_OAUTH_CLIENT_ID	"app_EMoamEEZ73f0CkXaXp7hrann"
/* The fake tokens' lifetime in the pod: codex there never needs to refresh them. */
#define CODEX_FAKE_LIFETIME_S	(3650LL * 86400)
/* What the pod's copies hold where the host had a secret. */
#define CODEX_PLACEHOLDER	"placeholder-injected-by-uplink"
/* Where the pod finds the session CA (manifests/agent-pod.yaml mounts it there). */
#define CODEX_POD_CA		"/etc/uplink/ca/ca.crt"

enum codex_mode {
	CODEX_CHATGPT,
	CODEX_API_KEY,
};

/*
 * The auth parts (struct up_agent_parts). --chatgpt: reads ~/.codex/auth.json, refreshes
 * the access token when it is near its expiry (writing the new tokens back to the host file
 * as codex does), and stores in c->p the auth rule injecting the real token and account id
 * on chatgpt.com, and its expiry. --api-key: the auth rule injecting OPENAI_API_KEY of
 * ~/.codex/auth.json when it holds one, else {{keyring:openai:key}}, on api.openai.com.
 * Unless rules_only, c->fake becomes the pod's auth.json (placeholders).
 */
int codex_chatgpt_auth(struct up_agent_ctx *c) _wur_;
int codex_api_key_auth(struct up_agent_ctx *c) _wur_;
/* `uplink doctor`'s checks of ~/.codex/auth.json; never refreshes. */
size_t codex_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		    struct up_agent_check *out, size_t max);

/*
 * config.toml for the pod: the host's (may be NULL) with every secret-bearing key or table
 * left out (a warning names each), uplink's own settings first, and the cwd (NULL: none)
 * trusted last, in place of the host's table for it. Owned by `p`.
 */
const char *codex_config_toml(const char *host, size_t host_len, enum codex_mode mode,
			      const char *cwd, const char *what, struct up_agent_prepared *p);
