/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "list.h"
#include "util.h"

/*
 * Callers waiting on the loop for what an owner is doing (a cluster's first sync, the read
 * of its service range), each with a deadline. A waiter is called once, from the loop: when
 * its owner wakes the list (with closing set when the owner goes away), or when its deadline
 * passes (after the owner's `late` hook, when given), unless it was cancelled first.
 */
struct up_waiter;
typedef void (*up_waiter_fn)(bool closing, void *ud);
typedef void (*up_waiter_late_fn)(void *owner);

int up_waiter_add(uv_loop_t *loop, struct up_list *waiters, uint64_t timeout_ms,
		  up_waiter_late_fn late, void *owner, up_waiter_fn fn, void *ud,
		  struct up_waiter **ret) _wur_;
/* Calls every waiter of the list, and empties it. */
void up_waiters_wake(struct up_list *waiters, bool closing);
/* No call will come. NULL is ignored. */
void up_waiter_cancel(struct up_waiter *w);
