/* SPDX-License-Identifier: Apache-2.0 */
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "protocol.h"

static int fits(int n, size_t len)
{
	return n >= 0 && (size_t)n < len && (size_t)n <= UP_MAX_SOCKET_PATH ? 0 : -ENAMETOOLONG;
}

int up_socket_path(char *buf, size_t len)
{
	const char *env = getenv(UP_SOCKET_ENV);
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		return fits(snprintf(buf, len, "%s", env), len);
	if (rt && *rt == '/')
		return fits(
			snprintf(buf, len, "%s/%s/%s", rt, UP_SOCKET_DIR_NAME, UP_SOCKET_FILE_NAME),
			len);
	return fits(snprintf(buf, len, "/run/user/%u/%s/%s", (unsigned)getuid(), UP_SOCKET_DIR_NAME,
			     UP_SOCKET_FILE_NAME),
		    len);
}

int up_lock_path(const char *socket_path, char *buf, size_t len)
{
	const char *slash = strrchr(socket_path, '/');
	int n;

	if (!slash)
		n = snprintf(buf, len, "%s", UP_LOCK_FILE_NAME);
	else
		n = snprintf(buf, len, "%.*s/%s", (int)(slash - socket_path), socket_path,
			     UP_LOCK_FILE_NAME);
	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int up_mkdir_parents(const char *path, unsigned mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

bool up_path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return true;
	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

bool up_path_is_normal_abs(const char *path)
{
	return path[0] == '/' && !strstr(path, "/../") && !strstr(path, "/./");
}
