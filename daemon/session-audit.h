/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util.h"

/*
 * The audit log of a session (README.md, "What the daemon does on its own"; store.h has the
 * folder it lives in).
 *
 * While a session runs, its follower streams the mitm container's log
 * (follow=true), keeps only the addon's audit lines (JSON objects whose "uplink" is
 * "audit", manifests/mitm/README.md) and appends them to sessions/<id>/audit.jsonl,
 * written through the threadpool (uv_fs_*) from a bounded queue. A stream that drops
 * while the session runs is reopened with backoff; the lines the container log
 * replays from its start are skipped by count, so the file holds each line once, in
 * order, also across a daemon restart (the count starts from the file's lines).
 *
 * Live readers (session.logs with follow) subscribe to a follower by session id.
 * Each audit line has an index: its line number in audit.jsonl, counted from 0.
 *
 * Followers live in one list per process (the daemon has one loop); each belongs to
 * the session whose id it carries until up_session_audit_stop() or _cancel().
 */
struct up_session;
struct up_audit_sub;
struct up_audit_read;

/* At RUNNING, and when a RUNNING session is picked up after a restart; idempotent. */
void up_session_audit_start(struct up_session *s);
/*
 * At teardown: no more reconnects; the open stream may deliver its last lines for up
 * to UP_AUDIT_DRAIN_MS (the namespace's deletion ends it), then the file is closed
 * and live readers are told the log has ended. Idempotent; no-op without a follower.
 */
void up_session_audit_stop(struct up_session *s);
/* Now, without draining: daemon shutdown, or the session is freed. Idempotent. */
void up_session_audit_cancel(struct up_session *s);
/* <state>/sessions/<id>/audit.jsonl; -ENAMETOOLONG. */
int up_session_audit_path(const struct up_session *s, char *buf, size_t len) _wur_;
/* Whether a follower (running or draining) exists for the session id. */
bool up_session_audit_following(const char *id);

/* One audit line for a live reader: `event` is borrowed, `index` its line number. */
typedef void (*up_audit_event_fn)(json_t *event, uint64_t index, void *ud);
/* The follower has ended (its session ended, or the daemon stops); the sub is freed. */
typedef void (*up_audit_end_fn)(void *ud);

/* NULL when nobody follows session `id` (it is not running). */
struct up_audit_sub *up_session_audit_subscribe(const char *id, up_audit_event_fn ev,
						up_audit_end_fn end, void *ud);
/* Leaves; no callback runs after it. NULL is a no-op. */
struct up_audit_sub *up_audit_sub_free(struct up_audit_sub *sub);

/*
 * Parses one log line: an audit line (a JSON object no longer than
 * UP_AUDIT_LINE_MAX whose "uplink" member is "audit") gives 0 and *ret owned by
 * the caller; anything else -EINVAL. Pure.
 */
int up_audit_parse_line(const char *line, size_t len, json_t **ret) _wur_;
/* Whether an audit event records a refusal: decision "deny" or "connect-refused". */
bool up_audit_event_denied(const json_t *event);

/*
 * Reads audit.jsonl off the loop: `lines` is an array of the events (objects) of the
 * file's last UP_AUDIT_HISTORY_MAX bytes, `first` the index of lines[0], `total` the
 * number of lines in the file. A missing file is an empty log. Exactly one callback,
 * unless cancelled; r < 0 only when the file exists but cannot be read.
 */
typedef void (*up_audit_read_fn)(int r, json_t *lines, uint64_t first, uint64_t total, void *ud);
int up_audit_read_start(uv_loop_t *loop, const char *path, up_audit_read_fn cb, void *ud,
			struct up_audit_read **ret) _wur_;
/* No callback will come; the work frees itself when the threadpool is done with it. */
void up_audit_read_cancel(struct up_audit_read *r);
