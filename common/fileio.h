/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "util.h"

/*
 * Reads a whole file of at most `max` bytes into a NUL-terminated buffer the caller
 * frees. Returns 0, -EFBIG past the limit, or -errno. Blocking: the daemon calls it
 * off its loop or at start-up only. A FIFO (or other special file) is opened without
 * waiting for a writer: it reads as what it holds now (-EAGAIN when a writer is there but
 * has written nothing), never hanging the caller.
 */
int up_read_file(const char *path, size_t max, char **ret, size_t *len) _wur_;

/* The same, for `path` relative to the folder `dirfd`, never following a symlink at its end. */
int up_read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *len) _wur_;

/* The same, from an open file (read to its end). */
int up_read_file_fd(int fd, size_t max, char **ret, size_t *len) _wur_;

/* Writes all of `len` bytes, retrying short writes and EINTR. 0 or -errno. */
int up_write_all(int fd, const void *buf, size_t len) _wur_;

/*
 * Replaces `dir`/`name` atomically with `len` bytes of `buf`, mode 0600: a temp file
 * ".<name>.XXXXXX" in `dir`, write, fsync, rename over the name, fsync of `dir`. On failure
 * the temp file is removed and the old file stays. 0 or -errno; *step (may be NULL) then
 * names what failed ("create", "write", "rename", "sync"). Blocking.
 */
int up_write_file_atomic(const char *dir, const char *name, const void *buf, size_t len,
			 const char **step) _wur_;

/* Overwrites then frees a buffer that held a secret. */
void up_free_secret(char *p, size_t len);
