/* SPDX-License-Identifier: Apache-2.0 */
#include "write-queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct up_write_chunk {
	struct up_write_chunk *next;
	size_t len, done; /* done: written already (a short write goes on from there) */
	char data[];
};

static void next(struct up_write_queue *q);

void up_write_queue_init(struct up_write_queue *q, uv_loop_t *loop, size_t max,
			 up_write_queue_fn failed, up_write_queue_fn closed, void *ud)
{
	*q = (struct up_write_queue){
		.loop = loop, .fd = -1, .max = max, .failed = failed, .closed = closed, .ud = ud};
	q->req.data = q;
}

static void fail(struct up_write_queue *q, int error)
{
	if (q->error)
		return;
	q->error = error;
	if (q->failed)
		q->failed(q->ud, error);
}

static void on_fs(uv_fs_t *req)
{
	struct up_write_queue *q = req->data;
	uv_fs_type type = req->fs_type;
	ssize_t res = req->result;

	uv_fs_req_cleanup(req);
	q->busy = false;
	if (type == UV_FS_WRITE) {
		struct up_write_chunk *c = q->head;

		if (res > 0 && (size_t)res < c->len - c->done) {
			c->done += (size_t)res; /* a short write: the rest next */
			next(q);
			return;
		}
		q->head = c->next;
		if (!q->head)
			q->tail = NULL;
		q->queued -= c->len;
		free(c);
		if (res < 0)
			fail(q, (int)res);
		next(q);
	} else if (q->closed) {
		q->closed(q->ud, q->error);
	}
}

static void next(struct up_write_queue *q)
{
	int k;

	if (q->busy || q->fd < 0)
		return;
	if (q->head && !q->error) {
		uv_buf_t b = uv_buf_init(q->head->data + q->head->done,
					 (unsigned)(q->head->len - q->head->done));

		k = uv_fs_write(q->loop, &q->req, q->fd, &b, 1, -1, on_fs);
		if (k < 0) { /* only a bad argument fails here: give up writing, close when asked */
			fail(q, k);
			next(q);
			return;
		}
	} else if (q->closing) {
		k = uv_fs_close(q->loop, &q->req, q->fd, on_fs);
		q->fd = -1;
		if (k < 0)
			return; /* the descriptor is lost with it; nothing is in flight */
	} else {
		return;
	}
	q->busy = true;
}

void up_write_queue_start(struct up_write_queue *q, uv_file fd, int error)
{
	q->started = true;
	q->fd = fd;
	if (fd < 0 && !q->error) /* the owner knows: `failed` is for writes */
		q->error = error ? error : -EBADF;
	next(q);
}

void up_write_queue_push(struct up_write_queue *q, const char *p, size_t len, bool newline)
{
	size_t n = len + (newline ? 1 : 0);
	struct up_write_chunk *c;

	if (n == 0)
		return;
	if (q->error) { /* nothing more is written */
		q->dropped += n;
		return;
	}
	if (n > q->max - q->queued || !(c = malloc(sizeof(*c) + n))) {
		q->dropped += n;
		return;
	}
	c->next = NULL;
	c->len = n;
	c->done = 0;
	memcpy(c->data, p, len);
	if (newline)
		c->data[len] = '\n';
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	q->queued += n;
	next(q);
}

void up_write_queue_close(struct up_write_queue *q)
{
	q->closing = true;
	next(q);
}

bool up_write_queue_busy(const struct up_write_queue *q)
{
	return q->busy || q->fd >= 0;
}

void up_write_queue_clear(struct up_write_queue *q)
{
	while (q->head) {
		struct up_write_chunk *c = q->head;

		q->head = c->next;
		free(c);
	}
	q->tail = NULL;
	q->queued = 0;
}
