/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * The socket both binaries use: $UPLINK_SOCKET, else
 * $XDG_RUNTIME_DIR/uplink/uplinkd.sock, else /run/user/<uid>/uplink/uplinkd.sock.
 * Returns 0 or -ENAMETOOLONG.
 */
int up_socket_path(char *buf, size_t len) _wur_;

/* The lock file that keeps a second daemon away: beside the socket, "<dir>/uplinkd.lock". */
int up_lock_path(const char *socket_path, char *buf, size_t len) _wur_;

/* Whether `path` is `dir` or inside it, by its characters ("/" holds every path). */
bool up_path_under(const char *path, const char *dir);

/*
 * Whether `path` is absolute and has no "/./" or "/../" inside: the check of a folder a
 * client names (its cwd), since the daemon's own cwd is not the client's.
 */
bool up_path_is_normal_abs(const char *path);

/* Creates every missing folder of `path` (not the last component) with `mode`. */
int up_mkdir_parents(const char *path, unsigned mode) _wur_;
