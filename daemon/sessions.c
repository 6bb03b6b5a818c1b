/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The session registry: records loaded at start-up, the deploy clusters (one per
 * context in use), and the link from every namespace and pod change to its session.
 * After a restart it settles what the last run left: sessions caught starting are
 * failed and torn down, ended ones still holding a namespace lose it, and a namespace
 * we own with no record at all is an orphan and is deleted.
 */
#include <errno.h>
#include <pwd.h>
#include <systemd/sd-daemon.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "cluster.h"
#include "http.h"
#include "knobs.h"
#include "kube-exec-credential.h"
#include "kube.h"
#include "log.h"
#include "manifests.h"
#include "rpc.h"
#include "session-private.h"
#include "store.h"

struct up_session *up_sessions_find(struct up_sessions *all, const char *key)
{
	struct up_list *pos, *tmp;

	if (!key)
		return NULL;
	up_list_for_each_safe (pos, tmp, &all->sessions) {
		struct up_session *s = up_container_of(pos, struct up_session, link);
		if (!strcmp(s->id, key) || !strcmp(s->ns, key))
			return s;
	}
	return NULL;
}

struct up_cluster *up_sessions_cluster(struct up_sessions *all, const char *context)
{
	const char *key = context ? context : "";
	json_t *entry = json_object_get(all->clusters, key);
	struct up_cluster **pc;

	if (entry)
		return ((struct up_cluster **)(uintptr_t)json_integer_value(entry))[0];
	if (all->closing)
		return NULL;
	/* [0] the cluster, [1] the registry: what the listener needs. */
	pc = calloc(2, sizeof(*pc));
	if (!pc || up_cluster_new(all->loop, NULL, context ? context : up_knobs()->deploy_context,
				  &pc[0]) < 0) {
		free(pc);
		return NULL;
	}
	pc[1] = (struct up_cluster *)(void *)all;
	up_cluster_set_listener(pc[0], reaper_on_cluster_event, pc);
	(void)json_object_set_new(all->clusters, key, json_integer((json_int_t)(uintptr_t)pc));
	return pc[0];
}

/* A session.* request that came before the records were loaded: answered once they are. */
struct deferred {
	struct up_list link; /* up_sessions::deferred */
	struct up_request *req;
	void *params;
	up_method_fn fn;
	void *userdata;
};

static void deferred_cancel(struct up_request *req, void *ud)
{
	struct deferred *d = ud;

	(void)req;
	up_list_remove(&d->link);
	free(d);
}

int up_sessions_defer(struct up_sessions *all, struct up_request *req, void *params,
		      up_method_fn fn, void *userdata)
{
	struct deferred *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	*d = (struct deferred){.req = req, .params = params, .fn = fn, .userdata = userdata};
	up_list_insert_tail(&all->deferred, &d->link);
	up_request_set_cancel(req, deferred_cancel, d);
	return 0;
}

bool up_sessions_loaded(const struct up_sessions *all)
{
	return all->loaded;
}

static void replay_deferred(struct up_sessions *all)
{
	struct up_list *pos, *tmp;

	all->loaded = true;
	up_list_for_each_safe (pos, tmp, &all->deferred) {
		struct deferred *d = up_container_of(pos, struct deferred, link);
		struct up_request *req = d->req;

		up_list_remove(&d->link);
		up_request_set_cancel(req, NULL, NULL);
		if (d->fn(req, d->params, d->userdata) < 0)
			up_request_error(req, UP_ERR_INTERNAL_ERROR, NULL);
		free(d);
	}
}

static void on_records(int r, const char *err, json_t *result, void *ud)
{
	struct up_sessions *all = ud;
	json_t *records = json_object_get(result, "records"),
	       *problems = json_object_get(result, "problems");
	json_t *rec, *p;
	const char *id;
	size_t i;

	if (r < 0) {
		log_error("Cannot load the session records: %s", err);
		replay_deferred(all);
		return;
	}
	json_array_foreach (problems, i, p)
		log_warning("Session records: %s: %s",
			    json_string_value(json_object_get(p, "file")),
			    json_string_value(json_object_get(p, "problem")));
	json_object_foreach (records, id, rec) {
		struct up_session *s;
		const char *ctx = up_record_deploy_context(rec);

		if (all->closing || up_sessions_find(all, id))
			continue;
		s = up_session_new(all, id);
		if (!s)
			continue;
		s->record = json_incref(rec);
		s->state = up_record_state(rec);
		s->o.quiet = up_record_quiet(rec);
		s->o.asked.ask = up_record_ask(rec); /* its token comes back from the Secret */
		s->cluster = up_sessions_cluster(all, *ctx ? ctx : NULL);
		(void)snprintf(s->owner, sizeof(s->owner), "%s", all->owner);
		up_session_adopt(s);
	}
	/* The clusters that were already ready reconcile now; the others when they are. */
	reaper_reconcile_ready(all);
	replay_deferred(all);
}

static void pruned(int r, const char *err, json_t *removed, void *ud)
{
	struct up_sessions *all = ud;
	size_t i;
	json_t *id;

	if (r < 0) {
		log_warning("Cannot prune old session records: %s, ignoring", err);
		return;
	}
	json_array_foreach (removed, i, id) {
		struct up_session *s = up_sessions_find(all, json_string_value(id));
		if (s && s->state == UP_SESSION_GONE)
			up_session_free(s);
	}
}

/* Ended sessions are kept (list --all, logs) for UP_RECORD_RETENTION_S, then forgotten. */
static void prune(struct up_sessions *all)
{
	if (up_store_prune_async(all->loop, all->store, (int64_t)time(NULL), UP_RECORD_RETENTION_S,
				 pruned, all) < 0)
		log_warning("Cannot prune old session records, ignoring");
}

static void on_resync(uv_timer_t *t)
{
	struct up_sessions *all = t->data;

	prune(all);
	/* Whatever a failed delete or a missed event left behind is settled here. */
	reaper_reconcile_ready(all);
}

static void resync_closed(uv_handle_t *h)
{
	free(h);
}

int up_sessions_new(struct up_manager *m, uv_loop_t *loop, struct up_sessions **ret)
{
	struct up_sessions *all = calloc(1, sizeof(*all));
	struct passwd *pw = getpwuid(getuid());
	int r;

	if (!all)
		return -ENOMEM;
	all->m = m;
	all->loop = loop;
	up_list_init(&all->sessions);
	up_list_init(&all->deferred);
	all->clusters = json_object();
	(void)snprintf(all->user, sizeof(all->user), "%s", pw ? pw->pw_name : "user");
	(void)snprintf(all->home, sizeof(all->home), "%s",
		       up_knobs()->home ? up_knobs()->home
		       : pw		? pw->pw_dir
					: "/");
	r = up_owner_hash(up_knobs()->machine_id_file, getuid(), all->owner);
	if (r < 0)
		log_warning_errno(r,
				  "Cannot read /etc/machine-id for the owner label; namespaces "
				  "will carry uid %u only, ignoring",
				  (unsigned)getuid());
	if (r < 0)
		(void)snprintf(all->owner, sizeof(all->owner), "uid%u", (unsigned)getuid());
	r = up_store_new(NULL, &all->store);
	if (r >= 0)
		r = up_http_new(loop, &all->http);
	if (r < 0) {
		up_sessions_free(all);
		return r;
	}
	if (up_manifests_load(NULL, &all->tpl, all->tpl_error, sizeof(all->tpl_error)) < 0)
		log_warning("Sessions cannot start: %s", all->tpl_error);
	(void)up_sessions_cluster(all, NULL);
	all->resync = malloc(sizeof(*all->resync));
	if (all->resync) {
		const char *env = up_knobs()->resync_s; /* tests shorten it */
		long every = env ? strtol(env, NULL, 10) : 0;
		uint64_t ms = (uint64_t)(every > 0 ? every : UP_RESYNC_S) * 1000;
		(void)uv_timer_init(loop, all->resync);
		all->resync->data = all;
		(void)uv_timer_start(all->resync, on_resync, ms, ms);
	}
	r = up_store_load_async(loop, all->store, (int64_t)time(NULL), on_records, all);
	if (r < 0) {
		log_warning_errno(r, "Cannot load the session records, ignoring");
		all->loaded = true;
	}
	prune(all);
	*ret = all;
	return 0;
}

void up_sessions_shutdown(struct up_sessions *all)
{
	struct up_list *pos, *tmp;
	const char *key;
	json_t *entry;

	if (!all || all->closing)
		return;
	all->closing = true;
	if (all->resync) {
		uv_close((uv_handle_t *)all->resync, resync_closed);
		all->resync = NULL;
	}
	up_list_for_each_safe (pos, tmp, &all->sessions)
		up_session_cancel_work(up_container_of(pos, struct up_session, link));
	json_object_foreach (all->clusters, key, entry) {
		struct up_cluster **pc = (struct up_cluster **)(uintptr_t)json_integer_value(entry);
		up_cluster_free(pc[0]);
		free(pc);
	}
	json_object_clear(all->clusters);
	up_http_free(all->http);
	all->http = NULL;
}

struct up_sessions *up_sessions_free(struct up_sessions *all)
{
	struct up_list *pos, *tmp;

	if (!all)
		return NULL;
	up_sessions_shutdown(all);
	up_list_for_each_safe (pos, tmp, &all->sessions)
		up_session_free(up_container_of(pos, struct up_session, link));
	json_decref(all->clusters);
	up_manifests_free(all->tpl);
	up_store_free(all->store);
	free(all);
	return NULL;
}

void up_sessions_status(const struct up_sessions *all)
{
	json_t *c = up_sessions_counts(all);
	json_int_t running = json_integer_value(json_object_get(c, "running"));
	json_int_t starting = json_integer_value(json_object_get(c, "starting"));

	/* systemctl --user status uplinkd shows this line. */
	if (starting)
		(void)sd_notifyf(0, "STATUS=%lld session%s running, %lld starting",
				 (long long)running, running == 1 ? "" : "s", (long long)starting);
	else
		(void)sd_notifyf(0, "STATUS=%lld session%s running", (long long)running,
				 running == 1 ? "" : "s");
	json_decref(c);
}

json_t *up_sessions_counts(const struct up_sessions *all)
{
	json_int_t running = 0, starting = 0, ended = 0;
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, (struct up_list *)&all->sessions) {
		struct up_session *s = up_container_of(pos, struct up_session, link);
		if (s->state == UP_SESSION_RUNNING)
			running++;
		else if (up_session_state_is_starting(s->state))
			starting++;
		else
			ended++;
	}
	return json_pack("{s:I, s:I, s:I}", "running", running, "starting", starting, "ended",
			 ended);
}

/*
 * A namespace with managed-by=agent-uplink that is not ours (the Python tool's, another
 * user's), described field by field: the same table gives session.list's objects and rows.
 */
static json_t *foreign_id(json_t *meta, json_t *ns)
{
	const char *name = json_string_value(json_object_get(meta, "name"));

	(void)ns;
	return json_string(name + strlen(UP_SESSION_NS_PREFIX)); /* foreign_session() checked it */
}

static json_t *foreign_namespace(json_t *meta, json_t *ns)
{
	(void)ns;
	return json_incref(json_object_get(meta, "name"));
}

static json_t *foreign_state(json_t *meta, json_t *ns)
{
	const char *phase =
		json_string_value(json_object_get(json_object_get(ns, "status"), "phase"));

	(void)meta;
	return json_string(phase && !strcmp(phase, "Terminating") ? "TERMINATING" : "FOREIGN");
}

static json_t *annotation(json_t *meta, const char *key)
{
	json_t *v = json_object_get(json_object_get(meta, "annotations"), key);

	return json_is_string(v) ? json_incref(v) : NULL;
}

static json_t *foreign_agent(json_t *meta, json_t *ns)
{
	(void)ns;
	return annotation(meta, UP_ANNOT_AGENT);
}

static json_t *foreign_cwd(json_t *meta, json_t *ns)
{
	(void)ns;
	return annotation(meta, UP_ANNOT_CWD);
}

static json_t *foreign_created(json_t *meta, json_t *ns)
{
	const char *created = json_string_value(json_object_get(meta, "creationTimestamp"));
	int64_t ms = 0;

	(void)ns;
	return created && up_parse_rfc3339(created, &ms) == 0 ? json_integer(ms / 1000) : NULL;
}

static json_t *foreign_true(json_t *meta, json_t *ns)
{
	(void)meta;
	(void)ns;
	return json_true();
}

static json_t *foreign_zero(json_t *meta, json_t *ns)
{
	(void)meta;
	(void)ns;
	return json_integer(0);
}

static const struct {
	const char *name;
	json_t *(*get)(json_t *meta, json_t *ns); /* NULL: the field is absent */
} foreign_fields[] = {
	{"id", foreign_id},	    {"namespace", foreign_namespace},
	{"state", foreign_state},   {"agent", foreign_agent},
	{"cwd", foreign_cwd},	    {"foreign", foreign_true},
	{"attached", foreign_zero}, {"created_at", foreign_created},
};

/* The index in foreign_fields of each column (-1: foreign sessions lack it), looked up once. */
static void foreign_columns(const json_t *columns, int *idx)
{
	json_t *col;
	size_t i;

	json_array_foreach (columns, i, col) {
		idx[i] = -1;
		for (size_t f = 0; f < ELEMENTSOF(foreign_fields); f++)
			if (!strcmp(foreign_fields[f].name, json_string_value(col)))
				idx[i] = (int)f;
	}
}

static json_t *describe_foreign(json_t *ns)
{
	json_t *d = json_object();

	for (size_t i = 0; d && i < ELEMENTSOF(foreign_fields); i++) {
		json_t *v = foreign_fields[i].get(json_object_get(ns, "metadata"), ns);
		if (v)
			(void)json_object_set_new(d, foreign_fields[i].name, v);
	}
	return d;
}

/* Our session as a row: the values of `columns` in their order, null for what it lacks. */
static json_t *row_of(json_t *obj, const json_t *columns)
{
	json_t *row = json_array(), *col;
	size_t i;

	json_array_foreach (columns, i, col) {
		json_t *v = json_object_get(obj, json_string_value(col));
		(void)json_array_append_new(row, v ? json_incref(v) : json_null());
	}
	json_decref(obj);
	return row;
}

/* A foreign session as a row; idx from foreign_columns(). */
static json_t *foreign_row(json_t *ns, const int *idx, size_t n)
{
	json_t *row = json_array(), *meta = json_object_get(ns, "metadata");

	for (size_t i = 0; i < n; i++) {
		json_t *v = idx[i] >= 0 ? foreign_fields[idx[i]].get(meta, ns) : NULL;
		(void)json_array_append_new(row, v ? v : json_null());
	}
	return row;
}

/* agent-uplink-<id> with managed-by=agent-uplink (the watch's selector), not ours by its owner
 * label. */
static bool foreign_session(struct up_sessions *all, const char *name, json_t *ns, bool ended_too)
{
	const char *owner = json_string_value(json_object_get(
		json_object_get(json_object_get(ns, "metadata"), "labels"), UP_LABEL_OWNER));
	const char *phase =
		json_string_value(json_object_get(json_object_get(ns, "status"), "phase"));
	size_t n = strlen(UP_SESSION_NS_PREFIX);

	if (strncmp(name, UP_SESSION_NS_PREFIX, n) != 0 || !name[n] ||
	    !strcmp(name, UP_SYSTEM_NAMESPACE))
		return false;
	if ((owner && !strcmp(owner, all->owner)) || up_sessions_find(all, name))
		return false;
	return ended_too || !phase || strcmp(phase, "Terminating") != 0;
}

const char *up_sessions_list_column_check(const json_t *columns)
{
	static const char *const ours_too[] = {"expires_at", "idle_timeout", "mode",
					       "image",	     "reason",	     "exit_code"};
	json_t *col;
	size_t i;

	json_array_foreach (columns, i, col) {
		const char *name = json_string_value(col);
		bool known = false;
		for (size_t f = 0; f < ELEMENTSOF(foreign_fields) && !known; f++)
			known = !strcmp(name, foreign_fields[f].name);
		for (size_t f = 0; f < ELEMENTSOF(ours_too) && !known; f++)
			known = !strcmp(name, ours_too[f]);
		if (!known)
			return name;
	}
	return NULL;
}

json_t *up_sessions_list(struct up_sessions *all, bool all_sessions, const json_t *columns)
{
	struct up_cluster *c = up_sessions_cluster(all, NULL);
	struct up_kube_watch *nsw = c ? up_cluster_namespaces(c) : NULL;
	json_t *out = json_array(), *ns;
	size_t ncols = json_array_size(columns);
	int idx[UP_MAX_LIST_COLUMNS] = {0}; /* foreign_columns() sets one per column */
	struct up_list *pos, *tmp;
	const char *key;

	if (ncols > UP_MAX_LIST_COLUMNS) /* session.list refuses them */
		return out;
	foreign_columns(columns, idx);
	up_list_for_each_safe (pos, tmp, &all->sessions) {
		struct up_session *s = up_container_of(pos, struct up_session, link);
		if (all_sessions || !up_session_state_is_terminal(s->state) ||
		    s->state == UP_SESSION_TEARDOWN) {
			json_t *d = up_session_describe(s);
			(void)json_array_append_new(out, columns ? row_of(d, columns) : d);
		}
	}
	/* From the watch cache, no round trip: live foreign sessions always, ending ones with
	 * --all. */
	json_object_foreach (nsw ? up_kube_watch_cache(nsw) : NULL, key, ns) {
		if (foreign_session(all, key, ns, all_sessions))
			(void)json_array_append_new(out, columns ? foreign_row(ns, idx, ncols)
								 : describe_foreign(ns));
	}
	return out;
}

/* ---- what the RPC files may read of a session and of the registry ---- */

const char *up_session_id(const struct up_session *s)
{
	return s->id;
}

const char *up_session_namespace(const struct up_session *s)
{
	return s->ns;
}

enum up_session_state up_session_get_state(const struct up_session *s)
{
	return s->state;
}

struct up_cluster *up_session_cluster(const struct up_session *s)
{
	return s->cluster;
}

int64_t up_session_created_at(const struct up_session *s)
{
	return s->record ? up_record_created_at(s->record) : 0;
}

struct up_session *up_sessions_next(struct up_sessions *all, struct up_session *prev)
{
	struct up_list *next = prev ? prev->link.next : all->sessions.next;

	return next == &all->sessions ? NULL : up_container_of(next, struct up_session, link);
}

uv_loop_t *up_sessions_loop(const struct up_sessions *all)
{
	return all->loop;
}

const char *up_sessions_home(const struct up_sessions *all)
{
	return all->home;
}

const char *up_sessions_user(const struct up_sessions *all)
{
	return all->user;
}

const char *up_sessions_templates_error(const struct up_sessions *all)
{
	return all->tpl ? NULL : all->tpl_error;
}

/* ---- a new session ---- */

/* A field of struct up_session_asked freed, by its type in session-options.h. */
#define ASKED_FREE_BOOL(key)
#define ASKED_FREE_STRING(key)	 free(a->key);
#define ASKED_FREE_DURATION(key) free(a->key);
#define ASKED_FREE_PATH(key)	 free(a->key);
#define ASKED_FREE_PATHS(key)	 json_decref(a->key);
#define ASKED_FREE_RULES(key)	 json_decref(a->key);
#define ASKED_FREE_WORDS(key)	 json_decref(a->key);
#define ASKED_FREE_ARGS(key)	 json_decref(a->key);
#define ASKED_FREE_SPLIT(key)	 json_decref(a->key);
#define ASKED_FREE_MODE(key)
#define ASKED_FREE_LOCAL(key)

void up_session_asked_done(struct up_session_asked *a)
{
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(ASKED_FREE_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
	*a = (struct up_session_asked){0};
}

void up_session_opts_done(struct up_session_opts *o)
{
	char **strs[] = {&o->agent, &o->mode,	  &o->cwd,  &o->mitm_image, &o->registry_image,
			 &o->image, &o->registry, &o->user, &o->home};

	for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	up_session_asked_done(&o->asked);
	o->extra = up_session_extra_free(o->extra);
}

int up_sessions_start(struct up_sessions *all, struct up_session_opts *o,
		      const struct up_session_observer *obs, void *starter, struct up_session **ret)
{
	char id[UP_SESSION_ID_LEN + 1];
	struct up_session *s;
	int r = up_session_id_new(id);

	s = r >= 0 ? up_session_new(all, id) : NULL;
	if (!s) {
		up_session_opts_done(o);
		return r < 0 ? r : -ENOMEM;
	}
	s->o = *o;
	*o = (struct up_session_opts){0};
	(void)snprintf(s->owner, sizeof(s->owner), "%s", all->owner);
	s->cluster = up_sessions_cluster(all, s->o.asked.deploy_context);
	r = up_session_begin(s, obs, starter);
	if (r < 0) {
		up_session_free(s);
		return r;
	}
	*ret = s;
	return 0;
}
