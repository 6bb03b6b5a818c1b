/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube.h"
#include "util.h"
#include "waiters.h"

/*
 * The deploy cluster's Service IP ranges, which the mitm refuses to connect to unless a rule
 * names the IP (its uplink_refuse_cidrs option, manifests/mitm/README.md). Read once per
 * cluster with its kube client, when the first session starts, and kept; a read that failed
 * is tried again by the next session. Sources, in order: the ServiceCIDR objects
 * (networking.k8s.io v1, else v1beta1: spec.cidrs); without that API (404, or 403), the
 * `kubernetes` Service in `default`, whose cluster IPs lie in the range: a /16 (IPv4 in
 * 10.0.0.0/8 or 172.16.0.0/12) or a /112 (IPv6 in fc00::/7) around each, the range of every
 * common distribution's default, else the address alone. Failures are logged once.
 */
struct up_cluster_ranges;

int up_cluster_ranges_new(struct up_kube *kube, const char *context,
			  struct up_cluster_ranges **ret) _wur_;
/* Cancels the read; waiters are called with closing set. */
struct up_cluster_ranges *up_cluster_ranges_free(struct up_cluster_ranges *r);

/* Starts a read unless the ranges are known or being read. NULL is ignored. */
void up_cluster_ranges_read(struct up_cluster_ranges *r);
/* ["10.43.0.0/16", ...] (borrowed), or NULL while not known. */
const json_t *up_cluster_ranges_cidrs(const struct up_cluster_ranges *r);
/* Where they came from, for a sentence ("" while not known). */
const char *up_cluster_ranges_source(const struct up_cluster_ranges *r);

/*
 * Calls fn once, from the loop: when the read in flight ends, after `timeout_ms`, or with
 * closing set when `r` is freed first. 0 with *ret NULL (and no call) when no read is in
 * flight. up_waiter_cancel() before the call means none.
 */
int up_cluster_ranges_wait(struct up_cluster_ranges *r, uint64_t timeout_ms, up_waiter_fn fn,
			   void *ud, struct up_waiter **ret) _wur_;

/* The range guessed around one of the `kubernetes` Service's cluster IPs (see above). */
int up_cidr_guess_service_range(const char *ip, char *buf, size_t len) _wur_;
