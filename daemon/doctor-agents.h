/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "agents/agent.h"

/* Agent checks `uplink doctor` shows at most (UP_AGENT_MAX_CHECKS per agent fit in it). */
#define UP_DOCTOR_MAX_AGENT_CHECKS 32

/* BLOCKING: every agent's doctor() for the daemon's own user; how many were written. */
size_t up_doctor_agents(struct up_agent_check *out, size_t max);
