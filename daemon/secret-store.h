/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "util.h"

/*
 * Where {{keyring:SERVICE:USER}} values come from. A backend is a const vtable;
 * `lookup` blocks, so callers run it on a worker thread, never on the loop.
 *
 * lookup returns 0 with *value (malloc'd, a secret: never log it), -ENOENT when
 * there is no such entry, -EACCES when the entry (or every collection) is locked,
 * or another -errno with a reason in why (never containing a secret).
 */
struct up_secret_store_impl {
	const char *name;
	int (*lookup)(const char *service, const char *user, char **value, char *why,
		      size_t why_len);
};

/* Secret Service (gnome-keyring, KeePassXC) through libsecret; attributes service and username. */
extern const struct up_secret_store_impl up_secret_store_libsecret;
/*
 * A JSON file for tests, named by $UPLINK_SECRET_FILE:
 * {"locked": false, "entries": [{"service": "s", "username": "u", "value": "v"}]}.
 */
extern const struct up_secret_store_impl up_secret_store_file;

/* $UPLINK_SECRET_STORE ("libsecret", the default, or "file"); NULL for an unknown name. */
const struct up_secret_store_impl *up_secret_store_pick(void);
#define UP_SECRET_STORE_ENV "UPLINK_SECRET_STORE"
#define UP_SECRET_FILE_ENV  "UPLINK_SECRET_FILE"
