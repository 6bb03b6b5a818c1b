/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Secret Service backend. Items are found by the attributes `service` and
 * `username` with SECRET_SCHEMA_DONT_MATCH_NAME, so the entries Python's keyring and
 * secret-tool write are found too. A plain lookup cannot tell "missing" from
 * "locked" (both give NULL without an error), so this searches without unlocking
 * and looks at what it found.
 */
#include <errno.h>
#include <libsecret/secret.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "secret-store.h"

static const SecretSchema schema = {
	"io.uplink.Token",
	SECRET_SCHEMA_DONT_MATCH_NAME,
	{{"service", SECRET_SCHEMA_ATTRIBUTE_STRING},
	 {"username", SECRET_SCHEMA_ATTRIBUTE_STRING},
	 {NULL, 0}},
	0,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
	NULL,
};

static int from_gerror(GError *e, const char *what, char *why, size_t why_len)
{
	(void)snprintf(why, why_len, "%s: %s", what, e ? e->message : "unknown error");
	if (e)
		g_error_free(e);
	return -EIO;
}

/* Any locked collection: then a missing item may only be hidden. */
static bool any_locked(SecretService *svc)
{
	GList *cols = secret_service_get_collections(svc);
	bool locked = false;

	for (GList *l = cols; l; l = l->next)
		locked = locked || secret_collection_get_locked(l->data);
	g_list_free_full(cols, g_object_unref);
	return locked;
}

static int item_value(GList *items, char **value)
{
	for (GList *l = items; l; l = l->next) {
		SecretValue *v;
		const gchar *text;

		if (secret_item_get_locked(l->data))
			continue;
		v = secret_item_get_secret(l->data);
		text = v ? secret_value_get_text(v) : NULL;
		if (text) {
			*value = strdup(text);
			secret_value_unref(v);
			return *value ? 0 : -ENOMEM;
		}
		if (v)
			secret_value_unref(v);
	}
	return -ENOENT;
}

static int lookup(const char *service, const char *user, char **value, char *why, size_t why_len)
{
	SecretService *svc;
	GHashTable *attrs;
	GError *e = NULL;
	GList *items;
	int r;

	/* A fresh proxy each time: the shared one caches items, their secrets and their
	 * Locked state, and this thread never runs the main context that would update them. */
	svc = secret_service_open_sync(SECRET_TYPE_SERVICE, NULL, SECRET_SERVICE_LOAD_COLLECTIONS,
				       NULL, &e);
	if (!svc)
		return from_gerror(e, "cannot reach the Secret Service on the session bus", why,
				   why_len);
	attrs = secret_attributes_build(&schema, "service", service, "username", user, NULL);
	items = secret_service_search_sync(
		svc, &schema, attrs, SECRET_SEARCH_ALL | SECRET_SEARCH_LOAD_SECRETS, NULL, &e);
	g_hash_table_unref(attrs);
	if (e) {
		g_object_unref(svc);
		return from_gerror(e, "searching the keyring failed", why, why_len);
	}
	r = item_value(items, value);
	if (r == -ENOENT && (items || any_locked(svc)))
		r = -EACCES;
	g_list_free_full(items, g_object_unref);
	g_object_unref(svc);
	return r;
}

const struct up_secret_store_impl up_secret_store_libsecret = {
	.name = "libsecret",
	.lookup = lookup,
};
