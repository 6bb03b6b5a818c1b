/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <uv.h>

#include "cluster-ranges.h"
#include "kube-watch.h"
#include "kube.h"
#include "util.h"
#include "waiters.h"

/*
 * The deploy cluster as the daemon sees it: the kubeconfig context loaded off the
 * loop, one Kubernetes client, and the two shared watches (namespaces and pods
 * labelled managed-by=agent-uplink) whose caches answer without a round trip.
 * When the context cannot be loaded the daemon runs on and says why.
 */
struct up_cluster;

/* kubeconfig: NULL for $KUBECONFIG or ~/.kube/config; context: NULL for the default. */
int up_cluster_new(uv_loop_t *loop, const char *kubeconfig, const char *context,
		   struct up_cluster **ret) _wur_;
struct up_cluster *up_cluster_free(struct up_cluster *c);

/* {context, server, state, error?, namespaces, pods} for daemon.status. */
json_t *up_cluster_status(const struct up_cluster *c);
/* NULL until the context has loaded. */
struct up_kube *up_cluster_kube(const struct up_cluster *c);
struct up_kube_watch *up_cluster_namespaces(const struct up_cluster *c);
/* Its Service ranges (daemon/cluster-ranges.h); NULL until the context has loaded. */
struct up_cluster_ranges *up_cluster_ranges(const struct up_cluster *c);
struct up_kube_watch *up_cluster_pods(const struct up_cluster *c);

/*
 * One listener for every change the shared watches see (kind "Namespace" or "Pod"),
 * and for the cluster becoming ready (kind NULL). The object is borrowed.
 */
typedef void (*up_cluster_event_fn)(const char *kind, enum up_watch_event ev, json_t *obj,
				    void *ud);
void up_cluster_set_listener(struct up_cluster *c, up_cluster_event_fn fn, void *ud);
bool up_cluster_ready(const struct up_cluster *c);

/*
 * Whether the caches are still being filled for the first time, with no failure seen:
 * worth waiting for (up_cluster_wait()). False once ready, failing or unavailable.
 */
bool up_cluster_first_sync_pending(const struct up_cluster *c);
/*
 * Why the caches are not complete, for a message: the failure, or that the first list has
 * not been answered. "" when they are ready.
 */
void up_cluster_why_not_ready(const struct up_cluster *c, char *buf, size_t len);

/*
 * Calls fn once, from the loop: when the first sync ends (ready or failing), after
 * UP_CLUSTER_SYNC_WAIT_MS, or with closing set when the cluster is freed first.
 * up_waiter_cancel() before that means no call.
 */
int up_cluster_wait(struct up_cluster *c, up_waiter_fn fn, void *ud, struct up_waiter **ret) _wur_;

/* Loads a kubeconfig context on the threadpool; exactly one callback. */
typedef void (*up_kubeconfig_loaded_fn)(int r, const char *error, struct up_kube_context *ctx,
					void *ud);
int up_kubeconfig_load_async(uv_loop_t *loop, const char *paths, const char *context,
			     up_kubeconfig_loaded_fn cb, void *ud) _wur_;
