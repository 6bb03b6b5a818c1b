/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "rpc.h" /* struct up_method */
#include "util.h"

/*
 * The daemon as a whole: the loop, the lock that keeps a second daemon away, the
 * listening socket, signals, the systemd watchdog, and the RPC domains.
 */
struct up_manager;

struct up_manager_info {
	const char *socket_path;
	bool activated;
	uint64_t uptime_ms;
	unsigned clients;
	uint64_t requests_total;
	unsigned requests_inflight;
	bool watchdog;
};

int up_manager_new(struct up_manager **ret) _wur_;
/* Takes the lock, opens the socket and arms the loop; READY=1 follows. */
int up_manager_start(struct up_manager *m) _wur_;
/* Runs until a signal or daemon.shutdown; returns the exit status. */
int up_manager_run(struct up_manager *m);
/* Begins a clean shutdown: answers what is in flight, closes every handle. */
void up_manager_stop(struct up_manager *m, const char *why);
struct up_manager *up_manager_free(struct up_manager *m);
void up_manager_freep(struct up_manager **m);
void up_manager_get_info(const struct up_manager *m, struct up_manager_info *info);
uv_loop_t *up_manager_loop(struct up_manager *m);
/* The desktop notifier (NULL when off or stopping); up_notify_*() take NULL. */
struct up_notifier;
struct up_notifier *up_manager_notifier(struct up_manager *m);

/* The RPC domains, each registered by up_manager_start(): a method table (rpc-daemon.c,
 * rpc-rules.c, rpc-session.c, rpc-config.c), or a function where registering does more. */
extern const struct up_method up_rpc_daemon_methods[], up_rpc_rules_methods[],
	up_rpc_session_methods[], up_rpc_config_methods[];
int up_rpc_doctor_register(struct up_rpc *rpc, struct up_manager *m) _wur_;
int up_rpc_debug_register(struct up_rpc *rpc, struct up_manager *m) _wur_;

struct up_sessions;
struct up_sessions *up_manager_sessions(struct up_manager *m);

/* The deploy cluster (NULL while stopping). */
struct up_cluster;
struct up_cluster *up_manager_cluster(struct up_manager *m);
