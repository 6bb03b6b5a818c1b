/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "params.h"
#include "rpc.h"

/*
 * session.logs, listed in rpc-session.c's method table.
 *
 * session.logs {id, follow, denied_only} -> {id, count, total}
 *   Sends the audit log (sessions/<id>/audit.jsonl) as `audit.event` notifications
 *   {id, index, event}, then, with `follow` while the session runs, every new line
 *   until the session ends or the client leaves; answers at the end.
 */
struct up_logs_params {
	const char *id;
	bool follow, denied_only;
};
extern const struct up_param up_logs_params[];
int up_rpc_session_logs(struct up_request *req, void *params, void *userdata);
