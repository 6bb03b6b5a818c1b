/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "params.h"
#include "rpc.h"

/*
 * session.clean, listed in rpc-session.c's method table.
 *
 * session.clean {ids | older_than | all (exactly one), dry_run, wait, deploy_context}
 *   -> {targets: [{id, namespace, age, phase, foreign, state?}], unmatched: [token],
 *       errors: [sentence], waiting: [namespace]}
 *   The agent-uplink-* namespaces of the deploy cluster (agent-uplink-system never) and
 *   our sessions still starting: ours are stopped (up_session_stop()), foreign ones
 *   (no uplink.dev/owner of ours: the Python tool's, another user's, an orphan) are
 *   deleted directly. `wait`: answers once the namespaces are gone (or `waiting` lists
 *   those left after UP_CLEAN_WAIT_MAX_S).
 */
struct up_clean_params {
	json_t *ids;
	const char *older_than, *deploy_context;
	bool all, dry_run, wait;
};
extern const struct up_param up_clean_params[];
int up_rpc_session_clean(struct up_request *req, void *params, void *userdata);
