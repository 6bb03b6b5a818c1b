/* SPDX-License-Identifier: Apache-2.0 */
#include "waiters.h"

#include <errno.h>
#include <stdlib.h>

struct up_waiter {
	struct up_list link; /* the owner's list; unlinked once answered */
	uv_timer_t timer;
	up_waiter_late_fn late;
	void *owner;
	up_waiter_fn fn;
	void *ud;
};

static void closed(uv_handle_t *h)
{
	free(h->data);
}

static void end(struct up_waiter *w, bool call, bool closing)
{
	up_list_remove(&w->link);
	(void)uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, closed);
	if (call)
		w->fn(closing, w->ud);
}

static void timed_out(uv_timer_t *t)
{
	struct up_waiter *w = t->data;

	if (w->late)
		w->late(w->owner);
	end(w, true, false);
}

int up_waiter_add(uv_loop_t *loop, struct up_list *waiters, uint64_t timeout_ms,
		  up_waiter_late_fn late, void *owner, up_waiter_fn fn, void *ud,
		  struct up_waiter **ret)
{
	struct up_waiter *w =
		up_new(struct up_waiter, .late = late, .owner = owner, .fn = fn, .ud = ud);
	int r;

	if (!w)
		return -ENOMEM;
	r = uv_timer_init(loop, &w->timer);
	if (r < 0) {
		free(w);
		return r;
	}
	w->timer.data = w;
	(void)uv_timer_start(&w->timer, timed_out, timeout_ms, 0);
	up_list_insert_tail(waiters, &w->link);
	*ret = w;
	return 0;
}

void up_waiters_wake(struct up_list *waiters, bool closing)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, waiters)
		end(up_container_of(pos, struct up_waiter, link), true, closing);
}

void up_waiter_cancel(struct up_waiter *w)
{
	if (w)
		end(w, false, false);
}
