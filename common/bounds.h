/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Every count and every buffer that a peer controls is bounded by one of these.
 * They are the only place such numbers live; a test or a module that needs one
 * includes this header.
 */

/* JSON-RPC framing: one JSON value per line; a longer line closes the connection. */
#define UP_MAX_FRAME_SIZE (1024 * 1024)

/* Connections the daemon serves at once; one more is told so and closed. */
#define UP_MAX_CLIENTS 512

/* Requests of one connection being worked on at once; past it, reading pauses. */
#define UP_MAX_INFLIGHT_PER_CONN 64

/* Entries in one JSON-RPC batch. */
#define UP_MAX_BATCH 128

/* Bytes queued for a slow reader before reading from it pauses, and before it is dropped. */
#define UP_WRITE_QUEUE_PAUSE (1024 * 1024)
#define UP_WRITE_QUEUE_MAX (16 * 1024 * 1024)

/* Nesting depth and size of the params of a single request. */
#define UP_MAX_JSON_DEPTH 32

/* The client: how long one call may wait for its answer (ms) unless the command says otherwise. */
#define UP_CLIENT_TIMEOUT_MS 30000

/* Longest socket path we accept (sun_path is 108 bytes on Linux). */
#define UP_MAX_SOCKET_PATH 107
