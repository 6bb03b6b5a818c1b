/* SPDX-License-Identifier: Apache-2.0 */
#include "errors.h"

#include <stddef.h>
#include <string.h>

static const struct {
	const char *name;
	int code;
	const char *message;
} table[] = {
#define XX(n, c, m) [UP_ERR_##n] = {#n, c, m},
	UP_ERRORS(XX)
#undef XX
};

static int valid(enum up_error e)
{
	return e >= 0 && e < _UP_ERR_MAX;
}

int up_error_code(enum up_error e)
{
	return valid(e) ? table[e].code : table[UP_ERR_INTERNAL_ERROR].code;
}

const char *up_error_name(enum up_error e)
{
	return valid(e) ? table[e].name : NULL;
}

const char *up_error_message(enum up_error e)
{
	return valid(e) ? table[e].message : NULL;
}

enum up_error up_error_from_name(const char *name)
{
	if (!name)
		return _UP_ERR_INVALID;
	for (size_t i = 0; i < _UP_ERR_MAX; i++)
		if (strcmp(table[i].name, name) == 0)
			return (enum up_error)i;
	return _UP_ERR_INVALID;
}

enum up_error up_error_from_code(int code)
{
	for (size_t i = 0; i < _UP_ERR_MAX; i++)
		if (table[i].code == code)
			return (enum up_error)i;
	return _UP_ERR_INVALID;
}
