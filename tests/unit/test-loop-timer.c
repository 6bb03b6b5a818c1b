/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loop-timer.h"

static int fired;

static void on_fire(uv_timer_t *t)
{
	int *owner = t->data;

	fired += *owner;
}

/* Freed while armed: it never fires, and the loop closes with nothing left on it. */
static void test_freed_while_armed_never_fires(void **state)
{
	uv_loop_t loop;
	int owner = 1;
	uv_timer_t *t;

	(void)state;
	fired = 0;
	assert_int_equal(uv_loop_init(&loop), 0);
	t = up_loop_timer_new(&loop, &owner);
	assert_non_null(t);
	assert_ptr_equal(t->data, &owner);
	assert_int_equal(uv_timer_start(t, on_fire, 0, 0), 0);
	t = up_loop_timer_free(t);
	assert_null(t);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(fired, 0);
	assert_int_equal(uv_loop_close(&loop), 0); /* UV_EBUSY if a handle stayed */
}

static void test_fires_then_freed(void **state)
{
	uv_loop_t loop;
	int owner = 2;
	uv_timer_t *t;

	(void)state;
	fired = 0;
	assert_int_equal(uv_loop_init(&loop), 0);
	t = up_loop_timer_new(&loop, &owner);
	assert_non_null(t);
	assert_int_equal(uv_timer_start(t, on_fire, 1, 0), 0);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(fired, 2);
	(void)up_loop_timer_free(t);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_free_null_is_nothing(void **state)
{
	(void)state;
	assert_null(up_loop_timer_free(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_freed_while_armed_never_fires),
		cmocka_unit_test(test_fires_then_freed),
		cmocka_unit_test(test_free_null_is_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
