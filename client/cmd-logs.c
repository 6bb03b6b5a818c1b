/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink logs: a session's audit log, one request per line (time, decision, method,
 * host, path, rule), coloured by decision on a terminal; --json prints the lines as
 * the proxy wrote them. The daemon sends them as audit.event notifications.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "client.h"

struct logs_state {
	bool json, color;
};

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && *s ? s : dflt;
}

static const char *colour_of(const char *decision)
{
	if (!strcmp(decision, "deny") || !strcmp(decision, "connect-refused"))
		return "\033[31m";
	if (!strcmp(decision, "allow") || !strcmp(decision, "resign") || !strcmp(decision, "l4"))
		return "\033[32m";
	return "";
}

static void print_event(const struct logs_state *st, json_t *ev)
{
	const char *ts = str_or(ev, "ts", "-"), *decision = str_or(ev, "decision", "?");
	const char *scheme = str_or(ev, "scheme", NULL);
	json_int_t port = json_integer_value(json_object_get(ev, "port"));
	char when[32], host[300];
	const char *col = st->color ? colour_of(decision) : "";

	/* 2026-11-29T09:02:13.031Z -> 2026-11-29 09:02:13 */
	(void)snprintf(when, sizeof(when), "%.19s", ts);
	if (strlen(when) > 10 && when[10] == 'T')
		when[10] = ' ';
	if (port && !((scheme && !strcmp(scheme, "https") && port == 443) ||
		      (scheme && !strcmp(scheme, "http") && port == 80)))
		(void)snprintf(host, sizeof(host), "%s:%lld", str_or(ev, "host", "?"),
			       (long long)port);
	else
		(void)snprintf(host, sizeof(host), "%s", str_or(ev, "host", "?"));
	printf("%s %s%-15s%s %-7s %s %s %s\n", when, col, decision, *col ? "\033[0m" : "",
	       str_or(ev, "method", "-"), host, str_or(ev, "path", "-"), str_or(ev, "rule", "-"));
}

/* A request waiting for the user (ask mode), inline: "waiting", then how to decide. */
static void print_waiting(const struct logs_state *st, json_t *held)
{
	time_t since = (time_t)json_number_value(json_object_get(held, "since"));
	const char *col = st->color ? "\033[33m" : "";
	char when[32] = "-";
	struct tm tm;

	if (!json_is_object(held))
		return;
	if (st->json) {
		json_t *o = json_pack("{s:s, s:O}", "uplink", "waiting", "held", held);
		char *line = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		if (line)
			printf("%s\n", line);
		free(line);
		json_decref(o);
	} else {
		if (gmtime_r(&since, &tm))
			(void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		printf("%s %s%-15s%s %-7s %s %s (uplink approve %s, uplink deny %s)\n", when, col,
		       "waiting", *col ? "\033[0m" : "", str_or(held, "method", "-"),
		       str_or(held, "host", "?"), str_or(held, "path", "-"),
		       str_or(held, "id", "?"), str_or(held, "id", "?"));
	}
	fflush(stdout);
}

static void on_event(const char *method, json_t *params, void *ud)
{
	const struct logs_state *st = ud;
	json_t *ev = json_object_get(params, "event");

	if (!strcmp(method, "approvals.waiting")) {
		print_waiting(st, json_object_get(params, "held"));
		return;
	}
	if (strcmp(method, "audit.event") != 0 || !json_is_object(ev))
		return;
	if (st->json) {
		char *line = json_dumps(ev, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (line)
			printf("%s\n", line);
		free(line);
	} else {
		print_event(st, ev);
	}
	fflush(stdout);
}

int up_cmd_logs(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	const char *nc = getenv("NO_COLOR");
	struct logs_state st = {.color = isatty(STDOUT_FILENO) && !(nc && *nc),
				.json = up_args_flag(a, "json")};
	struct up_rpc_error err = {0};
	bool follow = up_args_flag(a, "follow"), denied = up_args_flag(a, "denied");
	json_t *res = NULL;
	int r;

	if (a->argc != 1)
		return up_cli_usage_error(cmd, "name one session (uplink list --all shows them)");
	r = up_cli_connect(cli);
	if (r != 0)
		return r;
	r = up_rpc_client_call(cli->rpc, "session.logs",
			       json_pack("{s:s, s:b, s:b}", "id", a->argv[0], "follow", follow,
					 "denied_only", denied),
			       follow ? -1 : UP_CLIENT_TIMEOUT_MS, on_event, &st, &res, &err);
	if (r != 0)
		return up_cli_report(cli, r, &err);
	json_decref(res);
	return UP_EXIT_OK;
}
