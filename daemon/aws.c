/* SPDX-License-Identifier: Apache-2.0 */
/* AWS profiles: dummy keys for the agent, real ones exported on the host (daemon/aws.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <openssl/sha.h>

#include "aws.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "proc.h"

bool up_aws_profile_ok(const char *name)
{
	static const char ok[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

	return name && *name && strspn(name, ok) == strlen(name);
}

int up_aws_check_profiles(const json_t *profiles, char *why, size_t len)
{
	const json_t *v;
	size_t i;

	if (json_array_size(profiles) > UP_MAX_AWS_PROFILES)
		return snprintf(why, len, "--aws-profiles: at most %d profiles",
				UP_MAX_AWS_PROFILES),
		       -EINVAL;
	json_array_foreach (profiles, i, v)
		if (!up_aws_profile_ok(json_string_value(v)))
			return snprintf(why, len,
					"invalid AWS profile name '%.200s': only letters, digits, "
					"'.', '_' and '-' are allowed",
					json_string_value(v)),
			       -EINVAL;
	return 0;
}

void up_aws_dummy_akid(const char *profile, char out[UP_AWS_AKID_LEN + 1])
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char md[SHA256_DIGEST_LENGTH];

	(void)SHA256((const unsigned char *)profile, strlen(profile), md);
	memcpy(out, "AKIA", 4);
	for (size_t i = 0; i < 8; i++) {
		out[4 + 2 * i] = hex[md[i] >> 4];
		out[5 + 2 * i] = hex[md[i] & 0xf];
	}
	out[UP_AWS_AKID_LEN] = '\0';
}

char *up_aws_dummy_ini(const json_t *profiles)
{
	char akid[UP_AWS_AKID_LEN + 1], *buf = NULL;
	size_t size = 0;
	const json_t *v;
	size_t i;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	json_array_foreach (profiles, i, v) {
		up_aws_dummy_akid(json_string_value(v), akid);
		fprintf(f, "[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n\n",
			json_string_value(v), akid, UP_AWS_DUMMY_SECRET);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

void up_aws_creds_wipe(struct up_aws_creds *c)
{
	if (!c)
		return;
	free(c->access_key_id);
	if (c->secret_access_key)
		up_free_secret(c->secret_access_key, strlen(c->secret_access_key));
	if (c->session_token)
		up_free_secret(c->session_token, strlen(c->session_token));
	*c = (struct up_aws_creds){0};
}

int up_aws_parse_time(const char *s, int64_t *ret)
{
	struct tm tm = {0};
	const char *p;
	long off = 0;
	time_t t;

	if (!s || !(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return -EINVAL;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
		off = 0;
	else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int h, m;
		if (sscanf(p + 1, "%2d:%2d", &h, &m) != 2 || h > 23 || m > 59)
			return -EINVAL;
		off = (h * 3600L + m * 60L) * (*p == '-' ? -1 : 1);
	} else
		return -EINVAL;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ret = (int64_t)t - off;
	return 0;
}

/* Zeroes every string in a parsed document before it is freed (jansson does not). */
static char *field(json_t *doc, const char *name)
{
	const char *v = json_string_value(json_object_get(doc, name));

	return v && *v ? strdup(v) : NULL;
}

int up_aws_parse_export(const char *text, size_t len, struct up_aws_creds *c, char *why,
			size_t why_len)
{
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	const char *exp;
	int r = 0;

	*c = (struct up_aws_creds){0};
	if (!json_is_object(doc)) {
		up_json_wipe(doc);
		json_decref(doc);
		return snprintf(why, why_len, "its output is not a JSON object"), -EINVAL;
	}
	c->access_key_id = field(doc, "AccessKeyId");
	c->secret_access_key = field(doc, "SecretAccessKey");
	c->session_token = field(doc, "SessionToken");
	exp = json_string_value(json_object_get(doc, "Expiration"));
	if (!c->access_key_id || !c->secret_access_key) {
		(void)snprintf(why, why_len, "its output has no %s",
			       c->access_key_id ? "SecretAccessKey" : "AccessKeyId");
		r = -EINVAL;
	} else if (exp && *exp && up_aws_parse_time(exp, &c->expires_at) < 0) {
		(void)snprintf(why, why_len, "its Expiration '%.40s' is not an ISO-8601 time", exp);
		r = -EINVAL;
	}
	up_json_wipe(doc);
	json_decref(doc);
	if (r < 0)
		up_aws_creds_wipe(c);
	return r;
}

int64_t up_refresh_delay_ms(int64_t now, int64_t expires, long divisor)
{
	int64_t left = expires - now, margin;

	if (expires <= 0)
		return -1;
	if (left <= 0)
		return 0;
	margin = left / 4 < UP_REFRESH_MARGIN_S ? left / 4 : UP_REFRESH_MARGIN_S;
	return (left - margin) * 1000 / (divisor > 1 ? divisor : 1);
}

/* The first line of aws's stderr, trimmed, for a message. */
static const char *first_line(char *err)
{
	char *nl;

	while (*err == ' ' || *err == '\n' || *err == '\r' || *err == '\t')
		err++;
	if ((nl = strpbrk(err, "\r\n")))
		*nl = '\0';
	if (strlen(err) > 300)
		err[300] = '\0';
	return *err ? err : "no message";
}

/* UP_AWS_EXPORT_TIMEOUT_MS, or $UPLINK_AWS_TIMEOUT_MS (tests: a shorter one). */
static int export_timeout_ms(void)
{
	const char *env = up_knobs()->aws_timeout_ms;
	long v = env ? strtol(env, NULL, 10) : 0;

	return v > 0 && v < UP_AWS_EXPORT_TIMEOUT_MS ? (int)v : UP_AWS_EXPORT_TIMEOUT_MS;
}

static int export_one(const char *profile, struct up_aws_creds *c, char *why, size_t len)
{
	char *argv[] = {"aws",
			"configure",
			"export-credentials",
			"--profile",
			(char *)profile,
			"--format",
			"process",
			NULL};
	char err[UP_AWS_EXPORT_STDERR_MAX], reason[128];
	char *out = malloc(UP_AWS_EXPORT_OUTPUT_MAX);
	int timeout = export_timeout_ms(), status, r;
	struct up_run run = {.argv = argv,
			     .timeout_ms = timeout,
			     .fd3 = -1,
			     .out = out,
			     .out_len = UP_AWS_EXPORT_OUTPUT_MAX,
			     .err = err,
			     .err_len = sizeof(err)};

	if (!out)
		return -ENOMEM;
	r = up_run(&run);
	status = run.status;
	if (r == -ENOENT)
		(void)snprintf(why, len,
			       "AWS profile '%s': the aws CLI is not on uplinkd's PATH; install "
			       "AWS CLI v2 (or put it on the daemon's PATH) to use --aws-profiles",
			       profile);
	else if (r == -ETIMEDOUT)
		(void)snprintf(why, len,
			       "AWS profile '%s': aws configure export-credentials did not "
			       "finish within %d s; if the profile uses SSO, run: aws sso login "
			       "--profile %s",
			       profile, (timeout + 999) / 1000, profile);
	else if (r < 0)
		(void)snprintf(why, len, "AWS profile '%s': cannot run aws: %s", profile,
			       strerror(-r));
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		(void)snprintf(why, len,
			       "AWS profile '%s': cannot export its credentials (aws: %s); if it "
			       "uses SSO, run: aws sso login --profile %s",
			       profile, first_line(err), profile);
		r = -EIO;
	} else if ((r = up_aws_parse_export(out, strlen(out), c, reason, sizeof(reason))) < 0)
		(void)snprintf(why, len, "AWS profile '%s': aws configure export-credentials: %s",
			       profile, reason);
	up_free_secret(out, UP_AWS_EXPORT_OUTPUT_MAX);
	return r;
}

static int map_add(json_t *map, const char *profile, const struct up_aws_creds *c)
{
	char akid[UP_AWS_AKID_LEN + 1];
	json_t *e = json_pack("{s:s, s:s}", "access_key_id", c->access_key_id, "secret_access_key",
			      c->secret_access_key);

	if (e && c->session_token &&
	    json_object_set_new(e, "session_token", json_string(c->session_token)) < 0) {
		up_json_wipe(e);
		json_decref(e);
		e = NULL;
	}
	up_aws_dummy_akid(profile, akid);
	return e ? json_object_set_new(map, akid, e) : -ENOMEM;
}

int up_aws_export_all(const json_t *profiles, char **creds_json, int64_t *expires_at, char *why,
		      size_t len)
{
	json_t *map = json_object(), *v;
	int64_t earliest = 0;
	size_t i;
	int r = map ? 0 : -ENOMEM;

	*creds_json = NULL;
	json_array_foreach (profiles, i, v) {
		struct up_aws_creds c = {0};
		if (r < 0)
			break;
		r = export_one(json_string_value(v), &c, why, len);
		if (r >= 0)
			r = map_add(map, json_string_value(v), &c);
		if (r >= 0 && c.expires_at && (!earliest || c.expires_at < earliest))
			earliest = c.expires_at;
		up_aws_creds_wipe(&c);
	}
	if (r >= 0 && !(*creds_json = json_dumps(map, JSON_COMPACT | JSON_SORT_KEYS)))
		r = -ENOMEM;
	up_json_wipe(map);
	json_decref(map);
	*expires_at = r >= 0 ? earliest : 0;
	return r;
}
