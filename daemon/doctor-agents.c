/* SPDX-License-Identifier: Apache-2.0 */
/* doctor.run's agent checks: each agent's doctor() on the host login, on a worker thread. */
#include "doctor-agents.h"

#include <stdio.h>

#include "agents/agent.h"

size_t up_doctor_agents(struct up_agent_check *out, size_t max)
{
	struct up_agent_input in = {0};
	char buf[4096];
	size_t n = 0;

	if (up_agent_input_self(&in, buf, sizeof(buf)) < 0) {
		if (max > 0)
			up_agent_check_set(out, "agent logins", "skip", NULL,
					   "skipped: this user has no passwd entry");
		return max > 0;
	}
	for (size_t i = 0; up_agents[i] && n < max; i++)
		if (up_agents[i]->doctor) {
			size_t room = max - n < UP_AGENT_MAX_CHECKS ? max - n : UP_AGENT_MAX_CHECKS;
			n += up_agents[i]->doctor(up_agents[i], &in, out + n, room);
		}
	return n;
}
