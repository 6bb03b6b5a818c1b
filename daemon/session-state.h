/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "protocol.h" /* UP_SESSION_ID_LEN, UP_NAMESPACE_MAX */
#include "util.h"

/*
 * The life of a session (docs/architecture.md, "Session states"):
 *
 *   PREPARING -> BUILDING -> DEPLOYING -> STARTING -> RUNNING
 *        (a step may be skipped forward: no build when the image exists)
 *   any of those -> FAILED | STOPPED; STARTING | RUNNING -> EXITED
 *   RUNNING -> GONE (its namespace vanished under us)
 *   EXITED | FAILED | STOPPED -> TEARDOWN -> GONE
 *
 * up_session_state_can_move() is the table; the session's one set_state() asks it.
 * The names are what a record on disk and the protocol carry.
 */
enum up_session_state {
	UP_SESSION_PREPARING,
	UP_SESSION_BUILDING,
	UP_SESSION_DEPLOYING,
	UP_SESSION_STARTING,
	UP_SESSION_RUNNING,
	UP_SESSION_EXITED,
	UP_SESSION_FAILED,
	UP_SESSION_STOPPED,
	UP_SESSION_TEARDOWN,
	UP_SESSION_GONE,
	_UP_SESSION_STATE_MAX,
	_UP_SESSION_STATE_INVALID = -EINVAL,
};

/* "RUNNING" for UP_SESSION_RUNNING; NULL for anything else. */
const char *up_session_state_to_name(enum up_session_state s);
/* The exact, upper-case name; _UP_SESSION_STATE_INVALID for anything else (NULL too). */
enum up_session_state up_session_state_from_name(const char *name);

/* The agent has ended or never will run: EXITED, FAILED, STOPPED, TEARDOWN, GONE. */
bool up_session_state_is_terminal(enum up_session_state s);
/* On the way up, before RUNNING: PREPARING, BUILDING, DEPLOYING, STARTING. */
bool up_session_state_is_starting(enum up_session_state s);
/* Whether from -> to is a legal move. Staying in one state is not a move: false. */
bool up_session_state_can_move(enum up_session_state from, enum up_session_state to);

/* Fills `id` (UP_SESSION_ID_LEN + 1 bytes) from getrandom(). Returns 0 or -errno. */
int up_session_id_new(char *id) _wur_;
bool up_session_id_valid(const char *id);

/* The label value uplink.dev/owner: 16 lowercase hex digits, and room for the NUL. */
#define UP_OWNER_HASH_LEN  16
#define UP_MACHINE_ID_PATH "/etc/machine-id"

/*
 * The owner of the namespaces this daemon creates: the first 16 hex digits of
 * SHA-256("<machine-id>:<uid>"), the machine id as its file holds it (32 hex digits,
 * newline dropped). `machine_id_path` NULL reads /etc/machine-id (tests pass their
 * own file). Returns 0; -ENOENT or -errno when the file cannot be read; -EBADMSG
 * when it does not hold a machine id; -EIO when OpenSSL fails. Blocking: start-up.
 */
int up_owner_hash(const char *machine_id_path, uid_t uid, char *ret) _wur_;
