/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * --kube-context: host kubeconfig contexts exposed to the agent (docs/architecture.md,
 * "What a session borrows from the host"). The agent pod gets a kubeconfig without
 * credentials; the mitm injects the bearer token (a kube rule) or presents the client
 * certificate (Secret kube-client-certs), and trusts the cluster CAs next to the public
 * roots. Everything here is pure but up_kube_expose_load(), which reads kubeconfigs
 * (blocking: the thread pool).
 */

struct up_kube_context;
struct up_ruleset;

/* Mount point of the agent's kubeconfig, its ConfigMap, and the mitm's client certificates. */
#define UP_KUBE_AGENT_DIR	  "/etc/uplink/kube"
#define UP_KUBE_AGENT_CONFIG	  UP_KUBE_AGENT_DIR "/config"
#define UP_KUBE_CONFIGMAP	  "kube-config"
#define UP_KUBE_CERTS_SECRET	  "kube-client-certs"
#define UP_KUBE_CERTS_DIR	  "/kube-client-certs"
/* The token every user of the agent's kubeconfig holds, so kubectl sends something. */
#define UP_KUBE_PLACEHOLDER_TOKEN "uplink-placeholder"

/* One exposed context. Secrets (token, client_pem) are wiped on free. */
struct up_kube_exposed_ctx {
	char *name, *cluster, *user, *namespace; /* namespace may be NULL */
	char *server;				 /* unchanged URL */
	char *host;	  /* the API host: lower case, no port, no brackets */
	unsigned port;	  /* the API server's port (443 when the URL names none) */
	char *ca_pem;	  /* the cluster's CA (PEM) */
	char *token;	  /* secret; NULL: a client certificate */
	char *client_pem; /* secret: certificate PEM then key PEM; or NULL */
	size_t client_len;
};

struct up_kube_exposed {
	struct up_kube_exposed_ctx *ctx;
	size_t n;
};

/* The port of an https:// server URL (443 by default); -EINVAL with userinfo or a bad port. */
int up_kube_server_port(const char *server);

struct up_kube_exposed *up_kube_exposed_new(void);
struct up_kube_exposed *up_kube_exposed_free(struct up_kube_exposed *k);
void up_kube_exposed_freep(struct up_kube_exposed **k);

/*
 * Checks one context as read by up_kubeconfig_inspect(), in this order, the first failure
 * being the one reported: no cluster, no user, no server (or one with a user name or
 * password in it), insecure-skip-tls-verify, no CA, a URL that is not https or whose port
 * or host is bad, tls-server-name, an API host another context has, exec or
 * auth-provider, username/password, no credential (or a token that cannot go in a header,
 * a client certificate for an IPv6 host); and adds it. A tokenFile is read here. 0, or
 * -EINVAL with `why` naming the context and never a secret.
 */
int up_kube_expose_add(struct up_kube_exposed *k, const struct up_kube_context *c, char *why,
		       size_t len) _wur_;

/*
 * Blocking: each of `names` (strings) from `paths` (a colon list as $KUBECONFIG; NULL: the
 * daemon's $KUBECONFIG or ~/.kube/config), in order. Every refusal reads
 * "--kube-context <ctx>: ...".
 */
int up_kube_expose_load(const char *paths, const json_t *names, struct up_kube_exposed **ret,
			char *why, size_t len) _wur_;

/* Python re syntax for exactly `s` (every character but [A-Za-z0-9_] escaped); NULL: ENOMEM. */
char *up_regex_escape(const char *s);

/* certificate then key, each ending in a newline, as one PEM file; NULL: ENOMEM. */
char *up_pem_concat(const char *cert, size_t cert_len, const char *key, size_t key_len,
		    size_t *out_len);

/*
 * The rules of the kube layer, one per context: "kube-<ctx>", the API host, any method
 * and path; a bearer context injects "Authorization: Bearer <token>" (already resolved),
 * a client-certificate context removes the placeholder Authorization header.
 */
int up_kube_expose_rules(const struct up_kube_exposed *k, struct up_ruleset *rs) _wur_;

/*
 * The agent's kubeconfig: clusters with the real server and the session CA as their
 * certificate authority, users with the placeholder token, contexts as on the host,
 * current-context the first one. No secret. NULL: ENOMEM.
 */
json_t *up_kube_expose_kubeconfig(const struct up_kube_exposed *k, const char *session_ca_pem);

/*
 * Appends every cluster CA to `*bundle` (a PEM text or NULL), each ending in a newline,
 * after what is there (the --mitm-ca-cert files).
 */
int up_kube_expose_ca_bundle(const struct up_kube_exposed *k, char **bundle) _wur_;

/* Whether the agent's NO_PROXY (manifests/agent-pod.yaml) covers `host`. */
bool up_kube_host_no_proxy(const char *host, const char *no_proxy);
