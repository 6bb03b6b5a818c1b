/* SPDX-License-Identifier: Apache-2.0 */
/* uplink trust, uplink untrust: the trust store of project config files (daemon/trust.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

/*
 * FILE as the daemon names it: its folder resolved (the daemon's paths come from getcwd(),
 * which resolves links too), then its name. A folder that is gone is taken as written,
 * made absolute.
 */
static json_t *abs_path(const char *file, const char *cwd)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(file, '/'), *name = slash ? slash + 1 : file;

	if (slash)
		(void)snprintf(dir, sizeof(dir), "%.*s", slash == file ? 1 : (int)(slash - file),
			       file);
	else
		(void)snprintf(dir, sizeof(dir), ".");
	if (realpath(dir, real))
		return json_sprintf("%s%s%s", real, streq(real, "/") ? "" : "/", name);
	return file[0] == '/' ? json_string(file) : json_sprintf("%s/%s", cwd, file);
}

static void print_trusted(const json_t *e)
{
	const json_t *asks = json_object_get(e, "asks"), *a;
	size_t i;

	printf("trusted %s (sha256 %.16s...)", json_string_value(json_object_get(e, "file")),
	       json_string_value(json_object_get(e, "sha256")));
	if (json_array_size(asks) == 0) {
		printf(": it asks for nothing that needs trust\n");
		return;
	}
	printf(", which may now have:\n");
	json_array_foreach (asks, i, a)
		printf("  %s: %s\n", json_string_value(json_object_get(a, "at")),
		       json_string_value(json_object_get(a, "what")));
	json_array_foreach (json_object_get(e, "rules_files"), i, a)
		printf("  (with the rules file %s as it is now)\n",
		       json_string_value(json_object_get(a, "file")));
}

static void print_list(const json_t *r)
{
	const json_t *files = json_object_get(r, "files"), *e;
	size_t i;

	if (json_array_size(files) == 0) {
		printf("no trusted files (uplink trust adds the project files of the current "
		       "folder)\n");
		return;
	}
	printf("%-9s %-17s %s\n", "STATE", "TRUSTED (UTC)", "FILE");
	json_array_foreach (files, i, e) {
		time_t t = (time_t)json_integer_value(json_object_get(e, "trusted_at"));
		char when[32] = "?";
		struct tm tm;

		if (gmtime_r(&t, &tm))
			(void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
		printf("%-9s %-17s %s\n", json_string_value(json_object_get(e, "state")), when,
		       json_string_value(json_object_get(e, "file")));
	}
}

/* [--json] [--list] [FILE...]; the files, made absolute, into *files (NULL: none). */
static int parse(const struct up_command *cmd, const struct up_args *a, bool *json, bool *list,
		 json_t **files)
{
	char cwd[PATH_MAX];

	*json = up_args_flag(a, "json");
	*list = up_args_flag(a, "list");
	if (*list && a->argc > 0)
		return up_cli_usage_error(cmd, "--list takes no FILE");
	if (!getcwd(cwd, sizeof(cwd))) {
		fprintf(stderr,
			"uplink %s: cannot tell the current folder: %s; cd into an existing "
			"folder, or name the files\n",
			cmd->pattern, strerror(errno));
		return UP_EXIT_FAILED;
	}
	*files = a->argc > 0 ? json_array() : NULL;
	for (int i = 0; i < a->argc; i++)
		(void)json_array_append_new(*files, abs_path(a->argv[i], cwd));
	return 0;
}

static void print_trust(const json_t *r)
{
	const json_t *e;
	size_t i;

	json_array_foreach (json_object_get(r, "trusted"), i, e)
		print_trusted(e);
}

int up_cmd_trust(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	char cwd[PATH_MAX];
	json_t *files = NULL, *params;
	bool json, list;
	int r;

	r = parse(cmd, a, &json, &list, &files);
	if (r != 0)
		return r;
	if (list)
		return up_cli_call_print(cli, "config.trusted", NULL, json, print_list, NULL);
	if (files)
		params = json_pack("{s:o}", "files", files);
	else
		params = getcwd(cwd, sizeof(cwd)) ? json_pack("{s:s}", "cwd", cwd) : NULL;
	return up_cli_call_print(cli, "config.trust", params, json, print_trust, NULL);
}

static void print_untrust(const json_t *r)
{
	const json_t *f;
	size_t i;

	json_array_foreach (json_object_get(r, "removed"), i, f)
		printf("no longer trusted: %s\n", json_string_value(f));
	json_array_foreach (json_object_get(r, "unknown"), i, f)
		fprintf(stderr,
			"uplink untrust: %s was not trusted (uplink trust --list shows the "
			"trusted files)\n",
			json_string_value(f));
}

int up_cmd_untrust(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	json_t *files = NULL, *result = NULL;
	bool json, list;
	int r;

	r = parse(cmd, a, &json, &list, &files);
	if (r != 0)
		return r;
	if (!files)
		return up_cli_usage_error(
			cmd, "name the files to stop trusting (uplink trust --list shows them)");
	r = up_cli_call_print(cli, "config.untrust", json_pack("{s:o}", "files", files), json,
			      print_untrust, &result);
	if (r != 0)
		return r;
	r = json_array_size(json_object_get(result, "unknown")) > 0 ? UP_EXIT_FAILED : UP_EXIT_OK;
	json_decref(result);
	return r;
}
