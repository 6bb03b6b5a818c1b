/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor.run: what stands between this machine and a working session, one check at
 * a time, each with the exact fix. The Kubernetes checks run on the loop, one call
 * after another; then the local ones (PATH, `docker version`, registries.yaml, the
 * user bus) run on a worker thread, since they read files, spawn and block on D-Bus.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "config.h"
#include "doctor-agents.h"
#include "k3s-registries.h"
#include "knobs.h"
#include "kube.h"
#include "bounds.h"
#include "fileio.h"
#include "kubeconfig.h"
#include "manager.h"
#include "manifests.h"
#include "notify.h"
#include "proc.h"
#include "protocol.h"
#include "rpc.h"
#include "yaml-json.h"

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

/* ---- local checks, run on a worker thread: they read files, spawn and block on D-Bus ---- */

struct local_check {
	const char *name, *status;
	char detail[1024];
	char fix[1024];
};

struct local {
	char server[512]; /* the deploy cluster's API server, "" if unknown */
	struct local_check kubectl, docker, docker_daemon, optional, registries, secrets,
		notifications;
	struct up_agent_check agents[UP_DOCTOR_MAX_AGENT_CHECKS];
	size_t n_agents;
};

static void set(struct local_check *c, const char *status, const char *fix, const char *fmt, ...)
	_printf_(4, 5);
static void set(struct local_check *c, const char *status, const char *fix, const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	(void)snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	(void)vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
}

static bool find_in_path(const char *name, char *out, size_t len)
{
	const char *path = up_knobs()->path;

	for (const char *p = path ? path : ""; *p;) {
		size_t n = strcspn(p, ":");

		if (n > 0 && (size_t)snprintf(out, len, "%.*s/%s", (int)n, p, name) < len &&
		    access(out, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

static void check_tools(struct local *l)
{
	char path[PATH_MAX];

	if (find_in_path("kubectl", path, sizeof(path)))
		set(&l->kubectl, "ok", NULL, "%s", path);
	else
		set(&l->kubectl, "fail",
		    "install kubectl (sudo apt install kubernetes-client, or "
		    "https://kubernetes.io/docs/tasks/tools/) into a folder on PATH",
		    "kubectl is not on PATH (%s); uplink attach runs it",
		    up_knobs()->path ? up_knobs()->path : "unset");
	if (find_in_path("docker", path, sizeof(path)))
		set(&l->docker, "ok", NULL, "%s", path);
	else
		set(&l->docker, "fail",
		    "sudo apt install docker.io && sudo usermod -aG docker $USER (then log in "
		    "again)",
		    "docker is not on PATH (%s); agent images are built with it",
		    up_knobs()->path ? up_knobs()->path : "unset");
}

/* What only some flags need: each missing one is said with the flag it serves. */
static void check_optional_tools(struct local *l)
{
	static const struct {
		const char *tool, *serves, *package;
	} tools[] = {
		{"git", "your git identity in the agent", "git"},
		{"ssh-keygen", "--ssh-key-dir", "openssh-client"},
		{"aws", "--aws-profiles", "awscli"},
	};
	char path[PATH_MAX], found[512] = "", missing[512] = "", fix[256] = "";
	size_t nf = 0, nm = 0, nx = 0;

	for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
		bool ok = find_in_path(tools[i].tool, path, sizeof(path));
		if (ok)
			nf += (size_t)snprintf(found + nf, sizeof(found) - nf, "%s%s",
					       nf ? ", " : "", tools[i].tool);
		else {
			nm += (size_t)snprintf(missing + nm, sizeof(missing) - nm, "%s%s (for %s)",
					       nm ? ", " : "", tools[i].tool, tools[i].serves);
			nx += (size_t)snprintf(fix + nx, sizeof(fix) - nx, "%s%s", nx ? " " : "",
					       tools[i].package);
		}
		nf = nf < sizeof(found) ? nf : sizeof(found) - 1;
		nm = nm < sizeof(missing) ? nm : sizeof(missing) - 1;
		nx = nx < sizeof(fix) ? nx : sizeof(fix) - 1;
	}
	if (!missing[0])
		set(&l->optional, "ok", NULL, "%s", found);
	else
		set(&l->optional, "warn", NULL,
		    "not on uplinkd's PATH: %s; the rest works without %s", missing,
		    nm && strchr(missing, ',') ? "them" : "it");
	if (missing[0])
		(void)snprintf(l->optional.fix, sizeof(l->optional.fix),
			       "sudo apt install %s (needed only for what is named above)", fix);
}

static void check_docker_daemon(struct local *l)
{
	char fmt[] = "{{.Server.Version}}", docker[] = "docker", version[] = "version",
	     f[] = "--format";
	char *argv[] = {docker, version, f, fmt, NULL};
	const char *host = up_knobs()->docker_host;
	char out[UP_DOCTOR_OUTPUT_MAX], fix[600];
	char *line = out;
	int status = 0, r;

	if (!streq(l->docker.status, "ok")) {
		set(&l->docker_daemon, "skip", NULL, "skipped: docker is not on PATH");
		return;
	}
	if (host && *host)
		(void)snprintf(fix, sizeof(fix),
			       "start the Docker daemon that DOCKER_HOST names (%s), "
			       "or unset DOCKER_HOST",
			       host);
	else
		(void)snprintf(fix, sizeof(fix),
			       "start the Docker daemon (sudo systemctl enable --now "
			       "docker) and let your user use it (sudo usermod -aG "
			       "docker $USER, then log in again)");
	r = up_run_capture(argv, UP_DOCTOR_EXEC_TIMEOUT_MS, true, out, sizeof(out), &status);
	/* The first line that says something: with --format, docker prints an empty one first. */
	line += strspn(line, " \t\r\n");
	line[strcspn(line, "\r\n")] = '\0';
	if (r == -ETIMEDOUT)
		set(&l->docker_daemon, "fail", fix, "`docker version` did not answer within %d s",
		    UP_DOCTOR_EXEC_TIMEOUT_MS / 1000);
	else if (r < 0)
		set(&l->docker_daemon, "fail", fix, "cannot run docker: %s", strerror(-r));
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line[0])
		set(&l->docker_daemon, "fail", fix, "the Docker daemon does not answer: %s",
		    line[0] ? line : "docker version failed");
	else
		set(&l->docker_daemon, "ok", NULL, "Docker %s answers%s%s", line,
		    host && *host ? " at " : "", host && *host ? host : "");
}

static void check_registries(struct local *l)
{
	struct up_k3s_check c;
	char fix[1024];

	up_k3s_registries_check(l->server, &c);
	if (c.verdict == UP_K3S_SKIPPED) {
		set(&l->registries, "skip", NULL,
		    "skipped: the deploy cluster is not a local k3s (%s)",
		    l->server[0] ? l->server : "unknown");
		return;
	}
	(void)snprintf(fix, sizeof(fix),
		       "write this to %s, then restart k3s (sudo systemctl restart "
		       "k3s):\n%s",
		       c.path, UP_K3S_REGISTRIES_YAML);
	switch (c.verdict) {
	case UP_K3S_MISSING:
		set(&l->registries, "fail", fix,
		    "%s does not exist: the local k3s cannot pull agent "
		    "images from localhost:5000",
		    c.path);
		break;
	case UP_K3S_UNREADABLE:
		set(&l->registries, "fail", fix, "cannot read %s: %s", c.path, strerror(-c.err));
		break;
	case UP_K3S_INVALID:
		set(&l->registries, "fail", fix, "%s is not valid YAML: %s", c.path, c.yaml_error);
		break;
	case UP_K3S_NO_MIRROR:
		set(&l->registries, "fail", fix,
		    "%s has no mirror for localhost:5000: the local k3s "
		    "cannot pull agent images",
		    c.path);
		break;
	default: set(&l->registries, "ok", NULL, "%s has a mirror for localhost:5000", c.path);
	}
}

/* NameHasOwner(name) on the bus: 1, 0, or -errno. */
static int dbus_bool_call(sd_bus *bus, const char *method, const char *name)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	int r, b = 0;

	r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
			       "org.freedesktop.DBus", method, &e, &reply, "s", name);
	if (r >= 0)
		r = sd_bus_message_read(reply, "b", &b);
	sd_bus_error_free(&e);
	(void)sd_bus_message_unref(reply);
	return r < 0 ? r : b;
}

static bool activatable(sd_bus *bus, const char *name)
{
	sd_bus_message *reply = NULL;
	char **names = NULL;
	bool found = false;

	if (sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
			       "org.freedesktop.DBus", "ListActivatableNames", NULL, &reply,
			       "") >= 0 &&
	    sd_bus_message_read_strv(reply, &names) >= 0)
		for (char **p = names; *p; p++) {
			found |= streq(*p, name);
			free(*p);
		}
	free(names);
	(void)sd_bus_message_unref(reply);
	return found;
}

#define SECRETS_UNLOCK                                                            \
	"log in to your desktop session (it unlocks the login keyring), or run: " \
	"echo -n YOUR_PASSWORD | gnome-keyring-daemon --replace --unlock --components=secrets"

static void check_secrets(struct local *l, sd_bus *bus)
{
	const char *store = up_knobs()->secret_store;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *coll = NULL;
	int r, locked = 1;

	if (store && *store && !streq(store, "libsecret")) {
		set(&l->secrets, "skip", NULL, "skipped: UPLINK_SECRET_STORE=%s", store);
		return;
	}
	r = dbus_bool_call(bus, "NameHasOwner", "org.freedesktop.secrets");
	if (r <= 0) {
		bool act = r == 0 && activatable(bus, "org.freedesktop.secrets");
		set(&l->secrets, "warn",
		    act ? SECRETS_UNLOCK : "sudo apt install gnome-keyring, then " SECRETS_UNLOCK,
		    act ? "the Secret Service is not running; D-Bus would start it locked, so "
			  "{{keyring:...}} rules would fail"
			: "no Secret Service on the user bus: {{keyring:...}} rules cannot be "
			  "resolved");
		return;
	}
	r = sd_bus_call_method(bus, "org.freedesktop.secrets", "/org/freedesktop/secrets",
			       "org.freedesktop.Secret.Service", "ReadAlias", &e, &reply, "s",
			       "default");
	if (r >= 0)
		r = sd_bus_message_read(reply, "o", &coll);
	if (r >= 0 && streq(coll, "/")) {
		set(&l->secrets, "warn", SECRETS_UNLOCK,
		    "the Secret Service has no default collection");
	} else if (r >= 0) {
		r = sd_bus_get_property_trivial(bus, "org.freedesktop.secrets", coll,
						"org.freedesktop.Secret.Collection", "Locked", &e,
						'b', &locked);
		if (r >= 0 && locked)
			set(&l->secrets, "warn", SECRETS_UNLOCK,
			    "the default collection (%s) is locked: "
			    "{{keyring:...}} rules would fail",
			    coll);
		else if (r >= 0)
			set(&l->secrets, "ok", NULL,
			    "reachable; the default collection (%s) is unlocked", coll);
	}
	if (r < 0)
		set(&l->secrets, "warn", SECRETS_UNLOCK, "the Secret Service does not answer: %s",
		    e.message ? e.message : strerror(-r));
	sd_bus_error_free(&e);
	(void)sd_bus_message_unref(reply);
}

#define NOTIFY_FIX                                                                   \
	"run a notification server in your desktop session (your desktop's own, or " \
	"dunst or mako: sudo apt install dunst)"

static void check_notification_server(struct local *l, sd_bus *bus)
{
	const char *off = up_knobs()->notifications;
	const char *name = NULL, *vendor = NULL, *version = NULL, *spec = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	int r;

	if (off && (streq(off, "0") || streq(off, "false") || streq(off, "no"))) {
		set(&l->notifications, "skip", NULL, "skipped: turned off (%s=%s)", UP_NOTIFY_ENV,
		    off);
		return;
	}
	r = dbus_bool_call(bus, "NameHasOwner", "org.freedesktop.Notifications");
	if (r == 0 && activatable(bus, "org.freedesktop.Notifications")) {
		set(&l->notifications, "ok", NULL, "D-Bus starts a notification server on demand");
		return;
	}
	if (r <= 0) {
		set(&l->notifications, "warn", NOTIFY_FIX,
		    "no notification server on the user bus: notifications go to uplinkd's log");
		return;
	}
	r = sd_bus_call_method(bus, "org.freedesktop.Notifications",
			       "/org/freedesktop/Notifications", "org.freedesktop.Notifications",
			       "GetServerInformation", &e, &reply, "");
	if (r >= 0)
		r = sd_bus_message_read(reply, "ssss", &name, &vendor, &version, &spec);
	if (r >= 0)
		set(&l->notifications, "ok", NULL, "%s %s (%s)", name, version, vendor);
	else
		set(&l->notifications, "warn", NOTIFY_FIX,
		    "the notification server does not answer: %s",
		    e.message ? e.message : strerror(-r));
	sd_bus_error_free(&e);
	(void)sd_bus_message_unref(reply);
}

static void check_user_bus(struct local *l)
{
	sd_bus *bus = NULL;
	int r;

	r = sd_bus_open_user(&bus);
	if (r < 0) {
		static const char fix[] =
			"run uplinkd inside your desktop session, where "
			"DBUS_SESSION_BUS_ADDRESS (or $XDG_RUNTIME_DIR/bus) leads "
			"to the user bus";
		set(&l->secrets, "warn", fix,
		    "no user D-Bus (%s): {{keyring:...}} rules cannot be "
		    "resolved",
		    strerror(-r));
		set(&l->notifications, "warn", fix,
		    "no user D-Bus (%s): notifications go to uplinkd's "
		    "log",
		    strerror(-r));
		return;
	}
	(void)sd_bus_set_method_call_timeout(bus, (uint64_t)UP_DOCTOR_DBUS_TIMEOUT_MS * 1000u);
	check_secrets(l, bus);
	check_notification_server(l, bus);
	(void)sd_bus_flush_close_unref(bus);
}

static void local_run(struct local *l)
{
	l->kubectl.name = "kubectl";
	l->docker.name = "docker";
	l->docker_daemon.name = "docker daemon";
	l->optional.name = "optional tools";
	l->registries.name = "registries.yaml";
	l->secrets.name = "Secret Service";
	l->notifications.name = "notifications";
	check_tools(l);
	check_docker_daemon(l);
	check_optional_tools(l);
	check_registries(l);
	check_user_bus(l);
	l->n_agents = up_doctor_agents(l->agents, UP_DOCTOR_MAX_AGENT_CHECKS);
}

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
	struct local local; /* filled on the worker thread */
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

	local_run(&d->local);
}

static void on_local_done(uv_work_t *w, int status)
{
	struct doctor *d = w->data;
	const struct local *l = &d->local;

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
