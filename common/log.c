/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_ident = "uplink";
static int log_max_level = LOG_INFO;
static int log_prefix = 1;

void log_init(const char *ident, int max_level, int with_prefix)
{
	log_ident = ident;
	log_max_level = max_level;
	log_prefix = with_prefix;
}

void log_set_level(int max_level)
{
	log_max_level = max_level;
}

int log_get_level(void)
{
	return log_max_level;
}

static void log_vmsg(int level, const char *fmt, va_list ap) _printf_(2, 0);
static void log_vmsg(int level, const char *fmt, va_list ap)
{
	char line[4096];
	int saved = errno;

	if (level > log_max_level)
		return;
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	if (log_prefix)
		(void)fprintf(stderr, "<%d>%s\n", level, line);
	else
		(void)fprintf(stderr, "%s: %s\n", log_ident, line);
	errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

int log_errno(int level, int r, const char *fmt, ...)
{
	char msg[3072];
	va_list ap;
	int saved = errno;
	const char *suffix = "";

	if (level > log_max_level)
		return r;
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* ", ignoring" stays last: "Cannot x: Permission denied, ignoring". */
	size_t n = strlen(msg), k = strlen(", ignoring");
	if (n >= k && strcmp(msg + n - k, ", ignoring") == 0) {
		msg[n - k] = '\0';
		suffix = ", ignoring";
	}
	log_msg(level, "%s: %s%s", msg, strerror(r < 0 ? -r : r), suffix);
	errno = saved;
	return r;
}
