/* SPDX-License-Identifier: Apache-2.0 */
/* The build log: bytes queued on the loop, written by the threadpool, in order. */
#include <fcntl.h>
#include <stdio.h>

#include "bounds.h"
#include "image-private.h"
#include "log.h"

struct chunk {
	struct chunk *next;
	size_t len;
	char data[];
};

struct up_image_log {
	uv_loop_t *loop;
	uv_fs_t req; /* the one operation in flight: open, write or close */
	uv_file fd;
	bool busy, closing, opened;
	bool in_open_cb; /* a close asked for from the open callback waits for it to return */
	struct chunk *head, *tail;
	size_t queued, dropped;
	int error;
	char *path;
	up_image_log_fn opened_cb, closed_cb;
	void *opened_ud, *closed_ud;
};

static void log_next(struct up_image_log *l);

static void log_free(struct up_image_log *l)
{
	while (l->head) {
		struct chunk *c = l->head;
		l->head = c->next;
		free(c);
	}
	free(l->path);
	free(l);
}

static void finish(struct up_image_log *l)
{
	up_image_log_fn cb = l->closed_cb;
	void *ud = l->closed_ud;
	int r = l->error;

	if (r == 0 && l->dropped)
		log_debug("image: %zu bytes of build output were not written to %s", l->dropped,
			  l->path);
	log_free(l);
	if (cb)
		cb(r, ud);
}

static void on_fs(uv_fs_t *req)
{
	struct up_image_log *l = req->data;
	uv_fs_type type = req->fs_type;
	ssize_t res = req->result;

	uv_fs_req_cleanup(req);
	l->busy = false;
	if (type == UV_FS_OPEN) {
		l->opened = true;
		if (res < 0)
			l->error = (int)res;
		else
			l->fd = (uv_file)res;
		if (l->opened_cb && !(l->closing && !l->closed_cb)) { /* not when detached */
			l->in_open_cb = true;
			l->opened_cb(l->error, l->opened_ud);
			l->in_open_cb = false;
		}
	} else if (type == UV_FS_WRITE) {
		struct chunk *c = l->head;
		l->head = c->next;
		if (!l->head)
			l->tail = NULL;
		l->queued -= c->len;
		if (res < 0 && !l->error)
			l->error = (int)res;
		free(c);
	} else if (type == UV_FS_CLOSE) {
		finish(l);
		return;
	}
	log_next(l);
}

static void log_next(struct up_image_log *l)
{
	int k = 0;

	if (l->busy || !l->opened)
		return;
	if (l->head && l->fd >= 0 && !l->error) {
		uv_buf_t b = uv_buf_init(l->head->data, (unsigned)l->head->len);
		k = uv_fs_write(l->loop, &l->req, l->fd, &b, 1, -1, on_fs);
	} else if (l->closing && l->fd >= 0) {
		k = uv_fs_close(l->loop, &l->req, l->fd, on_fs);
		l->fd = -1;
	} else if (l->closing) {
		finish(l);
		return;
	} else {
		return;
	}
	if (k < 0) {
		/* Only a bad argument fails here; give up on the file. */
		l->error = l->error ? l->error : k;
		l->fd = -1;
		log_next(l);
		return;
	}
	l->busy = true;
}

int up_image_log_open(uv_loop_t *loop, const char *path, up_image_log_fn opened, void *ud,
		      struct up_image_log **ret)
{
	struct up_image_log *l = calloc(1, sizeof(*l));
	int k;

	if (!l)
		return -ENOMEM;
	*l = (struct up_image_log){
		.loop = loop, .fd = -1, .opened_cb = opened, .opened_ud = ud, .path = strdup(path)};
	l->req.data = l;
	if (!l->path) {
		free(l);
		return -ENOMEM;
	}
	k = uv_fs_open(loop, &l->req, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY,
		       0600, on_fs);
	if (k < 0) {
		log_free(l);
		return k;
	}
	l->busy = true;
	*ret = l;
	return 0;
}

void up_image_log_write(struct up_image_log *l, const char *p, size_t n)
{
	struct chunk *c;

	if (l->error || n == 0)
		return;
	if (l->queued + n > UP_IMAGE_LOG_QUEUE_MAX || !(c = malloc(sizeof(*c) + n))) {
		l->dropped += n;
		return;
	}
	c->next = NULL;
	c->len = n;
	memcpy(c->data, p, n);
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->queued += n;
	log_next(l);
}

void up_image_log_close(struct up_image_log *l, up_image_log_fn closed, void *ud)
{
	l->closing = true;
	l->closed_cb = closed;
	l->closed_ud = ud;
	if (!l->in_open_cb) /* else on_fs() goes on once the callback is back, l still alive */
		log_next(l);
}
