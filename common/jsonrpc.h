/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "errors.h"
#include "util.h"

/* Builders. The "_steal" variants take ownership of the json_t arguments. */
json_t *up_jsonrpc_result(json_t *id, json_t *result_steal);
json_t *up_jsonrpc_error(json_t *id, enum up_error e, const char *message);
json_t *up_jsonrpc_errorf(json_t *id, enum up_error e, const char *fmt, ...) _printf_(3, 4);
json_t *up_jsonrpc_request(const char *method, json_t *params_steal, json_int_t id);
json_t *up_jsonrpc_notification(const char *method, json_t *params_steal);

/*
 * Checks the envelope of one request as JSON-RPC 2.0 defines it. On success sets
 * method, params (NULL when absent) and id (NULL when it is a notification) and
 * returns 0; otherwise writes why into `why` and returns -EINVAL.
 */
int up_jsonrpc_check_request(json_t *req, const char **method, json_t **params, json_t **id,
			     char *why, size_t why_len) _wur_;

/* The strings of an array joined by `sep` (non-strings skipped); caller frees; NULL on ENOMEM. */
char *up_json_join(const json_t *array, const char *sep);
/* Overwrites every string in `j` with zeros (for a document that held secrets, before its
 * last json_decref()). */
void up_json_wipe(json_t *j);

/* Serialises compactly with a trailing newline. Returns NULL on allocation failure. */
char *up_json_dump_line(const json_t *v, size_t *len);
