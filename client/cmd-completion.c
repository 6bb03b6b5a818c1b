/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink completion bash|zsh|fish: a completion script printed from the command table; and
 * uplink completion --words KIND, which the scripts run for the words only known at
 * completion time (session ids), bounded so that a stuck or absent uplinkd costs at most
 * UP_COMPLETION_TIMEOUT_MS and prints nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "paths.h"
#include "protocol.h"

static int print_sessions(void)
{
	_cleanup_(up_rpc_client_freep) struct up_rpc_client *c = NULL;
	struct up_rpc_error err = {0};
	char path[UP_MAX_SOCKET_PATH + 1];
	json_t *res = NULL, *s;
	size_t i;

	if (up_socket_path(path, sizeof(path)) < 0 || up_rpc_client_connect(path, &c) < 0)
		return UP_EXIT_OK; /* no daemon: no ids to offer, and nothing to say */
	if (up_rpc_client_call(c, "session.list", json_pack("{s:b}", "all", false),
			       UP_COMPLETION_TIMEOUT_MS, NULL, NULL, &res, &err) != 0) {
		up_rpc_error_done(&err);
		return UP_EXIT_OK;
	}
	json_array_foreach (json_object_get(res, "sessions"), i, s) {
		const char *id = json_string_value(json_object_get(s, "id"));
		if (id)
			printf("%s\n", id);
	}
	json_decref(res);
	return UP_EXIT_OK;
}

static int print_words(const struct up_command *cmd, const char *kind)
{
	if (streq(kind, "sessions"))
		return print_sessions();
	if (streq(kind, "agents")) {
		for (size_t i = 0; up_completion_agents[i]; i++)
			printf("%s\n", up_completion_agents[i]);
		return UP_EXIT_OK;
	}
	return up_cli_usage_error(cmd, "--words takes sessions or agents, not '%s'", kind);
}

struct shell {
	const char *name;
	int (*print)(FILE *f, const struct comp_cmd *cmds, size_t n);
};

static const struct shell shells[] = {
	{"bash", comp_print_bash},
	{"zsh", comp_print_zsh},
	{"fish", comp_print_fish},
	{NULL, NULL},
};

static int print_script(const struct up_command *cmd, const struct shell *sh)
{
	size_t n = 0;
	struct comp_cmd *cmds;
	int r = 0;

	while (up_commands[n].pattern)
		n++;
	cmds = calloc(n, sizeof(*cmds));
	if (!cmds) {
		fprintf(stderr, "uplink completion: out of memory\n");
		return UP_EXIT_FAILED;
	}
	for (size_t i = 0; i < n && r >= 0; i++)
		if ((r = comp_cmd_read(&up_commands[i], &cmds[i])) < 0)
			fprintf(stderr,
				"uplink completion: the command table's '%s' has more options or "
				"arguments than the completion model holds (%d, %d); raise "
				"UP_MAX_COMPLETION_OPTS or _POS in common/bounds.h\n",
				up_commands[i].pattern, UP_MAX_COMPLETION_OPTS,
				UP_MAX_COMPLETION_POS);
	if (r >= 0)
		r = sh->print(stdout, cmds, n);
	free(cmds);
	if (r < 0 && r != -E2BIG)
		fprintf(stderr, "uplink %s: cannot write the script: %s\n", cmd->pattern,
			strerror(-r));
	return r < 0 ? UP_EXIT_FAILED : UP_EXIT_OK;
}

int up_cmd_completion(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	const char *words = up_args_value(a, "words");

	(void)cli;
	if (words && a->argc == 0 && a->n_hits == 1)
		return print_words(cmd, words);
	if (a->argc != 1 || a->n_hits > 0)
		return up_cli_usage_error(cmd, "give one shell: bash, zsh or fish");
	for (const struct shell *sh = shells; sh->name; sh++)
		if (streq(a->argv[0], sh->name))
			return print_script(cmd, sh);
	return up_cli_usage_error(cmd, "unknown shell '%s'; bash, zsh and fish are supported",
				  a->argv[0]);
}
