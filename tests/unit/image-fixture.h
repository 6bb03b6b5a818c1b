/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the image tests share: a fresh copy of the basic build context in a folder below /tmp,
 * shell commands that must succeed, and a loop run until it is empty and closed.
 * Include after <cmocka.h>.
 */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "util.h"

#define DATA UP_TEST_DATA_DIR "/image"

/* The test's folder, made by setup(). */
static char tmp[64];

/* Runs a shell command built from fmt; it must exit 0. */
static inline void sh(const char *fmt, ...) _printf_(1, 2);
static inline void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* A fresh copy of the basic fixture in tmp/ctx. */
static inline int setup(void **state)
{
	(void)state;
	(void)snprintf(tmp, sizeof(tmp), "/tmp/test-image-XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	sh("cp -a %s/basic %s/ctx", DATA, tmp);
	return 0;
}

static inline int teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", tmp);
	return 0;
}

/* Runs the loop until nothing is left on it, then closes it. */
static inline void close_loop(uv_loop_t *loop)
{
	(void)uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(loop), 0);
}
