/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <syslog.h>

#include "util.h"

/*
 * Logging in the manner of OpenBSD's log.c: printf-checked, errno preserved, one
 * line per call on stderr with the sd-daemon "<N>" priority prefix so that journald
 * keeps the level. Code in common/ logs at debug only.
 */
void log_init(const char *ident, int max_level, int with_prefix);
void log_set_level(int max_level);
int log_get_level(void);
void log_msg(int level, const char *fmt, ...) _printf_(2, 3);
/*
 * Logs at `level`, the message followed by ": " and strerror(-r) (before a trailing
 * ", ignoring"), and returns r, which should be a negative errno.
 */
int log_errno(int level, int r, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...)	 log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)	 log_msg(LOG_INFO, __VA_ARGS__)
#define log_notice(...)	 log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...)	 log_msg(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(r, ...)	  log_errno(LOG_DEBUG, r, __VA_ARGS__)
#define log_warning_errno(r, ...) log_errno(LOG_WARNING, r, __VA_ARGS__)
#define log_error_errno(r, ...)	  log_errno(LOG_ERR, r, __VA_ARGS__)
