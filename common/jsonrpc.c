/* SPDX-License-Identifier: Apache-2.0 */
#include "jsonrpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static json_t *envelope(json_t *id)
{
	return json_pack("{s:s, s:O}", "jsonrpc", "2.0", "id", id ? id : json_null());
}

json_t *up_jsonrpc_result(json_t *id, json_t *result_steal)
{
	json_t *r = envelope(id);

	if (!r) {
		json_decref(result_steal);
		return NULL;
	}
	(void)json_object_set_new(r, "result", result_steal ? result_steal : json_null());
	return r;
}

json_t *up_jsonrpc_error(json_t *id, enum up_error e, const char *message)
{
	json_t *r = envelope(id);
	json_t *err;

	if (!r)
		return NULL;
	err = json_pack("{s:i, s:s, s:{s:s}}", "code", up_error_code(e), "message",
			message ? message : up_error_message(e), "data", "name",
			up_error_name(e) ? up_error_name(e) : "INTERNAL_ERROR");
	(void)json_object_set_new(r, "error", err);
	return r;
}

json_t *up_jsonrpc_errorf(json_t *id, enum up_error e, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return up_jsonrpc_error(id, e, buf);
}

json_t *up_jsonrpc_request(const char *method, json_t *params_steal, json_int_t id)
{
	json_t *r = json_pack("{s:s, s:s, s:I}", "jsonrpc", "2.0", "method", method, "id", id);

	if (r && params_steal)
		(void)json_object_set(r, "params", params_steal);
	json_decref(params_steal);
	return r;
}

json_t *up_jsonrpc_notification(const char *method, json_t *params_steal)
{
	json_t *r = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

	if (r && params_steal)
		(void)json_object_set(r, "params", params_steal);
	json_decref(params_steal);
	return r;
}

int up_jsonrpc_check_request(json_t *req, const char **method, json_t **params, json_t **id,
			     char *why, size_t why_len)
{
	json_t *v;
	const char *key;

	*method = NULL;
	*params = NULL;
	*id = NULL;
	if (!json_is_object(req))
		return snprintf(why, why_len, "a request must be a JSON object"), -EINVAL;
	v = json_object_get(req, "id");
	if (v && !json_is_string(v) && !json_is_integer(v) && !json_is_null(v))
		return snprintf(why, why_len, "'id' must be a string, an integer or null"), -EINVAL;
	*id = v;
	v = json_object_get(req, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return snprintf(why, why_len, "'jsonrpc' must be \"2.0\""), -EINVAL;
	v = json_object_get(req, "method");
	if (!json_is_string(v))
		return snprintf(why, why_len, "'method' must be a string"), -EINVAL;
	*method = json_string_value(v);
	v = json_object_get(req, "params");
	if (v && !json_is_object(v) && !json_is_array(v))
		return snprintf(why, why_len, "'params' must be an object or an array"), -EINVAL;
	*params = v;
	json_object_foreach (req, key, v) {
		if (strcmp(key, "jsonrpc") && strcmp(key, "method") && strcmp(key, "params") &&
		    strcmp(key, "id"))
			return snprintf(why, why_len, "unknown member '%s' in the request", key),
			       -EINVAL;
	}
	return 0;
}

char *up_json_dump_line(const json_t *v, size_t *len)
{
	char *s = json_dumps(v, JSON_COMPACT);
	size_t n;
	char *line;

	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	if (len)
		*len = n + 1;
	return line;
}

void up_json_wipe(json_t *j)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(j))
		explicit_bzero((char *)json_string_value(j), json_string_length(j));
	else if (json_is_object(j))
		json_object_foreach (j, k, v)
			up_json_wipe(v);
	else if (json_is_array(j))
		json_array_foreach (j, i, v)
			up_json_wipe(v);
}

char *up_json_join(const json_t *array, const char *sep)
{
	size_t len = 1, used = 0, i, seplen = strlen(sep);
	json_t *v;
	char *out;

	json_array_foreach (array, i, v)
		len += json_string_length(v) + seplen;
	out = malloc(len);
	if (!out)
		return NULL;
	out[0] = '\0';
	json_array_foreach (array, i, v) {
		if (!json_is_string(v))
			continue;
		used += (size_t)snprintf(out + used, len - used, "%s%s", used ? sep : "",
					 json_string_value(v));
	}
	return out;
}
