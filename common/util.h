/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _wur_	       __attribute__((warn_unused_result))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_       __attribute__((unused))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand a pointer over to a new owner: the local's cleanup then sees NULL. */
#define TAKE_PTR(p)                       \
	__extension__({                   \
		__typeof__(p) _tp_ = (p); \
		(p) = NULL;               \
		_tp_;                     \
	})

#define TAKE_FD(fd)               \
	__extension__({           \
		int _tfd_ = (fd); \
		(fd) = -1;        \
		_tfd_;            \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}

/* In a printf-like function whose last named parameter is `fmt`: the message into buf. */
#define up_vformat(buf, len, fmt)                    \
	do {                                         \
		va_list ap_;                         \
		va_start(ap_, fmt);                  \
		(void)vsnprintf(buf, len, fmt, ap_); \
		va_end(ap_);                         \
	} while (0)

/* A heap copy of the `n` bytes at `p`, or NULL when out of memory. */
static inline void *up_memdup(const void *p, size_t n)
{
	void *q = malloc(n);

	return q ? memcpy(q, p, n) : NULL;
}

/*
 * A heap object of `type` set from designated initialisers, every other field zero, or NULL
 * when out of memory: allocation and initialisation in one step, so a constructor reads
 *   struct up_cluster_wait *w = up_new(struct up_cluster_wait, .fn = fn, .ud = ud);
 */
#define up_new(type, ...) ((type *)up_memdup(&(type){__VA_ARGS__}, sizeof(type)))

/* Defines `void NAMEp(TYPE **p)`, *p = NAME(*p), for _cleanup_() (systemd's
 * DEFINE_TRIVIAL_CLEANUP_FUNC); NAME is a destructor that returns NULL. */
#define UP_DEFINE_FREEP(type, name) \
	void name##p(type **p)      \
	{                           \
		*p = name(*p);      \
	}

/* Frees each of the `n` pointers (systemd's free_many()); up_free_all(a, b, c) lists them. */
static inline void up_free_many(void *const *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i]);
}
#define up_free_all(...) \
	up_free_many((void *const[]){__VA_ARGS__}, ELEMENTSOF(((void *const[]){__VA_ARGS__})))

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
	}
}

static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

static inline int streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static inline int startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline int endswith(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && streq(s + n - m, suffix);
}
