/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The version of the JSON-RPC protocol between uplink and uplinkd. Bump it when a
 * method changes incompatibly; daemon.hello compares the two.
 */
#define UP_PROTOCOL_VERSION 1

/*
 * Session ids: 12 lowercase hex digits. A session's namespace is this prefix and its id,
 * for uplink's sessions and 0.4.1's alike (so either names it).
 */
#define UP_SESSION_ID_LEN    12
#define UP_SESSION_NS_PREFIX "agent-uplink-"
#define UP_NAMESPACE_MAX     (sizeof(UP_SESSION_NS_PREFIX) - 1 + UP_SESSION_ID_LEN + 1)

/* The labels and annotations a session's objects carry on the cluster. */
#define UP_LABEL_SESSION    "uplink.dev/session"
#define UP_LABEL_OWNER	    "uplink.dev/owner"
#define UP_ANNOT_CREATED_AT "uplink.dev/created-at"
#define UP_ANNOT_EXPIRES_AT "uplink.dev/expires-at"
#define UP_ANNOT_CWD	    "uplink.dev/cwd"
#define UP_ANNOT_AGENT	    "uplink.dev/agent"

/*
 * The control listener in a session's mitm pod (manifests/mitm/uplink_control.py), reached
 * through the API server's pods/proxy; the token (hex) travels in its own header, since the
 * API server consumes Authorization when it proxies.
 */
#define UP_CONTROL_PORT		8081
#define UP_CONTROL_TOKEN_HEADER "X-Uplink-Control-Token"
#define UP_CONTROL_TOKEN_LEN	64 /* hex digits: 32 random bytes */

#define UP_SOCKET_ENV	    "UPLINK_SOCKET"
#define UP_SOCKET_DIR_NAME  "uplink"
#define UP_SOCKET_FILE_NAME "uplinkd.sock"
#define UP_LOCK_FILE_NAME   "uplinkd.lock"

#define UP_START_HINT "systemctl --user start uplinkd.socket"
