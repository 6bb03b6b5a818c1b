/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the daemon does with one line before a handler runs: parse, take a batch
 * apart, check each envelope, and fill a params struct through a table that has
 * every parameter type.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jsonrpc.h"
#include "params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct all {
	const char *s;
	int64_t i;
	bool b;
	json_t *o, *a, *v, *any;
	const char *n;
};

static int check_len(const char *name, json_t *v, void *field, char *why, size_t len)
{
	(void)name, (void)field, (void)why, (void)len;
	return json_string_length(v) > 8 ? -22 : 0;
}

static const struct up_param table[] = {
	{"s", UP_PARAM_STRING, offsetof(struct all, s), 0, check_len},
	{"i", UP_PARAM_INT, offsetof(struct all, i), 0, NULL},
	{"b", UP_PARAM_BOOL, offsetof(struct all, b), 0, NULL},
	{"o", UP_PARAM_OBJECT, offsetof(struct all, o), 0, NULL},
	{"a", UP_PARAM_ARRAY, offsetof(struct all, a), 0, NULL},
	{"v", UP_PARAM_STRV, offsetof(struct all, v), 0, NULL},
	{"any", UP_PARAM_ANY, offsetof(struct all, any), 0, NULL},
	{"n", UP_PARAM_STRING, offsetof(struct all, n), UP_PARAM_NULLABLE | UP_PARAM_MANDATORY,
	 NULL},
	{0},
};

static void one(json_t *req)
{
	const char *method;
	json_t *params, *id, *answer;
	struct all out = {0};
	char why[256];

	if (up_jsonrpc_check_request(req, &method, &params, &id, why, sizeof(why)) < 0) {
		answer = up_jsonrpc_error(NULL, UP_ERR_INVALID_REQUEST, why);
	} else if (up_params_dispatch(table, params, &out, why, sizeof(why)) < 0) {
		answer = up_jsonrpc_error(id, UP_ERR_INVALID_PARAMS, why);
	} else {
		if (out.s && strlen(out.s) > 8)
			__builtin_trap();
		answer = up_jsonrpc_result(id, json_string(method));
	}
	free(up_json_dump_line(answer, NULL));
	json_decref(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *msg = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
				 NULL);
	size_t i;
	json_t *e;

	if (!msg)
		return 0;
	if (json_is_array(msg))
		json_array_foreach (msg, i, e)
			one(e);
	else
		one(msg);
	json_decref(msg);
	return 0;
}
