/* SPDX-License-Identifier: Apache-2.0 */
#include "kube-watch.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "bounds.h"
#include "log.h"
#include "loop-timer.h"

struct up_kube_watch {
	struct up_kube *k;
	char kind[32];
	char path[256];
	char *selector;
	json_t *cache; /* key -> object */
	char rv[64];
	bool synced, relist;
	bool failing; /* the state callback was last told about an error */
	unsigned failures;
	unsigned lists, streams;
	unsigned long events;
	struct up_kube_call *call;
	uv_timer_t *timer;
	uv_loop_t *loop;
	up_watch_event_fn ev;
	up_watch_state_fn state;
	void *ud;
};

static const char *const event_names[] = {
	[UP_WATCH_ADDED] = "ADDED",
	[UP_WATCH_MODIFIED] = "MODIFIED",
	[UP_WATCH_DELETED] = "DELETED",
};

const char *up_watch_event_name(enum up_watch_event ev)
{
	return event_names[ev];
}

static void start_list(struct up_kube_watch *w);
static void start_stream(struct up_kube_watch *w);

static int key_of(json_t *obj, char *buf, size_t len)
{
	json_t *meta = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(meta, "namespace"));
	const char *name = json_string_value(json_object_get(meta, "name"));
	int n;

	if (!name)
		return -EINVAL;
	n = ns ? snprintf(buf, len, "%s/%s", ns, name) : snprintf(buf, len, "%s", name);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/*
 * What the cache keeps of an object: the fields the daemon reads (identity, labels,
 * annotations, lifecycle, status), not the rest. A pod's spec and managedFields are
 * most of it, and jansson spends about fifteen bytes of memory per byte of JSON.
 */
static const char *const kept_metadata[] = {
	"name",
	"namespace",
	"uid",
	"resourceVersion",
	"labels",
	"annotations",
	"creationTimestamp",
	"deletionTimestamp",
	NULL,
};
static const char *const kept_spec[] = {"nodeName", "runtimeClassName", NULL};
static const char *const kept_status[] = {
	"phase",
	"reason",
	"message",
	"conditions",
	"containerStatuses",
	"initContainerStatuses",
	"startTime",
	NULL,
};

static void keep_only(json_t *obj, const char *const *keys)
{
	const char *key;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(obj, tmp, key, v)
	{
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], key) != 0)
			i++;
		if (!keys[i])
			(void)json_object_del(obj, key);
	}
}

static void trim(json_t *obj)
{
	keep_only(json_object_get(obj, "metadata"), kept_metadata);
	keep_only(json_object_get(obj, "spec"), kept_spec);
	keep_only(json_object_get(obj, "status"), kept_status);
}

static const char *rv_of(json_t *obj)
{
	return json_string_value(
		json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static void set_rv(struct up_kube_watch *w, const char *rv)
{
	if (rv)
		(void)snprintf(w->rv, sizeof(w->rv), "%s", rv);
}

static void emit(struct up_kube_watch *w, enum up_watch_event ev, json_t *obj)
{
	w->events++;
	if (w->ev)
		w->ev(ev, obj, w->ud);
}

static void on_retry(uv_timer_t *t)
{
	struct up_kube_watch *w = t->data;

	if (w->relist || !w->synced)
		start_list(w);
	else
		start_stream(w);
}

static void retry_later(struct up_kube_watch *w, const char *why)
{
	uint64_t ms = up_backoff_ms(w->failures++, UP_WATCH_BACKOFF_BASE_MS,
				    UP_WATCH_BACKOFF_CAP_MS, (uint32_t)uv_hrtime(), -1);

	log_debug("Watch of %s: %s; again in %llu ms", w->kind, why, (unsigned long long)ms);
	w->failing = true;
	if (w->state)
		w->state(why, w->ud);
	(void)uv_timer_start(w->timer, on_retry, ms, 0);
}

/* Replaces the cache with a fresh list, reporting what changed since the last one. */
static void apply_list(struct up_kube_watch *w, json_t *items)
{
	json_t *fresh = json_object(), *obj, *old;
	const char *key;
	char k[320];
	size_t i;
	void *tmp;

	json_array_foreach (items, i, obj) {
		if (key_of(obj, k, sizeof(k)) == 0) {
			trim(obj);
			/* List items carry no kind; the watch events do. Keep them alike. */
			(void)json_object_set_new(obj, "kind", json_string(w->kind));
			(void)json_object_set(fresh, k, obj);
		}
	}
	json_object_foreach_safe(w->cache, tmp, key, old)
	{
		if (!json_object_get(fresh, key)) {
			json_incref(old);
			(void)json_object_del(w->cache, key);
			emit(w, UP_WATCH_DELETED, old);
			json_decref(old);
		}
	}
	json_object_foreach (fresh, key, obj) {
		old = json_object_get(w->cache, key);
		const char *orv = old ? rv_of(old) : NULL, *nrv = rv_of(obj);
		bool same = orv && nrv && strcmp(orv, nrv) == 0;
		(void)json_object_set(w->cache, key, obj);
		if (!old)
			emit(w, UP_WATCH_ADDED, obj);
		else if (!same)
			emit(w, UP_WATCH_MODIFIED, obj);
	}
	json_decref(fresh);
}

static void on_list(const struct up_kube_error *err, json_t *list, void *ud)
{
	struct up_kube_watch *w = ud;

	w->call = NULL;
	if (err) {
		retry_later(w, err->message);
		return;
	}
	w->lists++;
	set_rv(w, json_string_value(
			  json_object_get(json_object_get(list, "metadata"), "resourceVersion")));
	apply_list(w, json_object_get(list, "items"));
	/* A list is parsed whole, then trimmed to what the cache keeps: return the peak. */
	(void)malloc_trim(0);
	w->relist = false;
	w->failures = 0;
	w->failing = false;
	if (!w->synced) {
		w->synced = true;
		log_debug("Watch of %s: %zu objects at resourceVersion %s", w->kind,
			  json_object_size(w->cache), w->rv);
	}
	if (w->state)
		w->state(NULL, w->ud);
	start_stream(w);
}

static void start_list(struct up_kube_watch *w)
{
	int r = up_kube_list(w->k, w->path, w->selector, NULL, on_list, w, &w->call);

	if (r < 0)
		retry_later(w, strerror(-r));
}

static int on_line(const char *line, size_t len, void *ud)
{
	struct up_kube_watch *w = ud;
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	char key[320];
	int r = 0;

	w->failures = 0;
	if (w->failing) {
		/* A reconnected stream delivers again: the cache is current once more. */
		w->failing = false;
		if (w->state)
			w->state(NULL, w->ud);
	}
	if (!type || !json_is_object(obj)) {
		log_warning("Watch of %s: an event that is not one (%zu bytes), re-listing",
			    w->kind, len);
		w->relist = true;
		r = -EBADMSG;
	} else if (strcmp(type, "BOOKMARK") == 0) {
		set_rv(w, rv_of(obj));
	} else if (strcmp(type, "ERROR") == 0) {
		/* Usually 410 Expired: our resourceVersion is older than what the server keeps. */
		log_debug("Watch of %s: ERROR event (%s), re-listing", w->kind,
			  json_string_value(json_object_get(obj, "reason"))
				  ? json_string_value(json_object_get(obj, "reason"))
				  : "no reason");
		w->relist = true;
		r = -ESTALE;
	} else if (key_of(obj, key, sizeof(key)) == 0) {
		trim(obj);
		set_rv(w, rv_of(obj));
		if (strcmp(type, "DELETED") == 0) {
			json_t *old = json_incref(json_object_get(w->cache, key));
			(void)json_object_del(w->cache, key);
			emit(w, UP_WATCH_DELETED, old ? old : obj);
			json_decref(old);
		} else {
			bool had = json_object_get(w->cache, key) != NULL;
			(void)json_object_set(w->cache, key, obj);
			emit(w, had ? UP_WATCH_MODIFIED : UP_WATCH_ADDED, obj);
		}
	}
	json_decref(ev);
	return r;
}

static void on_stream_end(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct up_kube_watch *w = ud;

	(void)obj;
	w->call = NULL;
	if (err && err->code == 410)
		w->relist = true;
	if (w->relist) {
		start_list(w);
	} else if (err && err->r != -ESTALE && w->failures == 0 && err->code == 0) {
		/* A stream that worked was dropped: reconnect at once; only a failed reconnect is a
		 * failure. */
		w->failures++;
		start_stream(w);
	} else if (err && err->r != -ESTALE) {
		retry_later(w, err->message);
	} else {
		/* The server ended the stream (timeoutSeconds): carry on from where we are. */
		w->failures = 0;
		start_stream(w);
	}
}

static void start_stream(struct up_kube_watch *w)
{
	char full[UP_MAX_KUBE_URL], timeout[16];
	int r;

	/* Spread reconnects of many watches over time, as client-go does. */
	(void)snprintf(timeout, sizeof(timeout), "%u",
		       UP_WATCH_TIMEOUT_S + (unsigned)(uv_hrtime() % (UP_WATCH_TIMEOUT_S / 2 + 1)));
	r = up_kube_query(full, sizeof(full), w->path, "watch", "1", "labelSelector", w->selector,
			  "resourceVersion", w->rv[0] ? w->rv : NULL, "allowWatchBookmarks", "true",
			  "timeoutSeconds", timeout, NULL);
	if (r >= 0)
		r = up_kube_stream(w->k, full, on_line, on_stream_end, w, &w->call);
	if (r < 0) {
		retry_later(w, strerror(-r));
		return;
	}
	w->streams++;
}

int up_kube_watch_new(struct up_kube *k, const char *kind, const char *label_selector,
		      up_watch_event_fn ev, up_watch_state_fn state, void *ud,
		      struct up_kube_watch **ret)
{
	struct up_kube_watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	*w = (struct up_kube_watch){.k = k, .ev = ev, .state = state, .ud = ud};
	(void)snprintf(w->kind, sizeof(w->kind), "%s", kind);
	r = up_kube_path(w->path, sizeof(w->path), kind, NULL, NULL);
	w->cache = json_object();
	w->selector = label_selector ? strdup(label_selector) : NULL;
	w->loop = up_kube_loop(k);
	w->timer = up_loop_timer_new(w->loop, w);
	if (r < 0 || !w->cache || (label_selector && !w->selector) || !w->timer) {
		json_decref(w->cache);
		free(w->selector);
		up_loop_timer_free(w->timer);
		free(w);
		return r < 0 ? r : -ENOMEM;
	}
	start_list(w);
	*ret = w;
	return 0;
}

struct up_kube_watch *up_kube_watch_free(struct up_kube_watch *w)
{
	if (!w)
		return NULL;
	up_kube_cancel(w->call);
	w->timer = up_loop_timer_free(w->timer);
	json_decref(w->cache);
	free(w->selector);
	free(w);
	return NULL;
}

json_t *up_kube_watch_cache(const struct up_kube_watch *w)
{
	return w->cache;
}

json_t *up_kube_watch_get(const struct up_kube_watch *w, const char *ns, const char *name)
{
	char key[320];

	if (ns)
		(void)snprintf(key, sizeof(key), "%s/%s", ns, name);
	else
		(void)snprintf(key, sizeof(key), "%s", name);
	return json_object_get(w->cache, key);
}

bool up_kube_watch_synced(const struct up_kube_watch *w)
{
	return w->synced;
}

const char *up_kube_watch_resource_version(const struct up_kube_watch *w)
{
	return w->rv;
}

void up_kube_watch_counters(const struct up_kube_watch *w, unsigned *lists, unsigned *streams,
			    unsigned long *events)
{
	*lists = w->lists;
	*streams = w->streams;
	*events = w->events;
}
