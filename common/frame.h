/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "util.h"

/*
 * Newline-delimited framing. Bytes go in with up_frame_feed(); whole lines come out
 * of up_frame_next(), NUL-terminated in place (the pointer is valid until the next
 * feed). A line longer than `max` bytes is an error (-EMSGSIZE): the caller closes
 * the connection, because the stream can no longer be trusted to be in step.
 */
struct up_frame {
	char *data; /* owned */
	size_t len; /* bytes held */
	size_t cap;
	size_t start; /* first byte not yet returned as a line */
	size_t scan;  /* bytes before this offset (from start) hold no newline */
	size_t max;
};

void up_frame_init(struct up_frame *f, size_t max);
void up_frame_done(struct up_frame *f);
int up_frame_feed(struct up_frame *f, const void *p, size_t n) _wur_;
/* 1 and a line, 0 when no whole line is buffered, -EMSGSIZE past the limit. */
int up_frame_next(struct up_frame *f, char **line, size_t *len) _wur_;
/* Bytes held that are not yet part of a returned line. */
size_t up_frame_pending(const struct up_frame *f);
