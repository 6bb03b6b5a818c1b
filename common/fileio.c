/* SPDX-License-Identifier: Apache-2.0 */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_fd(int fd, size_t max, char **ret, size_t *len);

/* O_NONBLOCK: a FIFO put where a file is expected must not hold the caller (a worker
 * thread of the daemon) until someone writes to it; it reads as what is in it now. */
int up_read_file(const char *path, size_t max, char **ret, size_t *len)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	return read_fd(fd, max, ret, len);
}

int up_read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *len)
{
	_cleanup_(closep) int fd =
		openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	return read_fd(fd, max, ret, len);
}

int up_read_file_fd(int fd, size_t max, char **ret, size_t *len)
{
	return read_fd(fd, max, ret, len);
}

int up_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int fsync_dir(const char *path)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

int up_write_file_atomic(const char *dir, const char *name, const void *buf, size_t len,
			 const char **step)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	const char *dummy;
	int fd, n, r;

	step = step ? step : &dummy;
	*step = "create";
	n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
	if (fd < 0)
		return -errno;
	*step = "write";
	r = up_write_all(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0) {
		*step = "rename";
		if (rename(tmp, path) < 0)
			r = -errno;
	}
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	*step = "sync";
	return fsync_dir(dir);
}

static int read_fd(int fd, size_t max, char **ret, size_t *len)
{
	size_t used = 0, cap;
	struct stat st;
	char *buf;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (S_ISREG(st.st_mode) && (size_t)st.st_size > max)
		return -EFBIG;
	cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (used + 1 >= cap) {
			if (cap > max + 1) {
				up_free_secret(buf, used);
				return -EFBIG;
			}
			char *n = realloc(buf, cap * 2);
			if (!n) {
				up_free_secret(buf, used);
				return -ENOMEM;
			}
			buf = n;
			cap *= 2;
		}
		ssize_t k = read(fd, buf + used, cap - used - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int r = -errno;
			up_free_secret(buf, used);
			return r;
		}
		if (k == 0)
			break;
		used += (size_t)k;
		if (used > max) {
			up_free_secret(buf, used);
			return -EFBIG;
		}
	}
	buf[used] = '\0';
	*ret = buf;
	if (len)
		*len = used;
	return 0;
}

void up_free_secret(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}
