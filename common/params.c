/* SPDX-License-Identifier: Apache-2.0 */
#include "params.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {
	[UP_PARAM_STRING] = "a string", [UP_PARAM_INT] = "an integer",
	[UP_PARAM_BOOL] = "a boolean",	[UP_PARAM_OBJECT] = "an object",
	[UP_PARAM_ARRAY] = "an array",	[UP_PARAM_STRV] = "an array of strings",
	[UP_PARAM_ANY] = "any value",
};

const char *up_json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number with a fraction";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "an unknown value";
}

static const struct up_param *find(const struct up_param *table, const char *name)
{
	for (const struct up_param *p = table; p->name; p++)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

static bool type_ok(enum up_param_type t, json_t *v)
{
	size_t i;
	json_t *e;

	switch (t) {
	case UP_PARAM_STRING: return json_is_string(v);
	case UP_PARAM_INT: return json_is_integer(v);
	case UP_PARAM_BOOL: return json_is_boolean(v);
	case UP_PARAM_OBJECT: return json_is_object(v);
	case UP_PARAM_ARRAY: return json_is_array(v);
	case UP_PARAM_ANY: return true;
	case UP_PARAM_STRV:
		if (!json_is_array(v))
			return false;
		json_array_foreach (v, i, e)
			if (!json_is_string(e))
				return false;
		return true;
	}
	return false;
}

static void store(const struct up_param *p, json_t *v, void *out)
{
	char *field = (char *)out + p->offset;

	switch (p->type) {
	case UP_PARAM_STRING:
		*(const char **)(void *)field = json_is_null(v) ? NULL : json_string_value(v);
		break;
	case UP_PARAM_INT: *(int64_t *)(void *)field = json_integer_value(v); break;
	case UP_PARAM_BOOL: *(bool *)(void *)field = json_is_true(v); break;
	case UP_PARAM_OBJECT:
	case UP_PARAM_ARRAY:
	case UP_PARAM_STRV:
	case UP_PARAM_ANY: *(json_t **)(void *)field = json_is_null(v) ? NULL : v; break;
	}
}

int up_params_dispatch(const struct up_param *table, json_t *params, void *out, char *why,
		       size_t why_len)
{
	const char *key;
	json_t *v;

	if (params && json_is_array(params)) {
		if (json_array_size(params) == 0)
			params = NULL;
		else
			return snprintf(
				       why, why_len,
				       "params must be an object with named members, not an array"),
			       -EINVAL;
	}
	if (params && !json_is_object(params))
		return snprintf(why, why_len, "params must be an object"), -EINVAL;

	json_object_foreach (params, key, v) {
		const struct up_param *p = find(table, key);
		int r;

		if (!p)
			return snprintf(why, why_len, "unknown parameter '%s'", key), -EINVAL;
		if (json_is_null(v) && (p->flags & UP_PARAM_NULLABLE)) {
			store(p, v, out);
			continue;
		}
		if (!type_ok(p->type, v))
			return snprintf(why, why_len, "parameter '%s' must be %s, not %s", key,
					type_names[p->type], up_json_type_name(v)),
			       -EINVAL;
		store(p, v, out);
		if (p->check) {
			r = p->check(key, v, (char *)out + p->offset, why, why_len);
			if (r < 0)
				return r;
		}
	}
	for (const struct up_param *p = table; p->name; p++)
		if ((p->flags & UP_PARAM_MANDATORY) && !json_object_get(params, p->name))
			return snprintf(why, why_len, "missing parameter '%s'", p->name), -EINVAL;
	return 0;
}
