/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "util.h"

/*
 * Ask mode, the daemon's side (README.md "Ask mode"): per session started with --ask, a
 * long poll of the proxy's GET /v1/held over the control channel (daemon/control.h) keeps
 * the list of what waits; approvals.list shows it across sessions with ids
 * `<session>-<n>`, approvals.decide answers one with POST /v1/held/<n>. The listing holds
 * method, host, port and path only: never a header, a body or a query.
 */
struct up_session;
struct up_rpc;
struct up_manager;

/* Starts the poll when the session asks (its proxy runs); a no-op otherwise. */
void up_approvals_start(struct up_session *s);
/* Stops it and forgets what waited (the session ends or goes). */
void up_approvals_stop(struct up_session *s);
/* What waits in this session (an array; new reference), each with its full id. */
json_t *up_approvals_held(struct up_session *s);

/*
 * The rule an approval "for this session" adds: exact host, the method, and the path's
 * stable prefix (up to UP_APPROVAL_PATH_SEGMENTS leading segments, stopping before one that
 * looks like an id: digits, a long hex string or a UUID) with anything under it and any
 * query; a path with no stable first segment is allowed exactly (any query). New reference.
 */
json_t *up_approval_rule(const char *method, const char *host, const char *path);

int up_rpc_approvals_register(struct up_rpc *rpc, struct up_manager *m) _wur_;

/*
 * "Always": saves `rule` (an up_approval_rule()) to `file` (absolute; NULL: the user's own
 * rules file, rules-save.h) off the loop, with a comment naming the date, who saved it (`by`,
 * "uplink approve"), session `s` and `what` (the request, "POST host/path"). `done` runs on
 * the loop with 0 or -errno and the save's outcome (file, line, or the failure's UP_ERR_*
 * and sentence); the caller then lets the request through for the session. Returns 0 or
 * -errno (done is not called).
 */
struct up_rules_save;
typedef void (*up_approval_saved_fn)(int r, const struct up_rules_save *res, void *userdata);
int up_approvals_save(struct up_session *s, const json_t *rule, const char *file, const char *what,
		      const char *by, up_approval_saved_fn done, void *userdata) _wur_;
