/* SPDX-License-Identifier: Apache-2.0 */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "cluster-ranges.h"
#include "list.h"
#include "log.h"

#define UP_MANAGED_SELECTOR "managed-by=agent-uplink"

enum cluster_state {
	CLUSTER_LOADING,
	CLUSTER_SYNCING,
	CLUSTER_READY,
	CLUSTER_FAILING,
	CLUSTER_UNAVAILABLE
};

static const char *const state_names[] = {
	[CLUSTER_LOADING] = "loading",
	[CLUSTER_SYNCING] = "syncing",
	[CLUSTER_READY] = "ready",
	[CLUSTER_FAILING] = "failing",
	[CLUSTER_UNAVAILABLE] = "unavailable",
};

struct up_cluster {
	uv_loop_t *loop;
	char *context;
	struct up_kube *kube;
	struct up_kube_watch *namespaces, *pods;
	struct up_cluster_ranges *ranges; /* its Service ranges, read by the first session */
	enum cluster_state state;
	char error[1024];
	bool loading, freed, ever_ready;
	struct up_list waits; /* struct up_waiter (waiters.h) */
	up_cluster_event_fn listener;
	void *listener_ud;
};

struct load_work {
	uv_work_t work;
	char *paths, *context;
	struct up_kube_context *ctx;
	char error[1024];
	int r;
	up_kubeconfig_loaded_fn cb;
	void *ud;
};

static void load_run(uv_work_t *w)
{
	struct load_work *l = w->data;

	l->r = up_kubeconfig_load(l->paths, l->context, &l->ctx, l->error, sizeof(l->error));
}

static void load_after(uv_work_t *w, int status)
{
	struct load_work *l = w->data;

	(void)status;
	l->cb(l->r, l->r < 0 ? l->error : NULL, l->ctx, l->ud);
	free(l->paths);
	free(l->context);
	free(l);
}

int up_kubeconfig_load_async(uv_loop_t *loop, const char *paths, const char *context,
			     up_kubeconfig_loaded_fn cb, void *ud)
{
	struct load_work *l = up_new(struct load_work, .cb = cb, .ud = ud);
	int r;

	if (!l)
		return -ENOMEM;
	l->paths = paths ? strdup(paths) : NULL;
	l->context = context ? strdup(context) : NULL;
	l->work.data = l;
	r = uv_queue_work(loop, &l->work, load_run, load_after);
	if (r < 0) {
		free(l->paths);
		free(l->context);
		free(l);
	}
	return r;
}

/* Every waiter is answered once the first sync has ended, one way or the other. */
static void wake_waiters(struct up_cluster *c, bool closing)
{
	if (!closing && up_cluster_first_sync_pending(c))
		return;
	up_waiters_wake(&c->waits, closing);
}

int up_cluster_wait(struct up_cluster *c, up_waiter_fn fn, void *ud, struct up_waiter **ret)
{
	return up_waiter_add(c->loop, &c->waits, UP_CLUSTER_SYNC_WAIT_MS, NULL, NULL, fn, ud, ret);
}

bool up_cluster_first_sync_pending(const struct up_cluster *c)
{
	return c && !c->ever_ready && (c->state == CLUSTER_LOADING || c->state == CLUSTER_SYNCING);
}

void up_cluster_why_not_ready(const struct up_cluster *c, char *buf, size_t len)
{
	const char *name = c && c->context ? c->context : "the default context";

	if (!c)
		(void)snprintf(buf, len, "no deploy cluster is set up");
	else if (c->state == CLUSTER_READY && len > 0)
		buf[0] = '\0';
	else if (c->state == CLUSTER_UNAVAILABLE)
		(void)snprintf(buf, len, "no deploy cluster (%s): %s", name, c->error);
	else if (c->state == CLUSTER_FAILING)
		(void)snprintf(buf, len, "the deploy cluster (%s) fails: %s", name, c->error);
	else
		(void)snprintf(buf, len,
			       "the deploy cluster (%s) has not answered uplinkd's first list of "
			       "its namespaces and pods within %d s",
			       name, UP_CLUSTER_SYNC_WAIT_MS / 1000);
}

static void set_state(struct up_cluster *c, enum cluster_state s, const char *error)
{
	if (c->state != s)
		log_debug("Cluster %s: %s -> %s", c->context ? c->context : "(default)",
			  state_names[c->state], state_names[s]);
	c->state = s;
	if (s == CLUSTER_READY)
		c->ever_ready = true;
	(void)snprintf(c->error, sizeof(c->error), "%s", error ? error : "");
	if (s !=
	    CLUSTER_READY) /* ready: update_sync() wakes them once the sessions have caught up */
		wake_waiters(c, false);
}

static void update_sync(struct up_cluster *c)
{
	if (c->state == CLUSTER_FAILING)
		return;
	if (up_kube_watch_synced(c->namespaces) && up_kube_watch_synced(c->pods)) {
		bool was_ready = c->state == CLUSTER_READY;
		set_state(c, CLUSTER_READY, NULL);
		if (!was_ready && c->listener)
			c->listener(NULL, UP_WATCH_ADDED, NULL, c->listener_ud);
		wake_waiters(c, false);
	}
}

static void on_namespace_event(enum up_watch_event ev, json_t *obj, void *ud)
{
	struct up_cluster *c = ud;

	if (c->listener)
		c->listener("Namespace", ev, obj, c->listener_ud);
}

static void on_pod_event(enum up_watch_event ev, json_t *obj, void *ud)
{
	struct up_cluster *c = ud;

	if (c->listener)
		c->listener("Pod", ev, obj, c->listener_ud);
}

void up_cluster_set_listener(struct up_cluster *c, up_cluster_event_fn fn, void *ud)
{
	c->listener = fn;
	c->listener_ud = ud;
}

bool up_cluster_ready(const struct up_cluster *c)
{
	return c && c->state == CLUSTER_READY;
}

static void on_watch_state(const char *error, void *ud)
{
	struct up_cluster *c = ud;

	if (error) {
		if (c->state != CLUSTER_FAILING)
			log_warning("The deploy cluster is not answering as it should: %s", error);
		set_state(c, CLUSTER_FAILING, error);
		return;
	}
	if (c->state == CLUSTER_FAILING)
		log_info("The deploy cluster answers again");
	c->state = CLUSTER_SYNCING;
	update_sync(c);
}

static void on_loaded(int r, const char *error, struct up_kube_context *ctx, void *ud)
{
	struct up_cluster *c = ud;

	c->loading = false;
	if (c->freed) {
		up_kube_context_free(ctx);
		free(c->context);
		free(c);
		return;
	}
	if (r < 0) {
		log_warning("No deploy cluster: %s", error);
		set_state(c, CLUSTER_UNAVAILABLE, error);
		return;
	}
	log_info("Deploy context %s: %s", ctx->name, ctx->server);
	free(c->context);
	c->context = strdup(ctx->name);
	r = up_kube_new(c->loop, ctx, &c->kube);
	if (r < 0) {
		up_kube_context_free(ctx);
		set_state(c, CLUSTER_UNAVAILABLE, strerror(-r));
		return;
	}
	set_state(c, CLUSTER_SYNCING, NULL);
	r = up_cluster_ranges_new(c->kube, c->context, &c->ranges);
	if (r >= 0)
		r = up_kube_watch_new(c->kube, "Namespace", UP_MANAGED_SELECTOR, on_namespace_event,
				      on_watch_state, c, &c->namespaces);
	if (r >= 0)
		r = up_kube_watch_new(c->kube, "Pod", UP_MANAGED_SELECTOR, on_pod_event,
				      on_watch_state, c, &c->pods);
	if (r < 0)
		set_state(c, CLUSTER_UNAVAILABLE, strerror(-r));
}

int up_cluster_new(uv_loop_t *loop, const char *kubeconfig, const char *context,
		   struct up_cluster **ret)
{
	struct up_cluster *c =
		up_new(struct up_cluster, .loop = loop, .state = CLUSTER_LOADING, .loading = true);
	int r;

	if (!c)
		return -ENOMEM;
	up_list_init(&c->waits);
	c->context = context ? strdup(context) : NULL;
	r = up_kubeconfig_load_async(loop, kubeconfig, context, on_loaded, c);
	if (r < 0) {
		free(c->context);
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

struct up_cluster *up_cluster_free(struct up_cluster *c)
{
	if (!c)
		return NULL;
	wake_waiters(c, true);
	up_kube_watch_free(c->namespaces);
	up_kube_watch_free(c->pods);
	up_cluster_ranges_free(c->ranges);
	c->ranges = NULL;
	up_kube_free(c->kube);
	c->namespaces = c->pods = NULL;
	c->kube = NULL;
	if (c->loading) {
		c->freed = true; /* on_loaded() finishes the job */
		return NULL;
	}
	free(c->context);
	free(c);
	return NULL;
}

json_t *up_cluster_status(const struct up_cluster *c)
{
	const struct up_kube_context *ctx = c->kube ? up_kube_get_context(c->kube) : NULL;
	json_t *s = json_pack("{s:s?, s:s?, s:s}", "context", c->context, "server",
			      ctx ? ctx->server : NULL, "state", state_names[c->state]);

	if (c->error[0])
		(void)json_object_set_new(s, "error", json_string(c->error));
	if (c->namespaces)
		(void)json_object_set_new(s, "namespaces",
					  json_integer((json_int_t)json_object_size(
						  up_kube_watch_cache(c->namespaces))));
	if (c->pods)
		(void)json_object_set_new(
			s, "pods",
			json_integer((json_int_t)json_object_size(up_kube_watch_cache(c->pods))));
	return s;
}

struct up_kube *up_cluster_kube(const struct up_cluster *c)
{
	return c->state == CLUSTER_LOADING || c->state == CLUSTER_UNAVAILABLE ? NULL : c->kube;
}

struct up_cluster_ranges *up_cluster_ranges(const struct up_cluster *c)
{
	return c && up_cluster_kube(c) ? c->ranges : NULL;
}

struct up_kube_watch *up_cluster_namespaces(const struct up_cluster *c)
{
	return c->namespaces;
}

struct up_kube_watch *up_cluster_pods(const struct up_cluster *c)
{
	return c->pods;
}
