/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The daemon's environment, each variable once: its name, the kind of value, the default,
 * what it does, and who it is for. up_knobs_load() reads them all at start-up (main.c,
 * before the loop or any thread exists); everything else reads the struct. The values are
 * the environment's own strings (the daemon never changes its environment), NULL when
 * unset; each user parses its value as before. `uplinkd --help-env` prints the table, and
 * tests/integration/test_knobs.py checks README.md's environment table against it.
 *
 * Kinds: USER knobs are documented in the README's environment table; TEST knobs in its
 * "test knob" rows (tests shorten or fake something with them); SYSTEM variables are the
 * standard ones the daemon honours as every program does (HOME, XDG_*, DOCKER_HOST, ...).
 */

enum up_knob_kind {
	UP_KNOB_USER,
	UP_KNOB_TEST,
	UP_KNOB_SYSTEM,
};

/* A default that is a number in common/bounds.h, as a string. */
#define UP_KNOB_STR_(x) #x
#define UP_KNOB_STR(x)	UP_KNOB_STR_(x)

/* X(field, NAME, kind, type, default, meaning) */
#define UP_KNOBS(X)                                                                           \
	X(socket, "UPLINK_SOCKET", USER, "path", "$XDG_RUNTIME_DIR/uplink/uplinkd.sock",      \
	  "the daemon's socket (read by common/paths.c, for daemon and client alike)")        \
	X(kubeconfig, "KUBECONFIG", USER, "paths", "~/.kube/config",                          \
	  "kubeconfig files, ':'-separated, merged as kubectl does")                          \
	X(deploy_context, "UPLINK_DEPLOY_CONTEXT", USER, "string", UP_DEFAULT_DEPLOY_CONTEXT, \
	  "the daemon's deploy context (empty: the current-context)")                         \
	X(data_dir, "UPLINK_DATA_DIR", USER, "path", "the installed data folder",             \
	  "where manifests/ and agents/ are, when not installed")                             \
	X(start_timeout_s, "UPLINK_START_TIMEOUT_S", USER, "seconds",                         \
	  UP_KNOB_STR(UP_SESSION_START_TIMEOUT_S),                                            \
	  "how long a session's pods may take to become ready")                               \
	X(k3s_registries, "UPLINK_K3S_REGISTRIES", USER, "path",                              \
	  "/etc/rancher/k3s/registries.yaml",                                                 \
	  "the k3s registries.yaml to check (set: checked whatever the cluster)")             \
	X(docker, "UPLINK_DOCKER", USER, "program", "docker from PATH", "the docker to run")  \
	X(path, "PATH", USER, "paths", "inherited", "where the daemon finds aws and kubectl") \
	X(ca_bundle, "UPLINK_CA_BUNDLE", USER, "path", "the system's",                        \
	  "PEM CAs for the daemon's own HTTPS (the token renewal), instead of the system's")  \
	X(notifications, "UPLINK_NOTIFICATIONS", USER, "bool", "on",                          \
	  "0, false or no: no desktop notifications")                                         \
	X(notifier, "UPLINK_NOTIFIER", USER, "dbus|log", "dbus",                              \
	  "log: notifications go to the log instead")                                         \
	X(debug, "UPLINK_DEBUG", USER, "bool", "0", "1: debug logging")                       \
	X(debug_rpc, "UPLINK_DEBUG_RPC", TEST, "bool", "0", "1: the debug.* methods")         \
	X(time_divisor, "UPLINK_DEBUG_TIME_DIVISOR", TEST, "integer", "1",                    \
	  "divides the TTL, idle limit and credential renewals (60: minutes made seconds)")   \
	X(warn_before_s, "UPLINK_WARN_BEFORE_S", TEST, "seconds",                             \
	  UP_KNOB_STR(UP_SESSION_WARN_BEFORE_S), "how long before the TTL the warning comes") \
	X(resync_s, "UPLINK_RESYNC_S", TEST, "seconds", UP_KNOB_STR(UP_RESYNC_S),             \
	  "the period of the resync with the cluster")                                        \
	X(aws_timeout_ms, "UPLINK_AWS_TIMEOUT_MS", TEST, "milliseconds",                      \
	  UP_KNOB_STR(UP_AWS_EXPORT_TIMEOUT_MS),                                              \
	  "a shorter limit for aws configure export-credentials")                             \
	X(debug_uid, "UPLINK_DEBUG_UID", TEST, "UID:GID", "the daemon's",                     \
	  "the host uid and gid the pods run as (tests run as root)")                         \
	X(secret_store, "UPLINK_SECRET_STORE", TEST, "libsecret|file", "libsecret",           \
	  "file: secrets come from $UPLINK_SECRET_FILE")                                      \
	X(secret_file, "UPLINK_SECRET_FILE", TEST, "path", "none",                            \
	  "the JSON file the file secret store reads")                                        \
	X(machine_id_file, "UPLINK_MACHINE_ID_FILE", TEST, "path", UP_MACHINE_ID_PATH,        \
	  "the machine id the owner label is derived from")                                   \
	X(token_url, "UPLINK_ANTHROPIC_TOKEN_URL", TEST, "URL",                               \
	  "CLAUDE_TOKEN_URL_DEFAULT (claude.h)", "where Claude's OAuth token is refreshed")   \
	X(openai_token_url, "UPLINK_OPENAI_TOKEN_URL", TEST, "URL",                           \
	  "CODEX_TOKEN_URL_DEFAULT (codex.h)", "where Codex's ChatGPT token is refreshed")    \
	X(google_token_url, "UPLINK_GOOGLE_TOKEN_URL", TEST, "URL",                           \
	  "GEMINI_TOKEN_URL_DEFAULT (gemini.h)",                                              \
	  "where the Gemini CLI's Google token is refreshed")                                 \
	X(home, "HOME", SYSTEM, "path", "the passwd entry's", "the user's home")              \
	X(xdg_config_home, "XDG_CONFIG_HOME", SYSTEM, "path", "~/.config",                    \
	  "the user's config.yaml is under uplink/")                                          \
	X(xdg_state_home, "XDG_STATE_HOME", SYSTEM, "path", "~/.local/state",                 \
	  "session records and trusted.json are under uplink/")                               \
	X(xdg_runtime_dir, "XDG_RUNTIME_DIR", SYSTEM, "path", "none",                         \
	  "the socket's folder (read by common/paths.c)")                                     \
	X(docker_host, "DOCKER_HOST", SYSTEM, "URL", "docker's", "shown by uplink doctor")    \
	X(terminal, "TERMINAL", SYSTEM, "program", "x-terminal-emulator and others",          \
	  "opens a session's log from a notification")

struct up_knob {
	const char *name;
	enum up_knob_kind kind;
	const char *type, *dflt, *meaning;
};

struct up_knobs {
#define UP_KNOB_FIELD(field, name, kind, type, dflt, meaning) const char *field;
	UP_KNOBS(UP_KNOB_FIELD)
#undef UP_KNOB_FIELD
};

/* The table, in UP_KNOBS order, and its length. */
extern const struct up_knob up_knob_table[];
extern const unsigned up_knob_count;

/* Reads every knob from the environment (again: unit tests call it after setenv()). */
void up_knobs_load(void);
/* The values read by the last up_knobs_load(); the first call loads them. */
const struct up_knobs *up_knobs(void);
/* "user", "test" or "system". */
const char *up_knob_kind_name(enum up_knob_kind k);
