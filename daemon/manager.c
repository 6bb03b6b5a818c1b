/* SPDX-License-Identifier: Apache-2.0 */
#include "manager.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "bounds.h"
#include "cluster.h"
#include "session.h"
#include "approvals.h"
#include "log.h"
#include "notify.h"
#include "paths.h"
#include "protocol.h"
#include "rpc.h"
#include "server.h"

/* How long a clean shutdown waits for slow clients to take their last answers. */
#define UP_SHUTDOWN_FLUSH_MS 3000

struct up_manager {
	struct up_sessions *sessions; /* and through them, the deploy clusters */
	uv_loop_t loop;
	bool loop_ready;
	struct up_rpc *rpc;
	struct up_server *server;
	struct up_notifier *notifier; /* NULL: notifications off, or stopping */
	uv_signal_t sig_term, sig_int;
	uv_timer_t watchdog, stop_timer;
	bool handles_ready;
	uint64_t watchdog_usec;
	uint64_t started;
	int lock_fd;
	char socket_path[UP_MAX_SOCKET_PATH + 1];
	bool activated;
	bool bound; /* we created the socket file and remove it at exit */
	bool stopping;
};

int up_manager_new(struct up_manager **ret)
{
	struct up_manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->lock_fd = -1;
	r = uv_loop_init(&m->loop);
	if (r < 0) {
		free(m);
		return r;
	}
	m->loop_ready = true;
	m->started = uv_now(&m->loop);
	m->rpc = up_rpc_new();
	if (!m->rpc) {
		(void)up_manager_free(m);
		return -ENOMEM;
	}
	*ret = m;
	return 0;
}

/* Every RPC domain, registered at start-up: its table, or the function that registers it. */
static const struct {
	const struct up_method *methods;
	int (*reg)(struct up_rpc *rpc, struct up_manager *m);
} rpc_domains[] = {
	{up_rpc_daemon_methods, NULL},	   {up_rpc_rules_methods, NULL},
	{NULL, up_rpc_doctor_register},	   {up_rpc_session_methods, NULL},
	{NULL, up_rpc_approvals_register}, {up_rpc_config_methods, NULL},
	{NULL, up_rpc_debug_register}, /* only with UPLINK_DEBUG_RPC=1 */
};

static int take_lock(struct up_manager *m)
{
	char path[PATH_MAX], pid[32] = "";
	int r;

	r = up_lock_path(m->socket_path, path, sizeof(path));
	if (r < 0)
		return log_error_errno(r, "The socket path %s is too long", m->socket_path);
	m->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (m->lock_fd < 0)
		return log_error_errno(-errno, "Cannot open the lock file %s", path);
	if (flock(m->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		if (r != -EWOULDBLOCK)
			return log_error_errno(r, "Cannot lock %s", path);
		ssize_t n = pread(m->lock_fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
		log_error("Another uplinkd (pid %s) is already running for this user and holds %s. "
			  "Use it, or stop it first (systemctl --user stop uplinkd), "
			  "or point UPLINK_SOCKET elsewhere.",
			  *pid ? pid : "unknown", path);
		return -EALREADY;
	}
	(void)snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(m->lock_fd, 0) < 0 || pwrite(m->lock_fd, pid, strlen(pid), 0) < 0)
		log_warning_errno(-errno, "Cannot write our pid to %s, ignoring", path);
	return 0;
}

/* The socket systemd passed, if any; its path is where the lock file goes. */
static int activated_socket(struct up_manager *m, int *fd)
{
	struct sockaddr_un sa = {0}; /* an unnamed socket leaves sun_path as it was */
	socklen_t len = sizeof(sa);
	int n = sd_listen_fds(1);
	size_t plen;

	if (n < 0)
		return log_error_errno(n, "Cannot read the sockets systemd passed");
	if (n == 0)
		return 0;
	if (n > 1)
		return log_error_errno(-EINVAL,
				       "systemd passed %d sockets, uplinkd takes one; "
				       "check uplinkd.socket",
				       n);
	*fd = SD_LISTEN_FDS_START;
	if (sd_is_socket_unix(*fd, SOCK_STREAM, 1, NULL, 0) <= 0)
		return log_error_errno(-EINVAL, "systemd passed a socket that is not a listening "
						"Unix stream socket; check uplinkd.socket");
	/* sun_path need not end in a NUL when it fills the field. */
	if (getsockname(*fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_path[0] &&
	    (plen = strnlen(sa.sun_path, sizeof(sa.sun_path))) <= UP_MAX_SOCKET_PATH) {
		memcpy(m->socket_path, sa.sun_path, plen);
		m->socket_path[plen] = '\0';
	}
	m->activated = true;
	return 1;
}

static int prepare_socket_dir(struct up_manager *m)
{
	char dir[sizeof(m->socket_path)];
	char *slash;
	struct stat st;
	int r;

	memcpy(dir, m->socket_path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	r = up_mkdir_parents(m->socket_path, 0700);
	if (r < 0)
		return log_error_errno(r, "Cannot create the folder of %s", m->socket_path);
	if (stat(dir, &st) < 0)
		return log_error_errno(-errno, "Cannot inspect %s", dir);
	if (st.st_uid != getuid())
		return log_error_errno(-EPERM,
				       "%s belongs to uid %u, not to us (uid %u); "
				       "remove it or set UPLINK_SOCKET",
				       dir, (unsigned)st.st_uid, (unsigned)getuid());
	return 0;
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct up_manager *m = h->data;

	up_manager_stop(m, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	(void)sd_notify(0, "WATCHDOG=1");
}

static int arm_handles(struct up_manager *m)
{
	int r;

	(void)uv_signal_init(&m->loop, &m->sig_term);
	(void)uv_signal_init(&m->loop, &m->sig_int);
	(void)uv_timer_init(&m->loop, &m->watchdog);
	(void)uv_timer_init(&m->loop, &m->stop_timer);
	m->sig_term.data = m->sig_int.data = m->watchdog.data = m->stop_timer.data = m;
	m->handles_ready = true;
	r = uv_signal_start(&m->sig_term, on_signal, SIGTERM);
	if (r >= 0)
		r = uv_signal_start(&m->sig_int, on_signal, SIGINT);
	if (r < 0)
		return log_error_errno(r, "Cannot watch for signals");
	if (sd_watchdog_enabled(1, &m->watchdog_usec) > 0 && m->watchdog_usec > 0) {
		uint64_t every = m->watchdog_usec / 2000;
		(void)uv_timer_start(&m->watchdog, on_watchdog, every ? every : 1,
				     every ? every : 1);
		log_debug("Watchdog enabled: pinging every %" PRIu64 " ms", every);
	}
	return 0;
}

int up_manager_start(struct up_manager *m)
{
	int fd = -1, r;

	(void)signal(SIGPIPE, SIG_IGN);
	r = activated_socket(m, &fd);
	if (r < 0)
		return r;
	if (!m->activated || !m->socket_path[0]) {
		r = up_socket_path(m->socket_path, sizeof(m->socket_path));
		if (r < 0)
			return log_error_errno(r,
					       "The socket path is longer than %d bytes; "
					       "set UPLINK_SOCKET to a shorter one",
					       UP_MAX_SOCKET_PATH);
	}
	if (!m->activated) {
		r = prepare_socket_dir(m);
		if (r < 0)
			return r;
	}
	r = take_lock(m);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(rpc_domains); i++) {
		r = rpc_domains[i].methods ? up_rpc_register(m->rpc, rpc_domains[i].methods, m)
					   : rpc_domains[i].reg(m->rpc, m);
		if (r < 0)
			return log_error_errno(r, "Cannot register the RPC methods");
	}
	r = up_server_new(&m->loop, m->rpc, &m->server);
	if (r < 0)
		return log_error_errno(r, "Cannot set up the server");
	if (m->activated) {
		r = up_server_listen_fd(m->server, fd);
		if (r < 0)
			return log_error_errno(r, "Cannot listen on the socket systemd passed");
	} else {
		(void)unlink(m->socket_path); /* stale: we hold the lock, nobody serves it */
		r = up_server_listen_path(m->server, m->socket_path);
		if (r < 0)
			return log_error_errno(r, "Cannot listen on %s", m->socket_path);
		m->bound = true;
	}
	r = arm_handles(m);
	if (r < 0)
		return r;
	if (up_notifier_new(&m->loop, &m->notifier) < 0)
		return log_error_errno(-ENOMEM, "Cannot set up desktop notifications");
	/* Records and the deploy cluster load in the background; the daemon serves meanwhile. */
	r = up_sessions_new(m, &m->loop, &m->sessions);
	if (r < 0)
		return log_error_errno(r, "Cannot set up the sessions");
	log_info("Listening on %s%s", m->socket_path, m->activated ? " (socket-activated)" : "");
	(void)sd_notifyf(0, "READY=1\nSTATUS=Listening on %s", m->socket_path);
	return 0;
}

static void on_stop_timer(uv_timer_t *t)
{
	struct up_manager *m = t->data;

	log_warning("Clients did not take their last answers within %d ms, closing them",
		    UP_SHUTDOWN_FLUSH_MS);
	up_server_close_all(m->server);
}

void up_manager_stop(struct up_manager *m, const char *why)
{
	if (m->stopping)
		return;
	m->stopping = true;
	if (m->server)
		log_info("Stopping (%s)", why);
	(void)sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
	if (m->server)
		up_server_shutdown(m->server);
	up_sessions_shutdown(m->sessions);
	m->notifier = up_notifier_free(m->notifier);
	if (m->handles_ready) {
		uv_close((uv_handle_t *)&m->sig_term, NULL);
		uv_close((uv_handle_t *)&m->sig_int, NULL);
		uv_close((uv_handle_t *)&m->watchdog, NULL);
		(void)uv_timer_start(&m->stop_timer, on_stop_timer, UP_SHUTDOWN_FLUSH_MS, 0);
		uv_unref((uv_handle_t *)&m->stop_timer);
	}
}

int up_manager_run(struct up_manager *m)
{
	(void)uv_run(&m->loop, UV_RUN_DEFAULT);
	return 0;
}

void up_manager_get_info(const struct up_manager *m, struct up_manager_info *info)
{
	*info = (struct up_manager_info){
		.socket_path = m->socket_path,
		.activated = m->activated,
		.uptime_ms = uv_now((uv_loop_t *)&m->loop) - m->started,
		.clients = m->server ? up_server_stats(m->server)->clients : 0,
		.requests_total = up_rpc_requests_total(m->rpc),
		.requests_inflight = up_rpc_inflight(m->rpc),
		.watchdog = m->watchdog_usec > 0,
	};
}

struct up_cluster *up_manager_cluster(struct up_manager *m)
{
	return m->sessions && !m->stopping ? up_sessions_cluster(m->sessions, NULL) : NULL;
}

struct up_sessions *up_manager_sessions(struct up_manager *m)
{
	return m->sessions;
}

struct up_notifier *up_manager_notifier(struct up_manager *m)
{
	return m->notifier;
}

uv_loop_t *up_manager_loop(struct up_manager *m)
{
	return &m->loop;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

struct up_manager *up_manager_free(struct up_manager *m)
{
	if (!m)
		return NULL;
	if (m->loop_ready) {
		up_manager_stop(m, "exit");
		(void)uv_run(&m->loop, UV_RUN_DEFAULT);
		if (m->handles_ready && !uv_is_closing((uv_handle_t *)&m->stop_timer))
			uv_close((uv_handle_t *)&m->stop_timer, NULL);
		uv_walk(&m->loop, close_walk, NULL);
		(void)uv_run(&m->loop, UV_RUN_DEFAULT);
		if (uv_loop_close(&m->loop) != 0)
			log_error("Handles were left open at exit");
	}
	up_sessions_free(m->sessions); /* after the loop drained: no record write in flight */
	m->sessions = NULL;
	m->server = up_server_free(m->server);
	m->rpc = up_rpc_free(m->rpc);
	if (m->bound)
		(void)unlink(m->socket_path);
	closep(&m->lock_fd);
	free(m);
	return NULL;
}

UP_DEFINE_FREEP(struct up_manager, up_manager_free)
