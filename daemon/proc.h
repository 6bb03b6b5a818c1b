/* SPDX-License-Identifier: Apache-2.0 */
/* Running a short host command from a threadpool job (never from the loop): an argv, no shell. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Runs argv (found on PATH) with stdin from /dev/null and its stdout, and its stderr too when
 * with_stderr, captured into `out` (at most len - 1 bytes kept, always NUL-terminated). Waits
 * at most timeout_ms, then kills it. Returns 0 with the wait status in *status, -ETIMEDOUT,
 * or a negative errno from the spawn (-ENOENT: no such program). Blocks: threadpool only. */
int up_run_capture(char *const argv[], int timeout_ms, bool with_stderr, char *out, size_t len,
		   int *status);
/* The same with the environment `envp`; with new_session the command runs in a session of its
 * own, without a controlling terminal (so nothing it runs can prompt on the user's). */
int up_run_capture_env(char *const argv[], char *const envp[], bool new_session, int timeout_ms,
		       bool with_stderr, char *out, size_t len, int *status);
/* The same with stderr kept apart, in `err` (NULL: to /dev/null). Every read buffer is wiped:
 * the output may hold a credential. */
int up_run_capture2(char *const argv[], int timeout_ms, char *out, size_t len, char *err,
		    size_t err_len, int *status);
