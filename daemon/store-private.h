/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What store.c (the blocking file I/O) shares with store-async.c (the queue that runs it
 * on the threadpool, one operation at a time). Nothing else includes this.
 */
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util.h"

struct store_op;

struct up_store {
	char *base;
	char *sessions; /* <base>/sessions */
	/* The _async queue: head runs on the threadpool, the rest wait in order. */
	struct store_op *head, *tail;
	size_t pending;
	bool running;
};

/* The record as it goes to disk, checked and bounded; *ret is the caller's. */
int up_store_serialise(const json_t *rec, char **ret, size_t *len, char *err, size_t err_len) _wur_;
/* Writes serialised bytes as <sessions>/<id>.json, atomically and synced. */
int up_store_save_bytes(struct up_store *s, const char *id, const char *buf, size_t len, char *err,
			size_t err_len) _wur_;
