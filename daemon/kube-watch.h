/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "kube.h"
#include "util.h"

/*
 * A list-then-watch of one kind with a label selector, kept in an in-memory cache
 * that later modules read without a round trip. The cache keeps a projection of each
 * object (metadata identity, labels, annotations, lifecycle; spec.nodeName and
 * runtimeClassName; status phase, conditions and container statuses). Resumes from the last
 * resourceVersion, asks for bookmarks, re-lists on 410 Gone or an ERROR event
 * (reporting what changed meanwhile as events), reconnects with backoff.
 */
struct up_kube_watch;

enum up_watch_event { UP_WATCH_ADDED, UP_WATCH_MODIFIED, UP_WATCH_DELETED };

/* One change; `obj` is borrowed (the cache holds it). */
typedef void (*up_watch_event_fn)(enum up_watch_event ev, json_t *obj, void *ud);
/* The cache became complete (error NULL), or the watch is failing (error says why). */
typedef void (*up_watch_state_fn)(const char *error, void *ud);

int up_kube_watch_new(struct up_kube *k, const char *kind, const char *label_selector,
		      up_watch_event_fn ev, up_watch_state_fn state, void *ud,
		      struct up_kube_watch **ret) _wur_;
struct up_kube_watch *up_kube_watch_free(struct up_kube_watch *w);

/* The cache: "NAMESPACE/NAME" (or "NAME" for cluster-scoped kinds) to the object. */
json_t *up_kube_watch_cache(const struct up_kube_watch *w);
json_t *up_kube_watch_get(const struct up_kube_watch *w, const char *ns, const char *name);
bool up_kube_watch_synced(const struct up_kube_watch *w);
const char *up_kube_watch_resource_version(const struct up_kube_watch *w);
/* Counters for tests: lists done, watch streams opened, events handled. */
void up_kube_watch_counters(const struct up_kube_watch *w, unsigned *lists, unsigned *streams,
			    unsigned long *events);

const char *up_watch_event_name(enum up_watch_event ev);
