/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The version of the JSON-RPC protocol between uplink and uplinkd. Bump it when a
 * method changes incompatibly; daemon.hello compares the two.
 */
#define UP_PROTOCOL_VERSION 1

/*
 * A session's namespace is this prefix and its id, for uplink's sessions and 0.4.1's
 * alike (so either names it); daemon/session-spec.h defines it the same.
 */
#define UP_SESSION_NS_PREFIX "agent-uplink-"

#define UP_SOCKET_ENV	    "UPLINK_SOCKET"
#define UP_SOCKET_DIR_NAME  "uplink"
#define UP_SOCKET_FILE_NAME "uplinkd.sock"
#define UP_LOCK_FILE_NAME   "uplinkd.lock"

#define UP_START_HINT "systemctl --user start uplinkd.socket"
