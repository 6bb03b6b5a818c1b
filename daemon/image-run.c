/* SPDX-License-Identifier: Apache-2.0 */
/* docker as a child process: its own process group, output line by line, a deadline. */
#include <signal.h>

#include "bounds.h"
#include "image-private.h"
#include "log.h"
#include "loop-read.h"

struct stream {
	uv_pipe_t pipe;
	struct up_image_run *run;
	char line[UP_IMAGE_LOG_LINE_MAX + 1];
	size_t len;
	bool skipping; /* the rest of a line that was too long */
};

struct up_image_run {
	uv_process_t proc;
	uv_timer_t timer;
	struct stream out, err;
	int open_handles;
	bool killed, exited;
	struct up_image_exit result;
	up_image_run_line_fn line_cb;
	up_image_run_exit_fn exit_cb;
	void *ud;
};

static void on_closed(uv_handle_t *h)
{
	struct up_image_run *r = h->data;

	if (--r->open_handles > 0)
		return;
	if (!r->killed)
		r->exit_cb(&r->result, r->ud);
	free(r);
}

static void emit(struct stream *s)
{
	struct up_image_run *r = s->run;

	s->line[s->len] = '\0';
	if (!r->killed)
		r->line_cb(s->line, s->len, r->ud);
	s->len = 0;
}

static void feed(struct stream *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			if (!s->skipping)
				emit(s);
			s->skipping = false;
			s->len = 0;
		} else if (s->skipping) {
			continue;
		} else if (s->len == UP_IMAGE_LOG_LINE_MAX) {
			emit(s);
			s->skipping = true;
		} else {
			s->line[s->len++] = p[i];
		}
	}
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct stream *s = (struct stream *)(void *)st; /* the pipe is its first member */

	if (n < 0) {
		if (s->len > 0 && !s->skipping)
			emit(s); /* a last line without its newline */
		uv_close((uv_handle_t *)st, on_closed);
		return;
	}
	feed(s, buf->base, (size_t)n);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
	struct up_image_run *r = p->data;

	r->exited = true;
	r->result.status = status;
	r->result.signal = sig;
	(void)uv_timer_stop(&r->timer);
	uv_close((uv_handle_t *)&r->timer, on_closed);
	uv_close((uv_handle_t *)p, on_closed);
}

static void kill_group(struct up_image_run *r)
{
	if (r->exited)
		return;
	/* Detached: the child leads its own group, so this reaches what it started too. */
	if (uv_kill(-r->proc.pid, SIGKILL) < 0)
		(void)uv_process_kill(&r->proc, SIGKILL);
}

static void on_timeout(uv_timer_t *t)
{
	struct up_image_run *r = t->data;

	r->result.timed_out = true;
	kill_group(r);
}

int up_image_run_start(uv_loop_t *loop, char *const *argv, char *const *env, uint64_t timeout_ms,
		       up_image_run_line_fn line, up_image_run_exit_fn exit, void *ud,
		       struct up_image_run **ret)
{
	struct up_image_run *r =
		up_new(struct up_image_run, .line_cb = line, .exit_cb = exit, .ud = ud);
	uv_stdio_container_t stdio[3];
	uv_process_options_t opts = {0};
	int k;

	if (!r)
		return -ENOMEM;
	r->out.run = r->err.run = r;
	(void)uv_pipe_init(loop, &r->out.pipe, 0);
	(void)uv_pipe_init(loop, &r->err.pipe, 0);
	r->out.pipe.data = r->err.pipe.data = r->proc.data = r->timer.data = r;
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[1].data.stream = (uv_stream_t *)&r->out.pipe;
	stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[2].data.stream = (uv_stream_t *)&r->err.pipe;
	opts.file = argv[0];
	opts.args = (char **)argv;
	opts.env = (char **)env;
	opts.stdio = stdio;
	opts.stdio_count = 3;
	opts.exit_cb = on_exit_cb;
	opts.flags = UV_PROCESS_DETACHED;
	*ret = r;
	k = uv_spawn(loop, &r->proc, &opts);
	if (k < 0) {
		/* Reported from on_closed() once the unused pipes are closed: one path for all. */
		r->result.spawn_error = k;
		r->open_handles = 3; /* uv_spawn() initialised the process handle even so */
		uv_close((uv_handle_t *)&r->proc, on_closed);
		uv_close((uv_handle_t *)&r->out.pipe, on_closed);
		uv_close((uv_handle_t *)&r->err.pipe, on_closed);
		return 0;
	}
	r->open_handles = 4; /* process, timer, two pipes */
	(void)uv_timer_init(loop, &r->timer);
	(void)uv_timer_start(&r->timer, on_timeout, timeout_ms, 0);
	(void)uv_read_start((uv_stream_t *)&r->out.pipe, up_loop_read_alloc, on_read);
	(void)uv_read_start((uv_stream_t *)&r->err.pipe, up_loop_read_alloc, on_read);
	return 0;
}

void up_image_run_kill(struct up_image_run *r)
{
	r->killed = true;
	if (r->result.spawn_error == 0)
		kill_group(r);
}
