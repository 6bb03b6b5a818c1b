/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The two helpers of image.c that hold loop resources. Each owns itself once told to
 * go away: a killed run or a detached log frees itself when the loop is done with it
 * and calls nothing back.
 */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "util.h"

/* An append-only log file written through the threadpool (uv_fs_*), one write at a time. */
struct up_image_log;
typedef void (*up_image_log_fn)(int r, void *ud);

/* `opened` runs once with 0 or -errno; writes made before it are queued. */
int up_image_log_open(uv_loop_t *loop, const char *path, up_image_log_fn opened, void *ud,
		      struct up_image_log **ret) _wur_;
/* Copies the bytes; past UP_IMAGE_LOG_QUEUE_MAX waiting, they are dropped (and counted). */
void up_image_log_write(struct up_image_log *l, const char *p, size_t n);
/* Flushes, closes and frees; `closed` (may be NULL: detached) gets the first write error or 0. */
void up_image_log_close(struct up_image_log *l, up_image_log_fn closed, void *ud);

/* A child process in its own process group, its stdout and stderr read line by line. */
struct up_image_run;
struct up_image_exit {
	int spawn_error; /* uv error of uv_spawn, or 0 */
	int64_t status;
	int signal;
	bool timed_out;
};
typedef void (*up_image_run_line_fn)(const char *line, size_t len, void *ud);
typedef void (*up_image_run_exit_fn)(const struct up_image_exit *e, void *ud);

/*
 * Runs argv[0] (searched in PATH) with env; `line` gets each line without its newline
 * (cut at UP_IMAGE_LOG_LINE_MAX); `exit` runs once the process has exited and both pipes
 * are closed, and the run is freed after it returns. A spawn failure is reported the
 * same way, from the loop.
 */
int up_image_run_start(uv_loop_t *loop, char *const *argv, char *const *env, uint64_t timeout_ms,
		       up_image_run_line_fn line, up_image_run_exit_fn exit, void *ud,
		       struct up_image_run **ret) _wur_;
/* Kills the process group; no callback runs any more. */
void up_image_run_kill(struct up_image_run *r);
