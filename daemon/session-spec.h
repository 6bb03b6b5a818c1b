/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "agents/agent.h"  /* struct up_agent_contrib: what the agent adds to its pod */
#include "protocol.h"	   /* UP_SESSION_ID_LEN, UP_SESSION_NS_PREFIX */
#include "session-asked.h" /* struct up_session_asked: what session.start asked for */

/*
 * Everything rendering a session's Kubernetes objects needs (daemon/manifests.h). The
 * spec borrows every pointer: the caller owns the strings and keeps them alive while
 * rendering. Fields marked "secret" end up only in the mitm pod's Secrets.
 */

struct up_kube_exposed; /* daemon/kube-expose.h */

/* One file from --ssh-key-dir (daemon/ssh-keys.h); owns name and data. */
struct up_ssh_file {
	char *name; /* a Secret key and a file name in ~/.ssh: [-._a-zA-Z0-9]+ */
	char *data;
	size_t len;
};

/* What --ssh-key-dir gives: private keys for the holder pod, public files for the agent. */
struct up_ssh_keys {
	struct up_ssh_file
		*keys; /* secret: private keys by file name; Secret ssh-agent-keys only */
	size_t n_keys;
	struct up_ssh_file *pub; /* <key>.pub (derived), config, *-cert.pub: Secret ssh-pub */
	size_t n_pub;
};

/* Host mounts and per-session options beyond the agent's own (uplink run's flags). */
struct up_session_extras {
	json_t *mounts;	   /* [{"path", "dir": bool, "read_only": bool}]: host paths, resolved */
	json_t *ssh_cidrs; /* ["10.0.0.0/8", ...], normalised: TCP 22 open to exactly these */
	char *gitconfig;   /* the git overlay (Secret git-config); NULL = none */
	char *mitm_ca_pem; /* CAs the mitm trusts upstream next to the public roots; NULL = none */
	/* --kube-context: the agent's kubeconfig, the mitm's client certificates (secret) */
	const struct up_kube_exposed *kube; /* NULL or none = no context */
	struct up_ssh_keys ssh; /* n_keys == 0: no ssh-agent holder, relay or ~/.ssh files */
	/* --aws-profiles (daemon/aws.h): NULL = none. The agent's ~/.aws/credentials (dummy keys
	 * only) and the mitm's map of dummy key -> real credentials (secret). */
	char *aws_ini;
	char *aws_creds_json;
};

struct up_session_spec {
	const char *id;	   /* 12 lowercase hex; the namespace is agent-uplink-<id> */
	const char *owner; /* label value: hash of machine-id and uid, [a-z0-9]{1,63} */
	time_t created_at, expires_at;
	const char *cwd;   /* absolute; also the agent's working directory */
	const char *agent; /* "claude" */
	const char *mode;  /* "anthropic", "bedrock", ... (informational, may be NULL) */
	uid_t uid;
	gid_t gid;
	const char *user; /* host user name */
	const char *home; /* host home, /home/<user> */
	const char *agent_image;
	const char *mitm_image;
	const char *agent_runtime_class; /* NULL = "kata-clh"; "" = none */
	const char *mitm_runtime_class;	 /* NULL or "" = none */
	bool ask; /* ask mode: the addon holds what no rule allows (needs control_token) */
	const json_t *rules;	 /* secret: the proxy's rules document (version 1) */
	const char *ca_cert_pem; /* the session CA (daemon/ca.h) */
	const char *ca_key_pem;	 /* secret */
	/* secret: the control listener's token (UP_CONTROL_TOKEN_LEN hex digits), in the rules
	 * Secret; NULL = no control listener */
	const char *control_token;
	const char *addon_source; /* filter.py; NULL = the one next to the templates */
	/* The mitm Service's cluster IP, mapped to "mitm" by a hostAliases entry. NULL: the
	 * agent pod is rendered without it; up_manifests_set_mitm_ip() adds it once known. */
	const char *mitm_cluster_ip;
	/* The same for the ssh-agent holder's Service, mapped to "ssh-agent" (only with keys). */
	const char *ssh_agent_cluster_ip;
	struct up_agent_contrib contrib;
	const struct up_session_extras *extras; /* NULL = none */
	/* session.start's options as given (a copy of the struct, its pointers borrowed):
	 * allow_dns opens kube-dns to the agent (and gives it ClusterFirst), mitm_insecure and
	 * mitm_debug set the mitm's ssl_insecure and its debug logging. */
	struct up_session_asked asked;
	/* The deploy cluster's Service ranges, normalised CIDRs (daemon/cluster-ranges.h): the
	 * mitm's uplink_refuse_cidrs. NULL or empty = not known, the option is not set. */
	const json_t *refuse_cidrs;
};

/* What agent-uplink-system needs. */
struct up_system_spec {
	const char *registry_image; /* NULL = "registry:2" */
};
