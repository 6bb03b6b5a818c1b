/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor.run: what stands between this machine and a working session, one check at
 * a time, each with the exact fix. The Kubernetes checks run on the loop, one call
 * after another; then the local ones (PATH, `docker version`, registries.yaml, the
 * user bus, the agents' logins: doctor-local.c) run on a worker thread, since they read
 * files, spawn and block on D-Bus.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "config.h"
#include "doctor-local.h"
#include "knobs.h"
#include "kube.h"
#include "bounds.h"
#include "manager.h"
#include "manifests.h"
#include "protocol.h"
#include "rpc.h"

struct doctor_params {
	const char *deploy_context;
	const char *kubeconfig;
	const char *runtime_class;
	const char *client_version;
};

static const struct up_param doctor_params[] = {
	{"deploy_context", UP_PARAM_STRING, offsetof(struct doctor_params, deploy_context),
	 UP_PARAM_NULLABLE, NULL},
	{"kubeconfig", UP_PARAM_STRING, offsetof(struct doctor_params, kubeconfig),
	 UP_PARAM_NULLABLE, NULL},
	{"runtime_class", UP_PARAM_STRING, offsetof(struct doctor_params, runtime_class),
	 UP_PARAM_NULLABLE, NULL},
	{"client_version", UP_PARAM_STRING, offsetof(struct doctor_params, client_version),
	 UP_PARAM_NULLABLE, NULL},
	{0},
};

struct doctor {
	struct up_request *req;
	struct up_manager *m;
	uv_loop_t *loop;
	json_t *checks;
	struct up_kube *kube;
	struct up_kube_call *call;
	char *runtime_class;
	char *client_version;
	bool cancelled, loading, working;
	bool api_reachable;
	char k8s_version[128];
	uv_work_t work;
	struct up_doctor_local local; /* filled on the worker thread */
};

static void add(struct doctor *d, const char *name, const char *status, const char *fix,
		const char *fmt, ...) _printf_(5, 6);
static void add(struct doctor *d, const char *name, const char *status, const char *fix,
		const char *fmt, ...)
{
	char detail[1200];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	(void)json_array_append_new(d->checks,
				    json_pack("{s:s, s:s, s:s, s:s?}", "name", name, "status",
					      status, "detail", detail, "fix", fix));
}

static void skip_rest(struct doctor *d, const char *const *names, const char *why)
{
	for (; *names; names++)
		add(d, *names, "skip", NULL, "skipped: %s", why);
}

static void finish(struct doctor *d)
{
	bool ok = true;
	size_t i;
	json_t *c;

	json_array_foreach (d->checks, i, c)
		ok &= strcmp(json_string_value(json_object_get(c, "status")), "fail") != 0;
	if (d->req)
		up_request_reply(d->req, json_pack("{s:b, s:O}", "ok", ok, "checks", d->checks));
	json_decref(d->checks);
	up_kube_free(d->kube);
	free(d->runtime_class);
	free(d->client_version);
	free(d);
}

static void add_local(struct doctor *d, const struct local_check *c)
{
	add(d, c->name, c->status, c->fix[0] ? c->fix : NULL, "%s", c->detail);
}

/* Whether the cluster enforces NetworkPolicy: k3s does; of others we cannot tell. */
static void check_network_policy(struct doctor *d)
{
	if (!d->api_reachable)
		add(d, "network policy", "skip", NULL, "skipped: the API server cannot be reached");
	else if (strstr(d->k8s_version, "k3s"))
		add(d, "network policy", "ok", NULL,
		    "k3s (%s) enforces NetworkPolicy with its embedded controller, unless it runs "
		    "with --disable-network-policy",
		    d->k8s_version);
	else
		add(d, "network policy", "warn",
		    "make sure the cluster's network plugin enforces NetworkPolicy (k3s's embedded "
		    "controller, Calico or Cilium do; flannel alone does not)",
		    "cannot tell whether this cluster (Kubernetes %s) enforces NetworkPolicy; "
		    "without it an agent's traffic can bypass the proxy",
		    d->k8s_version[0] ? d->k8s_version : "of unknown version");
}

static void check_version(struct doctor *d)
{
	struct up_manager_info info;

	up_manager_get_info(d->m, &info);
	if (!d->client_version)
		add(d, "uplinkd", "skip", NULL, "skipped: the client did not say its version");
	else if (strcmp(d->client_version, UPLINK_VERSION) != 0)
		add(d, "uplinkd", "fail",
		    "restart uplinkd so that it runs the installed version: systemctl --user "
		    "restart "
		    "uplinkd",
		    "uplinkd is version %s but the client is %s", UPLINK_VERSION,
		    d->client_version);
	else if (!info.activated)
		add(d, "uplinkd", "warn", "systemctl --user enable --now uplinkd.socket",
		    "version %s, the client's; started directly, not by socket activation (it will "
		    "not come back on its own)",
		    UPLINK_VERSION);
	else
		add(d, "uplinkd", "ok", NULL, "version %s, the client's; socket-activated%s",
		    UPLINK_VERSION, info.watchdog ? ", watchdog on" : "");
}

static void on_local_work(uv_work_t *w)
{
	struct doctor *d = w->data;

	up_doctor_local_run(&d->local);
}

static void on_local_done(uv_work_t *w, int status)
{
	struct doctor *d = w->data;
	const struct up_doctor_local *l = &d->local;

	d->working = false;
	if (status < 0) {
		add(d, "local checks", "fail", NULL, "cannot run them: %s", uv_strerror(status));
		finish(d);
		return;
	}
	add_local(d, &l->kubectl);
	add_local(d, &l->docker);
	add_local(d, &l->docker_daemon);
	add_local(d, &l->optional);
	check_network_policy(d);
	add_local(d, &l->registries);
	add_local(d, &l->secrets);
	add_local(d, &l->notifications);
	for (size_t i = 0; i < l->n_agents; i++)
		add(d, l->agents[i].name, l->agents[i].status,
		    l->agents[i].fix[0] ? l->agents[i].fix : NULL, "%s", l->agents[i].detail);
	check_version(d);
	finish(d);
}

/* The Kubernetes checks are done: the local ones follow, off the loop. */
static void kube_done(struct doctor *d)
{
	int r;

	if (!d->req) {
		finish(d);
		return;
	}
	d->work.data = d;
	r = uv_queue_work(d->loop, &d->work, on_local_work, on_local_done);
	if (r < 0) {
		add(d, "local checks", "fail", NULL, "cannot run them: %s", uv_strerror(r));
		finish(d);
		return;
	}
	d->working = true;
}

/* The in-cluster registry agent images are pushed to (uplink run sets it up on first use). */
static void on_registry(const struct up_kube_error *err, json_t *dep, void *ud)
{
	struct doctor *d = ud;
	json_t *st = json_object_get(dep, "status");

	d->call = NULL;
	if (err && err->code == 404)
		add(d, "registry", "ok", NULL,
		    "not deployed yet: the first uplink run sets up "
		    "agent-uplink-system and its registry");
	else if (err)
		add(d, "registry", "warn", NULL, "cannot tell: %s", err->message);
	else if (json_integer_value(json_object_get(st, "availableReplicas")) >= 1)
		add(d, "registry", "ok", NULL, "agent-uplink-system's registry is available");
	else
		add(d, "registry", "fail",
		    "see why it does not start: kubectl -n agent-uplink-system describe pods -l "
		    "app=registry",
		    "agent-uplink-system's registry is deployed but not available");
	kube_done(d);
}

static void on_runtime_class(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct doctor *d = ud;
	char fix[300];

	(void)obj;
	d->call = NULL;
	(void)snprintf(
		fix, sizeof(fix),
		"install Kata Containers on the cluster (kata-deploy creates RuntimeClass %s), "
		"or pass --agent-runtime-class with one that exists",
		d->runtime_class);
	if (!err)
		add(d, "runtime class", "ok", NULL, "RuntimeClass %s exists", d->runtime_class);
	else if (err->code == 404)
		add(d, "runtime class", "fail", fix,
		    "RuntimeClass %s does not exist: agents would run "
		    "without a microVM",
		    d->runtime_class);
	else
		add(d, "runtime class", "warn", NULL, "cannot tell: %s", err->message);
	if (up_kube_get(d->kube, UP_REGISTRY_DEPLOYMENT_PATH, on_registry, d, &d->call) < 0)
		kube_done(d);
}

static void on_namespaces(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct doctor *d = ud;
	const struct up_kube_context *ctx = up_kube_get_context(d->kube);
	static const char *const rest[] = {"runtime class", "registry", NULL};
	char path[256];

	(void)obj;
	d->call = NULL;
	if (err && err->code == 403) {
		add(d, "credentials", "fail",
		    "give that user cluster-admin on the deploy cluster, or use a context that has "
		    "it",
		    "accepted, but user %s may not list namespaces; uplink creates namespaces, "
		    "pods, "
		    "secrets and network policies",
		    ctx->user ? ctx->user : "(anonymous)");
		skip_rest(d, rest, "the credentials lack permissions");
		kube_done(d);
		return;
	}
	if (err) {
		add(d, "credentials", "fail",
		    err->code == 401 ? "renew the credentials of that context (for k3s: copy "
				       "/etc/rancher/k3s/k3s.yaml again)"
				     : NULL,
		    "%s", err->message);
		skip_rest(d, rest, "the credentials were not accepted");
		kube_done(d);
		return;
	}
	add(d, "credentials", "ok", NULL, "accepted (user %s)",
	    ctx->user ? ctx->user : "(anonymous)");
	if (up_kube_path(path, sizeof(path), "RuntimeClass", NULL, d->runtime_class) < 0 ||
	    up_kube_get(d->kube, path, on_runtime_class, d, &d->call) < 0) {
		add(d, "runtime class", "fail", NULL, "'%s' is not a valid RuntimeClass name",
		    d->runtime_class);
		kube_done(d);
	}
}

static void on_version(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct doctor *d = ud;
	const struct up_kube_context *ctx = up_kube_get_context(d->kube);
	static const char *const rest[] = {"credentials", "runtime class", "registry", NULL};
	char fix[512];

	d->call = NULL;
	if (err && err->code == 0) {
		(void)snprintf(
			fix, sizeof(fix),
			"check that the cluster runs (k3s: sudo systemctl status k3s) and that %s "
			"is reachable from this machine",
			ctx->server);
		add(d, "API server", "fail", fix, "%s", err->message);
		skip_rest(d, rest, "the API server cannot be reached");
		kube_done(d);
		return;
	}
	d->api_reachable = true;
	if (!err && json_is_string(json_object_get(obj, "gitVersion")))
		(void)snprintf(d->k8s_version, sizeof(d->k8s_version), "%s",
			       json_string_value(json_object_get(obj, "gitVersion")));
	if (err)
		add(d, "API server", "ok", NULL, "reachable at %s (version hidden: %s)",
		    ctx->server, err->reason[0] ? err->reason : "refused");
	else
		add(d, "API server", "ok", NULL, "reachable at %s, Kubernetes %s", ctx->server,
		    json_is_string(json_object_get(obj, "gitVersion"))
			    ? json_string_value(json_object_get(obj, "gitVersion"))
			    : "(unknown version)");
	if (up_kube_get(d->kube, "/api/v1/namespaces?limit=1", on_namespaces, d, &d->call) < 0) {
		add(d, "credentials", "fail", NULL, "out of memory");
		kube_done(d);
	}
}

static void on_loaded(int r, const char *error, struct up_kube_context *ctx, void *ud)
{
	struct doctor *d = ud;
	static const char *const rest[] = {"API server", "credentials", "runtime class", "registry",
					   NULL};

	d->loading = false;
	if (d->cancelled) {
		up_kube_context_free(ctx);
		kube_done(d);
		return;
	}
	if (r < 0) {
		bool found = strstr(error, "no kubeconfig found") == NULL &&
			     strstr(error, "is not valid YAML") == NULL &&
			     strstr(error, "cannot read kubeconfig") == NULL;
		if (found)
			add(d, "kubeconfig", "ok", NULL, "found and readable");
		add(d, found ? "deploy context" : "kubeconfig", "fail",
		    found ? "pass --deploy-context NAME with one of the known contexts, or name "
			    "your "
			    "cluster's context local-k8s-admin"
			  : "point KUBECONFIG at your cluster's kubeconfig (k3s: sudo cp "
			    "/etc/rancher/k3s/k3s.yaml ~/.kube/config && sudo chown $USER "
			    "~/.kube/config)",
		    "%s", error);
		if (!found)
			add(d, "deploy context", "skip", NULL, "skipped: no kubeconfig");
		skip_rest(d, rest, "no usable deploy context");
		kube_done(d);
		return;
	}
	(void)snprintf(d->local.server, sizeof(d->local.server), "%s",
		       ctx->server ? ctx->server : "");
	add(d, "kubeconfig", "ok", NULL, "%s", ctx->file);
	add(d, "deploy context", "ok", NULL, "%s (cluster %s, user %s)", ctx->name, ctx->cluster,
	    ctx->user ? ctx->user : "(anonymous)");
	if (ctx->insecure)
		add(d, "TLS", "warn", "set certificate-authority-data for that cluster",
		    "insecure-skip-tls-verify is set: the API server's identity is not checked");
	r = up_kube_new(d->loop, ctx, &d->kube);
	if (r < 0) {
		up_kube_context_free(ctx);
		add(d, "API server", "fail", NULL, "cannot set up a client: %s", strerror(-r));
		kube_done(d);
		return;
	}
	if (up_kube_get(d->kube, "/version", on_version, d, &d->call) < 0) {
		add(d, "API server", "fail", NULL, "out of memory");
		kube_done(d);
	}
}

static void on_cancel(struct up_request *req, void *ud)
{
	struct doctor *d = ud;

	(void)req;
	/* The client left: stop, and let the RPC layer drop the request. */
	d->req = NULL;
	up_kube_cancel(d->call);
	d->call = NULL;
	if (d->loading)
		d->cancelled = true; /* on_loaded() frees */
	else
		kube_done(d);
}

static int rpc_doctor(struct up_request *req, void *params, void *userdata)
{
	struct doctor_params *p = params;
	struct doctor *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return -ENOMEM;
	d->req = req;
	d->m = userdata;
	d->loop = up_manager_loop(userdata);
	d->client_version = p->client_version ? strdup(p->client_version) : NULL;
	d->checks = json_array();
	d->runtime_class = strdup(p->runtime_class ? p->runtime_class : "kata-clh");
	d->loading = true;
	r = up_kubeconfig_load_async(d->loop, p->kubeconfig, p->deploy_context, on_loaded, d);
	if (r < 0) {
		json_decref(d->checks);
		free(d->runtime_class);
		free(d->client_version);
		free(d);
		return r;
	}
	up_request_set_cancel(req, on_cancel, d);
	return 0;
}

static const struct up_method doctor_methods[] = {
	{"doctor.run", doctor_params, sizeof(struct doctor_params), rpc_doctor},
	{0},
};

int up_rpc_doctor_register(struct up_rpc *rpc, struct up_manager *m)
{
	return up_rpc_register(rpc, doctor_methods, m);
}
