/* SPDX-License-Identifier: Apache-2.0 */
/* Short host commands for threadpool jobs (daemon/proc.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

extern char **environ;

/* Appends what fd has to buf (at most len - 1 bytes kept). 1 while open, 0 at EOF. */
static int drain(int fd, char *buf, size_t len, size_t *used)
{
	char tmp[512];
	ssize_t n;

	do
		n = read(fd, tmp, sizeof(tmp));
	while (n < 0 && errno == EINTR);
	for (ssize_t i = 0; i < n && *used + 1 < len; i++)
		buf[(*used)++] = tmp[i];
	if (len)
		buf[*used] = '\0';
	explicit_bzero(tmp, sizeof(tmp)); /* it may have held a credential */
	return n > 0;
}

int up_run_capture2(char *const argv[], int timeout_ms, char *out, size_t len, char *err,
		    size_t err_len, int *status)
{
	posix_spawn_file_actions_t fa;
	struct timespec t0, t;
	size_t used = 0, err_used = 0;
	int p[2], e[2] = { -1, -1 }, r, waited = 0;
	bool open_out = true, open_err;
	pid_t pid;

	out[0] = '\0';
	if (err && err_len)
		err[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (err && pipe2(e, O_CLOEXEC) < 0) {
		r = -errno;
		(void)close(p[0]);
		(void)close(p[1]);
		return r;
	}
	open_err = err != NULL;
	(void)posix_spawn_file_actions_init(&fa);
	(void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	(void)posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	if (err)
		(void)posix_spawn_file_actions_adddup2(&fa, e[1], 2);
	else
		(void)posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	(void)posix_spawn_file_actions_destroy(&fa);
	(void)close(p[1]);
	if (err)
		(void)close(e[1]);
	if (r != 0) {
		(void)close(p[0]);
		if (err)
			(void)close(e[0]);
		return -r;
	}
	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	while (open_out || open_err) {
		struct pollfd pfd[2] = { { .fd = open_out ? p[0] : -1, .events = POLLIN },
					 { .fd = open_err ? e[0] : -1, .events = POLLIN } };

		(void)clock_gettime(CLOCK_MONOTONIC, &t);
		waited = (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (waited >= timeout_ms || poll(pfd, 2, timeout_ms - waited) == 0) {
			waited = timeout_ms;
			break;
		}
		if (pfd[0].revents)
			open_out = drain(p[0], out, len, &used);
		if (pfd[1].revents)
			open_err = drain(e[0], err, err_len, &err_used);
	}
	(void)close(p[0]);
	if (err)
		(void)close(e[0]);
	if (waited >= timeout_ms)
		(void)kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return waited >= timeout_ms ? -ETIMEDOUT : 0;
}

int up_run_capture(char *const argv[], int timeout_ms, bool with_stderr, char *out, size_t len,
		   int *status)
{
	return up_run_capture_env(argv, environ, false, timeout_ms, with_stderr, out, len, status);
}

int up_run_capture_env(char *const argv[], char *const envp[], bool new_session, int timeout_ms,
		       bool with_stderr, char *out, size_t len, int *status)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	struct timespec t0, t;
	size_t used = 0;
	int p[2], r, waited = 0;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	(void)posix_spawn_file_actions_init(&fa);
	(void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	(void)posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	if (with_stderr)
		(void)posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	else
		(void)posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	(void)posix_spawnattr_init(&attr);
	if (new_session)
		(void)posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	r = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
	(void)posix_spawnattr_destroy(&attr);
	(void)posix_spawn_file_actions_destroy(&fa);
	(void)close(p[1]);
	if (r != 0) {
		(void)close(p[0]);
		return -r;
	}
	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		char buf[512];
		ssize_t n;

		(void)clock_gettime(CLOCK_MONOTONIC, &t);
		waited = (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (waited >= timeout_ms || poll(&pfd, 1, timeout_ms - waited) == 0) {
			waited = timeout_ms;
			break;
		}
		n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && used + 1 < len; i++)
			out[used++] = buf[i];
		out[used] = '\0';
	}
	(void)close(p[0]);
	if (waited >= timeout_ms)
		(void)kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return waited >= timeout_ms ? -ETIMEDOUT : 0;
}
