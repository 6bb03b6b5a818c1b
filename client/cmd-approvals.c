/* SPDX-License-Identifier: Apache-2.0 */
/* uplink approvals, uplink approve, uplink deny (ask mode: README.md "Ask mode") */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

static void print_held(const json_t *r)
{
	const json_t *held = json_object_get(r, "held"), *e;
	double now = (double)time(NULL);
	size_t i;

	if (json_array_size(held) == 0) {
		printf("Nothing waits for you (sessions started with --ask hold what no rule "
		       "allows).\n");
		return;
	}
	printf("%-24s %-7s %-5s %-6s %s\n", "ID", "METHOD", "COUNT", "LEFT", "REQUEST");
	json_array_foreach (held, i, e) {
		double left = json_number_value(json_object_get(e, "expires")) - now;
		const char *scheme = up_json_field(e, "scheme");

		printf("%-24s %-7s %-5lld %4.0fs  %s://%s%s%s\n", up_json_field(e, "id"),
		       up_json_field(e, "method"),
		       (long long)json_integer_value(json_object_get(e, "count")),
		       left > 0 ? left : 0, scheme, up_json_field(e, "host"),
		       up_json_field(e, "path"),
		       json_is_true(json_object_get(e, "query_present")) ? "?…" : "");
	}
	printf("\nuplink approve ID [--session] lets one go; uplink deny ID refuses it.\n");
}

int up_cmd_approvals(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	if (a->argc > 0)
		return up_cli_usage_error(cmd, "unexpected argument '%s'", a->argv[0]);
	return up_cli_call_print(cli, "approvals.list", NULL, up_args_flag(a, "json"), print_held,
				 NULL);
}

/* The rule approving `id` for the session adds, printed before it applies; `save_to`: where
 * it is saved too ("": the user's own rules file). */
static int show_rule(struct up_cli *cli, const char *id, const char *save_to)
{
	json_t *r = NULL, *e, *hit = NULL;
	char *text;
	size_t i;
	int rc = up_cli_call(cli, "approvals.list", NULL, &r);

	if (rc)
		return rc;
	json_array_foreach (json_object_get(r, "held"), i, e)
		if (!hit && !strcmp(up_json_field(e, "id"), id))
			hit = e;
	text = hit ? json_dumps(json_object_get(hit, "rule"), JSON_COMPACT) : NULL;
	if (text)
		printf("Adding to session %s's rules%s%s: %s\n", up_json_field(hit, "session"),
		       save_to ? " and saving it to " : "",
		       !save_to	  ? ""
		       : *save_to ? save_to
				  : "your own rules file",
		       text);
	free(text);
	json_decref(r);
	return 0;
}

static void print_decided(const json_t *r)
{
	const char *decision = up_json_field(r, "decision");
	long long n = (long long)json_integer_value(json_object_get(r, "released"));

	if (!strcmp(decision, "deny")) {
		printf("Denied %s: the agent gets a 403 saying you refused it.\n",
		       up_json_field(r, "id"));
		return;
	}
	if (!strcmp(decision, "save"))
		printf("Saved the rule to %s:%lld%s; every session from now on takes it.\n",
		       up_json_field(r, "file"),
		       (long long)json_integer_value(json_object_get(r, "line")),
		       json_is_true(json_object_get(r, "trusted_again"))
			       ? " (you trusted the file before: it is trusted again as written)"
			       : "");
	printf("Approved %s (%s): %lld request%s released.\n", up_json_field(r, "id"),
	       !strcmp(decision, "once") ? "once" : "for the session", n, n == 1 ? "" : "s");
	/* optional (newer daemons): the rule is not kept where a restarted proxy finds it */
	if (json_is_string(json_object_get(r, "warning")))
		fprintf(stderr, "uplink: warning: %s\n", up_json_field(r, "warning"));
}

/* FILE as the daemon takes it: absolute, its folder resolved (it must exist). */
static int save_path(const struct up_command *cmd, const char *arg, char *out, size_t len)
{
	char dir[PATH_MAX], real[PATH_MAX], *slash;
	const char *base, *home = getenv("HOME");

	if (home && !strncmp(arg, "~/", 2))
		(void)snprintf(dir, sizeof(dir), "%s%s", home, arg + 1);
	else
		(void)snprintf(dir, sizeof(dir), "%s", arg);
	slash = strrchr(dir, '/');
	base = slash ? slash + 1 : dir;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return up_cli_usage_error(cmd, "--save-to needs a file, not a folder: '%s'", arg);
	if (slash == dir)
		(void)snprintf(real, sizeof(real), "/");
	else if (!realpath(slash ? (*slash = '\0', dir) : ".", real)) {
		fprintf(stderr, "uplink: --save-to %s: its folder cannot be used: %s\n", arg,
			strerror(errno));
		return 2;
	}
	if ((size_t)snprintf(out, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) >= len) {
		fprintf(stderr, "uplink: --save-to %s: the path is too long\n", arg);
		return 2;
	}
	return 0;
}

static int decide(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a,
		  const char *decision)
{
	const char *to = up_args_value(a, "save-to");
	char file[PATH_MAX];
	json_t *params;
	int rc;

	if (a->argc != 1)
		return up_cli_usage_error(cmd, a->argc ? "one ID only"
						       : "which request? (uplink "
							 "approvals lists the IDs)");
	if (to && (rc = save_path(cmd, to, file, sizeof(file))))
		return rc;
	/* --json: stdout holds the answer only (it names the rule) */
	if (strcmp(decision, "once") && strcmp(decision, "deny") && !up_args_flag(a, "json") &&
	    (rc = show_rule(cli, a->argv[0], !strcmp(decision, "save") ? (to ? file : "") : NULL)))
		return rc;
	params = json_pack("{s:s, s:s}", "id", a->argv[0], "decision", decision);
	if (params && to)
		(void)json_object_set_new(params, "file", json_string(file));
	return up_cli_call_print(cli, "approvals.decide", params, up_args_flag(a, "json"),
				 print_decided, NULL);
}

int up_cmd_approve(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	bool save = up_args_flag(a, "save") || up_args_value(a, "save-to");

	if (save && up_args_flag(a, "session"))
		return up_cli_usage_error(cmd, "--session or --save, not both (--save also allows "
					       "it for the session)");
	return decide(cli, cmd, a, save ? "save" : up_args_flag(a, "session") ? "session" : "once");
}

int up_cmd_deny(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	return decide(cli, cmd, a, "deny");
}
