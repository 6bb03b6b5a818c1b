/* SPDX-License-Identifier: Apache-2.0 */
/* The deploy cluster's Service IP ranges (cluster-ranges.h). */
#include "cluster-ranges.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "jsonrpc.h"
#include "list.h"
#include "log.h"
#include "rules-private.h" /* up_cidr_normalize() */

enum ranges_state { RANGES_UNREAD, RANGES_READING, RANGES_KNOWN };

struct up_cluster_ranges {
	struct up_kube *kube; /* borrowed: the cluster's, which outlives this */
	char *context;
	enum ranges_state state;
	unsigned source; /* sources[] being read */
	struct up_kube_call *call;
	json_t *cidrs; /* once known */
	char from[160];
	bool failure_logged, late_logged;
	struct up_list waits; /* struct up_waiter (waiters.h) */
};

/* ---- addresses ---- */

int up_cidr_guess_service_range(const char *ip, char *buf, size_t len)
{
	unsigned char a[16];
	char cidr[INET6_ADDRSTRLEN + 8];
	bool v6 = strchr(ip, ':') != NULL;
	int bits;

	if (inet_pton(v6 ? AF_INET6 : AF_INET, ip, a) != 1)
		return -EINVAL;
	if (v6)
		bits = (a[0] & 0xfe) == 0xfc ? 112 : 128; /* unique-local fc00::/7 */
	else
		bits = a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ? 16 : 32;
	(void)snprintf(cidr, sizeof(cidr), "%s/%d", ip, bits);
	return up_cidr_normalize(cidr, buf, len);
}

/* Appends a CIDR once; false when there are too many or it is no CIDR. */
static bool add_cidr(json_t *cidrs, const char *cidr, bool guess)
{
	char norm[INET6_ADDRSTRLEN + 8];
	size_t i;
	json_t *v;

	if (!cidr || (guess ? up_cidr_guess_service_range(cidr, norm, sizeof(norm))
			    : up_cidr_normalize(cidr, norm, sizeof(norm))) < 0)
		return false;
	json_array_foreach (cidrs, i, v)
		if (streq(json_string_value(v), norm))
			return true;
	return json_array_size(cidrs) < UP_MAX_SERVICE_CIDRS &&
	       json_array_append_new(cidrs, json_string(norm)) == 0;
}

/* ---- the sources ---- */

/* Each: the CIDRs found (0: none, go on to the next source), or -EINVAL for a bad answer. */
static int from_servicecidrs(const json_t *list, json_t *cidrs)
{
	const json_t *items = json_object_get(list, "items"), *item, *c;
	size_t i, j;

	if (!json_is_array(items))
		return -EINVAL;
	json_array_foreach (items, i, item)
		json_array_foreach (json_object_get(json_object_get(item, "spec"), "cidrs"), j, c)
			if (!add_cidr(cidrs, json_string_value(c), false))
				return -EINVAL;
	return (int)json_array_size(cidrs);
}

static int from_kubernetes_service(const json_t *svc, json_t *cidrs)
{
	const json_t *spec = json_object_get(svc, "spec"),
		     *ips = json_object_get(spec, "clusterIPs");
	const json_t *ip;
	size_t i;

	if (json_array_size(ips) == 0 &&
	    !add_cidr(cidrs, json_string_value(json_object_get(spec, "clusterIP")), true))
		return -EINVAL;
	json_array_foreach (ips, i, ip)
		if (!add_cidr(cidrs, json_string_value(ip), true))
			return -EINVAL;
	return (int)json_array_size(cidrs);
}

static const struct {
	const char *path, *what;
	int (*parse)(const json_t *obj, json_t *cidrs);
} sources[] = {
	{"/apis/networking.k8s.io/v1/servicecidrs", "its ServiceCIDR objects (v1)",
	 from_servicecidrs},
	{"/apis/networking.k8s.io/v1beta1/servicecidrs", "its ServiceCIDR objects (v1beta1)",
	 from_servicecidrs},
	{"/api/v1/namespaces/default/services/kubernetes",
	 "the kubernetes Service's cluster IPs (no ServiceCIDR API; the range's size guessed)",
	 from_kubernetes_service},
};

/* ---- reading ---- */

static void wake_all(struct up_cluster_ranges *r, bool closing)
{
	up_waiters_wake(&r->waits, closing);
}

static void read_failed(struct up_cluster_ranges *r, const char *why)
{
	r->state = RANGES_UNREAD;
	if (!r->failure_logged)
		log_warning("Cannot tell the service range of the deploy cluster %s (%s): the "
			    "mitm of a session started now does not refuse it; the next session "
			    "tries again",
			    r->context, why);
	r->failure_logged = true;
	wake_all(r, false);
}

static void read_source(struct up_cluster_ranges *r);

static void on_answer(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct up_cluster_ranges *r = ud;
	json_t *cidrs;
	char *joined;
	int n;

	r->call = NULL;
	if (err && (err->code == 404 || err->code == 403) && ++r->source < ELEMENTSOF(sources)) {
		read_source(r);
		return;
	}
	if (err) {
		read_failed(r, err->message);
		return;
	}
	cidrs = json_array();
	n = cidrs ? sources[r->source].parse(obj, cidrs) : -ENOMEM;
	if (n == 0 && ++r->source < ELEMENTSOF(sources)) {
		json_decref(cidrs);
		read_source(r);
		return;
	}
	if (n <= 0) {
		json_decref(cidrs);
		read_failed(r, n == 0 ? "it has no ServiceCIDR and no cluster IP for the "
					"kubernetes Service"
				      : "its answer holds no valid CIDR");
		return;
	}
	json_decref(r->cidrs);
	r->cidrs = cidrs;
	r->state = RANGES_KNOWN;
	r->failure_logged = false;
	(void)snprintf(r->from, sizeof(r->from), "%s", sources[r->source].what);
	joined = up_json_join(cidrs, ",");
	log_info("Deploy cluster %s: service range %s, from %s; the mitm refuses it unless a "
		 "rule names the IP",
		 r->context, joined ? joined : "?", r->from);
	free(joined);
	wake_all(r, false);
}

static void read_source(struct up_cluster_ranges *r)
{
	int k = up_kube_get(r->kube, sources[r->source].path, on_answer, r, &r->call);

	if (k < 0) {
		r->call = NULL;
		read_failed(r, strerror(-k));
	}
}

void up_cluster_ranges_read(struct up_cluster_ranges *r)
{
	if (!r || r->state != RANGES_UNREAD)
		return;
	r->state = RANGES_READING;
	r->source = 0;
	r->late_logged = false;
	read_source(r);
}

const json_t *up_cluster_ranges_cidrs(const struct up_cluster_ranges *r)
{
	return r && r->state == RANGES_KNOWN ? r->cidrs : NULL;
}

const char *up_cluster_ranges_source(const struct up_cluster_ranges *r)
{
	return r && r->state == RANGES_KNOWN ? r->from : "";
}

/* ---- waiting ---- */

static void late(void *owner)
{
	struct up_cluster_ranges *r = owner;

	if (!r->late_logged)
		log_warning("The deploy cluster %s has not told its service range in time: the "
			    "mitm of a session started now does not refuse it",
			    r->context);
	r->late_logged = true;
}

int up_cluster_ranges_wait(struct up_cluster_ranges *r, uint64_t timeout_ms, up_waiter_fn fn,
			   void *ud, struct up_waiter **ret)
{
	*ret = NULL;
	if (!r || r->state != RANGES_READING)
		return 0;
	return up_waiter_add(up_kube_loop(r->kube), &r->waits, timeout_ms, late, r, fn, ud, ret);
}

/* ---- the object ---- */

int up_cluster_ranges_new(struct up_kube *kube, const char *context, struct up_cluster_ranges **ret)
{
	struct up_cluster_ranges *r = calloc(1, sizeof(*r));

	if (!r || !(r->context = strdup(context ? context : "(default)"))) {
		free(r);
		return -ENOMEM;
	}
	r->kube = kube;
	up_list_init(&r->waits);
	*ret = r;
	return 0;
}

struct up_cluster_ranges *up_cluster_ranges_free(struct up_cluster_ranges *r)
{
	if (!r)
		return NULL;
	if (r->call)
		up_kube_cancel(r->call);
	wake_all(r, true);
	json_decref(r->cidrs);
	free(r->context);
	free(r);
	return NULL;
}
