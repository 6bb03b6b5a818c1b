/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One session's life: PREPARING (agent, rules, placeholders, CA) -> BUILDING (the
 * image) -> DEPLOYING (objects applied, namespace first, agent pod last) ->
 * STARTING (pods become Ready, seen through the pod watch) -> RUNNING; and on the
 * way down STOPPED/FAILED/EXITED -> TEARDOWN (namespace deleted) -> GONE. One
 * session_set_state() logs, persists and tells the client.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agents/agent.h"
#include "backoff.h"
#include "bounds.h"
#include "approvals.h"
#include "ca.h"
#include "cluster.h"
#include "config-file.h"
#include "control.h"
#include "fileio.h"
#include "image.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "kube.h"
#include "log.h"
#include "loop-timer.h"
#include "manager.h"
#include "manifests.h"
#include "notify.h"
#include "placeholders.h"
#include "rules.h"
#include "secret-store.h"
#include "session-audit.h"
#include "session-private.h"
#include "store.h"

int64_t session_now(void)
{
	return (int64_t)time(NULL);
}

void session_host_ids(uid_t *uid, gid_t *gid)
{
	const char *env = up_knobs()->debug_uid;
	unsigned long u, g;
	char *end;

	*uid = getuid();
	*gid = getgid();
	if (!env || !*env)
		return;
	errno = 0;
	u = strtoul(env, &end, 10);
	if (errno || *end != ':')
		return;
	g = strtoul(end + 1, &end, 10);
	if (errno || *end || u > 0x7fffffff || g > 0x7fffffff)
		return;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
}

/* ---- notifications to the client that started the session ---- */

void session_progress(struct up_session *s, const char *phase, unsigned done, unsigned total,
		      const char *fmt, ...) _printf_(5, 6);
void session_progress(struct up_session *s, const char *phase, unsigned done, unsigned total,
		      const char *fmt, ...)
{
	char msg[512];

	if (!s->starter)
		return;
	up_vformat(msg, sizeof(msg), fmt);
	s->obs->progress(s->starter, json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", s->id, "phase",
					       phase, "message", msg, "done", (json_int_t)done,
					       "total", (json_int_t)total));
}

static void save_done(int r, const char *err, json_t *result, void *ud)
{
	char *id = ud;

	(void)result;
	if (r < 0)
		log_warning("Cannot save the record of session %s: %s, ignoring", id, err);
	free(id);
}

static void save(struct up_session *s)
{
	char *id;

	if (!s->record || s->o.asked.dry_run)
		return;
	id = strdup(s->id);
	if (up_store_save_async(s->all->loop, s->all->store, s->record, save_done, id) < 0) {
		log_warning("Cannot save the record of session %s, ignoring", s->id);
		free(id);
	}
}

void session_save(struct up_session *s)
{
	save(s);
}

struct up_notifier *session_notifier(const struct up_session *s)
{
	return s->o.quiet ? NULL : up_manager_notifier(s->all->m);
}

void session_notify_expiring(struct up_session *s, const char *limit, int64_t left_s)
{
	up_notify_session_expiring(session_notifier(s), up_session_describe(s),
				   *limit == 'i' ? "idle" : "ttl", left_s);
}

/* ---- what entering a state does ---- */

static void follow_audit(struct up_session *s)
{
	s->ops->audit_start(s);
}

/* Nothing to follow or renew for a session that has ended. */
static void stop_running_work(struct up_session *s)
{
	up_session_audit_stop(s);
	session_refresh_free(s);
}

/* A session that ran, or tried to, ends with a desktop notification; a dry run does not. */
static void notify_ended(struct up_session *s)
{
	if (!s->o.asked.dry_run)
		up_notify_session_ended(session_notifier(s), up_session_describe(s));
}

static void arm_running(struct up_session *s)
{
	s->idle_since = session_now();
	session_life_arm(s);
	session_refresh_arm(s);
}

static void answer_running(struct up_session *s)
{
	if (s->starter)
		session_answer(s, up_session_describe(s));
}

/* When an entry action runs: before the record is saved, after, or once the client has
 * heard of the move (the answer comes after the state it answers with). */
enum entry_phase { ENTER, SAVED, TOLD };

#define IN(x) (1u << UP_SESSION_##x)
#define ENDED (IN(EXITED) | IN(FAILED) | IN(STOPPED) | IN(TEARDOWN) | IN(GONE))

/* clang-format off */
static const struct entry_action {
	unsigned states;
	enum entry_phase phase;
	void (*fn)(struct up_session *s);
} entry_actions[] = {
	{IN(RUNNING), ENTER, follow_audit},
	{IN(RUNNING), ENTER, up_approvals_start},
	{ENDED, ENTER, stop_running_work},
	{ENDED, ENTER, up_approvals_stop},
	{IN(EXITED) | IN(FAILED) | IN(STOPPED), SAVED, notify_ended},
	{IN(RUNNING), TOLD, arm_running},
	{IN(RUNNING), TOLD, answer_running},
};
/* clang-format on */

static void run_entry_actions(struct up_session *s, enum up_session_state to,
			      enum entry_phase phase)
{
	for (size_t i = 0; i < sizeof(entry_actions) / sizeof(entry_actions[0]); i++)
		if (entry_actions[i].phase == phase && (entry_actions[i].states & (1u << to)))
			entry_actions[i].fn(s);
}

/* The record and systemd's status line follow the move. */
static void persist_state(struct up_session *s, enum up_session_state to, const char *reason)
{
	if (s->record && up_record_set_state(s->record, to, reason, session_now()) < 0)
		log_warning("Session %s: the record refused %s, ignoring", s->id,
			    up_session_state_to_name(to));
	save(s);
	if (!s->o.asked.dry_run)
		up_sessions_status(s->all);
}

void session_set_state(struct up_session *s, enum up_session_state to, const char *reason)
{
	enum up_session_state from = s->state;
	char kept[1024] = "";

	if (from == to)
		return;
	if (!up_session_state_can_move(from, to)) {
		log_error("Session %s: refused move %s -> %s", s->id,
			  up_session_state_to_name(from), up_session_state_to_name(to));
		return;
	}
	log_info("Session %s: %s -> %s%s%s", s->id, up_session_state_to_name(from),
		 up_session_state_to_name(to), reason ? ": " : "", reason ? reason : "");
	s->state = to;
	run_entry_actions(s, to, ENTER);
	/* On the way down, the reason the session ended stays: it is what `list` shows. */
	if (!reason && s->record && (to == UP_SESSION_TEARDOWN || to == UP_SESSION_GONE)) {
		(void)snprintf(kept, sizeof(kept), "%s", up_record_reason(s->record));
		reason = kept[0] ? kept : NULL;
	}
	persist_state(s, to, reason);
	run_entry_actions(s, to, SAVED);
	if (s->starter)
		s->obs->state(s->starter,
			      json_pack("{s:s, s:s, s:s, s:s?}", "id", s->id, "old",
					up_session_state_to_name(from), "new",
					up_session_state_to_name(to), "reason", reason));
	run_entry_actions(s, to, TOLD);
}

#undef ENDED
#undef IN

void session_start_timer(struct up_session *s, uv_timer_cb cb, uint64_t ms)
{
	if (s->timer && !s->all->closing)
		(void)uv_timer_start(s->timer, cb, ms, 0);
}

/* ---- the way down ---- */

void session_answer_error(struct up_session *s, enum up_error e, const char *msg)
{
	void *starter = s->starter;

	if (!starter)
		return;
	s->starter = NULL;
	s->obs->error(starter, e, msg);
}

void session_answer(struct up_session *s, json_t *result)
{
	void *starter = s->starter;

	if (!starter) {
		json_decref(result);
		return;
	}
	s->starter = NULL;
	s->obs->reply(starter, result);
}

static void fail_msg(struct up_session *s, enum up_error e, const char *msg);

void session_fail(struct up_session *s, enum up_error e, const char *fmt, ...)
{
	char msg[2048];

	up_vformat(msg, sizeof(msg), fmt);
	fail_msg(s, e, msg);
}

static void fail_msg(struct up_session *s, enum up_error e, const char *msg)
{
	if (up_session_state_is_terminal(s->state))
		return;
	session_cancel_work(s);
	session_answer_error(s, e, msg);
	session_set_state(s, UP_SESSION_FAILED, msg);
	session_teardown(s);
}

static void on_teardown_timer(uv_timer_t *t);

static void on_namespace_deleted(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	uint64_t ms;

	if (!err) {
		/*
		 * Accepted: the namespace watch reports its end. Not found: it is gone now; if a
		 * create cancelled in flight still lands later, its ADDED event brings it back
		 * here (up_session_on_namespace).
		 */
		if (!obj && s->state == UP_SESSION_TEARDOWN)
			session_set_state(s, UP_SESSION_GONE, NULL);
		return;
	}
	/* Every teardown is retried until it succeeds: a namespace must never leak. */
	ms = up_backoff_ms(s->attempts++, 1000, 60000, (uint32_t)uv_hrtime(), -1);
	log_warning("Session %s: cannot delete namespace %s (%s); again in %llu s", s->id, s->ns,
		    err->message, (unsigned long long)(ms / 1000));
	session_start_timer(s, on_teardown_timer, ms);
}

void session_delete_namespace(struct up_session *s)
{
	char path[128];

	if (up_kube_path(path, sizeof(path), "Namespace", NULL, s->ns) < 0 ||
	    session_delete(s, path, on_namespace_deleted) < 0) {
		struct up_kube_error e = {.r = -ENOTCONN};
		(void)snprintf(e.message, sizeof(e.message), "the deploy cluster is not available");
		on_namespace_deleted(s, &e, NULL);
	}
}

static void on_teardown_timer(uv_timer_t *t)
{
	session_delete_namespace(t->data);
}

void session_teardown(struct up_session *s)
{
	session_set_state(s, UP_SESSION_TEARDOWN, NULL);
	if (!s->applied_anything || s->o.asked.dry_run) {
		session_set_state(s, UP_SESSION_GONE, NULL);
		if (s->o.asked.dry_run)
			session_plan_forget(s);
		return;
	}
	session_delete_namespace(s);
}

int up_session_stop(struct up_session *s, const char *reason)
{
	if (up_session_state_is_terminal(s->state))
		return -EALREADY;
	session_cancel_work(s);
	session_answer_error(s, UP_ERR_SESSION_STOPPED, reason);
	session_set_state(s, UP_SESSION_STOPPED, reason);
	session_teardown(s);
	return 0;
}

/* The client that started the session went away before it ran: nothing may outlive that. */
void up_session_starter_gone(struct up_session *s)
{
	s->starter = NULL;
	if (up_session_state_is_starting(s->state))
		(void)up_session_stop(s,
				      "the client that started it went away before it was running");
}

/* ---- BUILDING: the agent image, unless one was named ---- */

static void on_image_progress(const struct up_image_progress *p, void *ud)
{
	struct up_session *s = ud;

	session_progress(s, p->phase, p->step, p->total, "%s", p->message ? p->message : "");
}

static void on_image_done(const struct up_image_result *res, void *ud)
{
	struct up_session *s = ud;

	s->image = NULL;
	if (s->o.asked.dry_run) {
		if (session_plan_image(s, res))
			session_step_deploy(s);
		return;
	}
	if (res->r < 0) {
		session_fail(s, res->e, "%s", res->error);
		return;
	}
	free(s->image_ref);
	s->image_ref = strdup(res->ref);
	session_progress(s, "build", 1, 1, "%s %s",
			 res->built ? "built and pushed" : "up to date:", res->ref);
	session_step_deploy(s);
}

void session_step_build(struct up_session *s)
{
	char err[512];

	if (s->o.image) {
		s->image_ref = strdup(s->o.image);
		if (s->o.asked.dry_run)
			session_plan_add(s, "image %s: given with --image; nothing to build",
					 s->o.image);
		session_step_deploy(s);
		return;
	}
	session_set_state(s, UP_SESSION_BUILDING, NULL);
	if (s->o.registry) {
		session_start_image(s, true);
		return;
	}
	if (s->o.asked.dry_run) { /* reads only: session-plan.c */
		session_plan_registry(s);
		return;
	}
	/* The in-cluster registry: the node must be able to pull from it, and it must run. */
	if (s->registry_problem[0]) {
		session_fail(s, UP_ERR_PREREQ_MISSING, "%s", s->registry_problem);
		return;
	}
	session_progress(s, "build", 0, 0, "making sure the registry in agent-uplink-system runs");
	if (session_registry_ensure(s, err, sizeof(err)) < 0)
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "%s", err);
}

void session_registry_ready(struct up_session *s)
{
	json_decref(s->system);
	s->system = NULL;
	session_start_image(s, true);
}

void session_start_image(struct up_session *s, bool ask)
{
	char ctx[4200], repo[512], url[512], log_path[4200], dir[4096], dockerfile[300];
	const char *host = s->o.registry ? s->o.registry : "localhost:5000";
	bool local = startswith(host, "localhost:") || startswith(host, "127.0.0.1:");
	const char *name = NULL;
	int r;

	if (session_agent_context(s, ctx, sizeof(ctx), &name) < 0 ||
	    snprintf(dockerfile, sizeof(dockerfile), "%s/Dockerfile", name) >=
		    (int)sizeof(dockerfile)) {
		session_fail(s, UP_ERR_INTERNAL_ERROR,
			     "the agent's build context path is too long");
		return;
	}
	(void)snprintf(repo, sizeof(repo), "%s/uplink/%s", host, s->o.agent);
	/* The registry in agent-uplink-system listens on the node's loopback, like a local one. */
	(void)snprintf(url, sizeof(url), "%s://%s", local ? "http" : "https", host);
	if (up_store_session_dir(s->all->store, s->id, dir, sizeof(dir)) < 0 ||
	    snprintf(log_path, sizeof(log_path), "%s/build.log", dir) >= (int)sizeof(log_path)) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "the state folder path is too long");
		return;
	}
	const char *const only[] = {UP_AGENT_COMMON_DIR, name, NULL};
	struct up_image_request req = {
		.context_dir = ctx,
		.dockerfile = dockerfile,
		.hash_only = only,
		.repository = repo,
		.registry_url = ask ? url : NULL,
		.force_rebuild = s->o.asked.force_rebuild,
		.log_path = s->o.asked.dry_run ? NULL : log_path,
		.plan_only = s->o.asked.dry_run,
		.docker = up_knobs()->docker,
	};
	session_progress(s, "build", 0, 0, "%s the %s image",
			 ask ? "checking the registry for" : "hashing", s->o.agent);
	r = s->ops->image(s, &req, on_image_progress, on_image_done, s, &s->image);
	if (r < 0)
		session_fail(s, UP_ERR_INTERNAL_ERROR, "cannot start the image build: %s",
			     strerror(-r));
}

/* ---- DEPLOYING: render, then namespace, then everything but the agent pod, then it ---- */

static bool is_agent_pod(const json_t *obj)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *name =
		json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

	return kind && name && !strcmp(kind, "Pod") && !strcmp(name, "agent");
}

static void on_agent_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	(void)obj;
	if (err) {
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "creating the agent pod failed: %s",
			     err->message);
		return;
	}
	session_progress(s, "deploy", 1, 1, "all objects submitted");
	session_start_waiting(s);
}

static void apply_agent_pod(struct up_session *s)
{
	char err[512];
	size_t n = json_array_size(s->objects);
	json_t *pod = json_array_get(s->objects, n - 1);

	if (session_fill_cluster_values(s, s->mitm_ip, s->ssh_agent_ip, err, sizeof(err)) < 0) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "%s", err);
		return;
	}
	s->t_submitted = uv_hrtime();
	if (session_apply(s, pod, on_agent_applied) < 0)
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "the deploy cluster is not available");
}

static void on_object_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *name =
		json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
	const char *ip =
		json_string_value(json_object_get(json_object_get(obj, "spec"), "clusterIP"));

	if (err) {
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "deploying the session failed: %s",
			     err->message);
		return;
	}
	/* The agent has no DNS: it reaches both Services by cluster IP (hostAliases). */
	if (kind && name && !strcmp(kind, "Service") && ip && !strcmp(name, "mitm"))
		(void)snprintf(s->mitm_ip, sizeof(s->mitm_ip), "%s", ip);
	else if (kind && name && !strcmp(kind, "Service") && ip &&
		 !strcmp(name, UP_MANIFEST_SSH_AGENT))
		(void)snprintf(s->ssh_agent_ip, sizeof(s->ssh_agent_ip), "%s", ip);
	if (--s->pending > 0)
		return;
	if (!s->mitm_ip[0]) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "the mitm Service has no cluster IP");
		return;
	}
	if (s->need_ssh_agent && !s->ssh_agent_ip[0]) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "the ssh-agent Service has no cluster IP");
		return;
	}
	apply_agent_pod(s);
}

static void on_namespace_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	size_t n = json_array_size(s->objects);

	(void)obj;
	if (err) {
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "creating namespace %s failed: %s",
			     s->ns, err->message);
		return;
	}
	/* Independent objects go together; the pods mount what the others create. */
	session_progress(s, "deploy", 0, 1, "applying %zu objects", n - 1);
	(void)session_apply_rest(s, s->objects, is_agent_pod, on_object_applied);
}

static int render(struct up_session *s, char *err, size_t len)
{
	json_t *rules = up_ruleset_render(s->rs, true);
	struct up_session_spec spec = {
		.id = s->id,
		.owner = s->owner,
		.created_at = (time_t)up_record_created_at(s->record),
		.expires_at = (time_t)up_record_expires_at(s->record),
		.cwd = s->o.cwd,
		.agent = s->o.agent,
		.mode = s->o.mode,
		.user = s->o.user,
		.home = s->o.home,
		.agent_image = s->image_ref,
		.mitm_image = s->o.mitm_image ? s->o.mitm_image : UP_DEFAULT_MITMPROXY_IMAGE,
		.agent_runtime_class = s->o.asked.agent_runtime_class,
		.mitm_runtime_class = s->o.asked.mitm_runtime_class,
		.ask = s->o.asked.ask,
		.rules = rules,
		.ca_cert_pem = s->ca->cert_pem,
		.ca_key_pem = s->ca->key_pem,
		.control_token = s->control_token,
		.extras = s->o.extra ? &s->o.extra->out : NULL,
		.asked = s->o.asked,
		.refuse_cidrs = session_ranges(s),
	};
	const struct up_agent_contrib *contrib = session_agent_contrib(s);
	int r;

	session_host_ids(&spec.uid, &spec.gid);
	if (!s->control_token[0] && up_control_token_new(s->control_token) < 0)
		spec.control_token = NULL; /* no listener: the Secret alone carries the rules */
	if (contrib)
		spec.contrib = *contrib;
	r = rules ? up_manifests_render(s->all->tpl, &spec, &s->objects, err, len) : -ENOMEM;
	json_decref(rules);
	/* The AWS map is in its Secret now; renewals export a new one (session-refresh.c). */
	if (r >= 0 && s->o.extra && s->o.extra->out.aws_creds_json) {
		up_free_secret(s->o.extra->out.aws_creds_json,
			       strlen(s->o.extra->out.aws_creds_json));
		s->o.extra->out.aws_creds_json = NULL;
	}
	return r;
}

void session_step_deploy(struct up_session *s)
{
	char err[1024];

	if (session_ranges_wait(s)) /* the cluster's Service ranges: session-ranges.c */
		return;
	if (render(s, err, sizeof(err)) < 0) {
		session_fail(s, UP_ERR_INTERNAL_ERROR, "cannot render the session's objects: %s",
			     err);
		return;
	}
	s->need_ssh_agent = s->o.extra && s->o.extra->out.ssh.n_keys > 0;
	if (s->o.asked.dry_run) {
		session_plan_answer(s); /* session-plan.c */
		return;
	}
	session_set_state(s, UP_SESSION_DEPLOYING, NULL);
	s->t_deploy = uv_hrtime();
	session_progress(s, "deploy", 0, 1, "creating namespace %s", s->ns);
	if (session_apply(s, json_array_get(s->objects, 0), on_namespace_applied) < 0)
		session_fail(s, UP_ERR_CLUSTER_UNREACHABLE, "the deploy cluster is not available");
}

/* ---- the session object ---- */

struct up_session *up_session_new(struct up_sessions *all, const char *id)
{
	struct up_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->all = all;
	s->ops = &up_session_kube_ops;
	(void)snprintf(s->id, sizeof(s->id), "%s", id);
	(void)snprintf(s->ns, sizeof(s->ns), "%s%s", UP_SESSION_NS_PREFIX, id);
	s->timer = up_loop_timer_new(all->loop, s);
	if (!s->timer) {
		free(s);
		return NULL;
	}
	up_list_insert_tail(&all->sessions, &s->link);
	return s;
}

struct up_session *up_session_free(struct up_session *s)
{
	if (!s)
		return NULL;
	up_session_audit_cancel(s);
	session_cancel_work(s);
	if (s->in_work) {
		s->freeing = true; /* prepare_after() comes back to free */
		return NULL;
	}
	up_list_remove(&s->link);
	session_life_free(s);
	session_refresh_free(s);
	up_control_push_free(s);
	up_approvals_stop(s);
	explicit_bzero(s->control_token, sizeof(s->control_token));
	s->timer = up_loop_timer_free(s->timer);
	session_agent_free(s);
	up_ruleset_free(s->rs);
	json_decref(s->approved);
	up_ca_free(s->ca);
	json_decref(s->problems);
	json_decref(s->warnings);
	free(s->server_ca);
	json_decref(s->objects);
	json_decref(s->system);
	json_decref(s->plan);
	json_decref(s->record);
	free(s->image_ref);
	free(s->prep_error);
	up_session_opts_done(&s->o);
	free(s);
	return NULL;
}

json_t *up_session_describe(const struct up_session *s)
{
	int code;
	json_t *d =
		json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}", "id", s->id, "namespace", s->ns,
			  "state", up_session_state_to_name(s->state), "agent",
			  s->o.agent ? s->o.agent : up_record_agent(s->record), "cwd",
			  s->o.cwd ? s->o.cwd : up_record_cwd(s->record), "mode",
			  s->o.mode ? s->o.mode : (s->record ? up_record_mode(s->record) : NULL),
			  "image", s->image_ref);

	(void)json_object_set_new(d, "attached", json_integer(s->attached));
	if (s->record) {
		(void)json_object_set_new(d, "created_at",
					  json_integer(up_record_created_at(s->record)));
		(void)json_object_set_new(d, "idle_timeout",
					  json_integer(up_record_idle_timeout(s->record)));
		(void)json_object_set_new(d, "expires_at",
					  json_integer(up_record_expires_at(s->record)));
		if (*up_record_reason(s->record))
			(void)json_object_set_new(d, "reason",
						  json_string(up_record_reason(s->record)));
		if (up_record_exit_code(s->record, &code))
			(void)json_object_set_new(d, "exit_code", json_integer(code));
	}
	if (s->t_submitted)
		/* The daemon's own share of a start: no image build, no pod start-up in it. */
		(void)json_object_set_new(
			d, "timings_ms",
			json_pack("{s:f, s:f, s:f}", "prepare",
				  (double)(s->t_deploy - s->t_start) / 1e6, "deploy",
				  (double)(s->t_submitted - s->t_deploy) / 1e6, "to_last_object",
				  (double)(s->t_submitted - s->t_start) / 1e6));
	return d;
}

/* ---- shutting down ---- */

void up_session_cancel_work(struct up_session *s)
{
	up_session_audit_cancel(s);
	session_cancel_work(s);
	session_life_free(s);
	session_refresh_free(s);
	/* their calls use the cluster's kube client, which shutdown frees next */
	up_control_push_free(s);
	up_approvals_stop(s);
	/* Shutting down: the loop must be able to finish, so the timer goes now. */
	s->timer = up_loop_timer_free(s->timer);
}
