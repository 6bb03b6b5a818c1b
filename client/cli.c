/* SPDX-License-Identifier: Apache-2.0 */
/* The one RPC path of the client: connect, hello, call, and error reporting. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "bounds.h"
#include "paths.h"
#include "protocol.h"

static int report_transport(struct up_cli *cli, int r)
{
	if (r == -ENOENT || r == -ECONNREFUSED) {
		fprintf(stderr,
			"uplink: uplinkd is not running (nothing answers at %s).\n"
			"Start it with:  " UP_START_HINT "\n"
			"or run it in a terminal:  uplinkd\n",
			cli->socket_path);
		return UP_EXIT_UNREACHABLE;
	}
	if (r == -EACCES || r == -EPERM) {
		fprintf(stderr,
			"uplink: not allowed to connect to %s: %s.\n"
			"The socket belongs to another user; use your own uplinkd.\n",
			cli->socket_path, strerror(-r));
		return UP_EXIT_UNREACHABLE;
	}
	if (r == -ETIMEDOUT) {
		fprintf(stderr,
			"uplink: uplinkd at %s did not answer within %d s; "
			"see its log: journalctl --user -u uplinkd\n",
			cli->socket_path, UP_CLIENT_TIMEOUT_MS / 1000);
		return UP_EXIT_UNREACHABLE;
	}
	if (r == -ECONNRESET || r == -EPIPE) {
		fprintf(stderr, "uplink: uplinkd closed the connection; "
				"see its log: journalctl --user -u uplinkd\n");
		return UP_EXIT_UNREACHABLE;
	}
	fprintf(stderr, "uplink: talking to uplinkd at %s failed: %s\n", cli->socket_path,
		strerror(-r));
	return UP_EXIT_UNREACHABLE;
}

static int report_error(struct up_rpc_error *err)
{
	fprintf(stderr, "uplink: %s\n", err->message);
	int code = strcmp(err->name, "PROTOCOL_MISMATCH") == 0	? UP_EXIT_MISMATCH
		   : strcmp(err->name, "UNTRUSTED_CONFIG") == 0 ? UP_EXIT_UNTRUSTED
								: UP_EXIT_FAILED;
	up_rpc_error_done(err);
	return code;
}

int up_cli_connect(struct up_cli *cli)
{
	struct up_rpc_error err = {0};
	json_t *result = NULL;
	int r;

	if (cli->rpc)
		return 0;
	r = up_socket_path(cli->socket_path, sizeof(cli->socket_path));
	if (r < 0) {
		fprintf(stderr,
			"uplink: the socket path is longer than %d bytes; "
			"set " UP_SOCKET_ENV " to a shorter one\n",
			UP_MAX_SOCKET_PATH);
		return UP_EXIT_USAGE;
	}
	r = up_rpc_client_connect(cli->socket_path, &cli->rpc);
	if (r < 0)
		return report_transport(cli, r);
	r = up_rpc_client_call(
		cli->rpc, "daemon.hello",
		json_pack("{s:i, s:s}", "protocol", UP_PROTOCOL_VERSION, "client", UPLINK_VERSION),
		UP_CLIENT_TIMEOUT_MS, NULL, NULL, &result, &err);
	json_decref(result);
	if (r < 0)
		return report_transport(cli, r);
	if (r > 0)
		return report_error(&err);
	return 0;
}

int up_cli_report(struct up_cli *cli, int r, struct up_rpc_error *err)
{
	return r < 0 ? report_transport(cli, r) : report_error(err);
}

int up_cli_call(struct up_cli *cli, const char *method, json_t *params_steal, json_t **result)
{
	struct up_rpc_error err = {0};
	int r = up_cli_connect(cli);

	if (r != 0) {
		json_decref(params_steal);
		return r;
	}
	r = up_rpc_client_call(cli->rpc, method, params_steal, UP_CLIENT_TIMEOUT_MS, NULL, NULL,
			       result, &err);
	if (r < 0)
		return report_transport(cli, r);
	if (r > 0)
		return report_error(&err);
	return 0;
}

int up_cli_call_print(struct up_cli *cli, const char *method, json_t *params_steal, bool json,
		      void (*print)(const json_t *r), json_t **result)
{
	json_t *res = NULL;
	int r = up_cli_call(cli, method, params_steal, &res);

	if (r != 0)
		return r;
	if (json)
		up_print_json(res);
	else
		print(res);
	if (result)
		*result = res;
	else
		json_decref(res);
	return UP_EXIT_OK;
}

/* "  --name VALUE   its help", continuation lines under the help. */
static void option_help(const struct up_command *cmd, const struct up_option *o, FILE *f)
{
	char label[96], letter[5] = {'-', o->short_name, ',', ' ', '\0'};

	if (o->label)
		(void)snprintf(label, sizeof(label), "%s", o->label);
	else
		(void)snprintf(label, sizeof(label), "%s--%s%s%s", o->short_name ? letter : "",
			       o->name, o->value ? " " : "", o->value ? o->value : "");
	fprintf(f, "  %-*s", cmd->help_width, label);
	for (const char *s = o->help; *s;) {
		size_t n = strcspn(s, "\n");
		fprintf(f, "%.*s\n", (int)n, s);
		s += n;
		if (*s == '\n' && *++s)
			fprintf(f, "  %*s", cmd->help_width, "");
	}
}

void up_cli_command_help(const struct up_command *cmd, FILE *f)
{
	bool listed = false;

	fprintf(f, "Usage: uplink %s %s\n\n%s\n", cmd->pattern, cmd->usage, cmd->summary);
	for (const struct up_option *o = cmd->options; o && o->name; o++)
		listed = listed || o->help;
	if (listed || (cmd->help && *cmd->help) || (cmd->help_after && *cmd->help_after))
		fprintf(f, "\n%s", cmd->help ? cmd->help : "");
	if (listed)
		fprintf(f, "Options:\n");
	for (const struct up_option *o = cmd->options; o && o->name; o++)
		if (o->help)
			option_help(cmd, o, f);
	fprintf(f, "%s", cmd->help_after ? cmd->help_after : "");
}

int up_cli_usage_error(const struct up_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "uplink %s: ", cmd->pattern);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nUsage: uplink %s %s\nSee: uplink %s --help\n", cmd->pattern, cmd->usage,
		cmd->pattern);
	return UP_EXIT_USAGE;
}

void up_print_json(const json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);

	if (s)
		printf("%s\n", s);
	free(s);
}

const char *up_json_text(const json_t *v)
{
	const char *s = json_string_value(v);

	return s ? s : "-";
}

const char *up_json_field(const json_t *o, const char *key)
{
	return up_json_text(json_object_get(o, key));
}

void up_format_duration(double seconds, char *buf, size_t len)
{
	long s = (long)seconds;

	if (s < 60)
		(void)snprintf(buf, len, "%lds", s);
	else if (s < 3600)
		(void)snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
	else if (s < 86400)
		(void)snprintf(buf, len, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
	else
		(void)snprintf(buf, len, "%ldd%02ldh", s / 86400, (s % 86400) / 3600);
}
