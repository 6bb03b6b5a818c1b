/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "rpc-client.h"
#include "util.h"

/* Exit codes of every command (documented in `uplink --help`). */
enum {
	UP_EXIT_OK = 0,
	UP_EXIT_FAILED = 1,	 /* the daemon refused or the operation failed */
	UP_EXIT_USAGE = 2,	 /* bad command line */
	UP_EXIT_UNREACHABLE = 3, /* no uplinkd answers on the socket */
	UP_EXIT_MISMATCH = 4,	 /* uplink and uplinkd speak different protocols */
	UP_EXIT_UNTRUSTED = 5,	 /* a project's config file needs uplink trust (UNTRUSTED_CONFIG) */
};

struct up_cli {
	const char *argv0;
	char socket_path[128];
	struct up_rpc_client *rpc; /* connected on first use */
};

struct up_command {
	const char *pattern; /* words, e.g. "status" or "rules check" */
	int (*fn)(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
	const char *summary;
	const char *usage; /* options and arguments after the pattern */
	const char *help;  /* the rest of `uplink PATTERN --help` */
};

extern const struct up_command up_commands[];

int up_cmd_config_show(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_trust(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_untrust(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_doctor(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_run(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_attach(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_extend(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_list(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_stop(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_clean(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_logs(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_status(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_rules_check(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_rules_lint(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_completion(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);
int up_cmd_rules_render(struct up_cli *cli, const struct up_command *cmd, int argc, char **argv);

/* Connects and says hello once; prints why and returns an exit code on failure. */
int up_cli_connect(struct up_cli *cli);
/*
 * One call; on failure prints the daemon's error (or why the connection failed) and
 * returns an exit code, else 0 with *result owned by the caller.
 */
int up_cli_call(struct up_cli *cli, const char *method, json_t *params_steal, json_t **result);

/* Reports what up_rpc_client_call() returned (r < 0 transport, r > 0 error) as an exit code. */
int up_cli_report(struct up_cli *cli, int r, struct up_rpc_error *err);
/* --kubeconfig or what kubectl reads here, as "kubeconfig_default" in params (cmd-session.c). */
void up_cli_kubeconfig_default(json_t *params);
/* A host path made absolute for the daemon ("~/x" is $HOME/x). */
json_t *up_cli_abs_path(const char *arg);
int up_cli_usage_error(const struct up_command *cmd, const char *fmt, ...) _printf_(2, 3);
void up_cli_command_help(const struct up_command *cmd, FILE *f);
void up_print_json(const json_t *v);
/* A JSON string's text for printing: "-" when v is missing or not a string, never NULL. */
const char *up_json_text(const json_t *v);
/* up_json_text() of o[key]. */
const char *up_json_field(const json_t *o, const char *key);
void up_format_duration(double seconds, char *buf, size_t len);
