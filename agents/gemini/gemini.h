/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <time.h>

#include "agents/agent.h"

/*
 * Gemini CLI (agents/gemini/): the pieces agent.c puts together. credentials.c reads and
 * refreshes the host's Google login (~/.gemini/oauth_creds.json) and writes the pod's fake
 * one; settings.c transforms ~/.gemini/settings.json for the pod.
 */

#define GEMINI_TOKEN_URL_DEFAULT "https://oauth2.googleapis.com/token"
/* The Gemini CLI's public OAuth client (an installed application: its "secret" is public and
 * the tool sends both when it refreshes). */
#define GEMINI_OAUTH_CLIENT_ID \
	"681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com"
#define GEMINI_OAUTH_CLIENT_SECRET "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"
/* The fake token's lifetime in the pod: the CLI never thinks it expired, so never refreshes. */
#define GEMINI_FAKE_LIFETIME_S	   (3650LL * 86400)
#define GEMINI_FAKE_ACCESS_PREFIX  "ya29.uplink-placeholder-"
#define GEMINI_FAKE_REFRESH_PREFIX "1//uplink-placeholder-"
/* What the pod's GEMINI_API_KEY holds in --api-key mode. */
#define GEMINI_KEY_PLACEHOLDER	   "uplink-placeholder-gemini-key"
/* The CLI's names for its auth types (settings.json security.auth.selectedType). */
#define GEMINI_AUTH_GOOGLE	   "oauth-personal"
#define GEMINI_AUTH_API_KEY	   "gemini-api-key"

enum gemini_mode {
	GEMINI_GOOGLE,
	GEMINI_API_KEY,
};

/*
 * The auth parts (struct up_agent_parts). --google: reads ~/.gemini/oauth_creds.json,
 * refreshes the token when it is near its expiry (writing the new tokens back to the host
 * file as the CLI does), and stores in c->p the auth rules injecting the real token and its
 * expiry; unless rules_only, c->fake becomes the pod's oauth_creds.json (no real token in
 * it). --api-key: the auth rule with {{keyring:gemini:key}} as x-goog-api-key; nothing is
 * read.
 */
int gemini_google_auth(struct up_agent_ctx *c) _wur_;
int gemini_api_key_auth(struct up_agent_ctx *c) _wur_;

/*
 * settings.json for the pod (a new object): every string whose key looks like a secret
 * dropped (a warning names each, by its path), the mode's auth type selected, the auth
 * enforcement and the auto-update switched off. `what` names the file in warnings.
 */
json_t *gemini_settings_transform(const json_t *host, enum gemini_mode mode, const char *what,
				  struct up_agent_prepared *p);

/*
 * Reads settings.json as the CLI does (comments allowed). 0 with *doc; -ENOENT when missing
 * (err untouched: the file is optional); -EINVAL when it is not a JSON object (err names the
 * line and column, never the text).
 */
int gemini_read_settings(const char *path, const char *what, json_t **doc, char *err,
			 size_t err_len) _wur_;
/* `uplink doctor`: the Google login's state (read only: never refreshed, never a secret). */
size_t gemini_doctor(const struct up_agent_impl *impl, const struct up_agent_input *in,
		     struct up_agent_check *out, size_t max);
