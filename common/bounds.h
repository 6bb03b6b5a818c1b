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
#define UP_WRITE_QUEUE_MAX   (16 * 1024 * 1024)

/* Nesting depth and size of the params of a single request. */
#define UP_MAX_JSON_DEPTH 32

/* The client: how long one call may wait for its answer (ms) unless the command says otherwise. */
#define UP_CLIENT_TIMEOUT_MS 30000

/* Shell completion: how long `uplink completion --words sessions` waits for the daemon (ms; a
 * completion must not hang when uplinkd is stuck or starting), the options and positional
 * arguments of one command, and the length of one word in the model. */
#define UP_COMPLETION_TIMEOUT_MS 1500
#define UP_MAX_COMPLETION_OPTS	 64
#define UP_MAX_COMPLETION_POS	 8
#define UP_MAX_COMPLETION_WORD	 64

/* Longest socket path we accept (sun_path is 108 bytes on Linux). */
#define UP_MAX_SOCKET_PATH 107

/* Rules: size of one rules file, rules in one set, items in one list of a rule, problems reported.
 */
#define UP_MAX_RULES_FILE_SIZE (1024 * 1024)
#define UP_MAX_RULES	       10000
#define UP_MAX_RULE_ITEMS      1000
#define UP_MAX_RULES_PROBLEMS  200
/* Rules sources (files) in one request. */
#define UP_MAX_RULES_SOURCES   64

/* A header value in a rule, before and after its placeholders are resolved. */
#define UP_MAX_HEADER_VALUE   (16 * 1024)
/* Longest regex we compile. */
#define UP_MAX_REGEX_LEN      4096
/* Longest AWS action name a rule's aws_allow_credential_actions may list. */
#define UP_MAX_AWS_ACTION_LEN 128

/* {{exec:CMD}}: how long the command may run (ms), and how much it may print. */
#define UP_EXEC_TIMEOUT_MS 30000
#define UP_EXEC_OUTPUT_MAX (UP_MAX_HEADER_VALUE)
#define UP_EXEC_STDERR_MAX 2048

/* YAML read from files we did not write (kubeconfigs, templates): size and nesting. */
#define UP_MAX_YAML_SIZE  (4 * 1024 * 1024)
#define UP_MAX_YAML_DEPTH 64

/* kubeconfig: files in $KUBECONFIG, and a certificate, key or token file it names. */
#define UP_MAX_KUBECONFIG_FILES	    16
#define UP_MAX_KUBE_CREDENTIAL_FILE (1024 * 1024)

/* HTTP to the Kubernetes API (and registries). */
#define UP_HTTP_MAX_ACTIVE	   32 /* ordinary requests at once; more wait in order */
#define UP_HTTP_CONNECT_TIMEOUT_MS 10000
#define UP_HTTP_STREAM_IDLE_S	   120 /* a watch or log stream silent this long is dead */
#define UP_MAX_KUBE_BODY	   (16 * 1024 * 1024) /* one answer (a list) */
#define UP_MAX_WATCH_EVENT	   (4 * 1024 * 1024)  /* one line of a watch or log stream */
#define UP_MAX_HEADER_LINE	   16384

/* The longest a server's Retry-After may make us wait before a retry. */
#define UP_RETRY_AFTER_MAX_MS 60000
/* No backoff waits longer than a day, whatever the caller asks. */
#define UP_BACKOFF_CAP_MAX_MS (24ull * 3600 * 1000)

/* Exec credential plugins: their answer, what of their stderr we keep, how long they may take. */
#define UP_MAX_EXEC_CREDENTIAL	(256 * 1024)
#define UP_KUBE_EXEC_STDERR_MAX 4096
#define UP_KUBE_EXEC_TIMEOUT_MS 60000

/* Kubernetes calls: attempts, backoff, time per request, URL length, credential skew. */
#define UP_KUBE_MAX_ATTEMPTS	6
#define UP_KUBE_BACKOFF_BASE_MS 200
#define UP_KUBE_BACKOFF_CAP_MS	10000
#define UP_KUBE_TIMEOUT_MS	30000
#define UP_MAX_KUBE_URL		8192
#define UP_KUBE_CRED_SKEW_MS	30000 /* renew an expiring credential this long before it ends */

/* The control channel to a session's proxy (daemon/control.c; manifests/mitm/uplink_control.py
 * has the same body limit): a request (a rules document), an answer, the time a call may take. */
#define UP_MAX_CONTROL_BODY   (8 * 1024 * 1024)
#define UP_MAX_CONTROL_ANSWER (1024 * 1024)
#define UP_CONTROL_TIMEOUT_MS 10000

/* Ask mode (daemon/approvals.c): a long poll of the proxy's held requests waits this long
 * (the addon's uplink_ask.WAIT_MAX_S is 50), the call's deadline a little more; a failed
 * poll is retried after a pause; at most this many held requests of a session are kept. */
#define UP_APPROVALS_WAIT_S	  45
#define UP_APPROVALS_CALL_MS	  ((UP_APPROVALS_WAIT_S + 15) * 1000)
#define UP_APPROVALS_RETRY_MS	  2000
#define UP_MAX_APPROVALS_HELD	  64 /* the addon's uplink_ask.HELD_MAX */
#define UP_APPROVAL_PATH_SEGMENTS 2
#define UP_MAX_APPROVED_RULES	  256	/* the addon's uplink_ask.SESSION_RULES_MAX */
#define UP_MAX_APPROVAL_ID	  128	/* "<session>-<n>" */
#define UP_APPROVALS_NOTIFY_MS	  10000 /* questions of a session at most this close */

/* Watches: server-side timeout of one stream (plus up to half again, spread), reconnect backoff. */
#define UP_WATCH_TIMEOUT_S	    300
/* After the agent ended under `uplink run`/`attach`: how long the client waits for the
 * daemon to see its pod terminate and learn the exit code. */
#define UP_CLI_AGENT_EXIT_WAIT_S    30
/* ...and after kubectl exec failed otherwise (the container may have ended under it). */
#define UP_CLI_ATTACH_FAILED_WAIT_S 10
#define UP_WATCH_BACKOFF_BASE_MS    500
#define UP_WATCH_BACKOFF_CAP_MS	    30000

/* Durations (--older-than, --ttl, --idle-timeout): nothing longer than ten years. */
#define UP_MAX_DURATION_S  (3650ull * 86400)
/* Session records on disk: size of one, and how many are loaded at start-up. */
#define UP_MAX_RECORD_SIZE (64 * 1024)
#define UP_MAX_RECORDS	   10000

/* Agent images: an agent's build context (entries, bytes, folder depth) and docker's output. */
#define UP_IMAGE_CONTEXT_MAX_FILES 10000
#define UP_IMAGE_CONTEXT_MAX_BYTES (256u * 1024 * 1024)
#define UP_IMAGE_CONTEXT_MAX_DEPTH 32
#define UP_IMAGE_DOCKERIGNORE_MAX  (64 * 1024) /* .dockerignore */
#define UP_IMAGE_LOG_LINE_MAX	   4096	       /* one line of docker output; longer ones are cut */
#define UP_IMAGE_LOG_QUEUE_MAX \
	(4 * 1024 * 1024)		   /* log bytes waiting for the disk; past it, dropped */
#define UP_IMAGE_ERROR_TAIL_LINES    8	   /* last lines of output quoted in an error */
#define UP_IMAGE_REGISTRY_TIMEOUT_MS 15000 /* the HEAD for a tag */
#define UP_IMAGE_BUILD_TIMEOUT_MS    (60 * 60 * 1000)
#define UP_IMAGE_PUSH_TIMEOUT_MS     (30 * 60 * 1000)
#define UP_IMAGE_PROBE_TIMEOUT_MS    10000 /* `docker buildx version` */
#define UP_IMAGE_MAX_PUSH_LAYERS     256   /* layers counted for push progress */

/* Per-session mitm CA: validity starts this long before now (clock skew between host and
 * cluster), ends this long after the session expires, and never spans more than this. */
#define UP_CA_BACKDATE_S      3600
#define UP_CA_EXPIRY_MARGIN_S 3600
#define UP_CA_MAX_LIFETIME_S  (366 * 86400)

/* Kubernetes templates (the YAML files in manifests/): size of one; the mitm addon source. */
#define UP_MAX_TEMPLATE_SIZE (256 * 1024)
#define UP_MAX_ADDON_SOURCE  (1024 * 1024)

/* Sessions: how long the pods may take to become Ready (UPLINK_START_TIMEOUT_S overrides). */
#define UP_SESSION_START_TIMEOUT_S  300
/* Session lifetime and idle limit unless --ttl and --idle-timeout say otherwise. */
#define UP_SESSION_DEFAULT_TTL_S    (24 * 3600)
#define UP_SESSION_DEFAULT_IDLE_S   (4 * 3600)
/* How long the registry in agent-uplink-system may take to become available (s). */
#define UP_REGISTRY_READY_TIMEOUT_S 120
/* A desktop warning comes this long before --ttl or --idle-timeout stops a session (s). */
#define UP_SESSION_WARN_BEFORE_S    600
/* How often sessions are reconciled with the cluster besides watch events (s). */
#define UP_RESYNC_S		    300
/* session.list and clean wait this long for a new cluster's first list (list --help: 5 s). */
#define UP_CLUSTER_SYNC_WAIT_MS	    5000
/* The deploy cluster's Service ranges (ServiceCIDRs; one per family each): kept at most, and
 * how long a session start waits for a read in flight before rendering without them (ms). */
#define UP_MAX_SERVICE_CIDRS	    16
#define UP_CLUSTER_RANGES_WAIT_MS   5000
/* session.list's columns: the fields a client asks for (a session has about a dozen). */
#define UP_MAX_LIST_COLUMNS	    16
/* Ended sessions' records and audit logs are kept this long (s). */
#define UP_RECORD_RETENTION_S	    (30 * 86400)

/* Agents: a host file an agent reads (~/.claude/settings.json, .credentials.json, CLAUDE.md,
 * ~/.claude.json), and the OAuth token endpoint's answer and how long it may take. */
#define UP_AGENT_MAX_HOST_FILE	    (4 * 1024 * 1024)
#define UP_AGENT_TOKEN_RESPONSE_MAX (64 * 1024)
#define UP_AGENT_TOKEN_TIMEOUT_MS   30000

/* Audit logs (sessions/<id>/audit.jsonl): one line, bytes waiting for the disk (past it,
 * dropped and counted), how much of the file `uplink logs` gets, how long a stopped
 * session's mitm log may still deliver, and the reconnect backoff of its stream. */
#define UP_AUDIT_LINE_MAX	 (16 * 1024)
#define UP_AUDIT_QUEUE_MAX	 (4 * 1024 * 1024)
#define UP_AUDIT_HISTORY_MAX	 (4 * 1024 * 1024)
#define UP_AUDIT_DRAIN_MS	 30000
#define UP_AUDIT_BACKOFF_BASE_MS 250
#define UP_AUDIT_BACKOFF_CAP_MS	 30000
/* uplink rules suggest: hosts, distinct path patterns and warnings one suggestion holds,
 * the longest path taken, examples per rule, and kinds of skipped requests listed. */
#define UP_SUGGEST_MAX_HOSTS	 256
#define UP_SUGGEST_MAX_PATTERNS	 1024
#define UP_SUGGEST_MAX_WARNINGS	 256
#define UP_SUGGEST_PATH_MAX	 2048
#define UP_SUGGEST_EXAMPLES	 3
#define UP_SUGGEST_MAX_SKIPPED	 64
/* `uplink clean --wait`: how long the daemon waits for the namespaces to go (s). */
#define UP_CLEAN_WAIT_MAX_S	 600

/* Desktop notifications: sessions whose denied requests are counted, how often one
 * session's denials are told (ms), how long a Notify call may take (ms), and how many
 * shown notifications are remembered for their "Show log" action. */
#define UP_MAX_NOTIFY_SESSIONS	     256
#define UP_NOTIFY_DENIED_INTERVAL_MS 60000
#define UP_NOTIFY_CALL_TIMEOUT_MS    5000
#define UP_MAX_NOTIFY_ACTIONS	     32
/* doctor: how long `docker version` and one D-Bus call may take (ms), output kept. */
#define UP_DOCTOR_EXEC_TIMEOUT_MS    5000
#define UP_DOCTOR_DBUS_TIMEOUT_MS    3000
#define UP_DOCTOR_OUTPUT_MAX	     4096
/* How long `git config --global --get` may take when a session reads the host's identity. */
#define UP_GIT_CONFIG_TIMEOUT_MS     5000
/* debug.block (UPLINK_DEBUG_RPC=1 only): the longest it blocks the loop (ms). */
#define UP_DEBUG_BLOCK_MAX_MS	     60000

/* `uplink stop --wait`: how long the client waits for a namespace to go (s). */
#define UP_STOP_WAIT_MAX_S	 300
/* uplink run: host mounts (--add-dir, --mount-rw, --mount-ro together), --ssh-cidr values,
 * --git-https-rewrite hosts, --mitm-ca-cert files and the size of each. */
#define UP_MAX_SESSION_MOUNTS	 64
#define UP_MAX_SSH_CIDRS	 64
#define UP_MAX_GIT_REWRITES	 64
#define UP_MAX_MITM_CA_FILES	 32
#define UP_MAX_MITM_CA_FILE_SIZE (1024 * 1024)
/* --kube-context: contexts exposed to one agent; the longest kubeconfig path list ($KUBECONFIG). */
#define UP_MAX_KUBE_CONTEXTS	 32
#define UP_MAX_KUBECONFIG_PATHS	 16384
/* --ssh-key-dir: entries looked at, files taken (keys, certificates, config), the size of one
 * (a larger file is not a key and is ignored, unless it is the config or a certificate), and how
 * long `ssh-keygen -y` may take for one key. */
#define UP_MAX_SSH_DIR_ENTRIES	 1024
#define UP_MAX_SSH_FILES	 32
#define UP_MAX_SSH_FILE_SIZE	 (64 * 1024)
#define UP_SSH_KEYGEN_TIMEOUT_MS 10000
/* Config files (daemon/config-file.c): the largest one read, and how many folders up from the cwd.
 */
#define UP_MAX_CONFIG_FILE_SIZE	 (256 * 1024)
#define UP_MAX_CONFIG_FILES	 64
/* The trust store (uplink trust): its size, the files it holds, the files one call names. */
#define UP_MAX_TRUST_STORE_SIZE	 (1024 * 1024)
#define UP_MAX_TRUSTED_FILES	 2048
#define UP_MAX_TRUST_ARGS	 64
/* AWS (--aws-profiles): profiles in one session (flags and the agent's together), how long
 * `aws configure export-credentials` may run, how much of its output and stderr we keep. */
#define UP_MAX_AWS_PROFILES	 32
#define UP_AWS_EXPORT_TIMEOUT_MS 60000
#define UP_AWS_EXPORT_OUTPUT_MAX 16384
#define UP_AWS_EXPORT_STDERR_MAX 2048
/* Credential refresh: renew this long before expiry at most (s), or a quarter of the time
 * left for credentials that live shorter; a failed refresh is retried from the first wait to
 * the cap (ms). */
#define UP_REFRESH_MARGIN_S	 300
#define UP_REFRESH_RETRY_BASE_MS 5000
#define UP_REFRESH_RETRY_CAP_MS	 (5 * 60 * 1000)
