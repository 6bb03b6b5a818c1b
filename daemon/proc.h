/* SPDX-License-Identifier: Apache-2.0 */
/* Running a short host command from a threadpool job (never from the loop): an argv, no shell. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* One run of a short command: what it is given, and where its output goes. */
struct up_run {
	char *const *argv; /* found on PATH */
	char *const *envp; /* NULL: the daemon's environment */
	bool new_session;  /* a session of its own, without a controlling terminal (so nothing it
			    * runs can prompt on the user's) */
	int timeout_ms;	   /* then it is killed */
	int fd3;	   /* given to the command as its fd 3 (the caller keeps it); -1: none */
	char *out;	   /* stdout: at most out_len - 1 bytes kept, always NUL-terminated */
	size_t out_len;
	char *err; /* stderr, the same way; NULL: into out with err_to_out, else dropped */
	size_t err_len;
	bool err_to_out;
	int status; /* the wait status, when up_run() returns 0 */
};

/* stdin is /dev/null. Returns 0 with run->status set, -ETIMEDOUT, or a negative errno from the
 * spawn (-ENOENT: no such program). Blocks: threadpool only. */
int up_run(struct up_run *run) _wur_;

/* up_run() with the daemon's environment, stdout (and its stderr too when with_stderr) into
 * `out`, and the wait status in *status. */
int up_run_capture(char *const argv[], int timeout_ms, bool with_stderr, char *out, size_t len,
		   int *status);
