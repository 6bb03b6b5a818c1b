/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * Table-driven validation of JSON-RPC params, in the manner of systemd's
 * sd_json_dispatch: each named member has a type, a parser and an offset into the
 * handler's C struct. Unknown members are refused by name; so are missing mandatory
 * ones and members of the wrong type. Strings are borrowed from the params object,
 * which outlives the handler's synchronous part.
 */
enum up_param_type {
	UP_PARAM_STRING, /* const char * */
	UP_PARAM_INT,	 /* int64_t */
	UP_PARAM_BOOL,	 /* bool */
	UP_PARAM_OBJECT, /* json_t * (borrowed) */
	UP_PARAM_ARRAY,	 /* json_t * (borrowed) */
	UP_PARAM_STRV,	 /* json_t * (borrowed), an array of strings */
	UP_PARAM_ANY,	 /* json_t * (borrowed) */
};

#define UP_PARAM_MANDATORY (1u << 0)
#define UP_PARAM_NULLABLE  (1u << 1)

typedef int (*up_param_check_t)(const char *name, json_t *v, void *field, char *why,
				size_t why_len);

struct up_param {
	const char *name;
	enum up_param_type type;
	size_t offset;
	unsigned flags;
	up_param_check_t check; /* optional, runs after the type check */
};

/*
 * Fills `out` from `params` (an object, or NULL for none). Returns 0, or -EINVAL with
 * a sentence naming the member in `why`.
 */
int up_params_dispatch(const struct up_param *table, json_t *params, void *out, char *why,
		       size_t why_len) _wur_;

const char *up_json_type_name(const json_t *v);
