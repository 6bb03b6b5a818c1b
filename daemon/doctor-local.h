/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "agents/agent.h"

/*
 * doctor.run's local checks (PATH, `docker version`, registries.yaml, the user bus, the
 * agents' logins). up_doctor_local_run() BLOCKS: it reads files, spawns and calls D-Bus,
 * so rpc-doctor.c runs it on a worker thread.
 */

/* Agent checks shown at most (UP_AGENT_MAX_CHECKS per agent fit in it). */
#define UP_DOCTOR_MAX_AGENT_CHECKS 32

struct local_check {
	const char *name, *status;
	char detail[1024];
	char fix[1024];
};

struct up_doctor_local {
	char server[512]; /* the deploy cluster's API server, "" if unknown */
	struct local_check kubectl, docker, docker_daemon, optional, registries, secrets,
		notifications;
	struct up_agent_check agents[UP_DOCTOR_MAX_AGENT_CHECKS];
	size_t n_agents;
};

/* Fills every check; l->server is set by the caller first. */
void up_doctor_local_run(struct up_doctor_local *l);
