/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <uv.h>

/*
 * A timer on the heap, for an owner that may be freed before libuv has closed the handle:
 * up_loop_timer_new() allocates and initialises it with `data`; up_loop_timer_free() stops
 * and closes it (NULL is fine) and frees it once libuv is done with it, so the owner can go
 * at once. It returns NULL, for `t = up_loop_timer_free(t)`.
 */
uv_timer_t *up_loop_timer_new(uv_loop_t *loop, void *data);
uv_timer_t *up_loop_timer_free(uv_timer_t *t);
