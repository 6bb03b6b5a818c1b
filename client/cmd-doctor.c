/* SPDX-License-Identifier: Apache-2.0 */
/* uplink doctor */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "config.h"

static const char *mark(const char *status, bool tty)
{
	static const struct {
		const char *status, *plain, *colour;
	} marks[] = {
		{"ok", "[ ok ]", "\033[32m[ ok ]\033[0m"},
		{"warn", "[warn]", "\033[33m[warn]\033[0m"},
		{"fail", "[FAIL]", "\033[31m[FAIL]\033[0m"},
		{"skip", "[skip]", "\033[2m[skip]\033[0m"},
	};

	for (size_t i = 0; i < ELEMENTSOF(marks); i++)
		if (strcmp(marks[i].status, status) == 0)
			return tty ? marks[i].colour : marks[i].plain;
	return "[ ?? ]";
}

static void print_checks(const json_t *result)
{
	bool tty = isatty(STDOUT_FILENO);
	json_t *checks = json_object_get(result, "checks"), *c;
	size_t i;

	json_array_foreach (checks, i, c) {
		const char *fix = json_string_value(json_object_get(c, "fix"));
		const char *status = up_json_field(c, "status");

		printf("%s %-15s %s\n", mark(status, tty), up_json_field(c, "name"),
		       up_json_field(c, "detail"));
		if (fix && strcmp(status, "ok") != 0)
			printf("       %-15s fix: %s\n", "", fix);
	}
}

int up_cmd_doctor(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	const char *context = up_args_value(a, "deploy-context");
	const char *kubeconfig = up_args_value(a, "kubeconfig");
	const char *runtime_class = up_args_value(a, "agent-runtime-class");
	bool json = up_args_flag(a, "json");
	json_t *result = NULL;
	int r;

	if (a->argc > 0)
		return up_cli_usage_error(cmd, "unexpected argument '%s'", a->argv[0]);
	r = up_cli_call_print(cli, "doctor.run",
			      json_pack("{s:s?, s:s?, s:s?, s:s}", "deploy_context", context,
					"kubeconfig", kubeconfig, "runtime_class", runtime_class,
					"client_version", UPLINK_VERSION),
			      json, print_checks, &result);
	if (r != 0)
		return r;
	r = json_is_true(json_object_get(result, "ok")) ? UP_EXIT_OK : UP_EXIT_FAILED;
	json_decref(result);
	return r;
}
