/* SPDX-License-Identifier: Apache-2.0 */
#include "loop-timer.h"

#include <stdlib.h>

uv_timer_t *up_loop_timer_new(uv_loop_t *loop, void *data)
{
	uv_timer_t *t = malloc(sizeof(*t));

	if (!t)
		return NULL;
	(void)uv_timer_init(loop, t); /* cannot fail: it only links the handle to the loop */
	t->data = data;
	return t;
}

static void closed(uv_handle_t *h)
{
	free(h);
}

uv_timer_t *up_loop_timer_free(uv_timer_t *t)
{
	if (t && !uv_is_closing((uv_handle_t *)t))
		uv_close((uv_handle_t *)t, closed); /* uv_close stops an active timer */
	return NULL;
}
