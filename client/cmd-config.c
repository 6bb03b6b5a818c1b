/* SPDX-License-Identifier: Apache-2.0 */
/* uplink config show */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

static void print_value(const char *key, const json_t *value, const json_t *source)
{
	char *text = json_is_string(value) ? strdup(json_string_value(value))
					   : json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

	printf("%-20s %-32s %s\n", key,
	       json_is_null(value) ? "(unset)"
	       : text		   ? text
				   : "?",
	       json_is_string(source) ? json_string_value(source) : "?");
	free(text);
}

static void print_config(const json_t *r)
{
	const json_t *files = json_object_get(r, "files"), *values = json_object_get(r, "values"),
		     *v;
	const char *key;
	size_t i;

	if (json_array_size(files) == 0)
		printf("no config files (looked for .uplink.yaml and .agent-uplink.yaml up to "
		       "home, "
		       "and ~/.config/uplink/config.yaml)\n");
	else
		printf("files, nearest first:\n");
	json_array_foreach (files, i, v)
		printf("  %s\n", up_json_text(v));
	printf("\n");
	json_object_foreach ((json_t *)values, key, v) {
		const json_t *value = json_object_get(v, "value"),
			     *source = json_object_get(v, "source");

		if (json_is_array(value) && json_is_array(source)) {
			const json_t *item;
			size_t j;
			json_array_foreach (value, j, item) {
				char name[64];
				(void)snprintf(name, sizeof(name), "%s[%zu]", key, j);
				print_value(name, item, json_array_get(source, j));
			}
		} else
			print_value(key, value, source);
	}
}

/*
 * What the project files ask for that needs trust, and whether they have it. A file that is
 * not trusted is said on stderr, with the command, and the exit status says it (5).
 */
static int print_trust(const json_t *r, int json)
{
	const json_t *e, *a;
	const char *untrusted = json_string_value(json_object_get(r, "untrusted"));
	size_t i, k;

	json_array_foreach (json_object_get(r, "trust"), i, e) {
		if (json)
			break;
		printf("\n%s (%s) asks for:\n", json_string_value(json_object_get(e, "file")),
		       json_string_value(json_object_get(e, "state")));
		json_array_foreach (json_object_get(e, "asks"), k, a)
			printf("  %s: %s\n", json_string_value(json_object_get(a, "at")),
			       json_string_value(json_object_get(a, "what")));
	}
	if (!untrusted)
		return UP_EXIT_OK;
	fprintf(stderr,
		"uplink config show: uplink run refuses these files until you trust them: %s\n",
		untrusted);
	return UP_EXIT_UNTRUSTED;
}

int up_cmd_config_show(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	bool json = up_args_flag(a, "json");
	char cwd[PATH_MAX];
	json_t *result = NULL;
	int r;

	if (a->argc > 0)
		return up_cli_usage_error(cmd, "unexpected argument '%s'", a->argv[0]);
	if (!getcwd(cwd, sizeof(cwd))) {
		fprintf(stderr,
			"uplink config show: cannot tell the current folder: %s; cd into an "
			"existing folder (the config files are looked up from there to your "
			"home)\n",
			strerror(errno));
		return UP_EXIT_FAILED;
	}
	r = up_cli_call_print(cli, "config.show", json_pack("{s:s}", "cwd", cwd), json,
			      print_config, &result);
	if (r != 0)
		return r;
	r = print_trust(result, json);
	json_decref(result);
	return r;
}
