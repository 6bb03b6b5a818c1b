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

/* An option a command declares (every command also takes -h, --help). */
struct up_option {
	const char *name;  /* the long name, without "--" */
	char short_name;   /* or 0 */
	const char *value; /* the value's name in the help ("FILE"); NULL: it takes none */
	const char *help;  /* its help line ("\n" continues it); NULL: not listed */
	const char *label; /* shown instead of "-x, --name VALUE", or NULL */
};

#define UP_MAX_COMMAND_OPTIONS 64

struct up_args;

struct up_command {
	const char *pattern; /* words, e.g. "status" or "rules check" */
	int (*fn)(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
	const char *summary;
	const char *usage;		 /* options and arguments after the pattern */
	const char *help;		 /* the help before the options' lines */
	const char *help_after;		 /* and after them */
	const struct up_option *options; /* ends with {0}; NULL: none */
	int help_width;			 /* of the options' labels in the help */
};

/* `uplink run`'s options (cmd-session.c, from common/session-options.h). */
extern const struct up_option up_run_options[];

/* What up_args_parse() found: the options in argv's order, then the arguments. */
struct up_arg_hit {
	const struct up_option *opt;
	const char *value; /* NULL for a flag */
};
struct up_args {
	struct up_arg_hit *hits;
	size_t n_hits, cap;
	int argc; /* the arguments that are not options */
	char **argv;
};

/* 0; -1 when it printed the help (exit 0); else an exit code, the one-line reason printed. */
int up_args_parse(const struct up_command *cmd, int argc, char **argv, struct up_args *a);
void up_args_done(struct up_args *a);
bool up_args_flag(const struct up_args *a, const char *name);
/* The last value of option `name`, or NULL. */
const char *up_args_value(const struct up_args *a, const char *name);
/* Each value of a repeatable option in turn (start with *i = 0), then NULL. */
const char *up_args_next(const struct up_args *a, const char *name, size_t *i);

extern const struct up_command up_commands[];

int up_cmd_config_show(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_trust(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_untrust(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_doctor(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_run(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_attach(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_extend(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_list(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_stop(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_clean(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_logs(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_status(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_approvals(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_approve(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_deny(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_rules_check(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_rules_suggest(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_rules_lint(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_completion(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);
int up_cmd_rules_render(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a);

/* Connects and says hello once; prints why and returns an exit code on failure. */
int up_cli_connect(struct up_cli *cli);
/*
 * One call; on failure prints the daemon's error (or why the connection failed) and
 * returns an exit code, else 0 with *result owned by the caller.
 */
int up_cli_call(struct up_cli *cli, const char *method, json_t *params_steal, json_t **result);

/*
 * up_cli_call(), then prints the result as JSON (json) or with print(); *result (when not
 * NULL) keeps it for the caller, else it is freed. 0 or an exit code.
 */
int up_cli_call_print(struct up_cli *cli, const char *method, json_t *params_steal, bool json,
		      void (*print)(const json_t *r), json_t **result);
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
