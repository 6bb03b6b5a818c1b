/* SPDX-License-Identifier: Apache-2.0 */
/* uplink status */
#include <stdio.h>
#include <string.h>

#include "client.h"

static void print_cluster(const json_t *c)
{
	const char *state = json_string_value(json_object_get(c, "state"));
	const char *error = json_string_value(json_object_get(c, "error"));

	if (!c)
		return;
	printf("cluster:   %s", state ? state : "?");
	if (json_object_get(c, "context"))
		printf(", context %s", up_json_field(c, "context"));
	if (json_object_get(c, "server"))
		printf(" at %s", up_json_field(c, "server"));
	if (json_object_get(c, "namespaces"))
		printf(", %lld namespaces and %lld pods watched",
		       (long long)json_integer_value(json_object_get(c, "namespaces")),
		       (long long)json_integer_value(json_object_get(c, "pods")));
	printf("\n");
	if (error)
		printf("           %s\n           see: uplink doctor\n", error);
}

static void print_status(const json_t *s)
{
	const json_t *conns = json_object_get(s, "connections");
	char up[32];

	up_format_duration((double)json_integer_value(json_object_get(s, "uptime_ms")) / 1000.0, up,
			   sizeof(up));
	printf("uplinkd %s (protocol %lld), pid %lld, up %s\n", up_json_field(s, "version"),
	       (long long)json_integer_value(json_object_get(s, "protocol")),
	       (long long)json_integer_value(json_object_get(s, "pid")), up);
	printf("socket:    %s%s\n", up_json_field(s, "socket"),
	       json_is_true(json_object_get(s, "socket_activated")) ? " (socket-activated)" : "");
	printf("clients:   %lld connected, %lld requests in flight, %lld served\n",
	       (long long)json_integer_value(json_object_get(conns, "clients")),
	       (long long)json_integer_value(json_object_get(conns, "requests_in_flight")),
	       (long long)json_integer_value(json_object_get(conns, "requests_total")));
	printf("watchdog:  %s\n", json_is_true(json_object_get(s, "watchdog")) ? "on" : "off");
	print_cluster(json_object_get(s, "cluster"));
}

int up_cmd_status(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	if (a->argc > 0)
		return up_cli_usage_error(cmd, "unexpected argument '%s'", a->argv[0]);
	return up_cli_call_print(cli, "daemon.status", NULL, up_args_flag(a, "json"), print_status,
				 NULL);
}
