/* SPDX-License-Identifier: Apache-2.0 */
/* Backend selection and the file backend for tests. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secret-store.h"
#include "knobs.h"

static int file_lookup(const char *service, const char *user, char **value, char *why,
		       size_t why_len)
{
	const char *path = up_knobs()->secret_file;
	json_error_t err;
	json_t *doc, *e;
	size_t i;
	int r = -ENOENT;

	if (!path) {
		(void)snprintf(why, why_len, "the file secret store needs $%s", UP_SECRET_FILE_ENV);
		return -EINVAL;
	}
	doc = json_load_file(path, 0, &err);
	if (!doc) {
		(void)snprintf(why, why_len, "cannot read %s: %s", path, err.text);
		return -EIO;
	}
	json_array_foreach (json_object_get(doc, "entries"), i, e) {
		const char *s = json_string_value(json_object_get(e, "service"));
		const char *u = json_string_value(json_object_get(e, "username"));
		const char *v = json_string_value(json_object_get(e, "value"));
		if (!s || !u || !v || !streq(s, service) || !streq(u, user))
			continue;
		if (json_is_true(json_object_get(doc, "locked"))) {
			r = -EACCES;
			break;
		}
		*value = strdup(v);
		r = *value ? 0 : -ENOMEM;
		break;
	}
	json_decref(doc);
	return r;
}

const struct up_secret_store_impl up_secret_store_file = {
	.name = "file",
	.lookup = file_lookup,
};

const struct up_secret_store_impl *up_secret_store_pick(void)
{
	static const struct up_secret_store_impl *const impls[] = {
		&up_secret_store_libsecret,
		&up_secret_store_file,
	};
	const char *want = up_knobs()->secret_store;

	if (!want || !*want)
		return impls[0];
	for (size_t i = 0; i < ELEMENTSOF(impls); i++)
		if (streq(want, impls[i]->name))
			return impls[i];
	return NULL;
}
