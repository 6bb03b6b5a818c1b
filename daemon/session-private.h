/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "session.h"

struct up_ruleset;
struct up_resolve;
struct up_image_job;
struct up_kube_call;
struct up_ca;
struct up_http;
struct up_store;
struct up_image_result;
struct up_manifests;
struct session_agent;
struct scall;
struct session_refresh;
struct up_kube_context;
struct up_kube_error;
struct up_image_request;
struct up_image_progress;
struct up_image_result;

/*
 * What a session asks of the world outside the loop: the deploy cluster (calls, the pod
 * watch's cache, the context), the image job, the audit follower, and the threadpool half of
 * PREPARING. up_session_kube_ops (session-calls.c) is the real one; a unit test puts a fake
 * in s->ops. A call or job handle is the implementation's own; cancel forgets it, and its
 * callback never comes.
 */
typedef void (*up_session_call_cb)(const struct up_kube_error *err, json_t *obj, void *ud);
struct up_session_cluster_ops {
	int (*apply)(struct up_session *s, json_t *obj, up_session_call_cb cb, void *ud,
		     void **call);
	int (*get)(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		   void **call);
	int (*delete)(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		      void **call);
	void (*cancel)(void *call);
	/* The pod watch's cached pod `name` of the session's namespace (borrowed), or NULL. */
	json_t *(*pod)(const struct up_session *s, const char *name);
	/* The deploy cluster's context, NULL while it is not available. */
	const struct up_kube_context *(*context)(const struct up_session *s);
	int (*image)(struct up_session *s, const struct up_image_request *req,
		     void (*progress)(const struct up_image_progress *p, void *ud),
		     void (*done)(const struct up_image_result *res, void *ud), void *ud,
		     void **job);
	void (*image_cancel)(void *job);
	/* RUNNING: follow the mitm's log into audit.jsonl (idempotent). */
	void (*audit_start)(struct up_session *s);
	/* The threadpool half of PREPARING: fills s->rs, s->ca, s->agent, s->warnings, or sets
	 * s->prep_error and s->prep_e. */
	void (*prepare)(struct up_session *s);
};
extern const struct up_session_cluster_ops up_session_kube_ops;
struct up_waiter;

#define UP_SESSION_MAX_CALLS	   32
/* The agent pod's main container (manifests/agent-pod.yaml). */
#define UP_AGENT_CONTAINER	   "main"
/* The mitm pod's image unless --mitmproxy-image says otherwise: the official one. */
#define UP_DEFAULT_MITMPROXY_IMAGE "mitmproxy/mitmproxy:12"

struct up_session {
	struct up_sessions *all;
	struct up_list link; /* up_sessions::sessions */
	char id[16];
	char ns[48];
	json_t *record;
	enum up_session_state state;
	struct up_session_opts o;
	struct up_cluster *cluster;
	/* Who hears progress, states and the answer of session.start; `starter` is its
	 * data, NULL once answered or gone. */
	const struct up_session_observer *obs;
	void *starter;
	const struct up_session_cluster_ops *ops; /* never NULL */
	char owner[24];

	/* Work in flight; each is cancelled when the session is. */
	uv_work_t work;
	bool in_work;
	struct up_resolve *resolve;
	void *image;				   /* ops->image's job */
	struct scall *calls[UP_SESSION_MAX_CALLS]; /* Kubernetes calls in flight */
	uv_timer_t *timer;
	unsigned pending;  /* applies outstanding in the current step */
	unsigned attempts; /* teardown deletes tried */

	/* What the steps made. */
	struct session_agent *agent;
	struct up_ruleset *rs;
	json_t *approved; /* the rules ask mode's approvals added to rs
			     (session_rules_add_approved()) */
	struct up_ca *ca;
	json_t *problems;
	json_t *warnings; /* sentences for the user found on the threadpool, told on the loop */
	struct session_refresh *refresh; /* session-refresh.c; NULL until RUNNING */
	/* After a restart: the renewals re-armed once, from the Secrets in the cluster. */
	bool rearm_tried;
	unsigned rearm_kinds;	/* session-refresh.c's kinds still to re-arm */
	unsigned rearm_pending; /* the Secrets being read */
	json_t *objects;
	char *image_ref;
	char mitm_ip[64];
	char ssh_agent_ip[64]; /* the ssh-agent holder's Service, with --ssh-key-dir keys */
	char *prep_error;
	enum up_error prep_e;
	bool agent_ready, mitm_ready, applied_anything, freeing;
	bool need_ssh_agent, ssh_agent_ready; /* the holder pod, with --ssh-key-dir keys */
	bool mitm_down, ssh_agent_down; /* RUNNING, and told that this pod stopped being Ready */
	char waiting[512];		/* the last reason a pod gave for not starting */
	char registry_problem[1024];	/* registries.yaml, read on the threadpool */
	char server[512];		/* the deploy cluster's URL, for the threadpool */
	char *server_ca;		/* and its CA (PEM), or NULL */
	/* Lifetime: clients attached now, since when none is, warnings given, the timer. */
	unsigned attached;
	int64_t idle_since;
	bool warned_ttl, warned_idle;
	uv_timer_t *life;
	/* uv_hrtime() at the start, when deploying began, and when the last object was sent. */
	uint64_t t_start, t_deploy, t_submitted;
	json_t *system; /* agent-uplink-system's objects while they are applied */
	/* --dry-run (session-plan.c): what a run would do, one sentence a line; the parts of
	 * agent-uplink-system found missing (bits), and why the image was not asked for. */
	json_t *plan;
	unsigned plan_missing;
	bool plan_unread, plan_available;
	const char *plan_unasked;
	/* control.c: the proxy's control token (secret; empty after a restart until read back
	 * from the rules Secret), and the rules push in flight */
	char control_token[UP_CONTROL_TOKEN_LEN + 1];
	struct up_control_push *control_push;
	struct up_approvals *approvals; /* approvals.c: ask mode's poll, NULL when not asking */
	/* session-ranges.c: the wait for the cluster's Service ranges, before rendering */
	struct up_waiter *ranges_wait;
	bool ranges_waited;
};

/* The registry, shared by session.c, sessions.c and rpc-session.c. */
struct up_sessions {
	struct up_manager *m;
	uv_loop_t *loop;
	struct up_store *store;
	struct up_manifests *tpl;
	char tpl_error[512];
	struct up_http *http;	 /* for registry checks */
	json_t *clusters;	 /* context name -> (struct up_cluster *) as an integer */
	bool closing;		 /* shutting down: no new work starts */
	bool loaded;		 /* the records are in; session.* requests before wait */
	struct up_list deferred; /* such requests */
	uv_timer_t *resync;	 /* the slow periodic reconciliation */
	struct up_list sessions; /* up_session::link */
	char user[64], home[4096];
	char owner[24]; /* the uplink.dev/owner label of our namespaces */
};

/* reaper.c: records against the cluster (orphans, resync, adoption, vanished namespaces) */
void reaper_on_cluster_event(const char *kind, enum up_watch_event ev, json_t *obj, void *ud);
void reaper_reconcile(struct up_sessions *all, struct up_cluster *c);
void reaper_reconcile_ready(struct up_sessions *all);
void up_session_adopt(struct up_session *s);
void up_session_reconcile(struct up_session *s, json_t *ns);
void up_session_on_namespace(struct up_session *s, enum up_watch_event ev, json_t *ns);

/* session.c: one session's steps and the table of what entering a state does */
void up_session_cancel_work(struct up_session *s);
struct up_session *up_session_new(struct up_sessions *all, const char *id);
struct up_session *up_session_free(struct up_session *s);
int64_t session_now(void);
/* The host uid and gid the pods run as: ours (tests: UPLINK_DEBUG_UID=uid:gid, as root). */
void session_host_ids(uid_t *uid, gid_t *gid);
void session_set_state(struct up_session *s, enum up_session_state to, const char *reason);
void session_progress(struct up_session *s, const char *phase, unsigned done, unsigned total,
		      const char *fmt, ...) _printf_(5, 6);
void session_answer_error(struct up_session *s, enum up_error e, const char *msg);
/* The answer of session.start (taken); nothing when already answered. */
void session_answer(struct up_session *s, json_t *result);
void session_fail(struct up_session *s, enum up_error e, const char *fmt, ...) _printf_(3, 4);
void session_save(struct up_session *s);
/* Down to TEARDOWN, the namespace deleted (retried until it is), then GONE. */
void session_teardown(struct up_session *s);
void session_delete_namespace(struct up_session *s);
void session_start_timer(struct up_session *s, uv_timer_cb cb, uint64_t ms);
/* The desktop notifier, or NULL when the session is quiet (notifications: false). */
struct up_notifier *session_notifier(const struct up_session *s);
/* A warning that a limit is near (desktop notification, or the log without one). */
void session_notify_expiring(struct up_session *s, const char *limit, int64_t left_s);
void session_step_build(struct up_session *s);
/* The registry is there: on to the image. */
void session_registry_ready(struct up_session *s);
/* The image, built unless present; a dry run (plan_only) only hashes and, with `ask`, asks
 * the registry. Then DEPLOYING. */
void session_start_image(struct up_session *s, bool ask);
/* Renders the objects; a real run deploys them, a dry run answers with them. */
void session_step_deploy(struct up_session *s);

/* session-prepare.c: PREPARING, from the record on disk to the placeholders resolved */
/* Writes the record, then runs the steps; answers through `obs` when running or failed. */
int up_session_begin(struct up_session *s, const struct up_session_observer *obs,
		     void *starter) _wur_;
/* The threadpool part for real: up_session_kube_ops.prepare. */
void session_prepare_run(struct up_session *s);

/* session-extras.c: on the threadpool (PREPARING), resolves and checks the host mounts, reads
 * the --mitm-ca-cert files, the --kube-context contexts (adding their rules) and the host's
 * git identity. On failure sets the session's preparation error and returns it (negative). */
int session_extras_prepare(struct up_session *s) _wur_;

/* session-calls.c: the Kubernetes calls a session owns, cancelled with it */
typedef void (*session_done_fn)(struct up_session *s, const struct up_kube_error *err, json_t *obj);
int session_apply(struct up_session *s, json_t *obj, session_done_fn done) _wur_;
/* The same with `ud` for `done`, which is also called, with an error whose r is -ECANCELED,
 * when session_cancel_work() cancels the call: whoever waits on it always hears back. */
typedef void (*session_done_ud_fn)(struct up_session *s, const struct up_kube_error *err,
				   json_t *obj, void *ud);
int session_apply_ud(struct up_session *s, json_t *obj, session_done_ud_fn done, void *ud) _wur_;
/* Applies every object of `objs` after the first (the namespace) that `skip` (or NULL) does
 * not hold back, all at once, each answered through `done`; s->pending counts them. False,
 * the session failed, when the cluster is not available. */
bool session_apply_rest(struct up_session *s, const json_t *objs, bool (*skip)(const json_t *o),
			session_done_fn done);
int session_get(struct up_session *s, const char *path, session_done_fn done) _wur_;
int session_delete(struct up_session *s, const char *path, session_done_fn done) _wur_;
void session_cancel_work(struct up_session *s);

/* session-pods.c: what the pod watch means for a session */
void up_session_on_pod(struct up_session *s, enum up_watch_event ev, json_t *pod);
/* STARTING: waits for the pods through the pod watch, with a deadline. */
void session_start_waiting(struct up_session *s);

/* session-plan.c: --dry-run, which reads the cluster and never writes to it */
/*
 * What only the cluster knows, into the rendered agent pod: the Services' cluster IPs once
 * they have them, or for a dry run the placeholders of manifests.h (README documents them).
 * One path for both, so that the dry run's List is what a run applies.
 */
int session_fill_cluster_values(struct up_session *s, const char *mitm_ip, const char *ssh_agent_ip,
				char *err, size_t len) _wur_;
void session_plan_add(struct up_session *s, const char *fmt, ...) _printf_(2, 3);
/* In place of setting agent-uplink-system up: GETs of its objects, then the image. */
void session_plan_registry(struct up_session *s);
/* What the image job found, as a plan line; false (and the session failed) when the build
 * context cannot be hashed, so there is no image to name. */
bool session_plan_image(struct up_session *s, const struct up_image_result *res);
/* The answer: the plan and the objects (placeholders in), then down to GONE and forgotten. */
void session_plan_answer(struct up_session *s);
/* Frees the (GONE) dry-run session on the next turn of the loop. */
void session_plan_forget(struct up_session *s);

/* session-ranges.c: the deploy cluster's Service ranges, the mitm's uplink_refuse_cidrs */
void session_ranges_read(struct up_session *s);
/* Before rendering: true when it waits (bounded) for the read and calls
 * session_step_deploy() again; a dry run's plan says what it found. */
bool session_ranges_wait(struct up_session *s);
const json_t *session_ranges(const struct up_session *s); /* NULL: not known */
void session_ranges_cancel(struct up_session *s);

/* session-limits.c: --ttl and --idle-timeout */
void session_life_arm(struct up_session *s);
void session_life_free(struct up_session *s);

/* image-registry.c */
/* Threadpool: the k3s registries.yaml check; `problem` empty when fine or not needed. */
void session_registry_check(const char *server, char *problem, size_t len);
/* Applies agent-uplink-system and waits for the registry; then session_registry_ready(). */
int session_registry_ensure(struct up_session *s, char *err, size_t len) _wur_;

/* session-agent.c: the agent's host-side work, on the threadpool. */
int session_agent_prepare(struct up_session *s, char *err, size_t len);
int session_agent_rules(struct up_session *s, json_t *problems);
const struct up_agent_contrib *session_agent_contrib(const struct up_session *s);
/* The build context of every agent image (the agents' data folder) and the agent's own
 * folder in it; its image hashes that folder and UP_AGENT_COMMON_DIR. */
int session_agent_context(const struct up_session *s, char *buf, size_t len, const char **name);
const char *const *session_agent_attach_argv(const struct up_session *s);
void session_agent_free(struct up_session *s);
/* Appends the agent's warnings (sentences for the user) to `warnings`. */
int session_agent_warnings(const struct up_session *s, json_t *warnings);
/* When the agent's injected credential (the OAuth token) stops working; 0: never. */
time_t session_agent_expires_at(const struct up_session *s);
/* The profiles the agent's configuration names (borrowed; valid until session_agent_free). */
size_t session_agent_aws_profiles(const struct up_session *s, const char *const **ret);

/* session-aws.c, on the threadpool (PREPARING) */
/* --aws-profiles and the agent's: the dummy INI and the exported credentials. On failure
 * sets the session's preparation error and returns it (negative). */
int session_aws_prepare(struct up_session *s);
/* A warning (appended) when profiles are set up but no rule lets a POST reach AWS. */
void session_aws_warn_rules(struct up_session *s, json_t *warnings);

/* session-refresh.c: credentials renewed while the session runs */
void session_refresh_arm(struct up_session *s);
void session_refresh_free(struct up_session *s);
/*
 * After a restart, once the deploy cluster answers (reconciliation): a RUNNING session's AWS
 * and login renewals armed again from its record and the Secrets in its namespace; what
 * cannot be (exec values, records of an older uplinkd) is said in the log and in one
 * desktop notification. Once per session; later calls do nothing.
 */
void session_refresh_adopted(struct up_session *s);
