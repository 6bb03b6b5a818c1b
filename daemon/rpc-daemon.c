/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon.* methods: hello, status, shutdown. */
#include <stdint.h>
#include <unistd.h>
#include <uv.h>

#include "cluster.h"
#include "session.h"
#include "config.h"
#include "manager.h"
#include "protocol.h"
#include "rpc.h"

struct hello_params {
	int64_t protocol;
	const char *client;
};

static const struct up_param hello_params[] = {
	{"protocol", UP_PARAM_INT, offsetof(struct hello_params, protocol), UP_PARAM_MANDATORY,
	 NULL},
	{"client", UP_PARAM_STRING, offsetof(struct hello_params, client), 0, NULL},
	{0},
};

static int rpc_hello(struct up_request *req, void *params, void *userdata)
{
	struct hello_params *p = params;

	(void)userdata;
	if (p->protocol != UP_PROTOCOL_VERSION) {
		up_request_errorf(
			req, UP_ERR_PROTOCOL_MISMATCH,
			"the client%s%s speaks protocol %lld but uplinkd %s speaks protocol %d; "
			"restart the daemon so both come from one install "
			"(systemctl --user restart uplinkd)",
			p->client ? " " : "", p->client ? p->client : "", (long long)p->protocol,
			UPLINK_VERSION, UP_PROTOCOL_VERSION);
		return 0;
	}
	up_request_reply(req, json_pack("{s:i, s:s, s:I}", "protocol", UP_PROTOCOL_VERSION,
					"version", UPLINK_VERSION, "pid", (json_int_t)getpid()));
	return 0;
}

static int rpc_status(struct up_request *req, void *params, void *userdata)
{
	struct up_manager_info info;
	json_t *r;

	(void)params;
	up_manager_get_info(userdata, &info);
	r = json_pack("{s:s, s:i, s:I, s:I, s:I, s:s, s:b, s:b, s:{s:I, s:I, s:I}}", "version",
		      UPLINK_VERSION, "protocol", UP_PROTOCOL_VERSION, "pid", (json_int_t)getpid(),
		      "uid", (json_int_t)getuid(), "uptime_ms", (json_int_t)info.uptime_ms,
		      "socket", info.socket_path, "socket_activated", info.activated, "watchdog",
		      info.watchdog, "connections", "clients", (json_int_t)info.clients,
		      "requests_in_flight", (json_int_t)info.requests_inflight, "requests_total",
		      (json_int_t)info.requests_total);
	if (!r)
		return -ENOMEM;
	if (up_manager_cluster(userdata))
		(void)json_object_set_new(r, "cluster",
					  up_cluster_status(up_manager_cluster(userdata)));
	if (up_manager_sessions(userdata))
		(void)json_object_set_new(r, "sessions",
					  up_sessions_counts(up_manager_sessions(userdata)));
	up_request_reply(req, r);
	return 0;
}

static int rpc_shutdown(struct up_request *req, void *params, void *userdata)
{
	(void)params;
	up_request_reply(req, json_pack("{s:b}", "stopping", 1));
	up_manager_stop(userdata, "daemon.shutdown");
	return 0;
}

const struct up_method up_rpc_daemon_methods[] = {
	{"daemon.hello", hello_params, sizeof(struct hello_params), rpc_hello},
	{"daemon.status", NULL, 0, rpc_status},
	{"daemon.shutdown", NULL, 0, rpc_shutdown},
	{0},
};
