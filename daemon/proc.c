/* SPDX-License-Identifier: Apache-2.0 */
/* Short host commands for threadpool jobs (daemon/proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "util.h"

extern char **environ;

/* The read end of one of the command's output pipes, and the buffer it fills. */
struct sink {
	int fd;
	char *buf;
	size_t len, used;
};

/* One read; the pipe is closed (fd -1) at its end. */
static void sink_read(struct sink *s)
{
	char buf[512];
	ssize_t n = read(s->fd, buf, sizeof(buf));

	if (n < 0 && errno == EINTR)
		return;
	if (n <= 0) {
		(void)close(s->fd);
		s->fd = -1;
		return;
	}
	for (ssize_t i = 0; i < n && s->used + 1 < s->len; i++)
		s->buf[s->used++] = buf[i];
	s->buf[s->used] = '\0';
	explicit_bzero(buf, sizeof(buf)); /* it may have held a credential */
}

static int elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	(void)clock_gettime(CLOCK_MONOTONIC, &t);
	return (int)((t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000);
}

/* Reads both pipes until the command closes them; false when the time ran out first. */
static bool drain(struct sink s[2], int timeout_ms)
{
	struct timespec t0;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	while (s[0].fd >= 0 || s[1].fd >= 0) {
		struct pollfd pfd[2];
		nfds_t n = 0;
		int waited = elapsed_ms(&t0), r;

		for (size_t i = 0; i < 2; i++)
			if (s[i].fd >= 0)
				pfd[n++] = (struct pollfd){.fd = s[i].fd, .events = POLLIN};
		if (waited >= timeout_ms || (r = poll(pfd, n, timeout_ms - waited)) == 0)
			return false;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		for (size_t i = 0, j = 0; i < 2; i++)
			if (s[i].fd >= 0 && pfd[j++].revents)
				sink_read(&s[i]);
	}
	return true;
}

static void close_pair(int p[2])
{
	for (size_t i = 0; i < 2; i++)
		if (p[i] >= 0)
			(void)close(p[i]);
}

static int spawn(struct up_run *run, int out_w, int err_w, int fd3, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int r;

	(void)posix_spawn_file_actions_init(&fa);
	(void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	(void)posix_spawn_file_actions_adddup2(&fa, out_w, 1);
	if (err_w >= 0)
		(void)posix_spawn_file_actions_adddup2(&fa, err_w, 2);
	else if (run->err_to_out)
		(void)posix_spawn_file_actions_adddup2(&fa, out_w, 2);
	else
		(void)posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (fd3 >= 0)
		(void)posix_spawn_file_actions_adddup2(&fa, fd3, 3);
	(void)posix_spawnattr_init(&attr);
	if (run->new_session)
		(void)posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	r = posix_spawnp(pid, run->argv[0], &fa, &attr, run->argv, run->envp ? run->envp : environ);
	(void)posix_spawnattr_destroy(&attr);
	(void)posix_spawn_file_actions_destroy(&fa);
	return -r;
}

int up_run(struct up_run *run)
{
	struct sink s[2] = {{-1, run->out, run->out_len, 0}, {-1, run->err, run->err_len, 0}};
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, fd3 = -1, r = 0;
	bool done;
	pid_t pid;

	run->out[0] = '\0';
	if (run->err)
		run->err[0] = '\0';
	/* fd3 is copied above 3 first, so that the dup2 onto 3 is never onto itself. */
	if (pipe2(po, O_CLOEXEC) < 0 || (run->err && pipe2(pe, O_CLOEXEC) < 0) ||
	    (run->fd3 >= 0 && (fd3 = fcntl(run->fd3, F_DUPFD_CLOEXEC, 10)) < 0))
		r = negative_errno(); /* never 0: the command must not run, nor pid be read */
	if (r == 0)
		r = spawn(run, po[1], pe[1], fd3, &pid);
	if (fd3 >= 0)
		(void)close(fd3);
	/* Only the command keeps the write ends: the pipes end when it does. */
	if (po[1] >= 0)
		(void)close(po[1]);
	if (pe[1] >= 0)
		(void)close(pe[1]);
	po[1] = pe[1] = -1;
	if (r != 0) { /* the command did not start: there is no pid to wait for */
		close_pair(po);
		close_pair(pe);
		return r;
	}
	s[0].fd = po[0];
	s[1].fd = pe[0];
	done = drain(s, run->timeout_ms);
	for (size_t i = 0; i < 2; i++)
		if (s[i].fd >= 0)
			(void)close(s[i].fd);
	if (!done)
		(void)kill(pid, SIGKILL);
	while (waitpid(pid, &run->status, 0) < 0 && errno == EINTR)
		;
	return done ? 0 : -ETIMEDOUT;
}

int up_run_capture(char *const argv[], int timeout_ms, bool with_stderr, char *out, size_t len,
		   int *status)
{
	struct up_run run = {.argv = argv,
			     .timeout_ms = timeout_ms,
			     .fd3 = -1,
			     .out = out,
			     .out_len = len,
			     .err_to_out = with_stderr};
	int r = up_run(&run);

	*status = run.status;
	return r;
}
