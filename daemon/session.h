/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "errors.h"
#include "kube-watch.h"
#include "list.h"
#include "session-spec.h"
#include "session-state.h"
#include "util.h"

/*
 * Sessions: one agent run each, from `session.start` to its namespace's deletion.
 * The registry (struct up_sessions) owns every session, the record store, the
 * templates, and the deploy clusters (one per kubeconfig context in use); it hears
 * every namespace and pod change and hands each to the session it belongs to.
 */
struct up_sessions;
struct up_session;
struct up_manager;
struct up_request;
struct up_cluster;

/*
 * Mounts, SSH, git and mitm options (daemon/session-extras.c): what the session derives
 * from what session.start asked for (struct up_session_asked), and what the renderer gets
 * (`out`). Owned by struct up_session_opts.
 */
struct up_session_extra {
	char *kubeconfig; /* --kube-context's kubeconfig(s), a colon list; NULL: the daemon's */
	struct up_kube_exposed *kube; /* read on the thread pool; out.kube points here */
	json_t *aws_profiles;	      /* names, checked; the agent's are added while preparing */
	int64_t aws_expires_at;	      /* the earliest expiry of the exported credentials; 0 none */
	char *ssh_key_dir;	      /* absolute, as given; NULL = none */
	struct up_session_extras out; /* daemon/session-spec.h */
};

/* What session.start asked for, validated; every string owned. */
struct up_session_opts {
	char *agent, *cwd;
	char *user, *home;
	/* Every parameter of common/session-options.h as given (session-asked.h): rules holds
	 * the --rules paths (absolute), then the config files' inline rules. */
	struct up_session_asked asked;
	/* Derived from `asked`: "" and NULL both mean not given; the default image when none. */
	char *mode, *mitm_image, *registry_image, *image, *registry;
	bool quiet; /* no desktop notifications (config files: notifications: false) */
	uint64_t ttl_s, idle_s;
	struct up_session_extra *extra; /* never NULL once filled */
};

/* sessions.c: the registry */
int up_sessions_new(struct up_manager *m, uv_loop_t *loop, struct up_sessions **ret) _wur_;
/* Cancels what is in flight and stops listening; records stay on disk. */
void up_sessions_shutdown(struct up_sessions *all);
/* After the loop has drained (store writes done). */
struct up_sessions *up_sessions_free(struct up_sessions *all);
/* {running, starting, ended} for daemon.status. */
json_t *up_sessions_counts(const struct up_sessions *all);
/* Tells systemd how many sessions run (STATUS=). */
void up_sessions_status(const struct up_sessions *all);

/* session.* requests wait until the records are loaded (after a restart, a moment). */
struct up_request;
bool up_sessions_loaded(const struct up_sessions *all);
int up_sessions_defer(struct up_sessions *all, struct up_request *req, void *params,
		      int (*fn)(struct up_request *req, void *params, void *userdata),
		      void *userdata) _wur_;

/* sessions.c: the cluster for a context (NULL: the default), created on first use. */
struct up_cluster *up_sessions_cluster(struct up_sessions *all, const char *context);

/*
 * Who started a session hears from it through one observer (rpc-session.c: the client's
 * connection and its session.start request): progress and state notifications (params
 * taken), then one answer, reply (result taken) or error; after the answer, nothing.
 */
struct up_session_observer {
	void (*progress)(void *starter, json_t *params);
	void (*state)(void *starter, json_t *params);
	void (*reply)(void *starter, json_t *result);
	void (*error)(void *starter, enum up_error e, const char *msg);
};
/* session.c: the starter went away unanswered: a session not yet RUNNING is stopped, a
 * running one only loses its observer. */
void up_session_starter_gone(struct up_session *s);

/* sessions.c: a new session from `o` (taken, even on failure), its record written and its
 * steps begun; it answers `starter` through `obs` when running or failed. */
int up_sessions_start(struct up_sessions *all, struct up_session_opts *o,
		      const struct up_session_observer *obs, void *starter,
		      struct up_session **ret) _wur_;
/* sessions.c: frees what `o` owns and zeroes it. */
void up_session_opts_done(struct up_session_opts *o);

/* sessions.c: what the RPC files may read of a session and of the registry. */
const char *up_session_id(const struct up_session *s);
const char *up_session_namespace(const struct up_session *s);
enum up_session_state up_session_get_state(const struct up_session *s);
struct up_cluster *up_session_cluster(const struct up_session *s);
/* When its record says it was created (seconds since the epoch); 0 without a record. */
int64_t up_session_created_at(const struct up_session *s);
/* Every session in turn: NULL gives the first, the last gives NULL. */
struct up_session *up_sessions_next(struct up_sessions *all, struct up_session *prev);
uv_loop_t *up_sessions_loop(const struct up_sessions *all);
const char *up_sessions_home(const struct up_sessions *all);
const char *up_sessions_user(const struct up_sessions *all);
/* Why sessions cannot start (the templates did not load), or NULL. */
const char *up_sessions_templates_error(const struct up_sessions *all);

/* session-limits.c: a client attached (+1) or gone (-1), for --idle-timeout; the expiry
 * moved on by `by_s` (-EALREADY when the session has ended, or a negative errno). */
void up_session_attached(struct up_session *s, int delta);
int up_session_extend(struct up_session *s, uint64_t by_s) _wur_;

/* session-extras.c: the parts of the extras that need no I/O (SSH CIDRs into x->out, git
 * hosts, list sizes), checked on the loop; 0 or -EINVAL with a sentence naming the flag and
 * the value. */
int up_session_extra_check(struct up_session_extra *x, const struct up_session_asked *a, char *why,
			   size_t len) _wur_;
struct up_session_extra *up_session_extra_free(struct up_session_extra *x);

/* sessions.c: finding and listing */
struct up_session *up_sessions_find(struct up_sessions *all, const char *id_or_namespace);
/*
 * session.list: an object per session, or with `columns` (names of its fields) a row per
 * session, the values in that order (null for a field a session lacks): far less to build,
 * send and parse when a client prints a table.
 */
json_t *up_sessions_list(struct up_sessions *all, bool all_sessions, const json_t *columns);
/* The first name in `columns` that no session has, NULL when all are known. */
const char *up_sessions_list_column_check(const json_t *columns);

/* session.c */
json_t *up_session_describe(const struct up_session *s);
/* Asks a session to stop; returns -EALREADY when it has already ended. */
int up_session_stop(struct up_session *s, const char *reason);

/* session-approved.c: ask mode's `rule` (an up_approval_rule()), approved for the session (or
 * saved), joins the session's set as its last layer ("session", as the proxy orders it) and
 * the rules Secret is rewritten with it, so that a restarted mitm pod (which reads the
 * Secret) keeps it; the proxy has it already from the decision. A rule the set holds already
 * is not added twice; past UP_MAX_APPROVED_RULES, none is.
 * Returns 1 when the Secret is being rewritten: `done` (may be NULL) runs later on the loop,
 * once, with NULL when the Secret took it (or the session ended first) or with a warning
 * sentence naming the Kubernetes error; 0 when the set held it already; -errno when it is
 * not kept, with the warning in `warn`. Every warning is also in the log; none holds a
 * secret. */
#define UP_APPROVED_WARNING_MAX 1536
typedef void (*up_session_kept_fn)(const char *warning, void *userdata);
int up_session_add_approved_rule(struct up_session *s, const json_t *rule, char *warn,
				 size_t warn_len, up_session_kept_fn done, void *userdata);

/* session-pods.c: what a client needs to attach: the kubectl command line. */
json_t *up_session_attach_info(const struct up_session *s, char *err, size_t err_len);
