/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "session-state.h"
#include "util.h"

/*
 * Session records on disk. A record is written before any object of its session exists in
 * the cluster, so that a restarted daemon finds what to clean up (docs/architecture.md,
 * "The reaper's invariants").
 *
 *   <base>/                      base: $XDG_STATE_HOME/uplink, else ~/.local/state/uplink
 *     sessions/<id>.json         one record per session, mode 0600
 *     sessions/<id>/             the session's files (audit.jsonl), kept after it ends
 *     sessions/corrupt/          records that could not be loaded, as <name>.<UTC time>
 *     sessions/.<id>.json.XXXXXX a save in progress; a crash leaves it, the next load removes it
 * Every folder is created 0700.
 *
 * A record is a jansson object, version 1, every key present:
 *
 *   version        integer  1
 *   id             string   12 lowercase hex digits, the file's name without ".json"
 *   namespace      string   "agent-uplink-<id>"
 *   state          string   a name of enum up_session_state ("RUNNING")
 *   reason         string   why it is in that state, a sentence; "" when none
 *   agent          string   "claude"
 *   mode           string   the agent's mode ("anthropic", "bedrock"); may be ""
 *   cwd            string   the host folder the session was started in
 *   deploy_context string   the kube context deployed to; "" = the current-context
 *   created_at     integer  seconds since the epoch
 *   expires_at     integer  seconds since the epoch: the --ttl deadline
 *   idle_timeout   integer  seconds without an attached client before it is stopped; 0 = never
 *   updated_at     integer  seconds since the epoch of the last change
 *   exit_code      integer  the agent's exit code, or null until it is known
 *
 * Unknown keys are kept (a newer uplinkd may add some). How many clients are
 * attached is not persisted: it is only true while the daemon runs.
 *
 * Every function without _async does blocking file I/O: the daemon runs them on the
 * libuv threadpool (the _async wrappers do that) or before its loop starts. The
 * struct holds only paths once built, so the blocking functions may run on any
 * thread. The _async wrappers run one at a time, in the order they were called, so a
 * later save of a record never loses to an earlier one.
 */
#define UP_RECORD_VERSION 1

struct up_store;

/* $XDG_STATE_HOME/uplink, else ~/.local/state/uplink ($HOME, else the passwd entry's). */
int up_store_default_base(char *buf, size_t len) _wur_;
/* `base` NULL: up_store_default_base(). Computes paths only. */
int up_store_new(const char *base, struct up_store **ret) _wur_;
/* The caller lets pending _async calls finish first (up_store_pending() == 0). */
struct up_store *up_store_free(struct up_store *s);
const char *up_store_base(const struct up_store *s);
/* <base>/sessions */
const char *up_store_sessions_dir(const struct up_store *s);
/* <base>/sessions/<id>, the folder for the session's audit.jsonl. */
int up_store_session_dir(const struct up_store *s, const char *id, char *buf, size_t len) _wur_;

/* A new record in PREPARING, version 1, every key set; NULL when out of memory. */
json_t *up_record_new(const char *id, const char *agent, const char *mode, const char *cwd,
		      const char *deploy_context, int64_t now, uint64_t ttl, uint64_t idle_timeout);
/*
 * Checks every key and its type, the version, the state name and, when
 * `file_id` is given, that the id matches it. 0, or -EINVAL with a sentence in `err`.
 */
int up_record_check(const json_t *rec, const char *file_id, char *err, size_t err_len) _wur_;

/* Getters of a record that passed up_record_check(); strings are borrowed. */
const char *up_record_id(const json_t *rec);
const char *up_record_namespace(const json_t *rec);
enum up_session_state up_record_state(const json_t *rec);
const char *up_record_reason(const json_t *rec);
const char *up_record_agent(const json_t *rec);
const char *up_record_mode(const json_t *rec);
const char *up_record_cwd(const json_t *rec);
const char *up_record_deploy_context(const json_t *rec);
int64_t up_record_created_at(const json_t *rec);
int64_t up_record_expires_at(const json_t *rec);
int64_t up_record_idle_timeout(const json_t *rec);
int64_t up_record_updated_at(const json_t *rec);
/* Optional "quiet": true: the session sends no desktop notifications (absent: false). */
bool up_record_quiet(const json_t *rec);
/* Optional "ask": true: ask mode, picked up again after a restart (absent: false). */
bool up_record_ask(const json_t *rec);
/* Whether the exit code is known; if so, *ret holds it. */
bool up_record_exit_code(const json_t *rec, int *ret);

/*
 * Moves the record to `to` with `reason` ("" or NULL: none) and stamps updated_at.
 * -EINVAL if the move is not legal (up_session_state_can_move()); the record is then
 * unchanged. -ENOMEM.
 */
int up_record_set_state(json_t *rec, enum up_session_state to, const char *reason,
			int64_t now) _wur_;
int up_record_set_exit_code(json_t *rec, int exit_code, int64_t now) _wur_;
int up_record_set_expires_at(json_t *rec, int64_t expires_at, int64_t now) _wur_;
int up_record_set_quiet(json_t *rec, bool quiet) _wur_;
int up_record_set_ask(json_t *rec, bool ask) _wur_;

/*
 * Optional keys for a daemon that adopts the running session after a restart, so that it
 * goes on renewing its credentials (daemon/session-refresh.c); records written before them
 * lack them. None holds a secret:
 *   aws_profiles     [string]  the AWS profiles whose exports the mitm holds
 *   aws_expires_at   integer   when the exported AWS credentials expire; 0 none
 *   login_expires_at integer   when the agent's login token in the rules expires; 0 none
 *   exec_refresh_s   integer   the shortest `refresh:` of the rules' exec values; 0 none
 * up_record_check() refuses them only when present and of the wrong type.
 */
int up_record_set_renewal(json_t *rec, const json_t *aws_profiles, int64_t aws_expires_at,
			  int64_t login_expires_at, uint64_t exec_refresh_s) _wur_;
int up_record_set_aws_expires_at(json_t *rec, int64_t expires_at) _wur_;
int up_record_set_login_expires_at(json_t *rec, int64_t expires_at) _wur_;
/* Whether the record has the keys (written by a daemon that knows them). */
bool up_record_has_renewal(const json_t *rec);
/* NULL when absent or empty; borrowed. */
const json_t *up_record_aws_profiles(const json_t *rec);
int64_t up_record_aws_expires_at(const json_t *rec);
int64_t up_record_login_expires_at(const json_t *rec);
uint64_t up_record_exec_refresh_s(const json_t *rec);

/*
 * Writes the record atomically: a temp file in the sessions folder, write, fsync,
 * rename over <id>.json, fsync of the folder. A record that fails up_record_check()
 * or is larger than UP_MAX_RECORD_SIZE is refused (-EINVAL, -EFBIG) and nothing is
 * written. Returns 0 or -errno with a sentence in `err`.
 */
int up_store_save(struct up_store *s, const json_t *rec, char *err, size_t err_len) _wur_;

/*
 * Loads every record: *records is an object id -> record. Never fails for one bad
 * record: a record that cannot be read, is not JSON, is too large, or fails
 * up_record_check() is moved to sessions/corrupt/<name>.<UTC time of `now`> and
 * reported in *problems, an array of {"file", "problem", "moved_to"} (moved_to null
 * when it stayed; a record newer than UP_RECORD_VERSION stays, and so does
 * everything past UP_MAX_RECORDS). A loose folder mode is tightened to 0700 and
 * reported. Leftover temp files are removed. Creates the folders when missing.
 * Fails (-errno, a sentence in `err`) only when the folders cannot be made or read,
 * or belong to another user.
 */
int up_store_load(struct up_store *s, int64_t now, json_t **records, json_t **problems, char *err,
		  size_t err_len) _wur_;

/* UP_STORE_DELETE_FILES: remove the session's folder (its audit log) too. */
#define UP_STORE_DELETE_FILES 1u

/* Removes <id>.json (and its folder with UP_STORE_DELETE_FILES). -ENOENT when no record. */
int up_store_delete(struct up_store *s, const char *id, unsigned flags, char *err,
		    size_t err_len) _wur_;

/*
 * Retention: removes every record in a terminal state whose updated_at is at least
 * `max_age` seconds before `now`, with its folder; folders without a record and
 * files in corrupt/ last modified that long ago go too. Records that cannot be read
 * are left to up_store_load(). *removed: array of the ids of removed records.
 */
int up_store_prune(struct up_store *s, int64_t now, uint64_t max_age, json_t **removed, char *err,
		   size_t err_len) _wur_;

/*
 * The same off the loop. Exactly one callback per call, on the loop, in call order:
 * r == 0 and `result`, or r < 0 and a sentence. `result` is borrowed (json_incref()
 * it to keep it): NULL for save and delete, {"records": {...}, "problems": [...]}
 * for load, the array of removed ids for prune. A save serialises the record before
 * it returns, so the caller may change the record right away. The returned int is 0
 * or a -errno from queueing, in which case no callback comes.
 */
typedef void (*up_store_cb)(int r, const char *err, json_t *result, void *ud);

int up_store_save_async(uv_loop_t *loop, struct up_store *s, const json_t *rec, up_store_cb cb,
			void *ud) _wur_;
int up_store_load_async(uv_loop_t *loop, struct up_store *s, int64_t now, up_store_cb cb,
			void *ud) _wur_;
int up_store_delete_async(uv_loop_t *loop, struct up_store *s, const char *id, unsigned flags,
			  up_store_cb cb, void *ud) _wur_;
int up_store_prune_async(uv_loop_t *loop, struct up_store *s, int64_t now, uint64_t max_age,
			 up_store_cb cb, void *ud) _wur_;
/* _async calls queued or running. */
size_t up_store_pending(const struct up_store *s);
