/* SPDX-License-Identifier: Apache-2.0 */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void up_frame_init(struct up_frame *f, size_t max)
{
	*f = (struct up_frame){.max = max};
}

void up_frame_done(struct up_frame *f)
{
	free(f->data);
	*f = (struct up_frame){.max = f->max};
}

size_t up_frame_pending(const struct up_frame *f)
{
	return f->len - f->start;
}

static void compact(struct up_frame *f)
{
	if (f->start == 0)
		return;
	memmove(f->data, f->data + f->start, f->len - f->start);
	f->len -= f->start;
	f->start = 0;
}

int up_frame_feed(struct up_frame *f, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	compact(f);
	/*
	 * Callers drain whole lines after every feed, so what is held is at most one
	 * partial line plus one read; anything beyond twice the limit is a caller that
	 * stopped draining, and is refused rather than buffered.
	 */
	if (f->len + n > 2 * f->max)
		return -EMSGSIZE;
	if (f->len + n + 1 > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		while (cap < f->len + n + 1)
			cap *= 2;
		char *d = realloc(f->data, cap);
		if (!d)
			return -ENOMEM;
		f->data = d;
		f->cap = cap;
	}
	memcpy(f->data + f->len, p, n);
	f->len += n;
	return 0;
}

int up_frame_next(struct up_frame *f, char **line, size_t *len)
{
	for (;;) {
		char *base = f->data + f->start;
		size_t avail = f->len - f->start;
		char *nl = avail > f->scan ? memchr(base + f->scan, '\n', avail - f->scan) : NULL;

		if (!nl) {
			f->scan = avail;
			return avail > f->max ? -EMSGSIZE : 0;
		}
		size_t n = (size_t)(nl - base);
		if (n > f->max)
			return -EMSGSIZE;
		f->start += n + 1;
		f->scan = 0;
		if (n > 0 && base[n - 1] == '\r')
			n--;
		base[n] = '\0';
		/* Blank lines are keep-alives, not requests. */
		if (strspn(base, " \t") == n)
			continue;
		*line = base;
		*len = n;
		return 1;
	}
}
