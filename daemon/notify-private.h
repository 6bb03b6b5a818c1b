/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "notify.h"

/* The notifier, shared by notify.c and its backends. */
struct up_notifier {
	uv_loop_t *loop;
	const struct up_notifier_impl *impl;
	void *backend; /* the state of the backend that opened, kept after a fall-back */
	/* Frees that state and then n, now or in a uv_close() callback; NULL: free(n). */
	void (*release)(struct up_notifier *n);
	struct up_notify_limiter denied;
};

/* A backend that cannot go on hands over to the log backend (said once, by the caller). */
void up_notifier_fall_back(struct up_notifier *n);
