/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * AWS profiles (docs/architecture.md, "What a session borrows from the host"): the agent
 * pod gets one dummy access key per profile in an INI ~/.aws/credentials; the host exports
 * each profile's real credentials with the aws CLI, and the mitm re-signs requests made
 * with a dummy key using the real one (the addon's uplink_aws_creds option, a JSON map
 * dummy key -> real credentials).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define UP_AWS_AKID_LEN	    20
/* Every profile's dummy secret: "DUMMYsecret", 28 zeros, "A" (40 characters, as a real one). */
#define UP_AWS_DUMMY_SECRET "DUMMYsecret0000000000000000000000000000A"

/* Full match of [A-Za-z0-9._-]+ (an INI section name that cannot inject another). */
bool up_aws_profile_ok(const char *name);
/*
 * The session.start check of --aws-profiles (strings): the count, then each name. 0, or
 * -EINVAL with the sentence in why.
 */
int up_aws_check_profiles(const json_t *profiles, char *why, size_t len) _wur_;
/* "AKIA" + the first 16 hex digits of SHA-256(profile), uppercased; deterministic. */
void up_aws_dummy_akid(const char *profile, char out[UP_AWS_AKID_LEN + 1]);
/* The agent's ~/.aws/credentials: a [profile] block per profile, each the dummy key and
 * secret and an empty line. NULL on allocation failure. */
char *up_aws_dummy_ini(const json_t *profiles);

/* One profile's real credentials; every string a secret but the key id. */
struct up_aws_creds {
	char *access_key_id, *secret_access_key, *session_token; /* token NULL: none */
	int64_t expires_at;					 /* Unix time; 0: does not expire */
};
void up_aws_creds_wipe(struct up_aws_creds *c);

/* ISO-8601 "2026-11-29T12:00:00Z", "...+01:00", fractions of a second ignored. */
int up_aws_parse_time(const char *s, int64_t *ret) _wur_;
/*
 * `aws configure export-credentials --format process` output: {"Version": 1, "AccessKeyId",
 * "SecretAccessKey", "SessionToken"?, "Expiration"?}. -EINVAL with why naming what is
 * missing (never a value). The parsed JSON is wiped before it is freed.
 */
int up_aws_parse_export(const char *text, size_t len, struct up_aws_creds *c, char *why,
			size_t why_len) _wur_;

/*
 * When to renew credentials that expire at `expires` (Unix time; 0 never: returns -1),
 * seen at `now`: UP_REFRESH_MARGIN_S before, or a quarter of the time left when that is
 * shorter, with the wait divided by `divisor` (tests; 1 normally). In ms from now, >= 0.
 */
int64_t up_refresh_delay_ms(int64_t now, int64_t expires, long divisor);

/*
 * BLOCKING (threadpool): exports every profile with the aws CLI and builds the mitm's map
 * (JSON text, a secret: free it with up_free_secret()) and the earliest expiry (0: none).
 * On failure -errno with a sentence naming the profile, what to do (aws sso login) and the
 * first line of aws's stderr; never a credential.
 */
int up_aws_export_all(const json_t *profiles, char **creds_json, int64_t *expires_at, char *why,
		      size_t len) _wur_;
