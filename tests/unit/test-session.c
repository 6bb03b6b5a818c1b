/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One session driven through its states on a real loop, in milliseconds: a fake cluster
 * (struct up_session_cluster_ops) answers the calls on the next turn of the loop, a fake
 * observer records what the starting client would have heard, and the test plays the pod
 * and namespace watches. Every move of session-state.c's table is taken at least once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca.h"
#include "harness.h"
#include "image.h"
#include "kube.h"
#include "manifests.h"
#include "rules.h"
#include "session-private.h"
#include "store.h"

#define MANIFESTS UP_TEST_DATA_DIR "/../../manifests"

/* ---- the fake cluster ---- */

enum { F_APPLY, F_GET, F_DELETE };

struct fcall {
	int kind;
	json_t *obj;
	char path[256];
	up_session_call_cb cb;
	void *ud;
	bool cancelled;
	struct fcall *next;
};

static struct fake {
	uv_timer_t timer;
	struct fcall *queue;
	const char *fail_apply; /* kind/name of the object whose apply fails, e.g. "Pod/agent" */
	bool hold;		/* answer nothing until cleared */
	bool delete_not_found;	/* a delete answers "not found": gone at once */
	int image_r;		/* what the image job answers */
	bool hold_image;	/* the image job never answers */
	unsigned applies, deletes, audits, prepares, images;
	const char *prep_error; /* the prepare hook fails with this */
	const char *prep_warning;
} fake;

static bool obj_is(json_t *obj, const char *kind_name)
{
	char buf[160];
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *name =
		json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

	(void)snprintf(buf, sizeof(buf), "%s/%s", kind ? kind : "", name ? name : "");
	return kind_name && !strcmp(buf, kind_name);
}

static void answer(struct fcall *c)
{
	struct up_kube_error e = {.r = -EIO, .code = 500};
	json_t *o = c->obj;

	(void)snprintf(e.message, sizeof(e.message), "the fake cluster refuses %s", c->path);
	if (c->kind == F_APPLY && obj_is(o, fake.fail_apply)) {
		c->cb(&e, NULL, c->ud);
		return;
	}
	if (c->kind == F_APPLY && !strcmp(json_string_value(json_object_get(o, "kind")), "Service"))
		(void)json_object_set_new(json_object_get(o, "spec"), "clusterIP",
					  json_string("10.0.0.7"));
	if (c->kind == F_GET) /* Events: an empty list */
		o = json_pack("{s:[]}", "items");
	if (c->kind == F_DELETE)
		o = fake.delete_not_found ? NULL : json_pack("{s:s}", "kind", "Namespace");
	c->cb(NULL, o, c->ud);
	if (o != c->obj)
		json_decref(o);
}

static void on_fake_timer(uv_timer_t *t)
{
	(void)t;
	while (!fake.hold && fake.queue) {
		struct fcall *c = fake.queue;
		fake.queue = c->next;
		if (!c->cancelled)
			answer(c);
		json_decref(c->obj);
		free(c);
	}
}

static int fake_call(int kind, json_t *obj, const char *path, up_session_call_cb cb, void *ud,
		     void **call)
{
	struct fcall *c = calloc(1, sizeof(*c)), **tail = &fake.queue;

	assert_non_null(c);
	c->kind = kind;
	c->obj = obj ? json_incref(obj) : NULL;
	(void)snprintf(c->path, sizeof(c->path), "%s", path ? path : "");
	c->cb = cb;
	c->ud = ud;
	while (*tail)
		tail = &(*tail)->next;
	*tail = c;
	*call = c;
	assert_int_equal(uv_timer_start(&fake.timer, on_fake_timer, 0, 0), 0);
	return 0;
}

static int f_apply(struct up_session *s, json_t *obj, up_session_call_cb cb, void *ud, void **call)
{
	(void)s;
	fake.applies++;
	return fake_call(F_APPLY, obj, NULL, cb, ud, call);
}

static int f_get(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		 void **call)
{
	(void)s;
	return fake_call(F_GET, NULL, path, cb, ud, call);
}

static int f_delete(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		    void **call)
{
	(void)s;
	fake.deletes++;
	return fake_call(F_DELETE, NULL, path, cb, ud, call);
}

static void f_cancel(void *call)
{
	((struct fcall *)call)->cancelled = true;
}

/* The pod watch's cache is empty (the test plays the events) and there is no context. */
static json_t *f_pod(const struct up_session *s, const char *name)
{
	return (void)s, (void)name, NULL;
}

static const struct up_kube_context *f_context(const struct up_session *s)
{
	return (void)s, NULL;
}

struct fimage {
	uv_timer_t timer;
	void (*done)(const struct up_image_result *res, void *ud);
	void *ud;
	bool cancelled;
};

static void fimage_closed(uv_handle_t *h)
{
	free(h);
}

static void on_fimage(uv_timer_t *t)
{
	struct fimage *j = t->data;
	struct up_image_result res = {.r = fake.image_r,
				      .e = UP_ERR_IMAGE_BUILD_FAILED,
				      .ref = "localhost:5000/uplink/claude:ctx-0123456789abcdef",
				      .error = "docker build failed (fake)"};

	if (!j->cancelled)
		j->done(&res, j->ud);
	uv_close((uv_handle_t *)&j->timer, fimage_closed);
}

static int f_image(struct up_session *s, const struct up_image_request *req,
		   void (*progress)(const struct up_image_progress *p, void *ud),
		   void (*done)(const struct up_image_result *res, void *ud), void *ud, void **job)
{
	struct fimage *j = calloc(1, sizeof(*j));
	struct up_image_progress p = {.phase = "build", .message = "step 1/1 (fake)"};

	assert_non_null(j);
	assert_non_null(req->repository);
	fake.images++;
	j->done = done;
	j->ud = ud;
	j->timer.data = j;
	assert_int_equal(uv_timer_init(s->all->loop, &j->timer), 0);
	if (!fake.hold_image)
		assert_int_equal(uv_timer_start(&j->timer, on_fimage, 0, 0), 0);
	progress(&p, ud);
	*job = j;
	return 0;
}

static void f_image_cancel(void *job)
{
	struct fimage *j = job;

	if (uv_is_active((uv_handle_t *)&j->timer))
		j->cancelled = true; /* on_fimage closes it */
	else
		uv_close((uv_handle_t *)&j->timer, fimage_closed);
}

static void f_audit_start(struct up_session *s)
{
	(void)s;
	fake.audits++;
}

/* The trivial agent: the defaults' rules, a CA, and what the test asks for. */
static void f_prepare(struct up_session *s)
{
	char err[256];

	fake.prepares++;
	if (fake.prep_warning)
		(void)json_array_append_new(s->warnings, json_string(fake.prep_warning));
	if (fake.prep_error) {
		s->prep_e = UP_ERR_PREREQ_MISSING;
		s->prep_error = strdup(fake.prep_error);
		return;
	}
	assert_int_equal(up_ruleset_finish(s->rs, false, s->problems), 0);
	assert_int_equal(up_ca_new(s->id, session_now(), up_record_expires_at(s->record), &s->ca,
				   err, sizeof(err)),
			 0);
}

static const struct up_session_cluster_ops fake_ops = {
	.apply = f_apply,
	.get = f_get,
	.delete = f_delete,
	.cancel = f_cancel,
	.pod = f_pod,
	.context = f_context,
	.image = f_image,
	.image_cancel = f_image_cancel,
	.audit_start = f_audit_start,
	.prepare = f_prepare,
};

/* ---- the fake observer: what the starting client heard, one line each ---- */

static struct heard {
	json_t *states;	  /* "OLD>NEW" */
	json_t *progress; /* phases */
	json_t *answer;	  /* the reply's result, or {"error": code, "message": ...} */
	unsigned answers;
} heard;

static void o_progress(void *starter, json_t *params)
{
	assert_ptr_equal(starter, &heard);
	(void)json_array_append(heard.progress, json_object_get(params, "phase"));
	json_decref(params);
}

static void o_state(void *starter, json_t *params)
{
	char buf[64];

	assert_ptr_equal(starter, &heard);
	(void)snprintf(buf, sizeof(buf), "%s>%s", json_string_value(json_object_get(params, "old")),
		       json_string_value(json_object_get(params, "new")));
	(void)json_array_append_new(heard.states, json_string(buf));
	json_decref(params);
}

static void o_reply(void *starter, json_t *result)
{
	assert_ptr_equal(starter, &heard);
	heard.answers++;
	json_decref(heard.answer);
	heard.answer = result;
}

static void o_error(void *starter, enum up_error e, const char *msg)
{
	assert_ptr_equal(starter, &heard);
	heard.answers++;
	json_decref(heard.answer);
	heard.answer = json_pack("{s:i, s:s}", "error", (int)e, "message", msg ? msg : "");
}

static const struct up_session_observer observer = {
	.progress = o_progress,
	.state = o_state,
	.reply = o_reply,
	.error = o_error,
};

/* ---- the world: a loop, a store in a temporary folder, the templates ---- */

struct world {
	struct harness h;
	struct up_sessions all;
	char dir[64];
	struct up_session *s;
	uv_timer_t guard;
	bool late;
};

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	char err[512];

	assert_non_null(w);
	harness_init(&w->h, NULL, NULL);
	(void)snprintf(w->dir, sizeof(w->dir), "/tmp/uplink-test-session-XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	w->all.loop = &w->h.loop;
	assert_int_equal(up_store_new(w->dir, &w->all.store), 0);
	assert_int_equal(up_manifests_load(MANIFESTS, &w->all.tpl, err, sizeof(err)), 0);
	up_list_init(&w->all.sessions);
	up_list_init(&w->all.deferred);
	(void)snprintf(w->all.owner, sizeof(w->all.owner), "0123456789abcdef");
	(void)snprintf(w->all.user, sizeof(w->all.user), "tester");
	(void)snprintf(w->all.home, sizeof(w->all.home), "/home/tester");
	memset(&fake, 0, sizeof(fake));
	assert_int_equal(uv_timer_init(&w->h.loop, &fake.timer), 0);
	heard = (struct heard){.states = json_array(), .progress = json_array()};
	assert_int_equal(uv_timer_init(&w->h.loop, &w->guard), 0);
	w->guard.data = &w->late;
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	char cmd[128];

	up_session_free(w->s);	    /* a session still in its worker frees itself after it */
	on_fake_timer(&fake.timer); /* the calls it cancelled */
	uv_close((uv_handle_t *)&fake.timer, NULL);
	uv_close((uv_handle_t *)&w->guard, NULL);
	harness_done(&w->h); /* every handle closed, the pool's jobs back */
	assert_null(fake.queue);
	up_manifests_free(w->all.tpl);
	up_store_free(w->all.store);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", w->dir);
	assert_int_equal(system(cmd), 0);
	json_decref(heard.states);
	json_decref(heard.progress);
	json_decref(heard.answer);
	free(w);
	return 0;
}

/* A session of agent claude; `image` skips BUILDING, else the registry is `registry`. */
static struct up_session *start(struct world *w, const char *image)
{
	struct up_session *s = up_session_new(&w->all, "0123456789ab");

	assert_non_null(s);
	s->ops = &fake_ops;
	s->o.agent = strdup("claude");
	s->o.cwd = strdup("/home/tester/project");
	s->o.user = strdup("tester");
	s->o.home = strdup("/home/tester");
	s->o.asked.rules = json_array();
	s->o.asked.args = json_array();
	s->o.quiet = true;
	s->o.ttl_s = 3600;
	s->o.image = image ? strdup(image) : NULL;
	s->o.registry = image ? NULL : strdup("localhost:5000");
	(void)snprintf(s->owner, sizeof(s->owner), "%s", w->all.owner);
	w->s = s;
	assert_int_equal(up_session_begin(s, &observer, &heard), 0);
	return s;
}

static void on_guard(uv_timer_t *t)
{
	*(bool *)t->data = true;
}

/* Runs the loop until the session is in `to` (and nothing is left to answer then). */
static void run_to(struct world *w, enum up_session_state to)
{
	w->late = false;
	assert_int_equal(uv_timer_start(&w->guard, on_guard, 5000, 0), 0);
	while (w->s->state != to && !w->late)
		(void)uv_run(&w->h.loop, UV_RUN_ONCE);
	(void)uv_timer_stop(&w->guard);
	if (w->s->state != to)
		fail_msg("session is %s, not %s", up_session_state_to_name(w->s->state),
			 up_session_state_to_name(to));
}

/* Runs the loop until the fake cluster has answered every call. */
static void settle(struct world *w)
{
	w->late = false;
	assert_int_equal(uv_timer_start(&w->guard, on_guard, 5000, 0), 0);
	while (fake.queue && !w->late)
		(void)uv_run(&w->h.loop, UV_RUN_ONCE);
	(void)uv_timer_stop(&w->guard);
	assert_null(fake.queue);
}

static json_t *pod(const char *name, bool ready)
{
	return json_pack("{s:{s:s}, s:{s:s, s:[{s:s, s:s}]}}", "metadata", "name", name, "status",
			 "phase", "Running", "conditions", "type", "Ready", "status",
			 ready ? "True" : "False");
}

static void pod_event(struct up_session *s, enum up_watch_event ev, json_t *p)
{
	up_session_on_pod(s, ev, p);
	json_decref(p);
}

static json_t *agent_exited(int code)
{
	return json_pack("{s:{s:s}, s:{s:[{s:s, s:{s:{s:i, s:s}}}]}}", "metadata", "name", "agent",
			 "status", "containerStatuses", "name", "main", "state", "terminated",
			 "exitCode", code, "reason", "Error");
}

static void namespace_deleted(struct up_session *s)
{
	json_t *ns = json_pack("{s:{s:s}}", "metadata", "name", s->ns);

	up_session_on_namespace(s, UP_WATCH_DELETED, ns);
	json_decref(ns);
}

/* Both pods Ready: STARTING -> RUNNING. */
static void pods_ready(struct world *w)
{
	pod_event(w->s, UP_WATCH_MODIFIED, pod("mitm", true));
	assert_int_equal(w->s->state, UP_SESSION_STARTING);
	pod_event(w->s, UP_WATCH_MODIFIED, pod("agent", true));
	run_to(w, UP_SESSION_RUNNING);
}

/* What the observer heard, as one string: "A>B,B>C". */
static void assert_heard_states(const char *want)
{
	char got[512] = "";
	json_t *v;
	size_t i;

	json_array_foreach (heard.states, i, v)
		(void)snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "",
			       json_string_value(v));
	assert_string_equal(got, want);
}

static void assert_heard_error(enum up_error e, const char *part)
{
	assert_int_equal(heard.answers, 1);
	assert_int_equal(json_integer_value(json_object_get(heard.answer, "error")), e);
	assert_non_null(strstr(json_string_value(json_object_get(heard.answer, "message")), part));
}

static bool heard_progress(const char *phase)
{
	json_t *v;
	size_t i;

	json_array_foreach (heard.progress, i, v)
		if (!strcmp(json_string_value(v), phase))
			return true;
	return false;
}

/* ---- the way up, and down from each step ---- */

#define IMAGE "registry.example/agent:1"

/* PREPARING -> DEPLOYING (--image) -> STARTING -> RUNNING -> EXITED -> TEARDOWN -> GONE. */
static void test_run_with_image_then_exit(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	assert_int_equal(s->state, UP_SESSION_PREPARING);
	run_to(w, UP_SESSION_STARTING);
	pods_ready(w);
	assert_heard_states("PREPARING>DEPLOYING,DEPLOYING>STARTING,STARTING>RUNNING");
	assert_int_equal(heard.answers, 1);
	assert_string_equal(json_string_value(json_object_get(heard.answer, "state")), "RUNNING");
	assert_string_equal(json_string_value(json_object_get(heard.answer, "image")), IMAGE);
	assert_true(heard_progress("prepare") && heard_progress("deploy") &&
		    heard_progress("start"));
	assert_int_equal(fake.prepares, 1);
	assert_int_equal(fake.images, 0);
	assert_int_equal(fake.audits, 1);
	assert_non_null(s->life); /* RUNNING's entry armed the TTL */
	assert_null(s->starter);

	pod_event(s, UP_WATCH_MODIFIED, agent_exited(0));
	assert_int_equal(s->state, UP_SESSION_TEARDOWN);
	assert_int_equal(up_record_exit_code(s->record, &(int){0}), true);
	settle(w);
	assert_int_equal(s->state, UP_SESSION_TEARDOWN); /* the delete was accepted */
	assert_int_equal(fake.deletes, 1);
	namespace_deleted(s); /* the watch says the namespace has gone */
	assert_int_equal(s->state, UP_SESSION_GONE);
	assert_non_null(strstr(up_record_reason(s->record), "exited with code 0"));
	/* answered once: nothing more reached the client */
	assert_true(heard.answers == 1 && json_array_size(heard.states) == 3);
}

/* PREPARING -> BUILDING -> DEPLOYING ... RUNNING -> STOPPED -> TEARDOWN -> GONE. */
static void test_build_then_stop_running(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, NULL);

	run_to(w, UP_SESSION_STARTING);
	assert_int_equal(fake.images, 1);
	assert_true(heard_progress("build"));
	assert_string_equal(s->image_ref, "localhost:5000/uplink/claude:ctx-0123456789abcdef");
	pods_ready(w);
	assert_heard_states("PREPARING>BUILDING,BUILDING>DEPLOYING,DEPLOYING>STARTING,"
			    "STARTING>RUNNING");
	/* after RUNNING a departing client only detaches */
	up_session_starter_gone(s);
	assert_int_equal(s->state, UP_SESSION_RUNNING);
	fake.delete_not_found = true;
	assert_int_equal(up_session_stop(s, "stopped by the user"), 0);
	run_to(w, UP_SESSION_GONE);
	assert_int_equal(up_session_stop(s, "again"), -EALREADY);
	assert_int_equal(fake.deletes, 1);
	assert_string_equal(up_record_reason(s->record), "stopped by the user");
	assert_int_equal(heard.answers, 1);
}

/* PREPARING -> FAILED -> TEARDOWN -> GONE: the prepare step's error is the answer. */
static void test_prepare_fails(void **state)
{
	struct world *w = *state;
	struct up_session *s;

	fake.prep_error = "no login found: run claude once";
	fake.prep_warning = "a warning for the user";
	s = start(w, IMAGE);
	run_to(w, UP_SESSION_GONE);
	assert_heard_error(UP_ERR_PREREQ_MISSING, "no login found");
	assert_true(heard_progress("warning"));
	assert_heard_states("");
	assert_int_equal(fake.applies + fake.deletes, 0); /* nothing was in the cluster */
	assert_string_equal(up_record_reason(s->record), "no login found: run claude once");
}

/* BUILDING -> FAILED: the image job's error. */
static void test_build_fails(void **state)
{
	struct world *w = *state;

	fake.image_r = -EIO;
	(void)start(w, NULL);
	run_to(w, UP_SESSION_GONE);
	assert_heard_error(UP_ERR_IMAGE_BUILD_FAILED, "docker build failed");
	assert_heard_states("PREPARING>BUILDING");
	assert_int_equal(fake.applies + fake.deletes, 0);
}

/* BUILDING -> STOPPED: stopped before the image came. */
static void test_stop_while_building(void **state)
{
	struct world *w = *state;
	struct up_session *s;

	fake.hold_image = true;
	s = start(w, NULL);
	run_to(w, UP_SESSION_BUILDING);
	assert_non_null(s->image);
	assert_int_equal(up_session_stop(s, "stopped by the user"), 0);
	assert_int_equal(s->state, UP_SESSION_GONE);
	assert_null(s->image);
	assert_heard_error(UP_ERR_SESSION_STOPPED, "stopped by the user");
}

/* DEPLOYING -> FAILED when the object `which` is refused; the namespace is deleted. */
static void deploy_fails(struct world *w, const char *which, const char *said)
{
	char ns[96];
	struct up_session *s;

	fake.delete_not_found = true;
	s = start(w, IMAGE);
	(void)snprintf(ns, sizeof(ns), "Namespace/%s", s->ns);
	fake.fail_apply = which ? which : ns;
	run_to(w, UP_SESSION_GONE);
	assert_heard_error(UP_ERR_CLUSTER_UNREACHABLE, said);
	assert_heard_states("PREPARING>DEPLOYING");
	assert_int_equal(fake.deletes, 1);
}

/* The namespace, a Service, the agent pod: each refusal fails the session in DEPLOYING. */
static void test_deploy_refused(void **state)
{
	static const char *const cases[][2] = {
		{NULL, "creating namespace"},
		{"Service/mitm", "deploying the session failed"},
		{"Pod/agent", "creating the agent pod failed"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (i > 0)
			assert_int_equal(teardown(state) + setup(state), 0);
		deploy_fails(*state, cases[i][0], cases[i][1]);
	}
}

/* DEPLOYING -> STOPPED: the starting client leaves with calls in flight; they are
 * cancelled, the namespace is deleted, and the client hears nothing more. */
static void test_client_leaves_while_deploying(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	fake.hold = true;
	run_to(w, UP_SESSION_DEPLOYING);
	assert_non_null(s->calls[0]);
	up_session_starter_gone(s);
	assert_int_equal(s->state, UP_SESSION_TEARDOWN);
	fake.hold = false;
	fake.delete_not_found = true;
	assert_int_equal(uv_timer_start(&fake.timer, on_fake_timer, 0, 0), 0);
	run_to(w, UP_SESSION_GONE);
	assert_int_equal(heard.answers, 0);
	assert_heard_states("PREPARING>DEPLOYING");
	assert_int_equal(fake.deletes, 1);
	assert_non_null(strstr(up_record_reason(s->record), "went away before it was running"));
}

/* PREPARING -> STOPPED: gone before the record was even written; nothing runs after. */
static void test_client_leaves_while_preparing(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	up_session_starter_gone(s);
	assert_int_equal(s->state, UP_SESSION_GONE);
	(void)uv_run(&w->h.loop, UV_RUN_DEFAULT);
	assert_int_equal(fake.prepares, 0);
	assert_int_equal(heard.answers, 0);
}

/* PREPARING -> STOPPED while the worker runs: freed, the session goes once it is back. */
static void test_freed_while_preparing(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	while (!s->in_work)
		(void)uv_run(&w->h.loop, UV_RUN_ONCE);
	assert_int_equal(up_session_stop(s, "stopped by the user"), 0);
	assert_int_equal(s->state, UP_SESSION_GONE); /* teardown() frees it mid-work */
}

/* STARTING -> EXITED: the agent exits before both pods are Ready. */
static void test_exit_while_starting(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	run_to(w, UP_SESSION_STARTING);
	pod_event(s, UP_WATCH_MODIFIED, agent_exited(3));
	assert_heard_error(UP_ERR_SESSION_STOPPED, "the agent exited with code 3 (Error)");
	settle(w);
	assert_int_equal(s->state, UP_SESSION_TEARDOWN);
	namespace_deleted(s);
	assert_int_equal(s->state, UP_SESSION_GONE);
	assert_heard_states("PREPARING>DEPLOYING,DEPLOYING>STARTING");
}

/* STARTING -> FAILED: the namespace vanished under a starting session. */
static void test_namespace_gone_while_starting(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	run_to(w, UP_SESSION_STARTING);
	pod_event(s, UP_WATCH_MODIFIED, pod("mitm", false)); /* not Ready: nothing moves */
	assert_int_equal(s->state, UP_SESSION_STARTING);
	fake.delete_not_found = true;
	namespace_deleted(s);
	run_to(w, UP_SESSION_GONE);
	assert_heard_error(UP_ERR_INTERNAL_ERROR, "was deleted while the session was starting");
}

/* STARTING -> STOPPED: `uplink stop` before it ran answers the start with why. */
static void test_stop_while_starting(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	run_to(w, UP_SESSION_STARTING);
	fake.delete_not_found = true;
	assert_int_equal(up_session_stop(s, "stopped by the user"), 0);
	run_to(w, UP_SESSION_GONE);
	assert_heard_error(UP_ERR_SESSION_STOPPED, "stopped by the user");
	assert_int_equal(fake.audits, 0);
}

/* RUNNING -> GONE: its namespace deleted from outside; nothing left to delete. */
static void test_namespace_gone_while_running(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	run_to(w, UP_SESSION_STARTING);
	pods_ready(w);
	namespace_deleted(s);
	assert_int_equal(s->state, UP_SESSION_GONE);
	assert_int_equal(fake.deletes, 0);
	assert_non_null(strstr(up_record_reason(s->record), "deleted from outside uplink"));
}

/* RUNNING -> FAILED: the agent pod deleted from outside. */
static void test_agent_pod_deleted_while_running(void **state)
{
	struct world *w = *state;
	struct up_session *s = start(w, IMAGE);

	run_to(w, UP_SESSION_STARTING);
	pods_ready(w);
	fake.delete_not_found = true;
	pod_event(s, UP_WATCH_DELETED, pod("agent", false));
	run_to(w, UP_SESSION_GONE);
	assert_int_equal(fake.deletes, 1);
	assert_non_null(strstr(up_record_reason(s->record), "deleted or evicted"));
}

/*
 * The moves the tests above take; the table of session-state.c may allow no other, so a
 * move added there fails here until a test takes it.
 */
static void test_every_move_is_taken(void **state)
{
#define M(a, b)                                \
	{                                      \
		UP_SESSION_##a, UP_SESSION_##b \
	}
	static const enum up_session_state taken[][2] = {
		M(PREPARING, BUILDING), M(PREPARING, DEPLOYING), M(PREPARING, FAILED),
		M(PREPARING, STOPPED),	M(BUILDING, DEPLOYING),	 M(BUILDING, FAILED),
		M(BUILDING, STOPPED),	M(DEPLOYING, STARTING),	 M(DEPLOYING, FAILED),
		M(DEPLOYING, STOPPED),	M(STARTING, RUNNING),	 M(STARTING, EXITED),
		M(STARTING, FAILED),	M(STARTING, STOPPED),	 M(RUNNING, EXITED),
		M(RUNNING, GONE),	M(RUNNING, FAILED),	 M(RUNNING, STOPPED),
		M(EXITED, TEARDOWN),	M(FAILED, TEARDOWN),	 M(STOPPED, TEARDOWN),
		M(TEARDOWN, GONE),
	};
#undef M
	unsigned allowed = 0;

	(void)state;
	for (int a = 0; a < _UP_SESSION_STATE_MAX; a++)
		for (int b = 0; b < _UP_SESSION_STATE_MAX; b++)
			allowed += up_session_state_can_move(a, b);
	assert_int_equal(allowed, sizeof(taken) / sizeof(taken[0]));
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		assert_true(up_session_state_can_move(taken[i][0], taken[i][1]));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_run_with_image_then_exit),
		T(test_build_then_stop_running),
		T(test_prepare_fails),
		T(test_build_fails),
		T(test_stop_while_building),
		T(test_deploy_refused),
		T(test_client_leaves_while_deploying),
		T(test_client_leaves_while_preparing),
		T(test_freed_while_preparing),
		T(test_exit_while_starting),
		T(test_namespace_gone_while_starting),
		T(test_stop_while_starting),
		T(test_namespace_gone_while_running),
		T(test_agent_pod_deleted_while_running),
		cmocka_unit_test(test_every_move_is_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
