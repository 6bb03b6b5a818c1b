/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The trust store (uplink trust): the project config files, and the rules files they name,
 * that the user read and trusted, each by its path and the SHA-256 of its content, as
 * direnv's `allow` records them. A project's file that asks for keyring or exec placeholders
 * or for a key that widens the agent's reach is taken only when it, as read now, is in here:
 * a changed file needs trusting again.
 *
 *   <state>/trusted.json         $XDG_STATE_HOME/uplink (default ~/.local/state/uplink), 0600
 *   <state>/.trusted.json.lock   held (flock) while a change is read, made and written
 *
 *   {"version": 1, "files": {"/abs/path/.uplink.yaml": {"sha256": "<64 hex>", "trusted_at": N}}}
 *
 * Every function does blocking file I/O: the daemon runs them on its thread pool.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define UP_TRUST_FILE	  "trusted.json"
#define UP_SHA256_HEX_LEN 64

/* The SHA-256 of `len` bytes as 64 lowercase hex digits and a NUL. */
void up_sha256_hex(const void *buf, size_t len, char out[UP_SHA256_HEX_LEN + 1]);

/* The store's folder: the state folder of up_store_default_base(). */
int up_trust_default_dir(char *buf, size_t len) _wur_;

/*
 * Reads the store in `dir`: *files = {path: {"sha256", "trusted_at"}} (new reference; empty
 * when there is no store yet). A store that is not ours (another owner, writable by others),
 * too large or malformed is refused: 0 or -errno with a sentence in `err`.
 */
int up_trust_load(const char *dir, json_t **files, char *err, size_t err_len) _wur_;

/* Whether `files` (from up_trust_load()) trusts `path` with content hash `sha256`. */
bool up_trust_has(const json_t *files, const char *path, const char *sha256);

/*
 * Records each {"file", "sha256"} of `entries` as trusted at `now`, replacing what the store
 * said of the same path: under the lock, read, change, write atomically. Past
 * UP_MAX_TRUSTED_FILES, -E2BIG. 0 or -errno with a sentence in `err`.
 */
int up_trust_add(const char *dir, const json_t *entries, int64_t now, char *err,
		 size_t err_len) _wur_;

/* Removes each path (string) of `paths`; *removed (new reference) lists those it held. */
int up_trust_remove(const char *dir, const json_t *paths, json_t **removed, char *err,
		    size_t err_len) _wur_;
