/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define UP_DEFAULT_DEPLOY_CONTEXT "local-k8s-admin"

/* An exec credential plugin (client.authentication.k8s.io/v1 or v1beta1). */
struct up_kube_exec {
	char *api_version;
	char **argv; /* argv[0] is the command (resolved against the kubeconfig's folder if
			relative) */
	char **env;  /* "NAME=value", added to the daemon's environment */
	bool provide_cluster_info;
	char *install_hint;
};

/*
 * What up_kubeconfig_inspect() notes where up_kubeconfig_load() refuses: --kube-context
 * makes its own refusals, in its own order (daemon/kube-expose.c).
 */
struct up_kube_context_facts {
	bool no_cluster;    /* the context names no cluster, or one no file defines */
	bool no_user;	    /* the same for its user */
	bool auth_provider; /* the user has an auth-provider */
	bool exec;	    /* the user has an exec plugin (not parsed) */
	bool basic_auth;    /* the user has a username or a password */
};

/*
 * One context of a kubeconfig, resolved: the cluster to talk to and the credentials
 * to present, with every file already read. Secrets (key, token) are wiped on free.
 */
struct up_kube_context {
	char *name;
	char *file; /* the kubeconfig that defined the context */
	char *cluster;
	char *user;	 /* NULL: anonymous */
	char *namespace; /* NULL: default */
	char *server;
	char *tls_server_name;
	char *ca_pem;
	size_t ca_len;
	bool insecure;
	char *cert_pem;
	size_t cert_len;
	char *key_pem;
	size_t key_len;
	char *token;
	char *token_file;
	struct up_kube_exec *exec;
	struct up_kube_context_facts facts; /* up_kubeconfig_inspect() only */
};

/*
 * Loads `paths` (a colon-separated list as in $KUBECONFIG; NULL: $KUBECONFIG, else
 * ~/.kube/config), merged the way kubectl merges, and resolves `context` (NULL: the
 * default deploy context; "": the current-context). Blocking: run it off the loop.
 * On failure `err` holds a sentence naming the file and the context.
 */
int up_kubeconfig_load(const char *paths, const char *context, struct up_kube_context **ret,
		       char *err, size_t err_len) _wur_;

/*
 * The same for a context to expose (--kube-context), leniently: a missing cluster, user or
 * server, insecure-skip-tls-verify, an exec plugin, an auth-provider and basic auth are
 * noted (c->facts, NULL fields) instead of refused. `context` must be a name. Blocking.
 */
int up_kubeconfig_inspect(const char *paths, const char *context, struct up_kube_context **ret,
			  char *err, size_t err_len) _wur_;

/* Either of them for one kubeconfig given as text (fuzzing, tests): up_kubeconfig_inspect()
 * when `inspect`, else up_kubeconfig_load(). Relative paths resolve against ".". */
int up_kubeconfig_from_text(const char *text, size_t len, const char *context, bool inspect,
			    struct up_kube_context **ret, char *err, size_t err_len) _wur_;

/* The names of every context, and the current one (or NULL), of `paths`. */
int up_kubeconfig_contexts(const char *paths, json_t **names, char **current, char *err,
			   size_t err_len) _wur_;

struct up_kube_context *up_kube_context_free(struct up_kube_context *c);
void up_kube_context_freep(struct up_kube_context **c);
