/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "harness.h"

static int cancels;

struct echo_params {
	json_t *value;
};

static const struct up_param echo_params[] = {
	{"value", UP_PARAM_ANY, offsetof(struct echo_params, value), UP_PARAM_MANDATORY, NULL},
	{0},
};

static int t_echo(struct up_request *req, void *params, void *ud)
{
	struct echo_params *p = params;

	(void)ud;
	up_request_reply(req, json_incref(p->value));
	return 0;
}

struct async_params {
	int64_t ms;
};

static const struct up_param async_params[] = {
	{"ms", UP_PARAM_INT, offsetof(struct async_params, ms), UP_PARAM_MANDATORY, NULL},
	{0},
};

struct async_job {
	uv_timer_t timer;
	struct up_request *req;
};

static void job_closed(uv_handle_t *h)
{
	free(h->data);
}

static void job_fire(uv_timer_t *t)
{
	struct async_job *job = t->data;

	up_request_reply(job->req, json_pack("{s:b}", "done", 1));
	uv_close((uv_handle_t *)&job->timer, job_closed);
}

static void job_cancel(struct up_request *req, void *ud)
{
	struct async_job *job = ud;

	(void)req;
	cancels++;
	uv_close((uv_handle_t *)&job->timer, job_closed);
}

static int t_async(struct up_request *req, void *params, void *ud)
{
	struct async_params *p = params;
	struct async_job *job = calloc(1, sizeof(*job));
	uv_loop_t *loop = ud;

	if (!job)
		return -ENOMEM;
	job->req = req;
	(void)uv_timer_init(loop, &job->timer);
	job->timer.data = job;
	(void)uv_timer_start(&job->timer, job_fire, (uint64_t)p->ms, 0);
	up_request_set_cancel(req, job_cancel, job);
	return 0;
}

static int t_fail(struct up_request *req, void *params, void *ud)
{
	(void)req, (void)params, (void)ud;
	return -EIO;
}

static int t_push(struct up_request *req, void *params, void *ud)
{
	(void)params, (void)ud;
	assert_int_equal(up_conn_notify(req->conn, "t.progress", json_pack("{s:i}", "step", 1)), 0);
	up_request_reply(req, json_true());
	return 0;
}

static const struct up_method methods[] = {
	{"t.echo", echo_params, sizeof(struct echo_params), t_echo},
	{"t.async", async_params, sizeof(struct async_params), t_async},
	{"t.fail", NULL, 0, t_fail},
	{"t.push", NULL, 0, t_push},
	{0},
};

struct fixture {
	struct harness h;
	struct up_frame f;
	int fd;
};

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));

	harness_init(&x->h, NULL, NULL);
	assert_int_equal(up_rpc_register(x->h.rpc, methods, &x->h.loop), 0);
	up_frame_init(&x->f, UP_MAX_FRAME_SIZE);
	x->fd = harness_connect(&x->h);
	cancels = 0;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;

	if (x->fd >= 0)
		close(x->fd);
	harness_done(&x->h);
	up_frame_done(&x->f);
	free(x);
	return 0;
}

static json_t *call(struct fixture *x, const char *text)
{
	harness_send(x->fd, text);
	return harness_recv(&x->h, x->fd, &x->f);
}

static void test_echo(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"t.echo\","
			    "\"params\":{\"value\":[1,2]}}\n");

	assert_string_equal(json_string_value(json_object_get(r, "id")), "s1");
	assert_int_equal(json_array_size(json_object_get(r, "result")), 2);
	json_decref(r);
	r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":-4,\"method\":\"t.echo\",\"params\":{\"value\":"
		    "null}}\n");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), -4);
	assert_true(json_is_null(json_object_get(r, "result")));
	json_decref(r);
}

static void test_unknown_method(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.nope\"}\n");

	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
			 -32601);
	assert_string_equal(error_name(r), "METHOD_NOT_FOUND");
	assert_non_null(strstr(error_message(r), "t.nope"));
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
}

static void test_bad_params(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.async\",\"params\":{"
			    "\"ms\":\"5\"}}\n");

	assert_string_equal(error_name(r), "INVALID_PARAMS");
	assert_string_equal(error_message(r), "parameter 'ms' must be an integer, not a string");
	json_decref(r);
	r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.echo\",\"params\":{\"value\":1,"
		    "\"vlaue\":2}}\n");
	assert_string_equal(error_message(r), "unknown parameter 'vlaue'");
	json_decref(r);
	r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"t.fail\",\"params\":{\"a\":1}}\n");
	assert_string_equal(error_message(r), "unknown parameter 'a'");
	json_decref(r);
}

static void test_malformed_keeps_connection(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":1,\n");

	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
			 -32700);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	r = call(x, "\x01\x02garbage\n");
	assert_string_equal(error_name(r), "PARSE_ERROR");
	json_decref(r);
	r = call(x,
		 "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"t.echo\",\"params\":{\"value\":9}}\n");
	assert_int_equal(json_integer_value(json_object_get(r, "result")), 9);
	json_decref(r);
}

static void test_invalid_request(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":7}\n");

	assert_string_equal(error_name(r), "INVALID_REQUEST");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 5);
	json_decref(r);
	r = call(x, "\"just a string\"\n");
	assert_string_equal(error_name(r), "INVALID_REQUEST");
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
}

static void test_notification_gets_no_answer(void **state)
{
	struct fixture *x = *state;
	json_t *r;

	/* Neither a good nor a failing notification is answered (JSON-RPC 2.0, 4.1). */
	harness_send(x->fd,
		     "{\"jsonrpc\":\"2.0\",\"method\":\"t.echo\",\"params\":{\"value\":1}}\n");
	harness_send(x->fd, "{\"jsonrpc\":\"2.0\",\"method\":\"t.nope\"}\n");
	harness_send(x->fd, "{\"jsonrpc\":\"2.0\",\"method\":\"t.fail\"}\n");
	r = call(x,
		 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.echo\",\"params\":{\"value\":2}}\n");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 2);
	json_decref(r);
}

static void test_batch(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(
		x,
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.echo\",\"params\":{\"value\":\"a\"}}"
		","
		"{\"jsonrpc\":\"2.0\",\"method\":\"t.echo\",\"params\":{\"value\":\"n\"}},"
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.nope\"},"
		"1,"
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"t.async\",\"params\":{\"ms\":20}}]\n");

	assert_true(json_is_array(r));
	assert_int_equal(json_array_size(r), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "result")),
			    "a");
	assert_string_equal(error_name(json_array_get(r, 1)), "METHOD_NOT_FOUND");
	assert_string_equal(error_name(json_array_get(r, 2)), "INVALID_REQUEST");
	assert_true(json_is_null(json_object_get(json_array_get(r, 2), "id")));
	assert_true(json_is_true(
		json_object_get(json_object_get(json_array_get(r, 3), "result"), "done")));
	json_decref(r);
}

static void test_batch_edge_cases(void **state)
{
	struct fixture *x = *state;
	json_t *r;
	char *big;
	size_t n = 0;

	r = call(x, "[]\n");
	assert_true(json_is_object(r));
	assert_string_equal(error_name(r), "INVALID_REQUEST");
	json_decref(r);

	/* Only notifications: nothing at all comes back, so the next answer is the echo's. */
	harness_send(x->fd,
		     "[{\"jsonrpc\":\"2.0\",\"method\":\"t.echo\",\"params\":{\"value\":1}}]\n");
	r = call(x,
		 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"t.echo\",\"params\":{\"value\":7}}\n");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 7);
	json_decref(r);

	big = malloc(64 * (UP_MAX_BATCH + 2));
	big[n++] = '[';
	for (int i = 0; i <= UP_MAX_BATCH; i++)
		n += (size_t)sprintf(big + n,
				     "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"t.fail\"}",
				     i ? "," : "", i);
	memcpy(big + n, "]\n", 3);
	r = call(x, big);
	free(big);
	assert_string_equal(error_name(r), "INVALID_REQUEST");
	assert_non_null(strstr(error_message(r), "over the limit"));
	json_decref(r);
}

static void test_handler_failure(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.fail\"}\n");

	assert_string_equal(error_name(r), "INTERNAL_ERROR");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
			 -32603);
	json_decref(r);
}

static void test_push_before_reply(void **state)
{
	struct fixture *x = *state;
	json_t *r = call(x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.push\"}\n");

	assert_string_equal(json_string_value(json_object_get(r, "method")), "t.progress");
	assert_null(json_object_get(r, "id"));
	json_decref(r);
	r = harness_recv(&x->h, x->fd, &x->f);
	assert_true(json_is_true(json_object_get(r, "result")));
	json_decref(r);
}

static void test_client_gone_cancels(void **state)
{
	struct fixture *x = *state;

	harness_send(x->fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.async\",\"params\":{"
			    "\"ms\":60000}}\n");
	harness_send(x->fd, "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"t.async\",\"params\":{"
			    "\"ms\":60000}}]\n");
	for (int i = 0; i < 20; i++)
		(void)uv_run(&x->h.loop, UV_RUN_NOWAIT);
	assert_int_equal(up_rpc_inflight(x->h.rpc), 2);
	close(x->fd);
	x->fd = -1;
	for (int i = 0; i < 200 && cancels < 2; i++) {
		(void)uv_run(&x->h.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(cancels, 2);
	assert_int_equal(up_rpc_inflight(x->h.rpc), 0);
}

static void test_inflight_limit_pauses_not_drops(void **state)
{
	struct fixture *x = *state;
	int n = UP_MAX_INFLIGHT_PER_CONN * 3, seen = 0;
	char line[128];

	for (int i = 0; i < n; i++) {
		snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"t.async\",\"params\":{\"ms\":"
			 "5}}\n",
			 i);
		harness_send(x->fd, line);
	}
	for (int i = 0; i < n; i++) {
		json_t *r = harness_recv(&x->h, x->fd, &x->f);
		assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "done")));
		seen++;
		json_decref(r);
	}
	assert_int_equal(seen, n);
}

static void test_shutdown_answers_inflight(void **state)
{
	struct fixture *x = *state;
	json_t *r;
	bool eof;

	harness_send(x->fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"t.async\",\"params\":{"
			    "\"ms\":60000}}\n");
	for (int i = 0; i < 20; i++)
		(void)uv_run(&x->h.loop, UV_RUN_NOWAIT);
	up_server_shutdown(x->h.server);
	r = harness_recv(&x->h, x->fd, &x->f);
	assert_string_equal(error_name(r), "SHUTTING_DOWN");
	assert_int_equal(cancels, 1);
	json_decref(r);
	assert_null(harness_recv_ex(&x->h, x->fd, &x->f, 5000, &eof));
	assert_true(eof);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_echo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_method, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_params, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_keeps_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notification_gets_no_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_edge_cases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_handler_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_before_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_gone_cancels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inflight_limit_pauses_not_drops, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_answers_inflight, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
