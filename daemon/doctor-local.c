/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor.run's local checks, on a worker thread: the tools on PATH, whether dockerd
 * answers, k3s's registries.yaml, the Secret Service and the notification server on the
 * user bus, and each agent's host login (its doctor() hook).
 */
#include "doctor-local.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "bounds.h"
#include "fileio.h"
#include "k3s-registries.h"
#include "knobs.h"
#include "notify.h"
#include "proc.h"

/* Every agent's doctor() for the daemon's own user; how many checks were written. */
static size_t check_agents(struct up_agent_check *out, size_t max)
{
	struct up_agent_input in = {0};
	char buf[4096];
	size_t n = 0;

	if (up_agent_input_self(&in, buf, sizeof(buf)) < 0) {
		if (max > 0)
			up_agent_check_set(out, "agent logins", "skip", NULL,
					   "skipped: this user has no passwd entry");
		return max > 0;
	}
	for (size_t i = 0; up_agents[i] && n < max; i++)
		if (up_agents[i]->doctor) {
			size_t room = max - n < UP_AGENT_MAX_CHECKS ? max - n : UP_AGENT_MAX_CHECKS;
			n += up_agents[i]->doctor(up_agents[i], &in, out + n, room);
		}
	return n;
}

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

static void check_tools(struct up_doctor_local *l)
{
	const struct {
		const char *name;
		struct local_check *check;
		const char *fix, *use;
	} tools[] = {
		{"kubectl", &l->kubectl,
		 "install kubectl (sudo apt install kubernetes-client, or "
		 "https://kubernetes.io/docs/tasks/tools/) into a folder on PATH",
		 "uplink attach runs it"},
		{"docker", &l->docker,
		 "sudo apt install docker.io && sudo usermod -aG docker $USER (then log in again)",
		 "agent images are built with it"},
	};
	char path[PATH_MAX];

	for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
		if (find_in_path(tools[i].name, path, sizeof(path)))
			set(tools[i].check, "ok", NULL, "%s", path);
		else
			set(tools[i].check, "fail", tools[i].fix, "%s is not on PATH (%s); %s",
			    tools[i].name, up_knobs()->path ? up_knobs()->path : "unset",
			    tools[i].use);
	}
}

/* What only some flags need: each missing one is said with the flag it serves. */
static void check_optional_tools(struct up_doctor_local *l)
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

static void check_docker_daemon(struct up_doctor_local *l)
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

/* What a verdict of up_k3s_registries_check() says, in `buf`; NULL: all is well. */
static const char *registries_problem(const struct up_k3s_check *c, char *buf, size_t len)
{
	switch (c->verdict) {
	case UP_K3S_MISSING:
		(void)snprintf(buf, len,
			       "%s does not exist: the local k3s cannot pull agent images from "
			       "localhost:5000",
			       c->path);
		break;
	case UP_K3S_UNREADABLE:
		(void)snprintf(buf, len, "cannot read %s: %s", c->path, strerror(-c->err));
		break;
	case UP_K3S_INVALID:
		(void)snprintf(buf, len, "%s is not valid YAML: %s", c->path, c->yaml_error);
		break;
	case UP_K3S_NO_MIRROR:
		(void)snprintf(
			buf, len,
			"%s has no mirror for localhost:5000: the local k3s cannot pull agent "
			"images",
			c->path);
		break;
	default: return NULL;
	}
	return buf;
}

static void check_registries(struct up_doctor_local *l)
{
	struct up_k3s_check c;
	char fix[1024], buf[1024];
	const char *problem;

	up_k3s_registries_check(l->server, &c);
	if (c.verdict == UP_K3S_SKIPPED) {
		set(&l->registries, "skip", NULL,
		    "skipped: the deploy cluster is not a local k3s (%s)",
		    l->server[0] ? l->server : "unknown");
		return;
	}
	problem = registries_problem(&c, buf, sizeof(buf));
	if (!problem) {
		set(&l->registries, "ok", NULL, "%s has a mirror for localhost:5000", c.path);
		return;
	}
	(void)snprintf(fix, sizeof(fix),
		       "write this to %s, then restart k3s (sudo systemctl restart k3s):\n%s",
		       c.path, UP_K3S_REGISTRIES_YAML);
	set(&l->registries, "fail", fix, "%s", problem);
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

static void check_secrets(struct up_doctor_local *l, sd_bus *bus)
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

static void check_notification_server(struct up_doctor_local *l, sd_bus *bus)
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

static void check_user_bus(struct up_doctor_local *l)
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

void up_doctor_local_run(struct up_doctor_local *l)
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
	l->n_agents = check_agents(l->agents, UP_DOCTOR_MAX_AGENT_CHECKS);
}
