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
/* The session `id` names (for session.logs and rules.suggest) with its audit log's path in
 * `path`; NULL when there is none (answered SESSION_NOT_FOUND, *r = 0) or the path does not
 * fit (*r = -ENAMETOOLONG). */
struct up_session;
struct up_session *up_rpc_audit_session(struct up_request *req, void *userdata, const char *id,
					char *path, size_t len, int *r);
/* A request of session `session_id` started waiting for the user (`held`: an entry of
 * approvals.list, borrowed): each `uplink logs -f` of it gets an `approvals.waiting`
 * notification {id, held}, inline with the audit lines. */
void up_rpc_logs_waiting(const char *session_id, const json_t *held);
