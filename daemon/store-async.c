/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's _async calls: each operation is queued and the queue's head runs on the
 * threadpool, so operations run one at a time, in the order they were called, and a later
 * save of a record never loses to an earlier one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store-private.h"

struct store_op {
	struct store_op *next; /* up_store::head */
	uv_work_t work;
	uv_loop_t *loop;
	struct up_store *store;
	void (*run)(struct store_op *op); /* NULL: failed before queueing; r and err say why */
	char id[UP_SESSION_ID_LEN + 1];
	char *bytes;
	size_t len;
	int64_t now;
	uint64_t max_age;
	unsigned flags;
	int r;
	char err[1024];
	json_t *result;
	up_store_cb cb;
	void *ud;
};

static void run_save(struct store_op *op)
{
	op->r = up_store_save_bytes(op->store, op->id, op->bytes, op->len, op->err,
				    sizeof(op->err));
}

static void run_load(struct store_op *op)
{
	json_t *records, *problems;

	op->r = up_store_load(op->store, op->now, &records, &problems, op->err, sizeof(op->err));
	if (op->r == 0)
		op->result = json_pack("{s:o, s:o}", "records", records, "problems", problems);
	if (op->r == 0 && !op->result)
		op->r = -ENOMEM;
}

static void run_delete(struct store_op *op)
{
	op->r = up_store_delete(op->store, op->id, op->flags, op->err, sizeof(op->err));
}

static void run_prune(struct store_op *op)
{
	op->r = up_store_prune(op->store, op->now, op->max_age, &op->result, op->err,
			       sizeof(op->err));
}

static void op_work(uv_work_t *w)
{
	struct store_op *op = w->data;

	if (op->run)
		op->run(op);
}

static void op_after(uv_work_t *w, int status);

static int op_start(struct up_store *s)
{
	struct store_op *op = s->head;
	int r = uv_queue_work(op->loop, &op->work, op_work, op_after);

	s->running = r == 0;
	return r;
}

static struct store_op *op_pop(struct up_store *s)
{
	struct store_op *op = s->head;

	s->head = op->next;
	if (!s->head)
		s->tail = NULL;
	s->pending--;
	return op;
}

/* The one completion path: report, free, start the next. */
static void op_finish(struct store_op *op)
{
	op->cb(op->r, op->r < 0 ? op->err : NULL, op->result, op->ud);
	json_decref(op->result);
	free(op->bytes);
	free(op);
}

static void op_pump(struct up_store *s)
{
	while (s->head && !s->running) {
		int r = op_start(s);
		if (r == 0)
			return;
		struct store_op *op = op_pop(s);
		op->r = r;
		(void)snprintf(op->err, sizeof(op->err), "cannot queue a store operation: %s",
			       uv_strerror(r));
		op_finish(op);
	}
}

static void op_after(uv_work_t *w, int status)
{
	struct store_op *op = w->data;
	struct up_store *s = op->store;

	(void)op_pop(s);
	s->running = false;
	if (status == UV_ECANCELED && op->r == 0) {
		op->r = -ECANCELED;
		(void)snprintf(op->err, sizeof(op->err), "the store operation was cancelled");
	}
	op_finish(op);
	op_pump(s);
}

static struct store_op *op_new(uv_loop_t *loop, struct up_store *s, void (*run)(struct store_op *),
			       up_store_cb cb, void *ud)
{
	struct store_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->work.data = op;
	op->loop = loop;
	op->store = s;
	op->run = run;
	op->cb = cb;
	op->ud = ud;
	return op;
}

static int op_submit(struct up_store *s, struct store_op *op)
{
	int r;

	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->pending++;
	if (s->running || s->head != op)
		return 0;
	r = op_start(s);
	if (r < 0) {
		(void)op_pop(s);
		free(op->bytes);
		free(op);
	}
	return r;
}

int up_store_save_async(uv_loop_t *loop, struct up_store *s, const json_t *rec, up_store_cb cb,
			void *ud)
{
	struct store_op *op = op_new(loop, s, run_save, cb, ud);

	if (!op)
		return -ENOMEM;
	op->r = up_store_serialise(rec, &op->bytes, &op->len, op->err, sizeof(op->err));
	if (op->r < 0)
		op->run = NULL; /* reported through the queue like any other result */
	else
		memcpy(op->id, up_record_id(rec), UP_SESSION_ID_LEN);
	return op_submit(s, op);
}

int up_store_load_async(uv_loop_t *loop, struct up_store *s, int64_t now, up_store_cb cb, void *ud)
{
	struct store_op *op = op_new(loop, s, run_load, cb, ud);

	if (!op)
		return -ENOMEM;
	op->now = now;
	return op_submit(s, op);
}

int up_store_delete_async(uv_loop_t *loop, struct up_store *s, const char *id, unsigned flags,
			  up_store_cb cb, void *ud)
{
	struct store_op *op;

	if (!up_session_id_valid(id))
		return -EINVAL;
	op = op_new(loop, s, run_delete, cb, ud);
	if (!op)
		return -ENOMEM;
	memcpy(op->id, id, UP_SESSION_ID_LEN);
	op->flags = flags;
	return op_submit(s, op);
}

int up_store_prune_async(uv_loop_t *loop, struct up_store *s, int64_t now, uint64_t max_age,
			 up_store_cb cb, void *ud)
{
	struct store_op *op = op_new(loop, s, run_prune, cb, ud);

	if (!op)
		return -ENOMEM;
	op->now = now;
	op->max_age = max_age;
	return op_submit(s, op);
}

size_t up_store_pending(const struct up_store *s)
{
	return s->pending;
}
