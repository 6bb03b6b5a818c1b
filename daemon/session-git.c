/* SPDX-License-Identifier: Apache-2.0 */
/* The git overlay of a session (daemon/session-git.h), built on the threadpool. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bounds.h"
#include "log.h"
#include "proc.h"
#include "session-git.h"

bool session_git_host_ok(const char *host)
{
	size_t n = host ? strspn(host,
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
			: 0;

	if (n == 0 || n > 253)
		return false;
	if (host[n] == '\0')
		return true;
	return host[n] == ':' && host[n + 1] && strlen(host + n + 1) <= 5 &&
	       strspn(host + n + 1, "0123456789") == strlen(host + n + 1);
}

/* `git config --global --get <key>` on the host: 0 and the value ("" when unset), or -ENOENT
 * when git is not there. An argv, no shell; killed after UP_GIT_CONFIG_TIMEOUT_MS. */
static int git_get(const char *key, char *out, size_t len)
{
	char git[] = "git", config[] = "config", global[] = "--global", get[] = "--get", k[64];
	char *argv[] = {git, config, global, get, k, NULL};
	int status = 0, r;

	(void)snprintf(k, sizeof(k), "%s", key);
	r = up_run_capture(argv, UP_GIT_CONFIG_TIMEOUT_MS, false, out, len, &status);
	if (r == -ENOENT)
		return -ENOENT;
	if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) /* 1: not set */
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	for (char *c = out; *c; c++)
		if (iscntrl((unsigned char)*c)) /* cannot be written as one value: leave it out */
			return out[0] = '\0', 0;
	return 0;
}

/* `\t<key> = "<value>"` with \ and " escaped, so # and ; survive. */
static int quoted(FILE *f, const char *key, const char *value)
{
	fprintf(f, "\t%s = \"", key);
	for (const char *c = value; *c; c++)
		fprintf(f, *c == '\\' || *c == '"' ? "\\%c" : "%c", *c);
	return fputs("\"\n", f) < 0 ? -EIO : 0;
}

static void warn(json_t *warnings, const char *msg)
{
	log_debug("git overlay: %s", msg);
	(void)json_array_append_new(warnings, json_string(msg));
}

static void identity(FILE *f, bool *any, json_t *warnings)
{
	char name[512], email[512];

	if (git_get("user.name", name, sizeof(name)) == -ENOENT ||
	    git_get("user.email", email, sizeof(email)) == -ENOENT) {
		warn(warnings,
		     "git is not installed (or not on uplinkd's PATH): the agent gets no git "
		     "identity; install git, or pass --no-git-identity to silence this");
		return;
	}
	if (!name[0] && !email[0]) {
		warn(warnings,
		     "no git user.name or user.email on this machine (git config --global): the "
		     "agent's commits will be unattributed; set them, or pass --no-git-identity");
		return;
	}
	fputs("[user]\n", f);
	if (name[0])
		(void)quoted(f, "name", name);
	if (email[0])
		(void)quoted(f, "email", email);
	*any = true;
}

int session_git_overlay(const json_t *hosts, bool with_identity, char **ret, json_t *warnings)
{
	char *text = NULL;
	size_t len = 0, i;
	bool any = false;
	json_t *v;
	FILE *f;

	*ret = NULL;
	f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	if (with_identity)
		identity(f, &any, warnings);
	json_array_foreach (hosts, i, v) {
		const char *h = json_string_value(v);
		fprintf(f,
			"%s[url \"https://%s/\"]\n\tinsteadOf = git@%s:\n\tinsteadOf = "
			"ssh://git@%s/\n",
			any ? "\n" : "", h, h, h);
		any = true;
	}
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	if (any)
		*ret = text;
	else
		free(text);
	return 0;
}
