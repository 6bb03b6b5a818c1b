/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The deploy cluster's Service ranges for a session's mitm (uplink_refuse_cidrs): the read
 * starts with the session (PREPARING), next to its other start-up work, and rendering waits
 * for it at most UP_CLUSTER_RANGES_WAIT_MS (cluster-ranges.h). Without them the session
 * starts anyway (the daemon's log says so, once).
 */
#include <stdlib.h>

#include "bounds.h"
#include "cluster.h"
#include "jsonrpc.h"
#include "session-private.h"

void session_ranges_read(struct up_session *s)
{
	up_cluster_ranges_read(s->cluster ? up_cluster_ranges(s->cluster) : NULL);
}

static void on_ranges(bool closing, void *ud)
{
	struct up_session *s = ud;

	s->ranges_wait = NULL;
	if (closing || s->all->closing || up_session_state_is_terminal(s->state))
		return;
	session_step_deploy(s);
}

static void plan_line(struct up_session *s, const json_t *cidrs)
{
	char *joined = cidrs ? up_json_join(cidrs, ",") : NULL;

	if (joined)
		session_plan_add(s,
				 "service range %s from %s: the mitm refuses it unless a "
				 "rule names the IP",
				 joined, up_cluster_ranges_source(up_cluster_ranges(s->cluster)));
	else
		session_plan_add(s, "service range: not known (see uplinkd's log); the mitm "
				    "would not refuse it");
	free(joined);
}

bool session_ranges_wait(struct up_session *s)
{
	struct up_cluster_ranges *r = s->cluster ? up_cluster_ranges(s->cluster) : NULL;

	if (!s->ranges_waited) {
		s->ranges_waited = true;
		up_cluster_ranges_read(r); /* unless it is known or under way */
		if (up_cluster_ranges_wait(r, UP_CLUSTER_RANGES_WAIT_MS, on_ranges, s,
					   &s->ranges_wait) == 0 &&
		    s->ranges_wait)
			return true;
	}
	if (s->o.asked.dry_run)
		plan_line(s, up_cluster_ranges_cidrs(r));
	return false;
}

const json_t *session_ranges(const struct up_session *s)
{
	return up_cluster_ranges_cidrs(s->cluster ? up_cluster_ranges(s->cluster) : NULL);
}

void session_ranges_cancel(struct up_session *s)
{
	up_waiter_cancel(s->ranges_wait);
	s->ranges_wait = NULL;
}
