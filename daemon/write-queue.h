/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/*
 * Bytes queued on the loop and appended to a file in order, one uv_fs_write at a time: the
 * thread pool writes, the loop never blocks. The owner embeds the queue, pushes from the
 * start (what comes before the file is open waits), hands over the file with
 * up_write_queue_start() and asks for the end with up_write_queue_close(): the file is closed
 * once what is queued is written. The queue holds at most `max` bytes; what does not fit, or
 * comes after a write failed, is counted in `dropped`. After the first failure nothing more
 * is written; `failed` hears of it when it happens.
 *
 * The owner frees itself only while !up_write_queue_busy(); `closed` is called (from a libuv
 * callback, never from the owner's own call) when a close in flight has ended.
 */
struct up_write_chunk;

typedef void (*up_write_queue_fn)(void *ud, int error);

struct up_write_queue {
	uv_loop_t *loop;
	uv_fs_t req; /* the one write or close in flight */
	uv_file fd;  /* -1: not handed over yet, could not be opened, or closed */
	bool started, busy, closing;
	int error; /* the first failure, a negative errno */
	struct up_write_chunk *head, *tail;
	size_t queued, max, dropped;
	up_write_queue_fn failed, closed; /* either may be NULL; closed's error is `error` */
	void *ud;
};

void up_write_queue_init(struct up_write_queue *q, uv_loop_t *loop, size_t max,
			 up_write_queue_fn failed, up_write_queue_fn closed, void *ud);
/* The file is open (`fd`), or could not be opened (`fd` < 0, `error` says why). */
void up_write_queue_start(struct up_write_queue *q, uv_file fd, int error);
/* Queues `len` bytes, and a '\n' after them with `newline`. */
void up_write_queue_push(struct up_write_queue *q, const char *p, size_t len, bool newline);
void up_write_queue_close(struct up_write_queue *q);
/* A write or close in flight, or the file still open. */
bool up_write_queue_busy(const struct up_write_queue *q);
/* Frees what is still queued; for the owner's free, once it is not busy. */
void up_write_queue_clear(struct up_write_queue *q);
