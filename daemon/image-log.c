/* SPDX-License-Identifier: Apache-2.0 */
/* The build log: bytes queued on the loop, written by the threadpool, in order. */
#include <fcntl.h>
#include <stdio.h>

#include "bounds.h"
#include "image-private.h"
#include "log.h"
#include "write-queue.h"

struct up_image_log {
	uv_fs_t open_req;
	struct up_write_queue q;
	bool opened, closing;
	bool in_open_cb; /* a close asked for from the open callback waits for it to return */
	char *path;
	up_image_log_fn opened_cb, closed_cb;
	void *opened_ud, *closed_ud;
};

static void log_free(struct up_image_log *l)
{
	up_write_queue_clear(&l->q);
	free(l->path);
	free(l);
}

/* Once closing, the file opened (or not) and the queue idle: the end. */
static void maybe_finish(struct up_image_log *l)
{
	up_image_log_fn cb = l->closed_cb;
	void *ud = l->closed_ud;
	int r = l->q.error;

	if (!l->closing || !l->opened || l->in_open_cb)
		return;
	up_write_queue_close(&l->q);
	if (up_write_queue_busy(&l->q))
		return; /* on_closed() comes back */
	if (r == 0 && l->q.dropped)
		log_debug("image: %zu bytes of build output were not written to %s", l->q.dropped,
			  l->path);
	log_free(l);
	if (cb)
		cb(r, ud);
}

static void on_closed(void *ud, int error)
{
	(void)error;
	maybe_finish(ud);
}

static void on_open(uv_fs_t *req)
{
	struct up_image_log *l = req->data;
	ssize_t res = req->result;

	uv_fs_req_cleanup(req);
	l->opened = true;
	up_write_queue_start(&l->q, res < 0 ? -1 : (uv_file)res, res < 0 ? (int)res : 0);
	if (l->opened_cb && !(l->closing && !l->closed_cb)) { /* not when detached */
		l->in_open_cb = true;
		l->opened_cb(l->q.error, l->opened_ud);
		l->in_open_cb = false;
	}
	maybe_finish(l);
}

int up_image_log_open(uv_loop_t *loop, const char *path, up_image_log_fn opened, void *ud,
		      struct up_image_log **ret)
{
	struct up_image_log *l = calloc(1, sizeof(*l));
	int k;

	if (!l)
		return -ENOMEM;
	*l = (struct up_image_log){.opened_cb = opened, .opened_ud = ud, .path = strdup(path)};
	up_write_queue_init(&l->q, loop, UP_IMAGE_LOG_QUEUE_MAX, NULL, on_closed, l);
	l->open_req.data = l;
	if (!l->path) {
		free(l);
		return -ENOMEM;
	}
	k = uv_fs_open(loop, &l->open_req, path,
		       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600, on_open);
	if (k < 0) {
		log_free(l);
		return k;
	}
	*ret = l;
	return 0;
}

void up_image_log_write(struct up_image_log *l, const char *p, size_t n)
{
	up_write_queue_push(&l->q, p, n, false);
}

void up_image_log_close(struct up_image_log *l, up_image_log_fn closed, void *ud)
{
	l->closing = true;
	l->closed_cb = closed;
	l->closed_ud = ud;
	maybe_finish(l); /* from the open callback: on_open() finishes once it is back */
}
