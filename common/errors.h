/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The one table of JSON-RPC errors. Clients match on the name (carried in
 * error.data.name), never on the text. The message is a default; a handler
 * usually replaces it with a sentence naming what went wrong and what to do.
 */
#define UP_ERRORS(XX)                                                                        \
	XX(PARSE_ERROR, -32700, "the request is not valid JSON")                             \
	XX(INVALID_REQUEST, -32600, "the request is not a valid JSON-RPC 2.0 request")       \
	XX(METHOD_NOT_FOUND, -32601, "no such method")                                       \
	XX(INVALID_PARAMS, -32602, "invalid parameters")                                     \
	XX(INTERNAL_ERROR, -32603, "internal error in uplinkd; see its log")                 \
	XX(PROTOCOL_MISMATCH, -32001, "client and daemon speak different protocol versions") \
	XX(PERMISSION_DENIED, -32002, "permission denied")                                   \
	XX(TOO_MANY_CLIENTS, -32003, "uplinkd serves too many clients at once")              \
	XX(SHUTTING_DOWN, -32004, "uplinkd is shutting down")                                \
	XX(SESSION_NOT_FOUND, -32010, "session not found")                                   \
	XX(SESSION_STOPPED, -32011, "the session stopped before it was running")             \
	XX(POD_NOT_READY, -32012, "the session's pods did not become ready")                 \
	XX(SESSION_ENDED, -32013, "the session has ended")                                   \
	XX(APPROVAL_NOT_FOUND, -32014, "no such request waits for the user")                 \
	XX(CLUSTER_UNREACHABLE, -32020, "the Kubernetes API server cannot be reached")       \
	XX(PREREQ_MISSING, -32030, "a prerequisite is missing")                              \
	XX(RULES_INVALID, -32040, "the rules are invalid")                                   \
	XX(SECRET_NOT_FOUND, -32041, "a keyring entry named by the rules does not exist")    \
	XX(KEYRING_LOCKED, -32042, "the keyring is locked")                                  \
	XX(EXEC_FAILED, -32043, "an exec placeholder failed")                                \
	XX(EXEC_NOT_ALLOWED, -32044, "exec placeholders need --allow-exec")                  \
	XX(UNTRUSTED_CONFIG, -32045, "a project's config file needs uplink trust first")     \
	XX(IMAGE_CONTEXT_INVALID, -32050, "the agent's build context cannot be used")        \
	XX(IMAGE_BUILD_FAILED, -32051, "the agent image could not be built or pushed")       \
	XX(REGISTRY_UNREACHABLE, -32052, "the image registry cannot be reached")             \
	XX(AGENT_AUTH_FAILED, -32060, "the agent's credentials cannot be used")

enum up_error {
#define XX(name, code, msg) UP_ERR_##name,
	UP_ERRORS(XX)
#undef XX
		_UP_ERR_MAX,
	_UP_ERR_INVALID = -1,
};

int up_error_code(enum up_error e);
const char *up_error_name(enum up_error e);
const char *up_error_message(enum up_error e);
enum up_error up_error_from_name(const char *name);
enum up_error up_error_from_code(int code);
